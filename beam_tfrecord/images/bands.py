"""A picture whose bands are files of their own (`--bands`; which files, `plan.bands`): each file
read at its full depth (`normalize.read_samples`), checked to be one band of the picture's size
and type, and the bands stacked in the run's order into [H, W, bands], stored as any picture of
that type and band count is (`normalize.stacked_image`).

Why every band's file is checked, not only the first: a scene's bands at other resolutions
(Sentinel-2's 20 m bands beside its 10 m ones), an RGB quick-look among the bands, or a band
saved as float beside integer ones would make a picture no band of which is what its file holds.
Such a picture is a reject that names the file, never resampled or cast in silence.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import numpy as np

from beam_tfrecord import reasons
from beam_tfrecord.elements import BandFile
from beam_tfrecord.images import normalize
from beam_tfrecord.images.deep import DeepPicture
from beam_tfrecord.images.depth import describe
from beam_tfrecord.images.normalize import EncodedImage
from beam_tfrecord.images.options import ImageConfig
from beam_tfrecord.keys import Fact
from beam_tfrecord.reasons import Reject

__all__ = ["encode_bands", "stacked"]

_PAGES_LEFT_OUT = "pages_left_out"  # images.tiff's fact: summed over the bands, not shared


def encode_bands(files: Sequence[tuple[BandFile, bytes]], options: ImageConfig) -> EncodedImage:
    """The stored image of a picture from its band files' bytes, in band order, or `Reject`."""
    return normalize.stacked_image(stacked(files, options), options)


def stacked(files: Sequence[tuple[BandFile, bytes]], options: ImageConfig) -> DeepPicture:
    """The band files' samples stacked into [H, W, bands] in their own type, or `Reject`: a file
    that cannot be read (its reason, the detail naming the band), one that holds more than one
    band (`band_not_single`), or bands of different sizes or types (`bands_differ`)."""
    pictures = [_one_band(band, data, options) for band, data in files]
    first, (head, _) = pictures[0], files[0]
    for picture, (band, _) in zip(pictures[1:], files[1:], strict=True):
        if picture.samples.shape != first.samples.shape or picture.samples.dtype != first.samples.dtype:
            raise Reject(
                reasons.BANDS_DIFFER,
                f"band {head.band} ({head.relpath}) is {_shape(first)}, band {band.band} ({band.relpath}) "
                f"is {_shape(picture)}",
            )
    samples = np.concatenate([picture.samples for picture in pictures], axis=-1)
    found = sorted({picture.source_format for picture in pictures})
    return DeepPicture(samples, "+".join(found), _facts([picture.facts for picture in pictures]))


def _one_band(band: BandFile, data: bytes, options: ImageConfig) -> DeepPicture:
    """One band's file as [H, W, 1]."""
    named = f"band {band.band} ({band.relpath})"
    try:
        picture = normalize.read_samples(data, options)
    except Reject as reject:
        raise reject.with_detail(f"{named}: {reject.detail}") from None
    if picture.stacked or picture.bands != 1:
        raise Reject(reasons.BAND_NOT_SINGLE, f"{named} holds {describe(picture)}, not one band")
    return picture


def _shape(picture: DeepPicture) -> str:
    return f"{picture.width}x{picture.height} {picture.samples.dtype.name}"


def _facts(each: Sequence[Mapping[str, Fact]]) -> dict[str, Fact]:
    """What every band's file says alike (a scene's transform and CRS); the pages each left
    out, added up."""
    shared = {name: value for name, value in each[0].items() if all(f.get(name) == value for f in each)}
    left_out = sum(value for f in each if isinstance(value := f.get(_PAGES_LEFT_OUT), int))
    shared.pop(_PAGES_LEFT_OUT, None)
    if left_out:
        shared[_PAGES_LEFT_OUT] = left_out
    return shared
