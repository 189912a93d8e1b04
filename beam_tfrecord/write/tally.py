"""The counts of a run, gathered where the records and rejects are made and merged across workers:
the accumulator of the pipeline's CombineFns, a plain object so it is tested without Beam. The
summary is built from it (`write.summary.build_summary`); no count is made twice.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field

from beam_tfrecord.elements import ConvertedRecord, RejectLine

__all__ = ["DIGEST_METHOD", "DIGEST_MODULUS", "Tally", "without_pixels"]

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
)


@dataclass
class Tally:
    """Counts of every outcome, mergeable across workers (the accumulator of a CombineFn)."""

    records: Counter = field(default_factory=Counter)  # split -> n
    by_split_label: Counter = field(default_factory=Counter)  # (split, label) -> n
    rejects: Counter = field(default_factory=Counter)  # reason -> n
    source_formats: Counter = field(default_factory=Counter)
    changes: Counter = field(default_factory=Counter)  # CHANGE_REASONS code -> records
    reencoded: int = 0
    heights: Counter = field(default_factory=Counter)
    widths: Counter = field(default_factory=Counter)
    # split -> sum of record sha256s: an order-independent digest that merges in O(1).
    digests: Counter = field(default_factory=Counter)
    feature_shapes: Counter = field(default_factory=Counter)  # shape tuple -> n (feature runs)

    def add(self, outcome: ConvertedRecord | RejectLine) -> Tally:
        if isinstance(outcome, RejectLine):
            self.rejects[outcome.reason] += 1
            return self
        self.records[outcome.split] += 1
        if isinstance(outcome.label_text, tuple):  # a multi-label record counts for each class
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

    def merge(self, other: Tally) -> Tally:
        for name in COUNTERS:
            getattr(self, name).update(getattr(other, name))
        self.reencoded += other.reencoded
        for split, digest in other.digests.items():
            self.digests[split] = (self.digests[split] + digest) % DIGEST_MODULUS
        return self


def without_pixels(record: ConvertedRecord) -> ConvertedRecord:
    """The facts of a record with its bytes dropped, so tallies never carry images."""
    return record._replace(example=b"")
