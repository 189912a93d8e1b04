"""Annotation files made by the tests themselves, in each format's own layout: COCO instances
JSON, Pascal VOC XML and YOLO label lines. Each function returns what a file holds (bytes), or the
entry that goes into one (a dict), so a test writes broken variants by editing them."""

from __future__ import annotations

import json

CATEGORIES = [
    {"id": 18, "name": "dog", "supercategory": "animal"},
    {"id": 1, "name": "person", "supercategory": "person"},
    {"id": 17, "name": "cat", "supercategory": "animal"},
]


def instances(images, annotations, categories=CATEGORIES, **extra) -> bytes:
    """A COCO instances file."""
    return json.dumps(
        {
            "info": {"year": 2017},
            "images": images,
            "annotations": annotations,
            "categories": categories,
            **extra,
        }
    ).encode()


def image(image_id, file_name, width=48, height=32) -> dict:
    """A COCO `images` entry."""
    return {"id": image_id, "file_name": file_name, "width": width, "height": height}


def box(ann_id, image_id, category_id, bbox, **extra) -> dict:
    """A COCO `annotations` entry; `area` is the box's unless given."""
    return {
        "id": ann_id,
        "image_id": image_id,
        "category_id": category_id,
        "bbox": bbox,
        "iscrowd": 0,
        "area": bbox[2] * bbox[3] if len(bbox) == 4 else 0,
        **extra,
    }


def voc_xml(filename: str, objects, width: int = 48, height: int = 32) -> bytes:
    """A VOC annotation; each object is (name, (xmin, ymin, xmax, ymax), extra XML)."""
    parts = [
        "<annotation>",
        "<folder>VOC2012</folder>",
        f"<filename>{filename}</filename>",
        f"<size><width>{width}</width><height>{height}</height><depth>3</depth></size>",
        "<segmented>0</segmented>",
    ]
    for name, (xmin, ymin, xmax, ymax), extra in objects:
        parts.append(
            f"<object><name>{name}</name>{extra}<bndbox><xmin>{xmin}</xmin><ymin>{ymin}</ymin>"
            f"<xmax>{xmax}</xmax><ymax>{ymax}</ymax></bndbox></object>"
        )
    parts.append("</annotation>")
    return "\n".join(parts).encode()


def yolo_box(index: int, xmin: float, ymin: float, xmax: float, ymax: float) -> str:
    """A YOLO label line for a box given by its corners, as fractions of the image's size."""
    return f"{index} {(xmin + xmax) / 2:.6f} {(ymin + ymax) / 2:.6f} {xmax - xmin:.6f} {ymax - ymin:.6f}\n"


# Solid shapes on a noisy grey ground: every object's pixels are its own colour, so a reader's box
# or mask can be checked against the picture itself, and a contact sheet shows at a glance
# whether the boxes frame their shapes.
SHAPES = [
    {"id": 3, "name": "square", "supercategory": "shape"},
    {"id": 7, "name": "triangle", "supercategory": "shape"},
]
SHAPE_COLOURS = {3: (70, 150, 220), 7: (250, 190, 60)}  # near the contact sheet's class colours


def shapes_coco(
    root, count: int = 6, width: int = 96, height: int = 64, sizes: tuple[int, int] = (14, 26)
) -> dict[str, list[dict]]:
    """Write `count` PNG pictures of squares and triangles with their COCO instances file (boxes
    and polygons) under `root` (`images/`, `annotations/instances_shapes.json`); returns, per file
    name, its objects as {"category_id", "bbox" (COCO's x, y, w, h), "polygon"}. Shapes are
    `sizes` pixels wide (from, to), at most three a picture, side by side."""
    import pathlib

    import numpy as np
    from PIL import Image, ImageDraw

    root = pathlib.Path(root)
    (root / "images").mkdir(parents=True, exist_ok=True)
    (root / "annotations").mkdir(exist_ok=True)
    rng = np.random.default_rng(0)
    images, annotations, truth = [], [], {}
    for i in range(count):
        ground = np.clip(120 + rng.integers(-12, 12, (height, width, 3)), 0, 255).astype(np.uint8)
        picture = Image.fromarray(ground, "RGB")
        draw = ImageDraw.Draw(picture)
        name = f"shapes_{i}.png"
        objects = []
        for k in range(1 + i % 3):
            category = 3 if (i + k) % 2 == 0 else 7
            size = int(rng.integers(*sizes))
            slot = width // 3  # one third of the width per shape: shapes never overlap
            x = k * slot + int(rng.integers(0, slot - size))
            y = int(rng.integers(0, height - size))
            if category == 3:
                polygon = [x, y, x + size, y, x + size, y + size, x, y + size]
            else:
                polygon = [x, y + size, x + size // 2, y, x + size, y + size]
            draw.polygon(list(zip(polygon[::2], polygon[1::2], strict=True)), fill=SHAPE_COLOURS[category])
            xs, ys = polygon[::2], polygon[1::2]
            bbox = [min(xs), min(ys), max(xs) - min(xs), max(ys) - min(ys)]
            objects.append({"category_id": category, "bbox": bbox, "polygon": polygon})
            annotations.append(box(1000 * i + k, i, category, bbox, segmentation=[polygon]))
        picture.save(root / "images" / name, format="PNG")
        images.append(image(i, name, width, height))
        truth[name] = objects
    (root / "annotations" / "instances_shapes.json").write_bytes(instances(images, annotations, SHAPES))
    return truth
