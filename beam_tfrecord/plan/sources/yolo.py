"""YOLO: one `.txt` per image, a line per object, coordinates as fractions of the image's size.

A line is `class cx cy w h` (a box by its centre) or `class x1 y1 x2 y2 x3 y3 ...` (a polygon of
three points or more: Ultralytics' segmentation labels; its box is the polygon's extent). Every
other count of values (6, say: a prediction with its confidence) makes the file malformed.

An image's file is in the `labels/` tree that mirrors `images/` (Ultralytics' rule: the last
`/images/` of the path becomes `/labels/`, `images/train/x.jpg` -> `labels/train/x.txt`), else
beside it (`x.txt`). An image without one is a negative; an empty file is a negative too, but an
annotated one.

Pose labels (a keypoints run): `class cx cy w h` then `px py [v]` for each of the points that
`kpt_shape: [K, 2 or 3]` in data.yaml declares (Ultralytics' pose format); with two values a
point, one at (0, 0) is unlabelled and any other visible. `kpt_names` (class index -> names), where
data.yaml gives it, names the points; otherwise they are numbered.

Class names, in class-index order, come from `annotations_path` (a YAML file with `names`, or a
text file with one name per line), else from the shallowest YAML file under the input that has
`names` (`data.yaml`), else the shallowest `classes.txt`. `names` may be a list or a mapping of
index to name; label ids count the names in index order, so a mapping with gaps (0, 1, 5) still
gives ids 0, 1, 2.
"""

from __future__ import annotations

import dataclasses
import math
import posixpath
from collections import defaultdict
from collections.abc import Mapping, Sequence
from typing import ClassVar, NamedTuple

import yaml

from beam_tfrecord import reasons, storage
from beam_tfrecord.elements import ImageAnnotations, ObjectBox, Polygon
from beam_tfrecord.plan.annotations import declared
from beam_tfrecord.plan.annotations.catalog import (
    MAX_IMAGE_ANNOTATION_BYTES,
    Catalog,
    read_many,
    read_one,
    stem,
)
from beam_tfrecord.plan.annotations.locate import (
    Located,
    component,
    join,
    listed_under,
    parents,
    relative_to,
    rerooted,
    under,
)
from beam_tfrecord.plan.annotations.names_files import YAML_EXTENSIONS, names_from, read_names
from beam_tfrecord.plan.annotations.objects import ObjectFiles, load_objects, score_objects
from beam_tfrecord.plan.annotations.paths import AnnotationPath
from beam_tfrecord.plan.annotations.results import (
    AnnotationSet,
    DeclaredSplits,
    ImageProblem,
    ObjectNote,
    UnmatchedEntry,
)
from beam_tfrecord.plan.annotations.shapes import class_masks_of
from beam_tfrecord.plan.listing import InputFile
from beam_tfrecord.plan.sources.base import Listing, LoadRequest, SourceError, SourceFormat

__all__ = ["FORMAT", "NamesNotFound", "Yolo", "class_names", "is_label_file", "read_labels"]

CLASSES_TXT = "classes.txt"
WHAT = "YOLO class names"  # how a names file's refusal starts
LABELS_DIR = "labels"
NAMES_NOT_FOUND = "YOLO class names not found"
NAMES_READ = "YOLO class names, read"
# How YOLO numbers its classes, for an append's refusal.
NUMBERED_BY = "YOLO's class indices"
_BOX_FORMAT = "expected 'class cx cy w h' or a polygon 'class x1 y1 x2 y2 x3 y3 ...'"


class NamesNotFound(SourceError):
    """No names file under the input nor named: a tree with label files cannot be read without."""


class _Rejected(Exception):
    """A label file that cannot annotate its image: (reason, detail)."""


def class_names(listed: Catalog, names_path: AnnotationPath | None = None) -> tuple[dict[int, str], str]:
    """Class index -> name, and the file they came from (its relpath, or its path when it is not
    under the input). ValueError naming the file (and line) when none is found or it is malformed."""
    if names_path is not None:
        data = read_names(names_path.path, names_path.path, WHAT)
        return names_from(data, names_path.path, WHAT), names_path.path
    files = listed.annotation_files
    yamls = sorted((r for r in files if r.lower().endswith(YAML_EXTENSIONS)), key=_depth_first)
    found: list[tuple[str, dict[int, str]]] = []
    for relpath in yamls:
        if found and _depth_first(relpath)[0] > _depth_first(found[0][0])[0]:
            break
        names = names_from(read_names(files[relpath].path, relpath, WHAT), relpath, WHAT, optional=True)
        if names is not None:
            found.append((relpath, names))
    if len({tuple(names.items()) for _, names in found}) > 1:
        raise SourceError(
            f"YOLO class names: {found[0][0]} and {found[1][0]} give different names; "
            "name the right one with annotations_path",
            file=found[0][0],
        )
    if found:
        return found[0][1], found[0][0]
    texts = sorted((r for r in files if posixpath.basename(r).lower() == CLASSES_TXT), key=_depth_first)
    if texts:
        return names_from(read_names(files[texts[0]].path, texts[0], WHAT), texts[0], WHAT), texts[0]
    raise NamesNotFound(
        f"{NAMES_NOT_FOUND}: no YAML file with 'names' (data.yaml) and no classes.txt under the "
        "input; name one with annotations_path"
    )


def _depth_first(relpath: str) -> tuple[int, str]:
    return relpath.count("/"), relpath


def _label_file(relpath: str) -> str:
    """`a/images/train/x.jpg` -> `a/labels/train/x.txt` (the last `images` folder), or `x.txt`
    beside an image outside any `images/` folder."""
    rooted = "/" + stem(relpath)
    head, sep, tail = rooted.rpartition("/images/")
    mirrored = f"{head}/{LABELS_DIR}/{tail}" if sep else rooted
    return mirrored[1:] + ".txt"


class PoseShape(NamedTuple):
    """data.yaml's `kpt_shape`: points an object, and values a point (2: x y, 3: x y v)."""

    points: int
    values: int


def pose_shape(
    listed: Catalog, names_file: str, names_path: AnnotationPath | None
) -> tuple[PoseShape, dict[int, tuple[str, ...]]]:
    """`kpt_shape` and `kpt_names` of the YAML file that named the classes; ValueError naming the
    file when it declares no pose shape (the labels cannot be split into points without it)."""
    if names_path is not None:
        path = shown = names_path.path
    else:
        listed_file = listed.annotation_files.get(names_file)
        path, shown = (listed_file.path if listed_file is not None else names_file), names_file
    if not shown.lower().endswith(YAML_EXTENSIONS):
        raise SourceError(
            f"YOLO pose labels need kpt_shape, which a data.yaml declares; {shown} is not one", file=shown
        )
    document = yaml.safe_load(read_names(path, shown, WHAT).decode("utf-8-sig"))
    shape = document.get("kpt_shape") if isinstance(document, dict) else None
    if not (
        isinstance(shape, list)
        and len(shape) == 2
        and all(isinstance(v, int) and not isinstance(v, bool) for v in shape)
        and shape[0] > 0
        and shape[1] in (2, 3)
    ):
        raise SourceError(
            f"YOLO class names: {shown} declares no kpt_shape: [points, 2 or 3] for pose labels"
        )
    raw = document.get("kpt_names") or {}
    point_names: dict[int, tuple[str, ...]] = {}
    if isinstance(raw, dict):
        for key, value in raw.items():
            if isinstance(value, list) and len(value) == shape[0]:
                point_names[int(key)] = tuple(str(v).strip() for v in value)
    return PoseShape(shape[0], shape[1]), point_names


def _parse_txt(
    data: bytes, display: str, names: dict[int, str], pose: PoseShape | None = None
) -> tuple[list[ObjectBox], list[tuple[str, str]]]:
    """A label file's bytes -> its objects and those left out, as (reason, detail); raises
    _Rejected for a line that is not YOLO's, naming the file and line."""
    try:
        text = data.decode("utf-8-sig")
    except UnicodeDecodeError:
        raise _Rejected(reasons.BAD_ANNOTATION.code, f"{display} is not UTF-8 text") from None
    objects: list[ObjectBox] = []
    dropped: list[tuple[str, str]] = []
    for number, line in enumerate(text.splitlines(), start=1):
        tokens = line.split()
        if not tokens:
            continue
        ref = f"{display}:{number}"
        if pose is not None and len(tokens) != 5 + pose.points * pose.values:
            expected = f"'class cx cy w h' and {pose.points} points of {pose.values} values (kpt_shape)"
            raise _Rejected(reasons.BAD_ANNOTATION.code, f"{ref}: {len(tokens)} values; expected {expected}")
        if pose is None and len(tokens) != 5 and (len(tokens) < 7 or len(tokens) % 2 == 0):
            raise _Rejected(reasons.BAD_ANNOTATION.code, f"{ref}: {len(tokens)} values; {_BOX_FORMAT}")
        try:
            values = [float(token) for token in tokens]
        except ValueError:
            bad = next(t for t in tokens if not _is_float(t))
            raise _Rejected(
                reasons.BAD_ANNOTATION.code, f"{ref}: {bad!r} is not a number; {_BOX_FORMAT}"
            ) from None
        if not all(map(math.isfinite, values)):
            bad = next(t for t, v in zip(tokens, values, strict=True) if not math.isfinite(v))
            raise _Rejected(reasons.BAD_ANNOTATION.code, f"{ref}: {bad!r} is not a finite number")
        if values[0] != int(values[0]):
            raise _Rejected(reasons.BAD_ANNOTATION.code, f"{ref}: class {tokens[0]!r} is not a class index")
        index = int(values[0])
        if index not in names:
            dropped.append(
                (reasons.UNKNOWN_CATEGORY.code, f"{ref}: class {index} has no name (names: 0..{max(names)})")
            )
            continue
        mask = keypoints = None
        if pose is not None:
            cx, cy, width, height = values[1:5]
            box = (cx - width / 2, cy - height / 2, cx + width / 2, cy + height / 2)
            keypoints = _points(values[5:], pose)
            if keypoints is None:
                raise _Rejected(reasons.BAD_ANNOTATION.code, f"{ref}: a point's visibility is not 0, 1 or 2")
        elif len(tokens) == 5:
            cx, cy, width, height = values[1:]
            box = (cx - width / 2, cy - height / 2, cx + width / 2, cy + height / 2)
        else:
            points = tuple(values[1:])
            xs, ys = points[0::2], points[1::2]
            box = (min(xs), min(ys), max(xs), max(ys))
            mask = (Polygon(points),)
        if box[2] <= box[0] or box[3] <= box[1]:
            dropped.append((reasons.ZERO_AREA.code, f"{ref}: the box has no area"))
            continue
        objects.append(ObjectBox(*box, names[index], mask=mask, source_ref=ref, keypoints=keypoints))
    return objects, dropped


def _points(values: list[float], pose: PoseShape) -> tuple[float, ...] | None:
    """A pose line's points as `x, y, v` triples: with two values a point, (0, 0) is unlabelled
    and any other visible, as Ultralytics' converters write them; None for a bad visibility."""
    points: list[float] = []
    for start in range(0, len(values), pose.values):
        x, y = values[start], values[start + 1]
        if pose.values == 3:
            v = values[start + 2]
            if v not in (0, 1, 2):
                return None
        else:
            v = 0.0 if x == 0 and y == 0 else 2.0
        points += (x, y, float(v)) if v else (0.0, 0.0, 0.0)
    return tuple(points)


def _is_float(token: str) -> bool:
    try:
        float(token)
    except ValueError:
        return False
    return True


def read_labels(
    listed: Catalog, names_path: AnnotationPath | None = None, masks: bool = True, keypoints: bool = False
) -> AnnotationSet:
    """Every listed image's objects from its label file (see the module docstring); with
    `keypoints`, its pose labels' points."""
    names, names_file = class_names(listed, names_path)
    pose, point_names = pose_shape(listed, names_file, names_path) if keypoints else (None, {})
    files = listed.annotation_files
    found: dict[str, InputFile] = {}
    for relpath in listed.images:
        for candidate in (_label_file(relpath), stem(relpath) + ".txt"):
            if candidate in files and candidate != names_file:
                found[relpath] = files[candidate]
                break
    claimed: dict[str, list[str]] = defaultdict(list)
    for relpath, label_file in found.items():
        claimed[label_file.relpath].append(relpath)

    images: dict[str, ImageAnnotations] = {}
    problems: list[ImageProblem] = []
    dropped: list[ObjectNote] = []
    parsed = _parse_all([f for f in found.values() if len(claimed[f.relpath]) == 1], names, pose)
    for relpath, label_file in found.items():
        if len(claimed[label_file.relpath]) > 1:
            others = ", ".join(r for r in claimed[label_file.relpath] if r != relpath)
            detail = f"{label_file.relpath} could be for {others} too"
            problems.append(ImageProblem(relpath, reasons.AMBIGUOUS_ANNOTATION.code, detail))
            continue
        result = parsed[label_file.relpath]
        if isinstance(result, _Rejected):
            problems.append(ImageProblem(relpath, *result.args))
            continue
        objects, left_out = result
        if not masks:
            objects = [_without_mask(obj) for obj in objects]
        images[relpath] = ImageAnnotations(tuple(objects), stem(relpath), normalized=True)
        dropped += [ObjectNote(relpath, reason, detail) for reason, detail in left_out]
    unannotated = [r for r in listed.images if r not in found]
    for relpath in unannotated:
        images[relpath] = ImageAnnotations((), stem(relpath), normalized=True)

    orphans = [
        file
        for relpath, file in files.items()
        if relpath.lower().endswith(".txt")
        and relpath not in claimed
        and relpath != names_file
        and LABELS_DIR in relpath.split("/")[:-1]
    ]
    unmatched = []
    by_path = {f.path: f for f in orphans if f.size <= MAX_IMAGE_ANNOTATION_BYTES}
    for file in orphans:
        if file.path not in by_path:  # too large to count its lines
            unmatched.append(
                UnmatchedEntry(
                    file.relpath,
                    _image_of(file.relpath),
                    reasons.MISSING_IMAGE.code,
                    "no listed image has its stem",
                )
            )
    for path, data, error in read_many(list(by_path)):
        file = by_path[path]
        count = 0 if data is None else sum(1 for line in data.splitlines() if line.strip())
        detail = "no listed image has its stem" + (f"; it {error}" if error else "")
        unmatched.append(
            UnmatchedEntry(file.relpath, _image_of(file.relpath), reasons.MISSING_IMAGE.code, detail, count)
        )

    sources = {f.relpath: f"YOLO labels of {', '.join(claimed[f.relpath])}" for f in found.values()}
    if names_file in files:
        sources[names_file] = NAMES_READ
    return AnnotationSet(
        format="yolo",
        class_names=tuple(names[index] for index in sorted(names)),
        images=images,
        unannotated=frozenset(unannotated),
        sources=sources,
        problems=tuple(sorted(problems)),
        unmatched=tuple(unmatched),
        dropped=tuple(dropped),
        task="keypoints" if pose is not None else "detection",
        keypoint_names={
            name: point_names.get(index) or tuple(str(i) for i in range(pose.points))
            for index, name in names.items()
        }
        if pose is not None
        else {},
        numbered_by=NUMBERED_BY,
    )


def is_label_file(relpath: str) -> bool:
    """A `.txt` in a `labels/` folder: where Ultralytics keeps an image's label file."""
    return relpath.lower().endswith(".txt") and LABELS_DIR in relpath.split("/")[:-1]


def _image_of(label_relpath: str) -> str:
    """The image path (without extension) a label file's place implies."""
    rooted = "/" + stem(label_relpath)
    head, sep, tail = rooted.rpartition(f"/{LABELS_DIR}/")
    return (f"{head}/images/{tail}" if sep else rooted)[1:] + ".*"


def _without_mask(obj: ObjectBox) -> ObjectBox:
    return obj if obj.mask is None else obj._replace(mask=None)


def _parse_all(
    files: Sequence[InputFile], names: dict[int, str], pose: PoseShape | None = None
) -> dict[str, tuple[list[ObjectBox], list[tuple[str, str]]] | _Rejected]:
    """relpath -> (objects, dropped) or why not (read in parallel from gs://)."""
    results: dict[str, tuple[list[ObjectBox], list[tuple[str, str]]] | _Rejected] = {}
    small = {f.path: f for f in files if f.size <= MAX_IMAGE_ANNOTATION_BYTES}
    for file in files:
        if file.size > MAX_IMAGE_ANNOTATION_BYTES:
            detail = f"{file.relpath} is {file.size / 2**20:.0f} MiB: too large, not read"
            results[file.relpath] = _Rejected(reasons.BAD_ANNOTATION.code, detail)
    for path, data, error in read_many(list(small)):
        file = small[path]
        if data is None:
            results[file.relpath] = _Rejected(reasons.BAD_ANNOTATION.code, f"{file.relpath} {error}")
            continue
        try:
            results[file.relpath] = _parse_txt(data, file.relpath, names, pose)
        except _Rejected as rejected:
            results[file.relpath] = rejected
    return results


def _locate(base: str, catalog: Catalog, paths: tuple[AnnotationPath, ...]) -> Located:
    """Ultralytics' rule on the image's whole path (the last `/images/` becomes `/labels/`), so
    `ds/labels/...` is listed for `--input ds/images/...`, with `ds/*.yaml` and `ds/classes.txt`;
    without names there, the dataset's data.yaml a level or two up."""
    located = _yolo_labels(base, catalog, paths)
    if located.paths or any(_is_names_file(r) for r in located.catalog.annotation_files):
        return located
    # No names under the input: the dataset's data.yaml a level or two up (a Roboflow export's
    # is beside its split folders), named as if given.
    for folder in parents(located.root or base)[:2]:
        found = sorted(
            (f for f in _names_files(folder).values() if _has_names(f)),
            key=lambda f: (not f.relpath.lower().endswith(YAML_EXTENSIONS), f.relpath),
        )
        if found:
            return dataclasses.replace(located, paths=(AnnotationPath(found[0].path),))
    return located


def _has_names(file: InputFile) -> bool:
    """A classes.txt, or a YAML file with `names` (never another project's YAML above the input)."""
    if not file.relpath.lower().endswith(YAML_EXTENSIONS):
        return True
    if file.size > 4 * 2**20:
        return False
    try:
        document = yaml.safe_load(read_one(file.path).decode("utf-8-sig"))
    except Exception:  # not this dataset's names file
        return False
    return isinstance(document, dict) and "names" in document


def _is_names_file(relpath: str) -> bool:
    return relpath.lower().endswith(YAML_EXTENSIONS) or posixpath.basename(relpath).lower() == "classes.txt"


def _yolo_labels(base: str, catalog: Catalog, paths: tuple[AnnotationPath, ...]) -> Located:
    folders = [p for p in paths if storage.is_folder(p.path)]
    names = tuple(p for p in paths if p not in folders)
    if folders:  # the labels folder, named
        labels = folders[0].path.rstrip("/")
        found = listed_under(labels, (".txt", ".yaml", ".yml"))
        root = next((r for r in parents(labels) if relative_to(base, r) is not None), "")
        under_root = relative_to(base, root) if root else None
        if under_root is not None and "labels" in (relative_to(labels, root) or "").split("/"):
            prefix = under_root + "/" if under_root else ""
            beside = under(root, labels, found)
            beside |= _names_files(root)
        else:  # no common dataset root: the images as `images/`, the labels as `labels/`
            root, prefix = posixpath.dirname(labels), "images/"
            beside = {
                f"labels/{f.relpath}": dataclasses.replace(f, relpath=f"labels/{f.relpath}") for f in found
            }
            index = component(base, ("images",))
            beside |= _names_files("/".join(base.split("/")[:index]) if index else posixpath.dirname(base))
        return Located(rerooted(catalog, prefix, beside), prefix, root, (labels,), names)
    index = component(base, ("images",))
    if index is None:
        return Located(catalog, paths=paths)
    parts = base.split("/")
    root, prefix = "/".join(parts[:index]), "/".join(parts[index:]) + "/"
    labels = "/".join([root, "labels", *parts[index + 1 :]])
    beside = under(root, labels, listed_under(labels, (".txt",)))
    if not beside:
        return Located(catalog, paths=paths)
    beside |= _names_files(root)
    return Located(rerooted(catalog, prefix, beside), prefix, root, (labels,), names)


def _names_files(root: str) -> dict[str, InputFile]:
    """A YOLO dataset's own names files at its root: `*.yaml` (data.yaml) and `classes.txt`."""
    found: dict[str, InputFile] = {}
    for pattern in ("*.yaml", "*.yml", "classes.txt"):
        found |= under(root, root, listed_under(join(root, pattern)))
    return found


class _Labels(ObjectFiles):
    """YOLO's label files, and the one names file (`data.yaml`, `classes.txt`) or labels folder
    named with annotations_path."""

    def given(self, path: str, task: str) -> bool:
        return path.endswith((".yaml", ".yml", ".txt")) or (
            task == "keypoints" and not path.endswith((".json", ".json.gz"))
        )

    def locate(
        self, base: str, listed: Catalog, paths: tuple[AnnotationPath, ...], keypoints: bool
    ) -> Located:
        return _locate(base, listed, paths)

    def read(self, located: Located, request: LoadRequest) -> AnnotationSet:
        """YOLO's labels; a tree with neither class names nor label files is one that nothing
        matches (the planner says so, with what is there instead), not a missing names file."""
        listed = located.catalog
        names = located.paths[0] if located.paths else None
        try:
            return read_labels(listed, names, request.masks, request.keypoints)
        except NamesNotFound:
            if names is not None or any(is_label_file(r) for r in listed.annotation_files):
                raise
            images = {relpath: ImageAnnotations((), stem(relpath)) for relpath in listed.images}
            return AnnotationSet("yolo", (), images, unannotated=frozenset(listed.images))

    def declared(
        self, result: AnnotationSet, located: Located, paths: tuple[AnnotationPath, ...]
    ) -> AnnotationSet:
        given = located.paths[0].path if located.paths else None
        return dataclasses.replace(result, declared=declared.yolo_splits(located, located.catalog, given))

    def split_words(self, found: DeclaredSplits) -> Mapping[str, str] | None:
        """data.yaml's keys: `val` for validation."""
        return dict(zip(declared.SPLIT_ORDER, declared.YOLO_KEYS, strict=True))

    def names_from(self, located: Located, result: AnnotationSet) -> str:
        if located.paths:
            return located.paths[0].path
        read = [r for r, what in result.sources.items() if what == NAMES_READ]
        return read[0] if read else ""


_LABEL_FILES = _Labels()


def _largest_first(found: AnnotationSet) -> AnnotationSet:
    """Each picture's polygons largest first, so a smaller one lying on a larger one stays
    visible: the order Ultralytics' `polygons2masks_overlap` draws them in (by area, a stable
    sort: equal areas keep their lines' order)."""
    images = {
        relpath: dataclasses.replace(annotations, objects=tuple(sorted(annotations.objects, key=_minus_area)))
        for relpath, annotations in found.images.items()
    }
    return dataclasses.replace(found, images=images)


def _minus_area(item: ObjectBox) -> float:
    """A polygon's area (the shoelace formula, in the label's fractions), negated."""
    if not isinstance(item.mask, tuple):
        return 0.0
    area = 0.0
    for polygon in item.mask:
        xs, ys = polygon.points[0::2], polygon.points[1::2]
        area += abs(
            sum(
                x0 * y1 - x1 * y0
                for x0, y0, x1, y1 in zip(xs, ys, xs[1:] + xs[:1], ys[1:] + ys[:1], strict=True)
            )
        )
    return -area / 2


class Yolo(SourceFormat):
    name = "yolo"
    title = "YOLO"
    tasks = ("detection", "segmentation", "keypoints")
    help = "Ultralytics' YOLO labels: a .txt per picture in labels/, class names in data.yaml"
    looked_for: ClassVar[Mapping[str, str]] = {
        "detection": "labels/ mirroring images/ (Ultralytics' rule, beside --input too), a .txt beside "
        "each picture",
        "segmentation": "YOLO segmentation labels/ mirroring images/ (polygon lines, Ultralytics' rule)",
        "keypoints": "labels/ mirroring images/ (Ultralytics' rule, beside --input too), a .txt beside "
        "each picture",
    }
    searched_as: ClassVar[Mapping[str, str]] = {
        "detection": "YOLO labels/",
        "segmentation": "YOLO labels/",
        "keypoints": "YOLO labels/",
    }
    layout_as = "YOLO labels/*.txt"
    instead_as = "labels/*.txt (YOLO)"
    options = (
        "path",
        "masks",
        "label_map",
        "ignore_value",
        "allow_unmatched_annotations",
        "declared_splits",
    )
    suffixes = (".txt",)

    def claims(self, relpath: str, task: str) -> bool:
        return task in self.tasks and is_label_file(relpath)

    def score(self, task: str, listing: Listing) -> float:
        """Its label files' count; for segmentation only where the run asked for it (a
        classification run's guard names YOLO's labels for `--annotations yolo`, as ever)."""
        if task == "segmentation" and not listing.outside:
            return 0.0
        return score_objects(self, _LABEL_FILES, task, listing)

    def load(self, request: LoadRequest) -> AnnotationSet:
        """Objects; for segmentation, each picture's polygons as class masks drawn largest first
        (Ultralytics' overlap rule), class id 0 the background and YOLO's class i id i + 1."""
        if request.task != "segmentation":
            return load_objects(self, _LABEL_FILES, request)
        objects = dataclasses.replace(request, task="detection", masks=True, class_names=None)
        return class_masks_of(_largest_first(load_objects(self, _LABEL_FILES, objects)), request)


FORMAT = Yolo()
