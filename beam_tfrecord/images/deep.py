"""A picture read at its full depth: the source's own sample type and every band, never scaled.

Pillow reads what JPEG and PNG hold at 8 bits; the formats of microscopes, satellites and
scanners hold 16-bit, float and many-band samples, stacks of pages and frames. Their readers
(`images.tiff` for TIFF and GeoTIFF through tifffile, `images.dicom` for DICOM through pydicom)
give a `DeepPicture`; how it is stored and read back is `images.pixels`.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

import numpy as np

from beam_tfrecord.keys import Fact

__all__ = ["PAGES_IN_FILE", "DeepPicture", "Fact"]

# The fact of a picture read as one page of its file (`--pages each`): how many pages the file
# holds, to check against the plan's count. A reader's own word, never stored in a record.
PAGES_IN_FILE = "pages_in_file"


@dataclass(frozen=True)
class DeepPicture:
    """What a full-depth reader gives.

    Args:
      samples: [H, W, C] (one page or frame) or [D, H, W, C] (a stack of D pages or frames), in
        the source's sample type, native byte order, C-contiguous. A complex sample is two float
        bands (real, imaginary); a band count of 1 is kept as C = 1.
      source_format: what the file is, as rejects and the summary name it (`TIFF`, `DICOM`).
      facts: what the source says of its pixels that a reader needs to use them, by the names
        `images.pixels.FACT_KEYS` stores them under (a DICOM's `rescale_slope`, a GeoTIFF's
        `geo_transform`); absent where the source is silent.
    """

    samples: np.ndarray
    source_format: str
    facts: Mapping[str, Fact] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if self.samples.ndim not in (3, 4):
            raise ValueError(f"pixels must be [H, W, C] or [D, H, W, C], not {self.samples.shape}")

    @property
    def stacked(self) -> bool:
        """Several pages or frames, [D, H, W, C]."""
        return self.samples.ndim == 4

    @property
    def height(self) -> int:
        return int(self.samples.shape[-3])

    @property
    def width(self) -> int:
        return int(self.samples.shape[-2])

    @property
    def bands(self) -> int:
        return int(self.samples.shape[-1])
