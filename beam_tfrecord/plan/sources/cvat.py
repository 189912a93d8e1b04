"""CVAT for images 1.1: one `annotations.xml` for a whole task or project export -> each listed
picture's objects (detection), class masks (segmentation), points (keypoints) and tags.

The export: `annotations.xml` (`<annotations><version>1.1</version><meta>...`) beside
`images/<name>` (a task's, `name` as uploaded) or `images/<subset>/<name>` (a project's). Each
annotations.xml under the input is read against the pictures under its folder; from the images
folder (or a subset's), it is found in a parent.

Shapes, each a child of its `<image>`: `box`, `polygon`, `ellipse` and `mask` are objects (a
mask's run lengths alternate 0s and 1s from 0s, row by row over its `left top width height` box,
and become COCO run lengths over the picture); `points` and `skeleton` a keypoints run's; a
`polyline` has no area (`not_drawn`), a `cuboid` is not read (`other_shape`); `tag`s are image
classes (`image_classes`). Each picture's shapes are taken in `z_order` order (file order on a
tie); `z_order` and `occluded` are kept in each object's reference. Class names: the meta's
labels in their order, a skeleton's sublabels (`<parent>`) its points' names. `<image subset>`
declares a project's splits. docs/cvat.md says what is kept and dropped, and why.

The XML is untrusted: `defusedxml` parses it, refusing any entity declaration.
"""

from __future__ import annotations

import dataclasses
import io
import math
import posixpath
import re
from collections import defaultdict
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import ClassVar
from xml.etree.ElementTree import Element, ParseError

import defusedxml
import defusedxml.ElementTree
import numpy as np

from beam_tfrecord import reasons, storage
from beam_tfrecord.elements import ImageAnnotations, ObjectBox, Polygon, RunLengths
from beam_tfrecord.plan.annotations import declared
from beam_tfrecord.plan.annotations.catalog import Catalog, partition, read_one, stem
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
from beam_tfrecord.plan.annotations.outlines import ellipse_outline, turned_box
from beam_tfrecord.plan.annotations.paths import AnnotationPath
from beam_tfrecord.plan.annotations.picture_classes import picture_classes_of
from beam_tfrecord.plan.annotations.results import AnnotationSet, ImageProblem, ObjectNote, UnmatchedEntry
from beam_tfrecord.plan.annotations.rle import from_mask
from beam_tfrecord.plan.annotations.shapes import class_masks_of
from beam_tfrecord.plan.sources.base import CERTAIN, Listing, LoadRequest, SourceError, SourceFormat

__all__ = ["FORMAT", "XML_NAME", "Cvat", "image_classes", "is_cvat_xml"]

XML_NAME = "annotations.xml"
IMAGES = "images"
# What CVAT writes first: `<annotations>` then `<version>` (after an XML declaration).
_HEAD = re.compile(rb"^\s*(?:<\?xml[^>]*\?>\s*)?<annotations>\s*<version>", re.DOTALL)
_HEAD_BYTES = 4096
# How many folders up from the input an export's annotations.xml is looked for: `images/`,
# `images/<subset>/` and one subfolder under either.
_UP = 3
# The sides of the outline an ellipse's mask is filled from.
_ELLIPSE_SIDES = 72
_SHAPES = ("box", "polygon", "polyline", "points", "ellipse", "mask", "cuboid", "skeleton")
_SVG_NODE = re.compile(r"<circle\b[^>]*>", re.IGNORECASE)
_SVG_EDGE = re.compile(r"<line\b[^>]*>", re.IGNORECASE)
_SVG_ATTRIBUTE = re.compile(r'([\w-]+)="([^"]*)"')
# How a keypoints run's points are labelled (COCO's v), from CVAT's point flags.
_HIDDEN, _VISIBLE = 1.0, 2.0


@dataclass(frozen=True)
class _Meta:
    """The meta's labels: the class names in order, each skeleton's point names (its sublabels)
    and its edges (0-based pairs)."""

    class_names: tuple[str, ...]
    point_names: Mapping[str, tuple[str, ...]]
    skeletons: Mapping[str, tuple[tuple[int, int], ...]]


@dataclass
class _Shape:
    """One shape as written: its element name, label, flags and the element's attributes."""

    kind: str
    label: str
    number: int
    z_order: int
    occluded: bool
    group: int
    attrib: Mapping[str, str]
    elements: list[_Shape] = field(default_factory=list)


@dataclass
class _Image:
    """One `<image>` entry: its name, subset and size, its shapes and its tags."""

    id: str
    name: str
    subset: str
    width: int | None
    height: int | None
    shapes: list[_Shape]
    tags: list[str]


@dataclass
class _Export:
    """One parsed annotations.xml: where it is, its meta and its image entries."""

    display: str
    folder: str  # its folder under the catalog's root, with a trailing `/` ("" for the root)
    meta: _Meta
    images: list[_Image]


class _Bad(Exception):
    """A shape that cannot be an object: (reason, detail)."""


def is_cvat_xml(head: bytes) -> bool:
    """Whether an XML file's first bytes are CVAT's: `<annotations><version>`."""
    return bool(_HEAD.match(head[:_HEAD_BYTES]))


def _parse(data: bytes, display: str, folder: str) -> _Export:
    """An annotations.xml's bytes -> its meta and image entries; SourceError naming the file for
    one that is not CVAT's XML, is malformed or declares entities (no picture is planned without
    the one file of the export)."""
    meta: _Meta | None = None
    images: list[_Image] = []
    tracks = 0
    try:
        events = defusedxml.ElementTree.iterparse(io.BytesIO(data), events=("start", "end"))
        root: Element | None = None
        for event, element in events:
            if root is None:
                root = element
                if element.tag != "annotations":
                    raise SourceError(
                        f"{display}: its root element is <{element.tag}>, not CVAT's <annotations>",
                        file=display,
                    )
                continue
            if event == "end" and element.tag in ("meta", "image", "track"):
                if element.tag == "meta":
                    meta = _meta(element)
                elif element.tag == "image":
                    images.append(_image(element))
                tracks += element.tag == "track"
                root.remove(element)
    except defusedxml.DefusedXmlException as error:
        raise SourceError(
            f"{display}: refused, it declares XML entities ({type(error).__name__}); annotation XML is "
            "never expanded",
            file=display,
        ) from None
    except ParseError as error:
        line, column = error.position[0], error.position[1] + 1
        reason = str(error).split(":")[0]
        raise SourceError(
            f"{display} is not valid XML: {reason} at line {line} column {column}", file=display
        ) from None
    if meta is None:
        raise SourceError(
            f"{display}: no <meta> that lists <labels>: not a CVAT for images 1.1 file", file=display
        )
    if tracks and not images:
        raise SourceError(
            f"{display} holds {tracks} tracks and no <image>: a CVAT for video export; export the task "
            "as CVAT for images 1.1",
            file=display,
        )
    return _Export(display, folder, meta, images)


def _meta(element: Element) -> _Meta | None:
    owner = next((o for o in (element.find(n) for n in ("task", "project", "job")) if o is not None), None)
    labels = owner.find("labels") if owner is not None else None
    if labels is None:
        return None
    names: list[str] = []
    kinds: dict[str, str] = {}
    svgs: dict[str, str] = {}
    children: dict[str, list[str]] = defaultdict(list)
    for label in labels.findall("label"):
        name = (label.findtext("name") or "").strip()
        if not name:
            continue
        parent = (label.findtext("parent") or "").strip()
        if parent:
            children[parent].append(name)
            continue
        names.append(name)
        kinds[name] = (label.findtext("type") or "").strip()
        svgs[name] = label.findtext("svg") or ""
    point_names = {n: tuple(children[n]) for n in names if kinds[n] == "skeleton" or children.get(n)}
    skeletons = {n: _edges(svgs[n], point_names[n]) for n in point_names}
    return _Meta(tuple(dict.fromkeys(names)), point_names, skeletons)


def _edges(svg: str, names: tuple[str, ...]) -> tuple[tuple[int, int], ...]:
    """A skeleton's edges from its SVG (CVAT keeps the drawing: each `<circle>` a point with its
    `data-node-id` and `data-label-name`, each `<line>` an edge `data-node-from`, `data-node-to`),
    as 0-based pairs of the points' order."""
    index = {name: i for i, name in enumerate(names)}
    circles = [dict(_SVG_ATTRIBUTE.findall(circle)) for circle in _SVG_NODE.findall(svg)]
    nodes = {
        c.get("data-node-id"): index[c["data-label-name"]]
        for c in circles
        if c.get("data-label-name") in index
    }
    lines = [dict(_SVG_ATTRIBUTE.findall(line)) for line in _SVG_EDGE.findall(svg)]
    ends = [(nodes.get(line.get("data-node-from")), nodes.get(line.get("data-node-to"))) for line in lines]
    return tuple((a, b) for a, b in ends if a is not None and b is not None)


def _size(text: str | None) -> int | None:
    return int(text) if text and text.isdigit() and int(text) > 0 else None


def _image(element: Element) -> _Image:
    shapes: list[_Shape] = []
    tags: list[str] = []
    for number, child in enumerate(element, start=1):
        if child.tag in _SHAPES:
            shapes.append(_shape(child, number))
        elif child.tag == "tag" and child.get("label"):
            tags.append(child.get("label", ""))
    size = _size(element.get("width")), _size(element.get("height"))
    return _Image(
        element.get("id", ""), element.get("name", ""), element.get("subset", ""), *size, shapes, tags
    )


def _whole(text: str | None) -> int:
    return int(text) if text and text.lstrip("-").isdigit() else 0


def _shape(element: Element, number: int) -> _Shape:
    elements = [_shape(child, n) for n, child in enumerate(element, start=1) if child.tag in _SHAPES]
    get = element.get
    flags = _whole(get("z_order")), get("occluded") == "1", _whole(get("group_id"))
    return _Shape(element.tag, get("label", ""), number, *flags, dict(element.attrib), elements)


# Shapes -> objects.


def _number(shape: _Shape, name: str) -> float:
    text = shape.attrib.get(name)
    try:
        value = float(text) if text is not None else math.nan
    except ValueError:
        value = math.nan
    if not math.isfinite(value):
        raise _Bad(reasons.BAD_OBJECT.code, f"{name}={text!r} is not a number")
    return value


def _points(shape: _Shape) -> list[float]:
    text = shape.attrib.get("points", "")
    values: list[float] = []
    for pair in text.split(";"):
        if not pair.strip():
            continue
        parts = pair.split(",")
        try:
            x, y = (float(v) for v in parts)
        except ValueError:
            raise _Bad(reasons.BAD_OBJECT.code, f"points {pair!r} is not x,y") from None
        if not (math.isfinite(x) and math.isfinite(y)):
            raise _Bad(reasons.BAD_OBJECT.code, f"points {pair!r} is not finite")
        values += (x, y)
    return values


def _boxed(values: Sequence[float]) -> tuple[float, float, float, float]:
    xs, ys = values[0::2], values[1::2]
    return min(xs), min(ys), max(xs), max(ys)


def _ellipse(shape: _Shape) -> list[float]:
    """An ellipse's outline, for the raster CVAT's COCO export makes of it (`cv2.ellipse` filled,
    centre and axes rounded to whole pixels): each pixel whose centre lies within half a pixel of
    the ellipse, so pycocotools' fill (a pixel whose centre is inside) gives the same pixels to
    within its boundary."""
    cx, cy = round(_number(shape, "cx")), round(_number(shape, "cy"))
    rx, ry = round(_number(shape, "rx")), round(_number(shape, "ry"))
    if rx < 0 or ry < 0:
        raise _Bad(reasons.ZERO_AREA.code, f"axes {rx},{ry} are negative")
    rotation = float(shape.attrib.get("rotation", "0") or 0)
    return ellipse_outline(cx + 0.5, cy + 0.5, rx + 0.5, ry + 0.5, rotation)


def _run_lengths(shape: _Shape, width: int | None, height: int | None) -> tuple[RunLengths, tuple[int, ...]]:
    """CVAT's mask (row-major run lengths over its box, from 0s) -> COCO's run lengths over the
    picture (column-major, from 0s) and the box of its pixels (x0, y0, x1, y1, exclusive)."""
    if width is None or height is None:
        raise _Bad(reasons.BAD_OBJECT.code, "a mask on an <image> without its width and height")
    try:
        counts = [int(v) for v in shape.attrib.get("rle", "").split(",") if v.strip()]
    except ValueError:
        raise _Bad(reasons.BAD_OBJECT.code, "rle is not whole numbers") from None
    left, top = int(_number(shape, "left")), int(_number(shape, "top"))
    w, h = int(_number(shape, "width")), int(_number(shape, "height"))
    if w <= 0 or h <= 0 or any(c < 0 for c in counts) or sum(counts) != w * h:
        raise _Bad(reasons.BAD_OBJECT.code, f"rle covers {sum(counts)} pixels, not its {w}x{h} box")
    if left < 0 or top < 0 or left + w > width or top + h > height:
        raise _Bad(
            reasons.BAD_OBJECT.code, f"its {w}x{h} box at {left},{top} passes the {width}x{height} picture"
        )
    values = np.repeat(np.arange(len(counts)) % 2, counts).astype(np.uint8).reshape(h, w)
    rows, columns = np.nonzero(values)
    if not len(rows):
        raise _Bad(reasons.ZERO_AREA.code, "its mask has no pixel")
    full = np.zeros((height, width), np.uint8)
    full[top : top + h, left : left + w] = values
    box = (left + columns.min(), top + rows.min(), left + columns.max() + 1, top + rows.max() + 1)
    return from_mask(full), tuple(int(v) for v in box)


def _ref(display: str, image: _Image, shape: _Shape) -> str:
    flags = [f"z_order {shape.z_order}"] + (["occluded"] if shape.occluded else [])
    return f"{display}#image {image.id}, {shape.kind} {shape.number} ({', '.join(flags)})"


def _outline_object(shape: _Shape, image: _Image, ref: str, masks: bool) -> ObjectBox:
    """A box, polygon, ellipse or mask as a detection object (its outline where masks are kept)."""
    mask: tuple[Polygon, ...] | RunLengths | None = None
    if shape.kind == "box":
        x0, y0, x1, y1 = (_number(shape, n) for n in ("xtl", "ytl", "xbr", "ybr"))
        rotation = float(shape.attrib.get("rotation", "0") or 0)
        if rotation % 360:
            corners = turned_box(x0, y0, x1, y1, rotation)
            x0, y0, x1, y1 = _boxed(corners)
            mask = (Polygon(tuple(corners)),)
    elif shape.kind == "polygon":
        outline = _points(shape)
        if len(outline) < 6:
            raise _Bad(reasons.ZERO_AREA.code, f"a polygon of {len(outline) // 2} points has no area")
        x0, y0, x1, y1 = _boxed(outline)
        mask = (Polygon(tuple(outline)),)
    elif shape.kind == "ellipse":
        outline = _ellipse(shape)
        x0, y0, x1, y1 = _boxed(outline)
        mask = (Polygon(tuple(outline)),)
    else:
        mask, (left, top, right, bottom) = _run_lengths(shape, image.width, image.height)
        x0, y0, x1, y1 = float(left), float(top), float(right), float(bottom)
    if x1 <= x0 or y1 <= y0:
        raise _Bad(reasons.ZERO_AREA.code, f"box {x0:g},{y0:g} to {x1:g},{y1:g} has no area")
    return ObjectBox(x0, y0, x1, y1, shape.label, mask=mask if masks else None, source_ref=ref)


def _keypoints_of(shape: _Shape, meta: _Meta) -> list[float]:
    """A skeleton's or a points shape's `x, y, v` triples, in its label's points' order."""
    if shape.kind == "points":
        values = _points(shape)
        v = _HIDDEN if shape.occluded else _VISIBLE
        return [c for x, y in zip(values[0::2], values[1::2], strict=True) for c in (x, y, v)]
    names = meta.point_names.get(shape.label, ())
    found: list[float] = [0.0] * (3 * len(names))
    for element in shape.elements:
        if element.label not in names or element.attrib.get("outside") == "1":
            continue
        values = _points(element)
        if len(values) != 2:
            raise _Bad(reasons.BAD_OBJECT.code, f"point {element.label!r} holds {len(values) // 2} points")
        index = names.index(element.label)
        found[3 * index : 3 * index + 3] = [values[0], values[1], _HIDDEN if element.occluded else _VISIBLE]
    return found


def _objects(
    export: _Export, image: _Image, request: LoadRequest, segmentation: bool
) -> tuple[list[ObjectBox], list[tuple[str, str]]]:
    """A picture's shapes as the run's objects, in z_order (file order on a tie), and what was
    left out, as (reason, detail)."""
    objects: list[ObjectBox] = []
    dropped: list[tuple[str, str]] = []
    shapes = sorted(image.shapes, key=lambda s: s.z_order)
    keypoints = request.keypoints
    grouped: dict[int, list[_Shape]] = defaultdict(list)
    pointed = {s.group for s in shapes if s.group and s.kind in ("points", "skeleton")}
    for shape in shapes:
        if keypoints and shape.kind == "box" and shape.group in pointed:
            grouped[shape.group].append(shape)
    for shape in shapes:
        ref = _ref(export.display, image, shape)
        try:
            if shape.kind == "polyline":
                raise _Bad(reasons.NOT_DRAWN.code, "a polyline has no area")
            if shape.kind == "cuboid":
                raise _Bad(reasons.OTHER_SHAPE.code, "a cuboid is not read")
            if keypoints:
                if shape.kind not in ("points", "skeleton"):
                    if shape.kind == "box" and len(grouped.get(shape.group, ())) == 1:
                        continue  # the box of its group's points
                    raise _Bad(reasons.OTHER_SHAPE.code, f"its {shape.kind} has no points")
                objects.append(_points_object(shape, export.meta, ref, grouped))
                continue
            if shape.kind in ("points", "skeleton"):
                raise _Bad(
                    reasons.OTHER_SHAPE.code, f"a {shape.kind} shape has no area: --task keypoints reads it"
                )
            if segmentation and shape.kind == "box":
                # A box is not drawn into a class mask (its outline is not the object's): the
                # drawing step drops it `not_drawn`.
                objects.append(_outline_object(shape, image, ref, masks=False))
                continue
            objects.append(_outline_object(shape, image, ref, request.masks or segmentation))
        except _Bad as bad:
            reason, detail = bad.args
            dropped.append((reason, f"{ref}: {shape.label!r}: {detail}"))
    return objects, dropped


def _points_object(shape: _Shape, meta: _Meta, ref: str, grouped: Mapping[int, list[_Shape]]) -> ObjectBox:
    triples = _keypoints_of(shape, meta)
    labelled = [(triples[i], triples[i + 1]) for i in range(0, len(triples), 3) if triples[i + 2]]
    box = grouped.get(shape.group, []) if shape.group else []
    if len(box) == 1:
        x0, y0, x1, y1 = (_number(box[0], n) for n in ("xtl", "ytl", "xbr", "ybr"))
    elif labelled:
        x0, y0, x1, y1 = _boxed([c for point in labelled for c in point])
    else:
        raise _Bad(reasons.ZERO_AREA.code, "no point is labelled")
    return ObjectBox(x0, y0, x1, y1, shape.label, source_ref=ref, keypoints=tuple(triples))


# Exports -> pictures.


@dataclass
class _Matches:
    """Each picture's image entries, the entries that name no listed picture (or several)."""

    claims: dict[str, list[tuple[_Export, _Image]]] = field(default_factory=lambda: defaultdict(list))
    ambiguous: dict[str, list[str]] = field(default_factory=lambda: defaultdict(list))
    unmatched: list[UnmatchedEntry] = field(default_factory=list)


def _match(listed: Catalog, exports: Sequence[_Export]) -> _Matches:
    """`<image name>` -> a listed picture: `images/<subset>/<name>` (a project export),
    `images/<name>`, `<name>` under the file's folder, else a unique listed path ending with the
    name (in a folder named by its subset, for a project's: two tasks' pictures may share a
    name)."""
    found = _Matches()
    for export in exports:
        for image in export.images:
            where = f"{export.display}#image {image.id}"
            shapes = len(image.shapes)
            if not image.name:
                found.unmatched.append(UnmatchedEntry(where, "", reasons.BAD_ENTRY.code, "no name", shapes))
                continue
            base = export.folder
            candidates = [f"{base}{IMAGES}/{image.subset}/{image.name}"] if image.subset else []
            candidates += [f"{base}{IMAGES}/{image.name}", f"{base}{image.name}"]
            hit = next((c for c in candidates if c in listed.images), None)
            if hit is not None:
                found.claims[hit].append((export, image))
                continue
            near = [r for r in listed.matches(image.name) if r.startswith(base)]
            if image.subset:  # a project's: under its subset's folder (its name is the task's own)
                near = [r for r in near if image.subset in r.split("/")[:-1]]
            if len(near) == 1:
                found.claims[near[0]].append((export, image))
            elif not near:
                detail = "no listed file has this name"
                found.unmatched.append(
                    UnmatchedEntry(where, image.name, reasons.MISSING_IMAGE.code, detail, shapes)
                )
            else:
                detail = f"matches {len(near)} listed files: {', '.join(near[:5])}"
                found.unmatched.append(
                    UnmatchedEntry(where, image.name, reasons.AMBIGUOUS_IMAGE.code, detail, shapes)
                )
                for relpath in near:
                    found.ambiguous[relpath].append(f"{where} ({image.name!r})")
    return found


def _exports(located: Located) -> list[_Export]:
    """Every CVAT annotations.xml the located listing holds (or the one given), parsed."""
    listed = located.catalog
    given = {p.path for p in located.paths}
    exports = []
    for relpath, file in listed.annotation_files.items():
        name = posixpath.basename(relpath)
        if file.path in given or (not given and name == XML_NAME):
            data = read_one(file.path)
            if not given and not is_cvat_xml(data):
                continue  # another tool's annotations.xml: left for the sources' `skipped` lines
            folder = "" if file.path in given else posixpath.dirname(relpath)
            display = located.display(relpath)
            exports.append(_parse(data, display, folder + "/" if folder else ""))
    return exports


def _located_given(path: str, base: str, listed: Catalog) -> Located:
    """An annotations.xml named with annotations_path: the pictures under its folder are seen
    from there when the input is under it."""
    files = listed_under(path, (".xml",))
    if not files or not path.lower().endswith(".xml"):
        raise SourceError(
            f"{path} is not an XML file: name CVAT's annotations.xml", field="annotations_path", file=path
        )
    root = posixpath.dirname(path)
    inside = relative_to(base, root)
    key = posixpath.basename(path)
    file = dataclasses.replace(files[0], relpath=key)
    if inside is None:  # the pictures are matched by their names alone
        return Located(rerooted(listed, "", {key: file}), paths=(AnnotationPath(path),))
    prefix = inside + "/" if inside else ""
    return Located(rerooted(listed, prefix, {key: file}), prefix, root, (path,), (AnnotationPath(path),))


def _find_beside(base: str) -> str | None:
    """The export's annotations.xml in a folder above the input (its images folder, a subset's)."""
    for folder in parents(base)[:_UP]:
        path = join(folder, XML_NAME)
        if storage.is_file(path) and is_cvat_xml(read_one(path)[:_HEAD_BYTES]):
            return folder
    return None


class _Xml(ObjectFiles):
    """CVAT's one annotations.xml per export, under the input or in a folder above it; read for
    a class mask (`segmentation`), every outline is kept and boxes are left to be dropped."""

    def __init__(self, segmentation: bool = False) -> None:
        self.segmentation = segmentation

    def given(self, path: str, task: str) -> bool:
        return path.endswith(".xml")

    def locate(
        self, base: str, listed: Catalog, paths: tuple[AnnotationPath, ...], keypoints: bool
    ) -> Located:
        if paths:
            return _located_given(paths[0].path, base, listed)
        if any(posixpath.basename(r) == XML_NAME for r in listed.annotation_files):
            return Located(listed)
        root = _find_beside(base)
        if root is None:
            return Located(listed)
        prefix = (relative_to(base, root) or "") + "/"
        beside = under(root, root, listed_under(join(root, XML_NAME), (".xml",)))
        return Located(rerooted(listed, prefix, beside), prefix, root, (join(root, XML_NAME),))

    def read(self, located: Located, request: LoadRequest) -> AnnotationSet:
        return _read(located, request, self.segmentation)

    def declared(
        self, result: AnnotationSet, located: Located, paths: tuple[AnnotationPath, ...]
    ) -> AnnotationSet:
        """A project export's `<image subset>` declares each picture's split."""
        claims = {r: found.split for r, found in result.images.items() if found.split}
        if not claims:
            return result
        images = {r: dataclasses.replace(f, split=None) if f.split else f for r, f in result.images.items()}
        names = tuple(n for n in declared.SPLIT_ORDER if n in claims.values())
        source = "the CVAT project's subsets (<image subset=...> of annotations.xml)"
        return dataclasses.replace(
            result, images=images, declared=declared.DeclaredSplits(source, names, claims)
        )


def _read(located: Located, request: LoadRequest, segmentation: bool) -> AnnotationSet:
    listed = located.catalog
    exports = _exports(located)
    matches = _match(listed, exports)
    images: dict[str, ImageAnnotations] = {}
    problems: list[ImageProblem] = []
    dropped: list[ObjectNote] = []
    unannotated: list[str] = []
    tags = 0
    for relpath in listed.images:
        entries = matches.claims.get(relpath)
        if entries and len(entries) > 1:
            where = " and ".join(f"{export.display}#image {image.id}" for export, image in entries)
            count = sum(len(image.shapes) for _, image in entries)
            problems.append(
                ImageProblem(relpath, reasons.CONFLICTING_ANNOTATIONS.code, f"annotated by {where}", count)
            )
        elif entries:
            export, image = entries[0]
            objects, left_out = _objects(export, image, request, segmentation)
            dropped += [ObjectNote(relpath, reason, detail) for reason, detail in left_out]
            tags += len(image.tags)
            split = declared.split_name(image.subset) if image.subset else None
            images[relpath] = ImageAnnotations(
                tuple(objects), image.name, width=image.width, height=image.height, split=split
            )
        elif relpath in matches.ambiguous:
            detail = f"{' and '.join(matches.ambiguous[relpath])} could be this file or another listed one"
            problems.append(ImageProblem(relpath, reasons.AMBIGUOUS_ANNOTATION.code, detail))
        else:
            unannotated.append(relpath)
            images[relpath] = ImageAnnotations((), stem(relpath))
    class_names = tuple(dict.fromkeys(name for export in exports for name in export.meta.class_names))
    sources = {
        export.folder + XML_NAME: f"CVAT for images annotations ({len(export.images)} images), read"
        for export in exports
        if export.folder + XML_NAME in listed.annotation_files
    }
    warnings = (f"{tags} tags (image-level classes) are not stored by a {request.task} run",) if tags else ()
    result = AnnotationSet(
        format="cvat",
        class_names=class_names,
        images=images,
        unannotated=frozenset(unannotated),
        sources=sources,
        problems=tuple(sorted(problems)),
        unmatched=tuple(matches.unmatched),
        dropped=tuple(dropped),
        warnings=warnings,
    )
    return _with_points(result, exports) if request.keypoints else result


def _with_points(result: AnnotationSet, exports: Sequence[_Export]) -> AnnotationSet:
    """A keypoints run's objects, every one padded to the run's most points, each class's point
    names (a skeleton's sublabels; a points shape's by number) and skeleton edges."""
    names: dict[str, tuple[str, ...]] = {}
    skeletons: dict[str, tuple[tuple[int, int], ...]] = {}
    for export in exports:
        names |= dict(export.meta.point_names)
        skeletons |= dict(export.meta.skeletons)
    skeleton_names = set(names)
    most: dict[str, int] = defaultdict(int)
    for found in result.images.values():
        for item in found.objects:
            if item.class_name not in skeleton_names:
                most[item.class_name] = max(most[item.class_name], len(item.keypoints or ()) // 3)
    for name, count in most.items():
        names.setdefault(name, tuple(str(i) for i in range(count)))
        skeletons.setdefault(name, ())
    count = 3 * max((len(n) for n in names.values()), default=0)
    images = {}
    for relpath, found in result.images.items():
        padded = [
            o._replace(keypoints=(*(o.keypoints or ()), *[0.0] * (count - len(o.keypoints or ()))))
            for o in found.objects
        ]
        images[relpath] = dataclasses.replace(found, objects=tuple(padded))
    return dataclasses.replace(
        result, images=images, task="keypoints", keypoint_names=names, skeletons=skeletons
    )


_XML_FILES = _Xml()
_SEGMENTATION_FILES = _Xml(segmentation=True)


def image_classes(request: LoadRequest) -> dict[str, tuple[str, ...]]:
    """Each listed picture's `<tag>` labels (image-level classes), in file order, by its relpath
    under the input; pictures without a tag are left out. For a classification run's seam."""
    listed = partition(request.files)
    located = _XML_FILES.locate(input_base(request.files), listed, request.paths, False)
    matches = _match(located.catalog, _exports(located))
    cut = len(located.prefix)
    return {
        relpath[cut:]: tuple(entries[0][1].tags)
        for relpath, entries in matches.claims.items()
        if len(entries) == 1 and entries[0][1].tags
    }


class Cvat(SourceFormat):
    name = "cvat"
    title = "CVAT for images"
    tasks = ("classification", "detection", "segmentation", "keypoints")
    help = "CVAT for images 1.1: one annotations.xml beside images/ (a task or a project export)"
    looked_for: ClassVar[Mapping[str, str]] = {
        task: "CVAT's annotations.xml under --input or in a folder above it"
        for task in ("classification", "detection", "segmentation", "keypoints")
    }
    searched_as: ClassVar[Mapping[str, str]] = {
        task: "CVAT annotations.xml" for task in ("classification", "detection", "segmentation", "keypoints")
    }
    layout_as = "CVAT for images annotations.xml"
    instead_as = "annotations.xml (CVAT for images)"
    options = ("path", "masks", "label_map", "ignore_value", "allow_unmatched_annotations", "declared_splits")
    suffixes = (".xml",)

    def claims(self, relpath: str, task: str) -> bool:
        return task in self.tasks and posixpath.basename(relpath) == XML_NAME

    def kept_above(self, name: str) -> bool:
        return name == XML_NAME

    def score(self, task: str, listing: Listing) -> float:
        """CERTAIN where an annotations.xml under the input (or above it) is CVAT's; the guard of
        a classification run counts it by name (`claims`), not here."""
        if not listing.outside:
            return 0.0
        if listing.paths:
            path = listing.paths[0].path
            if not path.lower().endswith(".xml") or not storage.is_file(path):
                return 0.0
            return CERTAIN if is_cvat_xml(read_one(path)[:_HEAD_BYTES]) else 0.0
        heads = (
            read_one(f.path)[:_HEAD_BYTES]
            for r, f in listing.catalog.annotation_files.items()
            if posixpath.basename(r) == XML_NAME
        )
        if any(is_cvat_xml(head) for head in heads):
            return CERTAIN
        return CERTAIN if listing.files and _find_beside(input_base(listing.files)) else 0.0

    def load(self, request: LoadRequest) -> AnnotationSet:
        """Objects; for segmentation, each picture's outlines as class masks drawn in z_order,
        class id 0 the background and the meta's labels 1, 2, ... in their order; for
        classification, each picture's tags."""
        if request.task == "classification":
            objects = dataclasses.replace(request, task="detection", class_names=None)
            return picture_classes_of(
                load_objects(self, _XML_FILES, objects), image_classes(request), request
            )
        if request.task != "segmentation":
            return load_objects(self, _XML_FILES, request)
        objects = dataclasses.replace(request, task="detection", masks=True, class_names=None)
        return class_masks_of(load_objects(self, _SEGMENTATION_FILES, objects), request)


FORMAT = Cvat()
