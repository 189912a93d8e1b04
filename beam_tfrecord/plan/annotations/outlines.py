"""The outlines labelling tools draw by their parameters rather than by their points (a turned
box, an ellipse, LabelMe's circle), as polygons in the picture's pixels, so that every shape is
filled by the one rule (pycocotools' fill: `labels.polygon_raster`) and boxed by its extent.

Angles are degrees clockwise on the screen (y down), as CVAT, Label Studio and LabelMe give them.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

__all__ = ["ellipse_outline", "extent", "turned_box"]

# Sides of an ellipse's polygon: within a tenth of a pixel of the curve for radii up to ~100 px.
ELLIPSE_SIDES = 72


def turned_box(
    x0: float, y0: float, x1: float, y1: float, degrees: float, about: tuple[float, float] | None = None
) -> list[float]:
    """A box's corners (top-left, top-right, bottom-right, bottom-left) turned `degrees` about
    `about` (its centre by default), as x0, y0, x1, y1, ..."""
    cx, cy = about if about is not None else ((x0 + x1) / 2, (y0 + y1) / 2)
    angle = math.radians(degrees)
    cos, sin = math.cos(angle), math.sin(angle)
    outline: list[float] = []
    for x, y in ((x0, y0), (x1, y0), (x1, y1), (x0, y1)):
        outline += (cx + cos * (x - cx) - sin * (y - cy), cy + sin * (x - cx) + cos * (y - cy))
    return outline


def ellipse_outline(
    cx: float, cy: float, rx: float, ry: float, degrees: float = 0.0, sides: int = ELLIPSE_SIDES
) -> list[float]:
    """An ellipse (centre, radii, turned `degrees`) as a polygon of `sides` points on it."""
    angle = math.radians(degrees)
    cos, sin = math.cos(angle), math.sin(angle)
    outline: list[float] = []
    for k in range(sides):
        t = 2 * math.pi * k / sides
        x, y = rx * math.cos(t), ry * math.sin(t)
        outline += (cx + x * cos - y * sin, cy + x * sin + y * cos)
    return outline


def extent(points: Sequence[float]) -> tuple[float, float, float, float]:
    """The box (xmin, ymin, xmax, ymax) of x0, y0, x1, y1, ..."""
    xs, ys = points[0::2], points[1::2]
    return min(xs), min(ys), max(xs), max(ys)
