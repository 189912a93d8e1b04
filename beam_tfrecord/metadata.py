"""What is written beside the shards: labels.txt, rejects.jsonl and summary.json, and the table
printed at the end of a run. The tally is a plain object so it is tested without Beam.
"""

from __future__ import annotations

import json
import posixpath
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from apache_beam.io.filesystems import FileSystems

from beam_tfrecord import faults
from beam_tfrecord.features import FeatureOptions
from beam_tfrecord.images import CHANGE_REASONS
from beam_tfrecord.plan import RejectLine
from beam_tfrecord.records import ChangeLine, ConvertedRecord
from beam_tfrecord.tfds_metadata import write_tfds_metadata

if TYPE_CHECKING:
    from beam_tfrecord.staging import PlanFacts

__all__ = [
    "CHANGES_FILE",
    "LABELS_FILE",
    "REJECTS_FILE",
    "SUMMARY_FILE",
    "Tally",
    "build_summary",
    "format_table",
    "read_summary",
    "write_metadata",
]

DIGEST_MODULUS = 2**256
DIGEST_METHOD = "sum of sha256(serialized record) mod 2**256: independent of record order and shards"
LABELS_FILE = "labels.txt"
REJECTS_FILE = "rejects.jsonl"
CHANGES_FILE = "changes.jsonl"
SUMMARY_FILE = "summary.json"


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
    # First 8 bytes of each source file's sha256 (as int): counts identical content. About 60
    # bytes per record; 64 bits make a false match unlikely below billions of records.
    contents: set = field(default_factory=set)
    hashed: int = 0  # records whose content is in `contents`
    feature_shapes: Counter = field(default_factory=Counter)  # shape tuple -> n (feature runs)

    @property
    def duplicates(self) -> int:
        """Records whose source bytes equal those of another record (each kept as its own record)."""
        return self.hashed - len(self.contents)

    def add(self, outcome: ConvertedRecord | RejectLine) -> Tally:
        if isinstance(outcome, RejectLine):
            self.rejects[outcome.reason] += 1
            return self
        self.records[outcome.split] += 1
        self.by_split_label[(outcome.split, outcome.label_text)] += 1
        self.source_formats[outcome.source_format] += 1
        self.reencoded += int(outcome.reencoded)
        self.changes.update(outcome.changes)
        self.heights[outcome.height] += 1
        self.widths[outcome.width] += 1
        split = outcome.split
        self.digests[split] = (self.digests[split] + int.from_bytes(outcome.digest)) % DIGEST_MODULUS
        if outcome.content_sha256:
            self.contents.add(int(outcome.content_sha256[:16], 16))
            self.hashed += 1
        if outcome.feature_shape is not None:
            self.feature_shapes[outcome.feature_shape] += 1
        return self

    def merge(self, other: Tally) -> Tally:
        for name in COUNTERS:
            getattr(self, name).update(getattr(other, name))
        self.reencoded += other.reencoded
        for split, digest in other.digests.items():
            self.digests[split] = (self.digests[split] + digest) % DIGEST_MODULUS
        self.contents |= other.contents
        self.hashed += other.hashed
        return self


def without_pixels(record: ConvertedRecord) -> ConvertedRecord:
    """The facts of a record with its bytes dropped, so tallies never carry images."""
    return record._replace(example=b"")


def _size_stats(sizes: Counter) -> dict[str, float]:
    if not sizes:
        return {}
    total = sum(sizes.values())
    mean = sum(size * n for size, n in sizes.items()) / total
    return {"min": min(sizes), "max": max(sizes), "mean": round(mean, 1)}


def build_summary(
    facts: PlanFacts,
    planned_rejects: Sequence[RejectLine],
    tally: Tally,
    shard_files: Iterable[tuple[str, int]],
    options: Mapping[str, Any],
    run_info: Mapping[str, Any],
    features: FeatureOptions | None = None,
) -> dict[str, Any]:
    """summary.json: counts per split, label and reason, the shards, and the nothing-lost check.

    `options` are the settings (config.summary_options); `run_info` says how it ran (runner,
    workers, times)."""
    skipped = sum(1 for r in planned_rejects if r.reason == "skipped")
    planned = Counter(r.reason for r in planned_rejects if r.reason != "skipped")
    rejects = Counter(tally.rejects) + planned
    inputs = facts.listed - skipped
    records = sum(tally.records.values())
    rejected = sum(rejects.values())
    shards: dict[str, list[tuple[str, int]]] = {name: [] for name in facts.splits}
    for path, size in sorted(shard_files):
        split = posixpath.basename(path).split("-", 1)[0]
        shards.setdefault(split, []).append((posixpath.basename(path), size))
    splits = {}
    for name in facts.splits:
        per_label = {
            label: n for (split, label), n in sorted(tally.by_split_label.items(), key=str) if split == name
        }
        splits[name] = {
            "fraction": facts.splits[name],
            "records": tally.records.get(name, 0),
            "labels": {str(k): v for k, v in per_label.items()} if facts.class_names is not None else {},
            "shards": len(shards[name]),
            "planned_shards": facts.shard_counts[name],
            "bytes": sum(size for _, size in shards[name]),
            "files": [file for file, _ in shards[name]],
            "digest": f"{tally.digests.get(name, 0):064x}",
        }
    warnings = []
    label_counts: Counter = Counter()
    for (_, label), n in tally.by_split_label.items():
        label_counts[label] += n
    for label in facts.class_names or []:
        if label_counts[label] == 0:
            warnings.append(f"class {label!r} has no valid image")
    if facts.manifest_unmatched:
        warnings.append(f"{len(facts.manifest_unmatched)} manifest rows name no listed file")
    if records == 0:
        warnings.append("every input was rejected: no record was written")
    if tally.duplicates:
        warnings.append(f"{tally.duplicates} records have the same image bytes as another record")
    feature_info = feature_summary(features, tally.feature_shapes, warnings)
    return {
        "inputs_listed": facts.listed,
        "skipped": skipped,
        "inputs": inputs,
        "records": records,
        "rejects": rejected,
        "consistent": inputs == records + rejected,
        "splits": splits,
        "class_names": facts.class_names,
        "records_per_label": {str(k): v for k, v in sorted(label_counts.items(), key=str)}
        if facts.class_names is not None
        else {},
        "rejects_per_reason": dict(sorted(rejects.items())),
        "reencoded": tally.reencoded,
        # Records per reason (one record may have several); one line per record in changes.jsonl.
        "changes_per_reason": {r: tally.changes[r] for r in CHANGE_REASONS if tally.changes[r]},
        "frames_dropped": tally.changes["frames_dropped"],
        "duplicate_records": tally.duplicates,
        "digest_method": DIGEST_METHOD,
        "source_formats": dict(sorted(tally.source_formats.items())),
        "image_height": _size_stats(tally.heights),
        "image_width": _size_stats(tally.widths),
        "manifest_rows_without_file": len(facts.manifest_unmatched),
        "manifest_rows_without_file_sample": facts.manifest_unmatched[:20],
        "warnings": warnings,
        **({"features": feature_info} if feature_info else {}),
        "options": dict(options),
        **run_info,
    }


def feature_summary(
    options: FeatureOptions | None, shapes: Counter, warnings: list[str]
) -> dict[str, Any] | None:
    """What a reader needs to restore the features (shape, dtype, image kept or not) and how
    they were made; None for a run without a feature model."""
    if options is None:
        return None
    if len(shapes) > 1:
        warnings.append(f"features have {len(shapes)} different shapes: {sorted(shapes)}")
    shape = list(shapes.most_common(1)[0][0]) if shapes else None
    return {
        "model": options.feature_model or options.model_path,
        "weights": options.model_weights if options.feature_model else None,
        "pooling": options.pooling,
        "dtype": options.dtype,
        "features_only": options.features_only,
        "batch_size": options.batch_size,
        "shape": shape,
    }


def write_text(path: str, text: str) -> None:
    with FileSystems.create(path) as handle:
        handle.write(text.encode("utf-8"))


def write_metadata(
    output: str,
    class_names: Sequence[str] | None,
    rejects: Iterable[RejectLine],
    summary: Mapping[str, Any],
    shard_lengths: Mapping[str, int | None],
    changes: Iterable[ChangeLine] = (),
) -> None:
    """labels.txt, rejects.jsonl, changes.jsonl and the TFDS metadata first, summary.json last:
    its presence means the run ended and every shard it lists is in place (see
    outputs.complete_shards).

    `shard_lengths` are the writer's record counts by shard file name (None: count them)."""
    if class_names is not None:
        write_text(FileSystems.join(output, LABELS_FILE), "".join(f"{name}\n" for name in class_names))
    write_text(FileSystems.join(output, REJECTS_FILE), "".join(r.to_json() + "\n" for r in sorted(rejects)))
    write_text(FileSystems.join(output, CHANGES_FILE), "".join(c.to_json() + "\n" for c in sorted(changes)))
    summary = {**summary, "tfds_metadata": write_tfds_metadata(output, summary, shard_lengths)}
    faults.pause_point("metadata")
    # Written aside and renamed: a reader never sees a half-written completeness marker.
    temp = FileSystems.join(output, f".temp-beam-tfrecord-{SUMMARY_FILE}")
    write_text(temp, json.dumps(summary, indent=2, sort_keys=False, ensure_ascii=False) + "\n")
    FileSystems.rename([temp], [FileSystems.join(output, SUMMARY_FILE)])


def read_summary(output: str) -> dict[str, Any]:
    with FileSystems.open(FileSystems.join(output, SUMMARY_FILE)) as handle:
        return json.loads(handle.read().decode("utf-8"))


def format_table(summary: Mapping[str, Any]) -> str:
    """The summary as a small aligned table for the terminal."""
    rows: list[tuple[str, str]] = []
    for name, split in summary["splits"].items():
        mb = split["bytes"] / 1e6
        rows.append((f"split {name}", f"{split['records']} records in {split['shards']} shards, {mb:.1f} MB"))
        for label, n in split["labels"].items():
            rows.append((f"  {label}", str(n)))
    rows.append(("inputs", f"{summary['inputs']} ({summary['skipped']} more skipped)"))
    rows.append(("records", str(summary["records"])))
    rows.append(("rejects", str(summary["rejects"])))
    for reason, n in summary["rejects_per_reason"].items():
        rows.append((f"  {reason}", str(n)))
    rows.append(("re-encoded", f"{summary['reencoded']} of {summary['records']} (why: {CHANGES_FILE})"))
    for reason, n in summary.get("changes_per_reason", {}).items():
        rows.append((f"  {reason}", str(n)))
    check = "yes" if summary["consistent"] else "NO"
    rows.append(("inputs = records + rejects", check))
    if "wall_time_s" in summary:
        rate = summary["inputs"] / summary["wall_time_s"] if summary["wall_time_s"] else 0.0
        rows.append(("wall time", f"{summary['wall_time_s']:.1f} s ({rate:.0f} inputs/s)"))
    width = max(len(key) for key, _ in rows)
    lines = [f"{key.ljust(width)}  {value}" for key, value in rows]
    lines += [f"warning: {w}" for w in summary.get("warnings", [])]
    return "\n".join(lines)
