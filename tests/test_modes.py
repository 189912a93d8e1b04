"""Odd pixel modes become 8-bit L or RGB by the documented mapping: scaled, never clipped.
Each case is a real file (TIFF or PNG, as scanners and microscopes write them) converted
through `encode_for_tensorflow` with `--bit_depth 8` (the default keeps 16-bit and float
samples as they are: tests/test_full_depth.py) and read back with TensorFlow."""

from __future__ import annotations

import imagegen
import numpy as np
import pytest
import tensorflow as tf
from PIL import Image, ImageCms

from beam_tfrecord.images.normalize import encode_for_tensorflow
from beam_tfrecord.images.options import ImageConfig

EIGHT_BITS = ImageConfig(bit_depth="8")


def stored(data: bytes, name: str = "x.tif"):
    image = encode_for_tensorflow(data, EIGHT_BITS, name=name)
    pixels = tf.io.decode_image(image.data, expand_animations=False).numpy()
    return image, pixels


def plane(values, dtype) -> np.ndarray:
    return np.asarray(values, dtype=dtype).reshape(2, -1)


@pytest.mark.parametrize("mode", ["I;16", "I;16B"])
def test_16_bit_is_scaled_by_255_over_65535(mode):
    values = plane([0, 257, 25700, 65535], ">u2" if mode == "I;16B" else "<u2")
    data = imagegen.encode(Image.frombytes(mode, (2, 2), values.tobytes()), "TIFF")
    image, pixels = stored(data)
    assert image.mode == mode and image.changes == ("format", "high_bit_depth")
    assert pixels[..., 0].tolist() == [[0, 1], [100, 255]]


def test_32_bit_integers_within_16_bits_scale_like_16_bits():
    image, pixels = stored(imagegen.encode(Image.fromarray(plane([0, 257, 25700, 65535], np.int32)), "TIFF"))
    assert image.mode == "I" and pixels[..., 0].tolist() == [[0, 1], [100, 255]]


def test_32_bit_integers_beyond_16_bits_are_scaled_from_their_range_not_clipped():
    values = plane([-1000, 0, 100_000, 1_000_000], np.int32)
    _, pixels = stored(imagegen.encode(Image.fromarray(values), "TIFF"))
    assert pixels[..., 0].tolist() == [[0, 0], [26, 255]]  # min to 0, max to 255, order kept


@pytest.mark.parametrize(
    ("values", "expected"),
    [
        ([0.0, 0.25, 0.5, 1.0], [[0, 64], [128, 255]]),  # a 0..1 float picture
        ([0.0, 10.0, 100.0, 255.0], [[0, 10], [100, 255]]),  # already 0..255
        ([-1.0, 0.0, 1.0, 3.0], [[0, 64], [128, 255]]),  # any other range: min..max
        ([np.nan, 0.5, np.inf, -np.inf], [[0, 128], [128, 0]]),  # NaN is 0, inf the finite max
    ],
)
def test_float_pictures_are_scaled_not_clipped(values, expected):
    image, pixels = stored(imagegen.encode(Image.fromarray(plane(values, np.float32)), "TIFF"))
    assert image.mode == "F" and "high_bit_depth" in image.changes
    assert pixels[..., 0].tolist() == expected


def test_one_bit_becomes_black_and_white_gray():
    bits = Image.fromarray(plane([0, 255, 255, 0], np.uint8)).convert("1")
    image, pixels = stored(imagegen.encode(bits, "PNG"), "x.png")
    assert image.mode == "1" and image.changes == ("mode",) and image.channels == 1
    assert pixels[..., 0].tolist() == [[0, 255], [255, 0]]


def test_gray_with_alpha_is_composited_over_white_and_stays_gray():
    la = Image.merge("LA", [Image.new("L", (2, 2), 0), Image.fromarray(plane([0, 255, 128, 255], np.uint8))])
    image, pixels = stored(imagegen.encode(la, "PNG"), "x.png")
    assert image.changes == ("alpha_flattened",) and image.channels == 1
    assert pixels[..., 0].tolist() == [[255, 0], [127, 0]]


def test_palette_with_alpha_is_composited_over_white():
    rgba = Image.new("RGBA", (2, 2), (255, 0, 0, 0))
    rgba.putpixel((1, 0), (0, 0, 255, 255))
    pa = rgba.convert("PA")
    image, pixels = stored(imagegen.encode(pa, "TIFF"))
    assert image.mode == "PA" and image.changes == ("format", "palette", "alpha_flattened")
    assert pixels[0, 0].tolist() == [255, 255, 255] and pixels[0, 1].tolist() == [0, 0, 255]


def test_cmyk_tiff_becomes_rgb():
    rgb = imagegen.gradient(8, 4)
    image, pixels = stored(imagegen.encode(rgb.convert("CMYK"), "TIFF"))
    assert image.mode == "CMYK" and image.changes == ("format", "cmyk")
    assert np.abs(pixels.astype(int) - np.asarray(rgb, dtype=int)).max() <= 1


def test_lab_tiff_is_converted_to_rgb_colors_not_reinterpreted():
    rgb = imagegen.gradient(16, 8)
    to_lab = ImageCms.buildTransform(
        ImageCms.createProfile("sRGB"), ImageCms.createProfile("LAB"), "RGB", "LAB"
    )
    image, pixels = stored(imagegen.encode(ImageCms.applyTransform(rgb, to_lab), "TIFF"))
    assert image.mode == "LAB" and image.changes == ("format", "mode") and image.channels == 3
    # 8-bit L*a*b* cannot hold every sRGB color exactly; a reinterpretation would be far off.
    assert np.abs(pixels.astype(int) - np.asarray(rgb, dtype=int)).mean() < 4


def test_a_gray_palette_stays_gray():
    gray = Image.fromarray(plane([0, 85, 170, 255], np.uint8)).convert("P")
    image, pixels = stored(imagegen.encode(gray, "GIF"), "x.gif")
    assert image.channels == 1 and image.changes == ("format", "palette")
    assert pixels[..., 0].tolist() == [[0, 85], [170, 255]]
