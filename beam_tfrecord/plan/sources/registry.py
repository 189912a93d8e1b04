"""The one list of annotation formats, and every question asked of it: the `--annotations`
choices (`names`), the format a value names (`named`), the formats a task reads (`reading`, in
the order a layout is searched), the task a format given alone stands for (`task_of`), the
layout search (`find`), and what a listing a classification run would take its folders for
holds instead (`annotated_layout`).

The order of `FORMATS` is each task's order of formats: the `--annotations` help and docs list
them so, and the layout search asks them so (the first that is certain wins; else the one with
the most files, the first on a tie).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable, Mapping, Sequence

from beam_tfrecord import tasks
from beam_tfrecord.plan.annotations.catalog import partition
from beam_tfrecord.plan.annotations.locate import input_base, join, listed_under, parents
from beam_tfrecord.plan.annotations.matching import MatchCounts
from beam_tfrecord.plan.annotations.paths import AnnotationPath
from beam_tfrecord.plan.annotations.results import AnnotationSet
from beam_tfrecord.plan.listing import InputFile
from beam_tfrecord.plan.sources import (
    ade20k,
    cityscapes,
    coco,
    cvat,
    folders,
    label_studio,
    labelme,
    pairs,
    voc,
    yolo,
)
from beam_tfrecord.plan.sources.base import CERTAIN, Listing, LoadRequest, SourceError, SourceFormat

__all__ = [
    "FORMATS",
    "annotated_layout",
    "annotation_tasks",
    "find",
    "found_instead",
    "load",
    "named",
    "names",
    "reading",
    "task_of",
]

# CVAT before VOC: both keep `.xml` files, and a CVAT export's one annotations.xml is counted as
# CVAT's (by its name), never as a VOC XML, by the guard of a classification run and the hints.
FORMATS: tuple[SourceFormat, ...] = (
    coco.FORMAT,
    cvat.FORMAT,
    voc.FORMAT,
    yolo.FORMAT,
    label_studio.FORMAT,
    labelme.FORMAT,
    cityscapes.FORMAT,
    ade20k.FORMAT,
    folders.FORMAT,
    pairs.FORMAT,
)

# How the layout search says it found nothing, for the tasks whose formats are found by their
# layout rather than counted file by file ({looked}: each format's `looked_for`, in order).
_NOTHING_FOUND = {
    "segmentation": "no segmentation layout found under --input (looked for {looked}): name the format "
    "with --annotations",
    "captions": "no captions found (looked for {looked}): name the file with --annotations_path",
}
_COUNTED = "no {task} annotations found under --input ({files}): name the format with --annotations {names}"
_CAPTIONS_FILE = "a captions file (captions_*.json, captions.txt): pass --task captions"


def names() -> tuple[str, ...]:
    """Every format's `--annotations` value, in the registry's order."""
    return tuple(fmt.name for fmt in FORMATS)


def named(name: str) -> SourceFormat:
    """The format an `--annotations` value names; SourceError for one no format has."""
    for fmt in FORMATS:
        if fmt.name == name:
            return fmt
    raise SourceError(f"must be one of {', '.join(names())}, not {name!r}")


def reading(task: str) -> tuple[SourceFormat, ...]:
    """The formats that read `task`, in the order a layout is searched for."""
    return tuple(fmt for fmt in FORMATS if fmt.reads(task))


def annotation_tasks() -> tuple[str, ...]:
    """The tasks whose labels come from annotation files, in `tasks.TASKS` order."""
    return tuple(name for name in tasks.TASK_NAMES if reading(name))


def task_of(name: str) -> str:
    """The task a format given without `--task` stands for: its first in `tasks.TASKS` order
    (detection for COCO, VOC and YOLO, as before tasks were named)."""
    fmt = named(name)
    read = [task for task in tasks.TASK_NAMES if fmt.reads(task)]
    return next((task for task in read if not tasks.task(task).listed_labels), read[0])


def find(task: str, files: Sequence[InputFile], paths: Sequence[AnnotationPath] = ()) -> SourceFormat:
    """The format a layout shows, for a run given `--task` without `--annotations`: the first
    whose score is `CERTAIN`, else the highest (the first on a tie). SourceError naming what was
    looked for when none scores."""
    listing = Listing(files, tuple(paths))
    best, best_score = None, 0.0
    for fmt in reading(task):
        score = fmt.score(task, listing)
        if score == CERTAIN:
            return fmt
        if score > best_score:
            best, best_score = fmt, score
    if best is not None:
        return best
    formats = reading(task)
    if task in _NOTHING_FOUND:
        looked = "; ".join(fmt.looked_for[task] for fmt in formats)
        raise SourceError(_NOTHING_FOUND[task].format(looked=looked))
    choices = [fmt.name for fmt in formats]
    raise SourceError(
        _COUNTED.format(
            task=task,
            files=", ".join(fmt.searched_as[task] for fmt in formats),
            names=f"{', '.join(choices[:-1])} or {choices[-1]}" if len(choices) > 1 else choices[0],
        )
    )


def annotated_layout(files: Sequence[InputFile]) -> str | None:
    """What a tree that a classification run would take its folders for holds instead, and the
    option to pass, in words (None: no known layout of another task): a segmentation layout whose
    masks the listing holds (VOC's SegmentationClass/, Cityscapes' gtFine/, ...), COCO instances
    files, YOLO labels, VOC XMLs beside as many pictures, a panoptic layout, or a captions file."""
    listing = Listing(files, outside=False)
    for fmt in reading("segmentation"):
        if fmt.score("segmentation", listing):
            looked = fmt.looked_for["segmentation"]
            return f"a {fmt.title} segmentation layout ({looked}): pass --task segmentation"
    # The few files whose extension an annotation or captions file has, picked by suffix alone
    # (a class-folder tree of a million JPEGs pays one `endswith` each).
    suffixes = tuple(dict.fromkeys(suffix for fmt in FORMATS for suffix in fmt.suffixes))
    picked = [f for f in files if f.relpath.lower().endswith(suffixes)]
    texts = [f.relpath for f in picked]
    # A format whose files are told by their content (a JSON export), certain from those few.
    annotated = Listing(picked, outside=False)
    for fmt in reading("detection"):
        if fmt.score("detection", annotated) == CERTAIN:
            return f"{fmt.title} annotations ({fmt.looked_for['detection']}): pass --annotations {fmt.name}"
    counts = _counts(texts)
    pictures = len(files) - len(texts)
    if any(named(name).evident(count, pictures) for name, count in counts.items()):
        name = max(counts, key=lambda name: counts[name])
        return f"{counts[name]} {named(name).layout_as}: pass --annotations {name}"
    for fmt in reading("panoptic"):
        if fmt.score("panoptic", listing):
            return f"a {fmt.title} panoptic layout ({fmt.looked_for['panoptic']}): pass --task panoptic"
    if any(fmt.claims(relpath, "captions") for fmt in reading("captions") for relpath in texts):
        return _CAPTIONS_FILE
    return _above_input(files, suffixes)


def _above_input(files: Sequence[InputFile], suffixes: tuple[str, ...]) -> str | None:
    """An export kept above `--input`, as a run pointed at its images folder sees it (CVAT's
    annotations.xml beside images/, a Label Studio export beside its pictures' folder): the files
    of the input's two parent folders (theirs alone, never the tree under them, and never the
    file system's root) that a format names as its export (`SourceFormat.kept_above`)."""
    if not files:
        return None
    for folder in parents(input_base(files))[:2]:
        if not folder.strip("/"):
            continue
        for found in listed_under(join(folder, "*"), suffixes):  # one listing a folder
            name = found.relpath
            for fmt in reading("detection"):
                if "/" not in name and fmt.kept_above(name):
                    above = f"pictures whose {fmt.title} annotations are above it ({found.path})"
                    return f"{above}: pass --annotations {fmt.name}"
    return None


def load(fmt: SourceFormat, request: LoadRequest) -> AnnotationSet:
    """`fmt`'s annotations for `request`; a format of per-picture objects files that matched no
    picture gets the hint of the other such formats' files under the input, which the run's
    refusal shows (looked for only then: the listing is not partitioned a second time)."""
    found = fmt.load(request)
    if not fmt.reads("detection") or MatchCounts.of(found).matched:
        return found
    hint = found_instead(partition(request.files).annotation_files, fmt.name)
    return dataclasses.replace(found, found_instead=hint)


def found_instead(annotation_files: Mapping[str, object], name: str) -> str:
    """What other formats' annotation files are under the input, as a hint (or "")."""
    others = [
        f"{count} {named(other).instead_as}: pass --annotations {other}"
        for other, count in _counts(annotation_files).items()
        if count and other != name
    ]
    return "; found instead " + ", ".join(others) if others else ""


def _counts(relpaths: Iterable[str]) -> dict[str, int]:
    """How many of the files look like each detection format's, file by file (`claims`)."""
    counted = reading("detection")
    counts = {fmt.name: 0 for fmt in counted}
    for relpath in relpaths:
        for fmt in counted:
            if fmt.claims(relpath, "detection"):
                counts[fmt.name] += 1
                break
    return counts
