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
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TypeAlias

import numpy as np
from PIL import Image

from beam_tfrecord.edges import JsonObject, ParsedRecord
from beam_tfrecord.elements import PlannedInput, StoredObject
from beam_tfrecord.labels.base import (
    Annotated,
    AnyPlaced,
    Checked,
    Checks,
    Encoder,
    FileReader,
    Grown,
    KindTally,
    LabelCounts,
    LabelKind,
    Placed,
    Section,
    SectionInputs,
)
from beam_tfrecord.labels.drawing import Sheet
from beam_tfrecord.labels.geometry import PixelTransform
from beam_tfrecord.labels.objects import ObjectLabels

__all__ = [
    "KEYPOINTS",
    "DrawnPoints",
    "KeypointSummary",
    "KeypointTally",
    "KeypointsKind",
    "PointCounts",
    "draw_points",
    "point_counts",
]

# A record's points: labelled, visible, and made unlabelled by the picture's edge or crop.
PointCounts: TypeAlias = tuple[int, int, int]
# What the contact sheet draws of a keypoints record: each object's (x, y, visibility) points,
# and the objects' class names.
DrawnPoints: TypeAlias = tuple[tuple[tuple[tuple[float, float, int], ...], ...], tuple[str, ...]]


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


def point_counts(objects: tuple[StoredObject, ...]) -> PointCounts:
    """A record's points: labelled, visible, and made unlabelled by the picture's edge or crop."""
    visibility = [v for o in objects for v in (o.keypoints or ())[2::3]]
    outside = sum(o.points_outside for o in objects)
    return sum(1 for v in visibility if v), sum(1 for v in visibility if v == 2), outside


class _PointChecks(Checks[DrawnPoints]):
    """A keypoints record's points, per object, with its objects' class names, for the sheet."""

    def record(
        self, facts: ParsedRecord, shape: tuple[int, ...], where: str, errors: list[str]
    ) -> Checked[DrawnPoints]:
        objects = len(np.asarray(facts["object_label"]).reshape(-1))
        xs, ys, vs = (
            np.asarray(facts[k]).reshape(-1) for k in ("keypoint_x", "keypoint_y", "keypoint_visibility")
        )
        count = len(xs) // objects if objects else 0
        points = tuple(
            tuple((float(xs[i]), float(ys[i]), int(vs[i])) for i in range(o * count, (o + 1) * count))
            for o in range(objects)
        )
        names = tuple(t.decode("utf-8", "replace") for t in np.asarray(facts["object_text"]).reshape(-1))
        return Checked(drawn=(points, names))


def draw_points(
    thumb: Image.Image,
    points: tuple[tuple[tuple[float, float, int], ...], ...],
    names: tuple[str, ...],
    sheet: Sheet,
    skeletons: Mapping[str, Sequence[Sequence[int]]],
) -> Image.Image:
    """`thumb` with each object's labelled keypoints drawn in its class's colour (a visible point
    filled, a hidden one a ring), joined by its class's skeleton where the dataset has one."""
    if not points:
        return thumb
    thumb = thumb.convert("RGB")
    from PIL import ImageDraw  # only inspect draws: no worker loads it

    draw = ImageDraw.Draw(thumb)
    shown = list(names) + [""] * (len(points) - len(names))
    for found, name in zip(points, shown, strict=False):
        colour = sheet.colour(name)
        at = [(x * (thumb.width - 1), y * (thumb.height - 1), v) for x, y, v in found]
        for a, b in skeletons.get(name, ()):
            if a < len(at) and b < len(at) and at[a][2] and at[b][2]:
                draw.line([at[a][:2], at[b][:2]], fill=colour, width=2)
        for x, y, v in at:
            if v:
                draw.ellipse(
                    [x - 3, y - 3, x + 3, y + 3], outline=colour, fill=colour if v == 2 else None, width=1
                )
    return thumb


@dataclass
class KeypointTally(KindTally[PointCounts]):
    """A keypoints run's points: labelled, visible, made unlabelled by the edge or the crop."""

    points: Counter[str] = field(default_factory=Counter)

    def add(self, facts: PointCounts, split: str, labels: LabelCounts) -> None:
        labelled, visible, outside = facts
        self.points.update(labelled=labelled, visible=visible, outside=outside)


def _points(offset: int, cast: Callable[[float], float | int] = float) -> Encoder:
    """One of a point's three values (x, y, visibility) for every point of every object."""
    return lambda fields: tuple(
        cast(v) for o in fields.labels["objects"].objects for v in (o.keypoints or ())[offset::3]
    )


class KeypointsKind(LabelKind[None, None, PointCounts, KeypointTally, KeypointSummary, DrawnPoints]):
    """Points that move with their objects: the objects store them, this kind counts them."""

    name = "keypoints"

    def key_groups(self, setting: None) -> tuple[str, ...]:
        return ("keypoints",)

    def encoders(self) -> Mapping[str, Encoder]:
        return {"keypoint_x": _points(0), "keypoint_y": _points(1), "keypoint_visibility": _points(2, int)}

    def place(
        self,
        item: PlannedInput,
        transform: PixelTransform,
        setting: None,
        placed: Mapping[str, AnyPlaced],
        read: FileReader,
    ) -> Placed[None, PointCounts]:
        objects = placed["objects"].stored  # placed before it: a keypoints run's kinds
        assert isinstance(objects, ObjectLabels)
        return Placed(facts=point_counts(objects.objects))

    def new_tally(self) -> KeypointTally:
        return KeypointTally()

    def checks(
        self, class_names: tuple[str, ...] | None, section: KeypointSummary | None
    ) -> Checks[DrawnPoints]:
        return _PointChecks()

    def draw(self, thumb: Image.Image, drawn: DrawnPoints | None, sheet: Sheet) -> Image.Image:
        """Each object's points, joined by its class's skeleton (summary.json's)."""
        if drawn is None:
            return thumb
        section = sheet.sections.get(self.name)
        skeletons = section.skeletons if isinstance(section, KeypointSummary) else {}
        points, names = drawn
        return draw_points(thumb, points, names, sheet, skeletons)

    section_key = "keypoints"
    section_type = KeypointSummary

    def plan_facts(self, annotated: Annotated) -> JsonObject:
        """Each class's keypoint names and skeleton (0-based pairs)."""
        return {
            "names": {name: list(points) for name, points in annotated.keypoint_names.items()},
            "skeletons": {
                name: [list(pair) for pair in pairs] for name, pairs in annotated.skeletons.items()
            },
        }

    def section(
        self, facts: JsonObject | None, tally: KeypointTally, inputs: SectionInputs
    ) -> KeypointSummary | None:
        if not facts or not facts["names"]:
            return None
        return KeypointSummary(
            names=facts["names"],
            skeletons=facts["skeletons"],
            points_per_object=max(len(points) for points in facts["names"].values()),
            labelled=tally.points["labelled"],
            visible=tally.points["visible"],
            made_unlabelled=tally.points["outside"],
        )


KEYPOINTS = KeypointsKind()
