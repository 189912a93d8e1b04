"""LabelMe: one JSON file per picture (LabelMe 5.x: `version`, `flags`, `shapes`, `imagePath`,
`imageData`, `imageHeight`, `imageWidth`), each shape a `label`, its `points` in the picture's
pixels, a `shape_type`, a `group_id` and (a `mask` shape) a base64 PNG of its box's region.

- `rectangle` (two corners, in either order) is a box; `polygon` (and 6.x's
  `oriented_rectangle`) a box with its outline; `circle` (its centre and a point on it) a box
  with the polygon labelme2coco.py gives the disc (12 points or more, no point of the arc further
  than a pixel from the line); `mask` a box with its pixels as run lengths over the picture.
- Shapes of one `label` and one `group_id` are one object: its outlines (or pixels) the union,
  its box their extent (labelme2coco.py's instances).
- `line` and `linestrip` have no area: dropped `not_drawn`. In a keypoints run a `point` is a
  keypoint of the one object its `group_id` joins it to (its `label` the keypoint's name, every
  class the run's sorted point names), else dropped `unattached_point`; in another run, and
  6.x's `points` in any, it is dropped `other_shape`.
- A segmentation run draws every shape, in file order (later covers earlier), as
  labelme2voc.py does: rectangles and circles filled too, `_background_` id 0 and `__ignore__`
  the ignore value (plan.annotations.shapes).

A JSON's picture is the listed picture of its stem beside it (LabelMe's own place for it), else
the one its `imagePath` names (relative to the JSON, Windows' `\\` read as `/`), else the one
listed picture of that file name. The picture on disk is the record: a JSON whose picture is not
listed is an unmatched entry, its embedded `imageData` not used. The declared `imageWidth` and
`imageHeight` are checked against the decoded picture.

Class names: a `labels.txt` (labelme2voc's `--labels` file: `__ignore__`, `_background_`, then
the classes) beside the JSON files or a folder or two up, in its order; else the labels found,
sorted. A detection run keeps neither `__ignore__` nor `_background_` as a class.
"""

from __future__ import annotations

import base64
import binascii
import dataclasses
import io
import json
import math
import posixpath
from collections import defaultdict
from collections.abc import Mapping, Sequence
from typing import ClassVar, NamedTuple

import numpy as np
from PIL import Image

from beam_tfrecord import reasons, storage
from beam_tfrecord.edges import Json
from beam_tfrecord.elements import ImageAnnotations, Mask, ObjectBox, Polygon
from beam_tfrecord.labels.polygon_raster import fill_polygons
from beam_tfrecord.plan.annotations.catalog import (
    MAX_IMAGE_ANNOTATION_BYTES,
    Catalog,
    read_many,
    read_one,
    stem,
)
from beam_tfrecord.plan.annotations.locate import (
    Located,
    join,
    listed_under,
    parents,
    relative_to,
    rerooted,
    under,
)
from beam_tfrecord.plan.annotations.objects import ObjectFiles, load_objects
from beam_tfrecord.plan.annotations.paths import AnnotationPath
from beam_tfrecord.plan.annotations.points import in_order
from beam_tfrecord.plan.annotations.results import AnnotationSet, ImageProblem, ObjectNote, UnmatchedEntry
from beam_tfrecord.plan.annotations.rle import from_mask
from beam_tfrecord.plan.annotations.shapes import BACKGROUND_NAMES, IGNORE_NAMES, class_masks_of
from beam_tfrecord.plan.sources.base import Listing, LoadRequest, SourceError, SourceFormat

__all__ = ["FORMAT", "LabelMe", "read_label_files"]

LABELS_TXT = "labels.txt"
# Folders beside an images folder where a LabelMe project keeps its JSON files (`--output`).
JSON_FOLDERS = ("annotations", "Annotations", "json", "jsons", "labelme", "labels")
# Shapes with an area: what becomes an object.
_AREA_SHAPES = frozenset({"polygon", "rectangle", "circle", "oriented_rectangle", "mask"})
_LINE_SHAPES = frozenset({"line", "linestrip", "point", "points"})
NAMES_READ = "LabelMe class names (labelme2voc's labels.txt), read"


class _Rejected(Exception):
    """A JSON that cannot annotate its picture: (reason, detail)."""


class _NotLabelMe(Exception):
    """A JSON file that is not LabelMe's (no `shapes` list): what it is."""


class _Shape(NamedTuple):
    label: str
    group: int | None
    kind: str
    points: tuple[tuple[float, float], ...]
    mask: str | None
    ref: str


@dataclasses.dataclass(frozen=True)
class _File:
    """One LabelMe JSON, parsed: what it names and its shapes in file order."""

    image_path: str
    width: int | None
    height: int | None
    embedded: bool
    shapes: tuple[_Shape, ...]
    dropped: tuple[tuple[str, str], ...]


class _Piece(NamedTuple):
    """One shape's geometry: its box, its outline (pixels x, y alternating) or its pixels."""

    box: tuple[float, float, float, float]
    outline: tuple[float, ...] | None
    pixels: np.ndarray | None
    boxed: bool  # a rectangle: a box first, its outline only where a mask is drawn


def _parse(data: bytes, display: str) -> _File:
    """A JSON's bytes -> its shapes; _Rejected for one that is not JSON, _NotLabelMe for JSON
    that is not LabelMe's."""
    try:
        document = json.loads(data.decode("utf-8-sig"))
    except UnicodeDecodeError:
        raise _Rejected(reasons.BAD_ANNOTATION.code, f"{display} is not UTF-8 text") from None
    except json.JSONDecodeError as error:
        where = f"line {error.lineno} column {error.colno}"
        raise _Rejected(
            reasons.BAD_ANNOTATION.code, f"{display} is not valid JSON: {error.msg} at {where}"
        ) from None
    if not isinstance(document, dict) or not isinstance(document.get("shapes"), list):
        raise _NotLabelMe("a JSON file without LabelMe's 'shapes'")
    image_path = document.get("imagePath")
    shapes: list[_Shape] = []
    dropped: list[tuple[str, str]] = []
    for number, raw in enumerate(document["shapes"], start=1):
        ref = f"{display}#shape {number}"
        try:
            shapes.append(_shape(raw, ref))
        except _Rejected as error:
            dropped.append((error.args[0], f"{ref}: {error.args[1]}"))
    return _File(
        image_path if isinstance(image_path, str) else "",
        _size(document.get("imageWidth")),
        _size(document.get("imageHeight")),
        isinstance(document.get("imageData"), str) and bool(document["imageData"]),
        tuple(shapes),
        tuple(dropped),
    )


def _size(value: Json) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) and value > 0 else None


def _shape(raw: Json, ref: str) -> _Shape:
    """One entry of `shapes`, checked as LabelMe's `_load_shape_json_obj` checks it."""
    if not isinstance(raw, dict):
        raise _Rejected(reasons.BAD_OBJECT.code, "not an object")
    label = raw.get("label")
    if not isinstance(label, str) or not label.strip():
        raise _Rejected(reasons.BAD_OBJECT.code, "no label")
    points = raw.get("points")
    if not isinstance(points, list) or not all(
        isinstance(p, list) and len(p) == 2 and all(_finite(v) for v in p) for p in points
    ):
        raise _Rejected(reasons.BAD_OBJECT.code, "its points are not a list of [x, y] numbers")
    kind = raw.get("shape_type") or "polygon"  # labelme2coco's default, and shape_to_mask's
    group = raw.get("group_id")
    if group is not None and (not isinstance(group, int) or isinstance(group, bool)):
        raise _Rejected(reasons.BAD_OBJECT.code, f"group_id {group!r} is not an integer")
    mask = raw.get("mask")
    return _Shape(
        label.strip(),
        group,
        str(kind),
        tuple((float(x), float(y)) for x, y in points),
        mask if isinstance(mask, str) else None,
        ref,
    )


def _finite(value: Json) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool) and math.isfinite(value)


def _piece(shape: _Shape, width: int | None, height: int | None) -> _Piece:
    """A shape with an area -> its geometry; _Rejected for one LabelMe would not draw."""
    points, kind = shape.points, shape.kind
    if kind in ("rectangle", "circle", "mask") and len(points) != 2:
        raise _Rejected(reasons.BAD_OBJECT.code, f"a {kind} of {len(points)} points, not 2")
    if kind in ("polygon", "oriented_rectangle") and len(points) < 3:
        raise _Rejected(reasons.BAD_OBJECT.code, f"a polygon of {len(points)} points, fewer than 3")
    if kind == "circle":
        return _circle(points)
    if kind == "mask":
        return _mask_piece(shape, width, height)
    if kind == "rectangle":
        (x1, y1), (x2, y2) = points
        x1, x2 = sorted((x1, x2))
        y1, y2 = sorted((y1, y2))
        outline: tuple[float, ...] = (x1, y1, x2, y1, x2, y2, x1, y2)  # labelme2coco's order
        return _checked(_Piece((x1, y1, x2, y2), outline, None, True))
    xs, ys = [x for x, _ in points], [y for _, y in points]
    outline = tuple(v for point in points for v in point)
    return _checked(_Piece((min(xs), min(ys), max(xs), max(ys)), outline, None, False))


def _checked(piece: _Piece) -> _Piece:
    xmin, ymin, xmax, ymax = piece.box
    if xmax <= xmin or ymax <= ymin:
        raise _Rejected(reasons.ZERO_AREA.code, f"box {xmin:g},{ymin:g} to {xmax:g},{ymax:g} has no area")
    return piece


def _circle(points: tuple[tuple[float, float], ...]) -> _Piece:
    """The disc as labelme2coco.py outlines it: N points on the circle, N the fewest that keep
    the arc within a pixel of each side (12 at least); its box the disc's."""
    (cx, cy), (px, py) = points
    radius = math.hypot(px - cx, py - cy)
    if radius == 0:
        raise _Rejected(reasons.ZERO_AREA.code, "a circle of radius 0 has no area")
    count = 12
    if radius >= 1:
        count = max(int(np.pi / np.arccos(1 - 1 / radius)), 12)
    steps = np.arange(count)
    xs = cx + radius * np.sin(2 * np.pi / count * steps)
    ys = cy + radius * np.cos(2 * np.pi / count * steps)
    outline = tuple(float(v) for v in np.stack((xs, ys), axis=1).flatten())
    return _Piece((cx - radius, cy - radius, cx + radius, cy + radius), outline, None, False)


def _mask_piece(shape: _Shape, width: int | None, height: int | None) -> _Piece:
    """A `mask` shape: its PNG laid at its first point (`shapes_to_label`'s
    `mask[y1:y2 + 1, x1:x2 + 1]`) in a picture of the declared size."""
    if shape.mask is None:
        raise _Rejected(reasons.BAD_OBJECT.code, "a mask shape without its mask")
    if width is None or height is None:
        raise _Rejected(reasons.BAD_OBJECT.code, "a mask shape in a file without imageWidth and imageHeight")
    try:
        with Image.open(io.BytesIO(base64.b64decode(shape.mask, validate=True))) as image:
            region = np.asarray(image) != 0
    except (binascii.Error, OSError, ValueError):
        raise _Rejected(reasons.BAD_OBJECT.code, "its mask is not a base64 PNG") from None
    if region.ndim == 3:
        region = region.any(axis=2)
    x1, y1 = (int(v) for v in shape.points[0])
    rows, columns = region.shape
    if x1 < 0 or y1 < 0 or x1 + columns > width or y1 + rows > height:
        detail = f"its {columns}x{rows} mask at {x1},{y1} passes the declared {width}x{height} picture"
        raise _Rejected(reasons.BAD_OBJECT.code, detail)
    pixels = np.zeros((height, width), dtype=bool)
    pixels[y1 : y1 + rows, x1 : x1 + columns] = region
    found = np.argwhere(pixels)
    if not found.size:
        raise _Rejected(reasons.ZERO_AREA.code, "its mask has no pixel set")
    (top, left), (bottom, right) = found.min(0), found.max(0) + 1
    return _Piece((float(left), float(top), float(right), float(bottom)), None, pixels, False)


def _union(pieces: Sequence[_Piece], width: int | None, height: int | None, outlined: bool) -> Mask:
    """The pieces' one mask: their outlines, or (where any is pixels) every piece's pixels. A lone
    rectangle has none unless `outlined` (a segmentation run draws it)."""
    if len(pieces) == 1 and pieces[0].boxed and not outlined:
        return None
    grids = [p.pixels for p in pieces if p.pixels is not None]
    outlines = [p.outline for p in pieces if p.outline is not None]
    if not grids:
        return tuple(Polygon(outline) for outline in outlines)
    assert width is not None and height is not None  # a mask piece needs the declared size
    pixels = np.logical_or.reduce(grids)
    if outlines:
        pixels |= fill_polygons(outlines, width, height).astype(bool)
    return from_mask(pixels)


Points = dict[str, tuple[float, float]]


def _objects(parsed: _File, task: str) -> tuple[list[ObjectBox], list[Points], list[tuple[str, str]]]:
    """A file's objects (shapes of one label and group_id joined; in a segmentation run every
    shape apart, in file order), each one's points by name (a keypoints run's), and the shapes
    left out as (reason, detail)."""
    dropped = list(parsed.dropped)
    groups: dict[object, list[tuple[_Shape, _Piece]]] = {}
    points: list[_Shape] = []
    for index, shape in enumerate(parsed.shapes):
        if shape.kind in _LINE_SHAPES:
            if shape.kind == "point" and task == "keypoints":
                points.append(shape)
            elif shape.kind in ("point", "points"):
                detail = f"{shape.ref}: a {shape.kind} shape, no object of a {task} run"
                dropped.append((reasons.OTHER_SHAPE.code, detail))
            else:
                dropped.append((reasons.NOT_DRAWN.code, f"{shape.ref}: a {shape.kind} has no area"))
            continue
        if shape.kind not in _AREA_SHAPES:
            detail = f"{shape.ref}: shape_type {shape.kind!r} is not LabelMe's"
            dropped.append((reasons.BAD_OBJECT.code, detail))
            continue
        try:
            piece = _piece(shape, parsed.width, parsed.height)
        except _Rejected as error:
            dropped.append((error.args[0], f"{shape.ref}: {error.args[1]}"))
            continue
        joined = shape.group is not None and task != "segmentation"
        groups.setdefault((shape.label, shape.group) if joined else index, []).append((shape, piece))
    objects = []
    for members in groups.values():
        first = members[0][0]
        boxes = [piece.box for _, piece in members]
        box = (
            min(b[0] for b in boxes),
            min(b[1] for b in boxes),
            max(b[2] for b in boxes),
            max(b[3] for b in boxes),
        )
        ref = first.ref + (f" (group {first.group}, {len(members)} shapes)" if len(members) > 1 else "")
        mask = _union([p for _, p in members], parsed.width, parsed.height, task == "segmentation")
        objects.append(ObjectBox(*box, first.label, mask=mask, source_ref=ref))
    owners = [members[0][0].group for members in groups.values()]
    return objects, _attached(owners, points, dropped), dropped


def _attached(
    owners: Sequence[int | None], points: Sequence[_Shape], dropped: list[tuple[str, str]]
) -> list[Points]:
    """Each object's points by name: a point joins the one object of its group_id."""
    by_group: dict[int, list[int]] = defaultdict(list)
    for index, group in enumerate(owners):
        if group is not None:
            by_group[group].append(index)
    attached: list[Points] = [{} for _ in owners]
    for shape in points:
        found = by_group.get(shape.group, []) if shape.group is not None else []
        if len(found) != 1:
            why = (
                "it has no group_id"
                if shape.group is None
                else f"group_id {shape.group} joins {len(found)} objects"
            )
            detail = f"{shape.ref}: point {shape.label!r}: {why}, not one box or outline"
            dropped.append((reasons.UNATTACHED_POINT.code, detail))
        elif shape.label in attached[found[0]]:
            detail = f"{shape.ref}: a second point {shape.label!r} of group {shape.group}"
            dropped.append((reasons.UNATTACHED_POINT.code, detail))
        else:
            attached[found[0]][shape.label] = shape.points[0]
    return attached


class _Claim(NamedTuple):
    """A JSON's picture, or why it has none: (picture relpaths, unmatched reason, detail)."""

    pictures: tuple[str, ...]
    reason: str = ""
    detail: str = ""


def _claim(
    json_relpath: str, parsed: _File | None, listed: Catalog, by_stem: Mapping[str, list[str]]
) -> _Claim:
    """The listed picture a JSON annotates: its stem's beside it, else its `imagePath`'s, else
    the one listed picture of `imagePath`'s file name."""
    named = (parsed.image_path if parsed else "").replace("\\", "/")
    beside = by_stem.get(stem(json_relpath), [])
    if len(beside) > 1 and named:
        beside = [r for r in beside if posixpath.basename(r) == posixpath.basename(named)] or beside
    if beside or parsed is None:
        return _Claim(tuple(beside))
    if not named:
        return _Claim((), reasons.BAD_ENTRY.code, "no listed picture has its stem and it has no imagePath")
    resolved = posixpath.normpath(posixpath.join(posixpath.dirname(json_relpath), named))
    if resolved in listed.images:
        return _Claim((resolved,))
    found = listed.matches(posixpath.basename(named))
    if len(found) == 1:
        return _Claim((found[0],))
    if found:
        shown = ", ".join(found[:3])
        return _Claim(
            (), reasons.AMBIGUOUS_IMAGE.code, f"imagePath {named!r} could be {shown}: none has its stem"
        )
    embedded = "; its embedded imageData is not used: put the picture beside it" if parsed.embedded else ""
    return _Claim(
        (), reasons.MISSING_IMAGE.code, f"no listed picture has its stem or imagePath's name{embedded}"
    )


def _parse_all(files: Sequence[str], listed: Catalog) -> dict[str, _File | _Rejected | _NotLabelMe]:
    """relpath -> the parsed JSON or why not (read in parallel from gs://)."""
    results: dict[str, _File | _Rejected | _NotLabelMe] = {}
    small = {}
    for relpath in files:
        file = listed.annotation_files[relpath]
        if file.size > MAX_IMAGE_ANNOTATION_BYTES:
            results[relpath] = _NotLabelMe(
                f"a JSON file of {file.size / 2**20:.0f} MiB, too large for LabelMe's"
            )
        else:
            small[file.path] = relpath
    for path, data, error in read_many(list(small)):
        relpath = small[path]
        if data is None:
            results[relpath] = _Rejected(reasons.BAD_ANNOTATION.code, f"{relpath} {error}")
            continue
        try:
            results[relpath] = _parse(data, relpath)
        except (_Rejected, _NotLabelMe) as failed:
            results[relpath] = failed
    return results


def read_label_files(listed: Catalog, task: str, masks: bool = True) -> AnnotationSet:
    """Every listed picture's objects from its LabelMe JSON (see the module docstring), before
    their class names are settled (`_named`)."""
    jsons = [r for r in listed.annotation_files if r.lower().endswith(".json")]
    parsed = _parse_all(jsons, listed)
    by_stem: dict[str, list[str]] = defaultdict(list)
    for relpath in listed.images:
        by_stem[stem(relpath)].append(relpath)
    claimed: dict[str, list[str]] = defaultdict(list)  # picture -> the JSONs that claim it
    pictures_of: dict[str, tuple[str, ...]] = {}  # JSON -> the pictures it claims
    unmatched: list[UnmatchedEntry] = []
    sources: dict[str, str] = {}
    for relpath in jsons:
        result = parsed[relpath]
        claim = _claim(relpath, result if isinstance(result, _File) else None, listed, by_stem)
        if isinstance(result, _NotLabelMe):  # another tool's JSON (ADE20K's, COCO's): not ours
            sources[relpath] = f"{result.args[0]}, not read by this LabelMe run"
        elif isinstance(result, _Rejected) and not claim.pictures:
            sources[relpath] = f"{result.args[1]}; no listed picture has its stem"
        elif claim.pictures:
            pictures_of[relpath] = claim.pictures
            for picture in claim.pictures:
                claimed[picture].append(relpath)
            sources[relpath] = f"LabelMe annotations of {', '.join(claim.pictures)}"
        else:
            assert isinstance(result, _File)
            count = len(result.shapes) + len(result.dropped)
            unmatched.append(UnmatchedEntry(relpath, result.image_path, claim.reason, claim.detail, count))

    images: dict[str, ImageAnnotations] = {}
    problems: list[ImageProblem] = []
    dropped: list[ObjectNote] = []
    points_of: dict[str, list[Points]] = {}
    for picture, files in claimed.items():
        json_relpath = files[0]
        result = parsed[json_relpath]
        if len(files) > 1:
            detail = f"{' and '.join(files)} both claim it"
            problems.append(ImageProblem(picture, reasons.AMBIGUOUS_ANNOTATION.code, detail))
        elif len(pictures_of[json_relpath]) > 1:
            others = ", ".join(p for p in pictures_of[json_relpath] if p != picture)
            detail = f"{json_relpath} could be for {others} too"
            problems.append(ImageProblem(picture, reasons.AMBIGUOUS_ANNOTATION.code, detail))
        elif not isinstance(result, _File):
            problems.append(ImageProblem(picture, *result.args))
        else:
            objects, points, left_out = _objects(result, task)
            if not masks:
                objects = [obj._replace(mask=None) for obj in objects]
            size = (result.width, result.height)
            images[picture] = ImageAnnotations(tuple(objects), posixpath.basename(picture), False, *size)
            points_of[picture] = points
            dropped += [ObjectNote(picture, reason, detail) for reason, detail in left_out]
    unannotated = [r for r in listed.images if r not in claimed]
    for relpath in unannotated:
        images[relpath] = ImageAnnotations((), posixpath.basename(relpath))
    found = AnnotationSet(
        format="labelme",
        class_names=(),
        images=images,
        unannotated=frozenset(unannotated),
        sources=sources,
        problems=tuple(sorted(problems)),
        unmatched=tuple(unmatched),
        dropped=tuple(sorted(dropped)),
        task=task,
    )
    return _keypoints_set(found, points_of) if task == "keypoints" else found


def _keypoints_set(found: AnnotationSet, points_of: Mapping[str, list[Points]]) -> AnnotationSet:
    """Every object's points in the run's order of names (every point name found, sorted: the
    same for every class). SourceError where no point joins an object."""
    names = sorted(
        {name for points in points_of.values() for found_points in points for name in found_points}
    )
    if not names:
        raise SourceError(
            "LabelMe: no point shape is joined to a box or outline by its group_id; a keypoints run "
            "needs them (use --task detection for the boxes alone)"
        )
    images = dict(found.images)
    for relpath, points in points_of.items():
        picture = images[relpath]
        objects = tuple(
            obj._replace(keypoints=in_order(p, names)) for obj, p in zip(picture.objects, points, strict=True)
        )
        images[relpath] = dataclasses.replace(picture, objects=objects)
    return dataclasses.replace(found, images=images, keypoint_names={"": tuple(names)})


def _labels_txt(path: str) -> list[str]:
    """labelme2voc's `--labels` file: one name a line (`__ignore__` and `_background_` first)."""
    try:
        text = read_one(path).decode("utf-8-sig")
    except UnicodeDecodeError:
        raise SourceError(f"LabelMe class names: {path} is not UTF-8 text", file=path) from None
    except Exception as error:
        raise SourceError(f"LabelMe class names: {path} cannot be read: {error}", file=path) from None
    names = [line.strip() for line in text.splitlines() if line.strip()]
    twice = sorted({name for name in names if names.count(name) > 1})
    if twice:
        raise SourceError(f"LabelMe class names: {path} names {twice[0]!r} twice", file=path)
    return names


def _named(found: AnnotationSet, labels: list[str] | None, task: str, where: str) -> AnnotationSet:
    """The class names (labels.txt's, else the labels found, sorted; a segmentation run's
    background first) and the objects restricted to them: `__ignore__` and `_background_` shapes
    are regions, no objects of a detection run; a label labels.txt lacks is dropped, as
    labelme2coco.py leaves it out."""
    regions = IGNORE_NAMES | (BACKGROUND_NAMES - {"background"} if task != "segmentation" else frozenset())
    if labels is not None:
        names = [name for name in labels if name not in regions]
    else:
        seen = {obj.class_name for picture in found.images.values() for obj in picture.objects}
        kept = seen - regions
        names = sorted(kept & BACKGROUND_NAMES) + sorted(kept - BACKGROUND_NAMES)
    known = set(names) | (IGNORE_NAMES if task == "segmentation" else set())
    images = dict(found.images)
    dropped = list(found.dropped)
    for relpath, picture in found.images.items():
        if all(obj.class_name in known for obj in picture.objects):
            continue
        for obj in picture.objects:
            if obj.class_name in regions:
                detail = f"{obj.source_ref}: a {obj.class_name!r} region, no object of a {task} run"
                dropped.append(ObjectNote(relpath, reasons.UNKNOWN_CATEGORY.code, detail))
            elif obj.class_name not in known:
                detail = f"{obj.source_ref}: class {obj.class_name!r} is not in {where}"
                dropped.append(ObjectNote(relpath, reasons.UNKNOWN_CATEGORY.code, detail))
        kept_objects = tuple(obj for obj in picture.objects if obj.class_name in known)
        images[relpath] = dataclasses.replace(picture, objects=kept_objects)
    points = found.keypoint_names.get("")
    return dataclasses.replace(
        found,
        class_names=tuple(names),
        images=images,
        dropped=tuple(sorted(dropped)),
        keypoint_names={name: points for name in names} if points is not None else {},
    )


def _find_labels(located: Located, base: str) -> str:
    """labelme2voc's labels.txt beside the JSON files or a folder or two up (the shallowest JSON
    folder's), under the input or above it; "" where there is none."""
    folders = sorted(
        {posixpath.dirname(r) for r in located.catalog.annotation_files if r.lower().endswith(".json")},
        key=lambda folder: (folder.count("/") if folder else -1, folder),
    )
    if not folders:
        return ""
    root = located.root or base
    nearest = join(root, folders[0]) if folders[0] else root
    for folder in [nearest, *parents(nearest)][:3]:
        under_root = relative_to(folder, root)
        listed = None
        if under_root is not None:
            listed = located.catalog.annotation_files.get(
                join(under_root, LABELS_TXT) if under_root else LABELS_TXT
            )
        if listed is not None:
            return listed.path
        if storage.is_file(join(folder, LABELS_TXT)):
            return join(folder, LABELS_TXT)
    return ""


def _locate(base: str, listed: Catalog, paths: tuple[AnnotationPath, ...]) -> Located:
    """The JSON files: a folder named with annotations_path, else those listed, else beside the
    input (its parent's `*.json`, or a sibling `annotations/`, `json/`, ... folder: LabelMe's
    `--output`), seen from the common root so each `imagePath` resolves; and the labels.txt."""
    folders = [p.path.rstrip("/") for p in paths if not p.path.lower().endswith(".txt")]
    given_names = [p.path for p in paths if p.path.lower().endswith(".txt")]
    located = Located(listed)
    if folders:
        folder = folders[0]
        found = listed_under(folder, (".json",))
        if not found:
            raise SourceError(f"{folder} holds no JSON files", field="annotations_path", file=folder)
        root = next((r for r in [folder, *parents(folder)] if relative_to(base, r) is not None), "")
        root = root or posixpath.dirname(folder)
        prefix = relative_to(base, root) or ""
        prefix = prefix + "/" if prefix else ""
        located = Located(rerooted(listed, prefix, under(root, folder, found)), prefix, root, (folder,))
    elif not any(r.lower().endswith(".json") for r in listed.annotation_files):
        parent = posixpath.dirname(base.rstrip("/"))
        beside = under(parent, parent, listed_under(join(parent, "*.json"), (".json",)))
        looked = [parent] if beside else []
        for name in JSON_FOLDERS:
            folder = join(parent, name)
            if folder != base.rstrip("/"):
                sibling = under(parent, folder, listed_under(folder, (".json",)))
                looked += [folder] if sibling else []
                beside |= sibling
        if beside:
            prefix = posixpath.basename(base.rstrip("/")) + "/"
            located = Located(rerooted(listed, prefix, beside), prefix, parent, tuple(looked))
    names = given_names[0] if given_names else _find_labels(located, base)
    return dataclasses.replace(located, paths=(AnnotationPath(names),) if names else ())


class _JsonFiles(ObjectFiles):
    """LabelMe's JSON files, and the labels.txt (or a folder of JSONs) named with annotations_path."""

    def given(self, path: str, task: str) -> bool:
        return False  # LabelMe is found by its JSON files beside the pictures, never by a path

    def locate(
        self, base: str, listed: Catalog, paths: tuple[AnnotationPath, ...], keypoints: bool
    ) -> Located:
        return _locate(base, listed, paths)

    def read(self, located: Located, request: LoadRequest) -> AnnotationSet:
        names = located.paths[0].path if located.paths else ""
        found = read_label_files(
            located.catalog, request.task, request.masks or request.task == "segmentation"
        )
        labels = _labels_txt(names) if names else None
        found = _named(found, labels, request.task, names or "labels.txt")
        for relpath, file in located.catalog.annotation_files.items():
            if file.path == names:
                found = dataclasses.replace(found, sources={**found.sources, relpath: NAMES_READ})
        return found

    def names_from(self, located: Located, result: AnnotationSet) -> str:
        return located.paths[0].path if located.paths else ""


_JSON_FILES = _JsonFiles()
# The names COCO's files take (COCO reads them): never LabelMe's.
_COCO_NAMES = ("instances_", "person_keypoints_", "captions_", "panoptic_", "image_info_")


class LabelMe(SourceFormat):
    name = "labelme"
    title = "LabelMe"
    tasks = ("detection", "segmentation", "keypoints")
    help = "LabelMe's JSON files: one per picture, beside it or in a folder beside the pictures"
    looked_for: ClassVar[Mapping[str, str]] = {
        task: "a LabelMe JSON beside each picture (or in annotations/ beside images/), labels.txt for names"
        for task in ("detection", "segmentation", "keypoints")
    }
    searched_as: ClassVar[Mapping[str, str]] = {
        task: "LabelMe JSONs" for task in ("detection", "segmentation", "keypoints")
    }
    layout_as = "LabelMe JSON files"
    instead_as = "JSON files (LabelMe)"
    options = ("path", "masks", "ignore_value", "allow_unmatched_annotations")
    suffixes = (".json",)

    def claims(self, relpath: str, task: str) -> bool:
        """A `.json` that is not COCO's nor another picture's sidecar (`x.jpg.json`)."""
        name = posixpath.basename(relpath).lower()
        if task not in self.tasks or not name.endswith(".json") or name.startswith(_COCO_NAMES):
            return False
        inner = posixpath.splitext(name[: -len(".json")])[1]
        return name != "_annotations.coco.json" and inner not in (".jpg", ".jpeg", ".png", ".heic", ".mp4")

    def score(self, task: str, listing: Listing) -> float:
        """Its JSON files of a listed picture's stem (a segmentation run's only where asked)."""
        if (task == "segmentation" and not listing.outside) or listing.paths:
            return 0.0
        stems = {posixpath.basename(stem(r)) for r in listing.catalog.images}
        return float(
            sum(
                1
                for relpath in listing.catalog.annotation_files
                if self.claims(relpath, task) and posixpath.basename(stem(relpath)) in stems
            )
        )

    def load(self, request: LoadRequest) -> AnnotationSet:
        """Objects; for segmentation, every shape as class masks drawn in file order
        (plan.annotations.shapes)."""
        if request.task != "segmentation":
            return load_objects(self, _JSON_FILES, request)
        shapes = dataclasses.replace(request, class_names=None, masks=True)
        return class_masks_of(load_objects(self, _JSON_FILES, shapes), request)


FORMAT = LabelMe()
