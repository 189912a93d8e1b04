"""The whole conversion as one composite transform that a user can apply in their own pipeline."""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Iterator, Mapping
from typing import Any

import apache_beam as beam
from apache_beam.io.filesystems import FileSystems

from beam_tfrecord.images import ImageOptions
from beam_tfrecord.metadata import Tally, build_summary, write_metadata
from beam_tfrecord.plan import Plan, RejectLine
from beam_tfrecord.transforms import ConvertImages, WriteSplits, tally_outcomes


@dataclasses.dataclass(frozen=True)
class ConvertConfig:
    """What the records look like and where they go; the plan says what goes in."""

    output: str
    schema: str = "tfds"
    image_options: ImageOptions = dataclasses.field(default_factory=ImageOptions)
    compression: str = "none"
    progress_dir: str | None = None


class WriteMetadataFn(beam.DoFn):
    """Runs once, after every shard is final: labels.txt, rejects.jsonl, then summary.json."""

    def __init__(self, plan: Plan, output: str, run_info: Mapping[str, Any]) -> None:
        self.plan = dataclasses.replace(plan, inputs=[])  # the listing is not needed here
        self.output = output
        self.run_info = dict(run_info)

    def process(
        self, _: None, tally: Tally, rejects: list[RejectLine], shards: list[str]
    ) -> Iterator[dict[str, Any]]:
        sizes = []
        if shards:
            for result in FileSystems.match(sorted(shards)):
                sizes += [(m.path, m.size_in_bytes) for m in result.metadata_list]
        run_info = dict(self.run_info)
        if "started_at" in run_info:
            run_info["wall_time_s"] = round(time.time() - run_info["started_at"], 2)
        summary = build_summary(self.plan, tally, sizes, run_info)
        write_metadata(self.output, self.plan.class_names, [*self.plan.rejects, *rejects], summary)
        yield summary


class ImagesToTFRecords(beam.PTransform):
    """PBegin -> PCollection holding the one summary dict, once every file is written."""

    def __init__(self, plan: Plan, config: ConvertConfig, run_info: Mapping[str, Any] | None = None):
        super().__init__()
        self.plan = plan
        self.config = config
        self.run_info = dict(run_info or {})

    def expand(self, root: beam.pvalue.PBegin) -> beam.PCollection[dict[str, Any]]:
        config = self.config
        # PlannedInput: a path, its size, split and label; no bytes yet.
        inputs = root | "Plan" >> beam.Create(self.plan.inputs, reshuffle=False)
        converted = inputs | "Convert" >> ConvertImages(
            config.schema, config.image_options, config.progress_dir
        )
        # str: the final path of each shard, once WriteToTFRecord has finalized it.
        shards = converted.records | "Write" >> WriteSplits(
            config.output, self.plan.shard_counts, config.compression
        )
        tally = tally_outcomes(converted.records, converted.rejects)
        return (
            root
            | "Once" >> beam.Create([None])
            | "WriteMetadata"
            >> beam.ParDo(
                WriteMetadataFn(self.plan, config.output, self.run_info),
                tally=beam.pvalue.AsSingleton(tally),
                rejects=beam.pvalue.AsList(converted.rejects),
                shards=beam.pvalue.AsList(shards),
            )
        )
