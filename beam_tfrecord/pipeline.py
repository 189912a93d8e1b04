"""The whole conversion as one composite transform that a user can apply in their own pipeline."""

from __future__ import annotations

import dataclasses
import time
import uuid
from collections.abc import Iterator, Mapping
from typing import Any

import apache_beam as beam
from apache_beam.io.filesystems import FileSystems

from beam_tfrecord import shardwriter
from beam_tfrecord.features import FeatureOptions
from beam_tfrecord.images import ImageOptions
from beam_tfrecord.metadata import Tally, build_summary, write_metadata
from beam_tfrecord.plan import Plan, RejectLine, shard_tasks
from beam_tfrecord.transforms import (
    ConvertImages,
    ConvertWithFeatures,
    MergeTallies,
    WriteShardFn,
    WriteShards,
    WriteSplits,
    tally_outcomes,
)

SINKS = ("paths", "beam")


@dataclasses.dataclass(frozen=True)
class ConvertConfig:
    """What the records look like and where they go; the plan says what goes in."""

    output: str
    schema: str = "tfds"
    image_options: ImageOptions = dataclasses.field(default_factory=ImageOptions)
    compression: str = "none"
    progress_dir: str | None = None
    # "paths": plan shards on paths, each worker writes whole shards (no image bytes grouped);
    # "beam": WriteToTFRecord per split (for runners whose shuffle service holds the records).
    sink: str = "paths"
    threads: int = 2  # read/decode threads per shard (per process with processes > 1), "paths" sink only
    processes: int = 1  # worker processes per shard writer (see decodepool), "paths" sink only
    split_seed: int = 0
    # A feature model makes every image one element through RunInference, so the run uses the
    # per-image flow and WriteToTFRecord whatever `sink` says.
    features: FeatureOptions | None = None
    # Feature runs only: let WriteToTFRecord write each bundle's records as they come
    # (num_shards=0, the runner picks the shard count) instead of grouping every record by shard.
    # A local runner holds grouped records in memory: unpooled EfficientNetB0 features are
    # 250 KB a record, about 2 MB of peak memory a record once grouped.
    stream_shards: bool = False


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

    def __init__(
        self,
        plan: Plan,
        config: ConvertConfig,
        run_info: Mapping[str, Any] | None = None,
        stage_plan: bool = True,
    ):
        """`stage_plan`: with the paths sink, write each shard's plan as a file under the output's
        temporary folder when the pipeline is built (False embeds it in the graph instead: for
        dry runs, which must not write)."""
        super().__init__()
        self.stage_plan = stage_plan
        self.plan = plan
        self.config = config
        self.run_info = dict(run_info or {})

    def expand(self, root: beam.pvalue.PBegin) -> beam.PCollection[dict[str, Any]]:
        if self.config.features is not None:
            shards, rejects, tally = self._write_with_features(root)
        elif self.config.sink == "paths":
            shards, rejects, tally = self._write_planned_shards(root)
        elif self.config.sink == "beam":
            shards, rejects, tally = self._write_with_beam_sink(root)
        else:
            raise ValueError(f"sink must be one of {SINKS}, not {self.config.sink!r}")
        return (
            root
            | "Once" >> beam.Create([None])
            | "WriteMetadata"
            >> beam.ParDo(
                WriteMetadataFn(self.plan, self.config.output, self.run_info),
                tally=beam.pvalue.AsSingleton(tally),
                rejects=beam.pvalue.AsList(rejects),
                shards=beam.pvalue.AsList(shards),
            )
        )

    def _write_planned_shards(self, root: beam.pvalue.PBegin):
        config = self.config
        temp_dir = shardwriter.temp_dir_for(config.output, uuid.uuid4().hex[:12])
        fn = WriteShardFn(
            temp_dir,
            config.schema,
            config.image_options,
            config.compression,
            config.threads,
            config.progress_dir,
            config.processes,
        )
        # ShardTask: one output shard and the paths that go into it; no bytes yet.
        planned = shard_tasks(self.plan, config.split_seed)
        if self.stage_plan:  # str: a staged plan file per shard, read back by the worker
            staged = [shardwriter.stage_task(task, temp_dir) for task in planned]
            tasks = (
                root
                | "PlanShards" >> beam.Create(staged)
                | "LoadShardPlan" >> beam.Map(shardwriter.load_task)
            )
        else:
            tasks = root | "PlanShards" >> beam.Create(planned)
        shards, rejects, tallies = tasks | "WriteShards" >> WriteShards(fn, config.output)
        return shards, rejects, tallies | "Tally" >> beam.CombineGlobally(MergeTallies())

    def _write_with_beam_sink(self, root: beam.pvalue.PBegin):
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
        return shards, converted.rejects, tally_outcomes(converted.records, converted.rejects)

    def _write_with_features(self, root: beam.pvalue.PBegin):
        config = self.config
        assert config.features is not None
        # PlannedInput: a path, its size, split and label; no bytes yet.
        inputs = root | "Plan" >> beam.Create(self.plan.inputs, reshuffle=False)
        # ConvertedRecord with the model's features in its example | RejectLine.
        records, rejects = inputs | "Features" >> ConvertWithFeatures(
            config.schema, config.image_options, config.features, config.progress_dir
        )
        counts = dict.fromkeys(self.plan.shard_counts, 0) if config.stream_shards else self.plan.shard_counts
        shards = records | "Write" >> WriteSplits(config.output, counts, config.compression)
        return shards, rejects, tally_outcomes(records, rejects)
