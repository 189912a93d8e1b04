"""The Beam side: DoFns that adapt the plain functions, and the composite transforms.

Element shapes:
  PlannedInput --ConvertImages--> ConvertedRecord (main) | RejectLine ("rejects")
  ConvertedRecord --WriteSplits--> str (final shard path), one per shard
"""

from __future__ import annotations

from collections.abc import Iterator

import apache_beam as beam
from apache_beam.io.filesystem import CompressionTypes
from apache_beam.io.filesystems import FileSystems
from apache_beam.metrics import Metrics
from apache_beam.pvalue import TaggedOutput

from beam_tfrecord import sharding
from beam_tfrecord.images import ImageOptions
from beam_tfrecord.metadata import Tally, without_pixels
from beam_tfrecord.plan import PlannedInput, RejectLine
from beam_tfrecord.records import ConvertedRecord, convert_input

NAMESPACE = "beam_tfrecord"
REJECTS = "rejects"


class ConvertFn(beam.DoFn):
    """Adapts `convert_input`: counters per outcome, rejects on a tagged output, progress."""

    def __init__(self, schema: str, image_options: ImageOptions, progress_dir: str | None = None):
        self.schema = schema
        self.image_options = image_options
        self.progress_dir = progress_dir
        self._progress = None

    def setup(self) -> None:
        if self.progress_dir:
            from beam_tfrecord.progress import ProgressCounter

            self._progress = ProgressCounter(self.progress_dir)

    def process(self, item: PlannedInput) -> Iterator[ConvertedRecord | TaggedOutput]:
        outcome = convert_input(item, self.schema, self.image_options)
        if self._progress is not None:
            self._progress.add()
        if isinstance(outcome, RejectLine):
            Metrics.counter(NAMESPACE, f"rejected_{outcome.reason}").inc()
            yield TaggedOutput(REJECTS, outcome)
            return
        Metrics.counter(NAMESPACE, "records").inc()
        if outcome.reencoded:
            Metrics.counter(NAMESPACE, "reencoded").inc()
        yield outcome

    def finish_bundle(self) -> None:
        if self._progress is not None:
            self._progress.flush()


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


class WriteSplits(beam.PTransform):
    """One `WriteToTFRecord` per split with the planned shard count; yields the shard paths."""

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
