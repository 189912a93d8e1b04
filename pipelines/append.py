"""`--append`'s checks and choices before the pipeline (see beam_tfrecord.output.append): the
output must hold a finished dataset with its file index, made with the same record-shaping
options; only the files the index does not hold are planned, into the append's work folder (a
detection dataset's annotations are read against the whole listing: plan.annotations.growing)."""

from __future__ import annotations

import contextlib
import dataclasses
import logging
from collections.abc import Sequence
from dataclasses import dataclass

from beam_tfrecord import names
from beam_tfrecord.labels import kinds as label_kinds
from beam_tfrecord.output import append as append_lib
from beam_tfrecord.output import grown_files, outputs
from beam_tfrecord.output.file_index import IndexEntry, load_index
from beam_tfrecord.output.mode import OutputKind, OutputMode
from beam_tfrecord.plan import bands, pages
from beam_tfrecord.plan.labels import Unlabeled
from beam_tfrecord.plan.listing import InputFile, list_inputs
from beam_tfrecord.plan.planner import KnownRecords
from beam_tfrecord.summary import HistoryEntry, OptionsSummary, Summary, read_summary
from pipelines.options import CommandSettings, UsageError

__all__ = ["AppendFailed", "AppendJob", "finish_append", "prepare_append"]

_LOGGER = logging.getLogger(__name__)


class AppendFailed(Exception):
    """The merge could not finish: its one line for the command (exit status 1)."""


@dataclass(frozen=True)
class AppendJob:
    """What an append found: the dataset as it stands, what the listing holds against its index,
    and, when the work folder already holds the finished conversion of the new files (a killed
    merge), that run's summary."""

    output: str
    old: Summary
    delta: append_lib.ListingDelta
    known: KnownRecords
    done: Summary | None = None
    merging: bool = False  # a merge was under way (its marker is there): finish it, convert nothing
    index: Sequence[IndexEntry] | None = None  # the dataset's file index, loaded once for the merge

    @property
    def work(self) -> str:
        return append_lib.work_dir(self.output)

    def mode(self, flags: OutputMode) -> OutputMode:
        """The run's output mode once the dataset is read: a merge where the new files are
        converted already (or a merge was under way), else an append planned against the dataset;
        the dry run and resume flags as given."""
        kind = OutputKind.MERGE if self.done is not None or self.merging else OutputKind.APPEND
        return OutputMode(kind, dry_run=flags.dry_run, resume=flags.resume, known=self.known)


def _finished_work(output: str, merging: bool) -> Summary | None:
    """The work folder's finished run: whole (no merge began), or as the merge left it."""
    work = append_lib.work_dir(output)
    try:
        return read_summary(work) if merging else outputs.complete_summary(work)
    except Exception:
        return None


def prepare_append(settings: CommandSettings) -> AppendJob:
    """Check that `settings` may grow the dataset in --output; UsageError in one line if not."""
    source, config = settings.source, settings.config
    output = config.output
    try:
        old = outputs.complete_summary(output)
    except outputs.IncompleteOutput as error:
        raise UsageError(f"--append needs a finished dataset in --output: {error}") from None
    if old.stratified or source.stratify:
        raise UsageError(
            "--append cannot keep stratified splits (each file's split depends on all): use hash splits"
        )
    first = old.options
    differences = append_lib.option_differences(first, OptionsSummary.of(source, config))
    if differences:
        raise UsageError(
            "--append refused: options that shape a record differ from the dataset's first run: "
            + "; ".join(differences)
        )
    index = load_index(output)
    if index is None:
        raise UsageError(
            f"--append: {output} has no {names.INDEX_FILE} (made before --append): convert it again"
        )
    if len(index) < old.inputs_listed:  # an index cut short would have old files converted again
        raise UsageError(
            f"--append: {output}'s {names.INDEX_FILE} lists {len(index)} of the dataset's "
            f"{old.inputs_listed} files: convert it again"
        )
    pages.refuse_annotations(config.image.pages, source)
    listing = bands.grouped(list_inputs(source.input), source.bands)  # as the index lists them
    listing = pages.expanded(listing, config.image.pages == "each")  # (a page, an entry: --pages)
    # Against this input's entries alone: another folder's IMG_0001.jpg is another picture.
    number = append_lib.input_number(old, index, source.input)
    delta = append_lib.compare_listing(listing, index, number, append_lib.run_inputs(old))
    manifest = settings.label_source.manifest
    if manifest is not None:  # rows of old files are matched, not stray
        for entry in index:
            with contextlib.suppress(Unlabeled):
                manifest.row_of(entry.relpath)
    hashes = {e.sha256: e.relpath for e in sorted(index, key=lambda e: e.relpath, reverse=True) if e.sha256}
    class_names = tuple(old.class_names) if old.class_names is not None else None
    if source.annotations is not None:  # its annotations are read against every picture, old too
        indexed = frozenset(e.relpath for e in index)
        reported = grown_files.reported_unmatched(output)
        converted = _converted_annotations(index, listing, number)
        known = KnownRecords(class_names, hashes, listing, indexed, reported, old.split_method, converted)
    else:
        known = KnownRecords(class_names, hashes, split_method=old.split_method)
    merging = outputs.append_marker(output) is not None
    job = AppendJob(output, old, delta, known, _finished_work(output, merging), merging, index)
    _check_same_input(job, source.input)
    if job.done is None and not merging and not delta.new:
        raise UsageError(
            f"--append: {source.input} holds no file the dataset lacks ({delta.converted} converted, "
            f"{len(delta.changed)} changed and {len(delta.gone)} gone since: "
            "a full run with --overwrite rebuilds)"
        )
    return job


def _converted_annotations(
    index: Sequence[IndexEntry], listing: Sequence[InputFile], number: int | None
) -> dict[str, tuple[str, str | None]] | None:
    """relpath -> (the digest of the objects its record was made from, its split), for each listed
    picture of this input the dataset holds a record of (IndexEntry.objects_digest): the append
    lists those whose annotations now differ. Entries written before the index kept digests are
    not compared (the log says so once); None where no entry has one."""
    listed = {f.relpath for f in listing}
    mine = [e for e in index if e.sha256 is not None and e.relpath in listed and number in (None, e.input)]
    converted = {e.relpath: (e.objects_digest, e.split) for e in mine if e.objects_digest is not None}
    older = len(mine) - len(converted)
    if older:
        _LOGGER.info(
            "%d of the dataset's records were indexed before it kept their annotations' digest: whether "
            "their annotations changed since is not checked (a full run with --overwrite records it)",
            older,
        )
    return converted or None


def _check_same_input(job: AppendJob, input_spec: str) -> None:
    """A converted append waiting for its merge is finished only by the run of its own input
    (found in review): another --input's run merged it under that input, so the history, the
    index entries' input numbers and changed_since_converted.jsonl named the wrong folder, and the
    later append from the folder it came from called its files gone."""
    run = job.done.run if job.done is not None else None
    if run is None or not run.input or append_lib.same_input(run.input, input_spec):
        return
    raise UsageError(
        f"--append: {job.output} holds the converted files of an append from {run.input}, not yet "
        f"merged: run the same command with --input {run.input} to finish it first"
    )


def finish_append(job: AppendJob, input_spec: str) -> Summary:
    """Merge the work folder's finished run into the dataset (output.append.merge); AppendFailed
    in one line where a step fails (what failed, what the dataset holds, that a rerun ends it)."""
    try:
        return _finish_append(job, input_spec)
    except append_lib.MergeFailed as failed:
        raise AppendFailed(_failed_line(job.output, failed)) from failed


def _failed_line(output: str, failed: append_lib.MergeFailed) -> str:
    if failed.grown:
        state = (
            f"The grown dataset in {output} is whole (its summary.json names every record), "
            "but the old names of its renumbered shards are still there"
        )
    else:
        state = (
            f"The dataset in {output} is still whole as it was (summary.json unchanged; readers see "
            "only the old records), and the new files' conversion is kept"
        )
    reason = failed.reason.rstrip(". ")
    return (
        f"--append could not finish: {failed.what}: {reason}. {state}; fix that, then run the same "
        "command with --append again to finish it"
    )


def _finish_append(job: AppendJob, input_spec: str) -> Summary:
    if job.done is None and job.merging:  # merged, and the work folder already removed
        append_lib.finish(job.output)
        return job.old
    new = job.done if job.done is not None else read_summary(job.work)
    started = new.run.started_at if new.run is not None else None
    history = job.old.history
    last_started = history[-1].get("started_at") if history else None
    if started is not None and last_started == started:  # merged; killed while cleaning
        append_lib.finish(job.output)
        return job.old
    old_names = set(job.old.class_names or ())
    # A detection dataset's old pictures whose annotations changed (their lines staged in the
    # work folder with the append's plan: output.append.stage_annotation_changes), where its
    # kinds of label keep a digest of them.
    digested = any(kind.digested for kind in label_kinds(job.old.kinds))
    annotation_lines = append_lib.annotation_changes(job.work) if digested else []
    entry: HistoryEntry = {
        "date": None,
        "input": input_spec,
        "inputs": new.inputs,
        "records": new.records,
        "rejects": new.rejects,
        "new_classes": [c for c in new.class_names or () if c not in old_names],
        "changed_since_converted": len(job.delta.changed),
        "gone": len(job.delta.gone),
        "started_at": started,
    }
    if digested:
        entry[append_lib.ANNOTATIONS_CHANGED] = len(annotation_lines)
    if started is not None:
        import time

        entry["date"] = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(started))
    if new.run is not None:
        new = dataclasses.replace(new, run=dataclasses.replace(new.run, output=job.output))
    return append_lib.merge(
        job.output, job.old, new, [*job.delta.lines(), *annotation_lines], entry, job.index
    )
