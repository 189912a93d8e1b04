"""A detection run's section of summary.json (`objects`): where every annotated object went, and
what the records hold; counted from the plan's facts and the tally, merged for a grown dataset
(`--append`), and shown as rows of the run's table.

`annotated = stored + dropped`: `dropped_per_reason` counts objects left out of their picture
(dropped_objects.jsonl names each), with `image_rejected` for those whose picture became a reject
line and `no_image` for those of annotation entries that name no listed picture
(annotations_without_image.jsonl)."""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import TypedDict

from beam_tfrecord import reasons
from beam_tfrecord.edges import Json
from beam_tfrecord.labels.base import Grown, Section, SectionInputs

__all__ = [
    "PER_IMAGE_BUCKETS",
    "ClassObjects",
    "ObjectSummary",
    "ObjectsPerImage",
    "object_summary",
    "per_image",
]

_NO_IMAGE = reasons.NO_IMAGE.code
# Objects per record, bucketed for the summary.
PER_IMAGE_BUCKETS = ((0, 0), (1, 1), (2, 4), (5, 9), (10, 19), (20, None))


class ClassObjects(TypedDict):
    """One class's objects stored, and the records that hold one (`ObjectSummary.per_class`)."""

    objects: int
    images: int


class ObjectsPerImage(TypedDict, total=False):
    """Objects per record (`ObjectSummary.per_image`): their mean, the most, and records per
    bucket of PER_IMAGE_BUCKETS (`0`, `1`, `2-4`, ..., `20+`). Empty in a section read without it."""

    mean: float
    max: int
    histogram: dict[str, int]


def per_image(counts: Counter[int]) -> ObjectsPerImage:
    """Mean, max and a histogram of objects per record, from records per object count."""
    records = sum(counts.values())
    histogram = {}
    for low, high in PER_IMAGE_BUCKETS:
        name = str(low) if low == high else f"{low}+" if high is None else f"{low}-{high}"
        histogram[name] = sum(n for k, n in counts.items() if k >= low and (high is None or k <= high))
    mean = sum(k * n for k, n in counts.items()) / records if records else 0.0
    return {"mean": round(mean, 2), "max": max(counts, default=0), "histogram": histogram}


@dataclass
class ObjectSummary(Section):
    """A detection run's objects (see the module docstring)."""

    kind: str  # the annotations' format (summary.json's key)
    masks: bool
    annotated: int
    stored: int
    dropped: int
    consistent: bool
    dropped_per_reason: dict[str, int] = field(default_factory=dict)
    unmatched_entries: int = 0
    negatives: int = 0  # records without an object
    per_class: dict[str, ClassObjects] = field(default_factory=dict)  # class name -> its objects
    per_image: ObjectsPerImage = field(default_factory=ObjectsPerImage)
    sizes: dict[str, int] = field(default_factory=dict)  # COCO's small, medium, large (stored pixels)
    class_ids: str = "from 1 (0 is background), as label_map.pbtxt; labels.txt line i is id i + 1"
    found_at: str = ""  # where the annotations were found, and how many pictures they matched

    def accounted(self) -> bool:
        return self.consistent

    def warnings(self) -> list[str]:
        if self.consistent:
            return []
        return [
            f"{self.annotated} objects were annotated, {self.stored} stored and {self.dropped} "
            "dropped: some object is unaccounted for"
        ]

    def rows(self) -> list[tuple[str, str]]:
        """Where the objects went, per class, per image, by size."""
        rows = [("annotations", self.found_at)] if self.found_at else []
        rows.append(("objects", f"{self.annotated} annotated: {self.stored} stored, {self.dropped} dropped"))
        rows += [(f"  {reason}", str(n)) for reason, n in self.dropped_per_reason.items()]
        rows.append(("objects per class", "objects in images"))
        rows += [(f"  {name}", f"{n['objects']} in {n['images']}") for name, n in self.per_class.items()]
        mean, most = self.per_image.get("mean", 0), self.per_image.get("max", 0)
        rows.append(("objects per image", f"mean {mean}, max {most}; {self.negatives} images without one"))
        rows.append(("box sizes (COCO's)", ", ".join(f"{n} {name}" for name, n in self.sizes.items())))
        rows.append(("annotated = stored + dropped", "yes" if self.consistent else "NO"))
        return rows

    def merged(self, new: Section, grown: Grown) -> ObjectSummary:
        """The objects section over old and new records; `grown.unmatched` are the merged entries
        that name no picture, whose objects are the `no_image` ones."""
        assert isinstance(new, ObjectSummary)
        no_image = sum(int(json.loads(line).get("objects") or 0) for line in grown.unmatched)
        dropped = Counter(self.dropped_per_reason) + Counter(new.dropped_per_reason)
        dropped.pop(_NO_IMAGE, None)
        if no_image:
            dropped[_NO_IMAGE] = no_image
        # The runs' own no_image objects give way to the merged entries' (a repeated one counts once).
        annotated = (
            self.annotated
            - self.dropped_per_reason.get(_NO_IMAGE, 0)
            + new.annotated
            - new.dropped_per_reason.get(_NO_IMAGE, 0)
            + no_image
        )
        stored = self.stored + new.stored
        histogram = dict(
            Counter(self.per_image.get("histogram", {})) + Counter(new.per_image.get("histogram", {}))
        )
        histogram = {key: histogram.get(key, 0) for key in (*self.per_image.get("histogram", {}), *histogram)}
        records = sum(histogram.values())
        empty: ClassObjects = {"objects": 0, "images": 0}
        return ObjectSummary(
            kind=self.kind,
            masks=self.masks,
            annotated=annotated,
            stored=stored,
            dropped=sum(dropped.values()),
            consistent=annotated == stored + sum(dropped.values()),
            dropped_per_reason=dict(sorted(dropped.items())),
            unmatched_entries=len(grown.unmatched),
            negatives=self.negatives + new.negatives,
            per_class={
                name: _added(self.per_class.get(name, empty), new.per_class.get(name, empty))
                for name in grown.class_names
            },
            per_image={
                "mean": round(stored / records, 2) if records else 0.0,
                "max": max(self.per_image.get("max", 0), new.per_image.get("max", 0)),
                "histogram": histogram,
            },
            sizes={
                key: self.sizes.get(key, 0) + new.sizes.get(key, 0)
                for key in dict.fromkeys([*self.sizes, *new.sizes])
            },
            class_ids=self.class_ids,
            found_at=new.found_at or self.found_at,
        )


def _added(a: ClassObjects, b: ClassObjects) -> ClassObjects:
    return {"objects": a["objects"] + b["objects"], "images": a["images"] + b["images"]}


def object_summary(
    facts: Mapping[str, Json],
    per_class: Counter[str],
    per_record: Counter[int],
    sizes: Mapping[str, int],
    inputs: SectionInputs,
) -> ObjectSummary:
    """The section from the plan's facts (`ObjectsKind.plan_facts`), the objects stored per class,
    records per object count and objects per size bucket, and the run's counts."""
    dropped = Counter(facts["dropped_per_reason"]) + Counter(inputs.dropped)
    if inputs.objects_rejected:
        dropped[reasons.IMAGE_REJECTED.code] += inputs.objects_rejected
    if facts["unmatched_objects"]:
        dropped[_NO_IMAGE] += facts["unmatched_objects"]
    stored = sum(per_class.values())
    images = inputs.records_per_label
    return ObjectSummary(
        kind=inputs.format,
        masks=bool(facts["masks"]),
        annotated=facts["annotated"],
        stored=stored,
        dropped=sum(dropped.values()),
        consistent=facts["annotated"] == stored + sum(dropped.values()),
        dropped_per_reason=dict(sorted(dropped.items())),
        unmatched_entries=inputs.unmatched_entries,
        negatives=per_record.get(0, 0),
        per_class={
            name: {"objects": per_class[name], "images": images.get(name, 0)} for name in inputs.class_names
        },
        per_image=per_image(per_record),
        sizes=dict(sizes),
        found_at=inputs.found_at,
    )
