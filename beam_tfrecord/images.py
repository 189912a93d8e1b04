"""Validate, decode and normalize one image so that `tf.io.decode_image` can read what is stored.

Pure functions on bytes, no Beam and no TensorFlow: the training job calls `tf.io.decode_image`,
so the bytes kept here are either the source bytes (when TensorFlow already decodes them to the
same pixels a viewer shows) or a JPEG/PNG re-encoding of the pixels Pillow decoded.
"""

from __future__ import annotations

import contextlib
import io
import re
import struct
import warnings
import zlib
from dataclasses import dataclass

import numpy as np
from PIL import Image, ImageOps, UnidentifiedImageError

__all__ = [
    "DEFAULT_MAX_PIXELS",
    "IMAGE_FORMATS",
    "RESIZE_MODES",
    "SUPPORTED_FORMATS",
    "EncodedImage",
    "ImageOptions",
    "Reject",
    "encode_for_tensorflow",
    "parse_size",
]

# Formats Pillow may open (JPEG includes MPO, which cameras write). Anything else is identified
# (header only) and rejected as `unsupported_format`; nothing outside this list is ever decoded,
# so no plugin that shells out (EPS through Ghostscript, for one) can run on an input.
SUPPORTED_FORMATS = ("JPEG", "PNG", "GIF", "BMP", "TIFF", "WEBP", "PPM")
# Source formats whose lossy pixels are re-encoded as JPEG; everything else becomes PNG.
LOSSY_FORMATS = ("JPEG", "MPO", "WEBP")
# Pillow modes that TensorFlow's JPEG and PNG decoders give back unchanged.
PASSTHROUGH_MODES = ("L", "RGB")
EXIF_ORIENTATION = 0x0112
DEFAULT_MAX_PIXELS = 100_000_000
IMAGE_FORMATS = ("original", "jpeg", "png")  # ImageOptions.image_format
RESIZE_MODES = ("stretch", "crop", "pad")  # ImageOptions.resize_mode


class Reject(Exception):
    """An input that cannot become a record; `reason` is a stable code, `detail` is for people."""

    def __init__(self, reason: str, detail: str) -> None:
        super().__init__(f"{reason}: {detail}")
        self.reason = reason
        self.detail = detail


@dataclass(frozen=True)
class ImageOptions:
    """How the stored image may differ from the source; the defaults keep source bytes."""

    image_format: str = "original"  # original | jpeg | png
    jpeg_quality: int = 95
    resize: tuple[int, int] | None = None  # (width, height)
    resize_mode: str = "stretch"  # stretch | crop | pad
    max_pixels: int = DEFAULT_MAX_PIXELS
    channels: int | None = None  # None keeps grayscale grayscale; 1 or 3 forces


@dataclass(frozen=True)
class EncodedImage:
    """The bytes to store in `image/encoded` and what `tf.io.decode_image` will return for them."""

    data: bytes
    format: str  # "jpeg" | "png"
    height: int
    width: int
    channels: int
    source_format: str
    reencoded: bool


def parse_size(text: str) -> tuple[int, int]:
    """`"224x224"` -> (224, 224); width first, as people write it."""
    try:
        width, height = (int(part) for part in text.lower().split("x"))
    except ValueError:
        raise ValueError(f"size must look like WIDTHxHEIGHT, e.g. 224x224, not {text!r}") from None
    if width <= 0 or height <= 0:
        raise ValueError(f"size must be positive, not {text!r}")
    return width, height


def encode_for_tensorflow(data: bytes, options: ImageOptions = ImageOptions()) -> EncodedImage:
    """Decode `data` in full and return bytes TensorFlow decodes, or raise `Reject`."""
    if not data:
        raise Reject("empty", "the file has zero bytes")
    image = _open(data)
    source_format = "JPEG" if image.format == "MPO" else image.format
    width, height = image.size
    if width * height > options.max_pixels:
        raise Reject(
            "too_large",
            f"{width}x{height} = {width * height} pixels is over --max_pixels={options.max_pixels}",
        )
    if source_format == "PNG":
        _check_png_chunks(data)
    ends = _check_jpeg_segments(data) if source_format == "JPEG" else True
    animated = _is_animated(image)
    keep = ends and _can_keep_source(data, image, source_format, animated, options)
    if keep and source_format == "JPEG":
        # The pixels are not needed, only proof that every byte decodes: JPEG's DCT scaling
        # decodes all entropy-coded data (so truncation and corruption still show) at 1/8 size.
        image.draft(image.mode, ((width + 7) // 8, (height + 7) // 8))
    _load(image)

    if keep:
        return EncodedImage(
            data=data,
            format=source_format.lower(),
            height=height,
            width=width,
            channels=len(image.getbands()),
            source_format=source_format,
            reencoded=False,
        )
    pixels = _normalize_pixels(image, options)
    target = _target_format(source_format, options)
    return EncodedImage(
        data=_encode(pixels, target, options.jpeg_quality),
        format=target,
        height=pixels.height,
        width=pixels.width,
        channels=len(pixels.getbands()),
        source_format=source_format,
        reencoded=True,
    )


def _open(data: bytes) -> Image.Image:
    """Open (header only) with the supported plugins, telling junk from unsupported images."""
    Image.init()  # register every plugin, so `formats=` can name WEBP and TIFF
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", Image.DecompressionBombWarning)
            return Image.open(io.BytesIO(data), formats=SUPPORTED_FORMATS)
    except UnidentifiedImageError:
        pass
    except Image.DecompressionBombError as error:
        raise Reject("too_large", str(error)) from None
    except Exception as error:  # a header Pillow recognised but could not parse
        raise _decoder_reject(error) from None
    try:
        other = Image.open(io.BytesIO(data))  # identification only: never loaded
        detail = f"{other.format} images are not converted"
    except Exception:
        raise Reject("not_an_image", "no image codec recognises the bytes") from None
    raise Reject("unsupported_format", detail)


def _is_animated(image: Image.Image) -> bool:
    """Whether a second frame exists; unlike `n_frames` it never walks every frame, and a
    broken frame table becomes a reason, never a crash."""
    try:
        return bool(getattr(image, "is_animated", False))
    except Exception as error:
        raise _decoder_reject(error) from None


def _load(image: Image.Image) -> None:
    """Decode every pixel of the first frame; a decoder error becomes a reason, never a crash."""
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", Image.DecompressionBombWarning)
            image.load()
    except Image.DecompressionBombError as error:
        raise Reject("too_large", str(error)) from None
    except Exception as error:
        raise _decoder_reject(error) from None


def _decoder_reject(error: Exception) -> Reject:
    """`truncated` when the data ends early, `corrupt` for any other decoder complaint."""
    message = str(error)
    lowered = message.lower()
    truncated = "truncated" in lowered or "premature end" in lowered or isinstance(error, EOFError)
    return Reject("truncated" if truncated else "corrupt", f"{type(error).__name__}: {message}")


def _orientation(image: Image.Image) -> int:
    """The EXIF orientation tag, 1 (upright) when absent or malformed."""
    try:
        value = image.getexif().get(EXIF_ORIENTATION, 1)
        return int(value) if value in range(1, 9) else 1
    except Exception:
        return 1


def _check_png_chunks(data: bytes) -> None:
    """Reject a PNG whose chunk checksums fail or that ends before IEND: Pillow checks neither
    for image data, libpng (so TensorFlow) refuses both. Cheap next to decoding."""
    position = 8
    while position + 12 <= len(data):
        (length,) = struct.unpack_from(">I", data, position)
        end = position + 8 + length
        if end + 4 > len(data):
            break
        kind = data[position + 4 : position + 8]
        (stored,) = struct.unpack_from(">I", data, end)
        if zlib.crc32(data[position + 4 : end]) != stored:
            raise Reject("corrupt", f"PNG chunk {kind!r} at byte {position} fails its CRC check")
        if kind == b"IEND":
            return
        position = end + 4
    raise Reject("truncated", f"PNG data ends at byte {len(data)}, before its IEND chunk")


def _check_jpeg_segments(data: bytes) -> bool:
    """Walk the JPEG's marker segments as libjpeg reads them: False when no end-of-image
    marker follows the last scan (Pillow pads one in, TensorFlow fails: re-encode), `Reject`
    when a segment claims more bytes than the file has (TensorFlow fails, and Pillow's pixels
    are guesswork). Entropy-coded data is skipped with a regex, not a Python loop."""
    position, size = 2, len(data)
    while position + 1 < size:
        if data[position] != 0xFF:  # stray bytes between segments: libjpeg skips them
            position = data.find(b"\xff", position)
            if position < 0:
                return False
            continue
        marker = data[position + 1]
        if marker == 0xD9:
            return True
        if marker in (0x00, 0x01, 0xFF) or 0xD0 <= marker <= 0xD8:  # fill, TEM, RSTn, SOI
            position += 1 if marker == 0xFF else 2
            continue
        if position + 4 > size:
            return False
        length = int.from_bytes(data[position + 2 : position + 4])
        if length < 2 or position + 2 + length > size:
            raise Reject("corrupt", f"JPEG segment 0xff{marker:02x} at byte {position} runs past the end")
        position += 2 + length
        if marker == 0xDA:  # a scan: entropy-coded data up to the next real marker
            found = _JPEG_NEXT_MARKER.search(data, position)
            if found is None:
                return False
            position = found.start()
    return False


# 0xff then anything but a stuffed zero, a restart marker or more fill. Written as one byte
# class, not `\xff+[^...]`, which is 20 times slower on photos (about 0.7 ms per MB this way).
_JPEG_NEXT_MARKER = re.compile(rb"\xff[\x01-\xcf\xd8-\xfe]")


def _png_bit_depth(data: bytes) -> int:
    """The bit depth byte of a PNG's IHDR chunk (Pillow reports 16-bit RGB as plain RGB)."""
    return data[24] if len(data) > 24 else 8


def _can_keep_source(
    data: bytes, image: Image.Image, source_format: str, animated: bool, options: ImageOptions
) -> bool:
    """True when TensorFlow decodes the source bytes to exactly the pixels wanted."""
    kind = source_format.lower()
    if kind not in ("jpeg", "png") or options.image_format not in ("original", kind):
        return False
    if animated or options.resize is not None or image.mode not in PASSTHROUGH_MODES:
        return False
    if "transparency" in image.info:
        return False
    if options.channels is not None and options.channels != len(image.getbands()):
        return False
    if kind == "png" and _png_bit_depth(data) != 8:
        return False
    return _orientation(image) == 1


def _normalize_pixels(image: Image.Image, options: ImageOptions) -> Image.Image:
    """Upright, 8-bit, grayscale or RGB pixels at the requested size."""
    with contextlib.suppress(Exception):  # malformed EXIF: keep the pixels as stored
        image = ImageOps.exif_transpose(image)
    image = _to_8bit_gray_or_rgb(image)
    if options.channels == 3 and image.mode == "L":
        image = image.convert("RGB")
    elif options.channels == 1 and image.mode == "RGB":
        image = image.convert("L")
    if options.resize is not None:
        image = _resize(image, options.resize, options.resize_mode)
    return image


def _to_8bit_gray_or_rgb(image: Image.Image) -> Image.Image:
    """Flatten alpha onto white, expand palettes, scale 16-bit down, convert CMYK and the rest."""
    mode = image.mode
    if mode in PASSTHROUGH_MODES and "transparency" not in image.info:
        return image
    if mode in ("I;16", "I;16B", "I;16L", "I", "F"):
        array = np.asarray(image, dtype=np.float64)
        scale = 257.0 if array.max(initial=0) > 255 else 1.0
        return Image.fromarray(np.clip(array / scale, 0, 255).astype(np.uint8), mode="L")
    if mode == "1":
        return image.convert("L")
    has_alpha = mode in ("RGBA", "LA", "PA", "La", "RGBa") or "transparency" in image.info
    if has_alpha:
        gray = mode in ("L", "LA", "La") or (mode == "P" and _palette_is_gray(image))
        rgba = image.convert("RGBA")
        background = Image.new("RGBA", rgba.size, (255, 255, 255, 255))
        flat = Image.alpha_composite(background, rgba).convert("RGB")
        return flat.convert("L") if gray else flat
    return image.convert("RGB")


def _palette_is_gray(image: Image.Image) -> bool:
    palette = image.getpalette() or []
    triples = zip(palette[0::3], palette[1::3], palette[2::3], strict=False)
    return all(r == g == b for r, g, b in triples)


def _resize(image: Image.Image, size: tuple[int, int], mode: str) -> Image.Image:
    resample = Image.Resampling.BICUBIC
    if mode == "stretch":
        return image.resize(size, resample)
    if mode == "crop":
        return ImageOps.fit(image, size, resample)
    if mode == "pad":
        fill = 0 if image.mode == "L" else (0, 0, 0)
        return ImageOps.pad(image, size, resample, color=fill)
    raise ValueError(f"resize_mode must be stretch, crop or pad, not {mode!r}")


def _target_format(source_format: str, options: ImageOptions) -> str:
    if options.image_format in ("jpeg", "png"):
        return options.image_format
    return "jpeg" if source_format in LOSSY_FORMATS else "png"


def _encode(image: Image.Image, target: str, jpeg_quality: int) -> bytes:
    out = io.BytesIO()
    if target == "jpeg":
        image.save(out, format="JPEG", quality=jpeg_quality)
    else:
        image.save(out, format="PNG")
    return out.getvalue()
