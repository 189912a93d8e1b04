"""COCO panoptic trees as COCO ships them and panopticapi writes them: `annotations/panoptic_<split>.json`
(images, annotations with `segments_info`, categories with `isthing` and `color`), one RGB PNG per
picture in `annotations/panoptic_<split>/` whose colours are segment ids (id = R + 256 G + 256^2 B,
panopticapi's `id2rgb`), and the pictures in `<split>/`. Beside them, the instances file COCO
derives the same things from (`instances_<split>.json`: polygons, a crowd's uncompressed RLE),
for Model Garden's converter, which takes its objects from there.

The things are polygons filled by pycocotools (so their PNG pixels are pycocotools' raster of the
instances file's polygons), painted over stuff bands; pixels no segment covers are void (id 0).
Segment bboxes are panopticapi's (from the PNG's pixels), areas its pixel counts.
"""

from __future__ import annotations

import io
import json
import pathlib

import numpy as np
from imagegen import jpeg
from PIL import Image
from pycocotools import mask as mask_utils

CATEGORIES = [
    {"id": 1, "name": "person", "supercategory": "person", "isthing": 1, "color": [220, 20, 60]},
    {"id": 3, "name": "car", "supercategory": "vehicle", "isthing": 1, "color": [0, 0, 142]},
    {"id": 18, "name": "dog", "supercategory": "animal", "isthing": 1, "color": [182, 182, 255]},
    {"id": 92, "name": "banner", "supercategory": "textile", "isthing": 0, "color": [255, 255, 128]},
    {"id": 184, "name": "tree-merged", "supercategory": "plant", "isthing": 0, "color": [107, 142, 35]},
    {"id": 187, "name": "sky-other-merged", "supercategory": "sky", "isthing": 0, "color": [70, 130, 180]},
]
WIDTH, HEIGHT = 64, 48


def id2rgb(ids: np.ndarray) -> np.ndarray:
    """panopticapi's `id2rgb`."""
    rgb = np.zeros((*ids.shape, 3), dtype=np.uint8)
    value = ids.copy()
    for channel in range(3):
        rgb[..., channel] = value % 256
        value //= 256
    return rgb


def _png(array: np.ndarray) -> bytes:
    out = io.BytesIO()
    Image.fromarray(array).save(out, format="PNG")
    return out.getvalue()


def _raster(polygon: list[float]) -> np.ndarray:
    rle = mask_utils.frPyObjects([polygon], HEIGHT, WIDTH)
    return np.amax(mask_utils.decode(rle), axis=2).astype(bool)


def _rle(pixels: np.ndarray) -> dict:
    """COCO's uncompressed RLE (column-major counts, starting with zeros), as a crowd has it."""
    flat = pixels.flatten(order="F").astype(np.uint8)
    counts, current, run = [], 0, 0
    for value in flat:
        if value != current:
            counts.append(run)
            current, run = value, 0
        run += 1
    counts.append(run)
    return {"size": [HEIGHT, WIDTH], "counts": counts}


def _rect(x0: float, y0: float, x1: float, y1: float) -> list[float]:
    return [x0, y0, x1, y0, x1, y1, x0, y1]


# Each picture: stuff bands (category, first row, last row + 1), then things (category, polygon,
# crowd), painted in order; `void` rows stay unlabelled.
PICTURES = {
    139: {
        "stuff": [(187, 0, 16), (184, 30, 44)],
        "things": [
            (1, _rect(4, 6, 20, 40), 0),
            (3, [30, 10, 50, 12, 44, 34], 0),
            (1, _rect(52, 2, 60, 20), 1),
        ],
    },
    285: {
        "stuff": [(92, 0, 48)],
        "things": [(18, _rect(10, 10, 30, 30), 0), (18, _rect(34, 12, 58, 40), 0)],
    },
    632: {
        "stuff": [(187, 0, 24)],
        "things": [],
    },
}
# A crowded picture: more segments than Model Garden's uint8 instance ids hold.
CROWDED_ID = 724
CROWDED_SEGMENTS = 300


def _crowded() -> dict:
    things = []
    for index in range(CROWDED_SEGMENTS):
        row, col = divmod(index, 30)
        things.append((1 + 2 * (index % 2), _rect(col * 2, row * 2 + 2, col * 2 + 1, row * 2 + 3), 0))
    return {"stuff": [(184, 0, 2)], "things": things}


def coco_panoptic(root: pathlib.Path, split: str = "train2017", crowded: bool = True, seed: int = 5) -> dict:
    """Writes the tree; returns {picture relpath: (segment ids array, segments_info)} as written."""
    rng = np.random.default_rng(seed)
    pictures = dict(PICTURES)
    if crowded:
        pictures[CROWDED_ID] = _crowded()
    (root / split).mkdir(parents=True, exist_ok=True)
    pngs = root / "annotations" / f"panoptic_{split}"
    pngs.mkdir(parents=True, exist_ok=True)
    images, annotations, instances, truth = [], [], [], {}
    used: set[int] = {0}
    for image_id, spec in sorted(pictures.items()):
        name = f"{image_id:012d}"
        (root / split / f"{name}.jpg").write_bytes(jpeg(WIDTH, HEIGHT, seed=image_id))
        images.append({"id": image_id, "file_name": f"{name}.jpg", "width": WIDTH, "height": HEIGHT})
        ids = np.zeros((HEIGHT, WIDTH), dtype=np.int64)
        shapes = []
        for category, top, bottom in spec["stuff"]:
            pixels = np.zeros((HEIGHT, WIDTH), dtype=bool)
            pixels[top:bottom] = True
            shapes.append((category, pixels, None, 0))
        for category, polygon, crowd in spec["things"]:
            shapes.append((category, _raster(polygon), polygon, crowd))
        segments_info = []
        for category, pixels, polygon, crowd in shapes:
            while (segment_id := int(rng.integers(1, 256**3))) in used:
                pass
            used.add(segment_id)
            ids[pixels] = segment_id
            segments_info.append([segment_id, category, crowd, polygon])
        entries = []
        for segment_id, category, crowd, polygon in segments_info:
            pixels = ids == segment_id
            ys, xs = np.nonzero(pixels)
            bbox = [int(xs.min()), int(ys.min()), int(xs.max() - xs.min() + 1), int(ys.max() - ys.min() + 1)]
            entries.append(
                {
                    "id": segment_id,
                    "category_id": category,
                    "iscrowd": crowd,
                    "bbox": bbox,
                    "area": int(pixels.sum()),
                }
            )
            if polygon is not None and image_id != CROWDED_ID:
                xs_p, ys_p = polygon[0::2], polygon[1::2]
                instance = {
                    "id": len(instances) + 1,
                    "image_id": image_id,
                    "category_id": category,
                    "iscrowd": crowd,
                    "area": float(pixels.sum()),
                    "bbox": [min(xs_p), min(ys_p), max(xs_p) - min(xs_p), max(ys_p) - min(ys_p)],
                    "segmentation": _rle(pixels) if crowd else [polygon],
                }
                instances.append(instance)
        (pngs / f"{name}.png").write_bytes(_png(id2rgb(ids)))
        annotations.append({"image_id": image_id, "file_name": f"{name}.png", "segments_info": entries})
        truth[f"{split}/{name}.jpg"] = (ids, entries)
    document = {
        "info": {"description": "COCO 2017 Dataset"},
        "licenses": [],
        "images": images,
        "annotations": annotations,
        "categories": CATEGORIES,
    }
    (root / "annotations" / f"panoptic_{split}.json").write_text(json.dumps(document))
    instances_doc = {
        "images": [i for i in images if i["id"] != CROWDED_ID],
        "annotations": instances,
        "categories": [
            {k: c[k] for k in ("id", "name", "supercategory")} for c in CATEGORIES if c["isthing"]
        ],
    }
    (root / "annotations" / f"instances_{split}.json").write_text(json.dumps(instances_doc))
    return truth
