"""The table `python -m pipelines.convert` prints at the end of a run, from the run's summary: the
command's view of summary.json (the library writes the file; how a terminal shows it is ours)."""

from __future__ import annotations

from beam_tfrecord.names import CHANGES_FILE
from beam_tfrecord.write.summary import (
    CaptionSummary,
    KeypointSummary,
    ObjectSummary,
    SegmentationSummary,
    SplitSummary,
    Summary,
)

__all__ = ["format_table"]


def _share(split: SplitSummary, stratified: bool, declared: bool = False) -> str:
    """`18.7% of records (asked 20.0%, hash: ±6.5%)`: how far a split is from its share."""
    asked = f"asked {100 * split.fraction:.1f}%"
    if declared:
        return f"{100 * split.share:.1f}% of records (declared by the dataset)"
    if stratified:
        return f"{100 * split.share:.1f}% of records ({asked}, stratified)"
    return f"{100 * split.share:.1f}% of records ({asked}, hash: ±{100 * split.expected_deviation:.1f}%)"


def _object_rows(objects: ObjectSummary) -> list[tuple[str, str]]:
    """A detection run's objects: where they went, per class, per image, by size."""
    rows = [("annotations", objects.found_at)] if objects.found_at else []
    rows.append(
        ("objects", f"{objects.annotated} annotated: {objects.stored} stored, {objects.dropped} dropped")
    )
    rows += [(f"  {reason}", str(n)) for reason, n in objects.dropped_per_reason.items()]
    rows.append(("objects per class", "objects in images"))
    rows += [(f"  {name}", f"{n['objects']} in {n['images']}") for name, n in objects.per_class.items()]
    per_image = objects.per_image
    rows.append(
        (
            "objects per image",
            f"mean {per_image.get('mean', 0)}, max {per_image.get('max', 0)}; "
            f"{objects.negatives} images without one",
        )
    )
    sizes = ", ".join(f"{n} {name}" for name, n in objects.sizes.items())
    rows.append(("box sizes (COCO's)", sizes))
    rows.append(("annotated = stored + dropped", "yes" if objects.consistent else "NO"))
    return rows


def _segmentation_rows(masks: SegmentationSummary) -> list[tuple[str, str]]:
    """A segmentation run's masks: where they came from, and each class's share of the pixels."""
    rows = [("masks", masks.found_at)] if masks.found_at else []
    rows.append(("pixels per class", "share of labelled pixels, in pictures"))
    rows += [(f"  {name}", f"{n['share']:.1%} in {n['pictures']}") for name, n in masks.per_class.items()]
    if masks.ignore is not None:
        rows.append((f"ignored ({masks.ignore})", f"{masks.ignored_pixels} pixels"))
    if masks.pictures_without_mask:
        rows.append(("pictures without a mask", f"{masks.pictures_without_mask} (stored all ignored)"))
    if masks.unmatched_masks:
        rows.append(("masks without a picture", f"{masks.unmatched_masks} (annotations_without_image.jsonl)"))
    return rows


def _caption_rows(captions: CaptionSummary) -> list[tuple[str, str]]:
    """A captions run's captions: where they came from, how many, how spread."""
    rows = [("captions", captions.found_at)] if captions.found_at else []
    per = captions.per_picture
    rows.append(
        (
            "captions stored",
            f"{captions.captions} for {captions.pictures_with_captions} pictures "
            f"({per.get('min', 0)} to {per.get('max', 0)} a picture)",
        )
    )
    if captions.pictures_without_caption:
        rows.append(("pictures without a caption", str(captions.pictures_without_caption)))
    if captions.unmatched_entries:
        rows.append(
            ("captions naming no picture", f"{captions.unmatched_entries} (annotations_without_image.jsonl)")
        )
    return rows


def _keypoint_rows(points: KeypointSummary) -> list[tuple[str, str]]:
    """A keypoints run's points: how many stored labelled, visible, and made unlabelled."""
    rows = [
        (
            "keypoints",
            f"{points.points_per_object} an object; {points.labelled} labelled, {points.visible} visible",
        )
    ]
    if points.made_unlabelled:
        rows.append(("  left outside", f"{points.made_unlabelled} (the edge or crop: stored unlabelled)"))
    return rows


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
    rows.append(("inputs = records + rejects", "yes" if summary.consistent else "NO"))
    if summary.objects is not None:
        rows += _object_rows(summary.objects)
    if summary.keypoints is not None:
        rows += _keypoint_rows(summary.keypoints)
    if summary.segmentation is not None:
        rows += _segmentation_rows(summary.segmentation)
    if summary.captions is not None:
        rows += _caption_rows(summary.captions)
    wall = summary.run.wall_time_s if summary.run is not None else None
    if wall is not None:
        rate = summary.inputs / wall if wall else 0.0
        rows.append(("wall time", f"{wall:.1f} s ({rate:.0f} inputs/s)"))
    width = max(len(key) for key, _ in rows)
    lines = [f"{key.ljust(width)}  {value}" for key, value in rows]
    lines += [f"warning: {w}" for w in summary.warnings]
    return "\n".join(lines)
