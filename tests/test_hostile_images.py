"""Hostile files for the decode-and-normalize function: decompression bombs, huge metadata,
malformed EXIF, broken checksums and end markers, and frame tables that would cost unbounded
work. Every one ends as a Reject with a reason or as bytes TensorFlow decodes."""

from __future__ import annotations

import struct
import zlib

import imagegen
import pytest
import tensorflow as tf
from PIL import GifImagePlugin, Image

from beam_tfrecord.images.normalize import Reject, encode_for_tensorflow
from beam_tfrecord.images.options import ImageConfig


def chunk(kind: bytes, body: bytes) -> bytes:
    return struct.pack(">I", len(body)) + kind + body + struct.pack(">I", zlib.crc32(kind + body))


def png_claiming(width: int, height: int) -> bytes:
    """A tiny PNG whose header claims a huge image: decoding it would allocate width*height*3."""
    header = struct.pack(">IIBBBBB", width, height, 8, 2, 0, 0, 0)
    idat = zlib.compress(b"\x00" * 1000)
    return b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", header) + chunk(b"IDAT", idat) + chunk(b"IEND", b"")


def png_with_chunk(kind: bytes, body: bytes) -> bytes:
    data = imagegen.png()
    return data[:33] + chunk(kind, body) + data[33:]  # right after IHDR


def jpeg_claiming(width: int, height: int) -> bytes:
    data = bytearray(imagegen.jpeg())
    sof = data.index(b"\xff\xc0")
    data[sof + 5 : sof + 9] = struct.pack(">HH", height, width)
    return bytes(data)


def gif_claiming(width: int, height: int) -> bytes:
    """A one-frame GIF whose logical screen claims width x height (the frame itself is 48x32)."""
    data = bytearray(imagegen.animated_gif(1))
    data[6:10] = struct.pack("<HH", width, height)
    return bytes(data)


def cut_in_pixel_data(data: bytes, marker: bytes) -> bytes:
    """`data` cut 20 bytes after `marker` (the start of its pixel data): a header that opens,
    then a decoder that runs out of bytes at once, so a raised limit ends cheaply as `truncated`
    instead of by decoding or allocating the claimed image."""
    return data[: data.index(marker) + 20]


DEFAULTS = ImageConfig()
# Pillow's own bomb check refuses images over twice its MAX_IMAGE_PIXELS (about 179M pixels),
# before ours runs. 12,000 x 12,000 = 144M pixels is over our default --max_pixels and under
# Pillow's limit, so only our check can refuse it.
OURS_ONLY = 12_000
PILLOWS_LIMIT = Image.MAX_IMAGE_PIXELS * 2


def rejected(data: bytes, options: ImageConfig = DEFAULTS) -> Reject:
    with pytest.raises(Reject) as raised:
        encode_for_tensorflow(data, options)
    return raised.value


def reason(data: bytes, options: ImageConfig = DEFAULTS) -> str:
    return rejected(data, options).reason


def readable(data: bytes, options: ImageConfig = DEFAULTS):
    image = encode_for_tensorflow(data, options)
    pixels = tf.io.decode_image(image.data, expand_animations=False)
    assert tuple(pixels.shape) == (image.height, image.width, image.channels)
    return image


@pytest.mark.parametrize(
    "data",
    [
        cut_in_pixel_data(jpeg_claiming(OURS_ONLY, OURS_ONLY), b"\xff\xda"),  # start of scan
        cut_in_pixel_data(png_claiming(OURS_ONLY, OURS_ONLY), b"IDAT"),
        cut_in_pixel_data(gif_claiming(OURS_ONLY, OURS_ONLY), b","),  # image descriptor
    ],
    ids=["jpeg-144M-pixels", "png-144M-pixels", "gif-144M-pixels"],
)
def test_max_pixels_is_our_check_and_configurable(data):
    """Under Pillow's bomb limit only our header check stands between a 1 KB file and a 432 MB
    decode: it rejects with its own words at the default, and lets the same bytes through to the
    decoder when --max_pixels is raised (they then end as `truncated`, being cut short)."""
    assert DEFAULTS.max_pixels == 100_000_000 < OURS_ONLY**2 <= PILLOWS_LIMIT
    reject = rejected(data)
    assert reject.reason == "too_large"
    assert reject.detail == "12000x12000 = 144000000 pixels is over max_pixels (100000000)"
    for raised in (OURS_ONLY**2, 150_000_000):  # at the limit is allowed: only over it is rejected
        assert reason(data, ImageConfig(max_pixels=raised)) == "truncated"


@pytest.mark.parametrize(
    "data",
    [png_claiming(100_000, 100_000), png_claiming(20_000, 20_000), jpeg_claiming(65_000, 65_000)],
    ids=["png-10G-pixels", "png-400M-pixels", "jpeg-4G-pixels"],
)
def test_decompression_bombs_are_rejected_from_the_header(data):
    assert reason(data) == "too_large"
    # Pillow's own bomb limit (about 179M pixels) holds even when --max_pixels is raised past it.
    reject = rejected(data, ImageConfig(max_pixels=10**12))
    assert reject.reason == "too_large" and "could be decompression bomb" in reject.detail


def test_gif_claiming_a_huge_screen_is_rejected():
    assert reason(gif_claiming(65_535, 65_535)) == "too_large"


def test_compressed_text_bomb_stops_at_pillows_text_limit():
    bomb = png_with_chunk(b"zTXt", b"k\x00\x00" + zlib.compress(b"a" * 20_000_000))
    assert len(bomb) < 100_000
    assert reason(bomb) == "corrupt"  # "Decompressed data too large for MAX_TEXT_CHUNK"


def test_huge_plain_metadata_is_carried_not_a_problem():
    assert not readable(png_with_chunk(b"tEXt", b"k\x00" + b"a" * 3_000_000)).reencoded
    data = imagegen.jpeg()
    comments = b"".join(b"\xff\xfe" + struct.pack(">H", 65_535) + b"c" * 65_533 for _ in range(40))
    assert not readable(data[:2] + comments + data[2:]).reencoded  # 2.6 MB of JPEG comments


@pytest.mark.parametrize(
    "exif",
    [
        b"Exif\x00\x00" + b"\x13" * 64,  # garbage after the header
        b"Exif\x00\x00MM\x00\x2a\xff\xff\xff\xf0",  # first IFD offset past the end
        # one entry: orientation (0x0112) stored as the text "abc"
        b"Exif\x00\x00II\x2a\x00\x08\x00\x00\x00\x01\x00\x12\x01\x02\x00\x04\x00\x00\x00abc\x00",
        b"Exif\x00\x00II\x2a\x00\x08\x00\x00\x00\xff\xff" + b"\x00" * 40,  # claims 65535 entries
    ],
    ids=["garbage", "offset-past-end", "orientation-as-text", "entry-count-lie"],
)
def test_malformed_exif_never_crashes(exif):
    data = imagegen.jpeg()
    app1 = b"\xff\xe1" + struct.pack(">H", len(exif) + 2) + exif
    image = readable(data[:2] + app1 + data[2:])
    assert (image.height, image.width) == (32, 48)  # no orientation is applied from garbage


def test_png_with_a_broken_checksum_or_no_end_is_rejected():
    data = bytearray(imagegen.png())
    data[60] ^= 0x01  # inside IDAT: Pillow does not check its CRC, libpng does
    assert reason(bytes(data)) == "corrupt"
    good = imagegen.png()
    assert reason(good[: good.index(b"IDAT") + 6]) == "truncated"


def test_jpeg_without_end_marker_is_reencoded_for_tensorflow():
    """Found by the fuzz test: Pillow decodes this JPEG (end marker damaged), TensorFlow not."""
    data = bytearray(imagegen.jpeg(24, 16, seed=1))
    assert data.endswith(b"\xff\xd9")
    data[3] = 0  # the APP0 marker
    data.insert(231, 0)
    data[784] = 0  # the end-of-image marker's 0xff
    image = readable(bytes(data))
    assert image.reencoded and image.format == "jpeg"


def test_jpeg_with_a_marker_inside_its_scan_data_is_corrupt():
    """Found by the fuzz test: one byte turns scan data into an APP1 marker whose length runs
    past the end; Pillow pads the missing data, TensorFlow fails to read the file."""
    data = bytearray(imagegen.jpeg(24, 16, seed=1))
    assert data[669:671] == b"\x13\xe1"
    data[669] = 0xFF
    assert reason(bytes(data)) == "corrupt"


def test_frame_tables_are_not_walked(monkeypatch):
    """Time per image is bounded by work, not a clock: only the first frame is decoded and
    whether a second exists is all that is asked, however many frames the file claims."""
    frames = [imagegen.gradient(8, 8, seed=i).convert("P") for i in range(300)]
    data = imagegen.encode(frames[0], "GIF", save_all=True, append_images=frames[1:])
    seeks = []
    original = GifImagePlugin.GifImageFile._seek

    def counting(self, frame, *args, **kwargs):
        seeks.append(frame)
        return original(self, frame, *args, **kwargs)

    monkeypatch.setattr(GifImagePlugin.GifImageFile, "_seek", counting)
    image = readable(data)
    assert image.reencoded and (image.height, image.width) == (8, 8)
    assert max(seeks) <= 1


def test_pillow_pixel_limit_is_the_documented_one():
    assert Image.MAX_IMAGE_PIXELS is not None  # nothing in the project switches Pillow's bomb check off
