"""A detection dataset grown by `--append` (output.append): its objects counted over old and new
records, and its side files (dropped_objects.jsonl, annotations_without_image.jsonl,
label_map.pbtxt) written for both, as a run over every picture would write them.

The append's own run matched its annotations against the whole listing and reported only the
entries that name no picture of the dataset and that the dataset does not list yet
(plan.annotations.growing): those and the first runs' are one list (each once), less the old
ones a new picture now answers. Objects of those entries are `no_image`;
every other count adds up, so `annotated = stored + dropped` holds over the grown dataset.
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Callable, Iterable, Sequence

from apache_beam.io.filesystems import FileSystems

from beam_tfrecord import reasons, storage
from beam_tfrecord.elements import DroppedObjectLine
from beam_tfrecord.names import ANNOTATIONS_UNMATCHED_FILE, DROPPED_OBJECTS_FILE, LABEL_MAP_FILE
from beam_tfrecord.plan.annotations.growing import entry_key, names_one_of
from beam_tfrecord.plan.planner import undeclared_split_warning
from beam_tfrecord.write.side_files import label_map, write_text
from beam_tfrecord.write.summary import ObjectSummary

__all__ = [
    "merge_object_files",
    "merged_objects",
    "reported_unmatched",
    "undeclared_warning",
    "write_label_map",
]

_NO_IMAGE = reasons.NO_IMAGE.code


def merge_object_files(
    output: str, work: str, new_files: Iterable[str], dropped_before: int | None = None
) -> list[str]:
    """dropped_objects.jsonl and annotations_without_image.jsonl in `output` for the dataset and
    the append's run in `work` together; returns the entries that name no picture (their lines).
    Idempotent, as output.append.merge must be: a rerun finds its own lines already merged.

    `dropped_before`: how many dropped objects the dataset listed when the merge began (the
    merge's marker keeps it), so a rerun takes those of its lines as the old ones and each of
    the append's once: two folders' `IMG_0001.jpg` may each drop the same box, one line each
    (found in review: joined as a set, the second was lost while the summary counted both).
    None (a merge begun by an earlier version): joined as a set, as then."""
    old = storage.lines(FileSystems.join(output, DROPPED_OBJECTS_FILE))
    added = storage.lines(FileSystems.join(work, DROPPED_OBJECTS_FILE))
    if dropped_before is None:
        joined = [d.to_json() for d in sorted({DroppedObjectLine.from_json(line) for line in old + added})]
    else:  # the old lines first, as they were, then the append's: a rerun finds the old ones again
        joined = old[:dropped_before] + added
    write_text(FileSystems.join(output, DROPPED_OBJECTS_FILE), "".join(line + "\n" for line in joined))
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


def write_label_map(output: str, class_names: Sequence[str]) -> None:
    """label_map.pbtxt for the grown class names (old ids kept, new classes after them)."""
    write_text(FileSystems.join(output, LABEL_MAP_FILE), label_map(class_names))


def merged_objects(
    old: ObjectSummary,
    new: ObjectSummary | None,
    class_names: Sequence[str],
    unmatched: Sequence[str],
) -> ObjectSummary:
    """The objects section over old and new records; `unmatched` are the merged entries that
    name no picture (`merge_object_files`), whose objects are the `no_image` ones."""
    if new is None:
        return old
    no_image = sum(int(json.loads(line).get("objects") or 0) for line in unmatched)
    dropped = Counter(old.dropped_per_reason) + Counter(new.dropped_per_reason)
    dropped.pop(_NO_IMAGE, None)
    if no_image:
        dropped[_NO_IMAGE] = no_image
    # The runs' own no_image objects give way to the merged entries' (a repeated one counts once).
    annotated = (
        old.annotated
        - old.dropped_per_reason.get(_NO_IMAGE, 0)
        + new.annotated
        - new.dropped_per_reason.get(_NO_IMAGE, 0)
        + no_image
    )
    stored = old.stored + new.stored
    histogram = dict(
        Counter(old.per_image.get("histogram", {})) + Counter(new.per_image.get("histogram", {}))
    )
    histogram = {key: histogram.get(key, 0) for key in (*old.per_image.get("histogram", {}), *histogram)}
    records = sum(histogram.values())
    empty = {"objects": 0, "images": 0}
    return ObjectSummary(
        kind=old.kind,
        masks=old.masks,
        annotated=annotated,
        stored=stored,
        dropped=sum(dropped.values()),
        consistent=annotated == stored + sum(dropped.values()),
        dropped_per_reason=dict(sorted(dropped.items())),
        unmatched_entries=len(unmatched),
        negatives=old.negatives + new.negatives,
        per_class={
            name: {
                key: old.per_class.get(name, empty)[key] + new.per_class.get(name, empty)[key]
                for key in ("objects", "images")
            }
            for name in class_names
        },
        per_image={
            "mean": round(stored / records, 2) if records else 0.0,
            "max": max(old.per_image.get("max", 0), new.per_image.get("max", 0)),
            "histogram": histogram,
        },
        sizes={
            key: old.sizes.get(key, 0) + new.sizes.get(key, 0)
            for key in dict.fromkeys([*old.sizes, *new.sizes])
        },
        class_ids=old.class_ids,
        found_at=new.found_at or old.found_at,
    )


def undeclared_warning(reject_lines: Iterable[str]) -> str | None:
    """The grown dataset's warning on pictures none of its declared splits names, counted over
    every run's rejects."""
    left_out = sorted(
        entry["path"]
        for entry in map(json.loads, reject_lines)
        if entry.get("reason") == reasons.UNDECLARED_SPLIT.code
    )
    return undeclared_split_warning(left_out) if left_out else None
