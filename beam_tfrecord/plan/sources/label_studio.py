"""Label Studio: one JSON export of a project -> each listed picture's objects (detection) or the
class mask its shapes draw (segmentation); its choices are each picture's image-level classes
(`image_classes`). docs/label-studio.md is the user's account; in short:

- the full export (a list of tasks: `id`, `data.image`, `annotations[].result[]`) and JSON-MIN (a
  flat record per annotation: `image`, `id`, each control's values under its name) are both read;
- `x`, `y`, `width`, `height` and `points` are percent of `original_width`/`original_height`,
  stored in pixels with that size declared; a `rotation` (degrees, clockwise about the top-left
  corner) is kept as the axis-aligned box that holds it, its corners as its mask (`rotated_box`);
  a brush is Label Studio's rle-pack of an RGBA picture (`decode_brush`: alpha not 0 is painted);
- keypoints: a `keypointlabels` point joins the box its `parentID` names, else the one box that
  holds it (plan.annotations.points); every class's names the sorted point labels;
- one annotation a task: never a prediction nor a cancelled one; the `ground_truth`, else the
  newest (`created_at`); class names sorted; a region with several labels one object per label;
- a task's picture is matched by its path, else its file name, else that name without an
  upload's `1a2b3c4d-` prefix; a name that matches several files is `ambiguous_image`;
- the export is the JSON named with `annotations_path`, else a `.json` under the input whose
  content is an export, else one in the input's parent or grandparent.
"""

from __future__ import annotations

import dataclasses
import json
import math
import posixpath
import re
from collections import defaultdict
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import ClassVar
from urllib.parse import parse_qs, unquote, urlsplit

import numpy as np

from beam_tfrecord import reasons, storage
from beam_tfrecord.edges import Json
from beam_tfrecord.elements import ImageAnnotations, ObjectBox, Polygon, RunLengths
from beam_tfrecord.plan.annotations.catalog import Catalog, describe_error, partition, read_one, stem
from beam_tfrecord.plan.annotations.locate import (
    Located,
    input_base,
    join,
    listed_under,
    parents,
    relative_to,
    rerooted,
    under,
)
from beam_tfrecord.plan.annotations.objects import ObjectFiles, load_objects
from beam_tfrecord.plan.annotations.outlines import extent, turned_box
from beam_tfrecord.plan.annotations.paths import AnnotationPath
from beam_tfrecord.plan.annotations.picture_classes import picture_classes_of
from beam_tfrecord.plan.annotations.points import LoosePoint, attach, in_order
from beam_tfrecord.plan.annotations.results import AnnotationSet, ImageProblem, ObjectNote, UnmatchedEntry
from beam_tfrecord.plan.annotations.rle import BadRunLengths, from_mask, unpack_words
from beam_tfrecord.plan.annotations.rle import extent as rle_extent
from beam_tfrecord.plan.annotations.shapes import class_masks_of
from beam_tfrecord.plan.listing import InputFile
from beam_tfrecord.plan.sources.base import CERTAIN, Listing, LoadRequest, SourceError, SourceFormat

__all__ = ["FORMAT", "LabelStudio", "decode_brush", "image_classes", "is_export"]

# Label Studio names an export `project-<id>-at-<date>-<time>-<hash>.json`.
_EXPORT_NAME = re.compile(r"^project-\d+-at-[\d-]+-[0-9a-f]+\.json$", re.IGNORECASE)
# The upload prefix Label Studio puts before an uploaded file's name (`1a2b3c4d-x.jpg`).
_UPLOAD_PREFIX = re.compile(r"^[0-9a-f]{8}-", re.IGNORECASE)
# How much of a JSON file is read to tell whether it is an export, and how many are read so.
_HEAD_BYTES = 1 << 20
_MOST_SNIFFED = 8
_MOST_REMOTE_BYTES = 64 << 20
# An export is parsed whole; one larger than this is a mistake or hostile.
MAX_EXPORT_BYTES = 2 << 30
# A brush's picture, in pixels, past which its run lengths are not decoded (a 16k x 16k picture).
_MOST_BRUSH_PIXELS = 1 << 28
# A JSON-MIN record's own keys (the converter's), never a control's.
_MIN_KEYS = frozenset(
    {"id", "annotator", "annotation_id", "created_at", "updated_at", "lead_time", "agreement", "drafts"}
)
_LABEL_KEYS = ("rectanglelabels", "polygonlabels", "brushlabels", "keypointlabels", "ellipselabels", "labels")
_PICTURE = re.compile(r"\.(jpe?g|png|gif|bmp|webp|tiff?|heic|avif)$", re.IGNORECASE)


@dataclass(frozen=True)
class _Region:
    """One region of the chosen annotation: its value, its labels and its picture's size."""

    ref: str
    value: Mapping[str, Json]
    labels: tuple[str, ...]
    width: float | None
    height: float | None
    rid: str | None = None
    parent: str | None = None


@dataclass
class _Task:
    """One task as the export holds it: where, the picture it names, the chosen annotation's
    regions and choices, and whether any annotation was kept."""

    where: str
    task_id: str
    image: str
    regions: list[_Region] = field(default_factory=list)
    choices: tuple[str, ...] = ()
    annotated: bool = False


def is_export(head: bytes) -> bool:
    """Whether a JSON file's first bytes are a Label Studio export (full or JSON-MIN): a list
    whose first entry is a task (`data` and `annotations`) or a JSON-MIN record (an
    `annotation_id`, or values with `original_width`); an entry too long for the head is told by
    Label Studio's own words in it."""
    text = head.decode("utf-8-sig", errors="replace").lstrip()
    if not text.startswith("["):
        return False
    rest = text[1:].lstrip()
    if rest.startswith("]"):
        return False
    try:
        first, _ = json.JSONDecoder().raw_decode(rest)
    except json.JSONDecodeError:
        return bool(re.search(r'"(from_name|original_width)"\s*:', text)) and bool(
            re.search(r'"(annotations|annotation_id|[a-z]+labels)"\s*:', text)
        )
    return isinstance(first, dict) and (_is_task(first) or _is_min_record(first))


def _is_task(entry: Mapping[str, Json]) -> bool:
    return isinstance(entry.get("data"), dict) and any(
        isinstance(entry.get(k), list) for k in ("annotations", "completions", "predictions")
    )


def _is_min_record(entry: Mapping[str, Json]) -> bool:
    return "annotation_id" in entry or any(
        isinstance(v, list) and any(isinstance(i, dict) and "original_width" in i for i in v)
        for v in entry.values()
    )


def _sniff(file: InputFile) -> bool:
    """Whether a listed JSON file is an export, from its first bytes (a file that cannot be read
    is none: the run that names it says why)."""
    try:
        return is_export(storage.read_bytes(file.path, limit=_HEAD_BYTES)[:_HEAD_BYTES])
    except Exception:  # not readable: not found as an export
        return False


def _exports(files: Iterable[InputFile]) -> list[InputFile]:
    """The listed JSON files that are exports: Label Studio's own names first, then the
    shallowest, at most _MOST_SNIFFED read (a LabelMe tree holds a JSON per picture); a remote
    file past _MOST_REMOTE_BYTES only by its name (a remote read is of the whole object)."""
    candidates = sorted(
        (
            f
            for f in files
            if f.relpath.lower().endswith(".json")
            and (
                f.size <= _MOST_REMOTE_BYTES
                or not storage.is_remote(f.path)
                or _EXPORT_NAME.match(posixpath.basename(f.relpath))
            )
        ),
        key=lambda f: (
            not _EXPORT_NAME.match(posixpath.basename(f.relpath)),
            f.relpath.count("/"),
            f.relpath,
        ),
    )
    return sorted((f for f in candidates[:_MOST_SNIFFED] if _sniff(f)), key=lambda f: f.relpath)


def _beside(base: str) -> tuple[str, dict[str, InputFile]]:
    """The exports in the input's parent or grandparent: (that folder, relpath -> file)."""
    for root in parents(base)[:2]:
        found = under(root, root, listed_under(join(root, "*.json"), (".json",)))
        exports = {f.relpath: f for f in _exports(found.values())}
        if exports:
            return root, exports
    return "", {}


def _read_export(path: str, shown: str) -> list[Json]:
    """An export's entries; SourceError naming the file for one that is not an export."""
    try:
        data = read_one(path)
    except Exception as error:
        raise SourceError(f"{shown} cannot be read: {describe_error(error)}", file=shown) from None
    if len(data) > MAX_EXPORT_BYTES:
        raise SourceError(f"{shown} is {len(data) / 2**30:.1f} GiB, too large for an export", file=shown)
    try:
        document = json.loads(data.decode("utf-8-sig"))
    except (UnicodeDecodeError, json.JSONDecodeError) as error:
        raise SourceError(f"{shown} is not JSON: {error}", file=shown) from None
    if not isinstance(document, list) or not all(isinstance(e, dict) for e in document):
        raise SourceError(
            f"{shown} is not a Label Studio export (a list of tasks, or JSON-MIN records)", file=shown
        )
    return document


def _tasks(entries: Sequence[Json], shown: str) -> tuple[list[_Task], list[UnmatchedEntry], int]:
    """An export's tasks (full or JSON-MIN), the entries that name no picture, and how many tasks
    had several annotations."""
    full = any(_is_task(e) for e in entries)
    tasks: list[_Task] = []
    bad: list[UnmatchedEntry] = []
    several = 0
    if full:
        for index, entry in enumerate(entries):
            where = f"{shown}#task {entry.get('id', index)}"
            data = entry.get("data")
            image = _picture_of(data) if isinstance(data, dict) else None
            if image is None:
                bad.append(
                    UnmatchedEntry(where, "", reasons.BAD_ENTRY.code, "the task's data names no picture")
                )
                continue
            kept = [
                a
                for a in entry.get("annotations", entry.get("completions")) or []
                if isinstance(a, dict) and not (a.get("was_cancelled") or a.get("skipped"))
            ]
            several += len(kept) > 1
            task = _Task(where, str(entry.get("id", index)), image)
            chosen = _chosen(kept, ground_truth=True)
            if chosen is not None:
                task.annotated = True
                task.regions, task.choices = _full_results(chosen.get("result") or [], where)
            tasks.append(task)
        return tasks, bad, several
    records: dict[Json, list[tuple[int, Mapping[str, Json]]]] = defaultdict(list)
    for index, entry in enumerate(entries):
        task_id = entry.get("id")
        records[task_id if isinstance(task_id, int | str) else f"#{index}"].append((index, entry))
    for task_id, group in records.items():
        where = f"{shown}#task {task_id}"
        image = _picture_of(group[0][1])
        if image is None:
            bad.append(UnmatchedEntry(where, "", reasons.BAD_ENTRY.code, "the record names no picture"))
            continue
        annotated = [entry for _, entry in group if entry.get("annotation_id") is not None]
        several += len(annotated) > 1
        task = _Task(where, str(task_id), image)
        chosen = _chosen(annotated, ground_truth=False)
        if chosen is not None:
            task.annotated = True
            task.regions, task.choices = _min_values(chosen, where, image)
        tasks.append(task)
    return tasks, bad, several


def _chosen(annotations: Sequence[Mapping[str, Json]], ground_truth: bool) -> Mapping[str, Json] | None:
    """The annotation kept: the ground truth, else the newest (the first listed on a tie)."""
    if not annotations:
        return None
    if ground_truth:
        marked = [a for a in annotations if a.get("ground_truth") is True]
        if marked:
            return marked[0]
    newest = max(str(a.get("created_at") or "") for a in annotations)
    return next(a for a in annotations if str(a.get("created_at") or "") == newest)


def _picture_of(data: Mapping[str, Json]) -> str | None:
    """The picture a task's data names: `image`, else the first value that reads as one."""
    value = data.get("image")
    if isinstance(value, str) and value:
        return value
    for key, value in data.items():
        if key not in _MIN_KEYS and isinstance(value, str) and _PICTURE.search(urlsplit(value).path or value):
            return value
    return None


def _labels_of(value: Mapping[str, Json]) -> tuple[str, ...] | None:
    """A region's labels (None: a value without any labels key)."""
    for key in _LABEL_KEYS:
        found = value.get(key)
        if isinstance(found, list):
            return tuple(str(label) for label in found)
    return None


def _size(value: Mapping[str, Json]) -> tuple[float | None, float | None]:
    found = []
    for key in ("original_width", "original_height"):
        size = value.get(key)
        if not isinstance(size, int | float) or isinstance(size, bool) or not size > 0:
            return None, None
        found.append(float(size))
    return found[0], found[1]


def _ids(found: Mapping[str, Json]) -> tuple[str | None, str | None]:
    """A result's `id` and `parentID` (JSON-MIN's value holds them in a keypoints project)."""
    rid, parent = found.get("id"), found.get("parentID")
    return (str(rid) if isinstance(rid, str | int) else None, str(parent) if parent else None)


def _is_shape(value: Mapping[str, Json]) -> bool:
    return any(k in value for k in ("x", "points", "rle"))


def _full_results(results: Sequence[Json], where: str) -> tuple[list[_Region], tuple[str, ...]]:
    """A full export's results -> its regions and choices. A shape without labels whose id a
    labelled result repeats (`<Rectangle>` with `<Labels>`) is that region, not another."""
    labelled_ids = {
        r.get("id")
        for r in results
        if isinstance(r, dict) and isinstance(r.get("value"), dict) and _labels_of(r["value"])
    }
    regions: list[_Region] = []
    choices: list[str] = []
    for index, result in enumerate(results):
        if not isinstance(result, dict) or not isinstance(result.get("value"), dict):
            continue
        value = result["value"]
        if isinstance(value.get("choices"), list):
            choices += [str(c) for c in value["choices"]]
            continue
        if not _is_shape(value):
            continue  # a text area, a rating, a relation: not a region of the picture
        labels = _labels_of(value)
        if not labels and result.get("id") in labelled_ids:
            continue
        width, height = _size(result)
        ref = f"{where}#result {result.get('id', index)}"
        regions.append(_Region(ref, value, labels or (), width, height, *_ids(result)))
    return regions, tuple(dict.fromkeys(choices))


def _min_values(record: Mapping[str, Json], where: str, image: str) -> tuple[list[_Region], tuple[str, ...]]:
    """A JSON-MIN record's regions and choices: every control's values in the record's order. A
    single choice is written as a bare string, so a string beside the picture's key that is not
    the converter's own key is taken as one."""
    regions: list[_Region] = []
    choices: list[str] = []
    for key, values in record.items():
        if key in _MIN_KEYS or values == image:
            continue
        items = values if isinstance(values, list) else [values]
        for index, item in enumerate(items):
            if isinstance(item, str):
                if not isinstance(values, list) or all(isinstance(i, str) for i in items):
                    choices.append(item)
                continue
            if not isinstance(item, dict):
                continue
            if isinstance(item.get("choices"), list):
                choices += [str(c) for c in item["choices"]]
                continue
            if not _is_shape(item):
                continue
            width, height = _size(item)
            ref = f"{where}#{key} {index}"
            regions.append(_Region(ref, item, _labels_of(item) or (), width, height, *_ids(item)))
    return regions, tuple(dict.fromkeys(choices))


class _Dropped(Exception):
    """A region left out: (reason, detail)."""


def _number(value: Mapping[str, Json], key: str) -> float:
    found = value.get(key)
    if not isinstance(found, int | float) or isinstance(found, bool) or not math.isfinite(found):
        raise _Dropped(reasons.BAD_OBJECT.code, f"its {key!r} is {found!r}, not a number")
    return float(found)


def _objects(region: _Region, masks: bool, outlines: bool) -> tuple[list[ObjectBox], str | None]:
    """A region's objects (one per label) and the object note it makes (None: none). Raises
    _Dropped for a region that is none. `outlines`: a segmentation run's, where a box without
    an outline is kept as one (to be dropped `not_drawn` with the others)."""
    value = region.value
    if not region.labels:
        raise _Dropped(reasons.UNKNOWN_CATEGORY.code, "a region without a label")
    if region.width is None or region.height is None:
        raise _Dropped(reasons.BAD_OBJECT.code, "no original_width and original_height to scale its percent")
    width, height = region.width, region.height
    note = None
    mask: tuple[Polygon, ...] | RunLengths | None = None
    if "rle" in value:
        mask = from_mask(decode_brush(value.get("rle"), int(width), int(height)))
        painted = rle_extent(mask)
        if painted is None:
            raise _Dropped(reasons.ZERO_AREA.code, "a brush stroke with no painted pixel")
        box = painted
    elif "points" in value:
        points = value.get("points")
        if not isinstance(points, list) or not all(
            isinstance(p, list)
            and len(p) == 2
            and all(isinstance(c, int | float) and math.isfinite(c) for c in p)
            for p in points
        ):
            raise _Dropped(reasons.BAD_OBJECT.code, "its points are not [x, y] pairs of numbers")
        if len(points) < 3:
            raise _Dropped(reasons.NOT_DRAWN.code, f"a polygon of {len(points)} points has no area")
        flat = tuple(c for x, y in points for c in (x / 100 * width, y / 100 * height))
        xs, ys = flat[0::2], flat[1::2]
        box = (min(xs), min(ys), max(xs), max(ys))
        mask = (Polygon(flat),)
    elif "radiusX" in value:
        raise _Dropped(reasons.OTHER_SHAPE.code, "an ellipse, which is not read")
    elif "width" in value and "height" in value:
        x, y = _number(value, "x") / 100 * width, _number(value, "y") / 100 * height
        w, h = _number(value, "width") / 100 * width, _number(value, "height") / 100 * height
        rotation = value.get("rotation") or 0.0
        if not isinstance(rotation, int | float) or not math.isfinite(rotation):
            raise _Dropped(reasons.BAD_OBJECT.code, f"its rotation is {rotation!r}, not a number")
        if rotation % 360:
            # Clockwise about the top-left corner, in the picture's pixels (y down).
            corners = turned_box(x, y, x + w, y + h, rotation, about=(x, y))
            box = extent(corners)
            if not outlines:  # a box: no outline to draw in a class mask, rotated or not
                mask = (Polygon(tuple(corners)),)
                note = reasons.ROTATED_BOX.code
        else:
            box = (x, y, x + w, y + h)
    else:
        raise _Dropped(
            reasons.OTHER_SHAPE.code, "a key point, which a detection or segmentation run does not store"
        )
    if not box[2] > box[0] or not box[3] > box[1]:
        raise _Dropped(reasons.ZERO_AREA.code, "its box has no area")
    if not (masks or outlines):
        mask = None
    return [ObjectBox(*box, label, mask=mask, source_ref=region.ref) for label in region.labels], note


def decode_brush(rle: Json, width: int, height: int) -> np.ndarray:
    """Label Studio's brush run lengths (thi-ng's rle-pack of the picture's RGBA bytes, as
    label-studio-converter's `brush.decode_rle` reads them) -> the painted pixels (alpha not 0),
    a `height` x `width` array of bools. Raises _Dropped(mask_invalid) for bytes that are not a
    `width` x `height` RGBA picture's."""
    if width * height > _MOST_BRUSH_PIXELS or width <= 0 or height <= 0:
        raise _Dropped(reasons.MASK_INVALID.code, f"a brush over {width}x{height} pixels is not decoded")
    if not isinstance(rle, list):
        raise _Dropped(reasons.MASK_INVALID.code, "its rle is not a list of bytes")
    try:
        words = unpack_words(rle, 4 * width * height)
    except BadRunLengths as error:
        raise _Dropped(reasons.MASK_INVALID.code, f"{error} (a {width}x{height} RGBA picture's)") from None
    return np.asarray(words[3::4].reshape(height, width) != 0)


def _names(reference: str) -> list[str]:
    """The names a task's picture may be listed under, tried in order: its path, its file name,
    its file name without the upload prefix."""
    parts = urlsplit(reference)
    local = parse_qs(parts.query).get("d") if parts.path.rstrip("/").endswith("local-files") else None
    path = unquote(local[0] if local else parts.path if parts.scheme or parts.query else reference)
    name = posixpath.basename(path)
    names = [path, name]
    if _UPLOAD_PREFIX.match(name):
        names.append(_UPLOAD_PREFIX.sub("", name))
    return list(dict.fromkeys(n for n in names if n))


def _match(listed: Catalog, reference: str) -> list[str]:
    for name in _names(reference):
        found = listed.matches(name)
        if found:
            return found
    return []


@dataclass
class _Read:
    """What an export says of the listed pictures: each matched picture's task, the pictures two
    tasks claim, those an ambiguous name could be, the entries that name none."""

    claims: dict[str, list[_Task]] = field(default_factory=lambda: defaultdict(list))
    ambiguous: dict[str, list[str]] = field(default_factory=lambda: defaultdict(list))
    unmatched: list[UnmatchedEntry] = field(default_factory=list)
    several: int = 0
    tasks: list[_Task] = field(default_factory=list)


def _read(listed: Catalog, sources: Sequence[tuple[str, str]]) -> _Read:
    """(path, shown) exports -> their tasks matched to the listed pictures."""
    read = _Read()
    for path, shown in sources:
        tasks, bad, several = _tasks(_read_export(path, shown), shown)
        read.unmatched += bad
        read.several += several
        read.tasks += tasks
        for task in tasks:
            found = _match(listed, task.image)
            if len(found) != 1:
                reason, detail = (
                    (
                        reasons.AMBIGUOUS_IMAGE.code,
                        f"matches {len(found)} listed files: {', '.join(found[:5])}",
                    )
                    if found
                    else (reasons.MISSING_IMAGE.code, "no listed file has this name")
                )
                read.unmatched.append(
                    UnmatchedEntry(task.where, task.image, reason, detail, len(task.regions))
                )
                for relpath in found:
                    read.ambiguous[relpath].append(f"{task.where} ({task.image!r})")
            if len(found) == 1:
                read.claims[found[0]].append(task)
    return read


def _annotations(listed: Catalog, read: _Read, masks: bool, outlines: bool, keypoints: bool) -> AnnotationSet:
    images: dict[str, ImageAnnotations] = {}
    problems: list[ImageProblem] = []
    dropped: list[ObjectNote] = []
    changed: list[ObjectNote] = []
    unannotated: list[str] = []
    names = {
        label for task in read.tasks for region in task.regions if _kept(region) for label in region.labels
    }
    points = sorted({p for t in read.tasks for r in t.regions if _is_point(r) for p in r.labels})
    if keypoints and not points:
        raise SourceError("Label Studio: the export has no keypointlabels (--task detection: its boxes)")
    for relpath in listed.images:
        tasks = read.claims.get(relpath, [])
        if len(tasks) > 1:
            where = " and ".join(task.where for task in tasks)
            count = sum(len(task.regions) for task in tasks)
            problems.append(
                ImageProblem(relpath, reasons.CONFLICTING_ANNOTATIONS.code, f"annotated by {where}", count)
            )
        elif tasks and tasks[0].annotated:
            kind = (masks, outlines, points if keypoints else None)
            images[relpath] = _picture(relpath, tasks[0], kind, dropped, changed)
        elif relpath in read.ambiguous and not tasks:
            detail = f"{' and '.join(read.ambiguous[relpath])} could be this file or another listed one"
            problems.append(ImageProblem(relpath, reasons.AMBIGUOUS_ANNOTATION.code, detail))
        else:
            unannotated.append(relpath)
            images[relpath] = ImageAnnotations((), stem(relpath))
    warnings: tuple[str, ...] = ()
    if read.several:
        warnings = (
            f"{read.several} tasks have several annotations: each keeps one, the ground truth or else "
            "the newest (created_at)",
        )
    return AnnotationSet(
        format="label_studio",
        class_names=tuple(sorted(names)),
        images=images,
        unannotated=frozenset(unannotated),
        problems=tuple(sorted(problems)),
        unmatched=tuple(read.unmatched),
        dropped=tuple(dropped),
        changed=tuple(changed),
        warnings=warnings,
        task="keypoints" if keypoints else "detection",
        keypoint_names={name: tuple(points) for name in names} if keypoints else {},
    )


def _kept(region: _Region) -> bool:
    """A region of a kind that becomes an object (a box, a polygon, a brush; not a point nor an
    ellipse): its labels are class names."""
    value = region.value
    return "rle" in value or "points" in value or ("height" in value and "radiusX" not in value)


def _is_point(region: _Region) -> bool:
    return "keypointlabels" in region.value


def _picture(
    relpath: str,
    task: _Task,
    kind: tuple[bool, bool, Sequence[str] | None],
    dropped: list[ObjectNote],
    changed: list[ObjectNote],
) -> ImageAnnotations:
    """A task's objects (`kind`: masks, outlines, and a keypoints run's point names: each
    object's points joined to it by `parentID`, else by the one box that holds them)."""
    masks, outlines, points = kind
    objects: list[ObjectBox] = []
    ids: list[str | None] = []
    loose: list[LoosePoint] = []
    sizes = [
        (int(r.width), int(r.height)) for r in task.regions if r.width is not None and r.height is not None
    ]
    for region in task.regions:
        try:
            if points is not None and _is_point(region):
                loose += _loose(region)
                continue
            found, note = _objects(region, masks, outlines)
        except _Dropped as error:
            reason, detail = error.args
            dropped.append(ObjectNote(relpath, reason, f"{region.ref}: {detail}"))
            continue
        if note is not None:
            detail = (
                f"{region.ref}: rotated {region.value.get('rotation')} degrees, kept as the box that holds it"
            )
            changed.append(ObjectNote(relpath, note, detail))
        objects += found
        ids += [region.rid] * len(found)
    if points is not None:
        attached, left = attach(objects, ids, loose)
        dropped += (ObjectNote(relpath, *note) for note in left)
        objects = [o._replace(keypoints=in_order(p, points)) for o, p in zip(objects, attached, strict=True)]
    width, height = sizes[0] if sizes else (None, None)
    return ImageAnnotations(tuple(objects), task.task_id, width=width, height=height)


def _loose(region: _Region) -> list[LoosePoint]:
    """A keypoint region's points (one per label), in pixels."""
    if not region.labels:
        raise _Dropped(reasons.UNKNOWN_CATEGORY.code, "a key point without a label")
    if region.width is None or region.height is None:
        raise _Dropped(reasons.BAD_OBJECT.code, "no original_width and original_height to scale its percent")
    x, y = _number(region.value, "x") / 100 * region.width, _number(region.value, "y") / 100 * region.height
    return [LoosePoint(name, x, y, region.ref, region.parent) for name in region.labels]


class _Export(ObjectFiles):
    """Label Studio's export: one JSON file, named or found under the input or above it.

    Args:
      outlines: a segmentation run's reading (every shape's outline kept, to be drawn).
    """

    def __init__(self, outlines: bool = False) -> None:
        self.outlines = outlines

    def given(self, path: str, task: str) -> bool:
        return path.endswith(".json")

    def locate(
        self, base: str, listed: Catalog, paths: tuple[AnnotationPath, ...], keypoints: bool
    ) -> Located:
        if paths or _exports(listed.annotation_files.values()):
            return Located(listed, paths=paths)
        root, found = _beside(base)
        if not found:
            return Located(listed, paths=paths)
        prefix = (relative_to(base, root) or "") + "/"
        return Located(rerooted(listed, prefix, found), prefix, root, tuple(sorted(found)), paths)

    def read(self, located: Located, request: LoadRequest) -> AnnotationSet:
        listed = located.catalog
        if located.paths:
            path = located.paths[0].path
            if storage.is_folder(path):
                raise SourceError(
                    f"{path} is a folder; name the export's JSON file", field="annotations_path", file=path
                )
            sources = [(path, path)]
        else:
            sources = [(f.path, f.relpath) for f in _exports(listed.annotation_files.values())]
        keypoints = request.task == "keypoints"
        result = _annotations(listed, _read(listed, sources), request.masks, self.outlines, keypoints)
        kinds = {
            shown: "Label Studio export, read" for _, shown in sources if shown in listed.annotation_files
        }
        return dataclasses.replace(result, sources=kinds)


_EXPORT = _Export()
_OUTLINES = _Export(outlines=True)


def image_classes(
    files: Sequence[InputFile], paths: tuple[AnnotationPath, ...] = ()
) -> dict[str, tuple[str, ...]]:
    """Each listed picture's choices (its image-level classes, in the order the annotation gives
    them), by relpath, from the export found (or named) as a detection run finds it; a picture
    whose task has no choice, or that no task names, is left out. For a classification run over
    a Label Studio export."""
    listed = partition(files)
    located = _EXPORT.locate(input_base(files), listed, paths, False)
    if located.paths:
        sources = [(p.path, p.path) for p in located.paths]
    else:
        sources = [(f.path, f.relpath) for f in _exports(located.catalog.annotation_files.values())]
    read = _read(located.catalog, sources)
    cut = len(located.prefix)
    return {
        relpath[cut:]: tasks[0].choices
        for relpath, tasks in read.claims.items()
        if len(tasks) == 1 and tasks[0].annotated and tasks[0].choices
    }


class LabelStudio(SourceFormat):
    name = "label_studio"
    title = "Label Studio"
    tasks = ("classification", "detection", "segmentation", "keypoints")
    help = "Label Studio's JSON export (full or JSON-MIN): boxes, polygons and brushes in percent"
    looked_for: ClassVar[Mapping[str, str]] = {
        "classification": "a Label Studio JSON export (full or JSON-MIN) with choices",
        "detection": "a Label Studio JSON export (full or JSON-MIN) under --input or beside it",
        "segmentation": "a Label Studio JSON export (full or JSON-MIN) with polygons or brushes",
        "keypoints": "a Label Studio JSON export (full or JSON-MIN) with boxes and keypointlabels",
    }
    searched_as: ClassVar[Mapping[str, str]] = dict.fromkeys(tasks, "a Label Studio JSON export")
    layout_as = instead_as = "Label Studio exports (project-*-at-*.json)"
    options = ("path", "masks", "label_map", "ignore_value", "allow_unmatched_annotations")
    suffixes = (".json",)

    def kept_above(self, name: str) -> bool:
        return bool(_EXPORT_NAME.match(name))

    def claims(self, relpath: str, task: str) -> bool:
        return task in self.tasks and self.kept_above(posixpath.basename(relpath))

    def score(self, task: str, listing: Listing) -> float:
        """CERTAIN where a JSON file's content is an export (the one named, one under the input,
        or, where the run looks beside it, one above it); its content says so, where a file name
        cannot."""
        if task not in self.tasks or (task == "segmentation" and not listing.outside):
            return 0.0
        if listing.paths:
            path = listing.paths[0].path
            one = len(listing.paths) == 1 and path.lower().endswith(".json")
            return CERTAIN if one and _sniff(InputFile(path, path, 0)) else 0.0
        if _exports(listing.files):
            return CERTAIN
        if listing.outside and listing.files and _beside(input_base(listing.files))[1]:
            return CERTAIN
        return 0.0

    def load(self, request: LoadRequest) -> AnnotationSet:
        """Objects; for segmentation, each picture's polygons and brushes as class masks drawn in
        result order (a later region over an earlier one), 0 the background, the sorted class
        names from 1; for classification, each picture's choices."""
        if request.task == "classification":
            objects = dataclasses.replace(request, task="detection", class_names=None)
            found = load_objects(self, _EXPORT, objects)
            return picture_classes_of(found, image_classes(request.files, request.paths), request)
        if request.task != "segmentation":
            return load_objects(self, _EXPORT, request)
        objects = dataclasses.replace(request, task="detection", masks=True, class_names=None)
        return class_masks_of(load_objects(self, _OUTLINES, objects), request)


FORMAT = LabelStudio()
