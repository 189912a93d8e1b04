"""Where each point of the stored picture ends up in the image a record stores: the geometry that
boxes and masks follow.

`normalize.encode_for_tensorflow` changes a picture's geometry in at most two steps, and a
`PixelTransform` records both with the numbers Pillow used:

1. the EXIF orientation (one of Pillow's eight transposes: flips and quarter turns);
2. one resample of a window of the upright picture into a rectangle of the final image:
   `stretch` maps the whole picture onto the whole image, `crop` a centred window of the target's
   aspect ratio onto the whole image (`ImageOps.fit`), `pad` the whole picture onto a centred
   rectangle whose margins stay black (`ImageOps.pad`).

Keeping the first frame of a multi-frame file, or an icon's largest size, moves no pixel: the
stored picture is that frame, at the size Pillow opens it.

The pixels (`normalize`, bicubic) and the masks (`transform_mask`, nearest neighbour) go through
the same `resample` call, so an image and its masks match pixel for pixel; boxes follow the same
numbers by arithmetic (`PixelTransform.map_box`). Coordinates are continuous: pixel (i, j) covers
[i, i + 1) x [j, j + 1), so a box from 0 to the width spans the picture, as in COCO.

Pure functions on numbers and Pillow images; no Beam, no TensorFlow.
"""

from __future__ import annotations

import io
from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import TypedDict

import numpy as np
from PIL import Image

from beam_tfrecord.elements import Polygon, RunLengths
from beam_tfrecord.labels.polygon_raster import fill_polygons

__all__ = [
    "ORIENTATION_TRANSPOSE",
    "Box",
    "BoxMapper",
    "PixelTransform",
    "decode_run_lengths",
    "encode_mask_png",
    "identity_transform",
    "orient",
    "pixel_transform",
    "placed_label_image",
    "rasterize_mask",
    "resample",
    "transform_mask",
]

# EXIF orientation -> the transpose that makes the picture upright (as ImageOps.exif_transpose).
ORIENTATION_TRANSPOSE: dict[int, Image.Transpose] = {
    2: Image.Transpose.FLIP_LEFT_RIGHT,
    3: Image.Transpose.ROTATE_180,
    4: Image.Transpose.FLIP_TOP_BOTTOM,
    5: Image.Transpose.TRANSPOSE,
    6: Image.Transpose.ROTATE_270,
    7: Image.Transpose.TRANSVERSE,
    8: Image.Transpose.ROTATE_90,
}
Box = tuple[float, float, float, float]  # (xmin, ymin, xmax, ymax)
# `PixelTransform.map_box` for one transform (`PixelTransform.box_mapper`).
BoxMapper = Callable[[float, float, float, float], Box]
# Orientations 5 to 8 turn the picture a quarter: its width and height swap.
_QUARTER_TURNS = (5, 6, 7, 8)


@dataclass(frozen=True, slots=True)
class PixelTransform:
    """What was done to the stored picture's pixels to give the stored image, in order.

    Args:
      stored_width, stored_height: the picture as its file stores it (the decoded frame's size).
      orientation: the EXIF orientation applied (1..8; 1: none).
      window: (left, top, right, bottom) of the upright picture that was resampled, in its pixels
        (fractions where `crop` cut the picture: Pillow resamples from those exact edges).
      placed: (left, top, width, height) of the rectangle of the final image the window became.
      width, height: the final image's size; outside `placed` it is padding.
    """

    stored_width: int
    stored_height: int
    orientation: int
    window: tuple[float, float, float, float]
    placed: tuple[int, int, int, int]
    width: int
    height: int

    @property
    def upright_size(self) -> tuple[int, int]:
        """(width, height) after the orientation, before any resize."""
        if self.orientation in _QUARTER_TURNS:
            return self.stored_height, self.stored_width
        return self.stored_width, self.stored_height

    @property
    def resamples(self) -> bool:
        """Whether the second step moves any pixel (False: the upright picture is the image)."""
        upright_width, upright_height = self.upright_size
        whole = (0.0, 0.0, float(upright_width), float(upright_height))
        placed_whole = self.placed == (0, 0, upright_width, upright_height)
        # A pad that needs no scaling still adds its margin: the final size says so.
        same_size = (self.width, self.height) == (upright_width, upright_height)
        return self.window != whole or not placed_whole or not same_size

    @property
    def scale(self) -> tuple[float, float]:
        """Final pixels per upright pixel, along the upright picture's x and y."""
        left, top, right, bottom = self.window
        return self.placed[2] / (right - left), self.placed[3] / (bottom - top)

    def upright(self) -> PixelTransform:
        """The same resample, for coordinates already in the upright picture's frame."""
        width, height = self.upright_size
        return replace(self, stored_width=width, stored_height=height, orientation=1)

    def map_point(self, x: float, y: float) -> tuple[float, float]:
        """A point of the stored picture (continuous pixel coordinates) in the final image."""
        x, y = _orient_point(x, y, self.orientation, self.stored_width, self.stored_height)
        left, top, _, _ = self.window
        scale_x, scale_y = self.scale
        return self.placed[0] + (x - left) * scale_x, self.placed[1] + (y - top) * scale_y

    def map_box(
        self, xmin: float, ymin: float, xmax: float, ymax: float
    ) -> tuple[float, float, float, float]:
        """A box of the stored picture, in the final image's pixels, not clipped (a crop may put it
        partly or wholly outside the image)."""
        x0, y0 = self.map_point(xmin, ymin)
        x1, y1 = self.map_point(xmax, ymax)
        return min(x0, x1), min(y0, y1), max(x0, x1), max(y0, y1)

    def box_mapper(self) -> BoxMapper:
        """`map_box` with this transform's numbers looked up once, for an image's many boxes: the
        same operations in the same order, so the same floats (tests/test_geometry.py), at about a
        quarter of the cost (benchmarks/NOTES.md#per-step-costs-behind-the-code)."""
        orientation, stored_width, stored_height = self.orientation, self.stored_width, self.stored_height
        left, top, _, _ = self.window
        scale_x, scale_y = self.scale
        placed_x, placed_y = self.placed[0], self.placed[1]
        if orientation == 1:

            def upright_box(xmin: float, ymin: float, xmax: float, ymax: float) -> Box:
                x0, y0 = placed_x + (xmin - left) * scale_x, placed_y + (ymin - top) * scale_y
                x1, y1 = placed_x + (xmax - left) * scale_x, placed_y + (ymax - top) * scale_y
                return _ordered(x0, y0, x1, y1)

            return upright_box

        def oriented_box(xmin: float, ymin: float, xmax: float, ymax: float) -> Box:
            x0, y0 = _orient_point(xmin, ymin, orientation, stored_width, stored_height)
            x1, y1 = _orient_point(xmax, ymax, orientation, stored_width, stored_height)
            x0, y0 = placed_x + (x0 - left) * scale_x, placed_y + (y0 - top) * scale_y
            x1, y1 = placed_x + (x1 - left) * scale_x, placed_y + (y1 - top) * scale_y
            return _ordered(x0, y0, x1, y1)

        return oriented_box


def _ordered(x0: float, y0: float, x1: float, y1: float) -> Box:
    """(min(x0, x1), min(y0, y1), max(x0, x1), max(y0, y1)), spelled as the builtins decide (the
    second argument only when it compares strictly less or greater): a call each cost more than
    the box's arithmetic."""
    return (
        x1 if x1 < x0 else x0,
        y1 if y1 < y0 else y0,
        x1 if x1 > x0 else x0,
        y1 if y1 > y0 else y0,
    )


def identity_transform(width: int, height: int) -> PixelTransform:
    """The stored picture is the image (the source bytes were kept, or only modes changed)."""
    return PixelTransform(
        width, height, 1, (0.0, 0.0, float(width), float(height)), (0, 0, width, height), width, height
    )


def pixel_transform(
    stored_width: int,
    stored_height: int,
    orientation: int = 1,
    size: tuple[int, int] | None = None,
    mode: str = "stretch",
) -> PixelTransform:
    """The transform `normalize` applies: `orientation`, then `size` (width, height) in `mode`.

    The window and placement are computed with the very arithmetic of Pillow's `ImageOps.fit`
    and `ImageOps.pad` (centred, no bleed), so `resample` gives their pixels byte for byte
    (tests/test_geometry.py checks it against Pillow for many sizes)."""
    if orientation not in range(1, 9):
        raise ValueError(f"an EXIF orientation is 1 to 8, not {orientation!r}")
    turned = orientation in _QUARTER_TURNS
    width, height = (stored_height, stored_width) if turned else (stored_width, stored_height)
    oriented = replace(
        identity_transform(width, height),
        stored_width=stored_width,
        stored_height=stored_height,
        orientation=orientation,
    )
    if size is None:
        return oriented
    final: _Size = {"width": size[0], "height": size[1]}
    if mode == "stretch":
        return replace(oriented, placed=(0, 0, *size), **final)
    if mode == "crop":
        return replace(oriented, window=_fit_window(width, height, size), placed=(0, 0, *size), **final)
    if mode == "pad":
        return replace(oriented, placed=_pad_placement(width, height, size), **final)
    raise ValueError(f"resize_mode must be stretch, crop or pad, not {mode!r}")


class _Size(TypedDict):
    """The final picture's size, as PixelTransform's fields name it."""

    width: int
    height: int


def _fit_window(width: int, height: int, size: tuple[int, int]) -> tuple[float, float, float, float]:
    """The centred window of the target's aspect ratio, as `ImageOps.fit(bleed=0)` computes it
    (same operations in the same order: the floats must be equal, not close)."""
    live_width, live_height = width - 0.0, height - 0.0
    live_ratio = live_width / live_height
    output_ratio = size[0] / size[1]
    if live_ratio == output_ratio:
        crop_width, crop_height = live_width, live_height
    elif live_ratio >= output_ratio:
        crop_width, crop_height = output_ratio * live_height, live_height
    else:
        crop_width, crop_height = live_width, live_width / output_ratio
    left = 0.0 + (live_width - crop_width) * 0.5
    top = 0.0 + (live_height - crop_height) * 0.5
    return left, top, left + crop_width, top + crop_height


def _pad_placement(width: int, height: int, size: tuple[int, int]) -> tuple[int, int, int, int]:
    """Where `ImageOps.pad` puts the picture: `ImageOps.contain`'s size, centred by `round`.

    At least one pixel on each side: a picture more than twice as thin as the image (a 1000x2
    banner padded into 224x224) rounds to no pixel, where Pillow's own `pad` raises and stopped
    the whole run; it keeps a line of one pixel instead."""
    placed_width, placed_height = size
    picture_ratio, target_ratio = width / height, size[0] / size[1]
    if picture_ratio > target_ratio:
        placed_height = max(1, round(height / width * size[0]))
    elif picture_ratio < target_ratio:
        placed_width = max(1, round(width / height * size[1]))
    left = round((size[0] - placed_width) * 0.5) if placed_width != size[0] else 0
    top = round((size[1] - placed_height) * 0.5) if placed_height != size[1] else 0
    return left, top, placed_width, placed_height


def _orient_point(x: float, y: float, orientation: int, width: int, height: int) -> tuple[float, float]:
    """Where Pillow's transpose for `orientation` moves the point (x, y) of a width x height picture."""
    if orientation == 1:
        return x, y
    if orientation == 2:  # mirrored left to right
        return width - x, y
    if orientation == 3:  # half a turn
        return width - x, height - y
    if orientation == 4:  # mirrored top to bottom
        return x, height - y
    if orientation == 5:  # transposed (mirrored along the main diagonal)
        return y, x
    if orientation == 6:  # a quarter turn clockwise
        return height - y, x
    if orientation == 7:  # transversed (mirrored along the other diagonal)
        return height - y, width - x
    return y, width - x  # 8: a quarter turn counter-clockwise


def orient(image: Image.Image, orientation: int) -> Image.Image:
    """The picture made upright: the transpose `ImageOps.exif_transpose` makes for the tag."""
    method = ORIENTATION_TRANSPOSE.get(orientation)
    return image if method is None else image.transpose(method)


def placed_label_image(image: Image.Image, transform: PixelTransform, fill: int) -> Image.Image:
    """A label image the picture's size (class ids, segment ids) in the stored picture's frame or
    the upright one, told by its size, moved as the picture was by the nearest neighbour (a value
    never blends into another), a pad's margins `fill`. ValueError naming both sizes when its size
    fits neither frame (the caller's reject reason says whose)."""
    width, height = image.size
    stored = (transform.stored_width, transform.stored_height)
    if (width, height) == stored:
        image = orient(image, transform.orientation)
    elif (width, height) != transform.upright_size:
        upright = "" if transform.orientation == 1 else " ({}x{} upright)".format(*transform.upright_size)
        raise ValueError(f"is {width}x{height}; the picture is {stored[0]}x{stored[1]}{upright}")
    if transform.resamples:
        image = resample(image, transform, Image.Resampling.NEAREST, fill)
    return image


def resample(
    image: Image.Image, transform: PixelTransform, method: Image.Resampling, fill: int | tuple[int, ...] = 0
) -> Image.Image:
    """The transform's second step on an upright picture: its window resized into the placed
    rectangle, on an image of the final size filled with `fill` where `pad` leaves margins.
    For the pixels this is `ImageOps.fit` or `ImageOps.pad`'s result exactly (same calls)."""
    left, top, placed_width, placed_height = transform.placed
    resized = image.resize((placed_width, placed_height), method, box=transform.window)
    if (placed_width, placed_height) == (transform.width, transform.height):
        return resized
    out = Image.new(image.mode, (transform.width, transform.height), fill)
    out.paste(resized, (left, top))
    return out


def transform_mask(mask: Image.Image, transform: PixelTransform) -> Image.Image:
    """A mask of the stored picture (mode L, the stored size) moved as the pixels were:
    transposed, then resampled with the nearest neighbour (values stay 0 and 1), margins 0."""
    if mask.size != (transform.stored_width, transform.stored_height):
        raise ValueError(
            f"a {mask.size} mask for a {transform.stored_width}x{transform.stored_height} picture"
        )
    mask = orient(mask, transform.orientation)
    if not transform.resamples:
        return mask
    return resample(mask, transform, Image.Resampling.NEAREST, 0)


def rasterize_mask(
    mask: tuple[Polygon, ...] | RunLengths, width: int, height: int, normalized: bool = False
) -> Image.Image:
    """An instance's outlines or run lengths as a mode-L image of 0 and 1, `width` x `height`.

    Polygons are filled as COCO fills them (`polygon_raster`: pycocotools' `annToMask`, pixel
    for pixel; their union; a ring of fewer than three points fills nothing). `normalized`
    coordinates are fractions of the size (YOLO's segmentation lines, filled by the same rule).
    Run lengths must be of this size: ValueError."""
    if isinstance(mask, RunLengths):
        if (mask.width, mask.height) != (width, height):
            raise ValueError(f"run lengths of {mask.width}x{mask.height} for a {width}x{height} picture")
        return Image.fromarray(decode_run_lengths(mask))
    rings = [np.asarray(polygon.points, dtype=np.float64) for polygon in mask]
    if normalized:
        rings = [(ring.reshape(-1, 2) * (width, height)).ravel() for ring in rings]
    return Image.fromarray(fill_polygons(rings, width, height))


def decode_run_lengths(mask: RunLengths) -> np.ndarray:
    """COCO's uncompressed RLE as a (height, width) uint8 array of 0 and 1. The runs alternate 0
    and 1 from 0, down each column in turn; ValueError when they do not cover the picture exactly."""
    counts = np.asarray(mask.counts, dtype=np.int64)
    if counts.size and counts.min() < 0:
        raise ValueError("run lengths cannot be negative")
    if int(counts.sum()) != mask.width * mask.height:
        raise ValueError(f"run lengths add up to {int(counts.sum())}, not {mask.width}x{mask.height}")
    values = np.arange(counts.size, dtype=np.uint8) % 2
    column_major = np.repeat(values, counts)
    return np.ascontiguousarray(column_major.reshape(mask.width, mask.height).T)


def encode_mask_png(mask: Image.Image) -> bytes:
    """An instance mask as the OD API and TF Model Garden store it in `image/object/mask`: an
    8-bit grayscale PNG of 0 (background) and 1 (the object). Model Garden's TfExampleDecoder
    casts the decoded PNG to float without a threshold (unless `mask_binarize_threshold` is
    set), so 0/255 would give it masks of 255; the OD API's decoder thresholds at > 0, so 0/1
    suits both; and both projects' COCO converters write pycocotools' 0/1 arrays."""
    out = io.BytesIO()
    mask.save(out, format="PNG")
    return out.getvalue()
