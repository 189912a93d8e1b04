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
from beam_tfrecord.elements import ChangeLine, ConvertedRecord, DuplicateGroup, RejectLine
from beam_tfrecord.features.options import FeatureOptions
from beam_tfrecord.images.normalize import CHANGE_REASONS
from beam_tfrecord.keys import extra_key
from beam_tfrecord.names import (
    CHANGES_FILE,
    DUPLICATES_FILE,
    LABELS_FILE,
    MANIFEST_UNMATCHED_FILE,
    REJECTS_FILE,
    SUMMARY_FILE,
    SUMMARY_TEMP_FILE,
)
from beam_tfrecord.plan import splits as splits_lib
from beam_tfrecord.plan.columns import parse_extra_columns
from beam_tfrecord.write.tfds_metadata import write_tfds_metadata

if TYPE_CHECKING:
    from beam_tfrecord.plan.staging import PlanFacts

__all__ = [
    "Tally",
    "build_summary",
    "duplicate_counts",
    "format_table",
    "read_summary",
    "write_metadata",
]

DIGEST_MODULUS = 2**256
# A hash split further than this from its fraction gets a warning that names --stratify.
SHARE_WARNING = 0.01
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


def duplicate_counts(groups: Sequence[DuplicateGroup]) -> dict[str, int]:
    """summary.json's duplicate figures: records beyond the first copy of each content
    (`duplicate_records`), groups, and records whose bytes also lie in another split
    (`cross_split_duplicates`: every copy of a group that spans two splits or more)."""
    return {
        "duplicate_records": sum(len(g.copies) - 1 for g in groups),
        "duplicate_groups": len(groups),
        "cross_split_duplicates": sum(len(g.copies) for g in groups if len(g.splits) > 1),
    }


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
    duplicates: Sequence[DuplicateGroup] = (),
) -> dict[str, Any]:
    """summary.json: counts per split, label and reason, the shards, and the nothing-lost check.

    `options` are the settings (config.summary_options); `run_info` says how it ran (runner,
    workers, times); `duplicates` are the groups of records with identical source bytes."""
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
    stratified = bool(options.get("stratify"))
    grouping = facts.grouping or {}
    # What a hash split draws: each group once, each file of no group once.
    units = grouping["groups"] + grouping["without_group"] if grouping.get("source") else records
    for name in facts.splits:
        per_label = {
            label: n for (split, label), n in sorted(tally.by_split_label.items(), key=str) if split == name
        }
        count = tally.records.get(name, 0)
        splits[name] = {
            "fraction": facts.splits[name],
            "records": count,
            "share": round(count / records, 4) if records else 0.0,
            # hash splits: the share lies within this of the fraction about 95 times in 100
            "expected_deviation": 0.0
            if stratified
            else round(splits_lib.expected_deviation(facts.splits[name], units), 4),
            "labels": {str(k): v for k, v in per_label.items()} if facts.class_names is not None else {},
            "shards": len(shards[name]),
            "planned_shards": facts.shard_counts[name],
            "bytes": sum(size for _, size in shards[name]),
            "files": [file for file, _ in shards[name]],
            "digest": f"{tally.digests.get(name, 0):064x}",
        }
    warnings = []
    if not stratified and len(splits) > 1 and records:
        name, split = max(splits.items(), key=lambda item: abs(item[1]["share"] - item[1]["fraction"]))
        if abs(split["share"] - split["fraction"]) > SHARE_WARNING:
            warnings.append(
                f"split {name} holds {split['share']:.1%} of records, not the {split['fraction']:.1%} asked: "
                f"hash splits are off by up to ±{split['expected_deviation']:.1%} at this size "
                "(and never move a file when files are added); stratify gives exact shares"
            )
    label_counts: Counter = Counter()
    for (_, label), n in tally.by_split_label.items():
        label_counts[label] += n
    for label in facts.class_names or []:
        if label_counts[label] == 0:
            warnings.append(f"class {label!r} has no valid image")
    if facts.manifest_unmatched:
        warnings.append(
            f"{len(facts.manifest_unmatched)} manifest rows name no listed file "
            f"(see {MANIFEST_UNMATCHED_FILE})"
        )
    if records == 0:
        warnings.append("every input was rejected: no record was written")
    dupes = duplicate_counts(duplicates)
    if dupes["duplicate_records"]:
        warnings.append(
            f"{dupes['duplicate_records']} records have the same image bytes as another record "
            f"(see {DUPLICATES_FILE})"
        )
    if dupes["cross_split_duplicates"]:
        warnings.append(
            f"{dupes['cross_split_duplicates']} records have the same bytes as a record in another "
            f"split: the splits leak (see {DUPLICATES_FILE}; dedupe keeps one copy)"
        )
    if grouping.get("source") and not grouping.get("groups"):
        warnings.append(f"no file has a group ({grouping['source']}): every file was split on its own")
    extra_columns = describe_extra_columns(options)
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
        **dupes,
        "duplicates_file": DUPLICATES_FILE,
        "split_method": "stratified" if stratified else "hash",
        "groups": grouping,
        "multi_label": bool(options.get("multi_label")),
        "extra_columns": extra_columns,
        "digest_method": DIGEST_METHOD,
        "source_formats": dict(sorted(tally.source_formats.items())),
        "image_height": _size_stats(tally.heights),
        "image_width": _size_stats(tally.widths),
        "manifest_rows_without_file": len(facts.manifest_unmatched),
        "manifest_rows_without_file_sample": facts.manifest_unmatched[:20],
        "manifest_rows_without_file_list": MANIFEST_UNMATCHED_FILE if facts.manifest_unmatched else None,
        "warnings": warnings,
        **({"features": feature_info} if feature_info else {}),
        "options": dict(options),
        **run_info,
    }


def describe_extra_columns(options: Mapping[str, Any]) -> list[dict[str, str]]:
    """summary.json's `extra_columns`: each stored manifest column's name, type and record key."""
    given = options.get("extra_columns") or []
    schema = str(options.get("schema", "tfds"))
    columns = parse_extra_columns(",".join(given)) if given else ()
    return [{"name": c.name, "type": c.type, "key": extra_key(schema, c.name)} for c in columns]


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
        "precision": options.precision,
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
    duplicates: Sequence[DuplicateGroup] = (),
    manifest_unmatched: Sequence[str] = (),
) -> None:
    """labels.txt, rejects.jsonl, changes.jsonl (why records differ from their files),
    duplicates.jsonl (one line per group of identical files), the manifest rows that named no
    file, and the TFDS metadata first; summary.json last: its presence means the run ended and
    every shard it lists is in place (see outputs.complete_shards).

    `shard_lengths` are the writer's record counts by shard file name (None: count them)."""
    if class_names is not None:
        write_text(FileSystems.join(output, LABELS_FILE), "".join(f"{name}\n" for name in class_names))
    write_text(FileSystems.join(output, REJECTS_FILE), "".join(r.to_json() + "\n" for r in sorted(rejects)))
    write_text(FileSystems.join(output, CHANGES_FILE), "".join(c.to_json() + "\n" for c in sorted(changes)))
    write_text(
        FileSystems.join(output, DUPLICATES_FILE), "".join(g.to_json() + "\n" for g in sorted(duplicates))
    )
    if manifest_unmatched:
        write_text(
            FileSystems.join(output, MANIFEST_UNMATCHED_FILE),
            "".join(f"{row}\n" for row in manifest_unmatched),
        )
    summary = {**summary, "tfds_metadata": write_tfds_metadata(output, summary, shard_lengths)}
    faults.pause_point("metadata")
    # Written aside and renamed: a reader never sees a half-written completeness marker.
    temp = FileSystems.join(output, SUMMARY_TEMP_FILE)
    write_text(temp, json.dumps(summary, indent=2, sort_keys=False, ensure_ascii=False) + "\n")
    FileSystems.rename([temp], [FileSystems.join(output, SUMMARY_FILE)])


def _share(split: Mapping[str, Any], method: str) -> str:
    """`18.7% of records (asked 20.0%, hash splits: ±6.5%)`: how far a split is from its share."""
    asked = f"asked {100 * split['fraction']:.1f}%"
    if method == "stratified":
        return f"{100 * split['share']:.1f}% of records ({asked}, stratified)"
    return (
        f"{100 * split['share']:.1f}% of records ({asked}, hash: ±{100 * split['expected_deviation']:.1f}%)"
    )


def read_summary(output: str) -> dict[str, Any]:
    with FileSystems.open(FileSystems.join(output, SUMMARY_FILE)) as handle:
        return json.loads(handle.read().decode("utf-8"))


def format_table(summary: Mapping[str, Any]) -> str:
    """The summary as a small aligned table for the terminal."""
    rows: list[tuple[str, str]] = []
    several = len(summary["splits"]) > 1
    for name, split in summary["splits"].items():
        mb = split["bytes"] / 1e6
        line = f"{split['records']} records in {split['shards']} shards, {mb:.1f} MB"
        if several and "share" in split:
            line += f"; {_share(split, summary.get('split_method', 'hash'))}"
        rows.append((f"split {name}", line))
        for label, n in split["labels"].items():
            rows.append((f"  {label}", str(n)))
    groups = summary.get("groups") or {}
    if groups.get("source"):
        rows.append(
            (
                "groups",
                f"{groups['groups']} ({groups['grouped_files']} files; "
                f"{groups['without_group']} without a group, split on their own)",
            )
        )
    rows.append(("inputs", f"{summary['inputs']} ({summary['skipped']} more skipped)"))
    rows.append(("records", str(summary["records"])))
    rows.append(("rejects", str(summary["rejects"])))
    for reason, n in summary["rejects_per_reason"].items():
        rows.append((f"  {reason}", str(n)))
    rows.append(("re-encoded", f"{summary['reencoded']} of {summary['records']} (why: {CHANGES_FILE})"))
    for reason, n in summary.get("changes_per_reason", {}).items():
        rows.append((f"  {reason}", str(n)))
    if summary.get("duplicate_records"):
        rows.append(
            (
                "duplicates",
                f"{summary['duplicate_records']} extra copies in {summary['duplicate_groups']} groups, "
                f"{summary['cross_split_duplicates']} records across splits",
            )
        )
    check = "yes" if summary["consistent"] else "NO"
    rows.append(("inputs = records + rejects", check))
    if "wall_time_s" in summary:
        rate = summary["inputs"] / summary["wall_time_s"] if summary["wall_time_s"] else 0.0
        rows.append(("wall time", f"{summary['wall_time_s']:.1f} s ({rate:.0f} inputs/s)"))
    width = max(len(key) for key, _ in rows)
    lines = [f"{key.ljust(width)}  {value}" for key, value in rows]
    lines += [f"warning: {w}" for w in summary.get("warnings", [])]
    return "\n".join(lines)
