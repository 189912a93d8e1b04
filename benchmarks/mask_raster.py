"""What filling polygon masks as COCO does costs per object, against the Pillow fill it replaced
and pycocotools' C (the reference; a test dependency only), with the PNG encode every stored mask
pays beside it. One core, a few seconds:

    PYTHONPATH=$PWD .venv/bin/python benchmarks/mask_raster.py --objects 300
"""

from __future__ import annotations

import argparse
import statistics
import time
from collections.abc import Callable

import numpy as np
from PIL import Image, ImageDraw

from beam_tfrecord.labels.geometry import encode_mask_png
from beam_tfrecord.labels.polygon_raster import fill_polygons

WIDTH, HEIGHT = 640, 480  # COCO 2017's most common size


def outlines(count: int, radius: float, points: int, seed: int) -> list[list[list[float]]]:
    """COCO-like objects: one ring of `points` points around a random centre, two decimals."""
    rng = np.random.default_rng(seed)
    found = []
    for _ in range(count):
        angles = np.sort(rng.uniform(0, 2 * np.pi, points))
        radii = radius * rng.uniform(0.5, 1, points)
        cx, cy = rng.uniform(radius, WIDTH - radius), rng.uniform(radius, HEIGHT - radius)
        ring = np.column_stack([cx + radii * np.cos(angles), cy + radii * np.sin(angles)])
        found.append([np.round(ring, 2).ravel().tolist()])
    return found


def pillow_fill(rings: list[list[float]]) -> Image.Image:
    """The fill the project used before: ImageDraw's polygon, every pixel the outline touches."""
    image = Image.new("L", (WIDTH, HEIGHT), 0)
    pen = ImageDraw.Draw(image)
    for ring in rings:
        pen.polygon([(ring[i], ring[i + 1]) for i in range(0, len(ring) - 1, 2)], fill=1)
    return image


def coco_fill(rings: list[list[float]]) -> Image.Image:
    return Image.fromarray(fill_polygons(rings, WIDTH, HEIGHT))


def pycocotools_fill(rings: list[list[float]]) -> Image.Image:
    from pycocotools import mask as coco_mask

    return Image.fromarray(coco_mask.decode(coco_mask.merge(coco_mask.frPyObjects(rings, HEIGHT, WIDTH))))


def per_object_us(fill: Callable, objects: list, repeats: int) -> float:
    """Median over repeats of the mean microseconds per object."""
    times = []
    for _ in range(repeats):
        started = time.perf_counter()
        for rings in objects:
            fill(rings)
        times.append((time.perf_counter() - started) / len(objects) * 1e6)
    return statistics.median(times)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--objects", type=int, default=300)
    parser.add_argument("--repeats", type=int, default=5)
    args = parser.parse_args()
    fills = {"pillow (before)": pillow_fill, "numpy port (now)": coco_fill}
    try:
        import pycocotools  # noqa: F401

        fills["pycocotools C"] = pycocotools_fill
    except ImportError:
        pass
    print(f"{WIDTH}x{HEIGHT} masks, microseconds per object (median of {args.repeats})")
    for name, radius, points in (("small", 8, 12), ("medium", 40, 24), ("large", 180, 60)):
        objects = outlines(args.objects, radius, points, seed=26)
        row = {label: per_object_us(fill, objects, args.repeats) for label, fill in fills.items()}
        png = per_object_us(lambda rings: encode_mask_png(coco_fill(rings)), objects[:100], args.repeats)
        cells = "  ".join(f"{label} {value:7.0f}" for label, value in row.items())
        print(f"{name:7s} ({points} points, radius {radius:3d}): {cells}  | fill + PNG {png:7.0f}")


if __name__ == "__main__":
    main()
