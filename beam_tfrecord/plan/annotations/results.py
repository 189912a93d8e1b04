"""What loading an annotation source gives the planner: every listed image's annotations, and
every problem named with a reason, so nothing is lost without a word.

Four kinds of problem, each with a short reason code (declared in `beam_tfrecord.reasons`) and a
detail that names the annotation file and the line or object:

- `ImageProblem`: an image that cannot be annotated truthfully (its annotation file is malformed
  or unsafe, two entries claim it, or an entry could be for it or another). It becomes the image's
  reject line; nothing else is rejected for it.
- `ObjectNote` in `dropped`: an object left out of its image (an unknown category, values that are
  not a box, a box of zero area); the image is kept with its other objects.
- `ObjectNote` in `changed`: an object kept but not as written (a malformed mask left out, its box
  kept), for `changes.jsonl`.
- `UnmatchedEntry`: an annotation entry that names no listed image (a missing file, an ambiguous
  name, an unknown image id), listed in a file beside the rejects.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import asdict, dataclass, field

from beam_tfrecord.elements import ImageAnnotations, MaskRule

__all__ = [
    "AnnotationSet",
    "DeclaredSplits",
    "ImageProblem",
    "ObjectNote",
    "SourceError",
    "UnmatchedEntry",
]


class SourceError(ValueError):
    """What no picture can be planned without, as a value: the setting it concerns (`field`: an
    `AnnotationConfig` field's option, `annotations_path`, `label_map`, `class_names`,
    `ignore_value`; `annotations` where the format's own files are at fault), the file it
    concerns where there is one, and the detail, to be read after the setting's name.

    Args:
      detail: what is wrong, in one line.
      field: the setting at fault.
      file: the annotation file (or folder) it concerns, as the detail names it ("" for none).
    """

    def __init__(self, detail: str, *, field: str = "annotations", file: str = "") -> None:
        super().__init__(f"{field} {detail}")
        self.detail = detail
        self.field = field
        self.file = file


@dataclass(frozen=True)
class DeclaredSplits:
    """Where the splits came from, their names in order, and each picture's (input relpaths);
    `kept_names`: the names are the dataset's own (`val`, `train_aug`), as `keep_split_names`
    asks, not the readers' train, validation, test."""

    source: str
    names: tuple[str, ...]
    split_of: Mapping[str, str] = field(default_factory=dict)
    conflicts: Mapping[str, str] = field(default_factory=dict)  # relpath -> which declarations
    kept_names: bool = False
    also: Mapping[str, tuple[str, ...]] = field(default_factory=dict)  # relpath -> its other splits


@dataclass(frozen=True, slots=True, order=True)
class ImageProblem:
    """A listed image rejected for its annotations; `objects` is how many objects the source
    gave it, where known (0 for a file that could not be parsed)."""

    relpath: str
    reason: str
    detail: str
    objects: int = 0


@dataclass(frozen=True, slots=True, order=True)
class ObjectNote:
    """An object of the image at `relpath` dropped or changed at plan time; the detail starts
    with the object's source reference (`a.json#annotation 42`, `a.xml#object 3`, `a.txt:7`)."""

    relpath: str
    reason: str
    detail: str


@dataclass(frozen=True, slots=True)
class UnmatchedEntry:
    """An annotation entry that annotates no listed image.

    Args:
      annotation: where it is: `instances.json#image 7`, `Annotations/x.xml`, `labels/x.txt`.
      name: the file it names, as written (COCO's `file_name`, VOC's `filename`), or the image
        path the annotation file's place implies.
      reason: a `reasons` unmatched code (`missing_image`, ...).
      detail: what a user needs to fix it.
      objects: how many objects it holds (so annotated objects can be accounted for).
    """

    annotation: str
    name: str
    reason: str
    detail: str
    objects: int = 0

    def to_json(self) -> str:
        return json.dumps(asdict(self), ensure_ascii=False, sort_keys=True)


@dataclass(frozen=True)
class AnnotationSet:
    """Everything an annotation source says about a listing.

    Args:
      format: the annotations' format, its `--annotations` value (plan.sources.registry).
      class_names: the label order (label id = position): COCO's category names by category id;
        YOLO's `names` by class index; Pascal VOC's sorted names; or the class names given.
      images: every listed image that is not rejected here -> its annotations (an image the
        source says nothing of has no objects and is also in `unannotated`).
      unannotated: listed images the source does not mention (no entry, no label file).
      sources: listed annotation files (never inputs) -> what each is, for a `skipped` line.
      problems: listed images rejected for their annotations, sorted by path.
      unmatched: annotation entries that name no listed image, in the sources' order.
      dropped, changed: objects left out or kept changed at plan time, in listing order.
      split_names: the splits annotation files were given for (COCO `train=a.json,...`), in the
        order given; each image's split is `images[relpath].split`.
      found_at: where the annotations were found, in words (the run's first lines say it).
      found_instead: other formats' annotation files under the input, as a hint for a run that
        matched nothing ("" when none).
      warnings: what the run should end by saying (a poor match allowed on purpose).
      declared: the splits the dataset declares for itself (data.yaml, ImageSets, COCO file
        names), which a run without `splits` keeps.
      mask_rule: a segmentation run's rule for reading its mask files (None: a detection run).
      looked_for: where a source that found nothing looked, in words ("": the format's usual place).
      task: what the annotations label (`tasks.TASKS`): detection, segmentation, captions or
        keypoints.
      keypoint_names: a keypoints run's: class name -> its keypoint names, in order.
      skeletons: a keypoints run's: class name -> its skeleton, pairs of 0-based point indices.
      palette: a segmentation run's colour of each class id on the contact sheet.
      numbered_by: where the class ids come from, in words, when the format numbers its classes
        (COCO's category ids, YOLO's class indices; "": names in order), for an append's refusal.
    """

    format: str
    class_names: tuple[str, ...]
    images: Mapping[str, ImageAnnotations]
    unannotated: frozenset[str] = frozenset()
    sources: Mapping[str, str] = field(default_factory=dict)
    problems: tuple[ImageProblem, ...] = ()
    unmatched: tuple[UnmatchedEntry, ...] = ()
    dropped: tuple[ObjectNote, ...] = ()
    changed: tuple[ObjectNote, ...] = ()
    split_names: tuple[str, ...] = ()
    found_at: str = ""
    found_instead: str = ""
    warnings: tuple[str, ...] = ()
    declared: DeclaredSplits | None = None
    mask_rule: MaskRule | None = None
    looked_for: str = ""
    task: str = "detection"
    keypoint_names: Mapping[str, tuple[str, ...]] = field(default_factory=dict)
    skeletons: Mapping[str, tuple[tuple[int, int], ...]] = field(default_factory=dict)
    palette: tuple[tuple[int, int, int], ...] = ()
    numbered_by: str = ""

    def class_ids(self) -> dict[str, int]:
        """Class name -> class id, counting from 0 in `class_names` order."""
        return {name: index for index, name in enumerate(self.class_names)}

    def split_of(self, relpath: str) -> str | None:
        """The split the source gives the image, or None (hashed as any other run)."""
        found = self.images.get(relpath)
        return found.split if found is not None else None

    @property
    def object_count(self) -> int:
        """Objects kept on listed images."""
        return sum(len(found.objects) for found in self.images.values())

    @property
    def annotated_objects(self) -> int:
        """Every object the source gave: kept + dropped + on rejected images + on unmatched
        entries (objects of an annotation file that could not be parsed are not known)."""
        return (
            self.object_count
            + len(self.dropped)
            + sum(p.objects for p in self.problems)
            + sum(u.objects for u in self.unmatched)
        )
