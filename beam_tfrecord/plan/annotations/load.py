"""The planner's one call into annotations: a source (COCO, Pascal VOC, YOLO) read against the
listing, giving every listed image's objects and every problem with its reason.

    found = load_annotations("coco", list_inputs("data"), "train=a.json,validation=b.json")
    found.class_names          # the label order
    found.images["x.jpg"]      # ImageAnnotations (objects, source id, declared size, split)
    found.sources              # listed annotation files: never inputs, never `not_an_image`
    found.problems             # images rejected for their annotations
    found.unmatched            # entries that name no listed file, for a file beside the rejects
    found.dropped              # objects left out at plan time

Pure plan-time work: annotation files are read (local or gs://), never an image's bytes.
"""

from __future__ import annotations

import dataclasses
import os
import posixpath
from collections.abc import Sequence

from apache_beam.io.filesystems import FileSystems

from beam_tfrecord import reasons
from beam_tfrecord.elements import AnnotationKind
from beam_tfrecord.plan.annotations import coco, voc, yolo
from beam_tfrecord.plan.annotations.catalog import Catalog, partition
from beam_tfrecord.plan.annotations.label_map import read_label_map
from beam_tfrecord.plan.annotations.paths import AnnotationPath, parse_annotation_paths
from beam_tfrecord.plan.annotations.results import AnnotationSet, ObjectNote
from beam_tfrecord.plan.listing import InputFile

__all__ = ["ANNOTATION_KINDS", "load_annotations"]

ANNOTATION_KINDS: tuple[AnnotationKind, ...] = ("coco", "voc", "yolo")
_TITLES = {"coco": "COCO", "voc": "Pascal VOC", "yolo": "YOLO"}


def load_annotations(
    kind: AnnotationKind,
    files: Sequence[InputFile],
    annotations_path: str | Sequence[AnnotationPath] | None = None,
    *,
    class_names: Sequence[str] | None = None,
    masks: bool = True,
    label_map: str | None = None,
) -> AnnotationSet:
    """Read `kind`'s annotations for the listed `files`.

    Args:
      kind: "coco", "voc" or "yolo".
      files: the listing (`plan.listing.list_inputs`).
      annotations_path: where the annotations are when not in the format's standard place, as
        the user writes it (`parse_annotation_paths`) or already parsed: COCO instances files
        (per split: `train=a.json,validation=b.json`), a folder of VOC XMLs, or YOLO's names file
        (`data.yaml` or `classes.txt`). None: found under the input.
      class_names: a fixed label order; objects of other classes are dropped `unknown_category`.
      masks: keep segmentation (polygons, run lengths); False leaves every mask out, which is
        most of a COCO file's memory.
      label_map: a label_map.pbtxt or labels.txt whose classes and ids are kept (instead of
        `class_names`): objects match its names or display names; others are `unknown_category`.

    Raises ValueError, naming the field or file, for what no image can be planned without: an
    unknown kind, an annotations_path that does not exist, no COCO file or YOLO class names
    found, YOLO names that do not parse, COCO files that name one category id differently.
    """
    if class_names and label_map:
        raise ValueError("label_map fixes the class names and their ids: leave class_names out")
    if kind not in ANNOTATION_KINDS:
        raise ValueError(f"annotations must be one of {', '.join(ANNOTATION_KINDS)}, not {kind!r}")
    paths = (
        parse_annotation_paths(annotations_path)
        if annotations_path is None or isinstance(annotations_path, str)
        else tuple(annotations_path)
    )
    for path in paths:
        if not _exists(path.path):
            raise ValueError(f"annotations_path {path.path} does not exist")
    listed = partition(files)
    if kind == "coco":
        result = _coco(listed, paths, masks)
    else:
        if len(paths) > 1 or any(p.split for p in paths):
            raise ValueError(f"annotations_path: {_TITLES[kind]} takes one path, without a split")
        only = paths[0] if paths else None
        result = voc.load(listed, only) if kind == "voc" else yolo.load(listed, only, masks)
    if label_map:
        known = read_label_map(label_map)
        result = _restrict(_renamed(result, known.aliases), known.class_names, f"the label map {known.path}")
    elif class_names:
        result = _restrict(result, class_names)
    return dataclasses.replace(result, sources=_sources(listed, result))


def _exists(path: str) -> bool:
    return FileSystems.exists(path) if "://" in path else os.path.exists(path)


def _coco(listed: Catalog, paths: Sequence[AnnotationPath], masks: bool) -> AnnotationSet:
    if not paths:
        found = coco.discover(listed)
        if not found:
            raise ValueError(
                "no COCO instances file under the input (instances_*.json, or a .json in an "
                "annotations/ folder); name it with annotations_path"
            )
        paths = [AnnotationPath(listed.annotation_files[relpath].path) for relpath in found]
        return coco.load(listed, paths, found, masks)
    for path in paths:
        if os.path.isdir(path.path):
            raise ValueError(f"annotations_path {path.path} is a folder; name the COCO instances files in it")
    return coco.load(listed, paths, [_display(listed, path.path) for path in paths], masks)


def _display(listed: Catalog, path: str) -> str:
    """A given annotation file as messages name it: its relpath when it is under the input."""
    real = os.path.realpath(path) if "://" not in path else path
    for file in listed.annotation_files.values():
        listed_path = os.path.realpath(file.path) if "://" not in file.path else file.path
        if listed_path == real:
            return file.relpath
    return path


def _renamed(result: AnnotationSet, aliases: dict[str, str]) -> AnnotationSet:
    """Objects named by a label map's other name (its `name` where the class is its
    `display_name`) carry the class name."""
    images = dict(result.images)
    for relpath, found in result.images.items():
        if any(aliases.get(obj.label, obj.label) != obj.label for obj in found.objects):
            objects = tuple(
                dataclasses.replace(obj, label=aliases.get(obj.label, obj.label)) for obj in found.objects
            )
            images[relpath] = dataclasses.replace(found, objects=objects)
    return dataclasses.replace(result, images=images)


def _restrict(result: AnnotationSet, fixed: Sequence[str], where: str = "class_names") -> AnnotationSet:
    """`fixed` as the label order: objects of any other class are dropped `unknown_category`."""
    if len(set(fixed)) != len(fixed):
        raise ValueError("class_names lists a class twice")
    known = set(fixed)
    images = dict(result.images)
    dropped = list(result.dropped)
    for relpath, found in result.images.items():
        if all(obj.label in known for obj in found.objects):
            continue
        for obj in found.objects:
            if obj.label not in known:
                detail = f"{obj.source_ref}: class {obj.label!r} is not in {where}"
                dropped.append(ObjectNote(relpath, reasons.UNKNOWN_CATEGORY.code, detail))
        kept = tuple(obj for obj in found.objects if obj.label in known)
        images[relpath] = dataclasses.replace(found, objects=kept)
    return dataclasses.replace(
        result,
        class_names=tuple(fixed),
        images=images,
        dropped=tuple(sorted(dropped, key=lambda note: note.relpath)),
    )


def _sources(listed: Catalog, result: AnnotationSet) -> dict[str, str]:
    """Every listed annotation file -> what it is (a `skipped` line's detail)."""
    title = _TITLES[result.kind]
    return {
        relpath: result.sources.get(relpath)
        or f"a {posixpath.splitext(relpath)[1].lower()} file, not an image (not read by this {title} run)"
        for relpath in listed.annotation_files
    }
