"""CVAT for images 1.1 exports made by the tests, written as CVAT 2.x's server writes them
(`cvat/apps/dataset_manager/formats/cvat.py`: `dump_as_cvat_annotation` through an
`xml.sax.saxutils.XMLGenerator`, two-space indents, attributes in its order, numbers as `%.2f`,
a mask's run lengths as a Python list's text without brackets), with the `<meta>` of a task
(`TaskData.meta_for_task`) or a project (`ProjectData._init_meta`: subsets, tasks, labels), and
the pictures where the export puts them: `images/<name>` for a task, `images/<subset>/<name>` for
a project.

Shapes are made by `box`, `polygon`, `polyline`, `points`, `ellipse`, `mask`, `skeleton` and
`cuboid`; `image` is one `<image>` entry; `write_export` writes the tree.
"""

from __future__ import annotations

import io
import pathlib
from collections import OrderedDict
from collections.abc import Sequence
from dataclasses import dataclass, field
from xml.sax.saxutils import XMLGenerator

import numpy as np
from imagegen import jpeg, png, write_tree


@dataclass
class Label:
    name: str
    type: str = "any"
    parent: str | None = None
    svg: str | None = None
    color: str = "#fa3253"


@dataclass
class Shape:
    kind: str  # the element: box, polygon, polyline, points, ellipse, mask, cuboid, skeleton
    attrs: OrderedDict[str, str]
    elements: list[Shape] = field(default_factory=list)
    attributes: list[tuple[str, str]] = field(default_factory=list)


@dataclass
class Entry:
    """One `<image>`: its name (a path under images/ or images/<subset>/), size, shapes, tags."""

    name: str
    width: int
    height: int
    shapes: list[Shape] = field(default_factory=list)
    tags: list[str] = field(default_factory=list)
    subset: str | None = None
    task_id: int = 1


def _f(value: float) -> str:
    return f"{value:.2f}"


def _head(label: str, occluded: bool) -> OrderedDict[str, str]:
    return OrderedDict([("label", label), ("source", "manual"), ("occluded", str(int(occluded)))])


def _tail(attrs: OrderedDict[str, str], z_order: int, group: int) -> OrderedDict[str, str]:
    attrs["z_order"] = str(z_order)
    if group:
        attrs["group_id"] = str(group)
    return attrs


def box(label, x0, y0, x1, y1, *, z_order=0, occluded=False, rotation=0.0, group=0) -> Shape:
    attrs = _head(label, occluded)
    attrs.update([("xtl", _f(x0)), ("ytl", _f(y0)), ("xbr", _f(x1)), ("ybr", _f(y1))])
    if rotation:
        attrs["rotation"] = _f(rotation)
    return Shape("box", _tail(attrs, z_order, group))


def _points_text(points: Sequence[float]) -> str:
    return ";".join(f"{_f(x)},{_f(y)}" for x, y in zip(points[0::2], points[1::2], strict=True))


def polygon(label, points, *, z_order=0, occluded=False, group=0, kind="polygon") -> Shape:
    attrs = _head(label, occluded)
    attrs["points"] = _points_text(points)
    return Shape(kind, _tail(attrs, z_order, group))


def polyline(label, points, **kwargs) -> Shape:
    return polygon(label, points, kind="polyline", **kwargs)


def points(label, values, **kwargs) -> Shape:
    return polygon(label, values, kind="points", **kwargs)


def ellipse(label, cx, cy, rx, ry, *, rotation=0.0, z_order=0, occluded=False) -> Shape:
    """CVAT keeps an ellipse as its centre, a point on its right and one on its top; the
    export writes the radii."""
    attrs = _head(label, occluded)
    attrs.update([("cx", _f(cx)), ("cy", _f(cy)), ("rx", _f(rx)), ("ry", _f(ry))])
    if rotation:
        attrs["rotation"] = _f(rotation)
    return Shape("ellipse", _tail(attrs, z_order, 0))


def cvat_rle(flat: np.ndarray) -> list[int]:
    """CVAT's run lengths of a flat 0/1 array: alternating runs, the first of 0s
    (`MaskConverter.rle`)."""
    n = len(flat)
    unequal = flat[1:] != flat[:-1]
    runs = np.diff(np.nonzero(unequal)[0], prepend=-1, append=n - 1).tolist()
    if flat[0] != 0:
        runs.insert(0, 0)
    return runs


def mask(label, full: np.ndarray, *, z_order=0, occluded=False) -> Shape:
    """A brush mask, from its picture-sized 0/1 array: the run lengths of its tight box, row by
    row (`MaskConverter.dm_mask_to_cvat_rle`), and that box."""
    rows, columns = np.nonzero(full)
    top, bottom, left, right = rows.min(), rows.max(), columns.min(), columns.max()
    tight = full[top : bottom + 1, left : right + 1].astype(np.uint8)
    attrs = _head(label, occluded)
    attrs.update(
        [
            ("rle", f"{list(int(v) for v in cvat_rle(tight.reshape(-1)))}"[1:-1]),
            ("left", str(int(left))),
            ("top", str(int(top))),
            ("width", str(int(right - left) + 1)),
            ("height", str(int(bottom - top) + 1)),
        ]
    )
    return Shape("mask", _tail(attrs, z_order, 0))


def cuboid(label, x, y, size) -> Shape:
    attrs = _head(label, False)
    corners = [x, y, x, y + size, x + size, y, x + size, y + size]
    shifted = [v + size / 2 for v in corners]
    for prefix, values in (("1", corners), ("2", shifted)):
        for name, value in zip(("xtl", "ytl", "xbl", "ybl", "xtr", "ytr", "xbr", "ybr"), values, strict=True):
            attrs[name + prefix] = _f(value)
    return Shape("cuboid", _tail(attrs, 0, 0))


def point(label, x, y, *, occluded=False, outside=False) -> Shape:
    """One element of a skeleton: label, source, outside, occluded, points (no z_order)."""
    attrs = OrderedDict(
        [
            ("label", label),
            ("source", "manual"),
            ("outside", str(int(outside))),
            ("occluded", str(int(occluded))),
            ("points", _points_text([x, y])),
        ]
    )
    return Shape("points", attrs)


def skeleton(label, elements: list[Shape], *, z_order=0, group=0) -> Shape:
    attrs = OrderedDict([("label", label), ("source", "manual"), ("z_order", str(z_order))])
    if group:
        attrs["group_id"] = str(group)
    return Shape("skeleton", attrs, elements)


def skeleton_svg(names: Sequence[str], edges: Sequence[tuple[int, int]]) -> str:
    """The drawing CVAT keeps for a skeleton label, sublabel ids replaced by their names (as
    `_convert_db_labels` does): a `<circle>` per point, a `<line>` per edge."""
    lines = [
        f'<line x1="10" y1="10" x2="20" y2="20" data-type="edge" data-node-from="{a + 1}" '
        f'data-node-to="{b + 1}" stroke="black" stroke-width="0.5"></line>'
        for a, b in edges
    ]
    circles = [
        f'<circle r="0.75" cx="{10 + i}" cy="{10 + i}" data-type="element node" data-element-id="{i + 1}" '
        f'data-node-id="{i + 1}" data-label-name="{name}"></circle>'
        for i, name in enumerate(names)
    ]
    return "".join(lines + circles)


class _Writer:
    """CVAT's XmlAnnotationWriter: an XMLGenerator indented two spaces a level."""

    def __init__(self) -> None:
        self.buffer = io.StringIO()
        self.xml = XMLGenerator(self.buffer, "utf-8")
        self.level = 0

    def indent(self) -> None:
        self.xml.ignorableWhitespace("\n" + "  " * self.level)

    def meta(self, values: OrderedDict) -> None:
        self.level += 1
        for key, value in values.items():
            self.indent()
            self.xml.startElement(key, {})
            if isinstance(value, OrderedDict):
                self.meta(value)
                self.indent()
            elif isinstance(value, list):
                for pair in value:
                    self.meta(OrderedDict([pair]))
                self.indent()
            else:
                self.xml.characters(value)
            self.xml.endElement(key)
        self.level -= 1

    def shape(self, shape: Shape) -> None:
        self.indent()
        self.xml.startElement(shape.kind, shape.attrs)
        self.level += 1
        for element in shape.elements:
            self.shape(element)
        for name, value in shape.attributes:
            self.indent()
            self.xml.startElement("attribute", {"name": name})
            self.xml.characters(value)
            self.xml.endElement("attribute")
        self.level -= 1
        self.indent()
        self.xml.endElement(shape.kind)


def _labels(labels: Sequence[Label]) -> list:
    found = []
    for label in labels:
        values = OrderedDict(
            [("name", label.name), ("color", label.color), ("type", label.type), ("attributes", [])]
        )
        if label.parent:
            values["parent"] = label.parent
        if label.svg is not None:
            values["svg"] = label.svg
        found.append(("label", values))
    return found


def _task_meta(
    task_id: int, name: str, size: int, subset: str, labels: Sequence[Label] | None
) -> OrderedDict:
    meta = OrderedDict(
        [
            ("id", str(task_id)),
            ("name", name),
            ("size", str(size)),
            ("mode", "annotation"),
            ("overlap", "0"),
            ("bugtracker", ""),
            ("created", "2024-05-02 10:11:12.131415+00:00"),
            ("updated", "2024-05-03 10:11:12.131415+00:00"),
            ("subset", subset),
            ("start_frame", "0"),
            ("stop_frame", str(size - 1)),
            ("frame_filter", ""),
            (
                "segments",
                [
                    (
                        "segment",
                        OrderedDict(
                            [
                                ("id", str(task_id)),
                                ("start", "0"),
                                ("stop", str(size - 1)),
                                ("url", f"http://localhost:8080/api/jobs/{task_id}"),
                            ]
                        ),
                    )
                ],
            ),
            ("owner", OrderedDict([("username", "admin"), ("email", "admin@example.com")])),
            ("assignee", ""),
        ]
    )
    if labels is not None:
        meta["labels"] = _labels(labels)
    return meta


def annotations_xml(entries: Sequence[Entry], labels: Sequence[Label], *, project: bool = False) -> bytes:
    """The annotations.xml of a task export, or (`project`) of a project export whose tasks are
    the entries' task ids, each of the entries' subset."""
    writer = _Writer()
    writer.xml.startDocument()
    writer.xml.startElement("annotations", {})
    writer.level += 1
    writer.indent()
    writer.xml.startElement("version", {})
    writer.xml.characters("1.1")
    writer.xml.endElement("version")
    if project:
        tasks = OrderedDict((e.task_id, e.subset or "default") for e in entries)
        meta = OrderedDict(
            [
                (
                    "project",
                    OrderedDict(
                        [
                            ("id", "1"),
                            ("name", "project"),
                            ("bugtracker", ""),
                            ("created", "2024-05-02 10:11:12.131415+00:00"),
                            ("updated", "2024-05-03 10:11:12.131415+00:00"),
                            (
                                "tasks",
                                [
                                    (
                                        "task",
                                        _task_meta(
                                            t, f"task {t}", sum(e.task_id == t for e in entries), s, None
                                        ),
                                    )
                                    for t, s in tasks.items()
                                ],
                            ),
                            ("subsets", "\n".join(dict.fromkeys(tasks.values()))),
                            ("owner", OrderedDict([("username", "admin"), ("email", "admin@example.com")])),
                            ("assignee", ""),
                            ("labels", _labels(labels)),
                        ]
                    ),
                ),
                ("dumped", "2024-05-04 10:11:12.131415+00:00"),
            ]
        )
    else:
        meta = OrderedDict(
            [
                ("task", _task_meta(1, "task", len(entries), "default", labels)),
                ("dumped", "2024-05-04 10:11:12.131415+00:00"),
            ]
        )
    writer.indent()
    writer.xml.startElement("meta", {})
    writer.meta(meta)
    writer.indent()
    writer.xml.endElement("meta")
    for frame, entry in enumerate(entries):
        attrs = OrderedDict([("id", str(frame)), ("name", entry.name)])
        if project:
            attrs.update([("subset", entry.subset or "default"), ("task_id", str(entry.task_id))])
        attrs.update([("width", str(entry.width)), ("height", str(entry.height))])
        writer.indent()
        writer.xml.startElement("image", attrs)
        writer.level += 1
        # CVAT writes a frame's shapes sorted by z_order (`group_by_frame`), then its tags.
        for shape in sorted(entry.shapes, key=lambda s: int(s.attrs.get("z_order", "0"))):
            writer.shape(shape)
        for tag in entry.tags:
            writer.indent()
            writer.xml.startElement("tag", OrderedDict([("label", tag), ("source", "manual")]))
            writer.xml.endElement("tag")
        writer.level -= 1
        writer.indent()
        writer.xml.endElement("image")
    writer.level -= 1
    writer.indent()
    writer.xml.endElement("annotations")
    writer.indent()
    writer.xml.endDocument()
    return writer.buffer.getvalue().encode("utf-8")


def write_export(root, entries: Sequence[Entry], labels: Sequence[Label], *, project: bool = False) -> dict:
    """annotations.xml and the pictures (each a JPEG of its size; a `.png` name a PNG) where the
    export puts them; relpath under `root` of each entry's picture, by its name."""
    files: dict[str, bytes] = {"annotations.xml": annotations_xml(entries, labels, project=project)}
    where = {}
    for seed, entry in enumerate(entries):
        folder = f"images/{entry.subset or 'default'}" if project else "images"
        relpath = f"{folder}/{entry.name}"
        make = png if entry.name.endswith(".png") else jpeg
        files[relpath] = make(entry.width, entry.height, seed=seed)
        where[entry.name] = relpath
    write_tree(pathlib.Path(root), files)
    return where


def disk(width: int, height: int, cx: float, cy: float, r: float) -> np.ndarray:
    ys, xs = np.mgrid[0:height, 0:width]
    return ((xs - cx) ** 2 + (ys - cy) ** 2 <= r * r).astype(np.uint8)


def ellipse_raster(width, height, cx, cy, rx, ry, rotation=0.0) -> np.ndarray:
    """What CVAT's COCO export makes of an ellipse (`EllipsesToMasks.convert_ellipse`)."""
    import cv2

    canvas = np.zeros((height, width), dtype=np.uint8)
    cv2.ellipse(canvas, (round(cx), round(cy)), (round(rx), round(ry)), rotation, 0, 360, 255, thickness=-1)
    return (canvas > 0).astype(np.uint8)


# The trees docs/cvat.md shows: a task (a picture in a subfolder of images/) and a project of two
# subsets, with boxes, polygons and a skeleton a picture, so that every task reads them.
DOC_LABELS = [
    Label("car"),
    Label("road"),
    Label("person", type="skeleton", svg=skeleton_svg(["head", "foot"], [(0, 1)])),
    Label("head", type="points", parent="person"),
    Label("foot", type="points", parent="person"),
]


def _doc_shapes(i: int) -> list[Shape]:
    person = skeleton("person", [point("head", 30 + i, 8), point("foot", 40 + i, 40)])
    return [
        box("car", 2 + i, 3, 20 + i, 18, z_order=1),
        polygon("road", [0, 30, 63, 30, 63, 47, 0, 47]),
        person,
    ]


def doc_task(root) -> dict:
    """`task/`: annotations.xml beside images/, one picture under images/street/."""
    names = ["a.jpg", "c.jpg", "d.jpg", "e.jpg", "street/b.jpg", "street/f.jpg"]
    return write_export(root, [Entry(n, 64, 48, _doc_shapes(i)) for i, n in enumerate(names)], DOC_LABELS)


def doc_project(root) -> dict:
    """`project/`: the subsets Train and Validation, each a task, the same name in both."""
    entries = [Entry(f"x{i}.jpg", 64, 48, _doc_shapes(i), subset="Train", task_id=1) for i in range(4)]
    entries += [Entry(f"x{i}.jpg", 64, 48, _doc_shapes(i), subset="Validation", task_id=2) for i in range(2)]
    return write_export(root, entries, DOC_LABELS, project=True)


__all__ = [
    "DOC_LABELS",
    "Entry",
    "Label",
    "annotations_xml",
    "box",
    "cuboid",
    "cvat_rle",
    "disk",
    "doc_project",
    "doc_task",
    "ellipse",
    "ellipse_raster",
    "mask",
    "point",
    "points",
    "polygon",
    "polyline",
    "skeleton",
    "skeleton_svg",
    "write_export",
]
