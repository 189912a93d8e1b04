"""The kinds of labelled pictures a run converts, each declared once: what `--task` offers, which
annotation formats it reads, which key groups its records hold, how its labels move when the
picture moves, which summary section counts them, what the readers return beside the image and
how the contact sheet draws them.

Every stage reads a task's facts from here rather than keeping its own list of tasks, as TFDS's
`FeaturesDict` drives encode, decode and spec from one object: the option's choices and help
(`plan.annotations.options`), the formats the planner accepts and finds (`plan.annotations.load`),
the keys (`keys.record_keys`, through `RecordLayout`), the readers' target (`read.tf_data`) and the
drawing (`read.pictures`). A new task is a new `Task` here plus its source readers; the ways labels
move (`Moves`) and are drawn (`Drawing`) are the few the stages implement.

Plain data: no stage imported.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

__all__ = [
    "CAPTION_FORMATS",
    "KEYPOINT_FORMATS",
    "SEGMENTATION_FORMATS",
    "TASKS",
    "TASK_NAMES",
    "Drawing",
    "Moves",
    "Task",
    "task",
    "task_of_format",
]

# How a task's labels follow the picture when it is turned or resized: not at all (a class, a
# caption), as boxes (and instance masks) do, as a per-pixel map does (nearest neighbour, margins
# of the ignore value), or as points do.
Moves = Literal["nothing", "boxes", "pixels", "points"]
# What the contact sheet draws over a picture.
Drawing = Literal["class_name", "boxes", "class_mask", "points", "captions"]


@dataclass(frozen=True)
class Task:
    """One kind of labelled picture.

    Args:
      name: the `--task` value.
      help: one line for `--help`.
      formats: the `--annotations` formats it reads (none: labels from folders, names or a
        manifest); the first is found from the layout when `--annotations` is left out.
      key_groups: the groups of `keys.KeyTable` its records hold beside the image's keys.
      moves: how its labels follow the picture's geometry.
      summary: summary.json's section that counts its labels.
      reader: what `load_dataset` yields beside the image (`label`, `objects`, `mask`).
      drawing: what the contact sheet draws.
      docs: its page under docs/.
    """

    name: str
    help: str
    formats: tuple[str, ...]
    key_groups: tuple[str, ...]
    moves: Moves
    summary: str
    reader: str
    drawing: Drawing
    docs: str


SEGMENTATION_FORMATS = ("voc", "cityscapes", "ade20k", "folders")
CAPTION_FORMATS = ("coco", "pairs")
KEYPOINT_FORMATS = ("coco", "yolo")

TASKS: dict[str, Task] = {
    task.name: task
    for task in (
        Task(
            name="classification",
            help="one class per picture, from its folder, its name or a manifest",
            formats=(),
            key_groups=("label",),
            moves="nothing",
            summary="classes",
            reader="label",
            drawing="class_name",
            docs="usage.md",
        ),
        Task(
            name="detection",
            help="boxes (and instance masks) per picture, from COCO, Pascal VOC or YOLO annotations",
            formats=("coco", "voc", "yolo"),
            key_groups=("objects",),
            moves="boxes",
            summary="objects",
            reader="objects",
            drawing="boxes",
            docs="detection.md",
        ),
        Task(
            name="segmentation",
            help="a class id per pixel, from a mask PNG per picture (Pascal VOC, Cityscapes, ADE20K "
            "or a pair of folders)",
            formats=SEGMENTATION_FORMATS,
            key_groups=("segmentation",),
            moves="pixels",
            summary="segmentation",
            reader="mask",
            drawing="class_mask",
            docs="segmentation.md",
        ),
        Task(
            name="keypoints",
            help="boxes with each object's keypoints (COCO keypoints files, Ultralytics pose labels)",
            formats=KEYPOINT_FORMATS,
            key_groups=("objects", "keypoints"),
            moves="points",
            summary="keypoints",
            reader="objects",
            drawing="points",
            docs="keypoints.md",
        ),
        Task(
            name="captions",
            help="the sentences that describe each picture, from COCO captions files or image, caption "
            "pairs (CSV, TSV, JSONL, Flickr8k's captions.txt)",
            formats=CAPTION_FORMATS,
            key_groups=("captions",),
            moves="nothing",
            summary="captions",
            reader="captions",
            drawing="captions",
            docs="captions.md",
        ),
    )
}
TASK_NAMES: tuple[str, ...] = tuple(TASKS)


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
