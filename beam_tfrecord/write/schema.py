"""How a record is written, and the `tf.io` spec that parses it, both from the key tables
(`beam_tfrecord.keys`), so the two cannot drift apart.

Records are built with the project's own Example messages (`example.proto`, loaded by
`messages`), wire-compatible with `tf.train.Example`: `import tensorflow` costs about 3.7 s
and 560 MB per process, more than the rest of a local run of thousands of images needs.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Sequence
from operator import attrgetter

import numpy as np
from google.protobuf.message import Message

from beam_tfrecord.edges import FeatureValue, Tensor
from beam_tfrecord.elements import ColumnValue, RecordFields
from beam_tfrecord.keys import (
    FACTS,
    SCHEMAS,
    FeatureLayout,
    PixelLayout,
    RecordKey,
    RecordLayout,
    StoredPixels,
    extra_key,
    key_of,
    record_keys,
)
from beam_tfrecord.labels import KINDS, Encoder
from beam_tfrecord.plan.columns import ExtraColumn
from beam_tfrecord.write.messages import Example, Feature

__all__ = [
    "SCHEMAS",
    "build_example",
    "layout_of",
    "parse_spec",
    "restore_features",
    "serialize",
]

# How one key's value goes into its Feature message (appended, extended, or copied whole).
Setter = Callable[[Message, FeatureValue], None]


def layout_of(schema: str, fields: RecordFields) -> RecordLayout:
    """The layout one record's fields call for (what the writer writes is what a reader of that
    layout expects)."""
    features = None
    if fields.features is not None:  # (`include_image` is False only in a feature run)
        features = (tuple(fields.features.shape), fields.feature_dtype, fields.include_image)
    extras = tuple((name, column_type) for name, column_type, _ in fields.extras)
    labels = (fields.label is not None, isinstance(fields.label, tuple))
    pixels = fields.depth.layout if fields.depth is not None else None
    return _layout(schema, *labels, extras, features, fields.groups, pixels)


@functools.lru_cache(maxsize=256)
def _layout(
    schema: str,
    labeled: bool,
    multi_label: bool,
    extras: tuple[tuple[str, str], ...],
    features: tuple[tuple[int, ...], str, bool] | None,
    groups: tuple[str, ...] = (),
    depth: PixelLayout | None = None,
) -> RecordLayout:
    """Cached: a run's records share one or two layouts, and building one per record cost about
    a third of the serialization time."""
    feature_layout = FeatureLayout(*features) if features else None
    return RecordLayout(schema, labeled, multi_label, extras, feature_layout, groups, depth)


def _features(fields: RecordFields) -> np.ndarray:
    """A feature run's output: its layout holds the feature keys only when the record has one."""
    assert fields.features is not None
    return fields.features


# A field's value by its key name (keys.RecordKey.name): the image's and the features' here, each
# kind of label's from its own `encoders` (`_encoder`); manifest columns aside.
_FIELDS: dict[str, Encoder] = {
    "image": attrgetter("encoded"),
    "format": attrgetter("format"),
    "height": attrgetter("height"),
    "width": attrgetter("width"),
    "channels": attrgetter("channels"),
    "filename": attrgetter("relpath"),
    "sha256": attrgetter("sha256"),
    "features": attrgetter("features"),
    "features_float16": lambda fields: np.ascontiguousarray(fields.features, dtype="<f2").tobytes(),
    "features_shape": lambda fields: tuple(int(n) for n in _features(fields).shape),
    "dtype": lambda fields: _pixels(fields).dtype,
    "array": attrgetter("encoded"),
    "array_shape": lambda fields: _pixels(fields).shape,
    "additional_channels": lambda fields: _pixels(fields).additional,
}


def _pixels(fields: RecordFields) -> StoredPixels:
    """A picture past 8 bits: its layout holds these keys only when the record has one."""
    assert fields.depth is not None
    return fields.depth


def _fact(name: str) -> Encoder:
    def value(fields: RecordFields) -> FeatureValue:
        found = _pixels(fields).facts[name]
        return ",".join(repr(float(n)) for n in found) if isinstance(found, tuple) else found

    return value


def _encoder(name: str) -> Encoder | None:
    """The named key's value from a record's fields: the image's and features' keys', or the one
    kind of label whose `encoders` name it (asked when a layout's writers are made, once)."""
    if name in _FIELDS:
        return _FIELDS[name]
    if name in FACTS:
        return _fact(name)
    return next((kind.encoders()[name] for kind in KINDS.values() if name in kind.encoders()), None)


def _varint(value: int) -> bytes:
    out = bytearray()
    while True:
        low, value = value & 0x7F, value >> 7
        if not value:
            out.append(low)
            return bytes(out)
        out.append(low | 0x80)


def _floats(values: np.ndarray) -> Message:
    """A Feature holding a packed FloatList, parsed from its wire bytes: faster than building it
    from a feature map's Python floats (benchmarks/NOTES.md#feature-model)."""
    raw = np.ascontiguousarray(values, dtype="<f4").tobytes()
    float_list = b"\x0a" + _varint(len(raw)) + raw  # FloatList.value, field 1, packed
    feature = b"\x12" + _varint(len(float_list)) + float_list  # Feature.float_list, field 2
    return Feature.FromString(feature)


def _setter(key: RecordKey) -> Setter:
    """How one key's value goes into its Feature: appended when it is one value, extended when it
    is a list (set even when empty, so a reader knows its kind)."""
    if key.dtype == "float32" and key.shape:  # the features: a packed FloatList from bytes
        return lambda feature, value: feature.CopyFrom(_floats(value))
    if key.dtype == "bytes":
        if key.ragged:
            return lambda feature, values: feature.bytes_list.value.extend(
                v.encode("utf-8") if isinstance(v, str) else v for v in values
            )
        return lambda feature, value: feature.bytes_list.value.append(
            value.encode("utf-8") if isinstance(value, str) else value
        )
    list_field = "int64_list" if key.dtype == "int64" else "float_list"
    if key.ragged or key.shape:
        return lambda feature, values: getattr(feature, list_field).value.extend(values)
    return lambda feature, value: getattr(feature, list_field).value.append(value)


@functools.lru_cache(maxsize=256)
def _writers(layout: RecordLayout) -> tuple[tuple[str, Encoder, Setter], ...]:
    """(stored key, how to get the value, how to set it) per key of the layout: worked out once per
    layout, not per record, so the table-driven writer costs about what hand-written code does
    (benchmarks/NOTES.md#per-step-costs-behind-the-code)."""
    writers = []
    columns = {extra_key(layout.schema, name) for name, _ in layout.extra_columns}
    for key in record_keys(layout):
        # A manifest column may share a name with a key of another task's records (`caption`).
        getter = _column(key.name) if key.key in columns else _encoder(key.name) or _column(key.name)
        writers.append((key.key, getter, _setter(key)))
    return tuple(writers)


def _column(name: str) -> Encoder:
    def value(fields: RecordFields) -> ColumnValue:
        for column, _, found in fields.extras:
            if column == name:
                return found
        raise KeyError(f"the record has no field {name!r}")

    return value


def build_example(schema: str, fields: RecordFields) -> Message:
    """An Example (wire-compatible with `tf.train.Example`, see example.proto) holding every key
    of the record's layout.

    Filled field by field rather than from nested dicts: half the time per record, which matters
    at a few hundred microseconds of work per image (benchmarks/NOTES.md#per-step-costs-behind-the-code)."""
    if fields.features is not None and fields.feature_dtype not in ("float32", "float16"):
        raise ValueError(f"feature dtype must be float32 or float16, not {fields.feature_dtype!r}")
    example = Example()
    feature = example.features.feature
    for key, get, put in _writers(layout_of(schema, fields)):
        put(feature[key], get(fields))
    return example


def serialize(schema: str, fields: RecordFields) -> bytes:
    """The record's bytes, as written to a TFRecord file."""
    # Deterministic: map entries (the features) sorted by key, so the same record is the same
    # bytes in every process (map order otherwise follows a per-process hash seed).
    return build_example(schema, fields).SerializeToString(deterministic=True)


def parse_spec(
    schema: str | RecordLayout,
    labeled: bool = True,
    features: FeatureLayout | None = None,
    extra_columns: Sequence[ExtraColumn] = (),
    multi_label: bool = False,
) -> dict[str, Tensor]:
    """The `tf.io.parse_single_example` spec of a run's records (imports TensorFlow).

    Give the run's `RecordLayout`, or a schema name and the options that shape the records:
    `features` adds the feature keys (see `restore_features`), `extra_columns` the manifest
    columns' keys (a list column parses to a 1-D tensor of any length), `multi_label` makes the
    label keys lists."""
    import tensorflow as tf

    if isinstance(schema, RecordLayout):
        layout = schema
    else:
        columns = tuple((c.name, c.type) for c in extra_columns)
        layout = RecordLayout(schema, labeled, multi_label and labeled, columns, features)
    dtypes = {"bytes": tf.string, "int64": tf.int64, "float32": tf.float32}
    spec: dict[str, Tensor] = {}
    facts = {key_of(layout, name) for name in FACTS}
    for key in record_keys(layout):
        dtype = dtypes[key.dtype]
        if key.ragged:
            spec[key.key] = tf.io.RaggedFeature(dtype)
        elif key.key in facts:  # a source may be silent on a fact its run's others state
            default = _FACT_DEFAULTS[key.dtype]
            spec[key.key] = tf.io.FixedLenFeature(
                key.shape, dtype, default_value=[default] * key.shape[0] if key.shape else default
            )
        else:
            spec[key.key] = tf.io.FixedLenFeature(key.shape, dtype)
    return spec


# What a record without a fact reads as: no text, NaN, -1.
_FACT_DEFAULTS: dict[str, object] = {"bytes": "", "float32": float("nan"), "int64": -1}


def restore_features(parsed: dict[str, Tensor], schema: str, features: FeatureLayout) -> Tensor:
    """The stored features of one parsed record as a float32 tensor of their shape."""
    import tensorflow as tf

    if features.dtype == "float16":
        raw = parsed[key_of(schema, "features_float16")]
        flat = tf.cast(tf.io.decode_raw(raw, tf.float16, little_endian=True), tf.float32)
    else:
        flat = parsed[key_of(schema, "features")]
    return tf.reshape(flat, features.shape)
