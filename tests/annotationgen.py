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
