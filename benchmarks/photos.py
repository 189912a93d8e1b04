"""A COCO set made from real photographs: N distinct 640x480 JPEGs of 100-150 KB each, laid out as
COCO 2017 is (`train2017/<id>.jpg`, `annotations/instances_train2017.json`), with boxes and
polygons.

Why photographs: synthetic flat colours compress to a third of a photo's bytes and halve the
entropy decoding that a validating decode pays (issue 28), so they flatter whichever tool decodes.
The photographs are the colour pictures scikit-image ships inside its wheel (skimage/data:
astronaut, chelsea, coffee, hubble_deep_field, ihc, motorcycle_left/right, retina, rocket; pinned
in requirements-bench.txt). The files are read straight from the installed package folder;
skimage itself is never imported.

Each image is a 2x2 mosaic of 320x240 crops, each from a random photo at a random scale
(0.6-1.0, so every tile keeps a photo's detail per pixel) and mirrored half the time, so every
file is distinct (checked: no two share a sha256). It is saved at JPEG quality 94, stepped up or
down (within 80-98) until the file lies within 100-150 KB (COCO train2017's photos average about
160 KB at 640x480); a few smooth mosaics stay just under 100 KB at 98 (4 of 600, said when made).
Each image has 4 to 10 objects (COCO has 7.3 on average): one per tile, named after the
photo it came from, the rest random boxes, all wholly inside the picture (the Object Detection
API's converter drops a box that is not, this project clips it: inside, both keep every box).
Every object has an 8-point polygon inside its box. The same N and seed give the same bytes.
"""

from __future__ import annotations

import hashlib
import importlib.util
import io
import json
import math
import os
import random
from multiprocessing import Pool

from PIL import Image

WIDTH, HEIGHT = 640, 480
TILE_W, TILE_H = WIDTH // 2, HEIGHT // 2
PHOTOS = (
    "astronaut.png",
    "chelsea.png",
    "coffee.png",
    "hubble_deep_field.jpg",
    "ihc.png",
    "motorcycle_left.png",
    "motorcycle_right.png",
    "retina.jpg",
    "rocket.jpg",
)
# COCO-like category ids (with gaps): one per photo, plus two for the random boxes.
CATEGORIES = [
    {"id": 1 + 2 * k, "name": name, "supercategory": "photo"}
    for k, name in enumerate((*(photo.split(".")[0] for photo in PHOTOS), "thing", "stuff"))
]
MIN_BYTES, MAX_BYTES = 100_000, 150_000
SPLIT_FILE = os.path.join("annotations", "instances_train2017.json")
IMAGE_FOLDER = "train2017"

_sources: list[Image.Image] = []


def photo_folder() -> str:
    """skimage/data in the installed package, found without importing skimage."""
    spec = importlib.util.find_spec("skimage")
    if spec is None or not spec.submodule_search_locations:
        raise SystemExit("scikit-image is not installed: pip install -r requirements-bench.txt")
    return os.path.join(next(iter(spec.submodule_search_locations)), "data")


def _load_sources() -> list[Image.Image]:
    if not _sources:
        folder = photo_folder()
        for name in PHOTOS:
            with Image.open(os.path.join(folder, name)) as image:
                _sources.append(image.convert("RGB"))
    return _sources


def _encode(canvas: Image.Image) -> bytes:
    """JPEG bytes within MIN_BYTES..MAX_BYTES: quality 94, stepped toward the range."""
    quality, step = 94, 0
    while True:
        out = io.BytesIO()
        canvas.save(out, format="JPEG", quality=quality)
        data = out.getvalue()
        if len(data) < MIN_BYTES and quality < 98 and step >= 0:
            quality, step = quality + 1, 1
        elif len(data) > MAX_BYTES and quality > 80 and step <= 0:
            quality, step = quality - 1, -1
        else:
            return data


def _box_inside(rng: random.Random, left: float, top: float, right: float, bottom: float) -> list[float]:
    w = rng.uniform(0.2, 0.9) * (right - left)
    h = rng.uniform(0.2, 0.9) * (bottom - top)
    x = rng.uniform(left, right - w)
    y = rng.uniform(top, bottom - h)
    return [round(x, 2), round(y, 2), round(w, 2), round(h, 2)]


def _octagon(box: list[float]) -> list[float]:
    x, y, w, h = box
    ring: list[float] = []
    for k in range(8):
        ring += [
            round(x + w * (0.5 + 0.45 * math.cos(math.pi * k / 4)), 2),
            round(y + h * (0.5 + 0.45 * math.sin(math.pi * k / 4)), 2),
        ]
    return ring


def make_photo(seed: int) -> tuple[bytes, list[tuple[int, list[float]]]]:
    """(JPEG bytes, [(category id, [x, y, w, h])]) for one image."""
    rng = random.Random(seed)
    sources = _load_sources()
    canvas = Image.new("RGB", (WIDTH, HEIGHT))
    objects = []
    for left, top in ((0, 0), (TILE_W, 0), (0, TILE_H), (TILE_W, TILE_H)):
        which = rng.randrange(len(sources))
        source = sources[which]
        scale = rng.uniform(0.6, 1.0)
        size = (max(TILE_W, round(source.width * scale)), max(TILE_H, round(source.height * scale)))
        scaled = source.resize(size, Image.Resampling.BILINEAR)
        x, y = rng.randint(0, size[0] - TILE_W), rng.randint(0, size[1] - TILE_H)
        tile = scaled.crop((x, y, x + TILE_W, y + TILE_H))
        if rng.random() < 0.5:
            tile = tile.transpose(Image.Transpose.FLIP_LEFT_RIGHT)
        canvas.paste(tile, (left, top))
        objects.append((CATEGORIES[which]["id"], _box_inside(rng, left, top, left + TILE_W, top + TILE_H)))
    for _ in range(rng.randint(0, 6)):
        category = CATEGORIES[rng.choice((-2, -1))]["id"]
        objects.append((category, _box_inside(rng, 0, 0, WIDTH, HEIGHT)))
    return _encode(canvas), objects


def _write_one(job: tuple[str, int, int]) -> tuple[int, str, list[tuple[int, list[float]]]]:
    root, image_id, seed = job
    data, objects = make_photo(seed * 1_000_003 + image_id)
    with open(os.path.join(root, IMAGE_FOLDER, f"{image_id:012d}.jpg"), "wb") as handle:
        handle.write(data)
    return len(data), hashlib.sha256(data).hexdigest(), objects


def ensure_photos(root: str, count: int, seed: int = 0, processes: int | None = None) -> str:
    """Create the set under `root` unless a complete one is there; returns root."""
    marker = os.path.join(root, ".complete")
    if os.path.exists(marker):
        return root
    os.makedirs(os.path.join(root, IMAGE_FOLDER), exist_ok=True)
    os.makedirs(os.path.join(root, "annotations"), exist_ok=True)
    jobs = [(root, image_id, seed) for image_id in range(1, count + 1)]
    with Pool(processes or os.cpu_count()) as pool:
        made = pool.map(_write_one, jobs, chunksize=8)
    digests = {digest for _, digest, _ in made}
    if len(digests) != count:
        raise SystemExit(f"{count - len(digests)} photos are not distinct")
    sizes = [size for size, _, _ in made]
    if not all(MIN_BYTES <= size <= MAX_BYTES for size in sizes):
        outside = sum(not MIN_BYTES <= size <= MAX_BYTES for size in sizes)
        print(f"note: {outside} of {count} photos lie outside {MIN_BYTES}-{MAX_BYTES} bytes")
    images, annotations = [], []
    for image_id, (_, _, objects) in enumerate(made, start=1):
        images.append({"id": image_id, "file_name": f"{image_id:012d}.jpg", "width": WIDTH, "height": HEIGHT})
        for category, box in objects:
            annotations.append(
                {
                    "id": len(annotations) + 1,
                    "image_id": image_id,
                    "category_id": category,
                    "bbox": box,
                    "area": round(box[2] * box[3] * 0.8, 2),
                    "iscrowd": 0,
                    "segmentation": [_octagon(box)],
                }
            )
    document = {"images": images, "annotations": annotations, "categories": CATEGORIES}
    with open(os.path.join(root, SPLIT_FILE), "w") as handle:
        json.dump(document, handle)
    with open(marker, "w") as handle:
        handle.write(f"{count} {seed} {sum(sizes)} bytes {len(annotations)} objects\n")
    return root


if __name__ == "__main__":
    import sys

    target = (
        sys.argv[1] if len(sys.argv) > 1 else os.path.join(os.path.dirname(__file__), "data", "photos-60-0")
    )
    ensure_photos(target, int(sys.argv[2]) if len(sys.argv) > 2 else 60)
    with open(os.path.join(target, ".complete")) as marker:
        print(marker.read().strip())
