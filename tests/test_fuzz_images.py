"""Fuzzing the decode-and-normalize function over mutated bytes of every accepted format of the
test gallery (imagegen.every_format: JPEG, PNG, GIF, TIFF, WebP, HEIC, AVIF, BMP, ICO, JPEG 2000
and the rest): whatever the bytes, it returns an image TensorFlow decodes or raises `Reject`,
never anything else.

A short run always (a fixed number of examples, derandomized so CI is repeatable); a long,
random one with `pytest -m slow`."""

from __future__ import annotations

import imagegen
import pytest
import tensorflow as tf
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from beam_tfrecord.images.normalize import Reject, encode_for_tensorflow
from beam_tfrecord.images.options import ImageConfig
from beam_tfrecord.images.pixels import from_array_bytes

GALLERY = imagegen.every_format()
SEEDS = {
    "jpeg": imagegen.jpeg(24, 16, seed=1),
    "exif_jpeg": imagegen.exif_rotated_jpeg(),
    "png": imagegen.png(24, 16, seed=2),
    "palette_png": imagegen.palette_png_with_transparency(),
    "gif": imagegen.animated_gif(2),
    **{name: data for name, data in GALLERY.items() if name not in ("pdf.pdf", "eps.eps", "icns.icns")},
}
OPTIONS = ImageConfig(max_pixels=4_000_000)  # keeps mutated huge headers from being slow


@st.composite
def mutated(draw) -> bytes:
    """A seed image with a few bytes replaced, inserted or removed, and maybe cut short."""
    data = bytearray(SEEDS[draw(st.sampled_from(sorted(SEEDS)))])
    for _ in range(draw(st.integers(1, 8))):
        position = draw(st.integers(0, len(data) - 1))
        action = draw(st.sampled_from(["replace", "insert", "delete", "header"]))
        value = draw(st.integers(0, 255))
        if action == "replace":
            data[position] = value
        elif action == "insert":
            data[position:position] = bytes([value]) * draw(st.integers(1, 16))
        elif action == "delete":
            del data[position : position + draw(st.integers(1, 16))]
        else:  # headers hold sizes and lengths: where mutations find the interesting bugs
            data[draw(st.integers(0, min(63, len(data) - 1)))] = value
    if draw(st.booleans()):
        data = data[: draw(st.integers(0, len(data)))]
    return bytes(data)


def check(data: bytes) -> None:
    try:
        image = encode_for_tensorflow(data, OPTIONS)
    except Reject as reject:
        assert reject.reason and reject.detail
        return
    depth = image.depth
    if depth is not None and depth.array:  # a picture past 8 bits kept as an array (a stack)
        samples = from_array_bytes(image.data, depth.dtype, depth.shape)
        assert samples.shape[-3:] == (image.height, image.width, image.channels)
        return
    if depth is not None:  # a 16-bit PNG
        pixels = tf.io.decode_png(image.data, channels=image.channels, dtype=tf.uint16)
    else:
        pixels = tf.io.decode_image(image.data, expand_animations=False)
    assert tuple(pixels.shape) == (image.height, image.width, image.channels)


@settings(max_examples=300, derandomize=True, deadline=None, suppress_health_check=list(HealthCheck))
@given(mutated())
def test_mutated_images_only_ever_reject(data):
    check(data)


@pytest.mark.slow
@settings(max_examples=20_000, deadline=None, suppress_health_check=list(HealthCheck))
@given(mutated())
def test_mutated_images_only_ever_reject_long(data):
    check(data)
