"""Which pictures are kept at their full depth, and what their record stores (`--bit_depth`).

A picture is read at full depth when its samples do not fit 8-bit grayscale or RGB: a DICOM; a
TIFF with more than 8 bits a sample, float or signed samples, bands beyond RGB(A), or several
pages of one shape; a 16-bit PNG; any picture Pillow opens in its 16-bit, 32-bit or float modes
(PGM, FITS, PFM). Everything else goes the 8-bit way (`normalize`), as it always did.

With `--bit_depth 8`, only what Pillow cannot read at all comes here (DICOM): its samples are
scaled to 8 bits by `modes`' rule, and a picture of other than 1 or 3 bands, or a stack, is a
reject that says to keep the full depth.

With `--additional_channels`, a picture of more than 3 bands (a TIFF's bands past RGB, read
here at any `--bit_depth`) is stored as the Object Detection API reads one: its first three
bands an 8-bit RGB PNG, each other band a single-channel 8-bit PNG (`StoredPixels.additional`),
all scaled to 8 bits by `--bit_depth 8`'s rule, as that API reads `uint8` only.
"""

from __future__ import annotations

import io
from dataclasses import dataclass

import numpy as np
from PIL import Image

from beam_tfrecord import reasons
from beam_tfrecord.images import dicom, modes, pixels, quiet, tiff
from beam_tfrecord.images.deep import DeepPicture
from beam_tfrecord.images.options import ImageConfig
from beam_tfrecord.keys import StoredPixels
from beam_tfrecord.labels import geometry
from beam_tfrecord.labels.geometry import PixelTransform
from beam_tfrecord.reasons import Reject

__all__ = ["DeepStored", "describe", "full_depth_picture", "pillow_deep", "png16_bands", "store_deep"]

# Pillow's modes past 8 bits: what `np.asarray` gives for each is the source's samples.
PILLOW_DEEP_MODES = ("I;16", "I;16B", "I;16L", "I;16N", "I", "F")
# PNG colour types and their band counts (IHDR): gray, RGB, gray+alpha, RGBA.
_PNG_BANDS = {0: 1, 2: 3, 4: 2, 6: 4}


@dataclass(frozen=True, slots=True)
class DeepStored:
    """What `store_deep` gives `normalize`: the bytes, their format, the record's pixel fields,
    the transform the labels follow, and the change reasons (in `reasons.codes("change")` order)."""

    data: bytes
    format: str
    depth: StoredPixels | None
    transform: PixelTransform
    changes: tuple[str, ...]


def full_depth_picture(data: bytes, options: ImageConfig) -> DeepPicture | None:
    """The picture at its full depth when the file holds more than 8-bit grayscale or RGB (see
    the module docstring); None sends it the 8-bit way. Raises `Reject` for a file of a
    full-depth format that cannot be read. With `--pages first`, a stack's first page alone."""
    pages = "first" if options.pages == "first" else "stack"  # `each`: a file of one page here
    if dicom.is_dicom(data):
        return dicom.read_dicom(data, max_pixels=options.max_pixels, pages=pages)
    if not tiff.is_tiff(data) or not (options.full_depth or options.additional_channels):
        return None
    pillow, many_bands = _tiff_look(data)
    if (options.full_depth and not pillow) or (options.additional_channels and many_bands):
        return tiff.read_tiff(data, max_pixels=options.max_pixels, pages=pages)
    return None


def png16_bands(data: bytes) -> int | None:
    """The band count of a 16-bit PNG (from IHDR), None for any other file."""
    if data[:8] != b"\x89PNG\r\n\x1a\n" or len(data) < 26 or data[24] != 16:
        return None
    return _PNG_BANDS.get(data[25])


def pillow_deep(image: Image.Image) -> DeepPicture | None:
    """A picture Pillow opened in a 16-bit, 32-bit or float mode, as its samples (loaded)."""
    if image.mode not in PILLOW_DEEP_MODES:
        return None
    samples = np.asarray(image)
    if image.mode.startswith("I;16"):
        samples = samples.astype(np.uint16)
    return DeepPicture(np.ascontiguousarray(samples[..., np.newaxis]), str(image.format))


_MINISBLACK, _RGB = 1, 2  # TIFF's PhotometricInterpretation for grayscale and RGB
_RGB_BANDS = 3


def _alpha(extrasamples: tuple[int, ...]) -> bool:
    """TIFF's ExtraSamples: 1 associated, 2 unassociated alpha; 0 an unspecified band."""
    return bool(extrasamples) and extrasamples[0] in (1, 2)


def _tiff_look(data: bytes) -> tuple[bool, bool]:
    """(Pillow reads it as it is, it holds bands past RGB that are no alpha), from its tags.

    Pillow reads one page (or pages of other shapes: a thumbnail) of 8-bit (or 1-bit) grayscale,
    RGB or RGBA samples. Four bands that are RGB and a band that is no alpha (RGB + near infrared,
    as GDAL writes a 4-band GeoTIFF), or four grayscale bands, are kept at full depth; CMYK,
    palettes, YCbCr and RGBA are Pillow's to convert, as they always were. A file tifffile cannot
    parse goes the 8-bit way, so a broken TIFF is rejected with the reasons it always was."""
    import tifffile

    try:
        with quiet.tifffile_log(), tifffile.TiffFile(io.BytesIO(data)) as tif:  # odd tags: Pillow's to judge
            series = tif.series[0]
            page = tif.pages.first
            eight = series.dtype in (np.uint8, np.bool_)
            bands = page.samplesperpixel
            rgba = page.photometric == _RGB and _alpha(page.extrasamples)
            many_bands = bands > 4 or (bands == 4 and page.photometric in (_MINISBLACK, _RGB) and not rgba)
            one_page = len(series.pages) == 1
            return eight and one_page and not many_bands, many_bands
    except Exception:
        return True, False


def store_deep(picture: DeepPicture, options: ImageConfig, kept: bytes | None = None) -> DeepStored:
    """Store a full-depth picture: `kept` (a 16-bit PNG's own bytes) when nothing changes it,
    else a 16-bit PNG or an array (`images.pixels`); with `--bit_depth 8`, an 8-bit PNG; with
    `--additional_channels`, a picture of more than 3 bands as the Object Detection API reads one.
    """
    samples = picture.samples
    additional = options.additional_channels and picture.bands > _RGB_BANDS
    if options.channels is not None and options.channels != picture.bands:
        raise Reject(
            reasons.UNSUPPORTED_FORMAT,
            f"{describe(picture)}: --channels converts 8-bit pictures only; leave it out to keep "
            "every band" + ("" if additional else ", or add --bit_depth 8"),
        )
    height, width = picture.height, picture.width
    transform = geometry.pixel_transform(width, height, 1, options.resize, options.resize_mode)
    changes: list[str] = []
    if picture.facts.get("pages_left_out"):  # a thumbnail's or another series' pages (images.tiff)
        changes.append(reasons.FRAMES_DROPPED.code)
        kept = None
    if additional and picture.stacked:
        raise Reject(
            reasons.UNSUPPORTED_FORMAT,
            f"{describe(picture)}: the Object Detection API's additional channels hold one picture, "
            "not a stack; leave out --additional_channels to keep its pages as an array",
        )
    if options.resize is not None:
        samples = _resampled(samples, transform)
        changes.append(reasons.RESIZED.code)
        kept = None
    if additional:
        return _additional_channels(picture, samples, transform, changes)
    if not options.full_depth:
        return _eight_bit(picture, samples, transform, changes)
    if kept is not None and pixels.is_png_kind(samples.dtype, picture.bands, picture.stacked):
        shape = tuple(samples.shape)
        stored = StoredPixels("uint16", shape, False, dict(picture.facts))
        return DeepStored(kept, "png", stored, transform, ())
    data, format, stored = pixels.stored_pixels(samples, picture.facts)
    if format == pixels.ARRAY_FORMAT or picture.source_format != "PNG":
        changes.append(reasons.FORMAT.code)
    ordered = tuple(code for code in reasons.codes("change") if code in changes)
    return DeepStored(data, format, stored, transform, ordered)


def describe(picture: DeepPicture) -> str:
    """`uint16 x1`, `3 pages of float32 x13`: what changes.jsonl says of the source's mode."""
    stack = f"{picture.samples.shape[0]} pages of " if picture.stacked else ""
    return f"{stack}{picture.samples.dtype.name} x{picture.bands}"


def _eight_bit(
    picture: DeepPicture, samples: np.ndarray, transform: PixelTransform, changes: list[str]
) -> DeepStored:
    """`--bit_depth 8`: grayscale or RGB scaled by `modes`' rule into an 8-bit PNG."""
    if picture.stacked or picture.bands not in (1, 3):
        raise Reject(
            reasons.UNSUPPORTED_FORMAT,
            f"{describe(picture)}: 8 bits hold grayscale or RGB only; leave --bit_depth at full to keep it",
        )
    plane = _eight_bit_samples(samples)
    codes = {*changes, reasons.HIGH_BIT_DEPTH.code, reasons.FORMAT.code}
    ordered = tuple(code for code in reasons.codes("change") if code in codes)
    return DeepStored(_png(plane), "png", None, transform, ordered)


def _eight_bit_samples(samples: np.ndarray) -> np.ndarray:
    """`--bit_depth 8`'s rule, the whole picture at once (every band alike): 8-bit samples as they
    are, unsigned 16-bit times 255/65535, other types by `modes.scale_to_8bit` (their range, or
    the finite values' range, stretched onto 0..255 where it does not fit as it is)."""
    if samples.dtype == np.uint8:
        return samples
    values = samples.astype(np.float64)
    if samples.dtype == np.uint16:
        scaled = values * (255.0 / 65535.0)
    else:
        scaled = modes.scale_to_8bit(values, "F" if samples.dtype.kind == "f" else "I")
    return np.rint(scaled).astype(np.uint8)


def _additional_channels(
    picture: DeepPicture, samples: np.ndarray, transform: PixelTransform, changes: list[str]
) -> DeepStored:
    """`--additional_channels`: the Object Detection API's form of a picture of more than 3
    bands, 8-bit: bands 1-3 an RGB PNG, each other band a single-channel PNG, in band order."""
    plane = _eight_bit_samples(samples)
    extra = tuple(_png(plane[..., band : band + 1]) for band in range(_RGB_BANDS, picture.bands))
    shape = (*plane.shape[:-1], picture.bands)
    stored = StoredPixels("uint8", shape, False, dict(picture.facts), additional=extra)
    codes = set(changes)
    if samples.dtype != np.uint8:
        codes.add(reasons.HIGH_BIT_DEPTH.code)
    if picture.source_format != "PNG":
        codes.add(reasons.FORMAT.code)
    ordered = tuple(code for code in reasons.codes("change") if code in codes)
    return DeepStored(_png(plane[..., :_RGB_BANDS]), "png", stored, transform, ordered)


def _png(plane: np.ndarray) -> bytes:
    """An 8-bit PNG of [H, W, 1] (grayscale) or [H, W, 3] (RGB) samples."""
    out = io.BytesIO()
    Image.fromarray(np.ascontiguousarray(plane[..., 0] if plane.shape[-1] == 1 else plane)).save(
        out, format="PNG"
    )
    return out.getvalue()


def _resampled(samples: np.ndarray, transform: PixelTransform) -> np.ndarray:
    """Each band of each page resampled as the 8-bit pictures are (bicubic, `geometry.resample`)."""
    return pixels.each_plane(
        samples,
        (transform.height, transform.width),
        lambda plane: geometry.resample(plane, transform, Image.Resampling.BICUBIC, 0),
    )
