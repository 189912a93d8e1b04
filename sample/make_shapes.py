"""Regenerate the bundled sample: 36 small images of circles, squares and triangles, a few
files that need conversion (CMYK JPEG, RGBA PNG, TIFF) and a few broken ones so rejects show.

    python sample/make_shapes.py  # rewrites sample/shapes/
"""

from __future__ import annotations

import io
import os
import random
import shutil

from PIL import Image, ImageDraw

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.join(HERE, "shapes")
CLASSES = ("circle", "square", "triangle")
PER_CLASS = 12
SIZE = 96


def draw(shape: str, rng: random.Random) -> Image.Image:
    background = tuple(rng.randint(180, 255) for _ in range(3))
    color = tuple(rng.randint(0, 140) for _ in range(3))
    image = Image.new("RGB", (SIZE, SIZE), background)
    pen = ImageDraw.Draw(image)
    r = rng.randint(18, 34)
    cx, cy = rng.randint(r + 4, SIZE - r - 4), rng.randint(r + 4, SIZE - r - 4)
    if shape == "circle":
        pen.ellipse((cx - r, cy - r, cx + r, cy + r), fill=color)
    elif shape == "square":
        pen.rectangle((cx - r, cy - r, cx + r, cy + r), fill=color)
    else:
        pen.polygon([(cx, cy - r), (cx - r, cy + r), (cx + r, cy + r)], fill=color)
    return image


def jpeg_bytes(image: Image.Image, **kwargs) -> bytes:
    out = io.BytesIO()
    image.save(out, format="JPEG", quality=90, **kwargs)
    return out.getvalue()


def main() -> None:
    rng = random.Random(2026)
    shutil.rmtree(ROOT, ignore_errors=True)
    for shape in CLASSES:
        os.makedirs(os.path.join(ROOT, shape))
        for i in range(PER_CLASS):
            draw(shape, rng).save(os.path.join(ROOT, shape, f"{shape}_{i:02d}.jpg"), quality=90)
    # Need conversion, not rejection: TensorFlow cannot decode these as they are.
    draw("circle", rng).convert("CMYK").save(os.path.join(ROOT, "circle", "circle_cmyk.jpg"))
    rgba = draw("square", rng).convert("RGBA")
    rgba.putalpha(200)
    rgba.save(os.path.join(ROOT, "square", "square_alpha.png"))
    draw("triangle", rng).save(os.path.join(ROOT, "triangle", "triangle_scan.tiff"))
    # Broken inputs: each becomes a line of rejects.jsonl with its reason.
    open(os.path.join(ROOT, "circle", "circle_empty.jpg"), "wb").close()
    whole = jpeg_bytes(draw("square", rng))
    with open(os.path.join(ROOT, "square", "square_truncated.jpg"), "wb") as f:
        f.write(whole[: len(whole) // 2])
    with open(os.path.join(ROOT, "triangle", "notes.jpg"), "w") as f:
        f.write("not an image, only named like one\n")
    # Clutter an OS leaves behind: skipped, counted apart.
    with open(os.path.join(ROOT, ".DS_Store"), "wb") as f:
        f.write(b"\x00\x00\x00\x01Bud1")


if __name__ == "__main__":
    main()
