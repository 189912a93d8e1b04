"""The Beam side: DoFns that adapt the plain functions, and the composite transforms.

Element shapes:
  Beam sink (remote runners, whose shuffle service holds the grouped records):
    PlannedInput --ConvertImages--> ConvertedRecord (main) | RejectLine ("rejects")
    ConvertedRecord --WriteSplits--> str (final shard path), one per shard
  Feature-model runs (any runner; the beam sink writes them):
    PlannedInput --Prepare--> PendingRecord | RejectLine ("rejects")
    PendingRecord --RunInference--> PredictionResult(example=PendingRecord, inference=array|str)
    PredictionResult --BuildRecords--> ConvertedRecord | RejectLine ("rejects")
  Path-planned sink (local runs):
    ShardTask --WriteShards--> str (final shard path) | RejectLine ("rejects") | Tally ("tallies")
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import TYPE_CHECKING

import apache_beam as beam
from apache_beam.io.filesystem import CompressionTypes
from apache_beam.io.filesystems import FileSystems
from apache_beam.metrics import Metrics
from apache_beam.pvalue import TaggedOutput

from beam_tfrecord import sharding, shardwriter
from beam_tfrecord.features import FeatureOptions
from beam_tfrecord.images import ImageOptions
from beam_tfrecord.metadata import Tally, without_pixels
from beam_tfrecord.plan import PlannedInput, RejectLine, ShardTask
from beam_tfrecord.records import ConvertedRecord, PendingRecord, convert_input, finish_record, prepare_input

if TYPE_CHECKING:
    from apache_beam.ml.inference.base import PredictionResult

NAMESPACE = "beam_tfrecord"
REJECTS = "rejects"
TALLIES = "tallies"


def count_outcome(outcome: ConvertedRecord | RejectLine) -> None:
    """One Beam counter per outcome: records, reencoded, rejected_<reason>."""
    if isinstance(outcome, RejectLine):
        Metrics.counter(NAMESPACE, f"rejected_{outcome.reason}").inc()
        return
    Metrics.counter(NAMESPACE, "records").inc()
    if outcome.reencoded:
        Metrics.counter(NAMESPACE, "reencoded").inc()


class OutcomeFn(beam.DoFn):
    """Base of the DoFns that finish inputs: one counter per outcome and the local progress line."""

    def __init__(self, progress_dir: str | None = None) -> None:
        self.progress_dir = progress_dir
        self._progress = None

    def setup(self) -> None:
        if self.progress_dir:
            from beam_tfrecord.progress import ProgressCounter

            self._progress = ProgressCounter(self.progress_dir)

    def _observe(self, outcome: ConvertedRecord | RejectLine) -> None:
        count_outcome(outcome)
        if self._progress is not None:
            self._progress.add()

    def finish_bundle(self) -> None:
        if self._progress is not None:
            self._progress.flush()


class ConvertFn(OutcomeFn):
    """Adapts `convert_input`: counters per outcome, rejects on a tagged output, progress."""

    def __init__(self, schema: str, image_options: ImageOptions, progress_dir: str | None = None):
        super().__init__(progress_dir)
        self.schema = schema
        self.image_options = image_options

    def process(self, item: PlannedInput) -> Iterator[ConvertedRecord | TaggedOutput]:
        outcome = convert_input(item, self.schema, self.image_options)
        self._observe(outcome)
        yield TaggedOutput(REJECTS, outcome) if isinstance(outcome, RejectLine) else outcome


class ConvertImages(beam.PTransform):
    """PlannedInput -> records (main output) and RejectLine (output `rejects`)."""

    def __init__(self, schema: str, image_options: ImageOptions, progress_dir: str | None = None):
        super().__init__()
        self.fn = ConvertFn(schema, image_options, progress_dir)

    def expand(self, inputs: beam.PCollection[PlannedInput]) -> beam.pvalue.DoOutputsTuple:
        return (
            inputs
            # Spread the paths (not bytes) so every worker reads and decodes its share.
            | "SpreadPaths" >> beam.Reshuffle()
            | "ReadDecodeBuild" >> beam.ParDo(self.fn).with_outputs(REJECTS, main="records")
        )


class PrepareFn(beam.DoFn):
    """Adapts `prepare_input`: a validated image waits for its features, a reject goes out now."""

    def __init__(self, image_options: ImageOptions) -> None:
        self.image_options = image_options

    def process(self, item: PlannedInput) -> Iterator[PendingRecord | TaggedOutput]:
        outcome = prepare_input(item, self.image_options)
        if isinstance(outcome, RejectLine):
            count_outcome(outcome)
            yield TaggedOutput(REJECTS, outcome)
        else:
            yield outcome


class BuildRecordFn(OutcomeFn):
    """Adapts `finish_record` to a RunInference result; an image the model could not be fed
    becomes a `feature_failed` reject."""

    def __init__(self, schema: str, options: FeatureOptions, progress_dir: str | None = None) -> None:
        super().__init__(progress_dir)
        self.schema = schema
        self.options = options

    def process(self, result: PredictionResult) -> Iterator[ConvertedRecord | TaggedOutput]:
        pending: PendingRecord = result.example
        if isinstance(result.inference, str):
            outcome: ConvertedRecord | RejectLine = RejectLine(
                pending.fields.relpath, "feature_failed", result.inference
            )
        else:
            outcome = finish_record(
                self.schema,
                pending,
                result.inference.astype("float32", copy=False),
                self.options.dtype,
                include_image=not self.options.features_only,
            )
        self._observe(outcome)
        yield TaggedOutput(REJECTS, outcome) if isinstance(outcome, RejectLine) else outcome


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
        reject = RejectLine(pending.fields.relpath, "inference_failed", detail)
        count_outcome(reject)
        yield reject


class ConvertWithFeatures(beam.PTransform):
    """PlannedInput -> records with the model's features (main) and RejectLine (`rejects`)."""

    def __init__(
        self,
        schema: str,
        image_options: ImageOptions,
        options: FeatureOptions,
        progress_dir: str | None = None,
    ) -> None:
        super().__init__()
        self.schema = schema
        self.image_options = image_options
        self.options = options
        self.progress_dir = progress_dir

    def expand(self, inputs: beam.PCollection[PlannedInput]) -> beam.pvalue.DoOutputsTuple:
        from apache_beam.ml.inference.base import RunInference

        from beam_tfrecord.inference import FeatureModelHandler

        prepared = (
            inputs
            | "SpreadPaths" >> beam.Reshuffle()
            | "ReadDecode" >> beam.ParDo(PrepareFn(self.image_options)).with_outputs(REJECTS, main="pending")
        )
        # PredictionResult(example=PendingRecord, inference=features or why the image failed),
        # in batches of --inference_batch_size; the model is loaded once per worker process.
        results, failed = (
            prepared.pending
            | "RunInference" >> RunInference(FeatureModelHandler(self.options)).with_exception_handling()
        )
        built = results | "BuildRecords" >> beam.ParDo(
            BuildRecordFn(self.schema, self.options, self.progress_dir)
        ).with_outputs(REJECTS, main="records")
        failed_rejects = failed.failed_inferences | "FailedBatches" >> beam.FlatMap(failed_batch_rejects)
        rejects = (prepared[REJECTS], built[REJECTS], failed_rejects) | "AllRejects" >> beam.Flatten()
        return built.records, rejects


class WriteSplits(beam.PTransform):
    """One `WriteToTFRecord` per split with the planned shard count (0: as many as the runner
    makes bundles, with no grouping); yields the shard paths."""

    def __init__(self, output: str, shard_counts: dict[str, int], compression: str = "none"):
        super().__init__()
        self.output = output
        self.shard_counts = shard_counts
        self.compression = compression

    def expand(self, records: beam.PCollection[ConvertedRecord]) -> beam.PCollection[str]:
        names = list(self.shard_counts)
        by_split = records | "BySplit" >> beam.Partition(lambda r, _n: names.index(r.split), len(names))
        written = []
        for name, part in zip(names, by_split, strict=True):
            written.append(
                part
                | f"Bytes[{name}]" >> beam.Map(lambda r: r.example)
                | f"Write[{name}]"
                >> beam.io.WriteToTFRecord(
                    FileSystems.join(self.output, name),
                    file_name_suffix=sharding.shard_suffix(self.compression),
                    num_shards=self.shard_counts[name],
                    shard_name_template=sharding.SHARD_TEMPLATE,
                    compression_type=CompressionTypes.GZIP
                    if self.compression == "gzip"
                    else CompressionTypes.UNCOMPRESSED,
                )
            )
        return tuple(written) | "AllShards" >> beam.Flatten()


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


def tally_outcomes(
    records: beam.PCollection[ConvertedRecord], rejects: beam.PCollection[RejectLine]
) -> beam.PCollection[Tally]:
    """One Tally of all outcomes; the record bytes are dropped before anything is combined."""
    facts = records | "DropPixels" >> beam.Map(without_pixels)
    return (facts, rejects) | "Outcomes" >> beam.Flatten() | "Tally" >> beam.CombineGlobally(TallyFn())


class WriteShardFn(OutcomeFn):
    """Adapts `shardwriter.write_shard`: one ShardTask in, one temporary shard out, plus the
    shard's rejects and one Tally (not one element per record: fewer elements, less overhead)."""

    def __init__(
        self,
        temp_dir: str,
        schema: str,
        image_options: ImageOptions,
        compression: str,
        threads: int,
        progress_dir: str | None = None,
        processes: int = 1,
    ) -> None:
        super().__init__(progress_dir)
        self.temp_dir = temp_dir
        self.schema = schema
        self.image_options = image_options
        self.compression = compression
        self.threads = threads
        self.processes = processes
        self._pool = None

    def setup(self) -> None:
        super().setup()
        if self.processes > 1:
            from beam_tfrecord.decodepool import DecodePool

            self._pool = DecodePool(self.processes, self.schema, self.image_options, self.threads)

    def teardown(self) -> None:
        if self._pool is not None:
            self._pool.close()
            self._pool = None

    def _convert(self, item: PlannedInput) -> ConvertedRecord | RejectLine:
        return convert_input(item, self.schema, self.image_options)

    def _converted(self, inputs: tuple[PlannedInput, ...]) -> Iterator[ConvertedRecord | RejectLine]:
        """In worker processes when there is a pool, else on this process's threads."""
        if self._pool is not None:
            return self._pool.map(inputs)
        return shardwriter.ordered_map(self._convert, inputs, self.threads)

    def process(self, task: ShardTask) -> Iterator[shardwriter.WrittenShard | TaggedOutput]:
        written, outcomes = shardwriter.write_shard(
            task, self.temp_dir, self._converted(task.inputs), self.compression, self._observe
        )
        tally = Tally()
        for outcome in outcomes:
            tally.add(outcome)
            if isinstance(outcome, RejectLine):
                yield TaggedOutput(REJECTS, outcome)
        yield TaggedOutput(TALLIES, tally)
        yield written


class FinalizeShardsFn(beam.DoFn):
    """Runs once, after every shard task: renames the temporary shards into place."""

    def __init__(self, output: str, temp_dir: str, compression: str) -> None:
        self.output = output
        self.temp_dir = temp_dir
        self.compression = compression

    def process(self, _: None, written: list[shardwriter.WrittenShard]) -> Iterator[str]:
        yield from shardwriter.finalize_shards(written, self.output, self.temp_dir, self.compression)


class WriteShards(beam.PTransform):
    """ShardTask -> final shard paths (main), RejectLine ("rejects"), Tally ("tallies")."""

    def __init__(self, fn: WriteShardFn, output: str) -> None:
        super().__init__()
        self.fn = fn
        self.output = output

    def expand(self, tasks: beam.PCollection[ShardTask]) -> beam.pvalue.DoOutputsTuple:
        fn = self.fn
        written = tasks | "WriteShard" >> beam.ParDo(fn).with_outputs(REJECTS, TALLIES, main="written")
        finals = (
            tasks.pipeline
            | "Once" >> beam.Create([None])
            | "Finalize"
            >> beam.ParDo(
                FinalizeShardsFn(self.output, fn.temp_dir, fn.compression),
                written=beam.pvalue.AsList(written.written),
            )
        )
        return finals, written[REJECTS], written[TALLIES]


class MergeTallies(TallyFn):
    """Tally per shard -> one Tally."""

    def add_input(self, total: Tally, tally: Tally) -> Tally:
        return total.merge(tally)
