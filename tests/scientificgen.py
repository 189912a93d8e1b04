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
