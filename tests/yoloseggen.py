"""An Ultralytics segmentation dataset as its tools lay it out: data.yaml with its names and
splits, `images/<split>/` and `labels/<split>/`, a polygon a line in fractions of the picture."""

from __future__ import annotations

from imagegen import jpeg, write_tree

DATA_YAML = b"path: .\ntrain: images/train\nval: images/val\nnames:\n  0: person\n  1: car\n  2: dog\n"
WIDTH, HEIGHT = 64, 48
# Per picture: (class index, polygon in fractions), in the file's order.
LABELS = {
    "images/train/a.jpg": [
        (1, [0.30, 0.30, 0.55, 0.32, 0.50, 0.60]),  # a small car, first in the file
        (0, [0.05, 0.05, 0.95, 0.08, 0.90, 0.95, 0.10, 0.90]),  # a large person over it
    ],
    "images/train/b.jpg": [(2, [0.1, 0.2, 0.6, 0.25, 0.35, 0.7])],
    "images/val/c.jpg": [(0, [0.5, 0.5, 0.9, 0.5, 0.9, 0.9, 0.5, 0.9])],
}


def label_text(shapes) -> bytes:
    return "".join(
        f"{index} " + " ".join(f"{v:.6f}" for v in points) + "\n" for index, points in shapes
    ).encode()


def ultralytics_tree(root) -> None:
    files = {"data.yaml": DATA_YAML}
    for relpath, shapes in LABELS.items():
        files[relpath] = jpeg(WIDTH, HEIGHT, seed=len(files))
        files[relpath.replace("images/", "labels/").replace(".jpg", ".txt")] = label_text(shapes)
    files["images/train/boxed.jpg"] = jpeg(WIDTH, HEIGHT, seed=9)
    files["labels/train/boxed.txt"] = b"0 0.5 0.5 0.2 0.2\n2 0.1 0.1 0.3 0.1 0.3 0.3\n"
    write_tree(root, files)
