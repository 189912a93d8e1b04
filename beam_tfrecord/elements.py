"""The elements that flow between the stages, in one place, each with its shape: what a DoFn
takes and gives, what is staged with the plan, and what the metadata step collects. Plain data
only (no Beam, no TensorFlow, no stage imported), so every stage can name them.

In flow order, one flow on every runner:

    str (a staged shard task's path) --ReadValidate, which loads its ShardTask (one output shard's
        PlannedInputs)--> PendingRecord (RecordFields + facts) | RejectLine
    PendingRecord --RunInference--> PredictionResult(example=PendingRecord, inference=array | str)
        (feature runs only)
    PendingRecord | PredictionResult --BuildRecords--> ConvertedRecord | RejectLine | ChangeLine
    ConvertedRecord --content_key--> (sha256, (path, split)) --the metadata step--> DuplicateGroup
        (hashes and paths grouped, no bytes)
    ConvertedRecord --a sink--> WrittenShard (temporary) --finalize--> FinalShard, and a Tally
    (write.tally.Tally: the counts, merged across workers)
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable, Mapping, Sequence
from dataclasses import asdict, dataclass, field
from types import MappingProxyType
from typing import NamedTuple, TypeAlias

import numpy as np

from beam_tfrecord import tasks
from beam_tfrecord.edges import ByKind, Json, JsonObject
from beam_tfrecord.keys import StoredPixels

__all__ = [
    "MAX_8BIT_MASK_VALUE",
    "MAX_MASK_VALUE",
    "PAGE_MARK",
    "BandFile",
    "ChangeLine",
    "ColumnValue",
    "ConvertedRecord",
    "DroppedObject",
    "DroppedObjectLine",
    "DuplicateGroup",
    "Extras",
    "FinalShard",
    "ImageAnnotations",
    "Mask",
    "MaskRule",
    "ObjectBox",
    "Page",
    "PendingRecord",
    "PlannedInput",
    "Polygon",
    "RecordFields",
    "RejectLine",
    "RunLengths",
    "ShardKey",
    "ShardTask",
    "StoredObject",
    "WrittenShard",
    "mask_from_row",
    "mask_row",
    "object_row",
    "object_text",
]

# Annotations (detection and segmentation runs).
# What an annotation source says about one image: its objects (boxes, classes, flags and optional
# masks), in the coordinates the source uses, before the image is ever read.
#
# These are facts of the plan, like labels: parsed and checked on the launcher, staged with each
# shard task, carried with their image through the workers, and transformed with its pixels there
# (`beam_tfrecord.labels.geometry`). The annotation formats (`plan.sources`: COCO, VOC, YOLO) all give
# these types, so nothing after planning knows which format the annotations came from.
#
# Coordinates: `ObjectBox` holds `xmin, ymin, xmax, ymax` with the origin at the top left corner of
# the picture as its file stores it (the pixels before any EXIF orientation is applied), in pixels
# when `ImageAnnotations.normalized` is False (COCO, Pascal VOC) or as fractions of the stored
# width and height when it is True (YOLO, whose files do not know the image size). A box is not
# checked against the image here: only the worker knows the image's size.


@dataclass(frozen=True, slots=True)
class Polygon:
    """One outline of an instance mask: `x0, y0, x1, y1, ...` in the box's coordinates (pixels, or
    fractions of the image size for a normalized source). An instance may have several."""

    points: tuple[float, ...]


@dataclass(frozen=True, slots=True)
class RunLengths:
    """A COCO run-length encoded mask: `counts` alternate runs of 0 and 1, starting with 0, in
    column-major order over `height x width` (COCO's uncompressed RLE; its compressed string form
    is decoded into this when parsed)."""

    height: int
    width: int
    counts: tuple[int, ...]


Mask = tuple[Polygon, ...] | RunLengths | None


# The two per-object types are NamedTuples, as the per-record ones are (ShardKey, PendingRecord):
# immutable and hashable like the frozen dataclasses around them, but built about five times
# faster than a frozen dataclass of 12 fields (whose constructor sets each field through
# `object.__setattr__`), and a detection run builds about three a box (planned, staged and read
# back, placed; benchmarks/NOTES.md#per-step-costs-behind-the-code). `_replace` is their
# `dataclasses.replace`.


class ObjectBox(NamedTuple):
    """One annotated object: its box, its class name and what the source says of it.

    Args:
      xmin, ymin, xmax, ymax: the box (see the module docstring for the frame and units).
      class_name: the class name; the planner maps names to ids.
      area: COCO's `area` (the mask's pixel area, in the source's pixels); None: the box's area.
      is_crowd: COCO's `iscrowd` (a group of objects, usually with an RLE mask).
      difficult, truncated: Pascal VOC's flags.
      pose: Pascal VOC's `pose` ("Unspecified" when it says so, "" when it says nothing).
      mask: the instance's outline(s) or run lengths, when the source has one.
      source_ref: where the object comes from, for messages: `file.json#annotation 42`,
        `a.xml#object 3`, `a.txt:7`.
      keypoints: a keypoints run's points, `x, y, v` each in the box's coordinates (v as COCO
        defines it: 0 not labelled, 1 labelled but hidden, 2 visible), as many as the run's
        keypoint count; None in other runs.
    """

    xmin: float
    ymin: float
    xmax: float
    ymax: float
    class_name: str
    area: float | None = None
    is_crowd: bool = False
    difficult: bool = False
    truncated: bool = False
    pose: str = ""
    mask: Mask = None
    source_ref: str = ""
    keypoints: tuple[float, ...] | None = None


# The largest value an 8-bit class mask holds; past it a run's masks are 16-bit (`MaskRule.dtype`).
MAX_8BIT_MASK_VALUE = 255
# The largest class id or ignore value any mask holds: a 16-bit PNG's.
MAX_MASK_VALUE = 65535


@dataclass(frozen=True)
class MaskRule:
    """How a segmentation run's worker reads every mask file into class ids: one rule per run,
    decided while planning and staged with each shard task.

    Args:
      classes: how many classes there are (ids 0 .. classes - 1).
      ignore: the value that means "not labelled" (borders, padding), stored as it is and never
        a class; None: the masks have none (padding then uses 0).
      palette: the dataset's colours, one (r, g, b) per class id, for masks saved as colours
        (RGB PNGs of a palette, Cityscapes' `_color.png`); () when colours are refused.
      palette_ignore: colours that mean the ignore value (VOC's border colour).
      remap: (file value, class id) pairs applied first (a two-valued 0/255 mask's 255 -> 1).
    """

    classes: int
    ignore: int | None = 255
    palette: tuple[tuple[int, int, int], ...] = ()
    palette_ignore: tuple[tuple[int, int, int], ...] = ()
    remap: tuple[tuple[int, int], ...] = ()

    @property
    def fill(self) -> int:
        """What a margin of a padded picture holds."""
        return self.ignore if self.ignore is not None else 0

    @property
    def dtype(self) -> str:
        """The type of every mask the run stores: `uint16` where a class id or the ignore value
        passes 255 (ADE20K's full class list, a microscopy set's thousands of instance ids), else
        `uint8`, the 8-bit PNGs DeepLab and Model Garden read. One per run, decided from the rule
        alone: a tensor has one type, so a record never decides its own."""
        largest = max(self.classes - 1, self.ignore if self.ignore is not None else 0)
        return "uint16" if largest > MAX_8BIT_MASK_VALUE else "uint8"

    def to_row(self) -> JsonObject:
        row: JsonObject = {"classes": self.classes, "ignore": self.ignore}
        if self.palette:
            row["palette"] = [list(c) for c in self.palette]
        if self.palette_ignore:
            row["palette_ignore"] = [list(c) for c in self.palette_ignore]
        if self.remap:
            row["remap"] = [list(pair) for pair in self.remap]
        return row

    @classmethod
    def from_row(cls, row: Mapping[str, Json]) -> MaskRule:
        def colours(key: str) -> tuple[tuple[int, int, int], ...]:
            return tuple((int(r), int(g), int(b)) for r, g, b in row.get(key, ()))

        remap = tuple((int(a), int(b)) for a, b in row.get("remap", ()))
        return cls(row["classes"], row["ignore"], colours("palette"), colours("palette_ignore"), remap)


# The values of a picture that has none of the kinds' beyond its objects: one shared, empty,
# read-only mapping, not a dict for every picture of a large plan.
_NO_VALUES: Mapping[str, Json] = MappingProxyType({})


@dataclass(frozen=True, slots=True)
class ImageAnnotations:
    """Everything a source says about one image.

    Args:
      objects: its objects, in the source's order (an image with none is a negative).
      source_id: the image's id in its source (COCO's image id, VOC's filename, YOLO's relative
        path without extension): stored as `image/source_id`.
      normalized: the boxes and masks are fractions of the image's size (YOLO), not pixels.
      width, height: the size the source declares for the image (COCO, VOC), checked against the
        decoded image by the worker; None when the source does not say.
      split: the split the source assigns (a COCO file given per split), else None: hashed.
      notes: what planning changed on its objects (`mask_malformed`), for changes.jsonl.
      values: each kind of label's value for the picture beyond its objects, by kind name, as
        the plan stages it (JSON values: a segmentation run's mask file, a captions run's
        sentences); the kind reads its own (`labels.class_mask.mask_file`, ...). Absent: the
        picture has none.
    """

    objects: tuple[ObjectBox, ...]
    source_id: str
    normalized: bool = False
    width: int | None = None
    height: int | None = None
    split: str | None = None
    notes: tuple[str, ...] = ()
    values: Mapping[str, Json] = field(default_factory=lambda: _NO_VALUES)  # shared, never written to

    def to_row(self) -> JsonObject:
        """The staged form (shard task files): compact, every object as one list (`object_row`),
        and where each is in its source in a list of their own (`source_ref`s: what a record
        stores is the same, wherever the source keeps it)."""
        row = self._facts_row()
        row["o"] = [object_row(o) for o in self.objects]
        row["r"] = [o.source_ref for o in self.objects]
        return row

    def _facts_row(self) -> JsonObject:
        """The staged form without its objects."""
        row: JsonObject = {"id": self.source_id}
        if self.normalized:
            row["n"] = 1
        if self.width is not None or self.height is not None:
            row["size"] = [self.width, self.height]
        if self.split is not None:
            row["split"] = self.split
        if self.notes:
            row["notes"] = list(self.notes)
        if self.values:
            row["v"] = dict(self.values)
        return row

    def staged_text(self, object_texts: Sequence[str]) -> str:
        """`to_row()` as JSON text, given its objects' `object_text`s (made once by the caller,
        which also digests them)."""
        facts = self._facts_row()
        facts["r"] = [o.source_ref for o in self.objects]
        return f'{_TEXT(facts)[:-1]}, "o": [{", ".join(object_texts)}]}}'

    @classmethod
    def from_row(cls, row: Mapping[str, Json]) -> ImageAnnotations:
        width, height = row.get("size", (None, None))
        objects = tuple(_object_from_row(o, ref) for o, ref in zip(row["o"], row["r"], strict=True))
        notes = tuple(row.get("notes", ()))
        values = row.get("v", _NO_VALUES)
        return cls(objects, row["id"], bool(row.get("n")), width, height, row.get("split"), notes, values)


def mask_row(mask: Mask) -> JsonObject | None:
    """An instance's outlines or run lengths as the plan stages them (JSON-ready); None: none."""
    if isinstance(mask, RunLengths):
        return {"rle": [mask.height, mask.width, list(mask.counts)]}
    if mask:
        return {"poly": [list(polygon.points) for polygon in mask]}
    return None


def mask_from_row(row: Json) -> Mask:
    """`mask_row`'s value back as the mask it stages."""
    if row and "rle" in row:
        height, width, counts = row["rle"]
        return RunLengths(height, width, tuple(counts))
    if row:
        return tuple(Polygon(tuple(points)) for points in row["poly"])
    return None


def object_row(item: ObjectBox) -> list[Json]:
    """An object as the plan stages it (JSON-ready): everything but its `source_ref`."""
    row = [
        item.xmin, item.ymin, item.xmax, item.ymax, item.class_name, item.area,
        int(item.is_crowd), int(item.difficult), int(item.truncated), item.pose, mask_row(item.mask),
    ]  # fmt: skip
    if item.keypoints is not None:  # only a keypoints run's rows have a twelfth value
        row.append(list(item.keypoints))
    return row


# JSON text as the plan stages it, from one encoder (`json.dumps` with an option builds one per
# call, and a detection run encodes every object), UTF-8 kept as it is.
_TEXT = json.JSONEncoder(ensure_ascii=False).encode


def object_text(item: ObjectBox) -> str:
    """An object's staged row (`object_row`) as JSON text: what its record is made from, and
    what `plan.annotations.growing.objects_digest_of` hashes (a re-export that renumbers COCO's
    annotation ids changes no record)."""
    return _TEXT(object_row(item))


def _object_from_row(row: Sequence[Json], ref: str) -> ObjectBox:
    xmin, ymin, xmax, ymax, label, area, crowd, difficult, truncated, pose, mask, *more = row
    found = mask_from_row(mask)
    points = tuple(more[0]) if more else None
    return ObjectBox(
        xmin,
        ymin,
        xmax,
        ymax,
        label,
        area,
        bool(crowd),
        bool(difficult),
        bool(truncated),
        pose,
        found,
        ref,
        points,
    )


class StoredObject(NamedTuple):
    """One object as its record stores it (a NamedTuple: see `ObjectBox`).

    Args:
      xmin, ymin, xmax, ymax: the box as fractions of the stored image's width and height (0..1),
        as `image/object/bbox/*` store them.
      class_name: the class name, as the source gave it.
      area: in the stored image's pixels (see the module docstring).
      is_crowd, difficult, truncated, pose: as the source says.
      mask_png: the instance mask (`geometry.encode_mask_png`), when masks were asked.
      source_ref: where the object comes from, for messages.
      notes: `reasons` object notes (`clipped`, ...), in their declared order.
    """

    xmin: float
    ymin: float
    xmax: float
    ymax: float
    class_name: str
    area: float
    is_crowd: bool = False
    difficult: bool = False
    truncated: bool = False
    pose: str = ""
    mask_png: bytes | None = None
    source_ref: str = ""
    notes: tuple[str, ...] = ()
    class_id: int = 0  # from 1 (0 is background, as the Object Detection API counts); set by the worker
    # A keypoints run's points: `x, y, v` each, x and y fractions of the stored image (0 where
    # not labelled), v 0, 1 or 2 (`ObjectBox.keypoints`); None in other runs.
    keypoints: tuple[float, ...] | None = None
    points_outside: int = 0  # labelled points the picture's edge or crop made unlabelled


@dataclass(frozen=True, slots=True)
class DroppedObject:
    """An object that is not stored: `reason` is a `reasons` drop code, `detail` is for people."""

    class_name: str
    reason: str
    detail: str
    source_ref: str = ""


# A manifest column's value as planned (`plan.columns.parse_value`): a list column's as a tuple.
ColumnValue: TypeAlias = str | int | float | tuple[str | int | float, ...]
Extras = tuple[tuple[str, str, ColumnValue], ...]  # (column name, column type, typed value) per extra column


class BandFile(NamedTuple):
    """One band of a picture whose bands are files of their own (`--bands`, plan.bands): the
    band's name as the run names it, and its file (relative path, path, listed size)."""

    band: str
    relpath: str
    path: str
    size: int


PAGE_MARK = "#"  # between a file's relative path and its page's index in the page's name


@dataclass(frozen=True, order=True, slots=True)
class Page:
    """Which page of its file an input is, where every page of a multi-page file is an input of
    its own (`--pages each`, plan.pages): `index` from 0 (the position in the stack a `stack`
    record holds), of `count` pages. A file of one page is marked `Page(0, 1)`: its pages were
    counted, and it is one input under its own name."""

    index: int
    count: int

    def name(self, relpath: str) -> str:
        """The input's relative path, its identity in every output: the file's, then `#` and
        the page's index, as many digits as the last page's (`stack.tif#07` of 12 pages), so a
        file's pages sort in order; the file's own path where it has one page."""
        if self.count <= 1:
            return relpath
        return f"{relpath}{PAGE_MARK}{self.index:0{len(str(self.count - 1))}d}"

    def file_of(self, name: str) -> str:
        """The file's relative path from the page's (`name`'s inverse)."""
        return name if self.count <= 1 else name.rsplit(PAGE_MARK, 1)[0]

    def sha256(self, file_sha256: str) -> str:
        """A page's content hash (`image/key/sha256`, what `--dedupe` and duplicates.jsonl
        compare): of its file's sha256 (hex), `#` and its index. Pages of one file differ; the
        same page of two copies of a file are copies."""
        if self.count <= 1:
            return file_sha256
        return hashlib.sha256(f"{file_sha256}{PAGE_MARK}{self.index}".encode()).hexdigest()


@dataclass(frozen=True, slots=True)
class PlannedInput:
    """One input file with everything the worker needs besides its bytes.

    `label` (the class id) and `label_text` (the class name), named as the record keys they fill,
    are tuples (ids, names) in a multi-label run; `extras` are the manifest columns' values
    (extra_columns), typed while planning. `bands`: a picture whose bands are files of their own,
    its files in the run's band order (`path` is then the first's and `size` their sum); ()
    for a picture of one file. `page`: one page of a multi-page file (`--pages each`; `relpath`
    is then the page's name, `path` and `size` the file's); None for a whole file."""

    relpath: str
    path: str
    size: int
    split: str
    label: int | tuple[int, ...] | None = None
    label_text: str | tuple[str, ...] | None = None
    extras: Extras = ()
    annotations: ImageAnnotations | None = None  # a detection run's objects (none: a negative)
    bands: tuple[BandFile, ...] = ()
    page: Page | None = None

    @property
    def file_relpath(self) -> str:
        """The relative path of the file the input is read from (a page's file's)."""
        return self.page.file_of(self.relpath) if self.page is not None else self.relpath

    @property
    def weight(self) -> int:
        """The bytes the input stands for when shards are balanced: its file's, a page's share of
        its file's (the pages of a file add up to its size)."""
        if self.page is None or self.page.count <= 1:
            return self.size
        share, left = divmod(self.size, self.page.count)
        return share + (self.page.index < left)

    def to_row(self) -> list[Json]:
        row = self._head_row()
        if self.annotations is not None or self.bands or self.page is not None:
            row.append(self.annotations.to_row() if self.annotations is not None else None)
        row += self._tail_row()
        return row

    def _tail_row(self) -> list[Json]:
        """The staged form's columns after its annotations: its band files, then its page."""
        tail: list[Json] = []
        if self.bands or self.page is not None:
            tail.append([list(band) for band in self.bands])
        if self.page is not None:
            tail.append([self.page.index, self.page.count])
        return tail

    def _head_row(self) -> list[Json]:
        """The staged form without its annotations."""
        return [self.relpath, self.path, self.size, self.split, self.label, self.label_text, self.extras]

    def staged_text(self, objects_staged: Callable[[PlannedInput, list[str]], None] | None = None) -> str:
        """`to_row()` as JSON text, its objects' from their `object_text`, which `objects_staged`
        (when given) is handed for an annotated input."""
        if self.annotations is None:
            return _TEXT(self.to_row())
        texts = [object_text(o) for o in self.annotations.objects]
        if objects_staged is not None:
            objects_staged(self, texts)
        tail = "".join(f", {_TEXT(column)}" for column in self._tail_row())
        return f"{_TEXT(self._head_row())[:-1]}, {self.annotations.staged_text(texts)}{tail}]"

    @classmethod
    def from_row(cls, row: Sequence[Json]) -> PlannedInput:
        """The inverse of `to_row` (JSON gives lists where the plan had tuples)."""
        relpath, path, size, split, label, label_text, *rest = row
        extras = tuple(
            (n, t, tuple(v) if isinstance(v, list) else v) for n, t, v in (rest[0] if rest else ())
        )
        annotations = ImageAnnotations.from_row(rest[1]) if len(rest) > 1 and rest[1] is not None else None
        bands = tuple(BandFile(*band) for band in rest[2]) if len(rest) > 2 else ()
        page = Page(*rest[3]) if len(rest) > 3 else None
        return cls(
            relpath, path, size, split, _tuple(label), _tuple(label_text), extras, annotations, bands, page
        )


def _tuple(value: Json) -> Json:
    return tuple(value) if isinstance(value, list) else value


@dataclass(frozen=True)
class ShardTask:
    """One output shard and the inputs that go into it, in order: the unit of work of the
    path-planned sink (paths travel between workers, image bytes never do).

    `kinds` are the run's kinds of label (`tasks.Task.kinds`), in order; `settings` what each
    kind's workers need of the run (its JSON form, by kind name: `labels.base.LabelKind
    .read_setting` reads it back), staged with every shard task so a worker needs nothing else."""

    split: str
    index: int
    count: int
    inputs: tuple[PlannedInput, ...]
    kinds: tuple[str, ...] = tasks.task(tasks.DEFAULT).kinds  # a classification run's
    settings: Mapping[str, Json] = field(default_factory=dict)

    def to_json(self, objects_staged: Callable[[PlannedInput, list[str]], None] | None = None) -> str:
        """The staged text: JSON that `from_json` reads back, assembled from each object's
        `object_text`, which `objects_staged` is given for every annotated input as it is
        written: the launcher digests a picture's objects from that text (the file index keeps
        the digest) instead of encoding their numbers a second time (float `repr`:
        benchmarks/NOTES.md#per-step-costs-behind-the-code)."""
        head: JsonObject = {"split": self.split, "index": self.index, "count": self.count}
        head["kinds"] = list(self.kinds)
        if self.settings:
            head["settings"] = dict(self.settings)
        inputs = ", ".join(item.staged_text(objects_staged) for item in self.inputs)
        return f'{_TEXT(head)[:-1]}, "inputs": [{inputs}]}}'

    @classmethod
    def from_json(cls, text: str) -> ShardTask:
        data = json.loads(text)
        inputs = tuple(PlannedInput.from_row(row) for row in data["inputs"])
        kinds = tuple(data["kinds"])
        return cls(data["split"], data["index"], data["count"], inputs, kinds, data.get("settings", {}))


@dataclass(frozen=True, order=True)
class RejectLine:
    """One line of rejects.jsonl: the input's path relative to the input, a code and a detail."""

    path: str
    reason: str
    detail: str
    objects: int = 0  # a detection run's annotated objects that went with the rejected image

    def to_json(self) -> str:
        line = asdict(self)
        if not self.objects:
            del line["objects"]
        return json.dumps(line, ensure_ascii=False, sort_keys=True)

    @classmethod
    def from_json(cls, text: str) -> RejectLine:
        return cls(**json.loads(text))


@dataclass(frozen=True, order=True)
class DroppedObjectLine:
    """One line of dropped_objects.jsonl: an annotated object that is in no record, the image it
    was for (its path relative to the input, or the annotation entry's file name when no listed
    image matched), a reason code and a detail that names the object in its source."""

    path: str
    reason: str
    detail: str

    def to_json(self) -> str:
        return json.dumps(asdict(self), ensure_ascii=False, sort_keys=True)

    @classmethod
    def from_json(cls, text: str) -> DroppedObjectLine:
        return cls(**json.loads(text))


@dataclass(frozen=True)
class RecordFields:
    """Everything one record holds, independent of the schema's key names."""

    encoded: bytes
    format: str
    height: int
    width: int
    channels: int
    relpath: str
    sha256: str
    label: int | tuple[int, ...] | None = None  # a tuple of ids in a multi-label run
    label_text: str | tuple[str, ...] | None = None
    features: np.ndarray | None = None  # the model's output for this image, any shape
    feature_dtype: str = "float32"  # float32 (FloatList) | float16 (bytes)
    include_image: bool = True  # False for features_only
    extras: Extras = ()  # (column, type, value) of extra_columns
    # Each kind of label's stored value, by kind name (`labels.base.Placed.stored`): what its
    # `encoders` write, into the key groups `groups` names (`labels.RunLabels.groups`). The
    # class's id and name are `label` and `label_text` above.
    labels: ByKind = field(default_factory=dict)
    groups: tuple[str, ...] = ()
    depth: StoredPixels | None = None  # a picture past 8 bits (images.pixels); None: 8-bit


_NO_FACTS: ByKind = {}  # shared, never written to


class ShardKey(NamedTuple):
    """The output shard a record goes to: the path-planned sink writes each shard whole."""

    split: str
    index: int = 0  # type: ignore[assignment]  # hides tuple.index(): the name of a shard's number
    count: int = 1  # type: ignore[assignment]  # hides tuple.count(): the name of a split's shards


class ConvertedRecord(NamedTuple):
    """A record ready to write and the few facts about it the summary needs (not its pixels)."""

    shard: ShardKey
    example: bytes
    relpath: str
    label_text: str | tuple[str, ...] | None  # a tuple of names in a multi-label run
    height: int
    width: int
    source_format: str
    reencoded: bool
    digest: bytes = b""  # sha256 of `example`: the split's content digest in summary.json
    content_sha256: str = ""  # sha256 of the source file: duplicates are counted by it
    feature_shape: tuple[int, ...] | None = None
    mode: str = ""  # the source's Pillow mode
    changes: tuple[str, ...] = ()  # reasons' change codes
    # What the tally counts of each kind of label the record holds, by kind name
    # (`labels.base.Placed.facts`: small, no pixels), and the lines of what it left out.
    facts: ByKind = _NO_FACTS
    dropped: tuple[DroppedObjectLine, ...] = ()
    depth: str = ""  # a picture past 8 bits: its `PixelLayout.token`; "" for 8-bit

    @property
    def split(self) -> str:
        return self.shard.split


class PendingRecord(NamedTuple):
    """A validated image whose record is not built yet (it may wait for the model's features)."""

    shard: ShardKey
    fields: RecordFields
    source_format: str
    reencoded: bool
    mode: str = ""
    changes: tuple[str, ...] = ()
    dropped: tuple[DroppedObject, ...] = ()  # parts of its labels left out of the record
    facts: ByKind = _NO_FACTS  # see ConvertedRecord
    objects: int = 0  # the annotated objects it stands for (stored and dropped): a later reject counts them

    @property
    def split(self) -> str:
        return self.shard.split

    @property
    def encoded(self) -> bytes:
        """The stored image bytes, which the model input is decoded from."""
        return self.fields.encoded


@dataclass(frozen=True, order=True)
class ChangeLine:
    """One line of changes.jsonl: an input whose stored image differs from its file (or whose
    name says another format), with the source's format and mode and every reason."""

    path: str
    source_format: str
    mode: str
    reencoded: bool
    reasons: tuple[str, ...]

    def to_json(self) -> str:
        return json.dumps(asdict(self), ensure_ascii=False, sort_keys=True)

    @classmethod
    def from_json(cls, text: str) -> ChangeLine:
        row = json.loads(text)
        return cls(**{**row, "reasons": tuple(row["reasons"])})


@dataclass(frozen=True, order=True)
class DuplicateGroup:
    """Records whose source files have identical bytes: the sha256 and each copy's (path, split),
    sorted by path. Found in the pipeline by grouping (sha256, split, path): no image bytes move."""

    sha256: str
    copies: tuple[tuple[str, str], ...]

    @property
    def splits(self) -> list[str]:
        return sorted({split for _, split in self.copies})

    def to_json(self) -> str:
        paths = [{"path": path, "split": split} for path, split in self.copies]
        return json.dumps({"sha256": self.sha256, "splits": self.splits, "copies": paths}, ensure_ascii=False)


@dataclass(frozen=True)
class WrittenShard:
    """A shard written to its temporary path, waiting for the finalize step."""

    split: str
    index: int
    count: int
    temp_path: str
    records: int
    indexed: bool = False  # its `.idx` was written beside temp_path


@dataclass(frozen=True)
class FinalShard:
    """A shard under its final name, with the record count its writer counted (None when the
    writer does not say: Beam's WriteToTFRecord)."""

    split: str
    index: int
    count: int
    path: str
    records: int | None
