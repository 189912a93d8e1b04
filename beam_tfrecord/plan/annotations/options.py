"""A detection or segmentation run's settings: where the objects come from and what is kept."""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal, get_args

from beam_tfrecord import tasks
from beam_tfrecord.config_base import Config, ConfigError, check_choice, documented, setting
from beam_tfrecord.elements import MAX_MASK_VALUE
from beam_tfrecord.labels import KINDS, of_task
from beam_tfrecord.plan.annotations.paths import AnnotationPath, parse_annotation_paths
from beam_tfrecord.plan.sources import registry
from beam_tfrecord.plan.sources.base import SourceError

__all__ = ["ANNOTATION_FORMATS", "ANNOTATION_TASKS", "UNANNOTATED", "AnnotationConfig"]

# Every format's `--annotations` value, in the registry's order (plan.sources.registry).
ANNOTATION_FORMATS: tuple[str, ...] = registry.names()
UnannotatedName = Literal["keep", "drop"]
UNANNOTATED: tuple[str, ...] = get_args(UnannotatedName)
# The tasks whose labels come from annotation files (classification's come from the listing).
ANNOTATION_TASKS: tuple[str, ...] = registry.annotation_tasks()


def _either(names: Sequence[str], last: str = "or") -> str:
    """`a, b or c`."""
    return f"{', '.join(names[:-1])} {last} {names[-1]}" if len(names) > 1 else "".join(names)


# The formats of the first task that reads annotations (detection), which a run given neither
# `--task` nor `--annotations` is told of.
_FIRST_TASK = next(
    name for name in tasks.TASK_NAMES if registry.reading(name) and not tasks.task(name).listed_labels
)
_DETECTION_FORMATS = tuple(name for name in ANNOTATION_FORMATS if registry.task_of(name) == _FIRST_TASK)


@documented
@dataclass(frozen=True)
class AnnotationConfig(Config):
    """Labels from an annotation source, instead of one label per image: boxes (and masks) for
    detection, a class-id mask per picture for segmentation.
    """

    format: str | None = setting(
        None,
        details="the format, by task: "
        + "; ".join(
            f"{t.name} {', '.join(f'`{f.name}`' for f in registry.reading(t.name))}"
            for t in tasks.TASKS.values()
            if t.name in ANNOTATION_TASKS
        )
        + "; left out, found from the layout",
        default_doc="none",
        option="annotations",
        group="annotations",
        label="Annotations",
        record="annotations",
        choices=ANNOTATION_FORMATS,
        help="the annotations' format: "
        + "; ".join(f"{', '.join(f.name for f in registry.reading(t))} ({t})" for t in ANNOTATION_TASKS),
    )
    path: str | None = setting(
        None,
        shapes_records=False,
        details="COCO files (`a.json,b.json` or `train=a.json,validation=b.json`), VOC's XML folder or "
        "file, YOLO's `data.yaml`, `classes.txt` or labels folder "
        "([detection](detection.md#where-the-annotations-are-found))",
        default_doc="the format's place",
        option="annotations_path",
        group="annotations",
        label="Annotations path",
        record="annotations_path",
        help="where they are when not in the format's place: COCO files (a.json,b.json or "
        "train=a.json,validation=b.json), VOC's XML folder, YOLO's data.yaml or labels folder",
    )
    masks: bool = setting(
        False,
        details="a PNG mask per object (COCO polygons and RLE, YOLO segmentation lines), else its filled "
        "box ([detection](detection.md#masks))",
        group="annotations",
        label="Instance masks",
        value_type=bool,
        help="store a PNG mask per object (COCO polygons and RLE, YOLO segmentation)",
    )
    unannotated: UnannotatedName = setting(
        "keep",
        details="a picture no annotation names: `keep` it (a negative, counted) or `drop` it (an "
        "`unannotated` reject)",
        group="annotations",
        label="Unannotated images",
        choices=UNANNOTATED,
        help="an image no annotation names: keep it as a negative, or drop it (a reject)",
    )
    label_map: str | None = setting(
        None,
        details="a `label_map.pbtxt` or a run's `labels.txt` whose names and ids (gaps allowed) are kept; "
        "not with `--class_names` "
        "([detection](detection.md#class-ids-and-label-maps))",
        default_doc="the classes found",
        group="annotations",
        label="Label map",
        help="an existing label_map.pbtxt or labels.txt whose class names and ids are kept",
    )
    allow_unmatched_annotations: bool = setting(
        False,
        shapes_records=False,
        details="go on, with a warning, when most pictures or most entries find no partner "
        "([detection](detection.md#when-pictures-and-annotations-do-not-match))",
        group="annotations",
        label="Allow unmatched annotations",
        value_type=bool,
        help="go on when most pictures have no annotation or most annotations name no picture (a warning)",
    )
    # Not an option: the command sets it off when --splits is given.
    declared_splits: bool = setting(
        True,
        option=None,
        shapes_records=False,
        help="keep the splits the dataset declares (data.yaml, VOC's ImageSets, COCO files named by "
        "split) instead of `splits`' fractions; the command sets it off when `--splits` is given",
    )
    task: str | None = setting(
        None,
        details="what the labels are: "
        + ", ".join(f"[`{t.name}`]({t.docs})" for t in tasks.TASKS.values())
        + f"; alone, `--annotations` means detection for {_either(_DETECTION_FORMATS, 'and')}",
        default_doc="classification, or the format's",
        group="annotations",
        label="Task",
        choices=tasks.TASK_NAMES,
        record_default=False,
        help=f"{', '.join(tasks.TASK_NAMES)} (default classification; with --annotations, its format's)",
    )
    ignore_value: int = setting(
        255,
        details='segmentation: the "not labelled" mask value, above the last class id, up to 65535 '
        "(16-bit masks past 255); also a pad's margins "
        "([segmentation](segmentation.md#how-mask-values-become-class-ids))",
        group="annotations",
        label="Ignore value",
        value_type=int,
        minimum=0,
        record_default=False,
        help="segmentation: the mask value meaning not labelled (and a pad's margins)",
    )
    train_ids: bool = setting(
        False,
        details="Cityscapes: the 19 training classes (`*_labelTrainIds.png`, else mapped), 255 ignored, "
        "not the 34 label ids",
        group="annotations",
        label="Cityscapes train ids",
        value_type=bool,
        record_default=False,
        help="segmentation, Cityscapes: the 19 training classes instead of the 34 label ids",
    )

    def __post_init__(self) -> None:
        if self.task is not None:
            check_choice("task", self.task, tasks.TASK_NAMES)
        if self.format is not None:
            check_choice("annotations", self.format, registry.names())
        task = self.task
        if task is None:
            if self.format is None:
                raise ConfigError("annotations", f"is needed: {_either(_DETECTION_FORMATS)} (or give --task)")
            task = registry.task_of(self.format)
            object.__setattr__(self, "task", task)
        # Classification without a format that reads it: SourceConfig then holds no annotation options.
        if not registry.reading(task) or (self.format is None and tasks.task(task).listed_labels):
            if self.format is not None:
                raise ConfigError(
                    "task",
                    f"{task} takes one label per picture, not annotations: leave annotations out",
                )
            return
        if self.format is not None and not registry.named(self.format).reads(task):
            formats = ", ".join(f.name for f in registry.reading(task))
            raise ConfigError("annotations", f"{self.format} is not a {task} format: {formats}")
        check_choice("unannotated", self.unannotated, UNANNOTATED)
        if not 0 <= self.ignore_value <= MAX_MASK_VALUE:
            raise ConfigError(
                "ignore_value",
                f"must be 0 to {MAX_MASK_VALUE} (masks are stored as 16-bit PNGs at most), not "
                f"{self.ignore_value}",
            )
        defaults = {f.name: f.default for f in dataclasses.fields(self)}
        run = {kind.name for kind in of_task(task)}
        for kind in KINDS.values():  # an option of one kind of label, given where it has no use
            for name in kind.options:
                refused = kind.refusal(name, run) if getattr(self, name) != defaults[name] else None
                if refused:
                    raise ConfigError(name, refused)
        try:
            self.paths()
        except SourceError as error:
            raise ConfigError(error.field, error.detail) from None

    def paths(self) -> tuple[AnnotationPath, ...]:
        return parse_annotation_paths(self.path)

    @property
    def split_names(self) -> tuple[str, ...]:
        """The splits the annotation files are given for (`train=a.json,...`), in order."""
        return tuple(dict.fromkeys(p.split for p in self.paths() if p.split is not None))
