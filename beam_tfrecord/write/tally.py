"""The counts of a run, gathered where the records and rejects are made and merged across workers:
the accumulator of the pipeline's CombineFns, a plain object so it is tested without Beam. The
summary is built from it (`write.summary.build_summary`); no count is made twice.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from beam_tfrecord.elements import ConvertedRecord, RejectLine

__all__ = ["DIGEST_METHOD", "DIGEST_MODULUS", "SIZE_BUCKETS", "Tally", "size_bucket", "without_pixels"]

DIGEST_MODULUS = 2**256
DIGEST_METHOD = "sum of sha256(serialized record) mod 2**256: independent of record order and shards"


COUNTERS = (
    "records",
    "by_split_label",
    "rejects",
    "source_formats",
    "changes",
    "heights",
    "widths",
    "feature_shapes",
    "objects_per_class",
    "objects_per_image",
    "object_sizes",
    "objects_dropped",
    "class_pixels",
    "class_pictures",
    "captions_per_image",
    "keypoints",
)
# COCO's box size buckets: an object's area (in the stored image's pixels) under 32^2 is small,
# under 96^2 medium, else large.
SIZE_BUCKETS = (("small", 32**2), ("medium", 96**2), ("large", float("inf")))


def _plain(key: Any) -> Any:
    return list(key) if isinstance(key, tuple) else key


def _key(key: Any) -> Any:
    """A counter key back from JSON: the pairs and shapes it holds are tuples again."""
    return tuple(key) if isinstance(key, list) else key


def size_bucket(area: float) -> str:
    for name, limit in SIZE_BUCKETS:
        if area < limit:
            return name
    raise ValueError(f"no size bucket holds an area of {area}")  # NaN


@dataclass
class Tally:
    """Counts of every outcome, mergeable across workers (the accumulator of a CombineFn)."""

    records: Counter = field(default_factory=Counter)  # split -> n
    by_split_label: Counter = field(default_factory=Counter)  # (split, label) -> n
    rejects: Counter = field(default_factory=Counter)  # reason -> n
    source_formats: Counter = field(default_factory=Counter)
    changes: Counter = field(default_factory=Counter)  # change reason code -> records
    reencoded: int = 0
    heights: Counter = field(default_factory=Counter)
    widths: Counter = field(default_factory=Counter)
    # split -> sum of record sha256s: an order-independent digest that merges in O(1).
    digests: Counter = field(default_factory=Counter)
    feature_shapes: Counter = field(default_factory=Counter)  # shape tuple -> n (feature runs)
    # A detection run's objects: stored per class, records per object count, stored per COCO size
    # bucket, left out per reason, and those that went with rejected images.
    objects_per_class: Counter = field(default_factory=Counter)
    objects_per_image: Counter = field(default_factory=Counter)
    object_sizes: Counter = field(default_factory=Counter)
    objects_dropped: Counter = field(default_factory=Counter)
    objects_rejected: int = 0
    # A segmentation run's masks: pixels per value (class ids and the ignore value), records that
    # hold each value, and records whose picture had no mask file (stored all ignore).
    class_pixels: Counter = field(default_factory=Counter)
    class_pictures: Counter = field(default_factory=Counter)
    masks_missing: int = 0
    # A captions run's: records per caption count (0: a picture kept without one).
    captions_per_image: Counter = field(default_factory=Counter)
    # A keypoints run's points: labelled, visible, made unlabelled by the edge or the crop.
    keypoints: Counter = field(default_factory=Counter)

    def add(self, outcome: ConvertedRecord | RejectLine) -> Tally:
        if isinstance(outcome, RejectLine):
            self.rejects[outcome.reason] += 1
            self.objects_rejected += outcome.objects
            return self
        self.records[outcome.split] += 1
        if outcome.objects is not None:  # a detection record counts once for each class it holds
            self._add_objects(outcome)
            if outcome.keypoints is not None:
                labelled, visible, outside = outcome.keypoints
                self.keypoints.update(labelled=labelled, visible=visible, outside=outside)
        elif outcome.pixels is not None:  # a segmentation record: its mask's values
            self._add_pixels(outcome.pixels)
        elif outcome.captions is not None:  # a captions record: how many it holds
            self.captions_per_image[outcome.captions] += 1
        elif isinstance(outcome.label_text, tuple):  # a multi-label record counts for each class
            for name in outcome.label_text:
                self.by_split_label[(outcome.split, name)] += 1
        else:
            self.by_split_label[(outcome.split, outcome.label_text)] += 1
        self.source_formats[outcome.source_format] += 1
        self.reencoded += int(outcome.reencoded)
        self.changes.update(outcome.changes)
        self.heights[outcome.height] += 1
        self.widths[outcome.width] += 1
        split = outcome.split
        self.digests[split] = (self.digests[split] + int.from_bytes(outcome.digest)) % DIGEST_MODULUS
        if outcome.feature_shape is not None:
            self.feature_shapes[outcome.feature_shape] += 1
        return self

    def add_all(self, outcomes: Iterable[ConvertedRecord | RejectLine]) -> Tally:
        for outcome in outcomes:
            self.add(outcome)
        return self

    def _add_objects(self, outcome: ConvertedRecord) -> None:
        objects = outcome.objects or ()
        labels = [label for label, _ in objects]  # (lists and maps: Counter counts them in C)
        split = outcome.split
        for name in set(labels):
            self.by_split_label[(split, name)] += 1
        self.objects_per_class.update(labels)
        self.objects_per_image[len(objects)] += 1
        self.object_sizes.update(map(size_bucket, [area for _, area in objects]))
        if outcome.objects_dropped:
            self.objects_dropped.update(line.reason for line in outcome.objects_dropped)

    def _add_pixels(self, pixels: tuple[tuple[int, int], ...]) -> None:
        if not pixels:  # no mask file (`images.class_masks.empty_mask`)
            self.masks_missing += 1
            return
        for value, count in pixels:
            self.class_pixels[value] += count
            self.class_pictures[value] += 1

    def to_json(self) -> dict[str, Any]:
        """The counts as JSON (a finished shard task's, kept for a rerun: output.resume)."""
        data: dict[str, Any] = {
            name: [[_plain(k), n] for k, n in getattr(self, name).items()] for name in COUNTERS
        }
        data["digests"] = [[split, str(digest)] for split, digest in self.digests.items()]
        data["reencoded"], data["objects_rejected"] = self.reencoded, self.objects_rejected
        data["masks_missing"] = self.masks_missing
        return data

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> Tally:
        tally = cls()
        for name in COUNTERS:
            getattr(tally, name).update({_key(k): n for k, n in data.get(name, ())})
        tally.digests.update({split: int(digest) for split, digest in data["digests"]})
        tally.reencoded, tally.objects_rejected = data["reencoded"], data["objects_rejected"]
        tally.masks_missing = data.get("masks_missing", 0)
        return tally

    def merge(self, other: Tally) -> Tally:
        for name in COUNTERS:
            getattr(self, name).update(getattr(other, name))
        self.reencoded += other.reencoded
        self.objects_rejected += other.objects_rejected
        self.masks_missing += other.masks_missing
        for split, digest in other.digests.items():
            self.digests[split] = (self.digests[split] + digest) % DIGEST_MODULUS
        return self


def without_pixels(record: ConvertedRecord) -> ConvertedRecord:
    """The facts of a record with its bytes dropped, so tallies never carry images."""
    return record._replace(example=b"")
