"""The typed settings of a conversion: what goes in (`SourceConfig`) and what comes out
(`ConvertConfig`).

The library takes these objects, never a command line: `pipelines/options.py` builds them from
`PipelineOptions`, a user's own pipeline builds them directly, and summary.json records them
(`summary_options`), so the metadata and the reader depend on the config, not on how it was made.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Literal, get_args

from beam_tfrecord.features.options import DTYPES, POOLINGS, PRECISIONS, FeatureOptions
from beam_tfrecord.images.normalize import IMAGE_FORMATS, RESIZE_MODES, ImageOptions
from beam_tfrecord.plan.columns import ExtraColumn, parse_extra_columns
from beam_tfrecord.plan.labels import LABEL_MODES, compile_label_pattern

__all__ = [
    "COMPRESSIONS",
    "LABEL_SOURCES",
    "SCHEMAS",
    "SINKS",
    "ConfigError",
    "ConvertConfig",
    "SourceConfig",
    "check_feature_options",
    "summary_options",
]

LabelSourceName = Literal["folder", "filename", "manifest", "none"]
SchemaName = Literal["tfds", "simple"]
CompressionName = Literal["none", "gzip"]
# "paths": shards planned on paths, each written whole by one worker (no image bytes shuffled);
# "beam": Beam's WriteToTFRecord per split (groups every record by shard: the bytes are shuffled).
SinkName = Literal["paths", "beam"]

LABEL_SOURCES: tuple[str, ...] = LABEL_MODES
SCHEMAS: tuple[str, ...] = get_args(SchemaName)
COMPRESSIONS: tuple[str, ...] = get_args(CompressionName)
SINKS: tuple[str, ...] = get_args(SinkName)


class ConfigError(ValueError):
    """A setting that cannot work; `name` is the setting (and the command line's option)."""

    def __init__(self, name: str, problem: str) -> None:
        super().__init__(f"{name} {problem}")
        self.name = name
        self.problem = problem


def _choice(name: str, value: object, choices: tuple[object, ...]) -> None:
    if value not in choices:
        raise ConfigError(name, f"must be one of {', '.join(map(str, choices))}, not {value!r}")


@dataclass(frozen=True)
class SourceConfig:
    """What goes in: where the images are, where their classes come from, how they split.

    Args:
      input: a directory (recursive), a glob or one file, local or gs://.
      label_source: folder (parent folder), filename (with `label_pattern`), manifest (with
        `manifest`) or none.
      label_pattern: a regular expression whose first group is the class, for `filename`.
      manifest: a CSV or JSONL file of path-or-id and label, for `manifest`.
      class_names: fixes the label ids (else the sorted names found).
      splits: split name -> fraction, summing to 1.
      split_seed: seed of the path hash that assigns splits.
      stratify: give every class each split's exact share.
      group_pattern: a regular expression whose first group, searched in the path relative to
        `input`, is the file's group: a group is split as one (never in two splits).
      manifest_path_column, manifest_label_column: the manifest's path-or-id and label columns
        (default: the first of the usual names present, see labels.PATH_COLUMNS).
      extra_columns: manifest columns stored in every record (`ExtraColumn`s, or their text,
        `caption,score:float`).
      multi_label: a label cell holds several classes (`cat|outdoor`, or a JSON array).
      dedupe: keep one copy of inputs with identical bytes (the smallest relative path).
    """

    input: str
    label_source: LabelSourceName = "folder"
    label_pattern: str | None = None
    manifest: str | None = None
    class_names: tuple[str, ...] | None = None
    splits: Mapping[str, float] = field(default_factory=lambda: {"train": 1.0})
    split_seed: int = 0
    stratify: bool = False
    group_pattern: str | None = None
    manifest_path_column: str | None = None
    manifest_label_column: str | None = None
    extra_columns: tuple[ExtraColumn, ...] = ()
    multi_label: bool = False
    dedupe: bool = False

    def __post_init__(self) -> None:
        _choice("label_source", self.label_source, LABEL_SOURCES)
        if isinstance(self.extra_columns, str):
            try:
                object.__setattr__(self, "extra_columns", parse_extra_columns(self.extra_columns))
            except ValueError as error:
                raise ConfigError(
                    "extra_columns", str(error).removeprefix("--extra_columns").lstrip(": ")
                ) from None
        object.__setattr__(self, "extra_columns", tuple(self.extra_columns))
        manifest_only = {
            "extra_columns": bool(self.extra_columns),
            "multi_label": self.multi_label,
            "manifest_path_column": bool(self.manifest_path_column),
            "manifest_label_column": bool(self.manifest_label_column),
        }
        for name, given in manifest_only.items():
            if given and self.label_source != "manifest":
                raise ConfigError(name, "reads the manifest: it needs label_source manifest")
        if self.group_pattern is not None:
            try:
                compile_label_pattern(self.group_pattern, "group_pattern", "the group")
            except ValueError as error:
                raise ConfigError("group_pattern", str(error).removeprefix("--group_pattern ")) from None
        if self.label_source == "filename" and not self.label_pattern:
            raise ConfigError("label_pattern", "is needed with label_source filename, e.g. '^(cat|dog)\\.'")
        if self.label_source == "manifest" and not self.manifest:
            raise ConfigError("manifest", "is needed with label_source manifest (a CSV or JSONL file)")
        if not self.splits:
            raise ConfigError("splits", "must name at least one split")
        if not math.isclose(sum(self.splits.values()), 1.0, abs_tol=1e-6):
            raise ConfigError("splits", f"fractions must sum to 1, not {sum(self.splits.values()):g}")
        object.__setattr__(self, "splits", dict(self.splits))
        if self.class_names is not None:
            object.__setattr__(self, "class_names", tuple(self.class_names))


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

    def __post_init__(self) -> None:
        _choice("schema", self.schema, SCHEMAS)
        _choice("compression", self.compression, COMPRESSIONS)
        _choice("sink", self.sink, SINKS)
        if self.num_shards is not None and self.num_shards < 1:
            raise ConfigError("num_shards", "must be at least 1")
        if not self.shard_size_mb > 0:
            raise ConfigError("shard_size_mb", "must be positive")
        if self.read_threads < 1:
            raise ConfigError("read_threads", "must be at least 1")
        image = self.image
        _choice("image_format", image.image_format, IMAGE_FORMATS)
        _choice("resize_mode", image.resize_mode, RESIZE_MODES)
        _choice("channels", image.channels, (None, 1, 3))
        if not 1 <= image.jpeg_quality <= 100:
            raise ConfigError("jpeg_quality", "must be in 1..100")
        if image.max_pixels < 1:
            raise ConfigError("max_pixels", "must be positive")
        if not image.max_file_mb > 0:
            raise ConfigError("max_file_mb", "must be positive")
        if self.features is not None:
            check_feature_options(self.features)


def check_feature_options(options: FeatureOptions) -> None:
    """Raise ConfigError for a feature model setting that cannot work (before any file is looked at)."""
    if bool(options.feature_model) == bool(options.model_path):
        raise ConfigError("feature_model", "and model_path exclude each other: give exactly one")
    if options.model_path and options.model_weights != "imagenet":
        raise ConfigError("model_weights", "is for feature_model; a model_path model holds its weights")
    _choice("feature_pooling", options.pooling, POOLINGS)
    _choice("feature_dtype", options.dtype, DTYPES)
    _choice("feature_precision", options.precision, PRECISIONS)
    if options.precision != "float32" and options.model_path:
        raise ConfigError(
            "feature_precision",
            "is for feature_model; a model_path model runs in the precision it was saved with",
        )
    if options.batch_size < 1:
        raise ConfigError("inference_batch_size", "must be at least 1")
    if options.model_copies is not None and options.model_copies < 0:
        raise ConfigError("model_copies", "must be 0 (one model per worker process) or more")


def _flat(value: Any) -> Any:
    if isinstance(value, tuple) and value and all(isinstance(v, ExtraColumn) for v in value):
        return [str(v) for v in value]  # `caption:str`, as --extra_columns writes it
    if isinstance(value, tuple) and value and all(isinstance(v, int) for v in value):
        return "x".join(map(str, value))  # a (width, height) size, as --resize writes it
    if isinstance(value, Mapping):
        return dict(value)
    if isinstance(value, tuple):
        return list(value)
    return value


def summary_options(source: SourceConfig | None, config: ConvertConfig | None) -> dict[str, Any]:
    """The settings as summary.json's flat `options`: what the reader, the TFDS metadata and
    `pipelines.inspect` read back (schema, compression, channels, features_only, ...)."""
    options: dict[str, Any] = {}
    if source is not None:
        options.update({f.name: _flat(getattr(source, f.name)) for f in dataclasses.fields(source)})
    for item in dataclasses.fields(config) if config is not None else ():
        value = getattr(config, item.name)
        if item.name == "image":
            options.update({f.name: _flat(getattr(value, f.name)) for f in dataclasses.fields(value)})
        elif item.name == "features":
            options["features_only"] = bool(value and value.features_only)
        else:
            options[item.name] = _flat(value)
    return options
