"""The table `python -m pipelines.convert` prints at the end of a run, from the run's summary: the
command's view of summary.json (the library writes the file; how a terminal shows it is ours)."""

from __future__ import annotations

from beam_tfrecord.names import CHANGES_FILE
from beam_tfrecord.summary import SplitSummary, Summary

__all__ = ["format_table"]


def _share(split: SplitSummary, stratified: bool, declared: bool = False) -> str:
    """`18.7% of records (asked 20.0%, hash: ±6.5%)`: how far a split is from its share."""
    asked = f"asked {100 * split.fraction:.1f}%"
    if declared:
        return f"{100 * split.share:.1f}% of records (declared by the dataset)"
    if stratified:
        return f"{100 * split.share:.1f}% of records ({asked}, stratified)"
    return f"{100 * split.share:.1f}% of records ({asked}, hash: ±{100 * split.expected_deviation:.1f}%)"


def format_table(summary: Summary) -> str:
    """The summary as a small aligned table for the terminal."""
    rows: list[tuple[str, str]] = []
    several = len(summary.splits) > 1
    for name, split in summary.splits.items():
        line = f"{split.records} records in {split.shards} shards, {split.bytes / 1e6:.1f} MB"
        if several:
            line += f"; {_share(split, summary.stratified, summary.split_method.startswith('declared'))}"
        rows.append((f"split {name}", line))
        for label, n in split.labels.items():
            rows.append((f"  {label}", str(n)))
    if summary.split_method not in ("hash", "stratified"):
        rows.append(("splits", summary.split_method))
    groups = summary.groups
    if groups.source:
        rows.append(
            (
                "groups",
                f"{groups.groups} ({groups.grouped_files} files; "
                f"{groups.without_group} without a group, split on their own)",
            )
        )
    rows.append(("inputs", f"{summary.inputs} ({summary.skipped} more skipped)"))
    rows.append(("records", str(summary.records)))
    rows.append(("rejects", str(summary.rejects)))
    for reason, n in summary.rejects_per_reason.items():
        rows.append((f"  {reason}", str(n)))
    rows.append(("re-encoded", f"{summary.reencoded} of {summary.records} (why: {CHANGES_FILE})"))
    for reason, n in summary.changes_per_reason.items():
        rows.append((f"  {reason}", str(n)))
    if summary.duplicate_records:
        rows.append(
            (
                "duplicates",
                f"{summary.duplicate_records} extra copies in {summary.duplicate_groups} groups, "
                f"{summary.cross_split_duplicates} records across splits",
            )
        )
    if summary.resumed:
        kept = f"{summary.resumed['shards']} shard tasks ({summary.resumed['records']} records)"
        rows.append(("resumed", f"{kept} kept from an interrupted run"))
    if summary.in_two_splits:
        rows.append(("in two splits", f"{summary.in_two_splits} records repeat a picture of another split"))
    consistent = "yes" if summary.consistent else "NO"
    if summary.in_two_splits:  # each of those records is one more than the pictures read
        consistent += f" (records less the {summary.in_two_splits} in two splits)"
    rows.append(("inputs = records + rejects", consistent))
    for section in summary.sections.values():  # each kind of label's rows
        rows += section.rows()
    wall = summary.run.wall_time_s if summary.run is not None else None
    if wall is not None:
        rate = summary.inputs / wall if wall else 0.0
        rows.append(("wall time", f"{wall:.1f} s ({rate:.0f} inputs/s)"))
    width = max(len(key) for key, _ in rows)
    lines = [f"{key.ljust(width)}  {value}" for key, value in rows]
    lines += [f"warning: {w}" for w in summary.warnings]
    return "\n".join(lines)
