"""The counts of a run, gathered where the records and rejects are made and merged across workers:
the accumulator of the pipeline's CombineFns, a plain object so it is tested without Beam. The
summary is built from it (`write.summary.build_summary`); no count is made twice.

Each kind of label counts its own (`labels.KindTally`, by kind name in `Tally.kinds`), from the
facts its placement gave every record (`ConvertedRecord.facts`).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass, field

from beam_tfrecord.edges import Json, JsonObject
from beam_tfrecord.elements import ConvertedRecord, RejectLine
from beam_tfrecord.labels import KINDS, AnyTally, LabelCounts

__all__ = ["DIGEST_MODULUS", "Tally", "without_pixels"]

# Each split's digest is the sum of its records' sha256 modulo this (summary.DIGEST_METHOD says so).
DIGEST_MODULUS = 2**256


COUNTERS = (
    "records",
    "by_split_label",
    "rejects",
    "source_formats",
    "changes",
    "heights",
    "widths",
    "feature_shapes",
    "dropped",
    "depth",
)


def _plain(key: Json) -> Json:
    return list(key) if isinstance(key, tuple) else key


def _key(key: Json) -> Json:
    """A counter key back from JSON: the pairs and shapes it holds are tuples again."""
    return tuple(key) if isinstance(key, list) else key


@dataclass
class Tally:
    """Counts of every outcome, mergeable across workers (the accumulator of a CombineFn)."""

    records: Counter[str] = field(default_factory=Counter)  # split -> n
    by_split_label: LabelCounts = field(default_factory=Counter)  # (split, label) -> n
    rejects: Counter[str] = field(default_factory=Counter)  # reason -> n
    source_formats: Counter[str] = field(default_factory=Counter)
    changes: Counter[str] = field(default_factory=Counter)  # change reason code -> records
    reencoded: int = 0
    heights: Counter[int] = field(default_factory=Counter)
    widths: Counter[int] = field(default_factory=Counter)
    # split -> sum of record sha256s: an order-independent digest that merges in O(1).
    digests: Counter[str] = field(default_factory=Counter)
    feature_shapes: Counter[tuple[int, ...]] = field(default_factory=Counter)  # shape -> n (feature runs)
    # Parts of records' labels the workers left out, per drop reason, and the annotated objects
    # that went with rejected images.
    dropped: Counter[str] = field(default_factory=Counter)
    objects_rejected: int = 0
    # Each kind of label's own counts, by kind name.
    kinds: dict[str, AnyTally] = field(default_factory=dict)
    # Records of pictures kept past 8 bits, by `keys.PixelLayout.token`; 8-bit ones are not counted.
    depth: Counter[str] = field(default_factory=Counter)

    def add(self, outcome: ConvertedRecord | RejectLine) -> Tally:
        if isinstance(outcome, RejectLine):
            self.rejects[outcome.reason] += 1
            self.objects_rejected += outcome.objects
            return self
        split = outcome.split
        self.records[split] += 1
        for name, facts in outcome.facts.items():
            self.kind(name).add(facts, split, self.by_split_label)
        if outcome.dropped:
            self.dropped.update(line.reason for line in outcome.dropped)
        self.source_formats[outcome.source_format] += 1
        self.reencoded += int(outcome.reencoded)
        self.changes.update(outcome.changes)
        self.heights[outcome.height] += 1
        self.widths[outcome.width] += 1
        self.digests[split] = (self.digests[split] + int.from_bytes(outcome.digest)) % DIGEST_MODULUS
        if outcome.feature_shape is not None:
            self.feature_shapes[outcome.feature_shape] += 1
        if outcome.depth:
            self.depth[outcome.depth] += 1
        return self

    def kind(self, name: str) -> AnyTally:
        """The named kind's counts (empty until its first record)."""
        found = self.kinds.get(name)
        if found is None:
            found = self.kinds[name] = KINDS[name].new_tally()
        return found

    def add_all(self, outcomes: Iterable[ConvertedRecord | RejectLine]) -> Tally:
        for outcome in outcomes:
            self.add(outcome)
        return self

    def to_json(self) -> JsonObject:
        """The counts as JSON (a finished shard task's, kept for a rerun: output.resume)."""
        data: JsonObject = {
            name: [[_plain(k), n] for k, n in getattr(self, name).items()] for name in COUNTERS
        }
        data["digests"] = [[split, str(digest)] for split, digest in self.digests.items()]
        data["reencoded"], data["objects_rejected"] = self.reencoded, self.objects_rejected
        data["kinds"] = {name: found.to_json() for name, found in self.kinds.items()}
        return data

    @classmethod
    def from_json(cls, data: JsonObject) -> Tally:
        tally = cls()
        for name in COUNTERS:
            getattr(tally, name).update({_key(k): n for k, n in data.get(name, ())})
        tally.digests.update({split: int(digest) for split, digest in data["digests"]})
        tally.reencoded, tally.objects_rejected = data["reencoded"], data["objects_rejected"]
        for name, counts in data.get("kinds", {}).items():
            tally.kinds[name] = type(KINDS[name].new_tally()).from_json(counts)
        return tally

    def merge(self, other: Tally) -> Tally:
        for name in COUNTERS:
            getattr(self, name).update(getattr(other, name))
        self.reencoded += other.reencoded
        self.objects_rejected += other.objects_rejected
        for split, digest in other.digests.items():
            self.digests[split] = (self.digests[split] + digest) % DIGEST_MODULUS
        for name, counts in other.kinds.items():
            self.kind(name).merge(counts)
        return self


def without_pixels(record: ConvertedRecord) -> ConvertedRecord:
    """The facts of a record with its bytes dropped, so tallies never carry images."""
    return record._replace(example=b"")
