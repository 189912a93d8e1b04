"""COCO instances files (`instances_*.json`) -> each listed image's objects.

A file is read in one pass, in chunks, without building its whole tree: the top-level object is
walked here and each element of `images` and `annotations` is decoded alone
(`json.JSONDecoder.raw_decode`) and kept only as a small slotted record, so the launcher holds a
chunk of the text and the compact records, never the file nor a dict per annotation, and needs
a fraction of `json.load`'s memory (docs/performance.md#the-coco-launchers-choices-measured).
Keys may come in any order.

Labels: category names in the order of their category ids (sorted numerically), label id = the
position in that order, counting from 0 (COCO's 80 categories, ids 1..90 with gaps, become
0..79). Several files must give a category id the same name; two ids with one name are one class.

Keypoints (`load(..., keypoints=True)`, a keypoints run): the files are `person_keypoints_*.json`
(or instances-named files whose categories carry `keypoints`); each category's `keypoints` names
and `skeleton` (1-based pairs) are read, and each annotation's `keypoints` (`x, y, v` triples, v
as COCO defines it, floats included) kept with its box, padded with unlabelled points to the run's
most points of a category. A detection run counts the annotations that carry labelled points, so
it can say it leaves them out.

An image entry's `file_name` is matched to a listed file by its relative path, else by a unique
path suffix (`x.jpg` or `train2017/x.jpg` finds `coco/train2017/x.jpg`). When several listed
files match, the one under a folder named after the annotation file (`train2017` for
`instances_train2017.json`) or its split wins; otherwise the entry is `ambiguous_image` and
every matching file no other entry claims is rejected `ambiguous_annotation`, never silently
treated as a negative.
"""

from __future__ import annotations

import codecs
import json
import math
import posixpath
import re
from collections import defaultdict
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any, BinaryIO, TypeGuard

from apache_beam.io.filesystems import FileSystems

from beam_tfrecord import reasons
from beam_tfrecord.elements import ImageAnnotations, Mask, ObjectBox, Polygon, RunLengths
from beam_tfrecord.plan.annotations import rle as rle_lib
from beam_tfrecord.plan.annotations.catalog import Catalog, describe_error, line_of, stem
from beam_tfrecord.plan.annotations.paths import AnnotationPath
from beam_tfrecord.plan.annotations.results import AnnotationSet, ImageProblem, ObjectNote, UnmatchedEntry

__all__ = ["KEYPOINTS_NAME", "discover", "load"]

_WHITESPACE = re.compile(r"[ \t\n\r]*")
_INSTANCES = re.compile(r"^(instances_.*|_annotations\.coco)\.json$", re.IGNORECASE)
KEYPOINTS_NAME = re.compile(r"^person_keypoints_.*\.json$", re.IGNORECASE)
ROBOFLOW_NAME = "_annotations.coco.json"  # one per split folder, beside its images

ImageId = int | str


class _Broken(Exception):
    """A file that is not a COCO instances file (bad JSON, or not COCO's shape)."""


class _NotInstances(_Broken):
    """A well-formed COCO file of another kind (captions, keypoints, panoptic, results, an image
    list): the run is refused, never turned into images without objects."""


_PASS = "pass the instances_*.json file beside it (--annotations_path, or leave it out to find it)"


def discover(listed: Catalog, keypoints: bool = False) -> list[str]:
    """The instances files under the input: every `instances_*.json` (and Roboflow's
    `_annotations.coco.json`), else every `.json` in an `annotations/` folder; relpaths, sorted.
    For keypoints, every `person_keypoints_*.json` first."""
    files = listed.annotation_files
    found = [r for r in files if keypoints and KEYPOINTS_NAME.match(posixpath.basename(r))]
    found = found or [r for r in files if _INSTANCES.match(posixpath.basename(r))]
    if not found:
        found = [
            r for r in files if r.lower().endswith(".json") and "annotations" in r.lower().split("/")[:-1]
        ]
    return sorted(found)


@dataclass(slots=True)
class _Image:
    id: ImageId
    file_name: str
    width: int | None
    height: int | None


@dataclass(slots=True)
class _Raw:
    """One annotation between parsing and matching: no dict kept, its values checked."""

    ref: ImageId  # the annotation's id, or `[index]` when it has none
    category: Any
    box: tuple[float, float, float, float] | None
    area: float | None
    crowd: bool
    mask: Mask
    drop: tuple[str, str] | None  # (reason, detail) when the object is left out
    change: tuple[str, str] | None  # (reason, detail) when it is kept changed
    keypoints: tuple[float, ...] | None = None  # a keypoints run's x, y, v triples


@dataclass
class _File:
    """What one instances file says, or why it cannot be read (`broken`)."""

    source: AnnotationPath
    display: str
    images: list[_Image] = field(default_factory=list)
    annotations: dict[ImageId, list[_Raw]] = field(default_factory=lambda: defaultdict(list))
    categories: dict[ImageId, str] = field(default_factory=dict)
    supercategories: dict[ImageId, str] = field(default_factory=dict)
    # Categories' keypoint names and skeleton (0-based pairs), where they carry them.
    keypoint_names: dict[ImageId, tuple[str, ...]] = field(default_factory=dict)
    skeletons: dict[ImageId, tuple[tuple[int, int], ...]] = field(default_factory=dict)
    labelled_keypoints: int = 0  # annotations with a labelled point (a detection run leaves them out)
    bad_entries: list[UnmatchedEntry] = field(default_factory=list)
    broken: str | None = None
    floats: _Floats = field(default_factory=lambda: _Floats())


class _Floats:
    """One float object per distinct coordinate value, shared by every polygon that has it.

    A polygon's coordinates are most of a COCO file's memory once parsed: a float object is 24
    bytes beside the 8 of its place in a tuple. COCO writes them with two decimals, so a
    640x480 image set has at most about 64,000 distinct values, and sharing them about halves the
    masks' memory and the peak of reading them, at the cost of a dict lookup per coordinate
    (docs/performance.md#the-coco-launchers-choices-measured). Values stop being added at LIMIT
    (a file written at full precision gains nothing): later values are shared only when known.
    """

    LIMIT = 2**20

    def __init__(self) -> None:
        self.known: dict[float, float] = {}

    def shared(self, values: list[Any]) -> tuple[float, ...]:
        floats = list(map(float, values))
        known = self.known
        keep = known.setdefault if len(known) < self.LIMIT else known.get
        return tuple(map(keep, floats, floats))


class _Stream:
    """A JSON text read in chunks and walked one value at a time (the standard library's decoder
    for each), so the launcher holds a chunk of the text, never the whole file: the peak holds
    neither its bytes nor its decoded text, each about the file's size."""

    CHUNK_CHARS = 8 * 2**20

    def __init__(self, handle: BinaryIO) -> None:
        self.handle = handle
        self.utf8 = codecs.getincrementaldecoder("utf-8-sig")()
        self.json = json.JSONDecoder()
        self.text = ""  # what is read and not yet consumed, from self.position on
        self.position = 0
        self.eof = False
        self.lines_before = 0  # newlines in the text dropped before self.text
        self.column_before = 0  # characters after the last of them

    def _more(self) -> bool:
        """Drop the consumed text and append the next chunk; False at the end of the file."""
        if self.eof:
            return False
        data = self.handle.read(self.CHUNK_CHARS)
        try:
            chunk = self.utf8.decode(data, final=not data)
        except UnicodeDecodeError:
            raise _Broken(f"is not UTF-8 text (after {self._where(len(self.text))})") from None
        self.eof = not data
        done = self.text[: self.position]
        newlines = done.count("\n")
        self.lines_before += newlines
        self.column_before = len(done) - done.rfind("\n") - 1 if newlines else self.column_before + len(done)
        self.text = self.text[self.position :] + chunk
        self.position = 0
        return True

    def _where(self, position: int | None = None) -> str:
        position = self.position if position is None else position
        line, column = line_of(self.text, position)
        if line == 1:
            column += self.column_before
        return f"line {self.lines_before + line} column {column}"

    def peek(self) -> str:
        """The next character that is not whitespace ("" at the end of the file), not consumed."""
        while True:
            spaces = _WHITESPACE.match(self.text, self.position)
            assert spaces is not None  # the pattern matches the empty string: everywhere
            self.position = spaces.end()
            if self.position < len(self.text):
                return self.text[self.position]
            if not self._more():
                return ""

    def expect(self, chars: str) -> str:
        found = self.peek()
        if not found:
            raise _Broken(f"ends early at {self._where()} (cut short?)")
        if found not in chars:
            wanted = " or ".join(repr(c) for c in chars)
            raise _Broken(f"expected {wanted} at {self._where()}, found {found!r}")
        self.position += 1
        return found

    def value(self) -> Any:
        """The next value. One that fails to decode, or a number that ends the chunk (it may go
        on in the next), is decoded again with the next chunk appended, until the file ends."""
        while True:
            if not self.peek():
                raise _Broken(f"ends early at {self._where()} (cut short?)")
            try:
                value, end = self.json.raw_decode(self.text, self.position)
            except json.JSONDecodeError as error:
                if self._more():
                    continue
                raise _Broken(f"is not valid JSON: {error.msg} at {self._where(error.pos)}") from None
            if not self._whole(value, end) and self._more():
                continue
            self.position = end
            return value

    def _whole(self, value: Any, end: int) -> bool:
        """Whether a value decoded up to `end` of the text at hand is all of it: one that ends
        with the text, or a number that ends two characters or less before it, may go on in the
        next chunk (`1|.5`, `1.5e|+3`, `12|3`)."""
        return end < len(self.text) - 2 or (end < len(self.text) and type(value) not in (int, float))

    def members(self) -> Iterator[str]:
        """The keys of an object; the caller consumes each value before the next key."""
        self.expect("{")
        if self.peek() == "}":
            self.position += 1
            return
        while True:
            if self.peek() != '"':
                raise _Broken(f"expected a key at {self._where()}")
            key = self.value()
            self.expect(":")
            yield key
            if self.expect(",}") == "}":
                return

    def elements(self) -> Iterator[Any]:
        """An array's values, one at a time. The usual case, a value and the comma after it in
        the text at hand, is walked here without `value` and `expect`, whose calls cost a COCO
        file's annotation as much as decoding it; anything else goes through them."""
        self.expect("[")
        if self.peek() == "]":
            self.position += 1
            return
        decode, skip = self.json.raw_decode, _WHITESPACE.match
        while True:
            text = self.text
            spaces = skip(text, self.position)
            assert spaces is not None  # the pattern matches the empty string: everywhere
            start = spaces.end()
            try:
                value, end = decode(text, start)
            except json.JSONDecodeError:  # cut by the chunk's end, or broken: `value` tells which
                value, end = None, len(text)
            if self._whole(value, end):
                self.position = end
            else:
                self.position = start
                value = self.value()
            yield value
            if self.text[self.position : self.position + 1] == ",":
                self.position += 1
            elif self.expect(",]") == "]":
                return

    def end(self) -> None:
        if self.peek():
            raise _Broken(f"has more after its top-level object, at {self._where()}")


def _number(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool) and math.isfinite(value)


_NUMBER_TYPES = frozenset({int, float})


def _numbers(values: list[Any]) -> bool:
    """Every value an int or float (a bool is neither) and finite, checked in C: the set of their
    types and one sum (NaN or an infinity makes it non-finite). A value-by-value check took more
    than half of a COCO file's parse (docs/performance.md#the-coco-launchers-choices-measured)."""
    if not set(map(type, values)) <= _NUMBER_TYPES:
        return False
    try:
        return math.isfinite(sum(values))
    except OverflowError:  # an int too large for a float
        return False


def _image_id(value: Any) -> TypeGuard[ImageId]:
    return (isinstance(value, int) and not isinstance(value, bool)) or (
        isinstance(value, str) and value != ""
    )


def _size(value: Any) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) and value > 0 else None


def _parse_file(
    handle: BinaryIO, source: AnnotationPath, display: str, masks: bool, keypoints: bool = False
) -> _File:
    """One pass over an instances file; raises _Broken with the line and column."""
    result = _File(source, display)
    stream = _Stream(handle)
    seen: set[str] = set()
    image_index: dict[ImageId, int] = {}
    first = stream.peek()
    if not first:
        raise _Broken("is empty")
    if first == "[":
        raise _NotInstances(
            f"is a list: a COCO results file (detections a model made), not an instances file; {_PASS}"
        )
    for key in stream.members():
        if key in seen:
            raise _Broken(f"has {key!r} twice")
        seen.add(key)
        if key == "images":
            for index, entry in enumerate(stream.elements()):
                image = _parse_image(entry, index, result)
                if image is None:
                    continue
                if image.id in image_index:
                    earlier = image_index[image.id]
                    raise _Broken(f"lists image id {image.id} twice (images[{earlier}] and images[{index}])")
                image_index[image.id] = index
                result.images.append(image)
        elif key == "annotations":
            for index, entry in enumerate(stream.elements()):
                _parse_annotation(entry, index, result, masks, keypoints)
        elif key == "categories":
            value = stream.value()
            result.categories, result.supercategories = _parse_categories(value)
            result.keypoint_names, result.skeletons = _parse_keypoint_names(value)
        else:
            stream.value()  # info, licenses, ...: not needed
    stream.end()
    if "images" not in seen:
        raise _Broken("has no 'images' list: not a COCO instances file")
    if "annotations" not in seen:
        raise _NotInstances(
            "has no 'annotations' list: an image list (as image_info_test2017.json), "
            f"not an instances file; {_PASS}"
        )
    if "categories" not in seen and result.annotations:
        raise _Broken("has annotations but no 'categories' list")
    return result


def _parse_image(entry: Any, index: int, result: _File) -> _Image | None:
    where = f"{result.display}#images[{index}]"
    if not isinstance(entry, dict):
        result.bad_entries.append(
            UnmatchedEntry(where, "", reasons.BAD_ENTRY.code, "an image entry that is not an object")
        )
        return None
    image_id, name = entry.get("id"), entry.get("file_name")
    if not _image_id(image_id):
        result.bad_entries.append(
            UnmatchedEntry(
                where,
                str(name or ""),
                reasons.BAD_ENTRY.code,
                f"image id {image_id!r} is not a number or name",
            )
        )
        return None
    if not isinstance(name, str) or not name.strip():
        return _Image(image_id, "", None, None)  # `load` names it, with its objects
    return _Image(image_id, name, _size(entry.get("width")), _size(entry.get("height")))


def _parse_categories(value: Any) -> tuple[dict[ImageId, str], dict[ImageId, str]]:
    """Category id -> name, and id -> supercategory where one is given."""
    if not isinstance(value, list):
        raise _Broken("'categories' is not a list")
    categories: dict[ImageId, str] = {}
    supercategories: dict[ImageId, str] = {}
    for index, entry in enumerate(value):
        if not isinstance(entry, dict) or not _image_id(entry.get("id")):
            raise _Broken(f"categories[{index}] has no id")
        name = entry.get("name")
        if not isinstance(name, str) or not name.strip():
            raise _Broken(f"categories[{index}] (id {entry['id']}) has no name")
        if entry["id"] in categories:
            raise _Broken(f"lists category id {entry['id']} twice")
        categories[entry["id"]] = name.strip()
        if isinstance(entry.get("supercategory"), str):
            supercategories[entry["id"]] = entry["supercategory"].strip()
    return categories, supercategories


def _parse_keypoint_names(
    value: list[Any],
) -> tuple[dict[ImageId, tuple[str, ...]], dict[ImageId, tuple[tuple[int, int], ...]]]:
    """Category id -> its keypoint names, and -> its skeleton as 0-based pairs (COCO writes them
    from 1), for the categories that carry them (`_parse_categories` checked the entries)."""
    names: dict[ImageId, tuple[str, ...]] = {}
    skeletons: dict[ImageId, tuple[tuple[int, int], ...]] = {}
    for index, entry in enumerate(value):
        points = entry.get("keypoints")
        if not points:
            continue
        if not isinstance(points, list) or not all(isinstance(p, str) for p in points):
            raise _Broken(f"categories[{index}] (id {entry['id']}) has keypoints that are not names")
        names[entry["id"]] = tuple(point.strip() for point in points)
        pairs = entry.get("skeleton") or []
        if not isinstance(pairs, list) or not all(
            isinstance(pair, list) and len(pair) == 2 and all(isinstance(v, int) for v in pair)
            for pair in pairs
        ):
            raise _Broken(
                f"categories[{index}] (id {entry['id']}) has a skeleton that is not pairs of points"
            )
        if any(not 1 <= v <= len(points) for pair in pairs for v in pair):
            raise _Broken(
                f"categories[{index}] (id {entry['id']}) has a skeleton past its {len(points)} keypoints"
            )
        skeletons[entry["id"]] = tuple((a - 1, b - 1) for a, b in pairs)
    return names, skeletons


def _dataset_categories(parsed: Sequence[_File], categories: dict[ImageId, tuple[str, str]]) -> set[ImageId]:
    """Categories that name the dataset, not a class: Roboflow's exports list the project itself as
    category 0, the supercategory of every other category, and no annotation uses it. Kept, it
    would be a class of no object and shift every real class id by one against the same
    dataset's YOLO or VOC export."""
    used = {raw.category for file in parsed for raws in file.annotations.values() for raw in raws}
    supers = {c: s for file in parsed for c, s in file.supercategories.items()}
    found = set()
    for category_id, (name, _) in categories.items():
        others = [c for c in categories if c != category_id]
        if category_id not in used and others and all(supers.get(c) == name for c in others):
            found.add(category_id)
    return found


def _not_instances(entry: dict) -> str | None:
    """What a COCO file of another task holds, from one annotation without a box: captions,
    keypoints only, or panoptic segments (None: an instances annotation)."""
    if "bbox" in entry or "segmentation" in entry:
        return None
    if "caption" in entry:
        return "a COCO captions file (captions, no boxes)"
    if "segments_info" in entry:
        return "a COCO panoptic file (segments_info over PNG masks, no boxes here)"
    if "keypoints" in entry:
        what = "a COCO keypoints file whose annotations have keypoints but no boxes"
        return f"{what} (--task keypoints reads it)"
    return None


def _parse_annotation(entry: Any, index: int, result: _File, masks: bool, keypoints: bool = False) -> None:
    is_object = isinstance(entry, dict)
    if (
        is_object
        and "bbox" not in entry
        and not (keypoints and "keypoints" in entry)
        and (other := _not_instances(entry)) is not None
    ):
        raise _NotInstances(f"is {other}, not an instances file; {_PASS}")
    if not is_object or not _image_id(entry.get("image_id")):
        what = "not an object" if not is_object else f"image_id {entry.get('image_id')!r}"
        result.bad_entries.append(
            UnmatchedEntry(
                f"{result.display}#annotations[{index}]",
                "",
                reasons.BAD_ENTRY.code,
                f"an annotation with {what}",
                1,
            )
        )
        return
    ann_id = entry.get("id")
    ref: ImageId = ann_id if _image_id(ann_id) else f"[{index}]"
    box: tuple[float, float, float, float] | None = None
    drop = change = None
    mask: Mask = None
    area, crowd = entry.get("area"), entry.get("iscrowd", 0)
    raw_box = entry.get("bbox")
    segmentation = entry.get("segmentation")
    points = _keypoints(entry.get("keypoints")) if keypoints else None
    if not keypoints and _has_labelled_points(entry.get("keypoints")):
        result.labelled_keypoints += 1
    if masks or raw_box is None:
        mask, change = _mask(segmentation, result.floats)
    if raw_box is not None:
        if not (isinstance(raw_box, list) and len(raw_box) == 4 and _numbers(raw_box)):
            drop = (reasons.BAD_OBJECT.code, f"bbox {_short(raw_box)} is not [x, y, width, height]")
        elif raw_box[2] <= 0 or raw_box[3] <= 0:
            drop = (reasons.ZERO_AREA.code, f"bbox {_short(raw_box)} has no area")
        else:
            x, y, width, height = map(float, raw_box)
            box = (x, y, x + width, y + height)
    else:
        box = _extent(mask) or (_points_extent(points) if isinstance(points, tuple) else None)
        if box is None:
            drop = (reasons.BAD_OBJECT.code, "no bbox, and no segmentation to take it from")
        elif not masks:
            mask = None
    if isinstance(points, str):  # malformed: the box is kept, its points are not
        change, points = change or (reasons.KEYPOINTS_MALFORMED.code, points), None
    if area is not None and not _number(area):
        drop = drop or (reasons.BAD_OBJECT.code, f"area {_short(area)} is not a number")
    if crowd not in (0, 1):
        drop = drop or (reasons.BAD_OBJECT.code, f"iscrowd {_short(crowd)} is not 0 or 1")
    if drop is not None:
        mask = change = None
    result.annotations[entry["image_id"]].append(
        _Raw(
            ref,
            entry.get("category_id"),
            box,
            float(area) if area is not None and drop is None else None,
            bool(crowd) if drop is None else False,
            mask,
            drop,
            change,
            points if drop is None else None,
        )
    )


def _keypoints(value: Any) -> tuple[float, ...] | str | None:
    """An annotation's `keypoints` as floats (x, y, v triples), or why they are left out."""
    if value is None or value == []:
        return None
    if not isinstance(value, list) or len(value) % 3 or not _numbers(value):
        return f"keypoints {_short(value)} are not x, y, v triples"
    if any(v not in (0, 1, 2) for v in value[2::3]):
        return f"keypoints {_short(value)} have a visibility that is not 0, 1 or 2"
    return tuple(map(float, value))


def _has_labelled_points(value: Any) -> bool:
    return isinstance(value, list) and len(value) % 3 == 0 and any(v in (1, 2) for v in value[2::3])


def _points_extent(points: tuple[float, ...]) -> tuple[float, float, float, float] | None:
    """The box a keypoints-only annotation's labelled points span."""
    xs = [x for x, v in zip(points[0::3], points[2::3], strict=True) if v]
    ys = [y for y, v in zip(points[1::3], points[2::3], strict=True) if v]
    if xs and max(xs) > min(xs) and max(ys) > min(ys):
        return min(xs), min(ys), max(xs), max(ys)
    return None


def _mask(segmentation: Any, floats: _Floats) -> tuple[Mask, tuple[str, str] | None]:
    """COCO's `segmentation` -> polygons or run lengths, or why it is left out."""
    if segmentation is None or segmentation == []:
        return None, None
    if isinstance(segmentation, list):
        if set(map(type, segmentation)) != {list}:
            return None, (reasons.MASK_MALFORMED.code, "segmentation is neither polygons nor run lengths")
        polygons = []
        for index, ring in enumerate(segmentation):
            if len(ring) % 2 or not _numbers(ring):
                return None, (reasons.MASK_MALFORMED.code, f"polygon {index} is not x, y pairs")
            if len(ring) >= 6:  # a part of 1 or 2 points fills nothing in COCO's raster either
                polygons.append(Polygon(floats.shared(ring)))
        if not polygons:
            return None, (reasons.MASK_MALFORMED.code, "no polygon has 3 points or more")
        return tuple(polygons), None
    if isinstance(segmentation, dict):
        size, counts = segmentation.get("size"), segmentation.get("counts")
        if not (isinstance(size, list) and len(size) == 2 and all(_size(v) for v in size)):
            return None, (
                reasons.MASK_MALFORMED.code,
                f"run lengths with size {_short(size)}, not [height, width]",
            )
        height, width = size
        try:
            if isinstance(counts, str):
                runs = rle_lib.decode_counts(counts)
            elif isinstance(counts, list) and all(isinstance(v, int) and v >= 0 for v in counts):
                runs = tuple(counts)
            else:
                raise rle_lib.BadRunLengths("counts are neither a list of runs nor COCO's string")
        except rle_lib.BadRunLengths as error:
            return None, (reasons.MASK_MALFORMED.code, f"run lengths: {error}")
        if sum(runs) != height * width:
            return None, (
                reasons.MASK_MALFORMED.code,
                f"run lengths cover {sum(runs)} pixels, not {height}x{width}",
            )
        return RunLengths(height, width, runs), None
    return None, (reasons.MASK_MALFORMED.code, "segmentation is neither polygons nor run lengths")


def _extent(mask: Mask) -> tuple[float, float, float, float] | None:
    """The box a mask spans (for an annotation with no bbox)."""
    if isinstance(mask, RunLengths):
        return rle_lib.extent(mask)
    if mask:
        xs = [v for polygon in mask for v in polygon.points[0::2]]
        ys = [v for polygon in mask for v in polygon.points[1::2]]
        if max(xs) > min(xs) and max(ys) > min(ys):
            return min(xs), min(ys), max(xs), max(ys)
    return None


def _short(value: Any) -> str:
    text = json.dumps(value)
    return text if len(text) <= 60 else text[:57] + "..."


def _read(source: AnnotationPath, display: str, masks: bool, keypoints: bool = False) -> _File:
    try:
        with FileSystems.open(source.path) as handle:  # a .gz file is read through gzip
            return _parse_file(handle, source, display, masks, keypoints)
    except _NotInstances as error:
        raise ValueError(f"{display} {error}") from None
    except _Broken as error:
        return _File(source, display, broken=f"{display} {error}")
    except Exception as error:  # any storage error, at open or mid-read
        return _File(source, display, broken=f"{display} cannot be read: {describe_error(error)}")


def _hints(source: AnnotationPath, display: str) -> list[str]:
    """Folder names that settle an ambiguous file_name: `train2017` for
    `instances_train2017.json`, and the file's split."""
    name = posixpath.splitext(posixpath.basename(display))[0]
    hints = [name.rsplit("_", 1)[1]] if name.lower().startswith(("instances_", "person_keypoints_")) else []
    return hints + ([source.split] if source.split else [])


def load(
    listed: Catalog,
    sources: Sequence[AnnotationPath],
    displays: Sequence[str],
    masks: bool = True,
    keypoints: bool = False,
) -> AnnotationSet:
    """Every listed image's objects from the instances files `sources` (shown as `displays`,
    relpaths for files under the input); with `keypoints`, each object's points too. Raises
    ValueError when two files give one category id two names (the label order would be
    undefined), or, with `keypoints`, when no category carries keypoints."""
    parsed = [
        _read(source, display, masks, keypoints) for source, display in zip(sources, displays, strict=True)
    ]
    categories: dict[ImageId, tuple[str, str]] = {}  # id -> (name, file that named it)
    for file in parsed:
        for category_id, name in file.categories.items():
            if category_id in categories and categories[category_id][0] != name:
                first = categories[category_id]
                raise ValueError(
                    f"annotations_path: category id {category_id} is {first[0]!r} in {first[1]} "
                    f"but {name!r} in {file.display}"
                )
            categories.setdefault(category_id, (name, file.display))
    for category_id in _dataset_categories(parsed, categories):
        del categories[category_id]
    ordered = sorted(categories, key=lambda c: (isinstance(c, str), c))
    class_names = tuple(dict.fromkeys(categories[c][0] for c in ordered))
    points = _point_sets(parsed, categories) if keypoints else None

    claims: dict[str, list[tuple[_File, _Image]]] = defaultdict(list)
    ambiguous: dict[str, list[str]] = defaultdict(list)
    unmatched: list[UnmatchedEntry] = []
    for file in parsed:
        unmatched += file.bad_entries
        hints = _hints(file.source, file.display)
        for image in file.images:
            where = f"{file.display}#image {image.id}"
            if not image.file_name:
                objects = len(file.annotations.pop(image.id, ()))
                unmatched.append(
                    UnmatchedEntry(where, "", reasons.BAD_ENTRY.code, "the image has no file_name", objects)
                )
                continue
            found = listed.matches(image.file_name)
            if len(found) > 1:
                found = next(
                    (
                        kept
                        for hint in hints
                        if len(kept := [r for r in found if hint in r.split("/")[:-1]]) == 1
                    ),
                    found,
                )
            objects = len(file.annotations.get(image.id, ()))
            if not found:
                unmatched.append(
                    UnmatchedEntry(
                        where,
                        image.file_name,
                        reasons.MISSING_IMAGE.code,
                        "no listed file has this name",
                        objects,
                    )
                )
            elif len(found) > 1:
                unmatched.append(
                    UnmatchedEntry(
                        where,
                        image.file_name,
                        reasons.AMBIGUOUS_IMAGE.code,
                        f"matches {len(found)} listed files: {', '.join(found[:5])}",
                        objects,
                    )
                )
                for relpath in found:
                    ambiguous[relpath].append(f"{where} ({image.file_name!r})")
            else:
                claims[found[0]].append((file, image))
        known = {image.id for image in file.images}
        for image_id, raws in file.annotations.items():
            if image_id not in known:
                unmatched.append(
                    UnmatchedEntry(
                        f"{file.display}#annotation {raws[0].ref}",
                        "",
                        reasons.UNKNOWN_IMAGE.code,
                        f"image id {image_id} is not in {file.display}'s images",
                        len(raws),
                    )
                )

    broken = [file.broken for file in parsed if file.broken]
    images: dict[str, ImageAnnotations] = {}
    problems: list[ImageProblem] = []
    dropped: list[ObjectNote] = []
    changed: list[ObjectNote] = []
    unannotated = []
    for relpath in listed.images:
        entries = claims.get(relpath)
        if entries and len(entries) > 1:
            where = " and ".join(f"{file.display}#image {image.id}" for file, image in entries)
            count = sum(len(file.annotations.get(image.id, ())) for file, image in entries)
            problems.append(
                ImageProblem(relpath, reasons.CONFLICTING_ANNOTATIONS.code, f"annotated by {where}", count)
            )
        elif entries:
            file, image = entries[0]
            images[relpath] = _annotations(relpath, file, image, categories, dropped, changed, points)
        elif relpath in ambiguous:
            problems.append(
                ImageProblem(
                    relpath,
                    reasons.AMBIGUOUS_ANNOTATION.code,
                    f"{' and '.join(ambiguous[relpath])} could be this file or another listed one",
                )
            )
        elif broken:
            problems.append(ImageProblem(relpath, reasons.BAD_ANNOTATION.code, "; ".join(broken)))
        else:
            unannotated.append(relpath)
            images[relpath] = ImageAnnotations((), stem(relpath))
    read = {
        file.display: f"COCO instances file{f' of split {file.source.split}' if file.source.split else ''}"
        + (", malformed (its images are rejected)" if file.broken else ", read")
        for file in parsed
        if file.display in listed.annotation_files
    }
    labelled = sum(file.labelled_keypoints for file in parsed)
    warnings: tuple[str, ...] = ()
    if labelled:  # labels the run was not asked for are said, never left out without a word
        warnings = (
            f"{labelled} annotations also hold keypoints, which a detection run leaves out: "
            "--task keypoints stores them",
        )
    return AnnotationSet(
        kind="coco",
        class_names=class_names,
        images=images,
        unannotated=frozenset(unannotated),
        sources=read,
        problems=tuple(sorted(problems)),
        unmatched=tuple(unmatched),
        dropped=tuple(dropped),
        changed=tuple(changed),
        split_names=tuple(dict.fromkeys(s.split for s in sources if s.split)),
        warnings=warnings,
        task="keypoints" if keypoints else "detection",
        keypoint_names={categories[c][0]: n for c, n in points.names.items()} if points else {},
        skeletons={categories[c][0]: k for c, k in points.skeletons.items()} if points else {},
    )


@dataclass(frozen=True)
class _PointSets:
    """A keypoints run's categories' points: names and skeleton by category id, and the count
    every object's points are padded to (the most of any category)."""

    names: dict[ImageId, tuple[str, ...]]
    skeletons: dict[ImageId, tuple[tuple[int, int], ...]]
    count: int


def _point_sets(parsed: Sequence[_File], categories: dict[ImageId, tuple[str, str]]) -> _PointSets:
    names: dict[ImageId, tuple[str, ...]] = {}
    skeletons: dict[ImageId, tuple[tuple[int, int], ...]] = {}
    for file in parsed:
        for category_id, found in file.keypoint_names.items():
            if category_id in names and names[category_id] != found:
                raise ValueError(
                    f"annotations_path: category id {category_id} has other keypoints in {file.display}"
                )
            names[category_id] = found
            skeletons[category_id] = file.skeletons.get(category_id, ())
    names = {c: n for c, n in names.items() if c in categories}
    if not names:
        shown = ", ".join(file.display for file in parsed)
        raise ValueError(
            f"annotations_path: no category of {shown} carries keypoints (names): a keypoints run "
            "reads person_keypoints_*.json files"
        )
    return _PointSets(names, {c: skeletons[c] for c in names}, max(len(n) for n in names.values()))


def _annotations(
    relpath: str,
    file: _File,
    image: _Image,
    categories: dict[ImageId, tuple[str, str]],
    dropped: list[ObjectNote],
    changed: list[ObjectNote],
    points: _PointSets | None = None,
) -> ImageAnnotations:
    """One image's objects; each raw record is released once its object is made. In a keypoints
    run every object gets the run's count of points: its own (as many as its category names),
    then unlabelled ones."""
    objects = []
    for raw in file.annotations.pop(image.id, ()):
        ref = f"{file.display}#annotation {raw.ref}"
        if raw.drop is not None:
            dropped.append(ObjectNote(relpath, raw.drop[0], f"{ref}: {raw.drop[1]}"))
            continue
        category = categories.get(raw.category) if _image_id(raw.category) else None
        if category is None:
            dropped.append(
                ObjectNote(
                    relpath,
                    reasons.UNKNOWN_CATEGORY.code,
                    f"{ref}: category_id {_short(raw.category)} is not in categories",
                )
            )
            continue
        mask, change = raw.mask, raw.change
        declared = (image.height, image.width)
        if isinstance(mask, RunLengths) and None not in declared and (mask.height, mask.width) != declared:
            sizes = f"{mask.height}x{mask.width}, the image's {image.height}x{image.width}"
            mask = None
            change = (reasons.MASK_MALFORMED.code, f"run lengths over {sizes}")
        keypoints = None
        if points is not None:
            own = raw.keypoints or ()
            expected = 3 * len(points.names.get(raw.category, ()))
            if own and len(own) != expected:
                change = change or (
                    reasons.KEYPOINTS_MALFORMED.code,
                    f"{len(own) // 3} keypoints, where its category names {expected // 3}",
                )
                own = ()
            keypoints = own + (0.0,) * (3 * points.count - len(own))
        if change is not None:
            changed.append(ObjectNote(relpath, change[0], f"{ref}: {change[1]}"))
        assert raw.box is not None  # only a dropped annotation has none (_parse_annotation)
        xmin, ymin, xmax, ymax = raw.box
        objects.append(
            ObjectBox(
                xmin, ymin, xmax, ymax, category[0], raw.area, raw.crowd, mask=mask, source_ref=ref,
                keypoints=keypoints,
            )
        )  # fmt: skip
    return ImageAnnotations(
        tuple(objects), str(image.id), width=image.width, height=image.height, split=file.source.split
    )
