"""The kinds of labelled pictures a run converts, each declared once: what `--task` offers and
says, which annotation formats it reads (the first found from the layout when `--annotations` is
left out), which key groups of `keys.KeyTable` its records hold, and its docs page.

What reads it: the `--task` and `--annotations` options' choices, help and docs table
(`plan.annotations.options`), the check that a format belongs to the task, the formats a
layout is searched for (`plan.annotations.load.find_kind`, `segmentation.KINDS`,
`captions.KINDS`), and the side files a task's run writes (`pipeline`). The stages still carry
one branch for each kind of label the key groups name (objects, a class mask, captions,
keypoints): a new task made of these is a declaration here and its source readers; a new kind
of label is a branch in each stage as well.

Plain data: no stage imported.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # a name for the type checker only: nothing imported when the module runs
    from beam_tfrecord.elements import AnnotationKind

__all__ = [
    "ANNOTATION_FORMATS",
    "CAPTION_FORMATS",
    "KEYPOINT_FORMATS",
    "SEGMENTATION_FORMATS",
    "TASKS",
    "TASK_NAMES",
    "Task",
    "task",
    "task_of_format",
]


@dataclass(frozen=True)
class Task:
    """One kind of labelled picture.

    Args:
      name: the `--task` value.
      help: what its labels are, in a line for `--help` and the docs.
      formats: the `--annotations` formats it reads (none: labels from folders, names or a
        manifest); the first is looked for first when `--annotations` is left out.
      kinds: its kinds of label (`labels.KINDS`' names), in the order its stages take them.
      docs: its page under docs/.
    """

    name: str
    help: str
    formats: tuple[AnnotationKind, ...]
    kinds: tuple[str, ...]
    docs: str


SEGMENTATION_FORMATS: tuple[AnnotationKind, ...] = ("voc", "cityscapes", "ade20k", "folders")
CAPTION_FORMATS: tuple[AnnotationKind, ...] = ("coco", "pairs")
KEYPOINT_FORMATS: tuple[AnnotationKind, ...] = ("coco", "yolo")

TASKS: dict[str, Task] = {
    task.name: task
    for task in (
        Task(
            name="classification",
            help="one class per picture, from its folder, its name or a manifest",
            formats=(),
            kinds=("class",),
            docs="usage.md",
        ),
        Task(
            name="detection",
            help="boxes (and instance masks) per picture, from COCO, Pascal VOC or YOLO annotations",
            formats=("coco", "voc", "yolo"),
            kinds=("objects",),
            docs="detection.md",
        ),
        Task(
            name="segmentation",
            help="a class id per pixel, from a mask PNG per picture (Pascal VOC, Cityscapes, ADE20K "
            "or a pair of folders)",
            formats=SEGMENTATION_FORMATS,
            kinds=("class_mask",),
            docs="segmentation.md",
        ),
        Task(
            name="keypoints",
            help="boxes with each object's keypoints (COCO keypoints files, Ultralytics pose labels)",
            formats=KEYPOINT_FORMATS,
            kinds=("objects", "keypoints"),
            docs="keypoints.md",
        ),
        Task(
            name="captions",
            help="the sentences that describe each picture, from COCO captions files or image, caption "
            "pairs (CSV, TSV, JSONL, Flickr8k's captions.txt)",
            formats=CAPTION_FORMATS,
            kinds=("captions",),
            docs="captions.md",
        ),
    )
}
TASK_NAMES: tuple[str, ...] = tuple(TASKS)
# Every format some task reads, once each (the `--annotations` choices).
ANNOTATION_FORMATS: tuple[str, ...] = tuple(dict.fromkeys(f for t in TASKS.values() for f in t.formats))


def task(name: str) -> Task:
    try:
        return TASKS[name]
    except KeyError:
        raise ValueError(f"task must be one of {', '.join(TASK_NAMES)}, not {name!r}") from None


def task_of_format(kind: str) -> Task:
    """The task a format given without `--task` stands for: detection for COCO, VOC and YOLO (as
    before tasks were named), segmentation for the formats only segmentation reads."""
    for found in TASKS.values():
        if kind in found.formats:
            return found
    raise ValueError(f"no task reads {kind!r} annotations")
