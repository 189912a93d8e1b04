"""What comes out of a conversion: `ConvertConfig`, which holds the image stage's `ImageOptions`
and the feature stage's `FeatureOptions`; each field declared once with its option
(config_base.setting). The library takes these objects, never a command line; summary.json
records them (`to_json`), so the metadata and the readers depend on the config, not on how it
was made. Each class checks itself when made and raises `ConfigError` naming the field.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal, get_args

from beam_tfrecord.config_base import GCS_OBJECT, Config, ConfigError, check_choice, setting
from beam_tfrecord.features.options import FeatureOptions
from beam_tfrecord.gcs import GcsSettings
from beam_tfrecord.images.options import ImageOptions
from beam_tfrecord.keys import SCHEMAS

__all__ = ["COMPRESSIONS", "SINKS", "ConvertConfig"]

SchemaName = Literal["tfds", "simple"]
CompressionName = Literal["none", "gzip"]
# "paths": shards planned on paths, each written whole by one worker (no image bytes shuffled);
# "beam": Beam's WriteToTFRecord per split (groups every record by shard: the bytes are shuffled).
SinkName = Literal["paths", "beam"]
COMPRESSIONS: tuple[str, ...] = get_args(CompressionName)
SINKS: tuple[str, ...] = get_args(SinkName)


@dataclass(frozen=True)
class ConvertConfig(Config):
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

    output: str = setting(
        shapes_records=False,
        group="output",
        label="Output folder",
        pattern=GCS_OBJECT,
        help="where shards and metadata go; an earlier run's files there need --overwrite",
    )
    schema: SchemaName = setting(
        "tfds",
        details="`tfds` keys (`image/encoded`, `image/format`, `image/height`, `image/width`, "
        "`image/channels`, `image/class/label`, `image/class/text`, `image/filename`, "
        "`image/key/sha256`) or `simple` (`image_raw`, `label`, `id`, `height`, `width`, `depth`, "
        "`sha256`)",
        group="output",
        label="Feature schema",
        choices=SCHEMAS,
        help="the record keys: tfds (image/encoded, image/class/label, ...) or simple (image_raw, label)",
    )
    compression: CompressionName = setting(
        "none",
        details="`gzip` writes `.tfrecord.gz` (TFDS reads uncompressed shards only)",
        group="output",
        label="Compression",
        choices=COMPRESSIONS,
        help="gzip writes .tfrecord.gz shards (TFDS reads uncompressed ones only)",
    )
    image: ImageOptions = setting(factory=ImageOptions, nested=ImageOptions)
    features: FeatureOptions | None = setting(
        None,
        nested=FeatureOptions,
        needs=("feature_model", "model_path"),
        needs_text="--feature_model or --model_path",
        record_text=lambda features: {"features_only": bool(features and features.features_only)},
    )
    sink: SinkName = setting(
        "paths",
        shapes_records=False,
        details="`paths` (shards planned on paths, each written whole by one worker: no image bytes shuffled)"
        " or `beam` (Beam's `WriteToTFRecord`, which shuffles every record once), on every runner",
        group="output",
        label="Sink",
        choices=SINKS,
        help="paths: each worker writes whole shards planned on paths; beam: Beam's WriteToTFRecord "
        "(shuffles every record)",
    )
    num_shards: int | None = setting(
        None,
        shapes_records=False,
        details="shards per split (or `--shard_size_mb`, not both); a derived count grows to give every "
        "worker a shard, down to shards of a quarter of the target",
        default_doc="derived",
        group="splits and shards",
        label="Shards per split",
        kind=int,
        minimum=1,
        help="shards per split (default: from --shard_size_mb, at least one per worker)",
    )
    shard_size_mb: float = setting(
        128.0,
        shapes_records=False,
        group="splits and shards",
        label="Target shard size (MB)",
        kind=float,
        help="target shard size when --num_shards is not given",
    )
    read_threads: int = setting(
        1,
        shapes_records=False,
        details="threads that read and decode inside one shard task, to hide read latency; the parallelism "
        "comes from the runner's workers",
        option="decode_threads",
        option_default=None,
        default_doc="local input: 2 in one in-process worker, 1 per worker process; gs:// input: 8",
        group="storage",
        label="Decode threads per shard writer",
        kind=int,
        minimum=1,
        help="threads that read and decode inside one shard task (default: 8 for gs:// input; "
        "locally 2 for one in-process worker, 1 per worker process)",
    )
    gcs: GcsSettings = setting(factory=GcsSettings, nested=GcsSettings, shapes_records=False)

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
