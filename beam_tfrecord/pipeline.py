"""The whole conversion as one composite transform that a user can apply in their own pipeline.

    source = SourceConfig(input="gs://bucket/images", splits={"train": 0.8, "validation": 0.2})
    config = ConvertConfig(output="gs://bucket/out", schema="simple", compression="gzip")
    with claim_output(config.output) as claim:  # one writer per output (output.claim)
        staged = prepare(source, config, claim=claim)  # list, plan, stage the plan under the output
        with beam.Pipeline(options=options) as pipeline:
            _ = pipeline | ImagesToTFRecords(staged, config)

One flow on every runner: plan -> read and validate -> (feature model) -> build -> a sink.
"""

from __future__ import annotations

import dataclasses
import json
import logging
import posixpath
import time
from collections.abc import Iterator, Mapping, Sequence

import apache_beam as beam
from apache_beam.io.filesystems import FileSystems

from beam_tfrecord import fault_injection, gcs, runners
from beam_tfrecord.config import ConvertConfig, SourceConfig
from beam_tfrecord.config_base import ConfigError, unshaping_keys
from beam_tfrecord.edges import Json
from beam_tfrecord.elements import (
    ChangeLine,
    DroppedObjectLine,
    FinalShard,
    PlannedInput,
    RejectLine,
)
from beam_tfrecord.labels import of_task
from beam_tfrecord.output import append as append_lib
from beam_tfrecord.output import file_index, outputs
from beam_tfrecord.output import resume as resume_lib
from beam_tfrecord.output.claim import Claim
from beam_tfrecord.output.mode import OutputMode
from beam_tfrecord.plan import bands, bulk, pages, staging
from beam_tfrecord.plan.annotations.growing import objects_digest, objects_digest_of
from beam_tfrecord.plan.listing import InputFile, list_inputs
from beam_tfrecord.plan.planner import KnownRecords, LabelSource, Plan, make_plan, shard_tasks
from beam_tfrecord.plan.sharding import ShardSettings
from beam_tfrecord.plan.staging import StagedPlan
from beam_tfrecord.summary import OptionsSummary, Resumed, RunSummary, Summary
from beam_tfrecord.transforms import (
    CHANGES,
    CONTENT,
    DROPPED,
    REJECTS,
    BuildRecordFn,
    ExtractFeatures,
    LoadFinishedFn,
    ReadShardFn,
    content_key,
    duplicate_groups,
)
from beam_tfrecord.write import done_files
from beam_tfrecord.write.run_step import RunStepFn
from beam_tfrecord.write.shardwriter import remove_tree
from beam_tfrecord.write.side_files import label_files, write_metadata
from beam_tfrecord.write.sinks import TALLIES, MergeTallies, make_sink
from beam_tfrecord.write.summary import build_summary
from beam_tfrecord.write.tally import Tally

__all__ = ["ImagesToTFRecords", "WriteMetadataFn", "prepare"]

_LOGGER = logging.getLogger(__name__)


def prepare(
    source: SourceConfig,
    config: ConvertConfig,
    *,
    mode: OutputMode | None = None,
    parallelism: int = 1,
    round_robin: bool = False,
    label_source: LabelSource | None = None,
    files: Sequence[InputFile] | None = None,
    claim: Claim | None = None,
) -> StagedPlan:
    """Everything before the pipeline: list and plan the inputs, clear the output (an earlier
    run's files are refused unless `mode` says so), and stage the plan under the output.

    `mode` (output.mode.OutputMode; a fresh run by default) says what the run does with
    `config.output`, which is where the pipeline writes (an append's work folder for an append:
    `mode.target`): a fresh run refuses an earlier run's files, an overwrite or an append clears
    them, a dry run plans and says where the plan would go, writing nothing and leaving the
    output as it is. With
    `mode.resume`, an output holding an interrupted run of this very plan (the same listing,
    settings and shard tasks: `output.resume.RunFingerprint`) keeps the shard tasks it finished
    and stages nothing new; any other interrupted run is removed, and the log says why it could
    not be resumed. The paths sink only (Beam's WriteToTFRecord keeps nothing of a killed run).
    An append's plan is made against `mode.known`, the dataset it grows: its class ids and
    records' hashes.

    `parallelism` (shard tasks the runner runs at once) and `round_robin` (it deals them out in
    turn) shape the shard counts (plan.sharding.ShardSettings); `files` is a listing already
    made (the command lists first, to choose its workers by the input's size); `label_source` one
    already loaded. Raises ConfigError (`output.outputs.OutputInUse`, `gcs.StorageError` among
    them) before anything is written when the run cannot start.

    `claim`: this run's claim on the output (`output.claim.claim_output`), checked to be held and
    to name `config.output` before anything there is read or cleared. The caller takes it, not
    `prepare`, because it must outlive `prepare`: it covers the pipeline's run, which ends where
    only the caller knows. Without one nothing stops another run writing the same output.

    """
    gcs.use_settings(config.gcs)
    if claim is not None and (not claim.held or claim.output != config.output):
        what = "no longer held" if not claim.held else f"on {claim.output}, not on this output"
        raise ConfigError("output", f"{config.output}: the claim passed to prepare is {what}")
    if source.annotations is not None and config.schema != "tfds":
        task = source.annotations.task or ""
        (kind, *_) = of_task(task)
        uses = f"{task} records use the tfds schema ({kind.keys_named})"
        raise ConfigError("schema", f"{config.schema} holds one label per image; {uses}")
    shards = ShardSettings(config.num_shards, config.shard_size_mb, parallelism, round_robin)
    listing = list_inputs(source.input) if files is None else files
    listing = bands.grouped(listing, source.bands)  # a picture's band files: one input (--bands)
    pages.refuse_annotations(config.image.pages, source)
    listing = pages.expanded(listing, config.image.pages == "each")  # a page, one input (--pages)
    fault_injection.pause_point("listed")
    with bulk.cycles_paused():  # millions of objects in a detection run's plan: see plan.bulk
        staged = _plan_and_stage(listing, source, config, shards, label_source, mode or OutputMode())
    if claim is not None:  # every commit step checks first that the output is still this run's
        staged = dataclasses.replace(staged, fence=claim.fence)
    return staged


def _plan_and_stage(
    listing: Sequence[InputFile],
    source: SourceConfig,
    config: ConvertConfig,
    shards: ShardSettings,
    label_source: LabelSource | None,
    mode: OutputMode,
) -> StagedPlan:
    """`prepare` once the inputs are listed."""
    known = mode.known
    plan = make_plan(listing, source, shards, label_source, known)
    if not plan.inputs and not plan.rejects:
        raise ConfigError("input", f"{source.input} holds no files")
    if known is not None and not plan.inputs and plan.skipped == len(plan.rejects):
        _refuse_append_without_pictures(plan.rejects, source)
    if mode.dry_run:
        return staging.locate_plan(plan, config.output)
    planned = shard_tasks(plan, source.split_seed)
    facts = staging.PlanFacts.of(plan, source)
    if mode.resume and config.sink == "paths" and resume_lib.interrupted_plans(config.output):
        # An interrupted run to compare with: the plan's fingerprint first, then the choice.
        shard_tasks_digest = resume_lib.TextDigest()
        for shard_task in planned:
            shard_tasks_digest.add(shard_task.to_json())
        fingerprint = _fingerprint(listing, source, config, shard_tasks_digest, facts)
        found = resume_lib.find_resumable(
            config.output, fingerprint, resume_lib.shard_task_inputs(planned), config.shard_format
        )
        if found.temp_dir is not None:
            _LOGGER.info(
                "resuming the interrupted run in %s: %d of %d shard tasks finished (%d records) are kept",
                found.temp_dir,
                len(found.finished),
                len(planned),
                found.records,
            )
            outputs.clear_temp(config.output, keep=found.temp_dir)
            _stage_annotation_changes(plan, config.output, known)
            located = staging.locate_plan(plan, config.output)
            return dataclasses.replace(
                located,
                temp_dir=found.temp_dir,
                finished=tuple(sorted(found.finished)),
                resumed_records=found.records,
            )
        if found.why:
            _LOGGER.info("not resuming an interrupted run (%s): starting clean", found.why)
    outputs.prepare_output(config.output, mode.clears)
    fault_injection.pause_point("cleared")
    # Nothing to compare with (the usual case): each shard task is hashed as it is staged, so a
    # detection run's shard tasks are serialized once (1,000,000 objects with masks: 19 s each time).
    shard_tasks_digest = resume_lib.TextDigest()
    # A detection record's objects digest goes into the file index: an append tells by it an old
    # picture whose annotations changed since (plan.annotations.growing). Made from the texts
    # staged for the objects, so their numbers are encoded once.
    staged_objects_digests: dict[str, str] = {}
    digested = any(kind.digested for kind in of_task(plan.task))

    def objects_staged(item: PlannedInput, texts: list[str]) -> None:
        staged_objects_digests[item.relpath] = objects_digest(texts)

    staged = staging.stage_plan(
        plan,
        config.output,
        source,
        shard_tasks=planned,
        staged_shard_task=shard_tasks_digest.add,
        objects_staged=objects_staged if digested else None,
    )
    # Each file's group goes into the file index, a group pattern's too: an append counts the
    # groups over it as the plan counts them (a picture a worker rejects is still in its group),
    # which the paths of the records alone cannot tell.
    objects_digests = (
        {
            p.relpath: staged_objects_digests.get(p.relpath) or objects_digest_of(p.annotations)
            for p in plan.inputs
        }
        if digested
        else None
    )
    file_index.stage_listing(staged.plan_dir, listing, plan.groups, objects_digests)
    _stage_annotation_changes(plan, config.output, known)
    fingerprint = _fingerprint(listing, source, config, shard_tasks_digest, facts)
    done_files.write_json(resume_lib.fingerprint_path(staged.temp_dir), fingerprint.to_json())
    return staged


def _stage_annotation_changes(plan: Plan, output: str, known: KnownRecords | None) -> None:
    """An append's old pictures whose annotations changed, kept in its work folder (`output`) for
    the merge (output.append.stage_annotation_changes); only where they were compared."""
    if known is not None and known.converted is not None:
        append_lib.stage_annotation_changes(output, plan.annotations_changed)


def _refuse_append_without_pictures(skipped: Sequence[RejectLine], source: SourceConfig) -> None:
    """An append whose new files are all clutter or annotation files (a label file for a picture
    the dataset holds: its objects would be ignored) has nothing to add: it fails in one line,
    as one that finds no new file does, never exits 0 having added nothing."""
    first = min(skipped, key=lambda r: r.path)
    files = f"{len(skipped)} new file{'s' if len(skipped) > 1 else ''}"
    raise ConfigError(
        "input",
        f"{source.input} holds no picture the dataset lacks: {files}, none a picture (e.g. "
        f"{first.path}: {first.detail}); --append converts new pictures only, and annotations of "
        "converted pictures need a full run with --overwrite",
    )


def _fingerprint(
    listing: Sequence[InputFile],
    source: SourceConfig,
    config: ConvertConfig,
    shard_tasks_digest: resume_lib.TextDigest,
    facts: staging.PlanFacts,
) -> resume_lib.RunFingerprint:
    """What makes a rerun the same plan: every listed file (path, size, modification time), the
    settings that shape the records (those declared `shapes_records`; how shards are cut and
    which files are kept show in the shard tasks), and the shard tasks as staged (with their objects
    in a detection run: `shard_tasks_digest`, fed every shard task's text in order), then the
    plan's facts.
    Each is hashed a piece at a time, never held whole twice."""
    unshaping = unshaping_keys(SourceConfig, ConvertConfig)
    settings = {**OptionsSummary.of(source, config).to_json(), "features": config.features}
    settings = {key: value for key, value in settings.items() if key not in unshaping}
    listed = resume_lib.TextDigest()
    for f in listing:
        listed.add(json.dumps([f.relpath, f.size, f.mtime, f.problem]))
    return resume_lib.RunFingerprint(
        inputs=listed.hexdigest(),
        settings=resume_lib.RunFingerprint.digest(settings),
        plan=shard_tasks_digest.hexdigest(facts.to_json()),
    )


class WriteMetadataFn(RunStepFn):
    """Runs once, after every shard is final: labels.txt, rejects.jsonl, changes.jsonl, TFDS's
    files, the file index (output.file_index), then summary.json; then removes the run's temporary
    folder (the staged plan)."""

    def __init__(self, config: ConvertConfig, staged: StagedPlan, run: RunSummary | None) -> None:
        super().__init__(config, staged)
        self.run = run

    def process(
        self,
        _: str,
        tally: Tally,
        rejects: list[RejectLine],
        finals: list[FinalShard],
        changes: list[ChangeLine],
        dropped: list[DroppedObjectLine],
        contents: Sequence[tuple[str, tuple[str, str]]] = (),
    ) -> Iterator[Summary]:
        self.staged.check_fence("the side files and summary.json")
        facts = staging.load_facts(self.staged.plan_dir)
        entries = file_index.index_entries(self.staged.plan_dir, contents)
        if entries is not None:
            file_index.write_index(self.config.output, entries)
        else:  # no index, not one of another run: an --append refuses the dataset
            file_index.remove_index(self.config.output)
        planned = staging.load_planned_rejects(self.staged.plan_dir)
        # One listing of the output, not one request per shard.
        (found,) = FileSystems.match([FileSystems.join(self.config.output, "*")])
        names = {posixpath.basename(f.path) for f in finals}
        sizes = [
            (m.path, m.size_in_bytes) for m in found.metadata_list if posixpath.basename(m.path) in names
        ]
        run = self.run
        if run is not None and run.started_at is not None:
            run = dataclasses.replace(run, wall_time_s=round(time.time() - run.started_at, 2))
        options = OptionsSummary.of(facts.source, self.config)
        staged = self.staged
        resumed: Resumed | None = (
            {"shards": len(staged.finished), "records": staged.resumed_records} if staged.finished else None
        )
        # The records' tally, and the rejects', which are all here already; so is every record's
        # content key, grouped here into the copies of one content.
        tally = Tally().merge(tally).add_all(rejects)
        duplicates = duplicate_groups(contents)
        summary = build_summary(
            facts, planned, tally, sizes, options, run, self.config.features, duplicates, resumed
        )
        lengths = {posixpath.basename(f.path): f.records for f in finals}
        summary = write_metadata(
            self.config.output,
            facts.class_names,
            [*planned, *rejects],
            summary,
            lengths,
            changes,
            duplicates,
            facts.manifest_unmatched,
            label_files(self.staged, facts, dropped),
        )
        remove_tree(self.staged.temp_dir)
        yield summary


class ListShardTasksFn(RunStepFn):
    """Plan folder -> its staged shard tasks, in name order, but those an interrupted run
    finished; the shard counts are its display data, so Dataflow's UI and a dry run's graph show
    how many shard tasks the workers share."""

    def process(self, plan_dir: str) -> Iterator[str]:
        for path in staging.list_shard_task_files(plan_dir):
            if posixpath.basename(path).removesuffix(".json") not in self.staged.finished:
                yield path

    def display_data(self) -> dict[str, str]:
        return {"shard_tasks": staging.describe(self.staged.shard_counts)}


class ImagesToTFRecords(beam.PTransform[beam.pvalue.PBegin, beam.PCollection[Summary]]):
    """PBegin -> PCollection holding the run's one `Summary` (summary.Summary), once every file is
    written.

    Args:
      staged: the plan, staged by `prepare` (or `staging.stage_plan`) before the pipeline runs;
        the graph holds only where it is and the shard counts.
      config: what the records look like and where they go.
      run_info: how the run executes, for summary.json: a `RunSummary`, or a mapping of its fields
        (runner, workers, `started_at`, ...).
      progress_dir: a local folder the workers count into, for a progress line (local runs).
    """

    def __init__(
        self,
        staged: StagedPlan,
        config: ConvertConfig,
        run_info: RunSummary | Mapping[str, Json] | None = None,
        progress_dir: str | None = None,
    ) -> None:
        super().__init__()
        self.staged = staged
        self.config = config
        if run_info is not None and not isinstance(run_info, RunSummary):
            unknown = sorted(set(run_info) - {f.name for f in dataclasses.fields(RunSummary)})
            if unknown:
                raise ConfigError("run_info", f"has no field {unknown[0]!r} (see summary.RunSummary)")
            run_info = RunSummary(**run_info)
        self.run_info = run_info
        self.progress_dir = progress_dir

    def expand(self, root: beam.pvalue.PBegin) -> beam.PCollection[Summary]:
        runner = type(root.pipeline.runner)
        runners.check_runner(f"{runner.__module__}.{runner.__qualname__}")  # before it fails mid-run
        config, staged = self.config, self.staged
        # The plan's folder, once: it starts the listing of the shard tasks, the loading of an
        # interrupted run's finished ones, the sink's finalize step and the metadata step (each
        # one more Create otherwise: Beam builds and runs every transform of the graph, even on a
        # run of a few pictures).
        start = root | "Start" >> beam.Create([staged.plan_dir])
        # str: a staged shard task's path (one output shard and its inputs' paths). The
        # Reshuffle spreads them (file names, never image bytes) over the workers; a fused Create
        # would keep them on one. ReadValidate loads each.
        shard_task_paths = (
            start
            | "ListShardTasks" >> beam.ParDo(ListShardTasksFn(config, staged))
            | "SpreadShards" >> beam.Reshuffle()
        )
        # PendingRecord: one validated image, in shard order (ConvertedRecord, already serialized,
        # when no model is fed) | RejectLine.
        read = shard_task_paths | "ReadValidate" >> beam.ParDo(
            ReadShardFn(config, staged, self.progress_dir)
        ).with_outputs(REJECTS, main="pending")
        rejects = [read[REJECTS]]
        resumed = None
        if staged.finished:  # an interrupted run's finished shard tasks: their shards and counts, kept
            resumed = start | "LoadFinished" >> beam.ParDo(LoadFinishedFn(config, staged)).with_outputs(
                TALLIES, REJECTS, CHANGES, DROPPED, CONTENT, main="shards"
            )
            rejects.append(resumed[REJECTS])
        pending = read.pending
        if config.features is not None:
            # PredictionResult(example=PendingRecord, inference=features or why not).
            pending, failed = pending | "Features" >> ExtractFeatures(config.features)
            rejects.append(failed)
        # ConvertedRecord: the serialized tf.train.Example and the facts the summary needs;
        # ChangeLine (tag CHANGES): why a record's image differs from its file.
        built = pending | "BuildRecords" >> beam.ParDo(BuildRecordFn(config)).with_outputs(
            REJECTS, CHANGES, DROPPED, main="records"
        )
        rejects.append(built[REJECTS])
        all_rejects = tuple(rejects) | "AllRejects" >> beam.Flatten()
        sink = make_sink(config, staged, resumed.shards if resumed is not None else None, start)
        # FinalShard: each shard under its final name with its record count; Tally of records.
        finals, record_tallies = built.records | "Write" >> sink
        # (sha256, (relpath, split)) of every record: the file index's (output.file_index) and,
        # grouped by the metadata step (transforms.duplicate_groups), the copies of one content.
        keys = built.records | "ContentKeys" >> beam.Map(content_key)
        changes, dropped, tallies = built[CHANGES], built[DROPPED], [record_tallies]
        if resumed is not None:
            keys = (keys, resumed[CONTENT]) | "AllContentKeys" >> beam.Flatten()
            changes = (changes, resumed[CHANGES]) | "AllChanges" >> beam.Flatten()
            dropped = (dropped, resumed[DROPPED]) | "AllDropped" >> beam.Flatten()
            tallies.append(resumed[TALLIES])
        # One Tally of what every sink bundle wrote, combined on the workers (a few per shard
        # task: too many to hand whole to one step); none where no shard task ran.
        merged = beam.CombineGlobally(MergeTallies()).without_defaults()
        tally = tuple(tallies) | "Tallies" >> beam.Flatten() | "Tally" >> merged
        return start | "WriteMetadata" >> beam.ParDo(
            WriteMetadataFn(config, staged, self.run_info),
            tally=beam.pvalue.AsSingleton(tally, default_value=Tally()),
            rejects=beam.pvalue.AsList(all_rejects),
            finals=beam.pvalue.AsList(finals),
            changes=beam.pvalue.AsList(changes),
            dropped=beam.pvalue.AsList(dropped),
            contents=beam.pvalue.AsList(keys),
        )
