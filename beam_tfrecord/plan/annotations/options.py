"""A detection or segmentation run's settings: where the objects come from and what is kept."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal, get_args

from beam_tfrecord.config_base import ConfigError, check_choice
from beam_tfrecord.elements import AnnotationKind
from beam_tfrecord.plan.annotations.paths import AnnotationPath, parse_annotation_paths

__all__ = ["ANNOTATION_KINDS", "UNANNOTATED", "AnnotationOptions"]

ANNOTATION_KINDS: tuple[str, ...] = get_args(AnnotationKind)
UnannotatedName = Literal["keep", "drop"]
UNANNOTATED: tuple[str, ...] = get_args(UnannotatedName)


@dataclass(frozen=True)
class AnnotationOptions:
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
      allow_unmatched_annotations: go on when most pictures have no annotation or most
        annotation entries name no picture (the run then ends with a warning); without it such a
        run fails at plan time. A run where nothing matches always fails.
      declared_splits: keep the splits the dataset declares (data.yaml, VOC's ImageSets, COCO
        files named by split) instead of `splits`' fractions; the command sets it off when
        `--splits` is given.
    """

    kind: AnnotationKind
    path: str | None = None
    masks: bool = False
    unannotated: UnannotatedName = "keep"
    allow_unmatched_annotations: bool = False
    declared_splits: bool = True

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

    def summary_fields(self) -> dict[str, Any]:
        return {
            "annotations": self.kind,
            "annotations_path": self.path,
            "masks": self.masks,
            "unannotated": self.unannotated,
            "allow_unmatched_annotations": self.allow_unmatched_annotations,
        }
