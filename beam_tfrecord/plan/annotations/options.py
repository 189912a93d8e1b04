"""A detection or segmentation run's settings: where the objects come from and what is kept."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal, get_args

from beam_tfrecord.config_base import Config, ConfigError, check_choice, setting
from beam_tfrecord.elements import AnnotationKind
from beam_tfrecord.plan.annotations.paths import AnnotationPath, parse_annotation_paths

__all__ = ["ANNOTATION_KINDS", "UNANNOTATED", "AnnotationOptions"]

ANNOTATION_KINDS: tuple[str, ...] = get_args(AnnotationKind)
UnannotatedName = Literal["keep", "drop"]
UNANNOTATED: tuple[str, ...] = get_args(UnannotatedName)


@dataclass(frozen=True)
class AnnotationOptions(Config):
    """Boxes (and masks) from an annotation source, instead of one label per image.

    Args:
      kind: coco (instances JSON files), voc (one XML per image) or yolo (one TXT per image).
      path: where the annotations are when not in the format's standard place: COCO's instances
        files (`a.json,b.json`, or per split: `train=a.json,validation=b.json`), VOC's folder of
        XML files (or one XML), YOLO's data.yaml, classes.txt or labels folder; local or gs://.
        Left out, each format's own place is found from the input, or beside it when the input is
        the dataset's images folder or one split's (plan.annotations.locate).
      masks: store one PNG mask per object (COCO polygons and RLE, YOLO's segmentation lines;
        an object without one gets its filled box).
      unannotated: an image no annotation names: keep it as a negative (no objects, counted), or
        drop it (an `unannotated` reject).
      label_map: an existing label_map.pbtxt (the Object Detection API's) or labels.txt (this
        project's) whose names and ids the run keeps (`label_map.read_label_map`); objects of
        classes it lacks are dropped `unknown_category`. Local or gs://.
      allow_unmatched_annotations: go on when most pictures have no annotation or most
        annotation entries name no picture (the run then ends with a warning); without it such a
        run fails at plan time. A run where nothing matches always fails.
      declared_splits: keep the splits the dataset declares (data.yaml, VOC's ImageSets, COCO
        files named by split) instead of `splits`' fractions; the command sets it off when
        `--splits` is given.
    """

    kind: AnnotationKind = setting(
        details="`coco`, `voc` or `yolo`: boxes (and masks) per image from those annotations instead of one "
        "label per image: detection records with the Object Detection API's keys (`tfds` schema "
        "only); see [Detection and segmentation](detection.md)",
        default_doc="none",
        option="annotations",
        group="annotations",
        label="Annotations",
        record="annotations",
        choices=ANNOTATION_KINDS,
        help="boxes (and masks) per image from coco (instances JSON), voc (XML) or yolo (TXT) files",
    )
    path: str | None = setting(
        None,
        details="COCO instances files (`a.json,b.json`, or per split `train=a.json,validation=b.json`; "
        "default: `instances_*.json` under `--input` or beside it), VOC's folder of XML files or one "
        "XML (default: `Annotations/` beside `JPEGImages/`, `annotations/` beside `images/`, or beside "
        "each image), YOLO's `data.yaml`, `classes.txt` or labels folder (default: Ultralytics' "
        "`images/` -> `labels/`); local or `gs://`",
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
        details="store a PNG mask per object (COCO polygons and RLE, YOLO segmentation lines; an object "
        "without one gets its filled box)",
        group="annotations",
        label="Instance masks",
        kind=bool,
        help="store a PNG mask per object (COCO polygons and RLE, YOLO segmentation)",
    )
    unannotated: UnannotatedName = setting(
        "keep",
        details="an image no annotation names: `keep` it as a negative (counted), or `drop` it (an "
        "`unannotated` reject)",
        group="annotations",
        label="Unannotated images",
        choices=UNANNOTATED,
        help="an image no annotation names: keep it as a negative, or drop it (a reject)",
    )
    label_map: str | None = setting(
        None,
        details="an existing Object Detection API `label_map.pbtxt`, or a run's `labels.txt`, whose class "
        "names and ids the records keep (ids may have gaps); objects of other classes are dropped as "
        "`unknown_category`; not with `--class_names`; local or `gs://`",
        default_doc="the classes found",
        group="annotations",
        label="Label map",
        help="an existing label_map.pbtxt or labels.txt whose class names and ids are kept",
    )
    allow_unmatched_annotations: bool = setting(
        False,
        details="go on when most pictures have no annotation or most annotation entries name no picture "
        "(the run ends with a warning that gives the counts); without it such a run stops before the "
        "pipeline (exit 2). A run where no picture matches any annotation always stops",
        group="annotations",
        label="Allow unmatched annotations",
        kind=bool,
        help="go on when most pictures have no annotation or most annotations name no picture (a warning)",
    )
    # Not an option: the command sets it off when --splits is given.
    declared_splits: bool = setting(True, option=None)

    def __post_init__(self) -> None:
        check_choice("annotations", self.kind, ANNOTATION_KINDS)
        check_choice("unannotated", self.unannotated, UNANNOTATED)
        try:
            self.paths()
        except ValueError as error:
            raise ConfigError("annotations_path", str(error).removeprefix("annotations_path ")) from None

    def paths(self) -> tuple[AnnotationPath, ...]:
        return parse_annotation_paths(self.path)

    @property
    def split_names(self) -> tuple[str, ...]:
        """The splits the annotation files are given for (`train=a.json,...`), in order."""
        return tuple(dict.fromkeys(p.split for p in self.paths() if p.split is not None))
