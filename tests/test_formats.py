"""Every picture format a user may have: one generated file of each format Pillow writes here
(plus HEIC through pillow-heif), cut short and with a flipped byte, each with its asserted
outcome; every record decodes with TensorFlow to the source's pixels."""

from __future__ import annotations

import io
import logging
import os
import subprocess
import sys
from pathlib import Path

import imagegen
import numpy as np
import pytest
import tensorflow as tf
from PIL import Image

from beam_tfrecord import reasons
from beam_tfrecord.images import formats, modes
from beam_tfrecord.images.normalize import Reject, encode_for_tensorflow
from beam_tfrecord.images.options import ImageConfig

DOCS = Path(__file__).resolve().parent.parent / "docs"
REASONS_PAGE = (DOCS / "reasons.md").read_text(encoding="utf-8")
USAGE_PAGE = (DOCS / "usage.md").read_text(encoding="utf-8")
FILES = imagegen.every_format()
LOSSY_MEAN_ERROR = 4.0  # a lossy source re-encoded at quality 95, decoded by another decoder

# name -> (stored format, "HxWxC", changes). Sources TensorFlow cannot decode as stored are
# re-encoded ("format"): lossy ones as JPEG, lossless ones as PNG.
GOOD = {
    "avif.avif": ("jpeg", "32x48x3", ("format",)),
    "blp.blp": ("png", "32x48x3", ("format",)),
    "bmp.bmp": ("png", "32x48x3", ("format",)),
    "dds.dds": ("png", "32x48x3", ("format",)),
    "dib.dib": ("png", "32x48x3", ("format",)),
    "gif.gif": ("png", "32x48x3", ("format", "palette")),
    "heic.heic": ("jpeg", "32x48x3", ("format",)),
    "icns.icns": ("png", "1024x1024x3", ("format", "alpha_flattened", "frames_dropped")),
    "ico.ico": ("png", "32x32x3", ("format", "frames_dropped")),  # the larger of 16 and 32
    "im.im": ("png", "32x48x3", ("format",)),
    "jpeg.jpg": ("jpeg", "32x48x3", ()),  # stored as it is
    "jp2.jp2": ("png", "32x48x3", ("format",)),
    "j2k.j2k": ("png", "32x48x3", ("format",)),
    "mpo.mpo": ("jpeg", "32x48x3", ("frames_dropped",)),
    "msp.msp": ("png", "32x48x1", ("format", "mode")),
    "pcx.pcx": ("png", "32x48x3", ("format",)),
    "png.png": ("png", "32x48x3", ()),  # stored as it is
    "ppm.ppm": ("png", "32x48x3", ("format",)),
    "pgm.pgm": ("png", "32x48x1", ("format",)),
    "qoi.qoi": ("png", "32x48x3", ("format",)),
    "sgi.sgi": ("png", "32x48x3", ("format",)),
    "spider.spider": ("png", "32x48x1", ("format", "high_bit_depth")),
    "tga.tga": ("png", "32x48x3", ("format",)),
    "tiff.tiff": ("png", "32x48x3", ("format",)),
    "tiff_lzw.tif": ("png", "32x48x3", ("format",)),
    "tiff_jpeg.tif": ("png", "32x48x3", ("format",)),
    "tiff_g4.tif": ("png", "32x48x1", ("format", "mode")),
    "webp.webp": ("jpeg", "32x48x3", ("format",)),
    "webp_lossless.webp": ("png", "32x48x3", ("format",)),  # lossless stays lossless
    "xbm.xbm": ("png", "32x48x1", ("format", "mode")),
    "apng.png": ("png", "32x48x3", ("frames_dropped",)),
    "gif_animated.gif": ("png", "32x48x3", ("format", "palette", "frames_dropped")),
    "tiff_pages.tiff": ("png", "32x48x3", ("format", "frames_dropped")),
}
REFUSED = {"pdf.pdf": "PDF is a document format", "eps.eps": "Ghostscript"}

# name -> (outcome of the first half alone, outcome with the middle byte flipped). A flipped byte
# in raw pixel data cannot be seen (the file is still a picture: a "record"); in compressed or
# checksummed data it is.
BROKEN = {
    "avif.avif": ("corrupt", "record"),
    "blp.blp": ("truncated", "record"),
    "bmp.bmp": ("truncated", "record"),
    "dds.dds": ("corrupt", "record"),
    "dib.dib": ("truncated", "record"),
    "gif.gif": ("truncated", "corrupt"),
    "heic.heic": ("corrupt", "record"),
    "icns.icns": ("corrupt", "corrupt"),
    "ico.ico": ("truncated", "corrupt"),
    "im.im": ("truncated", "record"),
    "jpeg.jpg": ("truncated", "record"),
    "jp2.jp2": ("corrupt", "record"),
    "j2k.j2k": ("corrupt", "record"),
    "mpo.mpo": ("truncated", "record"),
    "msp.msp": ("truncated", "record"),
    "pcx.pcx": ("truncated", "record"),
    "png.png": ("truncated", "corrupt"),
    "ppm.ppm": ("truncated", "record"),
    "pgm.pgm": ("truncated", "record"),
    "qoi.qoi": ("corrupt", "record"),
    "sgi.sgi": ("truncated", "record"),
    "spider.spider": ("truncated", "record"),
    "tga.tga": ("truncated", "record"),
    "tiff.tiff": ("truncated", "record"),
    "tiff_lzw.tif": ("corrupt", "record"),
    "tiff_jpeg.tif": ("corrupt", "record"),
    "tiff_g4.tif": ("corrupt", "record"),
    "webp.webp": ("corrupt", "record"),
    "webp_lossless.webp": ("corrupt", "record"),
    "xbm.xbm": ("truncated", "record"),
    "apng.png": ("truncated", "corrupt"),
    "gif_animated.gif": ("record", "record"),  # the first frame is whole: later frames are dropped
    "tiff_pages.tiff": ("record", "record"),
}


def source_pixels(data: bytes) -> np.ndarray:
    """What Pillow decodes from the source (first frame, largest icon), as L or RGB."""
    pixels = np.asarray(modes.to_8bit_gray_or_rgb(Image.open(io.BytesIO(data))))
    return pixels[..., None] if pixels.ndim == 2 else pixels


# The formats whose samples are past 8 bits (SPIDER's float) or that hold several pages of one
# shape: these tests read them at 8 bits, their first page, as `--bit_depth 8` does (the default
# keeps them whole: tests/test_full_depth.py).
EIGHT_BITS = ImageConfig(bit_depth="8")


def outcome(name: str, data: bytes) -> str:
    try:
        image = encode_for_tensorflow(data, EIGHT_BITS, name=name)
    except Reject as reject:
        assert reject.detail
        return reject.reason
    assert tf.io.decode_image(image.data, expand_animations=False).shape == (
        image.height,
        image.width,
        image.channels,
    )
    return "record"


def test_every_pillow_plugin_is_accepted_or_refused():
    """A Pillow upgrade that adds a plugin fails here until someone decides which list it is in."""
    formats.register_plugins()
    accepted, refused = set(formats.ACCEPTED_FORMATS), set(formats.REFUSED_FORMATS)
    assert not accepted & refused
    assert set(Image.OPEN) <= accepted | refused
    assert accepted <= set(Image.OPEN)
    assert "HEIF" in Image.OPEN and "AVIF" in Image.OPEN


def test_the_gallery_covers_every_format_pillow_writes():
    formats.register_plugins()
    written = {Image.open(io.BytesIO(data)).format for name, data in FILES.items() if name not in REFUSED}
    writable = set(Image.SAVE) - set(formats.REFUSED_FORMATS) - {"PALM"}  # PALM is write-only
    assert writable - {"MPO", "JPEG2000"} <= written | {"JPEG2000"}
    assert {"MPO", "JPEG2000", "HEIF", "AVIF"} <= written
    assert set(GOOD) | set(REFUSED) == set(FILES) == set(BROKEN) | set(REFUSED)


@pytest.mark.parametrize("name", sorted(GOOD))
def test_every_format_becomes_a_record_with_the_source_pixels(name):
    data = FILES[name]
    stored, shape, changes = GOOD[name]
    image = encode_for_tensorflow(data, EIGHT_BITS, name=name)
    assert (image.format, f"{image.height}x{image.width}x{image.channels}", image.changes) == (
        stored,
        shape,
        changes,
    )
    assert image.reencoded == (image.data != data)
    decoded = tf.io.decode_image(image.data, expand_animations=False).numpy().astype(int)
    error = np.abs(decoded - source_pixels(data).astype(int))
    lossy = image.format == "jpeg"
    assert error.mean() <= (LOSSY_MEAN_ERROR if lossy else 0), f"mean error {error.mean():.2f}"


@pytest.mark.parametrize("name", sorted(BROKEN))
def test_every_format_cut_short_or_with_a_flipped_byte_has_its_outcome(name):
    data = FILES[name]
    halved, flipped = data[: len(data) // 2], imagegen.flip_byte(data)
    assert (outcome(name, halved), outcome(name, flipped)) == BROKEN[name]


@pytest.mark.parametrize("name", sorted(REFUSED))
def test_refused_formats_say_why(name):
    """(test_security.py checks, with audit hooks, that no input ever starts a program.)"""
    with pytest.raises(Reject) as raised:
        encode_for_tensorflow(FILES[name], name=name)
    assert raised.value.reason == "unsupported_format"
    assert REFUSED[name] in raised.value.detail


def test_a_file_named_as_another_format_is_named_in_the_changes():
    png_as_jpg = encode_for_tensorflow(FILES["png.png"], name="cat/photo.jpg")
    assert png_as_jpg.changes == ("wrong_extension",) and not png_as_jpg.reencoded
    assert png_as_jpg.data == FILES["png.png"]  # TensorFlow decodes it whatever its name
    bmp_as_jpg = encode_for_tensorflow(FILES["bmp.bmp"], name="cat/photo.JPG")
    assert bmp_as_jpg.changes == ("format", "wrong_extension") and bmp_as_jpg.reencoded
    for right in ("a.jpeg", "a.JPG", "a.jfif", "a.mpo", "noextension", "a.dat"):
        assert encode_for_tensorflow(FILES["jpeg.jpg"], name=right).changes == ()


def test_every_change_reason_is_documented_where_the_usage_page_points():
    section = REASONS_PAGE.split('<a id="change"></a>', 1)[1].split("<a id=", 1)[0]
    for code in reasons.codes("change"):
        assert f"| `{code}` |" in section, code
    assert "(reasons.md#change)" in USAGE_PAGE


def test_every_format_is_in_the_usage_pages_table():
    section = USAGE_PAGE.split("## What happens to each input", 1)[1].split("\n## ", 1)[0]
    for name in (*formats.ACCEPTED_FORMATS, *formats.REFUSED_FORMATS):
        assert name in section, name


def test_decoder_chatter_becomes_the_detail_and_never_reaches_the_terminal(capfd):
    chatty = imagegen.chatty_tiffs()
    with pytest.raises(Reject) as raised:
        encode_for_tensorflow(chatty["broken_deflate.tif"])
    assert raised.value.reason == "corrupt"
    assert "ZIPDecode: Decoding error" in raised.value.detail
    kept = encode_for_tensorflow(chatty["bad_code_word.tif"])  # libtiff complains, pixels decode
    assert (kept.height, kept.width, kept.channels) == (32, 48, 1)
    captured = capfd.readouterr()
    assert captured.err == "" and captured.out == ""


def test_pillows_own_log_goes_into_the_detail_and_nowhere_else(caplog, capfd):
    """Pillow reports some files on its logger (`ERROR PIL.TiffImagePlugin: More samples per
    pixel than can be decoded`) before it refuses them: the reject's detail carries that line, and
    no log handler sees it (the command's terminal, or the local runner's forwarded worker logs)."""
    data = imagegen.chatty_tiffs()["many_samples.tif"]  # (saving TIFFs logs at DEBUG too)
    with caplog.at_level(logging.DEBUG), pytest.raises(Reject) as raised:
        encode_for_tensorflow(data, EIGHT_BITS)
    assert raised.value.reason == "corrupt"
    assert "More samples per pixel than can be decoded: 303169682" in raised.value.detail
    assert [r.getMessage() for r in caplog.records if r.name.startswith("PIL")] == []
    assert capfd.readouterr().err == ""

    # Outside a conversion Pillow's logger is Pillow's: a user's own decode still logs.
    with caplog.at_level(logging.ERROR), pytest.raises(Exception):  # noqa: B017
        Image.open(io.BytesIO(data), formats=["TIFF"])
    assert any("More samples per pixel" in r.getMessage() for r in caplog.records)


def test_stderr_is_back_after_a_capture(capfd):
    encode_for_tensorflow(imagegen.chatty_tiffs()["bad_code_word.tif"])
    os.write(2, b"still here\n")
    assert capfd.readouterr().err == "still here\n"


def test_python_output_during_a_capture_reaches_the_terminal_after_keep_python_stderr():
    """The command moves sys.stderr off descriptor 2 first: a log line or the progress line
    written while another thread's decode is captured still reaches the terminal."""
    code = (
        "import os, sys\n"
        "from beam_tfrecord.images import quiet\n"
        "quiet.keep_python_stderr()\n"
        "with quiet.captured_stderr() as captured:\n"
        "    print('progress line', file=sys.stderr)\n"
        "    os.write(2, b'libtiff chatter')\n"
        "print('captured:', captured.text)\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    assert done.stderr == "progress line\n" and done.stdout == "captured: libtiff chatter\n"
