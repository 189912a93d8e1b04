"""A reproducible synthetic dataset: N 400x300 JPEGs in two class folders, plus a few broken files.

Content is smooth shapes with mild noise, so JPEG sizes (about 20-40 KB at quality 85) resemble
photos rather than flat colour. The same seed and N always give the same bytes.
"""

from __future__ import annotations

import io
import os
import random
from multiprocessing import Pool

import numpy as np
from PIL import Image, ImageDraw, ImageFilter

WIDTH, HEIGHT = 400, 300
CLASSES = ("cat", "dog")
BROKEN_EVERY = 1000  # one broken file per this many images


def make_jpeg(seed: int) -> bytes:
    rng = random.Random(seed)
    image = Image.new("RGB", (WIDTH, HEIGHT), tuple(rng.randint(0, 255) for _ in range(3)))
    pen = ImageDraw.Draw(image)
    for _ in range(12):
        x, y = rng.randint(-50, WIDTH), rng.randint(-50, HEIGHT)
        w, h = rng.randint(20, 220), rng.randint(20, 180)
        color = tuple(rng.randint(0, 255) for _ in range(3))
        (pen.ellipse if rng.random() < 0.5 else pen.rectangle)((x, y, x + w, y + h), fill=color)
    image = image.filter(ImageFilter.GaussianBlur(2))
    noise = np.random.default_rng(seed).normal(0, 9, (HEIGHT, WIDTH, 3))
    pixels = np.clip(np.asarray(image, dtype=np.float32) + noise, 0, 255).astype(np.uint8)
    out = io.BytesIO()
    Image.fromarray(pixels).save(out, format="JPEG", quality=85)
    return out.getvalue()


def _write_one(args: tuple[str, int, int]) -> int:
    root, index, seed = args
    label = CLASSES[index % len(CLASSES)]
    data = make_jpeg(seed * 1_000_003 + index)
    if index % BROKEN_EVERY == BROKEN_EVERY - 1:
        data = data[: len(data) // 3]  # truncated
    path = os.path.join(root, label, f"{label}.{index:06d}.jpg")
    with open(path, "wb") as handle:
        handle.write(data)
    return len(data)


def ensure_dataset(root: str, count: int, seed: int = 0, processes: int | None = None) -> str:
    """Create the dataset under `root` unless a complete one is already there; returns root."""
    marker = os.path.join(root, ".complete")
    if os.path.exists(marker):
        return root
    for label in CLASSES:
        os.makedirs(os.path.join(root, label), exist_ok=True)
    with Pool(processes or os.cpu_count()) as pool:
        pool.map(_write_one, [(root, i, seed) for i in range(count)], chunksize=64)
    with open(os.path.join(root, "cat", "empty.jpg"), "wb"):
        pass
    with open(os.path.join(root, "dog", "notes.jpg"), "w") as handle:
        handle.write("not an image\n")
    with open(marker, "w") as handle:
        handle.write(f"{count} {seed}\n")
    return root
