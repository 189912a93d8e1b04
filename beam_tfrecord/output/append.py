"""`--append`: grow a finished dataset with the files it does not hold yet, never reading or
rewriting an old shard or an old picture.

The append converts only the new files, as a run of their own into a work folder under the output
(names.APPEND_DIR: the ordinary pipeline, so resume, dedupe and every check hold), planned with the
dataset's label ids and record hashes (plan.planner.KnownRecords). Then `merge` puts them beside
the old shards:

- every split that grew is renumbered so TFDS's `{split}-{index:05d}-of-{count:05d}` template
  holds one count per split: an old shard gets its new name by a hard link (local: no byte
  copied; a copy where the filesystem refuses links) or a server-side copy (gs://, a hundred to a
  batch request), a new one is moved out of the work folder;
- the side files, the file index and TFDS's dataset_info.json count old plus new (a detection
  dataset's kinds of label's side files too: output.grown_files);
- summary.json is replaced last, with a `history` of the runs; then the old names are removed.

While it merges, a marker (names.APPEND_MARKER) names the files not in summary.json yet, so every
reader keeps reading the old dataset whole (output.outputs.complete_summary); a merge killed
anywhere is finished by the next `--append` (`merge` is idempotent), and a step that fails is a
MergeFailed that says whether the old dataset is still whole.
"""

from __future__ import annotations

import dataclasses
import json
import logging
import os
import posixpath
from collections import defaultdict
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Final

from apache_beam.io.filesystems import FileSystems

from beam_tfrecord import fault_injection, names, storage
from beam_tfrecord.config_base import unrecorded_defaults, unshaping_keys
from beam_tfrecord.edges import JsonObject
from beam_tfrecord.elements import PAGE_MARK, DuplicateGroup
from beam_tfrecord.labels import kinds as label_kinds
from beam_tfrecord.names import ShardFormat
from beam_tfrecord.output import grown_files
from beam_tfrecord.output.file_index import IndexEntry, load_index, write_index
from beam_tfrecord.output.grown_summary import merged_summary
from beam_tfrecord.output.outputs import append_marker, existing_outputs
from beam_tfrecord.plan.listing import InputFile, split_input_spec
from beam_tfrecord.plan.source_config import SourceConfig
from beam_tfrecord.summary import HistoryEntry, OptionsSummary, Summary, read_summary
from beam_tfrecord.write.output_config import ConvertConfig
from beam_tfrecord.write.side_files import write_text
from beam_tfrecord.write.summary import recorded_again
from beam_tfrecord.write.tfds_metadata import write_tfds_metadata
from beam_tfrecord.write_failures import WriteFailed, writing

__all__ = [
    "ANNOTATIONS_CHANGED",
    "UNCHECKED_OPTIONS",
    "ListingDelta",
    "MergeFailed",
    "annotation_changes",
    "compare_listing",
    "input_number",
    "merge",
    "option_differences",
    "renumber",
    "run_inputs",
    "same_input",
    "stage_annotation_changes",
    "work_dir",
]

_LOGGER = logging.getLogger(__name__)

# Options that may differ from the first run's: those declared not to shape the records
# (`config_base.Setting.shapes_records`: where files come from and go, how shards are cut and
# read, dedupe, whether a poor annotation match may go on). A detection append checks at plan time
# what those may change: each old class id keeps its class, and splits the dataset declared stay
# declared (`declared_splits` is compared there, as the split the plan makes, not as the option).
UNCHECKED_OPTIONS = unshaping_keys(SourceConfig, ConvertConfig)
# What a record without one of these keys held (`--bit_depth full`, ...).
_UNRECORDED = unrecorded_defaults(SourceConfig, ConvertConfig)


# changed_since_converted.jsonl's change kind for an old picture whose annotations changed since
# its record was made (beside `changed` and `gone`, which its size, mtime or absence tell), and
# the history's key of how many an append found (`HistoryEntry`, which mypy holds it to).
ANNOTATIONS_CHANGED: Final = "annotations_changed"


def work_dir(output: str) -> str:
    """Where an append converts its new files, under the output."""
    return FileSystems.join(output, names.APPEND_DIR)


def option_differences(first: OptionsSummary, now: OptionsSummary) -> list[str]:
    """One phrase per option that shapes a record (or a split) and differs from the dataset's
    first run's, e.g. `--resize is 64x64, the dataset's is None`. The dataset's as this version
    records them: an earlier version's record takes the defaults of what it lacks."""
    old, new = recorded_again(first).to_json(), now.to_json()
    found = []
    for key in sorted(set(old) | set(new)):
        was, now_is = old.get(key, _UNRECORDED.get(key)), new.get(key, _UNRECORDED.get(key))
        if key not in UNCHECKED_OPTIONS and was != now_is:
            found.append(f"--{key} is {now_is!r}, the dataset's {was!r}")
    return found


@dataclass(frozen=True)
class ListingDelta:
    """The listing against the file index: files to convert, and converted ones since changed
    (size or modification time) or gone, which an append never converts again."""

    new: list[InputFile]
    changed: list[tuple[IndexEntry, InputFile]]
    gone: list[IndexEntry]
    converted: int  # listed files the index holds, unchanged

    def lines(self) -> list[str]:
        """changed_since_converted.jsonl's lines: what changed, then what is gone, by path."""
        out = [
            json.dumps(
                {
                    "path": old.relpath,
                    "change": "changed",
                    "size": [old.size, now.size],
                    "mtime": [old.mtime, now.mtime],
                    "split": old.split,
                },
                ensure_ascii=False,
            )
            for old, now in self.changed
        ]
        out += [
            json.dumps({"path": old.relpath, "change": "gone", "split": old.split}, ensure_ascii=False)
            for old in self.gone
        ]
        return out


def stage_annotation_changes(work: str, changed: Iterable[tuple[str, str | None]]) -> None:
    """A detection append's old pictures whose annotations changed (plan.annotations.growing
    .changed_annotations: (relpath, split)), as changed_since_converted.jsonl's lines in the work
    folder, written with its plan: a merge finished by a later `--append` (a kill) plans nothing
    again and still lists them."""
    lines = [
        json.dumps({"path": path, "change": ANNOTATIONS_CHANGED, "split": split}, ensure_ascii=False)
        for path, split in changed
    ]
    write_text(FileSystems.join(work, names.CHANGED_SINCE_FILE), "".join(f"{line}\n" for line in lines))


def annotation_changes(work: str) -> list[str]:
    """The lines `stage_annotation_changes` wrote in the work folder (none: not compared)."""
    return storage.lines(FileSystems.join(work, names.CHANGED_SINCE_FILE))


def run_inputs(old: Summary) -> list[str | None]:
    """The input each run that made the dataset listed, in its history's order."""
    first = old.options.value("input")
    if not old.history:
        return [old.run.input if old.run is not None and old.run.input else first]
    return [h.get("input") or (first if i == 0 else None) for i, h in enumerate(old.history)]


def input_number(old: Summary, index: Iterable[IndexEntry], input_spec: str | None) -> int | None:
    """Which of the dataset's inputs `input_spec` is, as its index entries say it
    (IndexEntry.input): the position in the history of the first run that listed it, or the
    position this run takes there when none did (0: the first run's input).

    None for an index written before its entries named their input, by runs of more than one
    input: its entries cannot be told apart by input, so a listing is compared with all of them
    by path (a same-named file of another input is taken for a changed one, as it was then)."""
    inputs = [_same_spelling(i) for i in run_inputs(old)]
    if len(set(inputs)) > 1 and not any(e.input for e in index):
        return None
    spec = _same_spelling(input_spec)
    return inputs.index(spec) if spec in inputs else len(inputs)


def _same_spelling(input_spec: str | None) -> str | None:
    """`gs://b/in/` and `gs://b/in` are one input (a local one is already absolute and clean)."""
    return input_spec.rstrip("/") or input_spec if input_spec else input_spec


def same_input(a: str | None, b: str | None) -> bool:
    """Whether two runs' `--input`s name one input (see `_same_spelling`)."""
    return _same_spelling(a) == _same_spelling(b)


def compare_listing(
    listing: Sequence[InputFile],
    index: Sequence[IndexEntry],
    number: int | None,
    inputs: Sequence[str | None] = (),
) -> ListingDelta:
    """Which listed files are new, by relpath, size and mtime alone (no byte read), against the
    index entries of the same input (`number`, see `input_number`): a file of another folder
    whose path an entry holds is another picture, so it is new (`--dedupe` still finds it if it
    has the same bytes), unless it is that entry's file: its size and mtime are the entry's and
    it lies at the same relative path (the same file reached by another path: a symlink, a copy
    that kept its times) or at the same place (`inputs`, the dataset's inputs by number: a
    folder inside an earlier input, or one holding it), which is never converted twice.
    `gone`: the input's entries it no longer lists. `number` None: every entry, and nothing
    called gone (an index that does not say which input holds what)."""
    mine = index if number is None else [entry for entry in index if entry.input == number]
    known = {entry.relpath: entry for entry in mine}
    elsewhere = (
        set() if number is None else {(e.relpath, e.size, e.mtime) for e in index if e.input != number}
    )
    bases = {b for i, spec in enumerate(inputs) if i != number and (b := _base(spec)) is not None}

    def held_elsewhere(file: InputFile) -> bool:
        if (file.relpath, file.size, file.mtime) in elsewhere:
            return True
        return any(
            (file.path[len(base) :], file.size, file.mtime) in elsewhere
            for base in bases
            if file.path.startswith(base)
        )

    new, changed = [], []
    converted = 0
    for file in listing:
        entry = known.get(file.relpath)
        if entry is None and elsewhere and held_elsewhere(file):
            converted += 1
        elif entry is None:
            new.append(file)
        elif entry.size != file.size or entry.mtime != file.mtime:
            changed.append((entry, file))
        else:
            converted += 1
    gone: list[IndexEntry] = []
    if number is not None:
        listed = {f.relpath for f in listing}
        gone = [entry for entry in mine if entry.relpath not in listed]
    if any(file.page is not None for file in listing):  # --pages each: a page, an input
        return _changed_stacks(ListingDelta(new, changed, gone, converted), listing)
    return ListingDelta(new, changed, gone, converted)


def _changed_stacks(delta: ListingDelta, listing: Sequence[InputFile]) -> ListingDelta:
    """A file whose pages are inputs (`--pages each`) and that changed since converted is never
    converted again, whichever of its pages are new: one that gained pages (the new ones are not
    converted), or whose pages are named anew (more pages, more digits; one page now, or several)
    (its old entries are not listed, and are changed, not gone)."""
    files: dict[str, InputFile] = {}
    for file in listing:
        files.setdefault(file.file_relpath, file)
    renamed = [(entry, found) for entry in delta.gone if (found := _listed_file(entry.relpath, files))]
    touched = {file.file_relpath for _, file in delta.changed} | {file.file_relpath for _, file in renamed}
    if not touched:
        return delta
    return ListingDelta(
        [file for file in delta.new if file.file_relpath not in touched],
        [*delta.changed, *renamed],
        [entry for entry in delta.gone if _listed_file(entry.relpath, files) is None],
        delta.converted,
    )


def _listed_file(relpath: str, files: Mapping[str, InputFile]) -> InputFile | None:
    """The listed file an index entry that is not listed was a page of (`stack.tif#3`), or was
    when it had one page (`stack.tif`, now of several): its first input."""
    if relpath in files:
        return files[relpath]
    head, mark, index = relpath.rpartition(PAGE_MARK)
    return files.get(head) if mark and index.isdigit() else None


def _base(input_spec: str | None) -> str | None:
    """What the listing of `input_spec` puts before each relpath (plan.listing)."""
    return split_input_spec(input_spec)[0].rstrip("/") + "/" if input_spec else None


def _write_marker(output: str, data: JsonObject) -> None:
    """The merge's marker, never half written (readers and the rerun read it): on local disk
    written in the work folder and renamed over the old one (os.replace); a gs:// object is
    whole or absent by itself."""
    path = FileSystems.join(output, names.APPEND_MARKER)
    temp = FileSystems.join(work_dir(output), names.APPEND_MARKER + ".tmp")
    with writing(path):
        storage.write_atomic(path, json.dumps(data, ensure_ascii=False), temp=temp)


def _shard_lengths(folder: str, summary: Summary) -> dict[str, int]:
    """Records per shard file name, from TFDS's dataset_info.json (no shard read)."""
    text = storage.read_text_or_none(FileSystems.join(folder, names.TFDS_INFO_FILE))
    if not text:
        return {}
    lengths = {}
    for split in json.loads(text).get("splits", []):
        files = sorted(summary.splits[split["name"]].files) if split["name"] in summary.splits else []
        for name, length in zip(files, split.get("shardLengths", []), strict=False):
            lengths[name] = int(length)
    return lengths


def _renames(old: Summary, new: Summary, shard_format: ShardFormat) -> tuple[dict[str, str], dict[str, str]]:
    """(old name -> its name in the grown dataset, new name in the work folder -> its name)."""
    keep, move = {}, {}
    for split, added in new.splits.items():
        if not added.files:
            continue
        before = sorted(old.splits[split].files) if split in old.splits else []
        count = len(before) + len(added.files)
        for i, name in enumerate(before):
            keep[name] = names.shard_name(split, i, count, shard_format)
        for j, name in enumerate(sorted(added.files)):
            move[name] = names.shard_name(split, len(before) + j, count, shard_format)
    return keep, move


class MergeFailed(Exception):
    """A step of the merge failed (`what`, `reason`). `grown`: summary.json names the grown
    dataset already (only the old names were left to remove); otherwise the old dataset is whole
    as it was. Either way `merge` called again (the next `--append`) finishes it."""

    def __init__(self, what: str, reason: str, grown: bool = False) -> None:
        super().__init__(f"{what}: {reason}")
        self.what, self.reason, self.grown = what, reason, grown


def _why(error: BaseException) -> str:
    """What went wrong, in the filesystem's words (Beam's BeamIOError holds them per file)."""
    details = getattr(error, "exception_details", None)
    if isinstance(details, dict) and details:
        error = next(iter(details.values()))
    if isinstance(error, WriteFailed):
        return error.reason
    if isinstance(error, OSError) and error.strerror:
        return error.strerror
    return f"{type(error).__name__}: {error}"


class _Linker:
    """Gives an old shard its new name without reading it where it can: a hard link on local disk
    (no byte copied), a server-side copy on GCS (one Objects: copy request, no byte downloaded;
    docs/append.md gives its cost). Where a hard link fails (a filesystem without them, a file the
    user may not link: Linux's protected_hardlinks, an immutable file) the shard is copied
    instead, to a temporary name in the work folder then renamed into place, so a merge killed
    mid-copy leaves no partial shard under a final name; the log says so once."""

    def __init__(self, work: str) -> None:
        self.work = work
        self.copied = 0

    def __call__(self, source: str, target: str) -> None:
        try:
            if storage.is_remote(source):
                FileSystems.copy([source], [target])
            else:
                self._local(source, target)
        except OSError as error:
            how = "by a server-side copy" if storage.is_remote(source) else "by a hard link, nor by a copy"
            raise MergeFailed(
                f"could not give {posixpath.basename(source)} its new name "
                f"{posixpath.basename(target)} ({how})",
                _why(error),
            ) from error

    def _local(self, source: str, target: str) -> None:
        try:
            os.link(source, target)
            return
        except OSError as error:
            if not self.copied:
                _LOGGER.warning(
                    "could not hard-link the old shards to their new names in %s (%s): copying them "
                    "instead (each old shard of a split that grows is read and written once)",
                    os.path.dirname(target),
                    error.strerror or error,
                )
        import shutil

        temp = os.path.join(self.work, posixpath.basename(target) + ".copying")
        shutil.copyfile(source, temp)
        os.replace(temp, target)
        self.copied += 1


def _move(source: str, target: str) -> None:
    if FileSystems.exists(source) and not FileSystems.exists(target):
        FileSystems.rename([source], [target])


def _duplicates(entries: Iterable[IndexEntry]) -> list[DuplicateGroup]:
    by_hash: dict[str, list[tuple[str, str]]] = defaultdict(list)
    for e in entries:
        if e.sha256 is not None and e.split is not None:
            by_hash[e.sha256].append((e.relpath, e.split))
    return sorted(DuplicateGroup(h, tuple(sorted(c))) for h, c in by_hash.items() if len(c) > 1)


def renumber(output: str, keep: Mapping[str, str]) -> int:
    """Each old shard of a split that grows, and its `.idx`, under its new name beside the old
    one (`keep`: old name -> new name); the number of names given. One listing of the output
    says which are there already (a merge run again skips them), not a request per name; on
    gs:// the copies go a hundred to a request (see `_copy_in_gcs`)."""
    (found,) = FileSystems.match([FileSystems.join(output, "*")])
    present = {posixpath.basename(m.path) for m in found.metadata_list}
    pairs = [
        (FileSystems.join(output, source), FileSystems.join(output, new_name))
        for name, target in keep.items()
        for source, new_name in ((name, target), (names.index_path(name), names.index_path(target)))
        if source != new_name and source in present and new_name not in present
    ]
    if storage.is_remote(output):
        _copy_in_gcs(pairs)
    else:
        link = _Linker(work_dir(output))
        for source, target in pairs:
            link(source, target)
    return len(pairs)


def _copy_in_gcs(pairs: Sequence[tuple[str, str]]) -> None:
    """Server-side copies on gs://, up to a hundred in one batch request of GCS's JSON API
    (Beam's GcsIO.copy_batch, retried as its calls are), not one or two requests per copy as
    FileSystems.copy sends them (docs/append.md has the counts)."""
    from beam_tfrecord import gcs

    if not pairs:
        return
    try:
        done = gcs.thread_client().copy_batch(list(pairs))
    except Exception as error:  # the batch request itself refused (google.api_core's errors)
        done = [(pairs[0][0], pairs[0][1], f"{type(error).__name__}: {error}")]
    for source, target, code in done:
        if code is not None:
            raise MergeFailed(
                f"could not give {posixpath.basename(source)} its new name {posixpath.basename(target)} "
                "(by a server-side copy)",
                f"Cloud Storage answered HTTP {code}" if isinstance(code, int) else str(code),
            )


# Side files whose lines the grown dataset holds for every run: the old dataset's, then the new
# run's (two inputs' `IMG_0001.jpg` may each have a line, the same text: both are kept).
_RUN_LINES = (names.REJECTS_FILE, names.CHANGES_FILE)


def _merged_lines(output: str, work: str, name: str, before: int | None) -> list[str]:
    """`name`'s lines for the grown dataset: the old dataset's first `before` lines (as many as
    it had when the merge began: a merge run again knows which are old), then the new run's.
    `before` None: a merge begun by an earlier version, whose files were joined as a set of lines
    (as then)."""
    old, added = storage.lines(FileSystems.join(output, name)), storage.lines(FileSystems.join(work, name))
    return sorted(set(old) | set(added)) if before is None else old[:before] + added


def _replace_lines(output: str, work: str, name: str, lines: Sequence[str]) -> None:
    """`name` under `output` holding `lines`: written aside and renamed over the old, so it is
    always one or the other whole."""
    path = FileSystems.join(output, name)
    temp = FileSystems.join(work, name + ".merged")
    write_text(temp, "".join(f"{line}\n" for line in lines))
    with writing(path):
        FileSystems.rename([temp], [path])


def merge(
    output: str,
    old: Summary,
    new: Summary,
    delta_lines: Sequence[str],
    entry: HistoryEntry,
    old_index: Sequence[IndexEntry] | None = None,
) -> Summary:
    """Put the work folder's finished run (`new`) beside the dataset (`old`, its summary as it
    stands) and replace summary.json last; returns the grown dataset's summary. `delta_lines`
    are changed_since_converted.jsonl's lines, `entry` this run's line of the history,
    `old_index` the dataset's file index as the append loaded it (None: loaded here; a second
    load of a large index takes seconds: benchmarks/NOTES.md#append).

    Idempotent: a merge killed anywhere is finished by calling it again with the same arguments
    (each link or move is skipped where already done; summary.json is replaced at one point).
    A step that fails raises MergeFailed, which says whether the old dataset is still whole."""
    try:
        summary = _merge(output, old, new, delta_lines, entry, old_index)
    except MergeFailed:
        raise
    except WriteFailed as error:
        raise MergeFailed(f"could not write {error.path}", error.reason) from error
    except OSError as error:
        raise MergeFailed("could not put the new shards beside the old ones", _why(error)) from error
    finish(output)
    return summary


def _merge(
    output: str,
    old: Summary,
    new: Summary,
    delta_lines: Sequence[str],
    entry: HistoryEntry,
    old_index: Sequence[IndexEntry] | None,
) -> Summary:
    work = work_dir(output)
    keep, move = _renames(old, new, old.shard_format)
    extra = [*keep, *keep.values(), *move.values()]
    extra += [names.index_path(n) for n in extra]
    marker = append_marker(output)
    kinds = label_kinds(old.kinds)
    counted = (*_RUN_LINES, *(name for kind in kinds for name in kind.joined_files))
    if marker is None:  # the merge begins: how many lines each side file has before it
        before = {name: len(storage.lines(FileSystems.join(output, name))) for name in counted}
    else:
        before = marker.get("lines", {})
    wanted = {"extra": sorted(set(extra)), "lines": before}
    if marker != wanted:  # a merge run again rewrites nothing
        _write_marker(output, wanted)
    fault_injection.pause_point("append_marked")
    renumber(output, keep)
    for name, target in move.items():
        _move(
            FileSystems.join(work, names.index_path(name)), FileSystems.join(output, names.index_path(target))
        )
        _move(FileSystems.join(work, name), FileSystems.join(output, target))
    fault_injection.pause_point("append_linked")
    lengths = {keep.get(n, n): v for n, v in _shard_lengths(output, old).items()}
    lengths.update({move.get(n, n): v for n, v in _shard_lengths(work, new).items()})
    if old_index is None:
        old_index = load_index(output) or []
    # The new files are this run's input's (the same folder as an earlier run's, or another).
    number = input_number(old, old_index, entry.get("input")) or 0
    index = {e.key: e for e in old_index}
    new_index = [dataclasses.replace(e, input=number) for e in load_index(work) or []]
    index.update((e.key, e) for e in new_index)
    groups = _duplicates(index.values())
    merged_lines = {name: _merged_lines(output, work, name, before.get(name)) for name in _RUN_LINES}
    unmatched: list[str] = []
    recounted: list[str] = []
    for kind in kinds:  # each kind's side files whose lines both runs hold (dropped objects)
        for name in kind.joined_files:
            grown_files.merge_joined_files(output, work, name, before.get(name))
    if any(kind.digested for kind in kinds):  # a dataset whose annotations an append compares
        unmatched = grown_files.merge_unmatched(output, work, (e.relpath for e in new_index))
        found = grown_files.undeclared_warning(merged_lines[names.REJECTS_FILE])
        recounted = [found] if found else []
    summary = merged_summary(old, new, keep, move, groups, entry, index.values(), unmatched, recounted)
    if summary.class_names is not None:
        write_text(
            FileSystems.join(output, names.LABELS_FILE), "".join(f"{c}\n" for c in summary.class_names)
        )
        names_now = tuple(summary.class_names)
        for kind in label_kinds(summary.kinds):
            grown_files.write_grown_files(output, kind.grown_files(names_now))
    for name, lines in merged_lines.items():
        _replace_lines(output, work, name, lines)
    write_text(FileSystems.join(output, names.DUPLICATES_FILE), "".join(g.to_json() + "\n" for g in groups))
    write_text(
        FileSystems.join(output, names.CHANGED_SINCE_FILE), "".join(f"{line}\n" for line in delta_lines)
    )
    write_index(output, index.values())
    unmatched_path = FileSystems.join(output, names.MANIFEST_UNMATCHED_FILE)
    unmatched_rows = storage.read_text_or_none(FileSystems.join(work, names.MANIFEST_UNMATCHED_FILE))
    if unmatched_rows:  # the append's run matched the manifest against every indexed file too
        write_text(unmatched_path, unmatched_rows)
    else:
        storage.delete([unmatched_path], missing_ok=True)
    if summary.tfds_metadata is not None and summary.tfds_metadata.written:
        with writing(FileSystems.join(output, names.TFDS_INFO_FILE)):
            summary = dataclasses.replace(
                summary, tfds_metadata=write_tfds_metadata(output, summary, lengths)
            )
    fault_injection.pause_point("append_metadata")
    temp = FileSystems.join(output, names.SUMMARY_TEMP_FILE)
    write_text(temp, summary.to_text())
    with writing(FileSystems.join(output, names.SUMMARY_FILE)):
        FileSystems.rename([temp], [FileSystems.join(output, names.SUMMARY_FILE)])
    return summary


def finish(output: str) -> None:
    """After summary.json names the grown dataset: remove the old names no longer listed, the
    work folder, then the marker (MergeFailed, `grown`, where that fails)."""
    try:
        _finish(output)
    except OSError as error:
        raise MergeFailed("could not remove the old shard names", _why(error), grown=True) from error


def _finish(output: str) -> None:
    summary = read_summary(output)
    listed = {n for s in summary.splits.values() for n in s.files}
    stale = []
    for path in existing_outputs(output):
        name = posixpath.basename(path)
        shard = name[: -len(names.INDEX_SUFFIX)] if names.is_index_name(name) else name
        if names.is_shard_name(shard) and shard not in listed:
            stale.append(path)
    storage.delete(stale)
    work = work_dir(output)
    if not storage.is_remote(work):
        import shutil

        shutil.rmtree(work, ignore_errors=True)
    else:
        storage.delete([m.path for m in storage.match(work + "/**")])
    storage.delete([FileSystems.join(output, names.APPEND_MARKER)], missing_ok=True)
