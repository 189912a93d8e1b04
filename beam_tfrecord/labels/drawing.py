"""What the kinds' pictures share: the contact sheet's inks, font and overlay opacity (`inspect`'s
pictures: `read.pictures`), and how a kind draws its labels on a record's thumbnail
(`labels.LabelKind.draw`). Pillow only; no TensorFlow."""

from __future__ import annotations

import io
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from PIL import Image

if TYPE_CHECKING:
    from PIL import ImageFont

__all__ = [
    "BACKGROUND",
    "INK",
    "MASK_OPACITY",
    "TAG_HEIGHT",
    "Sheet",
    "font",
    "mask_alpha",
    "palette_colours",
]

BACKGROUND = (255, 255, 255)
INK = (20, 20, 20)
MASK_OPACITY = 0.45
TAG_HEIGHT = 13  # a class name's tag, in pixels (11 px text)


def font(size: int) -> ImageFont.FreeTypeFont | ImageFont.ImageFont:
    """Pillow's built-in font at `size` (imported here: a worker that draws nothing never loads
    FreeType)."""
    from PIL import ImageFont

    return ImageFont.load_default(size=size)


def mask_alpha(png: bytes, size: tuple[int, int]) -> Image.Image | None:
    """A stored mask (0 and 1) as an 8-bit alpha of `size`, or None if Pillow cannot read it."""
    try:
        with Image.open(io.BytesIO(png), formats=("PNG",)) as mask:
            alpha = mask.convert("L").resize(size, Image.Resampling.NEAREST)
    except Exception:
        return None
    return alpha.point(lambda v: int(255 * MASK_OPACITY) if v else 0)


@dataclass(frozen=True)
class Sheet:
    """What every thumbnail of one contact sheet is drawn with: a colour per class name (the same
    class, the same colour) and each kind's summary section (its palette, its skeletons), by kind
    name: each kind takes its own (`labels.base.Section`, which this module lies below)."""

    colours: Mapping[str, tuple[int, int, int]] = field(default_factory=dict)
    sections: Mapping[str, object] = field(default_factory=dict)

    def colour(self, name: str) -> tuple[int, int, int]:
        return self.colours.get(name, INK)


def palette_colours(palette: Sequence[Sequence[int]]) -> list[tuple[int, ...]]:
    """A colour for each of 256 ids, or for each id of a longer palette (a 16-bit mask's classes):
    class id i in `palette[i]`, the rest ink."""
    return [tuple(palette[i]) if i < len(palette) else INK for i in range(max(256, len(palette)))]
