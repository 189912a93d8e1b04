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


def make_jpeg(seed: int, width: int = WIDTH, height: int = HEIGHT) -> bytes:
    rng = random.Random(seed)
    image = Image.new("RGB", (width, height), tuple(rng.randint(0, 255) for _ in range(3)))
    pen = ImageDraw.Draw(image)
    scale = width / WIDTH  # shapes grow with the picture, so larger pictures look alike
    for _ in range(12):
        x, y = rng.randint(-50, width), rng.randint(-50, height)
        w, h = int(rng.randint(20, 220) * scale), int(rng.randint(20, 180) * scale)
        color = tuple(rng.randint(0, 255) for _ in range(3))
        (pen.ellipse if rng.random() < 0.5 else pen.rectangle)((x, y, x + w, y + h), fill=color)
    image = image.filter(ImageFilter.GaussianBlur(2))
    noise = np.random.default_rng(seed).normal(0, 9, (height, width, 3))
    pixels = np.clip(np.asarray(image, dtype=np.float32) + noise, 0, 255).astype(np.uint8)
    out = io.BytesIO()
    Image.fromarray(pixels).save(out, format="JPEG", quality=85)
    return out.getvalue()


def _write_one(args: tuple[str, int, int, int, int, bool]) -> int:
    root, index, seed, width, height, broken = args
    label = CLASSES[index % len(CLASSES)]
    data = make_jpeg(seed * 1_000_003 + index, width, height)
    if broken and index % BROKEN_EVERY == BROKEN_EVERY - 1:
        data = data[: len(data) // 3]  # truncated
    path = os.path.join(root, label, f"{label}.{index:06d}.jpg")
    with open(path, "wb") as handle:
        handle.write(data)
    return len(data)


def ensure_dataset(
    root: str,
    count: int,
    seed: int = 0,
    processes: int | None = None,
    size: tuple[int, int] = (WIDTH, HEIGHT),
    broken: bool = True,
) -> str:
    """Create the dataset under `root` unless a complete one is already there; returns root.

    `size` is (width, height); `broken=False` leaves out the broken files (for readers, such as
    Keras's image_dataset_from_directory, that stop at the first one)."""
    marker = os.path.join(root, ".complete")
    if os.path.exists(marker):
        return root
    for label in CLASSES:
        os.makedirs(os.path.join(root, label), exist_ok=True)
    with Pool(processes or os.cpu_count()) as pool:
        jobs = [(root, i, seed, size[0], size[1], broken) for i in range(count)]
        pool.map(_write_one, jobs, chunksize=16)
    if broken:
        with open(os.path.join(root, "cat", "empty.jpg"), "wb"):
            pass
        with open(os.path.join(root, "dog", "notes.jpg"), "w") as handle:
            handle.write("not an image\n")
    with open(marker, "w") as handle:
        handle.write(f"{count} {seed}\n")
    return root
