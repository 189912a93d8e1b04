"""A detection record's objects as each framework's detectors take them: the stored fractions
become pixel or relative boxes in Keras's named formats, the stored class ids (from 1, as the
Object Detection API and `label_map.pbtxt` count) become ids from 0 or stay from 1, and the
stored mask PNGs become uint8 arrays.

Plain arithmetic on NumPy arrays, no TensorFlow and no torch: `load_dataset` calls
`box_columns` on tensors (the same operators), `iter_examples` and `TorchImages` call the rest,
so every reader's convention is tested here once (tests/test_detection_readers.py), and against
Keras's own `keras.utils.bounding_boxes.convert_format`.
"""

from __future__ import annotations

import io
from collections.abc import Sequence
from typing import TypeAlias

import numpy as np

from beam_tfrecord.edges import ParsedRecord, Tensor

__all__ = [
    "BOX_FORMATS",
    "DETECTION_KEYS",
    "PAD_LABEL",
    "box_columns",
    "check_box_format",
    "convert_boxes",
    "decode_masks",
    "detection_target",
    "keypoint_array",
    "pixel_corners",
    "resize_masks",
]

# A detection record's objects as NumPy arrays in an `iter_examples` dict: `boxes` float32 [N, 4]
# pixel xyxy of the stored image, `labels` int64 [N] from 0 (the stored `object_label` counts
# from 1), and, where the run stored them, `masks` uint8 [N, height, width] of 0 and 1 and
# `keypoints` float32 [N, K, 3].
DETECTION_KEYS = ("boxes", "labels", "masks", "keypoints")
# Keras's names (keras.utils.bounding_boxes.convert_format), what KerasHub's detectors take as
# `bounding_box_format`; `rel_` ones are fractions of the image handed out.
BOX_FORMATS = (
    "xyxy",
    "yxyx",
    "xywh",
    "center_xywh",
    "center_yxhw",
    "rel_xyxy",
    "rel_yxyx",
    "rel_xywh",
    "rel_center_xywh",
)
# What pads a dense batch past an image's objects (load_dataset's `max_objects`): Keras's
# `densify_bounding_boxes` pads labels with -1, and KerasHub's RetinaNet label encoder treats a
# box of -1s as outside every anchor.
PAD_LABEL = -1
PAD_BOX = -1.0
BOX_ORDER = ("xmin", "ymin", "xmax", "ymax")


# A column of box coordinates: a NumPy array, or a tensor (`load_dataset`), or a number (a size).
Column: TypeAlias = np.ndarray | Tensor | float


def check_box_format(bounding_box_format: str) -> str:
    """The format's name in lower case (Keras accepts any case); ValueError naming the choices."""
    name = bounding_box_format.lower()
    if name not in BOX_FORMATS:
        raise ValueError(
            f"bounding_box_format must be one of {', '.join(BOX_FORMATS)}, not {bounding_box_format!r}"
        )
    return name


def box_columns(
    x1: Column, y1: Column, x2: Column, y2: Column, bounding_box_format: str, height: Column, width: Column
) -> list[Column]:
    """The four columns of `bounding_box_format` from pixel corners (left, top, right, bottom) in
    an image of `height` x `width`. Operators only, so NumPy arrays and tf tensors both work;
    stack the result on the last axis."""
    fmt = check_box_format(bounding_box_format)
    relative = fmt.startswith("rel_")
    if relative:
        x1, x2, y1, y2 = x1 / width, x2 / width, y1 / height, y2 / height
        fmt = fmt.removeprefix("rel_")
    if fmt == "xyxy":
        return [x1, y1, x2, y2]
    if fmt == "yxyx":
        return [y1, x1, y2, x2]
    if fmt == "xywh":
        return [x1, y1, x2 - x1, y2 - y1]
    if fmt == "center_xywh":
        return [(x1 + x2) / 2, (y1 + y2) / 2, x2 - x1, y2 - y1]
    return [(y1 + y2) / 2, (x1 + x2) / 2, y2 - y1, x2 - x1]  # center_yxhw


def pixel_corners(record: ParsedRecord, height: float, width: float) -> np.ndarray:
    """float32 [N, 4] left, top, right, bottom in pixels of a `height` x `width` image, from an
    `iter_examples` dict's stored fractions (`object_xmin`, ...)."""
    columns = [np.asarray(record.get(f"object_{k}", ()), dtype=np.float64) for k in BOX_ORDER]
    scale = np.array([width, height, width, height], dtype=np.float64)
    return (np.stack(columns, axis=1).reshape(-1, 4) * scale).astype(np.float32)


def decode_masks(pngs: Sequence[bytes], height: int, width: int) -> np.ndarray:
    """uint8 [N, height, width] (0 and 1, as stored) from the records' mask PNGs, with Pillow."""
    from PIL import Image

    masks = np.zeros((len(pngs), height, width), dtype=np.uint8)
    for i, png in enumerate(pngs):
        with Image.open(io.BytesIO(png), formats=("PNG",)) as mask:
            masks[i] = np.asarray(mask.convert("L"), dtype=np.uint8)
    return masks


def resize_masks(masks: np.ndarray, image_size: tuple[int, int]) -> np.ndarray:
    """uint8 [N, height, width] resized to `image_size=(height, width)`, nearest neighbour (a mask
    stays 0 and 1), with Pillow."""
    from PIL import Image

    height, width = image_size
    if masks.shape[1:] == (height, width):
        return masks
    out = np.zeros((len(masks), height, width), dtype=np.uint8)
    for i, mask in enumerate(masks):
        resized = Image.fromarray(mask).resize((width, height), Image.Resampling.NEAREST)
        out[i] = np.asarray(resized, dtype=np.uint8)
    return out


def detection_target(
    record: ParsedRecord,
    *,
    image_size: tuple[int, int] | None = None,
    labels_from: int = 0,
    masks: bool = True,
) -> dict[str, np.ndarray]:
    """One `iter_examples` dict's objects as NumPy arrays, in the image as handed out (the stored
    one, or stretched to `image_size=(height, width)`):

    - `boxes`: float32 [N, 4], pixel left, top, right, bottom (`xyxy`);
    - `labels`: int64 [N], from `labels_from`: 0 (Keras, TFDS without its background name) or 1
      (the stored ids, what torchvision's detectors take: their class 0 is the background);
    - `area`: float32 [N], in pixels; `iscrowd`: int64 [N] (COCO's; 0 elsewhere);
    - `masks`: uint8 [N, height, width] of 0 and 1, where the run stored masks (`--masks`);
    - `keypoints`: float32 [N, K, 3], pixel x, y and COCO's visibility (0 not labelled, then x
      and y are 0; 1 hidden; 2 visible), where the run stored keypoints (`--task keypoints`).
    """
    stored_h, stored_w = int(record["height"]), int(record["width"])
    height, width = image_size if image_size is not None else (stored_h, stored_w)
    boxes = pixel_corners(record, height, width)
    labels = np.asarray(record.get("object_label", ()), dtype=np.int64) - 1 + labels_from
    scale = (height / stored_h) * (width / stored_w)
    area = np.asarray(record.get("object_area", ()), dtype=np.float32) * np.float32(scale)
    crowd = np.asarray(record.get("object_is_crowd", ()), dtype=np.int64)
    target = {
        "boxes": boxes,
        "labels": labels,
        "area": area if len(area) == len(labels) else _box_area(boxes),
        "iscrowd": crowd if len(crowd) == len(labels) else np.zeros(len(labels), dtype=np.int64),
    }
    if masks and "object_mask" in record:
        decoded = record.get("masks")  # iter_examples decoded them already, at the stored size
        if not isinstance(decoded, np.ndarray):
            decoded = decode_masks(record["object_mask"], stored_h, stored_w)
        target["masks"] = resize_masks(decoded, (height, width))
    if "keypoint_x" in record:
        target["keypoints"] = keypoint_array(record, len(labels), height, width)
    return target


def keypoint_array(record: ParsedRecord, objects: int, height: float, width: float) -> np.ndarray:
    """float32 [N, K, 3]: each object's points in pixels of a `height` x `width` image, and their
    visibility (the stored x and y are fractions, K points an object, object after object)."""
    xs = np.asarray(record["keypoint_x"], dtype=np.float32)
    ys = np.asarray(record["keypoint_y"], dtype=np.float32)
    vs = np.asarray(record["keypoint_visibility"], dtype=np.float32)
    count = len(xs) // objects if objects else 0
    points = np.stack([xs * np.float32(width), ys * np.float32(height), vs], axis=-1)
    return points.reshape(objects, count, 3)


def _box_area(boxes: np.ndarray) -> np.ndarray:
    return ((boxes[:, 2] - boxes[:, 0]) * (boxes[:, 3] - boxes[:, 1])).astype(np.float32)


def convert_boxes(
    boxes_xyxy: np.ndarray, bounding_box_format: str, height: float, width: float
) -> np.ndarray:
    """float32 [N, 4] pixel `xyxy` boxes in another of Keras's formats (`box_columns` on NumPy)."""
    x1, y1, x2, y2 = (boxes_xyxy[:, i] for i in range(4))
    return np.stack(box_columns(x1, y1, x2, y2, bounding_box_format, height, width), axis=1).astype(
        np.float32
    )
