"""What is written beside the shards, summary.json last: labels.txt, rejects.jsonl, changes.jsonl,
duplicates.jsonl, the manifest rows that named no file, and TFDS's files. The counts come from
the tally (`write.tally`) and the summary from them (`write.summary`); the terminal's table is the
command's (`pipelines.report`).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

from apache_beam.io.filesystems import FileSystems

from beam_tfrecord import fault_injection
from beam_tfrecord.elements import ChangeLine, DroppedObjectLine, DuplicateGroup, RejectLine
from beam_tfrecord.labels import of_task
from beam_tfrecord.names import (
    ANNOTATIONS_UNMATCHED_FILE,
    CHANGES_FILE,
    DUPLICATES_FILE,
    LABELS_FILE,
    MANIFEST_UNMATCHED_FILE,
    REJECTS_FILE,
    SUMMARY_FILE,
    SUMMARY_TEMP_FILE,
    TFDS_INFO_FILE,
)
from beam_tfrecord.plan import staging
from beam_tfrecord.plan.staging import PlanFacts, StagedPlan
from beam_tfrecord.summary import Summary
from beam_tfrecord.write.tfds_metadata import write_tfds_metadata
from beam_tfrecord.write_failures import writing

__all__ = ["LabelFiles", "label_files", "write_metadata", "write_text"]


@dataclass(frozen=True)
class LabelFiles:
    """An annotated run's side files' contents: each of its kinds of label's own (`labels
    .LabelKind.side_files`: a detection run's label_map.pbtxt and dropped_objects.jsonl), and
    every annotation entry that names no listed picture (JSON lines)."""

    files: Mapping[str, str]
    unmatched: Sequence[str] = ()


def label_files(
    staged: StagedPlan, facts: PlanFacts, dropped: Sequence[DroppedObjectLine]
) -> LabelFiles | None:
    """An annotated run's side files, from its plan's facts, the parts of labels dropped while
    planning and by the workers (`dropped`), and its unmatched entries; None for a run without
    annotations."""
    if facts.annotations is None:
        return None
    plan_dir = staged.plan_dir
    every = (*staging.load_planned_dropped(plan_dir), *dropped)
    names = tuple(facts.class_names or ())
    files: dict[str, str] = {}
    for kind in of_task(facts.task):
        files |= kind.side_files(names, facts.kinds, every)
    return LabelFiles(files, staging.load_unmatched(plan_dir))


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
    annotated: LabelFiles | None = None,
) -> Summary:
    """labels.txt, rejects.jsonl, changes.jsonl (why records differ from their files),
    duplicates.jsonl (one line per group of identical files), the manifest rows that named no
    file, and the TFDS metadata first; summary.json last: its presence means the run ended and
    every shard it lists is in place (see outputs.complete_shards).

    An annotated run (`annotated`) also gets its kinds of label's files (a detection run's
    label_map.pbtxt, the Object Detection API's, ids from 1, and dropped_objects.jsonl) and
    annotations_without_image.jsonl.

    `shard_lengths` are the writer's record counts by shard file name (None: count them).
    Returns the summary as written (with what TFDS's writer did)."""
    if class_names is not None:
        write_text(FileSystems.join(output, LABELS_FILE), "".join(f"{name}\n" for name in class_names))
    write_text(FileSystems.join(output, REJECTS_FILE), "".join(r.to_json() + "\n" for r in sorted(rejects)))
    write_text(FileSystems.join(output, CHANGES_FILE), "".join(c.to_json() + "\n" for c in sorted(changes)))
    write_text(
        FileSystems.join(output, DUPLICATES_FILE), "".join(g.to_json() + "\n" for g in sorted(duplicates))
    )
    if annotated is not None:
        for name, text in annotated.files.items():
            write_text(FileSystems.join(output, name), text)
        unmatched = "".join(line + "\n" for line in annotated.unmatched)
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
