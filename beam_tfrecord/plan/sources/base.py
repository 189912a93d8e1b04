"""The one interface every annotation format keeps: what it is called, which tasks it reads, how
strongly a listing looks like it (for the layout search), how it loads into the common
`AnnotationSet`, and which settings it honours; and the one typed error a format raises.

    class Toy(SourceFormat):
        name, title, tasks = "toy", "Toy", ("detection",)
        help = "a toy.txt beside each picture"
        looked_for = {"detection": "a toy.txt beside each picture"}
        def score(self, task, listing): ...     # 0 .. CERTAIN
        def load(self, request): ...            # -> AnnotationSet

A format is one module of `plan.sources` with one such object (`FORMAT`), and one line of the
registry (`plan.sources.registry.FORMATS`); nothing else names it. The steps several formats
share are in plan.annotations: the objects formats' (`objects`), the segmentation layouts'
(`segmentation`) and the captions files' (`captions`).
"""

from __future__ import annotations

import math
from abc import ABC, abstractmethod
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from functools import cached_property
from typing import ClassVar

from beam_tfrecord import tasks
from beam_tfrecord.labels.keypoints import KEYPOINTS
from beam_tfrecord.plan.annotations.catalog import Catalog, partition
from beam_tfrecord.plan.annotations.paths import AnnotationPath
from beam_tfrecord.plan.annotations.results import AnnotationSet, SourceError
from beam_tfrecord.plan.listing import InputFile

__all__ = ["CERTAIN", "Listing", "LoadRequest", "SourceError", "SourceFormat"]

# A score that settles the search: the layout is this format's, no later one is asked.
CERTAIN = math.inf


@dataclass(frozen=True)
class LoadRequest:
    """What a run asks of its annotations' format (`SourceFormat.load`).

    Args:
      task: what the annotations label (`tasks.TASKS`): one the format reads.
      files: the listing (`plan.listing.list_inputs`), the whole dataset's in an append.
      paths: `annotations_path` as parsed (`plan.annotations.paths`); () for the format's place.
      class_names: a fixed label order (detection and keypoints: objects of other classes are
        dropped; segmentation: the names of the class ids).
      masks: detection: keep each object's mask (most of a COCO file's memory).
      label_map: detection and keypoints: a label map whose classes and ids are kept.
      ignore_value: segmentation: the mask value that means "not labelled".
      train_ids: segmentation, Cityscapes: the 19 training classes.
      declared_splits: the dataset's own splits are kept (no `splits` given).
      keep_split_names: those splits keep the names the dataset gives them (`val`, `train_aug`).
      overlapping_splits: and lists that repeat pictures of others are splits too.
    """

    task: str
    files: Sequence[InputFile]
    paths: tuple[AnnotationPath, ...] = ()
    class_names: tuple[str, ...] | None = None
    masks: bool = False
    label_map: str | None = None
    ignore_value: int = 255
    train_ids: bool = False
    declared_splits: bool = True
    keep_split_names: bool = False
    overlapping_splits: bool = False

    @property
    def keypoints(self) -> bool:
        """The task's objects keep their points (its kinds of label include the keypoints)."""
        return KEYPOINTS.name in tasks.task(self.task).kinds


@dataclass
class Listing:
    """The listing as the layout search shows it to every format: each view is made once, for
    all the formats asked (a million files are partitioned once, not once a format).

    Args:
      files: the listing.
      paths: `annotations_path` as parsed, when given.
      outside: whether files beside the input count (False: the listing alone, as the guard of
        a classification run asks, and nothing is listed beside it).
    """

    files: Sequence[InputFile]
    paths: tuple[AnnotationPath, ...] = ()
    outside: bool = True

    @cached_property
    def catalog(self) -> Catalog:
        """Candidate pictures and annotation files (by extension)."""
        return partition(self.files)

    @cached_property
    def folder_names(self) -> frozenset[str]:
        """Every folder name the relative paths hold (one pass over them)."""
        names: set[str] = set()
        for file in self.files:
            names.update(file.relpath.split("/")[:-1])
        return frozenset(names)


class SourceFormat(ABC):
    """One annotation format: a value of `--annotations`.

    Attributes:
      name: the `--annotations` value.
      title: its name in messages ("COCO", "Pascal VOC").
      tasks: the tasks it reads, in `tasks.TASKS`' words (any of them, classification included).
      help: what its files are, in a line (the docs' table of formats).
      looked_for: task -> where the format's tools keep its files, in words: what a run that
        found none says it looked for.
      options: the `AnnotationConfig` fields it honours beside `task` and `unannotated`.
      suffixes: the extensions of its annotation files (the guard of a classification run picks
        the few listed files with one, by suffix alone).
      searched_as, layout_as, instead_as: how messages name the files `claims` counts: where
        the layout search found none (by task), in what a classification run's listing holds
        instead, and in the hint of a run that matched nothing ("" or {}: a format with no
        such files).
    """

    name: ClassVar[str]
    title: ClassVar[str]
    tasks: ClassVar[tuple[str, ...]]
    help: ClassVar[str]
    looked_for: ClassVar[Mapping[str, str]]
    options: ClassVar[tuple[str, ...]] = ()
    suffixes: ClassVar[tuple[str, ...]] = ()
    searched_as: ClassVar[Mapping[str, str]] = {}
    layout_as: ClassVar[str] = ""
    instead_as: ClassVar[str] = ""

    def reads(self, task: str) -> bool:
        return task in self.tasks

    @abstractmethod
    def score(self, task: str, listing: Listing) -> float:
        """How strongly the listing (and any `annotations_path`) looks like this format's for
        `task`: 0 not at all, more the more of its files there are, `CERTAIN` for a layout that
        is without doubt this format's (the search asks no later format)."""

    @abstractmethod
    def load(self, request: LoadRequest) -> AnnotationSet:
        """Every listed picture's annotations for `request.task`, and every problem with its
        reason (`plan.annotations.results`). Raises SourceError for what no picture can be
        planned without."""

    def claims(self, relpath: str, task: str) -> bool:
        """Whether a listed file is, by its name and place alone, one of this format's
        annotation files for `task` (a COCO instances file, a VOC XML): the count the search
        weighs and the hint a run that matched nothing gives."""
        return False

    def kept_above(self, name: str) -> bool:
        """Whether a file of this name, in a folder above the pictures, is this format's export
        (CVAT's annotations.xml, a Label Studio project export): how a run pointed at an images
        folder tells that its labels sit above it."""
        return False

    def evident(self, count: int, pictures: int) -> bool:
        """Whether `count` of its files (`claims`) beside `pictures` other files make a listing
        this format's, for the guard of a classification run."""
        return count > 0

    def __repr__(self) -> str:
        return f"<annotation format {self.name}>"
