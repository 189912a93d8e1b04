"""What is written beside the shards, summary.json last: labels.txt, rejects.jsonl, changes.jsonl,
duplicates.jsonl, the manifest rows that named no file, and TFDS's files. The counts come from
the tally (`write.tally`) and the summary from them (`write.summary`); the terminal's table is the
command's (`pipelines.report`).
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

from apache_beam.io.filesystems import FileSystems

from beam_tfrecord import fault_injection, tasks
from beam_tfrecord.elements import ChangeLine, DroppedObjectLine, DuplicateGroup, RejectLine
from beam_tfrecord.names import (
    ANNOTATIONS_UNMATCHED_FILE,
    CHANGES_FILE,
    DROPPED_OBJECTS_FILE,
    DUPLICATES_FILE,
    LABEL_MAP_FILE,
    LABELS_FILE,
    MANIFEST_UNMATCHED_FILE,
    REJECTS_FILE,
    SUMMARY_FILE,
    SUMMARY_TEMP_FILE,
    TFDS_INFO_FILE,
)
from beam_tfrecord.plan import staging
from beam_tfrecord.plan.annotations.label_map import is_unused
from beam_tfrecord.plan.staging import StagedPlan
from beam_tfrecord.write.summary import Summary
from beam_tfrecord.write.tfds_metadata import write_tfds_metadata
from beam_tfrecord.write_failures import writing

__all__ = ["ObjectFiles", "label_map", "object_files", "write_metadata", "write_text"]


@dataclass(frozen=True)
class ObjectFiles:
    """An annotated run's side files' lines: every object in no record (planning's and the
    workers'), and every annotation entry that names no listed image (JSON lines); `label_map`:
    the run's ids are a detection label map's (from 1), with dropped_objects.jsonl beside it
    (a segmentation run's ids are labels.txt's, from 0)."""

    dropped: Sequence[DroppedObjectLine] = ()
    unmatched: Sequence[str] = ()
    label_map: bool = True
    keypoint_names: Mapping[str, Sequence[str]] | None = None  # a keypoints run's, by class


def object_files(staged: StagedPlan, dropped: Sequence[DroppedObjectLine]) -> ObjectFiles | None:
    """An annotated run's side files' lines: a detection or keypoints run's dropped objects
    (planning's and the workers') and unmatched entries, with its keypoint names for the label
    map; a segmentation or captions run's entries that name no listed picture; None for a
    classification run."""
    plan_dir = staged.plan_dir
    if staged.task and "objects" not in tasks.task(staged.task).kinds:
        return ObjectFiles([], staging.load_unmatched(plan_dir), label_map=False)
    if not staged.objects:
        return None
    planned = staging.load_planned_dropped(plan_dir)
    facts = staging.load_facts(plan_dir).objects
    points = facts.keypoint_names if facts is not None else None
    return ObjectFiles([*planned, *dropped], staging.load_unmatched(plan_dir), keypoint_names=points)


def label_map(class_names: Sequence[str], keypoint_names: Mapping[str, Sequence[str]] | None = None) -> str:
    """The Object Detection API's label map (`string_int_label_map.proto` as text): ids from 1,
    0 being background, in labels.txt's order; the placeholders of a given label map's missing
    ids are left out, so its ids come back as given. A keypoints run's classes list their points
    (`keypoints { id label }`, ids from 0 in the records' order), as CenterNet's keypoint tasks
    read them."""
    items = []
    for i, name in enumerate(class_names, 1):
        if is_unused(name):
            continue
        points = "".join(
            f"  keypoints {{\n    id: {k}\n    label: {json.dumps(point, ensure_ascii=False)}\n  }}\n"
            for k, point in enumerate((keypoint_names or {}).get(name, ()))
        )
        items.append(f"item {{\n  id: {i}\n  name: {json.dumps(name, ensure_ascii=False)}\n{points}}}\n")
    return "".join(items)


def write_text(path: str, text: str) -> None:
    with writing(path), FileSystems.create(path) as handle:
        fault_injection.fail_point("metadata")
        handle.write(text.encode("utf-8"))


def write_metadata(
    output: str,
    class_names: Sequence[str] | None,
    rejects: Iterable[RejectLine],
    summary: Summary,
    shard_lengths: Mapping[str, int | None],
    changes: Iterable[ChangeLine] = (),
    duplicates: Sequence[DuplicateGroup] = (),
    manifest_unmatched: Sequence[str] = (),
    objects: ObjectFiles | None = None,
) -> Summary:
    """labels.txt, rejects.jsonl, changes.jsonl (why records differ from their files),
    duplicates.jsonl (one line per group of identical files), the manifest rows that named no
    file, and the TFDS metadata first; summary.json last: its presence means the run ended and
    every shard it lists is in place (see outputs.complete_shards).

    A detection run (`objects`) also gets label_map.pbtxt (the Object Detection API's, ids from
    1), dropped_objects.jsonl and annotations_without_image.jsonl.

    `shard_lengths` are the writer's record counts by shard file name (None: count them).
    Returns the summary as written (with what TFDS's writer did)."""
    if class_names is not None:
        write_text(FileSystems.join(output, LABELS_FILE), "".join(f"{name}\n" for name in class_names))
    write_text(FileSystems.join(output, REJECTS_FILE), "".join(r.to_json() + "\n" for r in sorted(rejects)))
    write_text(FileSystems.join(output, CHANGES_FILE), "".join(c.to_json() + "\n" for c in sorted(changes)))
    write_text(
        FileSystems.join(output, DUPLICATES_FILE), "".join(g.to_json() + "\n" for g in sorted(duplicates))
    )
    if objects is not None and objects.label_map:
        write_text(
            FileSystems.join(output, LABEL_MAP_FILE), label_map(class_names or (), objects.keypoint_names)
        )
        lines = "".join(line.to_json() + "\n" for line in sorted(objects.dropped))
        write_text(FileSystems.join(output, DROPPED_OBJECTS_FILE), lines)
    if objects is not None:
        unmatched = "".join(line + "\n" for line in objects.unmatched)
        write_text(FileSystems.join(output, ANNOTATIONS_UNMATCHED_FILE), unmatched)
    if manifest_unmatched:
        write_text(
            FileSystems.join(output, MANIFEST_UNMATCHED_FILE),
            "".join(f"{row}\n" for row in manifest_unmatched),
        )
    with writing(FileSystems.join(output, TFDS_INFO_FILE)):
        tfds = write_tfds_metadata(output, summary, shard_lengths)
    summary = dataclasses.replace(summary, tfds_metadata=tfds)
    fault_injection.pause_point("metadata")
    # Written aside and renamed: a reader never sees a half-written completeness marker.
    temp = FileSystems.join(output, SUMMARY_TEMP_FILE)
    write_text(temp, summary.to_text())
    with writing(FileSystems.join(output, SUMMARY_FILE)):
        FileSystems.rename([temp], [FileSystems.join(output, SUMMARY_FILE)])
    return summary
