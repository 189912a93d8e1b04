"""The sinks: where a run's records become shard files, chosen by `ConvertConfig.sink`.

The paths sink (default) has each worker stream a shard task's records into that shard's file, and
one finalize step rename every shard into place; the beam sink is `WriteToTFRecord` per split (it
groups every record by shard, so the bytes are shuffled). Both give FinalShard (main) and Tally
("tallies").
"""

from __future__ import annotations

import posixpath
from collections.abc import Iterable, Iterator

import apache_beam as beam
from apache_beam.io.filesystems import FileSystems
from apache_beam.pvalue import TaggedOutput
from apache_beam.transforms.window import GlobalWindows
from apache_beam.utils.windowed_value import WindowedValue

from beam_tfrecord import names
from beam_tfrecord.elements import ConvertedRecord, FinalShard, RejectLine, WrittenShard
from beam_tfrecord.names import ShardFormat
from beam_tfrecord.plan.staging import StagedPlan
from beam_tfrecord.write import done_files, shardwriter
from beam_tfrecord.write.output_config import ConvertConfig
from beam_tfrecord.write.records import change_line
from beam_tfrecord.write.run_step import RunStepFn
from beam_tfrecord.write.shardwriter import ShardFiles
from beam_tfrecord.write.tally import Tally, without_pixels
from beam_tfrecord.write.tfrecord_files import index_records

__all__ = [
    "TALLIES",
    "FinalizeShardsFn",
    "MergeTallies",
    "PlannedShardSink",
    "Sink",
    "SinkOutputs",
    "TFRecordSplitsSink",
    "TallyFn",
    "WriteShardFilesFn",
    "index_final_shard",
    "make_sink",
]

TALLIES = "tallies"


class _TallyCombineFn(beam.CombineFn):
    """Combines into one Tally; a subclass says what one input adds."""

    def create_accumulator(self) -> Tally:
        return Tally()

    def merge_accumulators(self, tallies: Iterable[Tally]) -> Tally:
        merged = Tally()
        for tally in tallies:
            merged.merge(tally)
        return merged

    def extract_output(self, tally: Tally) -> Tally:
        return tally


class TallyFn(_TallyCombineFn):
    """Combines outcomes into one `Tally` for summary.json."""

    def add_input(self, tally: Tally, outcome: ConvertedRecord | RejectLine) -> Tally:
        return tally.add(outcome)


class MergeTallies(_TallyCombineFn):
    """Tallies (per bundle, per sink) -> one Tally."""

    def add_input(self, total: Tally, tally: Tally) -> Tally:
        return total.merge(tally)


class WriteShardFilesFn(RunStepFn):
    """Adapts `ShardFiles`: streams each record into its shard's temporary file; at the end of
    the bundle emits the written shards and one Tally of what it wrote ("tallies"). Each shard,
    once closed, leaves its writer's done file beside the plan (output.resume): its tally and
    lines, so a rerun can keep it."""

    def __init__(self, config: ConvertConfig, staged: StagedPlan) -> None:
        super().__init__(config, staged)
        self._files: ShardFiles | None = None
        self._tally = Tally()
        self._ledger: dict[tuple[str, int], done_files.ShardOutcome] = {}

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
            self._ledger[key] = done_files.ShardOutcome(
                shard=None,  # type: ignore[arg-type]  # set when the shard closes (_shard_done)
                bytes=0,
                tally=Tally(),
            )
        ledger = self._ledger[key]
        ledger.tally.add(record)  # counts; keeps no bytes
        change = change_line(record)
        if change is not None:
            ledger.changes.append(change)
        ledger.dropped.extend(record.dropped)
        ledger.content.append((record.content_sha256, record.relpath))

    def _shard_done(self, shard: WrittenShard, size: int) -> None:
        """A shard is closed and indexed: its writer's done file, with everything counted of it.
        Its tally joins the bundle's: every shard a bundle wrote is closed by its end, so the
        bundle's tally is their sum (one count per record, not two)."""
        ledger = self._ledger.pop((shard.split, shard.index))
        self._tally.merge(ledger.tally)
        ledger.shard, ledger.bytes = shard, size
        name = done_files.shard_task_name(shard.split, shard.index)
        done = done_files.done_path(self.staged.temp_dir, name, "written")
        done_files.write_json(done, ledger.to_json())

    def teardown(self) -> None:
        """Drop a file a failed bundle left open: on GCS an upload would otherwise retry from
        its finalizer for minutes. Its temporary object goes with the run's temporary folder."""
        if self._files is not None:
            self._files.abandon()
            self._files = None

    def finish_bundle(self) -> Iterator[WindowedValue | TaggedOutput[str, WindowedValue]]:
        assert self._files is not None
        written, self._files = self._files.close(), None
        for shard in written:
            yield GlobalWindows.windowed_value(shard)
        yield TaggedOutput(TALLIES, GlobalWindows.windowed_value(self._tally))


class FinalizeShardsFn(RunStepFn):
    """Runs once, after every shard task: renames the temporary shards into place."""

    def process(self, _: str, written: list[WrittenShard]) -> Iterator[FinalShard]:
        self.staged.check_fence("the shards' final names")
        config = self.config
        yield from shardwriter.finalize_shards(
            written, config.output, config.shard_format, self.staged.shard_counts, config.array_record_options
        )


# What a sink gives: the shards in place, and the records' counts (Tallies, merged downstream).
SinkOutputs = tuple[beam.PCollection[FinalShard], beam.PCollection[Tally]]
# ConvertedRecord -> SinkOutputs: what `make_sink` makes.
Sink = beam.PTransform[beam.PCollection[ConvertedRecord], SinkOutputs]


class PlannedShardSink(Sink):
    """ConvertedRecord -> FinalShard (main) and Tally ("tallies"): the default sink.

    Each shard task's records are written by the worker that read them (no bytes shuffled);
    a finalize step renames every shard into place once all are written. `resumed` holds the
    WrittenShards an interrupted run finished, which a rerun keeps (LoadFinishedFn); `start`, the
    pipeline's one element that starts the finalize step (else the sink makes its own).
    """

    def __init__(
        self,
        config: ConvertConfig,
        staged: StagedPlan,
        resumed: beam.PCollection[WrittenShard] | None = None,
        start: beam.PCollection[str] | None = None,
    ) -> None:
        super().__init__()
        self.config = config
        self.staged = staged
        self.resumed = resumed
        self.start = start

    def expand(self, records: beam.PCollection[ConvertedRecord]) -> SinkOutputs:
        written = records | "WriteShardFiles" >> beam.ParDo(
            WriteShardFilesFn(self.config, self.staged)
        ).with_outputs(TALLIES, main="written")
        shards = written.written
        if self.resumed is not None:
            shards = (shards, self.resumed) | "WithResumed" >> beam.Flatten()
        start = self.start
        if start is None:  # the sink on its own: a Create of its own starts the finalize step
            start = records.pipeline | "Start" >> beam.Create([self.staged.plan_dir])
        finals = start | "Finalize" >> beam.ParDo(
            FinalizeShardsFn(self.config, self.staged), written=beam.pvalue.AsList(shards)
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


class TFRecordSplitsSink(Sink):
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

    def expand(self, records: beam.PCollection[ConvertedRecord]) -> SinkOutputs:
        splits = list(self.shard_counts)
        by_split = records | "BySplit" >> beam.Partition(
            lambda r, _n: splits.index(r.split),  # type: ignore[arg-type]  # Beam's hint omits callables
            len(splits),
        )
        written = []
        for name, part in zip(splits, by_split, strict=True):
            written.append(
                part
                | f"Bytes[{name}]" >> beam.Map(lambda r: r.example)
                | f"Write[{name}]"
                >> beam.io.WriteToTFRecord(
                    FileSystems.join(self.output, name),
                    file_name_suffix=self.shard_format.suffix,
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
    config: ConvertConfig,
    staged: StagedPlan,
    resumed: beam.PCollection[WrittenShard] | None = None,
    start: beam.PCollection[str] | None = None,
) -> Sink:
    """The sink object a config names: `paths` (default) or `beam` (which never resumes, and whose
    steps are Beam's: they use the gs:// settings of the worker process they run in). `start`:
    the pipeline's one element (the plan's folder) that starts its one-off steps, the paths
    sink's finalize step among them."""
    if config.sink == "paths":
        return PlannedShardSink(config, staged, resumed, start)
    if config.sink == "beam":
        return TFRecordSplitsSink(config, staged)
    raise ValueError(f"sink must be paths or beam, not {config.sink!r}")
