"""Validate, decode and normalize one image so that `tf.io.decode_image` can read what is stored.

Pure functions on bytes, no Beam and no TensorFlow: the training job calls `tf.io.decode_image`,
so the bytes kept here are either the source bytes (when TensorFlow already decodes them to the
same pixels a viewer shows) or a JPEG/PNG re-encoding of the pixels Pillow decoded.
"""

from __future__ import annotations

import contextlib
import dataclasses
import io
import re
import struct
import zlib
from dataclasses import dataclass

import numpy as np
from PIL import Image, ImageFile, ImageOps, UnidentifiedImageError

from beam_tfrecord import compat, reasons
from beam_tfrecord.images import depth, dicom, formats, modes, pixels, tiff
from beam_tfrecord.images.deep import DeepPicture
from beam_tfrecord.images.options import ImageConfig
from beam_tfrecord.images.quiet import Captured, captured_stderr, pillow_log
from beam_tfrecord.keys import StoredPixels
from beam_tfrecord.labels import geometry
from beam_tfrecord.labels.geometry import PixelTransform
from beam_tfrecord.reasons import Reject

__all__ = [
    "EncodedImage",
    "Reject",
    "encode_for_tensorflow",
    "page_image",
    "read_samples",
    "stacked_image",
]

# Source formats whose lossy pixels are re-encoded as JPEG; everything else becomes PNG.
LOSSY_FORMATS = ("JPEG", "MPO", "WEBP", "HEIF", "AVIF")
# Formats whose decoders never write to stderr (Pillow's own handlers): no capture needed.
QUIET_FORMATS = ("JPEG", "PNG")
# Icon formats hold one picture in several sizes; Pillow opens the largest.
ICON_FORMATS = ("ICO", "CUR", "ICNS")
EXIF_ORIENTATION = 0x0112
DEFAULT_OPTIONS = ImageConfig()  # keep the source bytes where TensorFlow decodes them


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
    mode: str = ""  # the source's Pillow mode
    changes: tuple[str, ...] = ()  # change reason codes, in reasons.codes("change") order
    # What was done to the stored picture's geometry (boxes and masks follow it); never None
    # from encode_for_tensorflow: the identity when the bytes are kept.
    transform: PixelTransform | None = None
    # A picture kept past 8 bits (images.depth): its sample type, shape and source facts.
    depth: StoredPixels | None = None


def encode_for_tensorflow(
    data: bytes, options: ImageConfig = DEFAULT_OPTIONS, *, name: str | None = None
) -> EncodedImage:
    """Decode `data` in full and return bytes TensorFlow decodes, or raise `Reject`.

    `name` (the input's path) lets the result say when the extension names another format.
    What Pillow logs meanwhile ends in a reject's detail, never on the terminal (quiet.py)."""
    with pillow_log() as logged:
        try:
            return _to_tensorflow(data, options, name)
        except Reject as reject:
            if not logged:
                raise
            said = Captured("\n".join(logged)).summary()
            raise reject.with_detail(f"{reject.detail} (Pillow: {said})") from None


def _to_tensorflow(data: bytes, options: ImageConfig, name: str | None) -> EncodedImage:
    if not data:
        raise Reject(reasons.EMPTY, "the file has zero bytes")
    deep = depth.full_depth_picture(data, options)
    if deep is not None and options.pages == "first" and not deep.stacked:
        return page_image(deep, options, name)
    if deep is not None:
        return _deep_image(deep, data, options, name)
    image, source_format = _opened(data, options)
    width, height = image.size
    if source_format == "PNG" and options.full_depth and depth.png16_bands(data) is not None:
        return _deep_image(_png16_picture(data), data, options, name, keep=_orientation(image) == 1)
    ends = _check_jpeg_segments(data) if source_format == "JPEG" else True
    changes = _changes(data, image, source_format, ends, options)
    keep = not changes  # (a wrong extension alone, added below, keeps the bytes)
    # The pixels of a JPEG kept as it is are not needed, only proof that every byte decodes: JPEG's
    # DCT scaling decodes all entropy-coded data (so truncation and corruption still show) at 1/8.
    draft_size = ((width + 7) // 8, (height + 7) // 8) if keep and source_format == "JPEG" else None
    if draft_size:
        image.draft(image.mode, draft_size)
    whole = source_format == "JPEG" and len(data) > ImageFile.MAXBLOCK
    if whole:  # one release of the GIL a JPEG, not one per MAXBLOCK (64 KB)
        compat.decode_in_one_call(image, len(data))
    try:
        _load(image, source_format)
    except Reject:
        if not whole:
            raise
        # How Pillow feeds its decoder shows in what it says of a broken file ("N bytes not
        # processed"): a reject is decoded again as Pillow feeds it by default, so its reason
        # and detail are the ones every run gave. Only broken files pay for the second decode.
        image = _open(data)
        if draft_size:
            image.draft(image.mode, draft_size)
        _load(image, source_format)
    if options.full_depth and image.mode in depth.PILLOW_DEEP_MODES:
        found = depth.pillow_deep(image)
        assert found is not None
        return _deep_image(found, data, options, name)
    if name is not None and formats.wrong_extension(name, source_format) is not None:
        changes.append(reasons.WRONG_EXTENSION.code)
    ordered = tuple(code for code in reasons.codes("change") if code in changes)

    if keep:
        return EncodedImage(
            data=data,
            format=source_format.lower(),
            height=height,
            width=width,
            channels=len(image.getbands()),
            source_format=source_format,
            reencoded=False,
            mode=image.mode,
            changes=ordered,
            transform=geometry.identity_transform(width, height),
        )
    pixels, transform = _normalize_pixels(image, options)
    target = _target_format(source_format, options, lossless=formats.is_lossless_webp(data))
    return EncodedImage(
        data=_encode(pixels, target, options.jpeg_quality),
        format=target,
        height=pixels.height,
        width=pixels.width,
        channels=len(pixels.getbands()),
        source_format=source_format,
        reencoded=True,
        mode=image.mode,
        changes=ordered,
        transform=transform,
    )


def read_samples(data: bytes, options: ImageConfig = DEFAULT_OPTIONS) -> DeepPicture:
    """Every sample of a picture as its file stores them, at any depth and band count, or
    `Reject` with the reasons `encode_for_tensorflow` gives: TIFF and DICOM through their
    full-depth readers, whatever their depth; the rest through Pillow (16-bit PNGs whole, a
    palette's indices, no EXIF orientation applied, 1-bit as 0 and 1). What a band's file of
    `--bands` holds (`images.bands`), before the bands are stacked."""
    with pillow_log() as logged:
        try:
            return _samples(data, options)
        except Reject as reject:
            if not logged:
                raise
            said = Captured("\n".join(logged)).summary()
            raise reject.with_detail(f"{reject.detail} (Pillow: {said})") from None


def _samples(data: bytes, options: ImageConfig) -> DeepPicture:
    if not data:
        raise Reject(reasons.EMPTY, "the file has zero bytes")
    if dicom.is_dicom(data):
        return dicom.read_dicom(data, max_pixels=options.max_pixels)
    if tiff.is_tiff(data):
        return tiff.read_tiff(data, max_pixels=options.max_pixels)
    image, source_format = _opened(data, options)
    width, height = image.size
    if source_format == "PNG" and depth.png16_bands(data) is not None:
        return _png16_picture(data)
    _load(image, source_format)
    deep = depth.pillow_deep(image)
    if deep is not None:
        return deep
    samples = np.asarray(image)
    if samples.dtype == np.bool_:
        samples = samples.astype(np.uint8)
    return DeepPicture(np.ascontiguousarray(samples.reshape(height, width, -1)), source_format)


def stacked_image(picture: DeepPicture, options: ImageConfig = DEFAULT_OPTIONS) -> EncodedImage:
    """The stored image of a picture stacked from files of one band each (`images.bands`):
    8-bit grayscale or RGB as an 8-bit picture is stored (a PNG, through `encode_for_tensorflow`,
    so `--resize` and `--channels` do what they do to photographs), anything else as a full-depth
    picture is (`images.depth`). Its source format is the band files'."""
    samples = picture.samples
    if samples.dtype != np.uint8 or picture.stacked or picture.bands not in (1, 3):
        return _deep_image(picture, b"", options, None)
    out = io.BytesIO()
    Image.fromarray(samples[..., 0] if picture.bands == 1 else samples).save(out, format="PNG")
    image = encode_for_tensorflow(out.getvalue(), options)
    codes = {*image.changes, *([reasons.FORMAT.code] if picture.source_format != "PNG" else [])}
    changes = tuple(code for code in reasons.codes("change") if code in codes)
    return dataclasses.replace(
        image,
        source_format=picture.source_format,
        reencoded=True,
        mode=depth.describe(picture),
        changes=changes,
    )


def page_image(
    picture: DeepPicture, options: ImageConfig = DEFAULT_OPTIONS, name: str | None = None
) -> EncodedImage:
    """The stored image of one page of a multi-page file (`--pages first` or `each`), as the
    record of a one-page file holding that page would be: a TIFF's page of 8-bit grayscale or RGB
    the 8-bit way (a PNG, as Pillow's one-page TIFFs are stored), any other as a full-depth
    picture (`images.depth`); `frames_dropped` where pages were left out (`first`). `name`: the
    file's relative path, whose extension may name another format."""
    samples = picture.samples
    eight = samples.dtype == np.uint8 and not picture.stacked and picture.bands in (1, 3)
    if picture.source_format != tiff.SOURCE_FORMAT or not eight:
        return _deep_image(picture, b"", options, name)
    image = stacked_image(picture, options)
    codes = set(image.changes)
    if picture.facts.get("pages_left_out"):
        codes.add(reasons.FRAMES_DROPPED.code)
    if name is not None and formats.wrong_extension(name, picture.source_format) is not None:
        codes.add(reasons.WRONG_EXTENSION.code)
    return dataclasses.replace(image, changes=tuple(c for c in reasons.codes("change") if c in codes))


def _png16_picture(data: bytes) -> DeepPicture:
    """A 16-bit PNG's samples (Pillow reads 16-bit RGB at 8 bits); a decoder error is a reject."""
    try:
        return DeepPicture(pixels.from_png16(data), "PNG")
    except Exception as error:
        raise _decoder_reject(error) from None


def _deep_image(
    picture: DeepPicture, data: bytes, options: ImageConfig, name: str | None, keep: bool = False
) -> EncodedImage:
    """A full-depth picture's stored image (images.depth): a 16-bit PNG's own bytes where
    `keep` and nothing changes it, else a 16-bit PNG or an array; 8 bits with `--bit_depth 8`."""
    stored = depth.store_deep(picture, options, data if keep else None)
    changes = stored.changes
    if name is not None and formats.wrong_extension(name, picture.source_format) is not None:
        codes = {*changes, reasons.WRONG_EXTENSION.code}
        changes = tuple(code for code in reasons.codes("change") if code in codes)
    return EncodedImage(
        data=stored.data,
        format=stored.format,
        height=stored.transform.height,
        width=stored.transform.width,
        channels=picture.bands,
        source_format=picture.source_format,
        reencoded=stored.data is not data,
        mode=depth.describe(picture),
        changes=changes,
        transform=stored.transform,
        depth=stored.depth,
    )


def _opened(data: bytes, options: ImageConfig) -> tuple[Image.Image, str]:
    """The picture opened (header only) and its format, a picture over `max_pixels` and a PNG
    whose chunks fail their checks rejected before any pixel is decoded."""
    image = _open(data)
    source_format = "JPEG" if image.format == "MPO" else image.format
    assert source_format is not None  # what Image.open opens names its plugin's format
    width, height = image.size
    if width * height > options.max_pixels:
        raise Reject(
            reasons.TOO_LARGE,
            f"{width}x{height} = {width * height} pixels is over max_pixels ({options.max_pixels})",
        )
    if source_format == "PNG":
        _check_png_chunks(data)
    return image, source_format


def _open(data: bytes) -> Image.Image:
    """Open (header only) with the accepted plugins, telling junk from refused formats."""
    formats.register_plugins()
    try:
        return Image.open(io.BytesIO(data), formats=formats.ACCEPTED_FORMATS)
    except UnidentifiedImageError:
        pass
    except Image.DecompressionBombError as error:
        raise Reject(reasons.TOO_LARGE, str(error)) from None
    except Exception as error:  # a header Pillow recognised but could not parse
        raise _decoder_reject(error) from None
    raise _unopened_reject(data)


def _unopened_reject(data: bytes) -> Reject:
    """Why no accepted plugin opened `data`: a refused format, a broken header, or not a picture."""
    try:
        other = Image.open(io.BytesIO(data)).format  # identification only: never loaded
    except Exception:
        other = None
    other = other or formats.sniff_format(data)
    if other is not None and other in formats.REFUSED_FORMATS:
        return Reject(reasons.UNSUPPORTED_FORMAT, formats.REFUSED_FORMATS[other])
    if other in formats.ACCEPTED_FORMATS:  # it starts like one, but its header cannot be parsed
        return Reject(
            reasons.CORRUPT, f"the bytes start like {other}, but its header cannot be read (cut short?)"
        )
    if other is not None:
        return Reject(reasons.UNSUPPORTED_FORMAT, f"{other} images are not converted")
    return Reject(reasons.NOT_AN_IMAGE, "no image codec recognises the bytes")


def _frames_dropped(image: Image.Image) -> bool:
    """Whether the file holds more than the one picture kept: a second frame or page, or
    another size of an icon. Unlike `n_frames` this never walks every frame, and a broken
    frame table becomes a reason, never a crash."""
    if image.format in ICON_FORMATS:
        return len(image.info.get("sizes", ())) > 1
    try:
        return bool(getattr(image, "is_animated", False))
    except Exception as error:
        raise _decoder_reject(error) from None


def _load(image: Image.Image, source_format: str) -> None:
    """Decode every pixel of the first frame; a decoder error becomes a reason, never a crash.

    Decoders other than JPEG's and PNG's may print to stderr (libtiff does, a line per bad
    strip): that output is captured, kept in the reject's detail, and never reaches the terminal."""
    quiet = source_format in QUIET_FORMATS
    failure: Exception | None = None
    with contextlib.nullcontext(None) if quiet else captured_stderr() as captured:
        try:
            image.load()
        except Image.DecompressionBombError as error:
            raise Reject(reasons.TOO_LARGE, str(error)) from None
        except Exception as error:
            failure = error
    if failure is None:
        return
    reject = _decoder_reject(failure)
    chatter = captured.summary() if captured is not None else ""  # filled in when the capture ended
    raise reject.with_detail(f"{reject.detail} ({chatter})" if chatter else reject.detail)


def _decoder_reject(error: Exception) -> Reject:
    """`truncated` when the data ends early, `corrupt` for any other decoder complaint."""
    message = str(error)
    lowered = message.lower()
    truncated = "truncated" in lowered or "premature end" in lowered or isinstance(error, EOFError)
    return Reject(reasons.TRUNCATED if truncated else reasons.CORRUPT, f"{type(error).__name__}: {message}")


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
        chunk_type = data[position + 4 : position + 8]
        (stored,) = struct.unpack_from(">I", data, end)
        if zlib.crc32(data[position + 4 : end]) != stored:
            raise Reject(reasons.CORRUPT, f"PNG chunk {chunk_type!r} at byte {position} fails its CRC check")
        if chunk_type == b"IEND":
            return
        position = end + 4
    raise Reject(reasons.TRUNCATED, f"PNG data ends at byte {len(data)}, before its IEND chunk")


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
            raise Reject(
                reasons.CORRUPT, f"JPEG segment 0xff{marker:02x} at byte {position} runs past the end"
            )
        position += 2 + length
        if marker == 0xDA:  # a scan: entropy-coded data up to the next real marker
            found = _JPEG_NEXT_MARKER.search(data, position)
            if found is None:
                return False
            position = found.start()
    return False


# 0xff then anything but a stuffed zero, a restart marker or more fill. Written as one byte
# class, not `\xff+[^...]`, which is far slower on photos; this search is most of the segment
# walk, with the GIL held. Finding the pairs with numpy past a scan's first 16 KB halves that
# CPU, but its calls release and retake the GIL 6 times a photo, and whole runs took more system
# time and no less CPU (benchmarks/NOTES.md#the-least-work-that-writes-the-same-records).
_JPEG_NEXT_MARKER = re.compile(rb"\xff[\x01-\xcf\xd8-\xfe]")


def _tiff_bit_depth(image: Image.Image) -> int:
    """The most bits a sample of a TIFF holds (BitsPerSample), 8 when its tags say nothing."""
    tags = getattr(image, "tag_v2", None)
    bits = tags.get(258) if tags is not None else None
    if isinstance(bits, tuple):
        return max((int(b) for b in bits), default=8)
    return int(bits) if isinstance(bits, int) else 8


def _png_bit_depth(data: bytes) -> int:
    """The bit depth byte of a PNG's IHDR chunk (Pillow reports 16-bit RGB as plain RGB)."""
    return data[24] if len(data) > 24 else 8


def _changes(
    data: bytes, image: Image.Image, source_format: str, ends: bool, options: ImageConfig
) -> list[str]:
    """Why the source bytes cannot be stored as they are (change reason codes); none when
    TensorFlow decodes them to exactly the pixels wanted."""
    image_format = source_format.lower()
    found = modes.mode_changes(image)
    if image_format not in ("jpeg", "png"):
        found.append(reasons.FORMAT.code)
    elif options.image_format not in ("original", image_format):
        found.append(reasons.FORMAT_FORCED.code)
    if not ends:
        found.append(reasons.JPEG_END_MISSING.code)
    if _frames_dropped(image):
        found.append(reasons.FRAMES_DROPPED.code)
    if options.resize is not None:
        found.append(reasons.RESIZED.code)
    if options.channels is not None and options.channels != modes.output_channels(image):
        found.append(reasons.CHANNELS.code)
    if image_format == "png" and _png_bit_depth(data) > 8:  # 16-bit RGB(A): Pillow already took 8 bits
        found.append(reasons.HIGH_BIT_DEPTH.code)
    elif source_format == "TIFF" and _tiff_bit_depth(image) > 8 and reasons.HIGH_BIT_DEPTH.code not in found:
        found.append(reasons.HIGH_BIT_DEPTH.code)  # 16-bit RGB: Pillow reads it at 8 bits too
    elif image_format == "png" and image.mode in modes.KEPT_MODES and _png_bit_depth(data) < 8:
        found.append(reasons.MODE.code)
    if _orientation(image) != 1:
        found.append(reasons.EXIF_ROTATION.code)
    return found


def _normalize_pixels(image: Image.Image, options: ImageConfig) -> tuple[Image.Image, PixelTransform]:
    """Upright, 8-bit, grayscale or RGB pixels at the requested size, and what that did to the
    picture's geometry (the orientation counts only when its transpose was made)."""
    stored_width, stored_height = image.size
    orientation = 1
    with contextlib.suppress(Exception):  # malformed EXIF: keep the pixels as stored
        image, orientation = ImageOps.exif_transpose(image), _orientation(image)
    image = modes.to_8bit_gray_or_rgb(image)
    if options.channels == 3 and image.mode == "L":
        image = image.convert("RGB")
    elif options.channels == 1 and image.mode == "RGB":
        image = image.convert("L")
    if options.resize is None:
        return image, geometry.pixel_transform(stored_width, stored_height, orientation)
    transform = geometry.pixel_transform(
        stored_width, stored_height, orientation, options.resize, options.resize_mode
    )
    fill = 0 if image.mode == "L" else (0, 0, 0)
    return geometry.resample(image, transform, Image.Resampling.BICUBIC, fill), transform


def _target_format(source_format: str, options: ImageConfig, lossless: bool = False) -> str:
    """Lossy sources become JPEG and lossless ones PNG, unless image_format says otherwise."""
    if options.image_format in ("jpeg", "png"):
        return options.image_format
    return "jpeg" if source_format in LOSSY_FORMATS and not lossless else "png"


def _encode(image: Image.Image, target: str, jpeg_quality: int) -> bytes:
    out = io.BytesIO()
    if target == "jpeg":
        image.save(out, format="JPEG", quality=jpeg_quality)
    else:
        image.save(out, format="PNG")
    return out.getvalue()
