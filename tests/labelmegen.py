"""LabelMe JSON as LabelMe 5.x writes it (`LabelFile.save`: `version`, `flags`, `shapes`,
`imagePath`, `imageData`, `imageHeight`, `imageWidth`, `json.dump(..., ensure_ascii=False,
indent=2)`; each shape as `format_shape` gives it: `label`, `points` as [x, y] floats,
`group_id`, `description`, `shape_type`, `flags`, `mask`), and the references a test compares
with: what labelme2coco.py and labelme2voc.py make of the same shapes.

`imagePath` is the picture's path relative to the JSON's folder (`osp.relpath`), written with
`\\` where LabelMe ran on Windows; `imageData` is the picture's base64 bytes where "Save image
data" is on (the default), else null.
"""

from __future__ import annotations

import base64
import io
import json
import math
import pathlib
from dataclasses import dataclass, field

import numpy as np
from imagegen import jpeg, png, write_tree
from PIL import Image, ImageDraw
from pycocotools import mask as coco_mask

VERSION = "5.5.0"


def shape(label: str, points, shape_type: str = "polygon", group_id: int | None = None, mask=None) -> dict:
    """One entry of `shapes`, as `format_shape` writes it (`mask`: a bool array of the shape's
    box region, written as LabelMe's base64 PNG of 0 and 1)."""
    return {
        "label": label,
        "points": [[float(x), float(y)] for x, y in points],
        "group_id": group_id,
        "description": "",
        "shape_type": shape_type,
        "flags": {},
        "mask": None if mask is None else _png_b64(np.asarray(mask, dtype=np.uint8)),
    }


def mask_shape(label: str, region: np.ndarray, x1: int, y1: int, group_id: int | None = None) -> dict:
    """A `mask` shape (LabelMe 5.x's AI masks): its box's corners as points, its region's PNG."""
    rows, columns = region.shape
    return shape(label, [(x1, y1), (x1 + columns - 1, y1 + rows - 1)], "mask", group_id, region)


def _png_b64(array: np.ndarray) -> str:
    buffer = io.BytesIO()
    Image.fromarray(array).save(buffer, format="PNG")
    return base64.b64encode(buffer.getvalue()).decode("utf-8")


def label_file(shapes, image_path: str, width: int, height: int, image: bytes | None = None) -> bytes:
    """A LabelMe JSON's bytes (`image`: the embedded picture, None: "Save image data" off)."""
    data = {
        "version": VERSION,
        "flags": {},
        "shapes": list(shapes),
        "imagePath": image_path,
        "imageData": None if image is None else base64.b64encode(image).decode("utf-8"),
        "imageHeight": height,
        "imageWidth": width,
    }
    return json.dumps(data, ensure_ascii=False, indent=2).encode("utf-8")


# --- what LabelMe's own scripts make of a shape (the references) ---


def shape_to_mask(
    height: int, width: int, item: dict, line_width: int = 10, point_size: int = 5
) -> np.ndarray:
    """labelme.utils.shape_to_mask: the shape drawn with PIL (what labelme2voc.py and
    labelme2coco.py's areas and boxes are made from)."""
    mask = Image.fromarray(np.zeros((height, width), dtype=np.uint8))
    draw = ImageDraw.Draw(mask)
    xy = [tuple(point) for point in item["points"]]
    kind = item["shape_type"]
    if kind == "circle":
        (cx, cy), (px, py) = xy
        d = math.sqrt((cx - px) ** 2 + (cy - py) ** 2)
        draw.ellipse([cx - d, cy - d, cx + d, cy + d], outline=1, fill=1)
    elif kind == "rectangle":
        (x0, y0), (x1, y1) = xy
        draw.rectangle([min(x0, x1), min(y0, y1), max(x0, x1), max(y0, y1)], outline=1, fill=1)
    elif kind in ("line", "linestrip"):
        draw.line(xy=xy, fill=1, width=line_width)
    elif kind == "point":
        cx, cy = xy[0]
        draw.ellipse([cx - point_size, cy - point_size, cx + point_size, cy + point_size], outline=1, fill=1)
    else:
        draw.polygon(xy=xy, outline=1, fill=1)
    return np.array(mask, dtype=bool)


def coco_polygon(item: dict) -> list[float]:
    """labelme2coco.py's `segmentation` polygon of a shape: a circle's N points (N the fewest that
    keep the arc within a pixel, 12 at least), a rectangle's four corners (the script means to;
    its `else` then overwrites them with the two points), a polygon's points."""
    points = item["points"]
    if item["shape_type"] == "rectangle":
        (x1, y1), (x2, y2) = points
        x1, x2 = sorted([x1, x2])
        y1, y2 = sorted([y1, y2])
        return [x1, y1, x2, y1, x2, y2, x1, y2]
    if item["shape_type"] == "circle":
        (x1, y1), (x2, y2) = points
        r = np.linalg.norm([x2 - x1, y2 - y1])
        n_points_circle = max(int(np.pi / np.arccos(1 - 1 / r)), 12)
        i = np.arange(n_points_circle)
        x = x1 + r * np.sin(2 * np.pi / n_points_circle * i)
        y = y1 + r * np.cos(2 * np.pi / n_points_circle * i)
        return np.stack((x, y), axis=1).flatten().tolist()
    return np.asarray(points).flatten().tolist()


def coco_raster(polygons: list[list[float]], height: int, width: int) -> np.ndarray:
    """pycocotools' fill of polygons (their union), as COCO's tools read labelme2coco's file."""
    rles = coco_mask.frPyObjects(polygons, height, width)
    return coco_mask.decode(coco_mask.merge(rles)).astype(bool)


def coco_bbox(masks: list[np.ndarray]) -> list[float]:
    """labelme2coco.py's `bbox` of an instance: pycocotools' toBbox of its shapes' PIL union."""
    union = np.logical_or.reduce(masks)
    return coco_mask.toBbox(coco_mask.encode(np.asfortranarray(union.astype(np.uint8)))).tolist()


# --- trees ---


@dataclass
class Tree:
    root: pathlib.Path
    width: int
    height: int
    shapes: dict[str, list[dict]] = field(default_factory=dict)  # picture relpath -> its shapes


W, H = 64, 48


def scene() -> dict[str, list[dict]]:
    """The shapes of three pictures: every shape type LabelMe draws."""
    region = np.zeros((6, 8), dtype=bool)
    region[1:5, 2:7] = True
    return {
        "a": [
            shape("cat", [(40.5, 30.2), (10.2, 5.7)], "rectangle"),  # corners in either order
            shape("dog", [(5, 40), (30, 44), (20, 30.5)]),
            shape("ball", [(50, 12), (50, 20)], "circle"),
            shape("leash", [(1, 1), (30, 30)], "line"),
            shape("path", [(2, 2), (10, 3), (20, 9)], "linestrip"),
            shape("nose", [(12, 8)], "point"),
        ],
        "b": [
            # One dog in two parts joined by group_id (an occluded object), and a mask shape.
            shape("dog", [(2, 2), (20, 2), (20, 20)], group_id=1),
            shape("dog", [(30, 25), (60, 25), (45, 45)], group_id=1),
            mask_shape("cat", region, 40, 3),
        ],
        "c": [],
    }


def flat(root, embed: tuple[str, ...] = ("a",)) -> Tree:
    """Pictures with their JSON beside them (LabelMe's default): `a.jpg` + `a.json`."""
    tree = Tree(pathlib.Path(root), W, H)
    files = {}
    for index, (name, shapes) in enumerate(scene().items()):
        picture = jpeg(W, H, seed=index) if name != "b" else png(W, H, seed=index)
        filename = f"{name}.jpg" if name != "b" else f"{name}.png"
        files[filename] = picture
        files[f"{name}.json"] = label_file(shapes, filename, W, H, image=picture if name in embed else None)
        tree.shapes[filename] = shapes
    write_tree(tree.root, files)
    return tree


def sibling(root, windows: bool = True) -> Tree:
    """`images/` and `annotations/` beside it (`labelme images --output annotations`): each
    `imagePath` is `..\\images\\x.jpg` (Windows) or `../images/x.jpg`."""
    tree = Tree(pathlib.Path(root), W, H)
    files = {}
    sep = "\\" if windows else "/"
    for index, (name, shapes) in enumerate(scene().items()):
        filename = f"{name}.jpg"
        files[f"images/{filename}"] = jpeg(W, H, seed=index)
        files[f"annotations/{name}.json"] = label_file(shapes, f"..{sep}images{sep}{filename}", W, H)
        tree.shapes[filename] = shapes
    write_tree(tree.root, files)
    return tree
