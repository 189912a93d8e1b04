"""What an annotation source says about one image: its objects (boxes, classes, flags and optional
masks), in the coordinates the source uses, before the image is ever read.

These are facts of the plan, like labels: parsed and checked on the launcher, staged with each
shard task, carried with their image through the workers, and transformed with its pixels there
(`beam_tfrecord.images.geometry`). The source formats' parsers (`coco`, `voc`, `yolo`) all give
these types, so nothing after planning knows which format the annotations came from.

Coordinates: `ObjectBox` holds `xmin, ymin, xmax, ymax` with the origin at the top left corner of
the picture as its file stores it (the pixels before any EXIF orientation is applied), in pixels
when `ImageAnnotations.normalized` is False (COCO, Pascal VOC) or as fractions of the stored
width and height when it is True (YOLO, whose files do not know the image size). A box is not
checked against the image here: only the worker knows the image's size.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

__all__ = [
    "AnnotationKind",
    "ImageAnnotations",
    "ObjectBox",
    "Polygon",
    "RunLengths",
]

AnnotationKind = Literal["coco", "voc", "yolo"]


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


@dataclass(frozen=True, slots=True)
class ObjectBox:
    """One annotated object: its box, its class name and what the source says of it.

    Args:
      xmin, ymin, xmax, ymax: the box (see the module docstring for the frame and units).
      label: the class name; the planner maps names to ids.
      area: COCO's `area` (the mask's pixel area, in the source's pixels); None: the box's area.
      is_crowd: COCO's `iscrowd` (a group of objects, usually with an RLE mask).
      difficult, truncated: Pascal VOC's flags.
      pose: Pascal VOC's `pose` ("Unspecified" when it says so, "" when it says nothing).
      mask: the instance's outline(s) or run lengths, when the source has one.
      source_ref: where the object comes from, for messages: `file.json#annotation 42`,
        `a.xml#object 3`, `a.txt:7`.
    """

    xmin: float
    ymin: float
    xmax: float
    ymax: float
    label: str
    area: float | None = None
    is_crowd: bool = False
    difficult: bool = False
    truncated: bool = False
    pose: str = ""
    mask: Mask = None
    source_ref: str = ""


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
    """

    objects: tuple[ObjectBox, ...]
    source_id: str
    normalized: bool = False
    width: int | None = None
    height: int | None = None
    split: str | None = None
