"""How a picture past 8 bits is stored, and read back without TensorFlow: one rule for every
writer and reader.

- Unsigned 16-bit samples in 1, 3 or 4 bands (microscopy, depth in millimetres, 16-bit RGB) are a
  16-bit PNG in `image/encoded`: `tf.io.decode_png(dtype=tf.uint16)` and TFDS's
  `Image(dtype=np.uint16)` read them as they are.
- Everything else past 8 bits or RGB (float, signed, 32-bit, 2 or more than 4 bands, a stack of pages
  or frames) is an array: its samples little-endian in C order, zlib-compressed, in
  `image/array/value`, its shape in `image/array/shape`. Those are the keys TFDS's
  `Tensor(shape=(None, None, C), dtype, encoding="zlib")` reads, and `tf.io.decode_raw` after
  `tf.io.decode_compressed(..., "ZLIB")` is what anyone else needs.

8-bit pictures never come here: they are stored as they always were.
"""

from __future__ import annotations

import zlib
from collections.abc import Callable, Mapping
from typing import Any

import numpy as np

from beam_tfrecord.keys import Fact, StoredPixels

__all__ = [
    "ARRAY_FORMAT",
    "StoredPixels",
    "array_bytes",
    "each_plane",
    "from_array_bytes",
    "from_png16",
    "is_png_kind",
    "png16",
    "resized",
    "stored_pixels",
]

ARRAY_FORMAT = "array"  # `image/format` of a record whose picture is an array
# Gray, RGB, RGBA: what a 16-bit PNG holds that TensorFlow reads back. A PNG holds gray+alpha
# too, but `tf.io.decode_png` (and TFDS's Image, which passes its channel count) refuses 2
# channels: two bands (a radar's VV and VH) are an array.
PNG_BANDS = (1, 3, 4)


def is_png_kind(dtype: np.dtype, bands: int, stacked: bool) -> bool:
    """A 16-bit PNG holds it exactly: unsigned 16-bit samples in 1, 3 or 4 bands, one page."""
    return dtype == np.uint16 and bands in PNG_BANDS and not stacked


def stored_pixels(pixels: np.ndarray, facts: Mapping[str, Fact]) -> tuple[bytes, str, StoredPixels]:
    """(bytes, `image/format`, what else the record holds) for full-depth `pixels` ([H, W, C] or
    [D, H, W, C])."""
    stacked = pixels.ndim == 4
    if is_png_kind(pixels.dtype, pixels.shape[-1], stacked):
        stored = StoredPixels("uint16", tuple(pixels.shape), False, dict(facts))
        return png16(pixels), "png", stored
    stored = StoredPixels(pixels.dtype.name, tuple(pixels.shape), True, dict(facts))
    return array_bytes(pixels), ARRAY_FORMAT, stored


def png16(pixels: np.ndarray) -> bytes:
    """A 16-bit PNG of [H, W, C] uint16 samples (imagecodecs: Pillow writes no 16-bit RGB)."""
    import imagecodecs

    plane = pixels[..., 0] if pixels.shape[-1] == 1 else pixels
    return bytes(imagecodecs.png_encode(np.ascontiguousarray(plane), level=6))


def from_png16(data: bytes) -> np.ndarray:
    """[H, W, C] uint16 samples of a 16-bit PNG, as `tf.io.decode_png(dtype=tf.uint16)` gives."""
    import imagecodecs

    pixels = np.asarray(imagecodecs.png_decode(data))
    return pixels[..., np.newaxis] if pixels.ndim == 2 else pixels


def array_bytes(pixels: np.ndarray) -> bytes:
    """Little-endian samples in C order, zlib-compressed: TFDS's `Encoding.ZLIB`."""
    little = pixels.astype(pixels.dtype.newbyteorder("<"), copy=False)
    return zlib.compress(np.ascontiguousarray(little).tobytes(), 6)


def from_array_bytes(data: bytes, dtype: str, shape: tuple[int, ...]) -> np.ndarray:
    """The samples `array_bytes` stored, in native byte order."""
    little = np.frombuffer(zlib.decompress(data), dtype=np.dtype(dtype).newbyteorder("<"))
    return little.astype(np.dtype(dtype), copy=False).reshape(shape)


def resized(pixels: np.ndarray, image_size: tuple[int, int]) -> np.ndarray:
    """Every band of every page stretched to `image_size=(height, width)`, bilinear: what
    readers that resize give for a picture past 8 bits."""
    from PIL import Image

    height, width = image_size
    return each_plane(
        pixels, image_size, lambda plane: plane.resize((width, height), Image.Resampling.BILINEAR)
    )


def each_plane(samples: np.ndarray, size: tuple[int, int], resample: Callable[[Any], Any]) -> np.ndarray:
    """`resample` (a Pillow image in, one of `size=(height, width)` out) on every band of every
    page, each as a 32-bit float plane (Pillow's `F`), then back in the samples' own type
    (integers rounded and clipped): how a picture past 8 bits is resized, in its own type."""
    from PIL import Image

    pages = samples if samples.ndim == 4 else samples[np.newaxis]
    out = np.empty((pages.shape[0], *size, pages.shape[-1]), samples.dtype)
    for page in range(pages.shape[0]):
        for band in range(pages.shape[-1]):
            plane = Image.fromarray(np.ascontiguousarray(pages[page, ..., band], dtype=np.float32), mode="F")
            values = np.asarray(resample(plane))
            if samples.dtype.kind in "ui":
                limits = np.iinfo(samples.dtype)
                values = np.clip(np.rint(values), limits.min, limits.max)
            out[page, ..., band] = values
    return out if samples.ndim == 4 else out[0]
