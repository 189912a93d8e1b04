"""Reading a conversion's output without TensorFlow: one plain dict per record.

For PyTorch, JAX or any Python loop. Records are parsed with the project's own Example message
(`messages`, protobuf's public API) and framed by `tfrecord_files` (CRCs checked), read through
Beam's filesystems, so local and gs:// output (the emulator included) read the same way and
`import tensorflow` (about 4 s and 500 MB per process) never happens.
"""

from __future__ import annotations

import io
from collections.abc import Iterator
from typing import Any

import numpy as np

from beam_tfrecord.read.files import SplitFiles, iter_range, plan_reads, split_files
from beam_tfrecord.write import schema as schema_lib
from beam_tfrecord.write.messages import Example

__all__ = ["KEYS", "decode_image", "iter_examples", "record_to_dict"]

# The dict's keys, named the same for both schemas (the stored keys differ: see schema.py; the
# simple schema has no `format` or `label_text`). --extra_columns values come under their names.
KEYS = (
    "image",
    "format",
    "height",
    "width",
    "channels",
    "filename",
    "sha256",
    "label",
    "label_text",
    "features",
)

_SCHEMA_KEYS = {
    "tfds": {
        "image": "image/encoded",
        "format": "image/format",
        "height": "image/height",
        "width": "image/width",
        "channels": "image/channels",
        "filename": "image/filename",
        "sha256": "image/key/sha256",
        "label": "image/class/label",
        "label_text": "image/class/text",
    },
    "simple": {
        "image": "image_raw",
        "height": "height",
        "width": "width",
        "channels": "depth",
        "filename": "id",
        "sha256": "sha256",
        "label": "label",
    },
}
_TEXT = {"format", "filename", "sha256", "label_text"}


def _value(feature: Any) -> Any:
    kind = feature.WhichOneof("kind")
    if kind is None:
        return None
    values = getattr(feature, kind).value
    return values[0] if len(values) == 1 else list(values)


def _values(feature: Any) -> list[Any]:
    kind = feature.WhichOneof("kind")
    return list(getattr(feature, kind).value) if kind is not None else []


def record_to_dict(serialized: bytes, files: SplitFiles) -> dict[str, Any]:
    """One serialized record as a dict of `KEYS` present in it: `image` the encoded bytes (as
    stored: decode with Pillow or torchvision), `label` an int (a list of ints, and `label_text`
    a list of names, in a --multi_label run), text as str, a feature run's `features` as a
    float32 NumPy array of the stored shape (float16 runs included), and each --extra_columns
    value under its name: str, int, float, or a list of them."""
    stored = Example.FromString(serialized).features.feature
    result: dict[str, Any] = {}
    for name, key in _SCHEMA_KEYS[files.schema].items():
        if key in stored:
            value = _value(stored[key])
            result[name] = value.decode("utf-8") if name in _TEXT and isinstance(value, bytes) else value
    if files.multi_label:
        for name in ("label", "label_text"):
            key = _SCHEMA_KEYS[files.schema].get(name)
            if key in stored:
                values = list(getattr(stored[key], stored[key].WhichOneof("kind") or "int64_list").value)
                result[name] = [v.decode("utf-8") if isinstance(v, bytes) else int(v) for v in values]
    for column in files.extra_columns:
        feature = stored[schema_lib.extra_key(files.schema, column.name)]
        values = [v.decode("utf-8") if isinstance(v, bytes) else v for v in _values(feature)]
        result[column.name] = values if column.is_list else values[0]
    layout = files.features
    if layout is not None:
        float_key, half_key, _ = schema_lib.feature_keys(files.schema)
        if layout.dtype == "float16":
            flat = np.frombuffer(stored[half_key].bytes_list.value[0], dtype="<f2").astype(np.float32)
        else:
            flat = np.asarray(stored[float_key].float_list.value, dtype=np.float32)
        result["features"] = flat.reshape(layout.shape)
    return result


def decode_image(encoded: bytes, channels: int = 3, image_size: tuple[int, int] | None = None) -> np.ndarray:
    """uint8 `[height, width, channels]` from a record's image bytes, with Pillow (no TensorFlow).

    `image_size=(height, width)` stretches (bilinear); a JPEG is first decoded at the smallest
    DCT scale that still covers that size (Pillow's `draft`), as `load_dataset` does."""
    from PIL import Image

    mode = {1: "L", 3: "RGB"}[channels]
    # Only the formats a record's image may be in: a foreign record's EPS never reaches Ghostscript.
    with Image.open(io.BytesIO(encoded), formats=("JPEG", "PNG", "GIF", "BMP", "WEBP")) as image:
        if image_size is not None:
            image.draft(mode, (image_size[1], image_size[0]))
        image = image.convert(mode)
        if image_size is not None and image.size != (image_size[1], image_size[0]):
            image = image.resize((image_size[1], image_size[0]), Image.Resampling.BILINEAR)
        pixels = np.array(image, dtype=np.uint8)  # a copy torch may write to
    return pixels[:, :, None] if channels == 1 else pixels


def iter_examples(
    output: str,
    split: str = "train",
    *,
    shard: tuple[int, int] = (0, 1),
) -> Iterator[dict[str, Any]]:
    """Every record of `split` as a dict (see `record_to_dict`), in file order; no TensorFlow.

    `shard=(index, count)`: this worker's part, disjoint from the other `count - 1` workers'
    and together every record once (see `files.plan_reads`: with the `.idx` files each
    worker seeks to its own contiguous run of records). `output` may be local or gs://.
    Raises `IncompleteOutput` for a folder that holds no finished run.
    """
    files = split_files(output, split)  # here, not at the first record: a wrong folder fails the call
    index, count = shard
    parts = plan_reads(files.paths, index, count, compressed=bool(files.compression), records=files.records)
    return (record_to_dict(record, files) for part in parts for record in iter_range(part, files.compression))
