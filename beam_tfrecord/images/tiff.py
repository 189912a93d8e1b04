"""TIFF at full depth through tifffile (a stand-in until the full reader lands)."""

from __future__ import annotations

import io

import numpy as np

from beam_tfrecord import reasons
from beam_tfrecord.images.deep import DeepPicture
from beam_tfrecord.reasons import Reject

__all__ = ["is_tiff", "read_tiff"]


def is_tiff(data: bytes) -> bool:
    return data[:4] in (b"II*\x00", b"MM\x00*", b"II+\x00", b"MM\x00+")


def read_tiff(data: bytes, *, max_pixels: int) -> DeepPicture:
    import tifffile

    try:
        with tifffile.TiffFile(io.BytesIO(data)) as tif:
            series = tif.series[0]
            samples = series.asarray()
            axes = series.axes
    except Exception as error:
        raise Reject(reasons.CORRUPT, f"{type(error).__name__}: {error}") from None
    if "S" not in axes:
        samples = samples[..., np.newaxis]
    if samples.ndim > 4:
        samples = samples.reshape(-1, *samples.shape[-3:])
    return DeepPicture(np.ascontiguousarray(samples), "TIFF")
