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

from beam_tfrecord import reasons, storage, tasks
from beam_tfrecord.elements import AnnotationKind, ImageAnnotations
from beam_tfrecord.plan.annotations import captions, coco, declared, segmentation, voc, yolo
from beam_tfrecord.plan.annotations.catalog import Catalog, partition, stem
from beam_tfrecord.plan.annotations.label_map import read_label_map
from beam_tfrecord.plan.annotations.locate import Located, locate
from beam_tfrecord.plan.annotations.matching import found_counts, found_instead
from beam_tfrecord.plan.annotations.paths import AnnotationPath, parse_annotation_paths
from beam_tfrecord.plan.annotations.results import AnnotationSet, ObjectNote
from beam_tfrecord.plan.listing import InputFile

__all__ = ["ANNOTATION_KINDS", "annotated_layout", "find_kind", "load_annotations"]

ANNOTATION_KINDS: tuple[str, ...] = tasks.task("detection").formats
_TITLES = {"coco": "COCO", "voc": "Pascal VOC", "yolo": "YOLO"}


def load_annotations(
    kind: AnnotationKind,
    files: Sequence[InputFile],
    annotations_path: str | Sequence[AnnotationPath] | None = None,
    *,
    class_names: Sequence[str] | None = None,
    masks: bool = True,
    label_map: str | None = None,
    keypoints: bool = False,
) -> AnnotationSet:
    """Read `kind`'s annotations for the listed `files` (with `keypoints`, each object's points
    too: COCO's keypoints files, Ultralytics' pose labels).

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

    Where the annotations are is found from the input as each format's tools find it, beside
    the input too (plan.annotations.locate); what the dataset declares of its splits is in
    `declared` (plan.annotations.declared). No annotation file at all gives every image
    unannotated: the planner's match check (plan.annotations.matching) refuses that in one line.

    Raises ValueError, naming the field or file, for what no image can be planned without: an
    unknown kind, an annotations_path that does not exist, a COCO file of another task
    (captions, keypoints, panoptic, results, an image list), YOLO names that do not parse or are
    missing beside label files, COCO files that name one category id differently.
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
        if not storage.exists(path.path):
            raise ValueError(f"annotations_path {path.path} does not exist")
    if kind != "coco" and (len(paths) > 1 or any(p.split for p in paths)):
        raise ValueError(f"annotations_path: {_TITLES[kind]} takes one path, without a split")
    listed = partition(files)
    if keypoints and kind not in ("coco", "yolo"):
        raise ValueError(f"annotations {kind} has no keypoints: keypoints come from coco or yolo")
    outside = _outside_devkit_pictures(listed) if kind == "voc" else {}
    listed.images = {r: f for r, f in listed.images.items() if r not in outside}
    located = locate(kind, files, listed, paths, keypoints)
    catalog = located.catalog
    if kind == "coco":
        result = _coco(catalog, located.paths, masks, keypoints)
    else:
        only = located.paths[0] if located.paths else None
        result = voc.load(catalog, only) if kind == "voc" else _yolo(catalog, only, masks, keypoints)
    result = located.back(result)
    result = _with_declared_splits(kind, result, located, located.paths if kind == "yolo" else paths)
    if label_map:
        known = read_label_map(label_map)
        result = _restrict(_renamed(result, known.aliases), known.class_names, f"the label map {known.path}")
    elif class_names:
        result = _restrict(result, class_names)
    return dataclasses.replace(
        result,
        sources={**_sources(listed, result), **outside},
        found_at=_found_at(kind, located, paths, result),
        found_instead=found_instead(listed.annotation_files, kind),
    )


def find_kind(task: str, files: Sequence[InputFile], paths: Sequence[AnnotationPath] = ()) -> AnnotationKind:
    """The annotations' format a layout shows, for a run given `--task` without `--annotations`:
    for segmentation the first of VOC, Cityscapes, ADE20K and a pair of folders that pairs a
    picture with a mask; for detection the format most of the annotation files under the input
    are. Raises ValueError naming the formats when none is found."""
    if task == "captions":
        for kind in captions.KINDS:
            if captions.find_files(kind, files, paths):
                return kind
        raise ValueError(
            "annotations: no captions found (looked for "
            + "; ".join(captions.LOOKED_FOR.values())
            + "): name the file with --annotations_path"
        )
    if task == "segmentation":
        if paths:
            return "folders"
        for kind in segmentation.KINDS:
            if segmentation.pairs_any(kind, files):
                return kind
        raise ValueError(
            "annotations: no segmentation layout found under --input (looked for "
            + "; ".join(segmentation.LOOKED_FOR.values())
            + "): name the format with --annotations"
        )
    if paths:  # the file named says which: a COCO JSON, a YOLO data.yaml, else VOC's XMLs
        name = paths[0].path.lower()
        if name.endswith((".json", ".json.gz")):
            return "coco"
        return "yolo" if name.endswith((".yaml", ".yml", ".txt")) or task == "keypoints" else "voc"
    listed = partition(files)
    counts = found_counts(listed.annotation_files)
    if task == "keypoints":
        counts["voc"] = 0  # Pascal VOC has no keypoints
    if not any(counts.values()):
        formats = (
            "COCO files, YOLO labels/"
            if task == "keypoints"
            else "COCO instances files, VOC XMLs, YOLO labels/"
        )
        options = "coco or yolo" if task == "keypoints" else "coco, voc or yolo"
        raise ValueError(
            f"annotations: no {task} annotations found under --input ({formats}): name the format with "
            f"--annotations {options}"
        )
    return max(counts, key=lambda kind: counts[kind])


def annotated_layout(files: Sequence[InputFile]) -> str | None:
    """What a tree that a classification run would take its folders for holds instead, and the
    option to pass, in words (None: no known layout of another task): a segmentation layout whose
    masks the listing holds (VOC's SegmentationClass/, Cityscapes' gtFine/, ...), COCO instances
    or captions files, YOLO labels, VOC XMLs beside as many pictures, or a captions file."""
    names = segmentation.folder_names(files)
    for kind in segmentation.KINDS:
        if segmentation.pairs_any(kind, files, outside=False, names=names):
            return (
                f"a {segmentation.title(kind)} segmentation layout ({segmentation.LOOKED_FOR[kind]}): "
                "pass --task segmentation"
            )
    # The few files whose extension an annotation or captions file has, picked by suffix alone
    # (a class-folder tree of a million JPEGs pays one `endswith` each).
    texts = [f.relpath for f in files if f.relpath.lower().endswith(_TEXT_SUFFIXES)]
    counts = found_counts(dict.fromkeys(texts))
    if counts["coco"] or counts["yolo"] or counts["voc"] * 2 >= max(1, len(files) - len(texts)):
        kind = max(counts, key=lambda name: counts[name])
        what = {"coco": "COCO instances files", "voc": "Pascal VOC XMLs", "yolo": "YOLO labels/*.txt"}[kind]
        return f"{counts[kind]} {what}: pass --annotations {kind}"
    if any(captions.is_captions_file(relpath) for relpath in texts):
        return "a captions file (captions_*.json, captions.txt): pass --task captions"
    return None


_TEXT_SUFFIXES = (".json", ".xml", ".txt", ".csv", ".tsv", ".jsonl")


def _found_at(
    kind: AnnotationKind, located: Located, paths: Sequence[AnnotationPath], result: AnnotationSet
) -> str:
    """Where the annotations were found, for the run's first lines and a failure's."""
    if located.beside:
        shown = ", ".join(located.beside[:3])
        more = f" and {len(located.beside) - 3} more" if len(located.beside) > 3 else ""
        where = f"in {shown}{more} (beside --input; dataset root {located.root})"
    elif paths:
        where = f"in {', '.join(p.path for p in paths)}"
    else:
        where = "under --input"
    read = [r for r, what in result.sources.items() if what == yolo.NAMES_READ]
    names = located.paths[0].path if kind == "yolo" and located.paths else read[0] if read else ""
    return f"{_TITLES[kind]} annotations {where}" + (f"; class names from {names}" if names else "")


def _coco(
    listed: Catalog, paths: Sequence[AnnotationPath], masks: bool, keypoints: bool = False
) -> AnnotationSet:
    if not paths:
        found = coco.discover(listed, keypoints)
        if not found:
            # Nothing to read: every picture unannotated, which the planner refuses in one line.
            images = {relpath: ImageAnnotations((), stem(relpath)) for relpath in listed.images}
            return AnnotationSet("coco", (), images, unannotated=frozenset(listed.images))
        paths = [AnnotationPath(listed.annotation_files[r].path, declared.coco_split(r)) for r in found]
        result = coco.load(listed, paths, found, masks, keypoints)
        return dataclasses.replace(result, split_names=())  # declared, not given: see below
    for path in paths:
        if os.path.isdir(path.path):
            raise ValueError(f"annotations_path {path.path} is a folder; name the COCO instances files in it")
    return coco.load(listed, paths, [_display(listed, path.path) for path in paths], masks, keypoints)


def _with_declared_splits(
    kind: AnnotationKind, result: AnnotationSet, located: Located, paths: Sequence[AnnotationPath]
) -> AnnotationSet:
    """The splits the dataset declares (plan.annotations.declared), kept beside the images'
    annotations; COCO files found (not given per split) declare theirs by name."""
    if kind == "voc":
        return dataclasses.replace(result, declared=declared.voc_splits(located))
    if kind == "yolo":
        given = paths[0].path if paths else None
        return dataclasses.replace(result, declared=declared.yolo_splits(located, located.catalog, given))
    if paths:  # given files: `train=a.json` holds its images in that split, as before
        return result
    claims = {r: found.split for r, found in result.images.items() if found.split}
    if not claims:
        return result
    images = {
        r: dataclasses.replace(found, split=None) if found.split else found
        for r, found in result.images.items()
    }
    names = declared.SPLIT_ORDER
    source = (
        "COCO files named by split (instances_<split>*.json, person_keypoints_<split>*.json, "
        "<split>/_annotations.coco.json)"
    )
    return dataclasses.replace(
        result,
        images=images,
        declared=declared.DeclaredSplits(source, tuple(n for n in names if n in claims.values()), claims),
    )


def _yolo(
    listed: Catalog, names: AnnotationPath | None, masks: bool, keypoints: bool = False
) -> AnnotationSet:
    """YOLO's labels; a tree with neither class names nor label files is one that nothing
    matches (the planner says so, with what is there instead), not a missing names file."""
    try:
        return yolo.load(listed, names, masks, keypoints)
    except ValueError as error:
        labelled = any(yolo.is_label_file(r) for r in listed.annotation_files)
        if names is not None or labelled or not str(error).startswith(yolo.NAMES_NOT_FOUND):
            raise
        images = {relpath: ImageAnnotations((), stem(relpath)) for relpath in listed.images}
        return AnnotationSet("yolo", (), images, unannotated=frozenset(listed.images))


def _display(listed: Catalog, path: str) -> str:
    """A given annotation file as messages name it: its relpath when it is under the input."""
    real = storage.real_path(path)
    for file in listed.annotation_files.values():
        if storage.real_path(file.path) == real:
            return file.relpath
    return path


def _renamed(result: AnnotationSet, aliases: dict[str, str]) -> AnnotationSet:
    """Objects named by a label map's other name (its `name` where the class is its
    `display_name`) carry the class name."""
    images = dict(result.images)
    for relpath, found in result.images.items():
        if any(aliases.get(obj.class_name, obj.class_name) != obj.class_name for obj in found.objects):
            objects = tuple(
                obj._replace(class_name=aliases.get(obj.class_name, obj.class_name)) for obj in found.objects
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
        if all(obj.class_name in known for obj in found.objects):
            continue
        for obj in found.objects:
            if obj.class_name not in known:
                detail = f"{obj.source_ref}: class {obj.class_name!r} is not in {where}"
                dropped.append(ObjectNote(relpath, reasons.UNKNOWN_CATEGORY.code, detail))
        kept = tuple(obj for obj in found.objects if obj.class_name in known)
        images[relpath] = dataclasses.replace(found, objects=kept)
    return dataclasses.replace(
        result,
        class_names=tuple(fixed),
        images=images,
        dropped=tuple(sorted(dropped, key=lambda note: note.relpath)),
    )


def _outside_devkit_pictures(listed: Catalog) -> dict[str, str]:
    """A Pascal VOC devkit listed from its root holds, beside JPEGImages/, the segmentation masks
    (SegmentationClass/, SegmentationObject/): PNGs that are no picture of the detection dataset,
    and, taken for pictures without annotations, 5,826 of them would be negatives. Where any
    picture is in a JPEGImages/ folder, every listed image outside one -> what it is."""
    images = listed.images
    if not any("JPEGImages" in r.split("/")[:-1] for r in images):
        return {}
    found = {}
    for relpath in images:
        if "JPEGImages" not in relpath.split("/")[:-1]:
            folder = posixpath.basename(posixpath.dirname(relpath)) or "--input"
            found[relpath] = (
                f"an image outside JPEGImages/ ({folder}/), not a picture of the Pascal VOC devkit"
            )
    return found


def _sources(listed: Catalog, result: AnnotationSet) -> dict[str, str]:
    """Every listed annotation file -> what it is (a `skipped` line's detail)."""
    title = _TITLES[result.kind]
    return {
        relpath: result.sources.get(relpath)
        or f"{sidecar_kind(relpath)}, not an image (not read by this {title} run)"
        for relpath in listed.annotation_files
    }


def sidecar_kind(relpath: str) -> str:
    """What a file kept beside a dataset's pictures is, by its name and place."""
    name = posixpath.basename(relpath).lower()
    parts = relpath.split("/")
    if name.endswith(".pbtxt"):
        return "a label map (Object Detection API pbtxt)"
    if name.endswith((".yaml", ".yml")):
        return "a YOLO dataset file (data.yaml)" if name.startswith("data") else "a YAML file"
    if name == "classes.txt":
        return "a class names list (classes.txt)"
    if "ImageSets" in parts[:-1]:
        return "a Pascal VOC split list (ImageSets)"
    if name.endswith(".json"):
        return "a JSON file"
    return f"a {posixpath.splitext(name)[1]} file"
