"""Loose labelled points joined to the objects of their picture, for a keypoints run of a format
whose tools draw each keypoint as a shape of its own (a name, x and y in the picture's pixels).

A point joins the object its owner id names where it names one (a tool's parent link), else the
one object whose box holds it (edges included); one that joins none, or several, or is a second
point of its name on its object, is left out `unattached_point`. Each object's points are then
written in the run's order of names, `x, y, 2` (a drawn point is seen) or `0, 0, 0` (none of
that name): `ObjectBox.keypoints`.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from beam_tfrecord import reasons
from beam_tfrecord.elements import ObjectBox

__all__ = ["LoosePoint", "attach", "in_order"]

Points = dict[str, tuple[float, float]]


@dataclass(frozen=True)
class LoosePoint:
    """A labelled point: its name, where (pixels), where it comes from, and the id of the object
    it names as its own (None: the box that holds it)."""

    name: str
    x: float
    y: float
    ref: str
    owner: str | None = None


def attach(
    objects: Sequence[ObjectBox], ids: Sequence[str | None], points: Sequence[LoosePoint]
) -> tuple[list[Points], list[tuple[str, str]]]:
    """Each object's points by name (`ids`: each object's id, for an owner to name), and the
    points left out as (reason, detail)."""
    attached: list[Points] = [{} for _ in objects]
    dropped: list[tuple[str, str]] = []
    for point in points:
        if point.owner is not None:
            found = [i for i, own in enumerate(ids) if own == point.owner]
            why = f"its parent {point.owner!r} is {len(found)} objects"
        else:
            found = [
                i
                for i, o in enumerate(objects)
                if o.xmin <= point.x <= o.xmax and o.ymin <= point.y <= o.ymax
            ]
            why = f"{len(found)} boxes hold it"
        if len(found) != 1:
            detail = f"{point.ref}: point {point.name!r}: {why}, not one"
            dropped.append((reasons.UNATTACHED_POINT.code, detail))
        elif point.name in attached[found[0]]:
            detail = f"{point.ref}: a second point {point.name!r} of {objects[found[0]].source_ref}"
            dropped.append((reasons.UNATTACHED_POINT.code, detail))
        else:
            attached[found[0]][point.name] = (point.x, point.y)
    return attached, dropped


def in_order(points: Points, names: Sequence[str]) -> tuple[float, ...]:
    """An object's points in the run's order of names: x, y, 2, or 0, 0, 0 where it has none."""
    out: list[float] = []
    for name in names:
        out += (*points[name], 2.0) if name in points else (0.0, 0.0, 0.0)
    return tuple(out)
