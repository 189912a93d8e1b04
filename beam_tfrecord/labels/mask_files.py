"""A mask file's values as stored, never scaled: what a segmentation run's mask files hold before
the run's rule reads them as class ids (`labels.class_mask`) and what planning samples of them
(binary masks, a set's largest id). Pillow reads PNG and the other formats it knows (a palette's
indices, 8-bit and 16-bit grey: `I;16`); tifffile reads TIFF (16- and 32-bit label images,
Deflate, tiles, planar bands, which Pillow reads only in part). Pure functions on bytes; no Beam,
no TensorFlow.
"""

from __future__ import annotations

import io
import logging
import threading

import numpy as np
import tifffile
from PIL import Image

from beam_tfrecord import reasons
from beam_tfrecord.reasons import Reject

__all__ = ["mask_values"]


# Pillow's modes whose values are a mask's as they are (a palette's indices, grey, 16 and 32 bits).
_VALUE_MODES = ("P", "L", "I", "I;16", "I;16B", "I;16L")


def mask_values(data: bytes, name: str) -> np.ndarray:
    """A mask file's values as stored, never scaled: (height, width) for one band (a palette's
    indices, grey of any integer depth), (height, width, 3 or 4) for colours (RGB, RGBA). A TIFF
    is read with tifffile (16- and 32-bit label images, compressed or tiled, which Pillow reads
    only in part), anything else with Pillow. Raises `Reject` (`class_mask_unreadable`) for a
    file that cannot be read, or holds no mask of class ids (float samples, a stack of pages)."""
    if data[:4] in _TIFF_MAGICS:
        return _tiff_values(data, name)
    try:
        with Image.open(io.BytesIO(data)) as image:
            image.load()
            mode = image.mode
            array = np.asarray(image)
    except Exception as error:  # any decoder error: the mask, not the picture, is at fault
        raise Reject(reasons.CLASS_MASK_UNREADABLE, f"{name}: {type(error).__name__}: {error}") from None
    if mode == "LA":
        return array[..., 0]
    if mode == "1":
        return array.astype(np.uint8)
    if mode not in (*_VALUE_MODES, "RGB", "RGBA"):
        raise Reject(reasons.CLASS_MASK_UNREADABLE, f"{name}: a {mode} image is not a mask of class ids")
    return array


_TIFF_MAGICS = (b"II*\x00", b"MM\x00*", b"II+\x00", b"MM\x00+")  # classic and BigTIFF, both orders


class _TiffLog(logging.Filter):
    """What tifffile logs while a thread reads a mask (a damaged tag, a missing strip): kept for
    the reject's detail rather than printed; other threads' messages pass."""

    def __init__(self) -> None:
        super().__init__()
        self.reading = threading.local()

    def filter(self, record: logging.LogRecord) -> bool:
        lines: list[str] | None = getattr(self.reading, "lines", None)
        if lines is None:
            return True
        lines.append(record.getMessage())
        return False


_TIFF_LOG = _TiffLog()


def _tiff_values(data: bytes, name: str) -> np.ndarray:
    """A TIFF mask's one page, its values as stored (tifffile: any integer depth, any codec
    imagecodecs has, strips or tiles, planar or not)."""
    logger = logging.getLogger("tifffile")
    if _TIFF_LOG not in logger.filters:
        logger.addFilter(_TIFF_LOG)
    _TIFF_LOG.reading.lines = []
    try:
        return _tiff_page(data, name)
    except Reject as reject:
        said = _TIFF_LOG.reading.lines
        if not said:
            raise
        raise reject.with_detail(f"{reject.detail} (tifffile: {said[0]})") from None
    finally:
        _TIFF_LOG.reading.lines = None


def _tiff_page(data: bytes, name: str) -> np.ndarray:
    def unreadable(detail: str) -> Reject:
        return Reject(reasons.CLASS_MASK_UNREADABLE, f"{name}: {detail}")

    try:
        with tifffile.TiffFile(io.BytesIO(data)) as tif:
            if len(tif.pages) != 1:
                raise unreadable(f"a TIFF of {len(tif.pages)} pages is not one mask of class ids")
            page = tif.pages.first
            limit = Image.MAX_IMAGE_PIXELS
            if limit is not None and page.imagelength * page.imagewidth > 2 * limit:
                raise unreadable(f"{page.imagewidth}x{page.imagelength} pixels is more than Pillow reads")
            for offset, count in zip(page.dataoffsets, page.databytecounts, strict=True):
                if count == 0 or offset + count > len(data):
                    raise unreadable(f"TIFF data ends at byte {len(data)}, before its last strip or tile")
            array = page.asarray()
            axes = page.axes
    except Reject:
        raise
    except Exception as error:  # a codec's, or tifffile's own, error
        raise unreadable(f"{type(error).__name__}: {error}") from None
    if axes.startswith("S"):  # planar bands: one plane each
        array, axes = np.moveaxis(array, 0, -1), axes[1:] + "S"
    if array.dtype.kind not in "uib":
        raise unreadable(f"a TIFF of {array.dtype.name} samples is not a mask of class ids")
    array = array.astype(np.uint8) if array.dtype.kind == "b" else array
    if array.ndim == 3 and array.shape[-1] == 1:
        return array[..., 0]
    if array.ndim == 3 and array.shape[-1] == 2:  # grey and alpha
        return array[..., 0]
    if array.ndim == 3 and array.shape[-1] in (3, 4) and array.dtype == np.uint8:
        return array
    if array.ndim != 2:
        raise unreadable(f"a TIFF of shape {array.shape} ({axes}) is not a mask of class ids")
    return array
