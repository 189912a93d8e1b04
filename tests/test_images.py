"""The decode-and-normalize function, without Beam: every odd input has an asserted outcome and
everything kept decodes with TensorFlow to the shape the record states."""

from __future__ import annotations

import io

import imagegen
import numpy as np
import pytest
import tensorflow as tf
from PIL import Image

from beam_tfrecord.images.normalize import Reject, encode_for_tensorflow
from beam_tfrecord.images.options import ImageConfig, parse_size

OPTIONS = ImageConfig(max_pixels=imagegen.BAD_INPUT_MAX_PIXELS)
CASES = {k: v for k, v in imagegen.BAD_INPUT_OUTCOMES.items() if v[1] != "skipped"}


def tf_decode(data: bytes) -> np.ndarray:
    return tf.io.decode_image(data, expand_animations=False).numpy()


@pytest.mark.parametrize("relpath", sorted(CASES))
def test_every_bad_input_has_its_outcome(relpath):
    data = imagegen.bad_input_tree()[relpath]
    expected = CASES[relpath]
    if expected[0] == "reject":
        with pytest.raises(Reject) as raised:
            encode_for_tensorflow(data, OPTIONS)
        assert raised.value.reason == expected[1]
        assert raised.value.detail
        return
    image = encode_for_tensorflow(data, OPTIONS)
    assert image.reencoded == (expected[0] == "reencoded")
    assert image.format == expected[1]
    assert f"{image.height}x{image.width}x{image.channels}" == expected[2]
    if not image.reencoded:
        assert image.data == data  # passthrough keeps the source bytes exactly
    pixels = tf_decode(image.data)
    assert pixels.shape == (image.height, image.width, image.channels)
    assert tf.io.decode_image(image.data).shape.rank == 3  # even a GIF source decodes to one frame


def test_transparent_pixels_become_white():
    image = encode_for_tensorflow(imagegen.rgba_png())
    pixels = tf_decode(image.data)
    assert (pixels[:, :24] == 255).all()
    assert not (pixels[:, 24:] == 255).all()


def test_16_bit_png_is_scaled_not_clipped():
    pixels = tf_decode(encode_for_tensorflow(imagegen.png16()).data)
    assert pixels.dtype == np.uint8
    assert pixels.max() > 200 and pixels.min() == 0  # the top of the 16-bit range maps near 255
    assert len(np.unique(pixels)) > 100


def test_exif_rotation_is_applied_to_the_pixels():
    source = Image.open(io.BytesIO(imagegen.exif_rotated_jpeg(6))).convert("RGB")
    image = encode_for_tensorflow(imagegen.exif_rotated_jpeg(6))
    pixels = tf_decode(image.data).astype(int)
    # Orientation 6: the stored left column is the shown top row.
    expected_top_row = np.asarray(source)[:, 0][::-1].astype(int)
    assert np.abs(pixels[0] - expected_top_row).mean() < 12


def test_grayscale_stays_gray_unless_three_channels_are_asked():
    gray = imagegen.grayscale_jpeg()
    assert encode_for_tensorflow(gray).channels == 1
    forced = encode_for_tensorflow(gray, ImageConfig(channels=3))
    assert forced.reencoded and forced.channels == 3 and tf_decode(forced.data).shape[-1] == 3


@pytest.mark.parametrize(("mode", "size"), [("stretch", (20, 10)), ("crop", (16, 16)), ("pad", (30, 12))])
def test_resize_gives_exactly_the_asked_size(mode, size):
    image = encode_for_tensorflow(imagegen.jpeg(), ImageConfig(resize=size, resize_mode=mode))
    assert image.reencoded
    assert tf_decode(image.data).shape == (size[1], size[0], 3)


def test_a_picture_too_thin_to_pad_is_padded_not_a_crash():
    """A 1000x2 banner padded into 224x224 is 0.45 pixel tall once scaled: Pillow's own pad raises
    (and stopped the whole run); the record keeps a one-pixel line of it, centred, at the size
    asked."""
    buffer = io.BytesIO()
    Image.new("RGB", (1000, 2), (250, 250, 250)).save(buffer, "JPEG")
    image = encode_for_tensorflow(buffer.getvalue(), ImageConfig(resize=(224, 224), resize_mode="pad"))
    pixels = tf_decode(image.data)
    assert pixels.shape == (224, 224, 3)
    assert pixels[112].mean() > 200 and pixels[100].mean() < 10  # the line, in black borders


def test_forced_format_reencodes_other_sources():
    as_png = encode_for_tensorflow(imagegen.jpeg(), ImageConfig(image_format="png"))
    assert as_png.format == "png" and as_png.data.startswith(b"\x89PNG")
    as_jpeg = encode_for_tensorflow(imagegen.png(), ImageConfig(image_format="jpeg"))
    assert as_jpeg.format == "jpeg" and as_jpeg.data.startswith(b"\xff\xd8")
    same = imagegen.jpeg()
    assert encode_for_tensorflow(same, ImageConfig(image_format="jpeg")).data == same


def test_max_pixels_is_checked_from_the_header():
    with pytest.raises(Reject) as raised:
        encode_for_tensorflow(imagegen.big_jpeg(), ImageConfig(max_pixels=1000))
    assert raised.value.reason == "too_large" and "1200x1000" in raised.value.detail


@pytest.mark.parametrize(("text", "size"), [("224x224", (224, 224)), ("640X480", (640, 480))])
def test_parse_size(text, size):
    assert parse_size(text) == size


@pytest.mark.parametrize("text", ["224", "0x10", "axb"])
def test_parse_size_rejects_nonsense(text):
    with pytest.raises(ValueError):
        parse_size(text)
