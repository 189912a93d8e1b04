"""An annotated dataset grown by `--append` (output.append): the side files of its kinds of label
(a detection dataset's dropped_objects.jsonl and label_map.pbtxt) and its
annotations_without_image.jsonl written for old and new records, as a run over every picture
would write them; each kind's section merges itself (`labels.Section.merged`).

The append's own run matched its annotations against the whole listing and reported only the
entries that name no picture of the dataset and that the dataset does not list yet
(plan.annotations.growing): those and the first runs' are one list (each once), less the old
ones a new picture now answers. Objects of those entries are `no_image`;
every other count adds up, so `annotated = stored + dropped` holds over the grown dataset.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable, Mapping

from apache_beam.io.filesystems import FileSystems

from beam_tfrecord import reasons, storage
from beam_tfrecord.elements import DroppedObjectLine
from beam_tfrecord.names import ANNOTATIONS_UNMATCHED_FILE
from beam_tfrecord.plan.annotations.growing import entry_key, names_one_of
from beam_tfrecord.plan.planner import undeclared_split_warning
from beam_tfrecord.write.side_files import write_text

__all__ = [
    "merge_joined_files",
    "merge_unmatched",
    "reported_unmatched",
    "undeclared_warning",
    "write_grown_files",
]


def merge_joined_files(output: str, work: str, name: str, before: int | None = None) -> None:
    """A side file whose lines the dataset and the append's run each hold (`labels.LabelKind
    .joined_files`: dropped_objects.jsonl), in `output` for both together. Idempotent, as
    output.append.merge must be: a rerun finds its own lines already merged.

    `before`: how many lines the dataset's file held when the merge began (the merge's marker
    keeps it), so a rerun takes those of its lines as the old ones and each of the append's once:
    two folders' `IMG_0001.jpg` may each drop the same box, one line each (found in review:
    joined as a set, the second was lost while the summary counted both). None (a merge begun by
    an earlier version): joined as a set, as then."""
    old = storage.lines(FileSystems.join(output, name))
    added = storage.lines(FileSystems.join(work, name))
    if before is None:
        joined = [d.to_json() for d in sorted({DroppedObjectLine.from_json(line) for line in old + added})]
    else:  # the old lines first, as they were, then the append's: a rerun finds the old ones again
        joined = old[:before] + added
    write_text(FileSystems.join(output, name), "".join(line + "\n" for line in joined))


def merge_unmatched(output: str, work: str, new_files: Iterable[str]) -> list[str]:
    """annotations_without_image.jsonl in `output` for the dataset and the append's run together,
    less the old entries whose picture the append brought; returns the merged entries (lines).
    Idempotent, as `merge_joined_files`."""
    names_new = names_one_of(new_files)
    kept = [
        line
        for line in storage.lines(FileSystems.join(output, ANNOTATIONS_UNMATCHED_FILE))
        if not _answered(line, names_new)
    ]
    unmatched = list(
        dict.fromkeys([*kept, *storage.lines(FileSystems.join(work, ANNOTATIONS_UNMATCHED_FILE))])
    )
    write_text(FileSystems.join(output, ANNOTATIONS_UNMATCHED_FILE), "".join(f"{u}\n" for u in unmatched))
    return unmatched


def _answered(line: str, names_new: Callable[[str], bool]) -> bool:
    """An old `missing_image` entry whose picture the append brought."""
    entry = json.loads(line)
    return entry.get("reason") == reasons.MISSING_IMAGE.code and names_new(entry.get("name") or "")


def reported_unmatched(output: str) -> frozenset[str]:
    """The entries the dataset in `output` lists as naming no picture (growing.entry_key)."""
    return frozenset(
        entry_key(json.loads(line))
        for line in storage.lines(FileSystems.join(output, ANNOTATIONS_UNMATCHED_FILE))
    )


def write_grown_files(output: str, files: Mapping[str, str]) -> None:
    """The side files a grown dataset's kinds of label write anew (`labels.LabelKind.grown_files`:
    label_map.pbtxt for the grown class names, old ids kept, new classes after them)."""
    for name, text in files.items():
        write_text(FileSystems.join(output, name), text)


def undeclared_warning(reject_lines: Iterable[str]) -> str | None:
    """The grown dataset's warning on pictures none of its declared splits names, counted over
    every run's rejects."""
    left_out = sorted(
        entry["path"]
        for entry in map(json.loads, reject_lines)
        if entry.get("reason") == reasons.UNDECLARED_SPLIT.code
    )
    return undeclared_split_warning(left_out) if left_out else None
