"""Small trees of pictures past 8 bits, written as the instruments' software writes them
(tifffile, as microscopes' and satellites' tools do): the docs' scientific page runs on them."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import tifffile


def nuclei(root: Path, per_class: int = 3) -> None:
    """16-bit fluorescence microscopy in class folders, PackBits and Deflate."""
    rng = np.random.default_rng(7)
    for name in ("nuclei", "debris"):
        (root / name).mkdir(parents=True, exist_ok=True)
        for i in range(per_class):
            samples = rng.integers(0, 44_402, (24, 32), dtype=np.uint16)
            tifffile.imwrite(root / name / f"{i}.tif", samples, compression="packbits" if i % 2 else "zlib")


def eurosat(root: Path, per_class: int = 3) -> None:
    """EuroSAT's multispectral layout: 13-band uint16 64x64 tiles in class folders (smaller here),
    bands interleaved, tiled and Deflate-compressed."""
    rng = np.random.default_rng(13)
    for name in ("Forest", "River"):
        (root / name).mkdir(parents=True, exist_ok=True)
        for i in range(per_class):
            samples = rng.integers(0, 4_000, (16, 16, 13), dtype=np.uint16)
            tifffile.imwrite(
                root / name / f"{name}_{i + 1}.tif",
                samples,
                photometric="minisblack",
                planarconfig="contig",
                tile=(16, 16),
                compression="zlib",
            )


def orchards(root: Path, count: int = 4) -> None:
    """Aerial RGB + near-infrared tiles of trees for detection: 4-band uint16 TIFFs as GDAL and
    tifffile write them (RGB, the fourth band an unspecified extra sample, not alpha) in
    `images/`, and their boxes in a COCO instances file under `annotations/`."""
    import json

    rng = np.random.default_rng(23)
    (root / "images").mkdir(parents=True, exist_ok=True)
    (root / "annotations").mkdir(exist_ok=True)
    images, annotations = [], []
    for i in range(count):
        samples = rng.integers(0, 65_536, (32, 48, 4), dtype=np.uint16)
        tifffile.imwrite(
            root / "images" / f"tile_{i}.tif",
            samples,
            photometric="rgb",
            planarconfig="contig",
            extrasamples=(0,),
            compression="zlib",
        )
        images.append({"id": i, "file_name": f"tile_{i}.tif", "width": 48, "height": 32})
        for k in range(1 + i % 2):
            bbox = [4 + 20 * k, 6, 14, 12]
            annotations.append(
                {
                    "id": len(annotations),
                    "image_id": i,
                    "category_id": 1,
                    "bbox": bbox,
                    "area": 168,
                    "iscrowd": 0,
                }
            )
    categories = [{"id": 1, "name": "tree", "supercategory": "plant"}]
    instances = {"images": images, "annotations": annotations, "categories": categories}
    (root / "annotations" / "instances_train.json").write_text(json.dumps(instances))
