"""The Beam side: DoFns that adapt the plain functions, and the composite steps (the sinks are the
write stage's: write.sinks).

The elements they pass and each one's shape, in flow order, are `beam_tfrecord.elements`'s. Here,
the tagged outputs beside each main output: "rejects" (RejectLine) from ReadValidate,
RunInference and BuildRecords, "changes" (ChangeLine) from BuildRecords, "tallies" (Tally) from
WriteShardFiles and LoadFinished.
"""

from __future__ import annotations

import functools
import logging
from collections import defaultdict
from collections.abc import Iterable, Iterator
from concurrent.futures import ThreadPoolExecutor
from typing import TYPE_CHECKING, cast

import apache_beam as beam
from apache_beam.metrics import Metrics
from apache_beam.pvalue import TaggedOutput

from beam_tfrecord import reasons
from beam_tfrecord.elements import (
    ChangeLine,
    ConvertedRecord,
    DroppedObjectLine,
    DuplicateGroup,
    PendingRecord,
    PlannedInput,
    RejectLine,
    ShardKey,
    ShardTask,
    WrittenShard,
)
from beam_tfrecord.features.options import FeatureConfig
from beam_tfrecord.images.inputs import ordered_submit, prepare_input
from beam_tfrecord.images.pages import RecentFiles
from beam_tfrecord.labels import RunLabels
from beam_tfrecord.output import resume
from beam_tfrecord.plan import staging
from beam_tfrecord.plan.staging import StagedPlan
from beam_tfrecord.write import done_files
from beam_tfrecord.write.output_config import ConvertConfig
from beam_tfrecord.write.records import change_line, finish_record
from beam_tfrecord.write.run_step import RunStepFn
from beam_tfrecord.write.sinks import TALLIES
from beam_tfrecord.write.tally import Tally

if TYPE_CHECKING:
    import numpy as np
    from apache_beam.ml.inference.base import PredictionResult

    from beam_tfrecord.progress import ProgressCounter

__all__ = [
    "NAMESPACE",
    "REJECTS",
    "BuildRecordFn",
    "ExtractFeatures",
    "LoadFinishedFn",
    "ReadShardFn",
    "count_outcome",
    "duplicate_groups",
    "failed_batch_rejects",
]

NAMESPACE = "beam_tfrecord"
REJECTS = "rejects"
CHANGES = "changes"
DROPPED = "dropped"
CONTENT = "content"
# (source sha256, (path, split)): a record's content key (`content_key`).
ContentKey = tuple[str, tuple[str, str]]
# What a finished shard task gives the summary on the tagged outputs (`LoadFinishedFn`).
_Counted = RejectLine | ChangeLine | DroppedObjectLine | ContentKey | Tally
_LOGGER = logging.getLogger(__name__)
READ_BATCH = 4  # inputs per hand-off to a read thread: fewer futures and waits


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
def _counter(name: str) -> Metrics.DelegatingCounter:
    """Beam's counter of that name, made once per process (as a DoFn makes its counters in its
    constructor): it finds the running step's metrics when incremented, so one object serves
    every bundle and thread, and a record no longer builds a counter and its name each time."""
    return Metrics.counter(NAMESPACE, name)


class ReadShardFn(RunStepFn):
    """Adapts `prepare_input` to a shard task: its inputs are read and validated in order on the
    config's read threads (reads wait on disk or network); rejects go to a tagged output at once.

    Takes a `ShardTask` or the path of a staged one, loaded here: a shard task is never an
    element between two steps, since Beam estimates an element's size by pickling a sample of
    them (every one of the first ten), and a shard task pickles all its inputs
    (benchmarks/NOTES.md#per-step-costs-behind-the-code).

    Also feeds the local progress line (files in `progress_dir`, one count per input read), and,
    on the paths sink, leaves each shard task's reader's done file in the run's temporary folder once
    every input of it went downstream (output.resume).
    """

    def __init__(self, config: ConvertConfig, staged: StagedPlan, progress_dir: str | None = None) -> None:
        super().__init__(config, staged)
        self.progress_dir = progress_dir
        self._progress: ProgressCounter | None = None
        self._pool: ThreadPoolExecutor | None = None

    @property
    def _done_dir(self) -> str | None:
        """Where each shard task leaves its done file, so a rerun keeps what it finished (paths sink)."""
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

    def _prepare(
        self, work: tuple[PlannedInput, ShardKey, RunLabels, RecentFiles]
    ) -> PendingRecord | ConvertedRecord | RejectLine:
        """One input read and validated; with no model to feed, serialized too (`finish_record`),
        here on a read thread: the record's sha256 then releases the GIL on a thread that holds
        no bundle, not on the one that writes and would wait to take the GIL back: less wall time
        for the same CPU (benchmarks/NOTES.md#local-workers)."""
        item, shard, labels, recent = work
        prepared = prepare_input(
            item, self.config.image, shard, labels=labels, storage=self.config.gcs, recent=recent
        )
        if self.config.features is None and isinstance(prepared, PendingRecord):
            return finish_record(self.config.schema, prepared)
        return prepared

    def _outcomes(self, shard_task: ShardTask) -> Iterator[PendingRecord | ConvertedRecord | RejectLine]:
        """The shard task's inputs prepared in order: on the pool's threads and this one when
        there is a pool."""
        shard = ShardKey(shard_task.split, shard_task.index, shard_task.count)
        # Read once, for every input of the shard task.
        labels = RunLabels.of(shard_task.kinds, shard_task.settings)
        recent = RecentFiles()  # the files its pages come from (--pages each), for this shard task
        work = ((item, shard, labels, recent) for item in shard_task.inputs)
        if self._pool is None:
            return map(self._prepare, work)
        # A batch for each reading thread (the pool's and this one) and one done, waiting for this
        # thread to take it: the pool never waits on the consumer's pace, and no more images are
        # held than that.
        window = (self.config.read_threads + 1) * READ_BATCH
        return ordered_submit(self._pool, self._prepare, work, window, READ_BATCH)

    def process(
        self, shard_task: ShardTask | str
    ) -> Iterator[PendingRecord | ConvertedRecord | TaggedOutput[str, RejectLine]]:
        if isinstance(shard_task, str):  # a staged shard task's path: loaded here, never an element
            shard_task = staging.load_shard_task(shard_task)
        rejects: list[RejectLine] = []
        for outcome in self._outcomes(shard_task):
            if self._progress is not None:
                self._progress.add()
            if isinstance(outcome, RejectLine):
                count_outcome(outcome)
                rejects.append(outcome)
                yield TaggedOutput(REJECTS, outcome)
            else:
                yield outcome
        if self._done_dir is not None:  # every input of the shard task has gone downstream
            name = done_files.shard_task_name(shard_task.split, shard_task.index)
            done = done_files.done_path(self._done_dir, name, "read")
            done_files.write_json(done, done_files.ReadOutcome(len(shard_task.inputs), rejects).to_json())

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
    ) -> Iterator[ConvertedRecord | TaggedOutput[str, RejectLine | ChangeLine | DroppedObjectLine]]:
        if isinstance(element, ConvertedRecord):  # serialized on a read thread (ReadShardFn)
            outcome: ConvertedRecord | RejectLine = element
        elif isinstance(element, PendingRecord):
            outcome = finish_record(self.schema, element)
        else:
            # Beam's PredictionResult is not generic: its example is the PendingRecord fed to the
            # model, its inference the features or why there are none (features.inputs.infer).
            example, inference = (
                cast(PendingRecord, element.example),
                cast("np.ndarray | str", element.inference),
            )
            outcome = self._with_features(example, inference)
        count_outcome(outcome)
        if isinstance(outcome, RejectLine):
            yield TaggedOutput(REJECTS, outcome)
            return
        change = change_line(outcome)
        if change is not None:
            yield TaggedOutput(CHANGES, change)
        for line in outcome.dropped:
            yield TaggedOutput(DROPPED, line)
        yield outcome

    def _with_features(
        self, pending: PendingRecord, inference: np.ndarray | str
    ) -> ConvertedRecord | RejectLine:
        assert self.features is not None
        if isinstance(inference, str):
            return RejectLine(
                pending.fields.relpath, reasons.FEATURE_FAILED.code, inference, objects=pending.objects
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
            pending.fields.relpath, reasons.INFERENCE_FAILED.code, detail, objects=pending.objects
        )
        count_outcome(reject)
        yield reject


class ExtractFeatures(
    beam.PTransform[
        beam.PCollection[PendingRecord],
        tuple[beam.PCollection["PredictionResult"], beam.PCollection[RejectLine]],
    ]
):
    """PendingRecord -> RunInference results (main) and RejectLine for failed batches (`rejects`).

    Batches of `batch_size` through Beam's RunInference with a thin handler (features/handler.py); the
    model is loaded once per worker process. Batching keeps a shard task's records in order and
    in its bundle (BatchElements flushes at the end of the bundle), which the paths sink needs.
    """

    def __init__(self, options: FeatureConfig) -> None:
        super().__init__()
        self.options = options

    def expand(
        self, pending: beam.PCollection[PendingRecord]
    ) -> tuple[beam.PCollection[PredictionResult], beam.PCollection[RejectLine]]:
        from apache_beam.ml.inference.base import RunInference

        from beam_tfrecord.features.handler import FeatureModelHandler

        results, failed = (
            pending
            | "RunInference" >> RunInference(FeatureModelHandler(self.options)).with_exception_handling()
        )
        rejects = failed.failed_inferences | "FailedBatches" >> beam.FlatMap(failed_batch_rejects)
        return results, rejects


def content_key(record: ConvertedRecord) -> ContentKey:
    """(source sha256, (path, split)): all a duplicate group needs of a record, no bytes."""
    return record.content_sha256, (record.relpath, record.split)


def duplicate_groups(keys: Iterable[tuple[str, tuple[str, str]]]) -> list[DuplicateGroup]:
    """(sha256, (path, split)) per record (`content_key`) -> a DuplicateGroup for each content that
    more than one record holds, copies sorted by path: as deterministic as the records, whatever
    the runner's order. The metadata step holds every record's key already (for the file index),
    so the groups are found there, about 150 bytes a record and never the image bytes, instead of
    in a GroupByKey of their own."""
    copies: dict[str, list[tuple[str, str]]] = defaultdict(list)
    seen: set[tuple[str, str]] = set()
    for sha256, copy in sorted(keys):  # one picture in two splits (overlapping_splits) is no copy
        if (sha256, copy[0]) not in seen:
            seen.add((sha256, copy[0]))
            copies[sha256].append(copy)
    return [
        DuplicateGroup(sha256, tuple(sorted(found)))
        for sha256, found in sorted(copies.items())
        if len(found) > 1
    ]


class LoadFinishedFn(RunStepFn):
    """An interrupted run's finished shard tasks (output.resume), read back on a rerun: each one's
    temporary (or already final) shard, and everything the summary counts of it, on the outputs
    the shard tasks would have given: tallies, rejects, changes, dropped objects, content keys."""

    def process(self, _: str) -> Iterator[WrittenShard | TaggedOutput[str, _Counted]]:
        temp_dir, output, shard_format = self.staged.temp_dir, self.config.output, self.config.shard_format
        for shard_task in self.staged.finished:
            read = done_files.read_outcomes(temp_dir, [shard_task])[shard_task]
            tally = Tally()
            for reject in read.rejects:
                yield TaggedOutput(REJECTS, reject)
            written = resume.load_written(temp_dir, shard_task, output, shard_format)
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
