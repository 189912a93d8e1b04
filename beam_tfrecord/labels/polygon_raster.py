"""Polygons filled the way COCO fills them: pycocotools' `frPyObjects` + `merge` + `decode`
(what `COCO.annToMask` does, and so COCO's evaluation, Detectron2 and the Object Detection API's
COCO converter), ported from its C `rleFrPoly` to NumPy, equal pixel for pixel (tests/ check it
against pycocotools itself over generated and hand-made hard polygons).

COCO's rule differs from a scanline fill (Pillow's ImageDraw fills every pixel its outline
touches, up to a pixel more right and down): the outline is walked on a grid 5 times finer,
rounding each vertex to it, then wherever the walk crosses from one fine column to the next on a
pixel's centre column, the pixel row below the crossing (rounded up) starts or ends a run, down
the columns of the picture in turn. A pixel is in the mask when its centre is inside the outline,
to within that rounding. Rings are filled each on its own and joined (their union, as `merge`),
so a hole drawn as a second ring is filled, as in COCO. A ring of fewer than three points, or
of points on one line, fills nothing. Runs that cross the foot of a column carry into the next
column, as in pycocotools (it happens only for outlines that leave the picture's bottom edge).

Plain NumPy; workers need no compiled COCO library.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

import numpy as np

__all__ = ["fill_polygons", "ring_toggles"]

# pycocotools walks each outline on a grid this many times finer than the pixels.
_SCALE = 5.0


def _c_int(values: np.ndarray) -> np.ndarray:
    """C's `(int)` cast of doubles: truncation toward zero (not floor: -0.5 becomes 0)."""
    return np.trunc(values).astype(np.int64)


def ring_toggles(points: Sequence[float] | np.ndarray, width: int, height: int) -> np.ndarray:
    """The column-major pixel positions (x * height + y) where one ring's runs start or end,
    unsorted, one entry per crossing (pycocotools' `rleFrPoly` before its run lengths); a
    position listed twice cancels. `points` is x0, y0, x1, y1, ... in pixels; an odd last value
    is ignored, as pycocotools does."""
    xy = np.asarray(points, dtype=np.float64)
    k = xy.size // 2
    if k == 0:
        return np.empty(0, dtype=np.int64)
    xy = xy[: 2 * k]
    x = _c_int(_SCALE * xy[0::2] + 0.5)
    y = _c_int(_SCALE * xy[1::2] + 0.5)
    xs, ys = x, y
    xe, ye = np.roll(x, -1), np.roll(y, -1)  # each edge ends where the next begins; the last closes
    dx, dy = np.abs(xe - xs), np.abs(ys - ye)
    along_x = dx >= dy
    flip = (along_x & (xs > xe)) | (~along_x & (ys > ye))
    # The walk starts from the lower end of its long axis (so an edge and its reverse give the
    # same points), but lists the points from the edge's first vertex.
    sx, sy = np.where(flip, xe, xs), np.where(flip, ye, ys)
    ex, ey = np.where(flip, xs, xe), np.where(flip, ys, ye)
    steps = np.where(along_x, dx, dy)
    # A zero-length edge (dx == dy == 0) divides 0 by 0 in C; its one point has the same x as its
    # neighbours, so its y never counts: dividing by 1 instead keeps it finite.
    slope = np.where(along_x, (ey - sy) / np.maximum(dx, 1), (ex - sx) / np.maximum(dy, 1))
    counts = steps + 1
    edge = np.repeat(np.arange(k), counts)
    starts = np.cumsum(counts) - counts
    d = np.arange(int(counts.sum())) - np.repeat(starts, counts)
    t = np.where(flip[edge], steps[edge] - d, d)
    on_x = along_x[edge]
    u = np.where(on_x, t + sx[edge], _c_int(sx[edge] + slope[edge] * t + 0.5))
    v = np.where(on_x, _c_int(sy[edge] + slope[edge] * t + 0.5), t + sy[edge])
    # Where the walk changes fine column on a pixel centre's column, the boundary's row.
    moved = np.flatnonzero(u[1:] != u[:-1]) + 1
    left = np.where(u[moved] < u[moved - 1], u[moved], u[moved] - 1).astype(np.float64)
    xd = (left + 0.5) / _SCALE - 0.5
    keep = (np.floor(xd) == xd) & (xd >= 0) & (xd <= width - 1)
    moved, xd = moved[keep], xd[keep]
    yd = (np.minimum(v[moved], v[moved - 1]).astype(np.float64) + 0.5) / _SCALE - 0.5
    yd = np.ceil(np.clip(yd, 0, height))
    return xd.astype(np.int64) * height + yd.astype(np.int64)


def _fill_ring(out: np.ndarray, toggles: np.ndarray) -> None:
    """Set in `out` (height x width, 0/1) the pixels one ring's toggles describe: each position
    starts or ends a run down the columns; one listed an even number of times cancels; one at
    the end of the picture does nothing. Only the columns the runs span are built."""
    height, width = out.shape
    area = width * height
    values, repeats = np.unique(toggles, return_counts=True)
    edges = values[(repeats % 2 == 1) & (values < area)]
    if not edges.size:
        return
    first = int(edges[0]) // height
    last = area if edges.size % 2 else int(edges[-1])  # an odd run goes on to the picture's end
    end = -(-last // height)
    runs = np.diff(np.concatenate(([first * height], edges, [end * height])))
    columns = np.repeat(np.arange(runs.size, dtype=np.uint8) % 2, runs).reshape(end - first, height)
    out[:, first:end] |= columns.T


def fill_polygons(rings: Iterable[Sequence[float] | np.ndarray], width: int, height: int) -> np.ndarray:
    """The union of the rings, each filled as pycocotools fills it, as a (height, width) uint8
    array of 0 and 1. Coordinates are pixels (x, y alternating), continuous: pixel (i, j) spans
    [i, i + 1) x [j, j + 1)."""
    out = np.zeros((height, width), dtype=np.uint8)
    for ring in rings:
        toggles = ring_toggles(ring, width, height)
        if toggles.size:
            _fill_ring(out, toggles)
    return out
