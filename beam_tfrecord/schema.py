"""The one place that knows feature keys: how a record is written and the spec that parses it.

Two schemas: `tfds` (the keys TensorFlow Datasets and the object-detection tools use) and
`simple` (the keys of the hand-written scripts this project replaces).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from beam_tfrecord.example_proto import example_class

SCHEMAS = ("tfds", "simple")


@dataclass(frozen=True)
class RecordFields:
    """Everything one record holds, independent of the schema's key names."""

    encoded: bytes
    format: str
    height: int
    width: int
    channels: int
    relpath: str
    sha256: str
    label: int | None = None
    label_text: str | None = None


def _bytes(value: bytes | str) -> dict[str, Any]:
    data = value.encode("utf-8") if isinstance(value, str) else value
    return {"bytes_list": {"value": [data]}}


def _int(value: int) -> dict[str, Any]:
    return {"int64_list": {"value": [value]}}


def build_example(schema: str, fields: RecordFields):
    """A `tf.train.Example` (TensorFlow's message, see example_proto) with the schema's keys;
    label keys only when the run is labeled."""
    if schema == "tfds":
        feature = {
            "image/encoded": _bytes(fields.encoded),
            "image/format": _bytes(fields.format),
            "image/height": _int(fields.height),
            "image/width": _int(fields.width),
            "image/channels": _int(fields.channels),
            "image/filename": _bytes(fields.relpath),
            "image/key/sha256": _bytes(fields.sha256),
        }
        if fields.label is not None:
            feature["image/class/label"] = _int(fields.label)
            feature["image/class/text"] = _bytes(fields.label_text or "")
    elif schema == "simple":
        feature = {
            "image_raw": _bytes(fields.encoded),
            "id": _bytes(fields.relpath),
            "height": _int(fields.height),
            "width": _int(fields.width),
            "depth": _int(fields.channels),
        }
        if fields.label is not None:
            feature["label"] = _int(fields.label)
    else:
        raise ValueError(f"schema must be one of {SCHEMAS}, not {schema!r}")
    return example_class()(features={"feature": feature})


def serialize(schema: str, fields: RecordFields) -> bytes:
    return build_example(schema, fields).SerializeToString()


def parse_spec(schema: str, labeled: bool = True) -> dict[str, Any]:
    """The `tf.io.parse_single_example` spec matching `build_example` (imports TensorFlow)."""
    import tensorflow as tf

    string, int64 = tf.io.FixedLenFeature([], tf.string), tf.io.FixedLenFeature([], tf.int64)
    if schema == "tfds":
        spec = {
            "image/encoded": string,
            "image/format": string,
            "image/height": int64,
            "image/width": int64,
            "image/channels": int64,
            "image/filename": string,
            "image/key/sha256": string,
        }
        if labeled:
            spec["image/class/label"] = int64
            spec["image/class/text"] = string
        return spec
    if schema == "simple":
        spec = {"image_raw": string, "id": string, "height": int64, "width": int64, "depth": int64}
        if labeled:
            spec["label"] = int64
        return spec
    raise ValueError(f"schema must be one of {SCHEMAS}, not {schema!r}")


def image_key(schema: str) -> str:
    return "image/encoded" if schema == "tfds" else "image_raw"


def filename_key(schema: str) -> str:
    return "image/filename" if schema == "tfds" else "id"


def label_key(schema: str) -> str:
    return "image/class/label" if schema == "tfds" else "label"
