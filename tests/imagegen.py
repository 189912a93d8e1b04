"""Images made by the tests themselves: good ones, odd ones TensorFlow cannot read as they are,
and broken ones. Every image function returns the file's bytes. At the end, the two helpers the
permission tests share: a folder every user may enter, and a call made without root's powers."""

from __future__ import annotations

import contextlib
import functools
import io
import os
import pickle
import shutil
import struct
import subprocess
import sys
import tempfile
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import numpy as np
from PIL import Image


def gradient(width: int = 48, height: int = 32, mode: str = "RGB", seed: int = 0) -> Image.Image:
    """A deterministic picture with structure (so JPEG sizes are realistic, not flat)."""
    rng = np.random.default_rng(seed)
    y, x = np.mgrid[0:height, 0:width]
    base = np.stack([(x * 255 // max(width - 1, 1)), (y * 255 // max(height - 1, 1)), (x + y) % 256], -1)
    noise = rng.integers(0, 32, size=base.shape)
    rgb = Image.fromarray(np.clip(base + noise, 0, 255).astype(np.uint8), "RGB")
    return rgb if mode == "RGB" else rgb.convert(mode)


def encode(image: Image.Image, fmt: str, **kwargs) -> bytes:
    out = io.BytesIO()
    image.save(out, format=fmt, **kwargs)
    return out.getvalue()


def jpeg(width: int = 48, height: int = 32, seed: int = 0, mode: str = "RGB") -> bytes:
    return encode(gradient(width, height, mode, seed), "JPEG", quality=90)


def png(width: int = 48, height: int = 32, seed: int = 0, mode: str = "RGB") -> bytes:
    return encode(gradient(width, height, mode, seed), "PNG")


def ppm(width: int = 48, height: int = 32, seed: int = 0) -> bytes:
    """Raw RGB rows after a short text header: any prefix of one PPM followed by the rest of
    another of the same size is still a valid image, made of rows from both."""
    return encode(gradient(width, height, "RGB", seed), "PPM")


def text_named_jpg() -> bytes:
    return b"this is a text file that someone named photo.jpg\n"


def truncated_jpeg() -> bytes:
    data = jpeg(64, 64, seed=3)
    return data[: len(data) // 2]


def cmyk_jpeg() -> bytes:
    return encode(gradient().convert("CMYK"), "JPEG", quality=90)


def png16() -> bytes:
    """16-bit grayscale; the true values span the 16-bit range."""
    ramp = (np.arange(48 * 32, dtype=np.uint32).reshape(32, 48) * 40).astype(np.uint16)
    return encode(Image.fromarray(ramp), "PNG")


def palette_png_with_transparency() -> bytes:
    image = gradient().convert("P", palette=Image.Palette.ADAPTIVE, colors=16)
    return encode(image, "PNG", transparency=0)


def rgba_png() -> bytes:
    """Left half fully transparent, right half opaque."""
    image = gradient().convert("RGBA")
    alpha = np.zeros((32, 48), np.uint8)
    alpha[:, 24:] = 255
    image.putalpha(Image.fromarray(alpha))
    return encode(image, "PNG")


def animated_gif(frames: int = 3) -> bytes:
    images = [gradient(seed=i).convert("P") for i in range(frames)]
    return encode(images[0], "GIF", save_all=True, append_images=images[1:], duration=100, loop=0)


def tiff() -> bytes:
    return encode(gradient(), "TIFF")


def bmp() -> bytes:
    return encode(gradient(), "BMP")


def webp() -> bytes:
    return encode(gradient(), "WEBP", quality=90)


def exif_rotated_jpeg(orientation: int = 6) -> bytes:
    """Stored 48 wide and 32 high; orientation 6 means a viewer shows it 32 wide, 48 high."""
    exif = Image.Exif()
    exif[0x0112] = orientation
    return encode(gradient(48, 32), "JPEG", quality=90, exif=exif.tobytes())


def big_jpeg(width: int = 1200, height: int = 1000) -> bytes:
    return encode(Image.new("RGB", (width, height), (10, 20, 30)), "JPEG")


def grayscale_jpeg() -> bytes:
    return jpeg(mode="L")


# One tree with every case above: relpath -> bytes. Labels come from the folder.
def every_format() -> dict[str, bytes]:
    """One small picture in every format Pillow writes here, plus HEIC through pillow-heif, the
    multi-frame kinds, and two formats that are refused (PDF, EPS). Keys are file names whose
    extension is the format's own."""
    return dict(_every_format())


@functools.cache
def _every_format() -> dict[str, bytes]:
    """Encoded once a process: two test modules build the gallery at collection, in every worker."""
    import pillow_heif

    pillow_heif.register_heif_opener()  # lets Pillow's save() write HEIF
    rgb = gradient(48, 32)
    bits = rgb.convert("1")

    def frames(count: int = 3) -> list[Image.Image]:
        # Fresh images each time: Pillow keeps a save's encoder settings on the image object.
        return [gradient(48, 32, seed=i) for i in range(count)]

    files = {
        "avif.avif": encode(rgb, "AVIF", quality=90),
        "blp.blp": encode(rgb.convert("P"), "BLP"),
        "bmp.bmp": encode(rgb, "BMP"),
        "dds.dds": encode(rgb, "DDS"),
        "dib.dib": encode(rgb, "DIB"),
        "gif.gif": encode(rgb.convert("P"), "GIF"),
        "heic.heic": encode(rgb, "HEIF", quality=90),
        "icns.icns": encode(gradient(32, 32), "ICNS", sizes=[(16, 16), (32, 32)]),
        "ico.ico": encode(gradient(32, 32), "ICO", sizes=[(16, 16), (32, 32)]),
        "im.im": encode(rgb, "IM"),
        "jpeg.jpg": encode(rgb, "JPEG", quality=90),
        "jp2.jp2": encode(rgb, "JPEG2000"),
        "j2k.j2k": encode(rgb, "JPEG2000"),
        "mpo.mpo": encode(*frames(1), "MPO", save_all=True, append_images=frames(2)[1:]),
        "msp.msp": encode(bits, "MSP"),
        "pcx.pcx": encode(rgb, "PCX"),
        "png.png": encode(rgb, "PNG"),
        "ppm.ppm": encode(rgb, "PPM"),
        "pgm.pgm": encode(rgb.convert("L"), "PPM"),
        "qoi.qoi": encode(rgb, "QOI"),
        "sgi.sgi": encode(rgb, "SGI"),
        "spider.spider": encode(rgb.convert("F"), "SPIDER"),
        "tga.tga": encode(rgb, "TGA"),
        "tiff.tiff": encode(rgb, "TIFF"),
        "tiff_lzw.tif": encode(rgb, "TIFF", compression="tiff_lzw"),
        "tiff_jpeg.tif": encode(rgb, "TIFF", compression="jpeg"),
        "tiff_g4.tif": encode(bits, "TIFF", compression="group4"),
        "webp.webp": encode(rgb, "WEBP", quality=90),
        "webp_lossless.webp": encode(rgb, "WEBP", lossless=True),
        "xbm.xbm": encode(bits, "XBM"),
        "apng.png": encode(frames()[0], "PNG", save_all=True, append_images=frames()[1:]),
        "gif_animated.gif": encode(
            frames()[0].convert("P"), "GIF", save_all=True, append_images=frames()[1:]
        ),
        "tiff_pages.tiff": encode(frames()[0], "TIFF", save_all=True, append_images=frames()[1:]),
        "pdf.pdf": encode(rgb, "PDF"),
        "eps.eps": encode(rgb, "EPS"),
    }
    return files


def flip_byte(data: bytes, position: int | None = None) -> bytes:
    """`data` with the byte at `position` (default: the middle) inverted."""
    flipped = bytearray(data)
    flipped[len(data) // 2 if position is None else position] ^= 0xFF
    return bytes(flipped)


def many_samples_tiff(samples: int = 303_169_682) -> bytes:
    """A little-endian TIFF whose SamplesPerPixel tag (277) claims `samples`: Pillow refuses to
    open it and logs `More samples per pixel than can be decoded` on its own logger first."""
    data = bytearray(encode(gradient(16, 8), "TIFF"))
    assert data[:2] == b"II"
    ifd = struct.unpack_from("<I", data, 4)[0]
    for entry in range(struct.unpack_from("<H", data, ifd)[0]):
        offset = ifd + 2 + 12 * entry
        if struct.unpack_from("<H", data, offset)[0] == 277:
            struct.pack_into("<HHII", data, offset, 277, 4, 1, samples)  # one LONG, held in place
            return bytes(data)
    raise AssertionError("Pillow wrote no SamplesPerPixel tag")


def chatty_tiffs() -> dict[str, bytes]:
    """TIFFs on which a decoder talks past Python: libtiff prints to stderr itself on a deflate
    TIFF whose data fails its check (rejected) and on a fax-coded one with a bad code word (still
    decodes: a record); Pillow's own logger reports an absurd samples-per-pixel count (rejected)."""
    rgb, bits = gradient(48, 32), gradient(48, 32).convert("1")
    return {
        "broken_deflate.tif": flip_byte(encode(rgb, "TIFF", compression="tiff_deflate")),
        "bad_code_word.tif": flip_byte(encode(bits, "TIFF", compression="group4")),
        "many_samples.tif": many_samples_tiff(),
    }


def bad_input_tree() -> dict[str, bytes]:
    return {
        "cat/ok 1.jpg": jpeg(seed=1),
        "cat/ok_upper.JPG": jpeg(seed=2),
        "cat/chat été ü.jpg": jpeg(seed=3),
        "cat/gray.jpg": grayscale_jpeg(),
        "cat/empty.jpg": b"",
        "cat/text.jpg": text_named_jpg(),
        "cat/truncated.jpg": truncated_jpeg(),
        "cat/cmyk.jpg": cmyk_jpeg(),
        "dog/deep.png": png16(),
        "dog/palette.png": palette_png_with_transparency(),
        "dog/rgba.png": rgba_png(),
        "dog/animated.gif": animated_gif(),
        "dog/scan.tiff": tiff(),
        "dog/paint.bmp": bmp(),
        "dog/web.webp": webp(),
        "dog/rotated.jpg": exif_rotated_jpeg(),
        "dog/huge.jpg": big_jpeg(),
        "dog/ok.png": png(seed=4),
        "dog/.hidden.jpg": jpeg(seed=5),
        "Thumbs.db": b"\x00junk",
    }


# What becomes of each input of bad_input_tree() with --max_pixels 1000000:
# a reject reason, or the stored format and (height, width, channels).
BAD_INPUT_OUTCOMES: dict[str, tuple[str, ...]] = {
    "cat/ok 1.jpg": ("kept", "jpeg", "32x48x3"),
    "cat/ok_upper.JPG": ("kept", "jpeg", "32x48x3"),
    "cat/chat été ü.jpg": ("kept", "jpeg", "32x48x3"),
    "cat/gray.jpg": ("kept", "jpeg", "32x48x1"),
    "cat/empty.jpg": ("reject", "empty"),
    "cat/text.jpg": ("reject", "not_an_image"),
    "cat/truncated.jpg": ("reject", "truncated"),
    "cat/cmyk.jpg": ("reencoded", "jpeg", "32x48x3"),
    "dog/deep.png": (
        "kept",
        "png",
        "32x48x1",
    ),  # a 16-bit PNG, kept whole (tf.io.decode_png(dtype=tf.uint16))
    "dog/palette.png": ("reencoded", "png", "32x48x3"),
    "dog/rgba.png": ("reencoded", "png", "32x48x3"),
    "dog/animated.gif": ("reencoded", "png", "32x48x3"),
    "dog/scan.tiff": ("reencoded", "png", "32x48x3"),
    "dog/paint.bmp": ("reencoded", "png", "32x48x3"),
    "dog/web.webp": ("reencoded", "jpeg", "32x48x3"),
    "dog/rotated.jpg": ("reencoded", "jpeg", "48x32x3"),
    "dog/huge.jpg": ("reject", "too_large"),
    "dog/ok.png": ("kept", "png", "32x48x3"),
    "dog/.hidden.jpg": ("reject", "skipped"),
    "Thumbs.db": ("reject", "skipped"),
}
BAD_INPUT_MAX_PIXELS = 1_000_000


def write_tree(root, files: dict[str, bytes]) -> None:
    """Write relpath -> bytes under `root` (a pathlib.Path)."""
    for relpath, data in files.items():
        path = root / relpath
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(data)


# The uid and gid of `nobody` on Debian and most Linux systems; numeric, so no passwd entry is needed.
NOBODY = 65534

# Runs in a child interpreter started by root. The same call is made once as root first, so that
# every module it imports lazily is loaded while the interpreter's own files can still be read
# (here Python lives under /root, which nobody cannot enter); then root is dropped for good
# (groups, gid, uid, in that order) and the call that counts is made.
_UNPRIVILEGED_CHILD = """
import os, pickle, sys
function, args, nobody = pickle.load(sys.stdin.buffer)
function(*args)
os.setgroups([])
os.setgid(nobody)
os.setuid(nobody)
assert os.geteuid() == nobody and os.getegid() == nobody and not os.getgroups()
sys.stdout.buffer.write(pickle.dumps(function(*args)))
"""


def call_without_root(function: Callable[..., Any], *args: Any) -> Any:
    """`function(*args)` with only an ordinary user's right to read files.

    Root reads and lists whatever the permission bits say, and these tests run as root here and
    in CI, so a permission test made as root proves nothing. As root the call runs in a child
    process that drops to `nobody`; as anyone else it runs right here. `function` and `args` must
    pickle (a module-level function, plain data); the result comes back pickled.
    """
    if os.geteuid() != 0:
        return function(*args)
    child = subprocess.run(
        [sys.executable, "-c", _UNPRIVILEGED_CHILD],
        input=pickle.dumps((function, args, NOBODY)),
        capture_output=True,
        check=False,
        timeout=120,
    )
    if child.returncode != 0:
        raise AssertionError(f"the unprivileged call failed:\n{child.stderr.decode(errors='replace')}")
    return pickle.loads(child.stdout)


@contextlib.contextmanager
def folder_anyone_can_enter() -> Iterator[Path]:
    """A new, empty folder (mode 0755) that every user may enter and list.

    pytest's tmp_path sits in a folder only its owner may enter, so an unprivileged reader would
    fail there on the path itself, not on the one entry whose permissions a test takes away.
    Removed afterwards, permissions restored first so that a non-root owner can delete it.
    """
    root = Path(tempfile.mkdtemp(prefix="beam-tfrecord-perms-"))
    try:
        root.chmod(0o755)
        yield root
    finally:
        for folder, dirs, _ in os.walk(root):  # top-down: each folder is opened before entered
            for name in dirs:
                if not os.path.islink(os.path.join(folder, name)):
                    os.chmod(os.path.join(folder, name), 0o755)
        shutil.rmtree(root)
