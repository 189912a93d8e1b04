"""Keypoints: each object's points (x, y and COCO's visibility: 0 not labelled, 1 labelled but
hidden, 2 visible), stored beside its box with the Object Detection API's keys
(`image/object/keypoint/...`, the table's `keypoints` group), as many for each object as the run's
keypoint count, object after object (as its CenterNet reads them).

A keypoints run's kinds are the objects and their points: the points move with their objects
(`objects.placement` places both), so this kind stores nothing of its own and counts what the
objects hold.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from beam_tfrecord.elements import PlannedInput, RecordFields, StoredObject
from beam_tfrecord.labels.base import FileReader, KindTally, LabelKind, Placed
from beam_tfrecord.labels.geometry import PixelTransform

__all__ = ["KEYPOINTS", "KeypointTally", "KeypointsKind", "point_counts"]


def point_counts(objects: tuple[StoredObject, ...]) -> tuple[int, int, int]:
    """A record's points: labelled, visible, and made unlabelled by the picture's edge or crop."""
    visibility = [v for o in objects for v in (o.keypoints or ())[2::3]]
    outside = sum(o.points_outside for o in objects)
    return sum(1 for v in visibility if v), sum(1 for v in visibility if v == 2), outside


@dataclass
class KeypointTally(KindTally):
    """A keypoints run's points: labelled, visible, made unlabelled by the edge or the crop."""

    points: Counter = field(default_factory=Counter)

    def add(self, facts: Any, split: str, labels: Counter) -> None:
        labelled, visible, outside = facts
        self.points.update(labelled=labelled, visible=visible, outside=outside)


def _points(offset: int, cast: Callable[[float], Any] = float) -> Callable[[RecordFields], tuple[Any, ...]]:
    """One of a point's three values (x, y, visibility) for every point of every object."""
    return lambda fields: tuple(
        cast(v) for o in fields.labels["objects"].objects for v in (o.keypoints or ())[offset::3]
    )


class KeypointsKind(LabelKind):
    """Points that move with their objects."""

    name = "keypoints"

    def key_groups(self, setting: Any) -> tuple[str, ...]:
        return ("keypoints",)

    def encoders(self) -> Mapping[str, Callable[[RecordFields], Any]]:
        return {"keypoint_x": _points(0), "keypoint_y": _points(1), "keypoint_visibility": _points(2, int)}

    def place(
        self,
        item: PlannedInput,
        transform: PixelTransform,
        setting: Any,
        placed: Mapping[str, Placed],
        read: FileReader,
    ) -> Placed:
        return Placed(facts=point_counts(placed["objects"].stored.objects))

    def new_tally(self) -> KeypointTally:
        return KeypointTally()


KEYPOINTS = KeypointsKind()
