"""The steps every per-picture objects format (COCO, Pascal VOC, YOLO) shares when it loads:
the listing seen from the dataset's root (`locate`), the format's own reader, the answer brought
back to the input's relpaths, the splits the dataset declares, a given label map or class order,
and what every listed annotation file is.

    found = load_objects(fmt, READER, LoadRequest("detection", list_inputs("data")))
    found.class_names          # the label order
    found.images["x.jpg"]      # ImageAnnotations (objects, source id, declared size, split)
    found.sources              # listed annotation files: never inputs, never `not_an_image`
    found.problems             # images rejected for their annotations
    found.unmatched            # entries that name no listed file, for a file beside the rejects
    found.dropped              # objects left out at plan time

Each format gives its own steps as an `ObjectFiles` (plan.sources.coco, voc, yolo). Pure
plan-time work: annotation files are read (local or gs://), never an image's bytes.
"""

from __future__ import annotations

import dataclasses
import posixpath
from collections.abc import Mapping, Sequence

from beam_tfrecord import reasons, storage
from beam_tfrecord.plan.annotations.catalog import Catalog, partition
from beam_tfrecord.plan.annotations.declared import with_dataset_names
from beam_tfrecord.plan.annotations.label_map import read_label_map
from beam_tfrecord.plan.annotations.locate import Located, input_base
from beam_tfrecord.plan.annotations.paths import AnnotationPath
from beam_tfrecord.plan.annotations.results import AnnotationSet, DeclaredSplits, ObjectNote
from beam_tfrecord.plan.sources.base import CERTAIN, Listing, LoadRequest, SourceError, SourceFormat

__all__ = ["ObjectFiles", "describe_sidecar", "load_objects", "score_objects"]


class ObjectFiles:
    """One objects format's own steps, each with the default most formats take.

    Attributes:
      several_paths: `annotations_path` may name several files, and one per split (COCO's).
    """

    several_paths: bool = False

    def given(self, path: str, task: str) -> bool:
        """Whether a file or folder named with `annotations_path` (lower-cased) is this format's."""
        return False

    def outside_pictures(self, listed: Catalog) -> dict[str, str]:
        """Listed images that are no picture of the dataset -> what each is (a `skipped` line)."""
        return {}

    def locate(
        self, base: str, listed: Catalog, paths: tuple[AnnotationPath, ...], keypoints: bool
    ) -> Located:
        """Where the annotations are for the listing under `base` (plan.annotations.locate)."""
        return Located(listed, paths=paths)

    def read(self, located: Located, request: LoadRequest) -> AnnotationSet:
        """Every listed image's objects, in the located root's relpaths."""
        raise NotImplementedError

    def declared(
        self, result: AnnotationSet, located: Located, paths: tuple[AnnotationPath, ...]
    ) -> AnnotationSet:
        """The splits the dataset declares (plan.annotations.declared), kept beside the images'."""
        return result

    def split_words(self, found: DeclaredSplits) -> Mapping[str, str] | None:
        """The dataset's own word for each of `found`'s splits (`validation` -> `val`), as
        `keep_split_names` keeps them; None where the format does not keep them yet."""
        return None

    def names_from(self, located: Located, result: AnnotationSet) -> str:
        """The file the class names came from, where the format keeps them apart ("": none)."""
        return ""


def score_objects(fmt: SourceFormat, files: ObjectFiles, task: str, listing: Listing) -> float:
    """The layout search's score of an objects format: a file named with `annotations_path` says
    which format it is; else the count of the listed annotation files that are the format's."""
    if listing.paths:
        return CERTAIN if files.given(listing.paths[0].path.lower(), task) else 0.0
    return float(sum(1 for relpath in listing.catalog.annotation_files if fmt.claims(relpath, task)))


def load_objects(fmt: SourceFormat, files: ObjectFiles, request: LoadRequest) -> AnnotationSet:
    """Read `fmt`'s annotations for the listed files (with a keypoints task, each object's points
    too: COCO's keypoints files, Ultralytics' pose labels).

    Where the annotations are is found from the input as each format's tools find it, beside
    the input too (plan.annotations.locate); what the dataset declares of its splits is in
    `declared` (plan.annotations.declared). No annotation file at all gives every image
    unannotated: the planner's match check (plan.annotations.matching) refuses that in one line.

    Raises SourceError, naming the field or file, for what no image can be planned without: an
    annotations_path that does not exist, a COCO file of another task (captions, keypoints,
    panoptic, results, an image list), YOLO names that do not parse or are missing beside label
    files, COCO files that name one category id differently.
    """
    if request.class_names and request.label_map:
        raise SourceError("fixes the class names and their ids: leave class_names out", field="label_map")
    paths = request.paths
    for path in paths:
        if not storage.exists(path.path):
            raise SourceError(f"{path.path} does not exist", field="annotations_path", file=path.path)
    if not files.several_paths and (len(paths) > 1 or any(p.split for p in paths)):
        raise SourceError(f"annotations_path: {fmt.title} takes one path, without a split")
    listed = partition(request.files)
    outside = files.outside_pictures(listed)
    listed.images = {r: f for r, f in listed.images.items() if r not in outside}
    located = files.locate(input_base(request.files), listed, paths, request.keypoints)
    result = located.back(files.read(located, request))
    result = files.declared(result, located, paths)
    words = files.split_words(result.declared) if request.keep_split_names and result.declared else None
    if result.declared is not None and words is not None:
        result = dataclasses.replace(result, declared=with_dataset_names(result.declared, words))
    if request.label_map:
        known = read_label_map(request.label_map)
        result = _restrict(_renamed(result, known.aliases), known.class_names, f"the label map {known.path}")
    elif request.class_names:
        result = _restrict(result, request.class_names)
    return dataclasses.replace(
        result,
        sources={**_sources(fmt, listed, result), **outside},
        found_at=_found_at(fmt, files, located, paths, result),
        looked_for=fmt.looked_for[request.task],
    )


def _found_at(
    fmt: SourceFormat,
    files: ObjectFiles,
    located: Located,
    paths: Sequence[AnnotationPath],
    result: AnnotationSet,
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
    names = files.names_from(located, result)
    return f"{fmt.title} annotations {where}" + (f"; class names from {names}" if names else "")


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
        raise SourceError("lists a class twice", field="class_names")
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


def _sources(fmt: SourceFormat, listed: Catalog, result: AnnotationSet) -> dict[str, str]:
    """Every listed annotation file -> what it is (a `skipped` line's detail)."""
    title = fmt.title
    return {
        relpath: result.sources.get(relpath)
        or f"{describe_sidecar(relpath)}, not an image (not read by this {title} run)"
        for relpath in listed.annotation_files
    }


def describe_sidecar(relpath: str) -> str:
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
