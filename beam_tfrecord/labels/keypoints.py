"""Keypoints: each object's points (x, y and COCO's visibility: 0 not labelled, 1 labelled but
hidden, 2 visible), stored beside its box with the Object Detection API's keys
(`image/object/keypoint/...`, the table's `keypoints` group), as many for each object as the run's
keypoint count, object after object (as its CenterNet reads them).

A keypoints run's kinds are the objects and their points: the points move with their objects
(`objects.placement` places both), so this kind stores nothing of its own and counts what the
objects hold.
"""

from __future__ import annotations

import dataclasses
from collections import Counter
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from beam_tfrecord.elements import PlannedInput, RecordFields, StoredObject
from beam_tfrecord.labels.base import (
    Annotated,
    FileReader,
    Grown,
    KindTally,
    LabelKind,
    Placed,
    Section,
    SectionInputs,
)
from beam_tfrecord.labels.geometry import PixelTransform

__all__ = ["KEYPOINTS", "KeypointSummary", "KeypointTally", "KeypointsKind", "point_counts"]


@dataclass
class KeypointSummary(Section):
    """A keypoints run's points (summary.json's `keypoints`): each class's keypoint names and
    skeleton (0-based pairs), and the points stored labelled (of them visible) and those the
    picture's edge or crop made unlabelled (counted, the records' `keypoints_outside` change)."""

    names: dict[str, list[str]] = field(default_factory=dict)
    skeletons: dict[str, list[list[int]]] = field(default_factory=dict)
    points_per_object: int = 0
    labelled: int = 0
    visible: int = 0
    made_unlabelled: int = 0
    keys: str = (
        "image/object/keypoint/x, y (fractions of the image, 0 where not labelled) and visibility "
        "(0 not labelled, 1 hidden, 2 visible): points_per_object for each object, object after object"
    )

    def rows(self) -> list[tuple[str, str]]:
        """How many points were stored labelled, visible, and made unlabelled."""
        rows = [
            (
                "keypoints",
                f"{self.points_per_object} an object; {self.labelled} labelled, {self.visible} visible",
            )
        ]
        if self.made_unlabelled:
            rows.append(("  left outside", f"{self.made_unlabelled} (the edge or crop: stored unlabelled)"))
        return rows

    def merged(self, new: Section, grown: Grown) -> KeypointSummary:
        """Points summed; the names and skeletons are the dataset's (an append keeps its classes)."""
        assert isinstance(new, KeypointSummary)
        return dataclasses.replace(
            self,
            labelled=self.labelled + new.labelled,
            visible=self.visible + new.visible,
            made_unlabelled=self.made_unlabelled + new.made_unlabelled,
        )


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

    section_key = "keypoints"
    section_type = KeypointSummary

    def plan_facts(self, annotated: Annotated) -> dict[str, Any]:
        """Each class's keypoint names and skeleton (0-based pairs)."""
        return {
            "names": {name: list(points) for name, points in annotated.keypoint_names.items()},
            "skeletons": {
                name: [list(pair) for pair in pairs] for name, pairs in annotated.skeletons.items()
            },
        }

    def section(self, facts: Any, tally: KindTally, inputs: SectionInputs) -> KeypointSummary | None:
        if not facts or not facts["names"]:
            return None
        assert isinstance(tally, KeypointTally)
        return KeypointSummary(
            names=facts["names"],
            skeletons=facts["skeletons"],
            points_per_object=max(len(points) for points in facts["names"].values()),
            labelled=tally.points["labelled"],
            visible=tally.points["visible"],
            made_unlabelled=tally.points["outside"],
        )


KEYPOINTS = KeypointsKind()
