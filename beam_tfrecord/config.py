"""The typed settings of a conversion: what goes in (`SourceConfig`, the plan stage's) and what
comes out (`ConvertConfig`, which holds the image stage's `ImageOptions` and the feature stage's
`FeatureOptions`).

The library takes these objects, never a command line: `pipelines/options.py` builds them from
`PipelineOptions`, a user's own pipeline builds them directly, and summary.json records them
field by field (`summary_fields`), so the metadata and the reader depend on the config, not on
how it was made. Each class checks itself when made and raises `ConfigError` naming the field.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Literal, get_args

from beam_tfrecord.config_base import ConfigError, check_choice
from beam_tfrecord.features.options import FeatureOptions
from beam_tfrecord.gcs import GcsSettings
from beam_tfrecord.images.options import ImageOptions
from beam_tfrecord.keys import SCHEMAS
from beam_tfrecord.plan.source_config import LABEL_SOURCES, SourceConfig

__all__ = [
    "COMPRESSIONS",
    "LABEL_SOURCES",
    "SCHEMAS",
    "SINKS",
    "ConfigError",
    "ConvertConfig",
    "FeatureOptions",
    "ImageOptions",
    "SourceConfig",
    "summary_options",
]

SchemaName = Literal["tfds", "simple"]
CompressionName = Literal["none", "gzip"]
# "paths": shards planned on paths, each written whole by one worker (no image bytes shuffled);
# "beam": Beam's WriteToTFRecord per split (groups every record by shard: the bytes are shuffled).
SinkName = Literal["paths", "beam"]
COMPRESSIONS: tuple[str, ...] = get_args(CompressionName)
SINKS: tuple[str, ...] = get_args(SinkName)


@dataclass(frozen=True)
class ConvertConfig:
    """What the records look like and where they go.

    Args:
      output: the folder for shards and metadata, local or gs://.
      schema: the record keys: tfds (`image/encoded`, ...) or simple (`image_raw`, ...).
      compression: none or gzip (`.tfrecord.gz`).
      image: how the stored image may differ from the source (format, size, channels, limits).
      features: the optional feature model; None for a plain conversion.
      sink: paths (the default on every runner) or beam (WriteToTFRecord).
      num_shards: shards per split; None derives them from `shard_size_mb` and the parallelism.
      shard_size_mb: the target shard size when `num_shards` is None.
      read_threads: threads that read and decode inside one shard task, to hide read latency
        (remote storage); locally the runner's workers keep the cores busy.
      gcs: the time limit of each gs:// request before it is retried (applied to every request
        the run makes, Beam's included, in every process that runs a step of it).
    """

    output: str
    schema: SchemaName = "tfds"
    compression: CompressionName = "none"
    image: ImageOptions = field(default_factory=ImageOptions)
    features: FeatureOptions | None = None
    sink: SinkName = "paths"
    num_shards: int | None = None
    shard_size_mb: float = 128.0
    read_threads: int = 1
    gcs: GcsSettings = field(default_factory=GcsSettings)

    def __post_init__(self) -> None:
        check_choice("schema", self.schema, SCHEMAS)
        check_choice("compression", self.compression, COMPRESSIONS)
        check_choice("sink", self.sink, SINKS)
        if self.num_shards is not None and self.num_shards < 1:
            raise ConfigError("num_shards", "must be at least 1")
        if not self.shard_size_mb > 0:
            raise ConfigError("shard_size_mb", "must be positive")
        if self.read_threads < 1:
            raise ConfigError("read_threads", "must be at least 1")
        if not self.gcs.timeout_s > 0:
            raise ConfigError("gcs.timeout_s", "must be positive (seconds)")
        if not self.gcs.retry_deadline_s > 0:
            raise ConfigError("gcs.retry_deadline_s", "must be positive (seconds)")

    def summary_fields(self) -> dict[str, Any]:
        """How summary.json's `options` record these settings: the image options among them, and
        of the feature model only whether the image was dropped (summary.json's `features`
        section says the rest)."""
        return {
            "output": self.output,
            "schema": self.schema,
            "compression": self.compression,
            **self.image.summary_fields(),
            "features_only": bool(self.features and self.features.features_only),
            "sink": self.sink,
            "num_shards": self.num_shards,
            "shard_size_mb": self.shard_size_mb,
            "read_threads": self.read_threads,
        }


def summary_options(source: SourceConfig | None, config: ConvertConfig | None) -> dict[str, Any]:
    """summary.json's `options`: the source's settings, then the output's (how long a storage
    request may wait, `gcs`, says nothing about what was written)."""
    return {
        **(source.summary_fields() if source is not None else {}),
        **(config.summary_fields() if config is not None else {}),
    }
