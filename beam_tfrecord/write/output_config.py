"""What comes out of a conversion: `ConvertConfig`, which holds the image stage's `ImageConfig`
and the feature stage's `FeatureConfig`; each field declared once with its option
(config_base.setting). The library takes these objects, never a command line; summary.json
records them (`to_json`), so the metadata and the readers depend on the config, not on how it
was made. Each class checks itself when made and raises `ConfigError` naming the field.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal, get_args

from beam_tfrecord.config_base import GCS_OBJECT, Config, ConfigError, check_choice, documented, setting
from beam_tfrecord.features.options import FeatureConfig
from beam_tfrecord.gcs import GcsConfig
from beam_tfrecord.images.options import ImageConfig
from beam_tfrecord.keys import SCHEMAS
from beam_tfrecord.names import FILE_FORMATS, ShardFormat
from beam_tfrecord.write.array_record_files import DEFAULT_OPTIONS as DEFAULT_ARRAY_RECORD_OPTIONS
from beam_tfrecord.write.array_record_files import check_options as check_array_record_options

__all__ = ["COMPRESSIONS", "DEFAULT_ARRAY_RECORD_OPTIONS", "SINKS", "ConvertConfig"]

SchemaName = Literal["tfds", "simple"]
CompressionName = Literal["none", "gzip"]
FileFormatName = Literal["tfrecord", "array_record"]

# "paths": shards planned on paths, each written whole by one worker (no image bytes shuffled);
# "beam": Beam's WriteToTFRecord per split (groups every record by shard: the bytes are shuffled).
SinkName = Literal["paths", "beam"]
COMPRESSIONS: tuple[str, ...] = get_args(CompressionName)
SINKS: tuple[str, ...] = get_args(SinkName)


@documented
@dataclass(frozen=True)
class ConvertConfig(Config):
    """What the records look like and where they go."""

    output: str = setting(
        shapes_records=False,
        group="output",
        label="Output folder",
        pattern=GCS_OBJECT,
        help="where shards and metadata go; an earlier run's files there need --overwrite",
    )
    schema: SchemaName = setting(
        "tfds",
        details="`tfds` or `simple` record keys ([output-files](output-files.md#record-keys))",
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
    file_format: FileFormatName = setting(
        "tfrecord",
        record_default=False,
        details="`array_record`: `.array_record` shards for random access (Grain, TFDS's "
        "`as_data_source`), the same records, no `.idx` ([ArrayRecord](array_record.md))",
        group="output",
        label="Shard file format",
        choices=FILE_FORMATS,
        help="tfrecord, or array_record for random access (Grain, tfds as_data_source)",
    )
    array_record_options: str = setting(
        DEFAULT_ARRAY_RECORD_OPTIONS,
        record_default=False,
        details="the `array_record` writer's option string, e.g. `group_size:64,zstd` (smaller, slower to "
        "read at random)",
        group="output",
        label="ArrayRecord writer options",
        help="the ArrayRecord writer's options (TFDS's group_size:1 unless given)",
    )
    image: ImageConfig = setting(factory=ImageConfig, nested=ImageConfig)
    features: FeatureConfig | None = setting(
        None,
        nested=FeatureConfig,
        needs=("feature_model", "model_path"),
        needs_text="--feature_model or --model_path",
        record_text=lambda features: {"features_only": bool(features and features.features_only)},
    )
    sink: SinkName = setting(
        "paths",
        shapes_records=False,
        details="`paths` (workers write whole shards planned on paths) or `beam` (Beam's "
        "`WriteToTFRecord`, shuffling every record)",
        group="output",
        label="Sink",
        choices=SINKS,
        help="paths: each worker writes whole shards planned on paths; beam: Beam's WriteToTFRecord "
        "(shuffles every record)",
    )
    num_shards: int | None = setting(
        None,
        shapes_records=False,
        details="shards per split (not with `--shard_size_mb`); derived, at least one per worker, down to "
        "a quarter of the target size",
        default_doc="derived",
        group="splits and shards",
        label="Shards per split",
        value_type=int,
        minimum=1,
        help="shards per split (default: from --shard_size_mb, at least one per worker)",
    )
    shard_size_mb: float = setting(
        128.0,
        shapes_records=False,
        group="splits and shards",
        label="Target shard size (MB)",
        value_type=float,
        help="target shard size when --num_shards is not given",
    )
    read_threads: int = setting(
        1,
        shapes_records=False,
        details="threads reading and decoding inside one shard task, hiding read latency",
        option_default=None,
        default_doc="gs://: 8; local: 2 in one in-process worker, else 1",
        group="storage",
        label="Read threads per shard task",
        value_type=int,
        minimum=1,
        help="threads that read and decode inside one shard task (default: 8 for gs:// input; "
        "locally 2 for one in-process worker, 1 per worker process)",
    )
    gcs: GcsConfig = setting(factory=GcsConfig, nested=GcsConfig, shapes_records=False)

    def __post_init__(self) -> None:
        check_choice("schema", self.schema, SCHEMAS)
        check_choice("compression", self.compression, COMPRESSIONS)
        check_choice("sink", self.sink, SINKS)
        check_choice("file_format", self.file_format, FILE_FORMATS)
        if self.file_format == "array_record":
            if self.compression != "none":
                raise ConfigError(
                    "compression",
                    "applies to TFRecord shards; ArrayRecord compresses inside "
                    "(--array_record_options group_size:64,zstd)",
                )
            if self.sink == "beam":
                raise ConfigError(
                    "sink", "beam writes TFRecord only (WriteToTFRecord); ArrayRecord needs paths"
                )
            try:
                check_array_record_options(self.array_record_options)
            except ValueError as error:
                raise ConfigError("array_record_options", str(error)) from None
        elif self.array_record_options != DEFAULT_ARRAY_RECORD_OPTIONS:
            raise ConfigError("array_record_options", "applies with --file_format array_record only")
        if self.image.additional_channels and self.schema != "tfds":
            raise ConfigError(
                "image.additional_channels",
                f"needs the tfds schema: the {self.schema} schema has no Object Detection API keys",
            )
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

    @property
    def shard_format(self) -> ShardFormat:
        return ShardFormat(self.file_format, self.compression)
