"""The Beam side: DoFns that adapt the plain functions, the sinks, and the composite steps.

The elements they pass and each one's shape, in flow order, are `beam_tfrecord.elements`'s. Here,
the tagged outputs beside each main output: "rejects" (RejectLine) from ReadValidate,
RunInference and BuildRecords, "changes" (ChangeLine) from BuildRecords, "tallies" (Tally) from
WriteShardFiles. The sinks: the paths sink (default) has each worker stream a shard task's
records into that shard's file; the beam sink is WriteToTFRecord per split (it groups every
record by shard, so the bytes are shuffled).
"""

from __future__ import annotations

import functools
import gc
import logging
import posixpath
from collections.abc import Iterable, Iterator
from concurrent.futures import ThreadPoolExecutor
from typing import TYPE_CHECKING, Any

import apache_beam as beam
from apache_beam.io.filesystems import FileSystems
from apache_beam.metrics import Metrics
from apache_beam.pvalue import TaggedOutput
from apache_beam.transforms.window import GlobalWindows

from beam_tfrecord import compat, gcs, names, reasons, write_failures
from beam_tfrecord.elements import (
    ConvertedRecord,
    DuplicateGroup,
    FinalShard,
    PendingRecord,
    RejectLine,
    ShardKey,
    ShardTask,
    WrittenShard,
)
from beam_tfrecord.features.options import FeatureOptions
from beam_tfrecord.images.inputs import ordered_submit, prepare_input
from beam_tfrecord.names import ShardFormat
from beam_tfrecord.plan import staging
from beam_tfrecord.plan.staging import StagedPlan
from beam_tfrecord.write import resume, shardwriter
from beam_tfrecord.write.output_config import ConvertConfig
from beam_tfrecord.write.records import change_line, finish_record, objects_of
from beam_tfrecord.write.shardwriter import ShardFiles
from beam_tfrecord.write.tally import Tally, without_pixels
from beam_tfrecord.write.tfrecord_files import index_records

if TYPE_CHECKING:
    from apache_beam.ml.inference.base import PredictionResult

__all__ = [
    "NAMESPACE",
    "REJECTS",
    "BuildRecordFn",
    "DuplicateGroups",
    "ExtractFeatures",
    "LoadFinishedFn",
    "MergeTallies",
    "PlannedShardSink",
    "ReadShardFn",
    "RunStepFn",
    "TFRecordSplitsSink",
    "TallyFn",
    "count_outcome",
    "failed_batch_rejects",
    "freeze_imported_heap",
    "make_sink",
]

NAMESPACE = "beam_tfrecord"
REJECTS = "rejects"
CHANGES = "changes"
DROPPED = "dropped"
CONTENT = "content"
TALLIES = "tallies"
_LOGGER = logging.getLogger(__name__)
READ_BATCH = 4  # inputs per hand-off to a read thread: fewer futures and waits


class RunStepFn(beam.DoFn):
    """A step of a run, holding the run's config and its staged plan (not loose values).

    `setup` prepares the worker process that runs it, once: the run's storage settings for the
    requests Beam's own filesystem makes there (it takes no per-call limit, so the limit is the
    process's: gcs.use_settings), a write failure's traceback, which Beam logs where the DoFn
    failed, kept quiet (the command says it in one line), and Beam's known noise (compat) kept
    off the terminal; and the process's heap frozen once (`freeze_imported_heap`). Nothing happens
    on import."""

    def __init__(self, config: ConvertConfig, staged: StagedPlan) -> None:
        self.config = config
        self.staged = staged

    def setup(self) -> None:
        gcs.use_settings(self.config.gcs)
        write_failures.quiet_write_failures()
        compat.quiet_known_beam_noise(logging.getLogger())
        freeze_imported_heap()


_HEAP_FROZEN = False


def freeze_imported_heap() -> None:
    """Move every object the process holds now to the collector's permanent generation, once.

    Why: a worker's heap at its first step is its imports (Beam, its gRPC and protobuf modules,
    our modules) and Beam's worker state: hundreds of thousands of long-lived objects that each
    full collection during the run scanned again, and that the interpreter's exit searched once
    more; the records' elements make full collections frequent. Frozen, they are skipped (about
    0.7 s of CPU per local worker process).

    Why it is safe: freezing frees nothing and moves nothing; it only stops the collector looking
    for cycles among these objects. What the steps make afterwards (every element, every
    buffer) is collected as before. Garbage made before the call (an import's leftover cycle)
    would stay until the process ends: a bounded, one-time amount, as in any process that calls
    `gc.freeze` before forking. Reference counting frees what it always freed. Once per process,
    so a process that runs many pipelines (tests) freezes only what it held at the first."""
    global _HEAP_FROZEN
    if not _HEAP_FROZEN:
        _HEAP_FROZEN = True
        gc.freeze()


def count_outcome(outcome: ConvertedRecord | RejectLine) -> None:
    """One Beam counter per outcome: records, reencoded, rejected_<reason>, changed_<reason>
    (names from the reason registry)."""
    if isinstance(outcome, RejectLine):
        _counter(reasons.counter_name(outcome.reason)).inc()
        return
    _counter("records").inc()
    if outcome.reencoded:
        _counter("reencoded").inc()
    for code in outcome.changes:
        _counter(reasons.counter_name(code)).inc()


@functools.cache
def _counter(name: str) -> Any:
    """Beam's counter of that name, made once per process (as a DoFn makes its counters in its
    constructor): it finds the running step's metrics when incremented, so one object serves
    every bundle and thread, and a record no longer builds a counter and its name each time."""
    return Metrics.counter(NAMESPACE, name)


class ReadShardFn(RunStepFn):
    """Adapts `prepare_input` to a shard task: its inputs are read and validated in order on the
    config's read threads (reads wait on disk or network); rejects go to a tagged output at once.

    Takes a `ShardTask` or the path of a staged one, loaded here: a task is never an element
    between two steps, since Beam estimates an element's size by pickling a sample of them,
    and every one of the first ten (a task pickles its inputs: 0.23 s of CPU for 11 tasks of
    12,000 photos with boxes).

    Also feeds the local progress line (files in `progress_dir`, one count per input read), and,
    on the paths sink, leaves each task's reader's done file in the run's temporary folder once
    every input of it went downstream (write.resume).
    """

    def __init__(self, config: ConvertConfig, staged: StagedPlan, progress_dir: str | None = None) -> None:
        super().__init__(config, staged)
        self.progress_dir = progress_dir
        self._progress: Any = None
        self._pool: ThreadPoolExecutor | None = None

    @property
    def _done_dir(self) -> str | None:
        """Where each task leaves its done file, so a rerun keeps what it finished (paths sink)."""
        return self.staged.temp_dir if self.config.sink == "paths" else None

    def setup(self) -> None:
        super().setup()
        if self.progress_dir:
            from beam_tfrecord.progress import ProgressCounter

            self._progress = ProgressCounter(self.progress_dir)
        threads = self.config.read_threads
        if threads > 1:  # one pool per worker: its threads keep their GCS clients (gcs.py)
            # The bundle's own thread reads too (`ordered_submit`): the pool holds the others.
            self._pool = ThreadPoolExecutor(threads - 1, thread_name_prefix="read")

    def teardown(self) -> None:
        if self._pool is not None:
            self._pool.shutdown(wait=False, cancel_futures=True)
            self._pool = None

    def _prepare(self, work: tuple[Any, ShardKey, ShardTask]) -> PendingRecord | ConvertedRecord | RejectLine:
        """One input read and validated; with no model to feed, serialized too (`finish_record`),
        here on a read thread: the record's sha256 then releases the GIL on a thread that holds
        no bundle, not on the one that writes and would wait to take the GIL back. One in-process
        worker, idle 2-core machine, medians of 3 interleaved rounds: 12,000 photos with boxes
        12.70 s against 13.48 s, 32,000 synthetic JPEGs 12.53 s against 13.69 s, the same CPU."""
        item, shard, task = work
        prepared = prepare_input(
            item,
            self.config.image,
            shard,
            class_names=task.class_names,
            masks=self.staged.masks,
            mask_rule=task.mask_rule,
            captions=task.task == "captions",
            keypoints=task.task == "keypoints",
            storage=self.config.gcs,
        )
        if self.config.features is None and isinstance(prepared, PendingRecord):
            return finish_record(self.config.schema, prepared)
        return prepared

    def _outcomes(self, task: ShardTask) -> Iterator[PendingRecord | ConvertedRecord | RejectLine]:
        """The task's inputs prepared in order: on the pool's threads and this one when there is
        a pool."""
        shard = ShardKey(task.split, task.index, task.count)
        work = ((item, shard, task) for item in task.inputs)
        if self._pool is None:
            return map(self._prepare, work)
        # A batch for each reading thread (the pool's and this one) and one done, waiting for this
        # thread to take it: the pool never waits on the consumer's pace, and no more images are
        # held than that.
        window = (self.config.read_threads + 1) * READ_BATCH
        return ordered_submit(self._pool, self._prepare, work, window, READ_BATCH)

    def process(self, task: ShardTask | str) -> Iterator[PendingRecord | ConvertedRecord | TaggedOutput]:
        if isinstance(task, str):  # a staged shard plan's path: loaded here, never an element
            task = staging.load_task(task)
        rejects: list[RejectLine] = []
        for outcome in self._outcomes(task):
            if self._progress is not None:
                self._progress.add()
            if isinstance(outcome, RejectLine):
                count_outcome(outcome)
                rejects.append(outcome)
                yield TaggedOutput(REJECTS, outcome)
            else:
                yield outcome
        if self._done_dir is not None:  # every input of the task has gone downstream
            done = resume.done_path(self._done_dir, resume.task_name(task.split, task.index), "read")
            resume.write_json(done, resume.ReadOutcome(len(task.inputs), rejects).to_json())

    def finish_bundle(self) -> None:
        if self._progress is not None:
            self._progress.flush()


class BuildRecordFn(beam.DoFn):
    """Adapts `finish_record`: a validated image (or its RunInference result) becomes a
    serialized record (a run without a model has it serialized on the read threads already);
    an image the model could not be fed becomes a `feature_failed` reject.
    A record stored unlike its file also gives its line of changes.jsonl (tag CHANGES), and each
    object a detection record leaves out its line of dropped_objects.jsonl (tag DROPPED)."""

    def __init__(self, config: ConvertConfig) -> None:
        self.schema = config.schema
        self.features = config.features

    def process(
        self, element: PendingRecord | ConvertedRecord | PredictionResult
    ) -> Iterator[ConvertedRecord | TaggedOutput]:
        if isinstance(element, ConvertedRecord):  # serialized on a read thread (ReadShardFn)
            outcome: ConvertedRecord | RejectLine = element
        elif isinstance(element, PendingRecord):
            outcome = finish_record(self.schema, element)
        else:
            outcome = self._with_features(element.example, element.inference)
        count_outcome(outcome)
        if isinstance(outcome, RejectLine):
            yield TaggedOutput(REJECTS, outcome)
            return
        change = change_line(outcome)
        if change is not None:
            yield TaggedOutput(CHANGES, change)
        for line in outcome.objects_dropped:
            yield TaggedOutput(DROPPED, line)
        yield outcome

    def _with_features(self, pending: PendingRecord, inference: Any) -> ConvertedRecord | RejectLine:
        assert self.features is not None
        if isinstance(inference, str):
            return RejectLine(
                pending.fields.relpath, reasons.FEATURE_FAILED.code, inference, objects=objects_of(pending)
            )
        return finish_record(
            self.schema,
            pending,
            inference.astype("float32", copy=False),
            self.features.dtype,
            include_image=not self.features.features_only,
        )


def describe_failure(error: object) -> str:
    """One line for a dead letter's error: Beam gives (class, repr, traceback lines), not the
    exception itself, because exceptions do not always pickle."""
    if isinstance(error, BaseException):
        return f"{type(error).__name__}: {error}"
    if isinstance(error, tuple) and len(error) == 3 and error[2]:
        return str(error[2][-1]).strip()
    if isinstance(error, tuple) and len(error) >= 2:
        return str(error[1])
    return str(error)


def failed_batch_rejects(failed: tuple[list[PendingRecord], object]) -> Iterator[RejectLine]:
    """A batch whose inference raised: every image in it becomes an `inference_failed` reject,
    so the run goes on and still accounts for every input."""
    batch, error = failed
    detail = describe_failure(error)
    for pending in batch:
        reject = RejectLine(
            pending.fields.relpath, reasons.INFERENCE_FAILED.code, detail, objects=objects_of(pending)
        )
        count_outcome(reject)
        yield reject


class ExtractFeatures(beam.PTransform):
    """PendingRecord -> RunInference results (main) and RejectLine for failed batches (`rejects`).

    Batches of `batch_size` through Beam's RunInference with a thin handler (features/handler.py); the
    model is loaded once per worker process. Batching keeps a shard task's records in order and
    in its bundle (BatchElements flushes at the end of the bundle), which the paths sink needs.
    """

    def __init__(self, options: FeatureOptions) -> None:
        super().__init__()
        self.options = options

    def expand(self, pending: beam.PCollection[PendingRecord]) -> tuple[beam.PCollection, beam.PCollection]:
        from apache_beam.ml.inference.base import RunInference

        from beam_tfrecord.features.handler import FeatureModelHandler

        results, failed = (
            pending
            | "RunInference" >> RunInference(FeatureModelHandler(self.options)).with_exception_handling()
        )
        rejects = failed.failed_inferences | "FailedBatches" >> beam.FlatMap(failed_batch_rejects)
        return results, rejects


def content_key(record: ConvertedRecord) -> tuple[str, tuple[str, str]]:
    """(source sha256, (path, split)): all a duplicate group needs of a record, no bytes."""
    return record.content_sha256, (record.relpath, record.split)


def copies_of(grouped: tuple[str, Iterable[tuple[str, str]]]) -> Iterator[DuplicateGroup]:
    """A content held by more than one record is a DuplicateGroup (copies sorted by path)."""
    sha256, copies = grouped
    found = tuple(sorted(copies))
    if len(found) > 1:
        yield DuplicateGroup(sha256, found)


class DuplicateGroups(beam.PTransform):
    """(sha256, (path, split)) per record (`content_key`) -> DuplicateGroup, one per content that
    more than one record holds.

    Groups about 150 bytes a record, never the image bytes; the result is as deterministic as
    the records (copies sorted), whatever the runner's order."""

    def expand(self, keys: beam.PCollection[tuple[str, tuple[str, str]]]) -> beam.PCollection[DuplicateGroup]:
        return keys | "ByContent" >> beam.GroupByKey() | "Copies" >> beam.FlatMap(copies_of)


class LoadFinishedFn(RunStepFn):
    """An interrupted run's finished shard tasks (write.resume), read back on a rerun: each one's
    temporary (or already final) shard, and everything the summary counts of it, on the outputs
    the tasks would have given: tallies, rejects, changes, dropped objects, content keys."""

    def process(self, _: None) -> Iterator[WrittenShard | TaggedOutput]:
        temp_dir, output, shard_format = self.staged.temp_dir, self.config.output, self.config.shard_format
        for task in self.staged.finished:
            read = resume.read_outcomes(temp_dir, [task])[task]
            tally = Tally()
            for reject in read.rejects:
                yield TaggedOutput(REJECTS, reject)
            written = resume.load_written(temp_dir, task, output, shard_format)
            if written is not None:  # (the rejects are tallied with every other reject)
                tally.merge(written.tally)
                yield written.shard
                for change in written.changes:
                    yield TaggedOutput(CHANGES, change)
                for line in written.dropped:
                    yield TaggedOutput(DROPPED, line)
                for sha256, path in written.content:
                    yield TaggedOutput(CONTENT, (sha256, (path, written.shard.split)))
            yield TaggedOutput(TALLIES, tally)


class TallyFn(beam.CombineFn):
    """Combines outcomes into one `Tally` for summary.json."""

    def create_accumulator(self) -> Tally:
        return Tally()

    def add_input(self, tally: Tally, outcome: ConvertedRecord | RejectLine) -> Tally:
        return tally.add(outcome)

    def merge_accumulators(self, tallies) -> Tally:
        merged = Tally()
        for tally in tallies:
            merged.merge(tally)
        return merged

    def extract_output(self, tally: Tally) -> Tally:
        return tally


class MergeTallies(TallyFn):
    """Tallies (per bundle, per sink) -> one Tally."""

    def add_input(self, total: Tally, tally: Tally) -> Tally:
        return total.merge(tally)


class WriteShardFilesFn(RunStepFn):
    """Adapts `ShardFiles`: streams each record into its shard's temporary file; at the end of
    the bundle emits the written shards and one Tally of what it wrote ("tallies"). Each shard,
    once closed, leaves its writer's done file beside the plan (write.resume): its tally and
    lines, so a rerun can keep it."""

    def __init__(self, config: ConvertConfig, staged: StagedPlan) -> None:
        super().__init__(config, staged)
        self._files: ShardFiles | None = None
        self._tally = Tally()
        self._ledger: dict[tuple[str, int], resume.ShardOutcome] = {}

    def start_bundle(self) -> None:
        self.teardown()  # a failed bundle's open file, if the runner reuses this instance
        self._files = ShardFiles(
            self.staged.temp_dir,
            self.config.shard_format,
            on_close=self._shard_done,
            array_record_options=self.config.array_record_options,
        )
        self._tally = Tally()
        self._ledger = {}

    def process(self, record: ConvertedRecord) -> None:
        assert self._files is not None
        self._files.write(record.shard, record.example)
        key = (record.shard.split, record.shard.index)
        if key not in self._ledger:
            self._ledger[key] = resume.ShardOutcome(shard=None, bytes=0, tally=Tally())  # type: ignore[arg-type]
        ledger = self._ledger[key]
        ledger.tally.add(record)  # counts; keeps no bytes
        change = change_line(record)
        if change is not None:
            ledger.changes.append(change)
        ledger.dropped.extend(record.objects_dropped)
        ledger.content.append((record.content_sha256, record.relpath))

    def _shard_done(self, shard: WrittenShard, size: int) -> None:
        """A shard is closed and indexed: its writer's done file, with everything counted of it.
        Its tally joins the bundle's: every shard a bundle wrote is closed by its end, so the
        bundle's tally is their sum (one count per record, not two)."""
        ledger = self._ledger.pop((shard.split, shard.index))
        self._tally.merge(ledger.tally)
        ledger.shard, ledger.bytes = shard, size
        done = resume.done_path(self.staged.temp_dir, resume.task_name(shard.split, shard.index), "written")
        resume.write_json(done, ledger.to_json())

    def teardown(self) -> None:
        """Drop a file a failed bundle left open: on GCS an upload would otherwise retry from
        its finalizer for minutes. Its temporary object goes with the run's temporary folder."""
        if self._files is not None:
            self._files.abandon()
            self._files = None

    def finish_bundle(self) -> Iterator[Any]:
        assert self._files is not None
        written, self._files = self._files.close(), None
        for shard in written:
            yield GlobalWindows.windowed_value(shard)
        yield TaggedOutput(TALLIES, GlobalWindows.windowed_value(self._tally))


class FinalizeShardsFn(RunStepFn):
    """Runs once, after every shard task: renames the temporary shards into place."""

    def process(self, _: None, written: list[WrittenShard]) -> Iterator[FinalShard]:
        config = self.config
        yield from shardwriter.finalize_shards(
            written, config.output, config.shard_format, self.staged.shard_counts, config.array_record_options
        )


class PlannedShardSink(beam.PTransform):
    """ConvertedRecord -> FinalShard (main) and Tally ("tallies"): the default sink.

    Each shard task's records are written by the worker that read them (no bytes shuffled);
    a finalize step renames every shard into place once all are written. `resumed` holds the
    WrittenShards an interrupted run finished, which a rerun keeps (LoadFinishedFn).
    """

    def __init__(
        self, config: ConvertConfig, staged: StagedPlan, resumed: beam.PCollection | None = None
    ) -> None:
        super().__init__()
        self.config = config
        self.staged = staged
        self.resumed = resumed

    def expand(self, records: beam.PCollection[ConvertedRecord]) -> tuple[beam.PCollection, beam.PCollection]:
        written = records | "WriteShardFiles" >> beam.ParDo(
            WriteShardFilesFn(self.config, self.staged)
        ).with_outputs(TALLIES, main="written")
        shards = written.written
        if self.resumed is not None:
            shards = (shards, self.resumed) | "WithResumed" >> beam.Flatten()
        finals = (
            records.pipeline
            | "Once" >> beam.Create([None])
            | "Finalize"
            >> beam.ParDo(FinalizeShardsFn(self.config, self.staged), written=beam.pvalue.AsList(shards))
        )
        return finals, written[TALLIES]


def index_final_shard(path: str, shard_format: ShardFormat) -> FinalShard:
    """A shard WriteToTFRecord has put in place, with its `.idx` written beside it.

    Beam's TFRecord sink reports no offsets through a public API, so they come from the
    record headers (16 bytes read per record, the image bytes skipped with a seek). That pass
    replaces the one the TFDS metadata made to count records, so the sink reads no more than
    before; the paths sink takes its offsets from the writer instead. Gzip shards get no index.
    """
    match = names.SHARD_NAME.match(posixpath.basename(path))
    assert match is not None, path
    records = None
    if shard_format.indexed:
        sizes = index_records(path)
        shardwriter.write_index(path, sizes)
        records = len(sizes)
    return FinalShard(match["split"], int(match["index"]), int(match["count"]), path, records)


class TFRecordSplitsSink(beam.PTransform):
    """ConvertedRecord -> FinalShard and Tally: one Beam `WriteToTFRecord` per split.

    With a fixed shard count WriteToTFRecord groups every record by shard key, so the runner's
    shuffle carries every image byte once (about the dataset's size). It does not report how
    many records went to each shard, nor where each starts: both come from the record headers
    once the shards are in place (`index_final_shard`), which also writes each `.idx`.
    """

    def __init__(self, config: ConvertConfig, staged: StagedPlan) -> None:
        super().__init__()
        self.output = config.output
        self.shard_counts = dict(staged.shard_counts)
        self.shard_format = config.shard_format

    def expand(self, records: beam.PCollection[ConvertedRecord]) -> tuple[beam.PCollection, beam.PCollection]:
        splits = list(self.shard_counts)
        by_split = records | "BySplit" >> beam.Partition(lambda r, _n: splits.index(r.split), len(splits))
        written = []
        for name, part in zip(splits, by_split, strict=True):
            written.append(
                part
                | f"Bytes[{name}]" >> beam.Map(lambda r: r.example)
                | f"Write[{name}]"
                >> beam.io.WriteToTFRecord(
                    FileSystems.join(self.output, name),
                    file_name_suffix=names.shard_suffix(self.shard_format),
                    num_shards=self.shard_counts[name],
                    shard_name_template=names.SHARD_TEMPLATE,
                    compression_type=shardwriter.compression_type(self.shard_format),
                )
            )
        finals = (
            tuple(written)
            | "AllShards" >> beam.Flatten()
            | "IndexShards" >> beam.Map(index_final_shard, self.shard_format)
        )
        tally = (
            records | "DropPixels" >> beam.Map(without_pixels) | "Tally" >> beam.CombineGlobally(TallyFn())
        )
        return finals, tally


def make_sink(
    config: ConvertConfig, staged: StagedPlan, resumed: beam.PCollection | None = None
) -> beam.PTransform:
    """The sink object a config names: `paths` (default) or `beam` (which never resumes, and whose
    steps are Beam's: they use the gs:// settings of the worker process they run in)."""
    if config.sink == "paths":
        return PlannedShardSink(config, staged, resumed)
    if config.sink == "beam":
        return TFRecordSplitsSink(config, staged)
    raise ValueError(f"sink must be paths or beam, not {config.sink!r}")
