"""A COCO JSON file (instances or keypoints) read in one pass, in chunks, without building its
whole tree: the top-level object is walked here and each element of `images` and `annotations` is
decoded alone (`json.JSONDecoder.raw_decode`) and kept only as a small slotted record, so the
launcher holds a chunk of the text and the compact records, never the file nor a dict per
annotation, and needs a fraction of `json.load`'s memory
(benchmarks/NOTES.md#the-coco-launchers-choices-measured). Keys may come in any order.

The reader the `coco` source (plan.sources.coco) drives: `read_file` gives a `CocoFile`, whose
images, annotations (`_Raw`, checked), categories and keypoint names the source then matches to
the listing.
"""

from __future__ import annotations

import codecs
import json
import math
import re
from collections import defaultdict
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import BinaryIO, TypeGuard

from apache_beam.io.filesystems import FileSystems

from beam_tfrecord import reasons
from beam_tfrecord.edges import Json, JsonObject
from beam_tfrecord.elements import Mask, Polygon, RunLengths
from beam_tfrecord.plan.annotations import rle as rle_lib
from beam_tfrecord.plan.annotations.catalog import describe_error, line_of
from beam_tfrecord.plan.annotations.paths import AnnotationPath
from beam_tfrecord.plan.annotations.results import UnmatchedEntry
from beam_tfrecord.plan.sources.base import SourceError

__all__ = ["CocoFile", "CocoImage", "ImageId", "NotInstances", "is_image_id", "read_file", "short"]

_WHITESPACE = re.compile(r"[ \t\n\r]*")

ImageId = int | str


class _Broken(Exception):
    """A file that is not a COCO instances file (bad JSON, or not COCO's shape)."""


class NotInstances(_Broken):
    """A well-formed COCO file of another kind (captions, keypoints, panoptic, results, an image
    list): the run is refused, never turned into images without objects."""


_PASS = "pass the instances_*.json file beside it (--annotations_path, or leave it out to find it)"


@dataclass(slots=True)
class CocoImage:
    id: ImageId
    file_name: str
    width: int | None
    height: int | None


@dataclass(slots=True)
class _Raw:
    """One annotation between parsing and matching: no dict kept, its values checked."""

    ref: ImageId  # the annotation's id, or `[index]` when it has none
    category: Json
    box: tuple[float, float, float, float] | None
    area: float | None
    crowd: bool
    mask: Mask
    drop: tuple[str, str] | None  # (reason, detail) when the object is left out
    change: tuple[str, str] | None  # (reason, detail) when it is kept changed
    keypoints: tuple[float, ...] | None = None  # a keypoints run's x, y, v triples


@dataclass
class CocoFile:
    """What one instances file says, or why it cannot be read (`broken`)."""

    source: AnnotationPath
    display: str
    images: list[CocoImage] = field(default_factory=list)
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
    (benchmarks/NOTES.md#the-coco-launchers-choices-measured). Values stop being added at LIMIT
    (a file written at full precision gains nothing): later values are shared only when known.
    """

    LIMIT = 2**20

    def __init__(self) -> None:
        self.known: dict[float, float] = {}

    def shared(self, values: list[Json]) -> tuple[float, ...]:
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

    def value(self) -> Json:
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

    def _whole(self, value: Json, end: int) -> bool:
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

    def elements(self) -> Iterator[Json]:
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


def _number(value: Json) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool) and math.isfinite(value)


_NUMBER_TYPES = frozenset({int, float})


def _numbers(values: list[Json]) -> bool:
    """Every value an int or float (a bool is neither) and finite, checked in C: the set of their
    types and one sum (NaN or an infinity makes it non-finite). A value-by-value check took more
    than half of a COCO file's parse (benchmarks/NOTES.md#the-coco-launchers-choices-measured)."""
    if not set(map(type, values)) <= _NUMBER_TYPES:
        return False
    try:
        return math.isfinite(sum(values))
    except OverflowError:  # an int too large for a float
        return False


def is_image_id(value: Json) -> TypeGuard[ImageId]:
    return (isinstance(value, int) and not isinstance(value, bool)) or (
        isinstance(value, str) and value != ""
    )


def _size(value: Json) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) and value > 0 else None


def _parse_file(
    handle: BinaryIO, source: AnnotationPath, display: str, masks: bool, keypoints: bool = False
) -> CocoFile:
    """One pass over an instances file; raises _Broken with the line and column."""
    result = CocoFile(source, display)
    stream = _Stream(handle)
    seen: set[str] = set()
    image_index: dict[ImageId, int] = {}
    first = stream.peek()
    if not first:
        raise _Broken("is empty")
    if first == "[":
        raise NotInstances(
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
        raise NotInstances(
            "has no 'annotations' list: an image list (as image_info_test2017.json), "
            f"not an instances file; {_PASS}"
        )
    if "categories" not in seen and result.annotations:
        raise _Broken("has annotations but no 'categories' list")
    return result


def _parse_image(entry: Json, index: int, result: CocoFile) -> CocoImage | None:
    where = f"{result.display}#images[{index}]"
    if not isinstance(entry, dict):
        result.bad_entries.append(
            UnmatchedEntry(where, "", reasons.BAD_ENTRY.code, "an image entry that is not an object")
        )
        return None
    image_id, name = entry.get("id"), entry.get("file_name")
    if not is_image_id(image_id):
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
        return CocoImage(image_id, "", None, None)  # `load` names it, with its objects
    return CocoImage(image_id, name, _size(entry.get("width")), _size(entry.get("height")))


def _parse_categories(value: Json) -> tuple[dict[ImageId, str], dict[ImageId, str]]:
    """Category id -> name, and id -> supercategory where one is given."""
    if not isinstance(value, list):
        raise _Broken("'categories' is not a list")
    categories: dict[ImageId, str] = {}
    supercategories: dict[ImageId, str] = {}
    for index, entry in enumerate(value):
        if not isinstance(entry, dict) or not is_image_id(entry.get("id")):
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
    value: list[Json],
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


def _not_instances(entry: JsonObject) -> str | None:
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


def _parse_annotation(
    entry: Json, index: int, result: CocoFile, masks: bool, keypoints: bool = False
) -> None:
    is_object = isinstance(entry, dict)
    if (
        is_object
        and "bbox" not in entry
        and not (keypoints and "keypoints" in entry)
        and (other := _not_instances(entry)) is not None
    ):
        raise NotInstances(f"is {other}, not an instances file; {_PASS}")
    if not is_object or not is_image_id(entry.get("image_id")):
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
    ref: ImageId = ann_id if is_image_id(ann_id) else f"[{index}]"
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
            drop = (reasons.BAD_OBJECT.code, f"bbox {short(raw_box)} is not [x, y, width, height]")
        elif raw_box[2] <= 0 or raw_box[3] <= 0:
            drop = (reasons.ZERO_AREA.code, f"bbox {short(raw_box)} has no area")
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
        drop = drop or (reasons.BAD_OBJECT.code, f"area {short(area)} is not a number")
    if crowd not in (0, 1):
        drop = drop or (reasons.BAD_OBJECT.code, f"iscrowd {short(crowd)} is not 0 or 1")
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


def _keypoints(value: Json) -> tuple[float, ...] | str | None:
    """An annotation's `keypoints` as floats (x, y, v triples), or why they are left out."""
    if value is None or value == []:
        return None
    if not isinstance(value, list) or len(value) % 3 or not _numbers(value):
        return f"keypoints {short(value)} are not x, y, v triples"
    if any(v not in (0, 1, 2) for v in value[2::3]):
        return f"keypoints {short(value)} have a visibility that is not 0, 1 or 2"
    return tuple(map(float, value))


def _has_labelled_points(value: Json) -> bool:
    return isinstance(value, list) and len(value) % 3 == 0 and any(v in (1, 2) for v in value[2::3])


def _points_extent(points: tuple[float, ...]) -> tuple[float, float, float, float] | None:
    """The box a keypoints-only annotation's labelled points span."""
    xs = [x for x, v in zip(points[0::3], points[2::3], strict=True) if v]
    ys = [y for y, v in zip(points[1::3], points[2::3], strict=True) if v]
    if xs and max(xs) > min(xs) and max(ys) > min(ys):
        return min(xs), min(ys), max(xs), max(ys)
    return None


def _mask(segmentation: Json, floats: _Floats) -> tuple[Mask, tuple[str, str] | None]:
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
                f"run lengths with size {short(size)}, not [height, width]",
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


def short(value: Json) -> str:
    text = json.dumps(value)
    return text if len(text) <= 60 else text[:57] + "..."


def read_file(source: AnnotationPath, display: str, masks: bool, keypoints: bool = False) -> CocoFile:
    try:
        with FileSystems.open(source.path) as handle:  # a .gz file is read through gzip
            return _parse_file(handle, source, display, masks, keypoints)
    except NotInstances as error:
        raise SourceError(f"{display} {error}", file=display) from None
    except _Broken as error:
        return CocoFile(source, display, broken=f"{display} {error}")
    except Exception as error:  # any storage error, at open or mid-read
        return CocoFile(source, display, broken=f"{display} cannot be read: {describe_error(error)}")
