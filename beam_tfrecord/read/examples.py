"""Reading a conversion's output without TensorFlow: one plain dict per record.

For PyTorch, JAX or any Python loop. Records are parsed with the project's own Example message
(`messages`, protobuf's public API) and framed by `tfrecord_files` (CRCs checked), read through
Beam's filesystems, so local and gs:// output (the emulator included) read the same way and
`import tensorflow` (about 4 s and 500 MB per process) never happens.
"""

from __future__ import annotations

import io
from collections.abc import Iterator

import numpy as np

from beam_tfrecord.edges import FeatureValue, ParsedRecord, ProtoMessage
from beam_tfrecord.images import pixels as stored_pixels
from beam_tfrecord.keys import FACTS, record_keys, table
from beam_tfrecord.labels import kinds as label_kinds
from beam_tfrecord.labels.class_mask import decode_class_mask
from beam_tfrecord.labels.objects.reading import DETECTION_KEYS
from beam_tfrecord.read.files import SplitFiles, iter_range, plan_reads, split_files
from beam_tfrecord.write.messages import Example

__all__ = [
    "DETECTION_KEYS",
    "KEYS",
    "PIXEL_KEYS",
    "SEGMENTATION_KEYS",
    "decode_class_mask",
    "decode_image",
    "decode_pixels",
    "iter_examples",
    "record_to_dict",
]

# The dict's keys for an image record, named the same in both schemas (the stored keys differ:
# see beam_tfrecord/keys.py; the simple schema has no `format` or `label_text`). Manifest columns
# come under their names, a feature run's output as `features`. A detection run's records add the
# stored object fields (`object_xmin`, `object_label`, ...: see keys.py) and `DETECTION_KEYS`.
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
# A record of a picture past 8 bits adds `dtype` (its samples' type) and `pixels`: the samples as
# a NumPy array, [height, width, bands] or [pages, height, width, bands], in that type; `image`
# stays the stored bytes (a 16-bit PNG, or the zlib'd array; with the Object Detection API's
# additional channels, the RGB PNG, its other bands' PNGs in `additional_channels`). A GeoTIFF's
# or DICOM's facts come under their names (`crs`, `rescale_slope`, ...).
PIXEL_KEYS = ("dtype", "pixels")
# A segmentation record's class ids as a NumPy array: uint8 [height, width] (uint16 in a run whose
# ids or ignore value pass 255; the ignore value where nothing is labelled); `mask_png` keeps the
# stored PNG bytes.
SEGMENTATION_KEYS = ("mask", "mask_png")


def _values(feature: ProtoMessage) -> list[FeatureValue]:
    list_field = feature.WhichOneof("kind")  # the Feature message's oneof, named so by its proto
    return list(getattr(feature, list_field).value) if list_field is not None else []


def record_to_dict(serialized: bytes, files: SplitFiles) -> ParsedRecord:
    """One serialized record as a dict of its fields by name (`KEYS`, then manifest columns):
    `image` the encoded bytes (as stored: decode with Pillow or torchvision), `label` an int (a
    list of ints, and `label_text` a list of names, in a multi-label run), text as str, a
    feature run's `features` as a float32 NumPy array of the stored shape (float16 runs
    included), and each manifest column under its name: str, int, float, or a list of them.
    A detection record adds its objects as NumPy arrays (`DETECTION_KEYS`): `boxes` in pixel
    xyxy, `labels` from 0, `masks` decoded. A segmentation record's `mask` is its class ids,
    decoded (`SEGMENTATION_KEYS`)."""
    stored = Example.FromString(serialized).features.feature
    result: ParsedRecord = {}
    layout = files.layout
    for key in record_keys(layout):
        if key.key not in stored:
            continue
        values = _values(stored[key.key])
        if key.text:
            values = [v.decode("utf-8") if isinstance(v, bytes) else v for v in values]
        if key.ragged:
            result[key.name] = values
        elif key.shape:
            result[key.name] = np.asarray(values, dtype=np.float32 if key.dtype == "float32" else np.int64)
        else:
            result[key.name] = values[0] if values else None
    _full_depth(stored, result, layout.schema)
    features = layout.features
    if features is not None:
        if features.dtype == "float16":
            raw = result.pop("features_float16")
            flat = np.frombuffer(raw, dtype="<f2").astype(np.float32)
        else:
            flat = result.pop("features")
        result.pop("features_shape", None)
        result["features"] = flat.reshape(features.shape)
    for kind in label_kinds(files.kinds):  # boxes as arrays, masks decoded
        kind.numpy_fields(result, layout)
    return result


def _full_depth(stored: ProtoMessage, result: ParsedRecord, schema: str) -> None:
    """A picture past 8 bits, read from its own record's keys (a run may mix kinds): `dtype`,
    `pixels` and the source's facts into `result` (`PIXEL_KEYS`); nothing for an 8-bit one."""
    keys = table(schema)
    assert keys.pixel_dtype is not None
    if keys.pixel_dtype.key not in stored:
        return
    dtype = _values(stored[keys.pixel_dtype.key])[0].decode("utf-8")
    value, shape = keys.pixel_array
    if value.key in stored:  # (set here too: a run of several kinds reads each record's own keys)
        result[value.name] = raw = _values(stored[value.key])[0]
        result[shape.name] = dims = [int(n) for n in _values(stored[shape.key])]
        pixels = stored_pixels.from_array_bytes(raw, dtype, tuple(dims))
    elif keys.pixel_additional is not None and keys.pixel_additional.key in stored:
        result[keys.pixel_additional.name] = extra = _values(stored[keys.pixel_additional.key])
        bands = [decode_image(band, 1) for band in extra]
        pixels = np.concatenate([decode_image(result["image"], 3), *bands], axis=2)
    else:
        pixels = stored_pixels.from_png16(result["image"])
    result["dtype"], result["pixels"] = dtype, pixels
    for fact in FACTS.values():
        key = keys.facts_prefix + fact.key
        if key in stored:
            found = _values(stored[key])[0]
            result[fact.name] = found.decode("utf-8") if isinstance(found, bytes) else found


def decode_pixels(
    record: ParsedRecord, channels: int = 3, image_size: tuple[int, int] | None = None
) -> np.ndarray:
    """A record's picture as NumPy: a picture past 8 bits in its own type and bands (its
    `pixels`, resized bilinearly in that type to `image_size=(height, width)` when given), an
    8-bit one as `decode_image` gives it."""
    if "pixels" not in record:
        return decode_image(record["image"], channels, image_size)
    pixels: np.ndarray = record["pixels"]
    if image_size is None:
        return np.array(pixels)  # a copy torch may write to
    return stored_pixels.resized(pixels, image_size)


def decode_image(encoded: bytes, channels: int = 3, image_size: tuple[int, int] | None = None) -> np.ndarray:
    """uint8 `[height, width, channels]` from a record's image bytes, with Pillow (no TensorFlow).

    `image_size=(height, width)` stretches (bilinear); a JPEG is first decoded at the smallest
    DCT scale that still covers that size (Pillow's `draft`), as `load_dataset` does."""
    from PIL import Image

    mode = {1: "L", 3: "RGB"}[channels]
    # Only the formats a record's image may be in: a foreign record's EPS never reaches Ghostscript.
    with Image.open(io.BytesIO(encoded), formats=("JPEG", "PNG", "GIF", "BMP", "WEBP")) as source:
        if image_size is not None:
            source.draft(mode, (image_size[1], image_size[0]))
        image = source.convert(mode)
        if image_size is not None and image.size != (image_size[1], image_size[0]):
            image = image.resize((image_size[1], image_size[0]), Image.Resampling.BILINEAR)
        pixels = np.array(image, dtype=np.uint8)  # a copy torch may write to
    return pixels[:, :, None] if channels == 1 else pixels


def iter_examples(
    output: str,
    split: str = "train",
    *,
    shard: tuple[int, int] = (0, 1),
) -> Iterator[ParsedRecord]:
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
