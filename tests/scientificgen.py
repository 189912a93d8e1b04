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


def zstacks(root: Path, per_class: int = 3, slices: int = 12) -> None:
    """16-bit confocal z-stacks in class folders, as ImageJ saves them (axes ZYX, a page a slice)."""
    rng = np.random.default_rng(12)
    for name in ("nuclei", "debris"):
        (root / name).mkdir(parents=True, exist_ok=True)
        for i in range(per_class):
            stack = rng.integers(0, 44_402, (slices, 24, 32), dtype=np.uint16)
            tifffile.imwrite(root / name / f"stack_{i}.tif", stack, imagej=True, metadata={"axes": "ZYX"})


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


CLOUD38_SCENE = "LC08_L1TP_003052_20160120_20170405_01_T1"  # a Landsat 8 scene id, as 38-Cloud names them
CLOUD38_BANDS = ("red", "green", "blue", "nir")


def cloud38(root: Path, patches: int = 3, size: tuple[int, int] = (24, 32)) -> list[str]:
    """38-Cloud's training layout (Kaggle's `38-Cloud_training`): one folder per band of
    single-band uint16 TIFFs (`train_red/red_patch_192_10_by_12_<scene>.TIF`), the cloud masks in
    `train_gt/` and the CSV lists beside them; 384x384 in the dataset, `size` here. Returns each
    patch's name (`patch_1_1_by_1_<scene>`) in order."""
    rng = np.random.default_rng(38)
    base = root / "38-Cloud_training"
    names = [f"patch_{i + 1}_{i % 2 + 1}_by_{i // 2 + 1}_{CLOUD38_SCENE}" for i in range(patches)]
    for band in (*CLOUD38_BANDS, "gt"):
        (base / f"train_{band}").mkdir(parents=True, exist_ok=True)
        for name in names:
            if band == "gt":
                samples = (rng.random(size) > 0.5).astype(np.uint8) * 255
            else:
                samples = rng.integers(0, 65_535, size, dtype=np.uint16)
            tifffile.imwrite(base / f"train_{band}" / f"{band}_{name}.TIF", samples)
    (base / "training_patches_38-Cloud.csv").write_text("name\n" + "\n".join(names) + "\n")
    return names


SENTINEL2_BANDS = ("B02", "B03", "B04", "B08")  # blue, green, red, near infrared: the 10 m bands


def sentinel2_safe(root: Path, dates: int = 2, size: tuple[int, int] = (20, 20)) -> list[Path]:
    """Sentinel-2 Level-2A products as ESA's SAFE folders hold them: each 10 m band of a tile a
    16-bit JPEG 2000 of its own (`IMG_DATA/R10m/T33UUP_<date>_B02_10m.jp2`), beside the
    aerosol and water-vapour maps, the true-colour preview and the product's XML. Returns each
    product's R10m folder."""
    from PIL import Image

    rng = np.random.default_rng(2)
    folders = []
    for day in range(1, dates + 1):
        taken = f"202001{day:02d}T101031"
        safe = root / f"S2A_MSIL2A_{taken}_N0213_R022_T33UUP_{taken[:8]}T121500.SAFE"
        folder = safe / "GRANULE" / f"L2A_T33UUP_A0237{day:02d}_{taken}" / "IMG_DATA" / "R10m"
        folder.mkdir(parents=True)
        for band in (*SENTINEL2_BANDS, "AOT", "WVP"):
            samples = rng.integers(0, 10_000, size, dtype=np.uint16)
            Image.fromarray(samples).save(folder / f"T33UUP_{taken}_{band}_10m.jp2", irreversible=False)
        colour = rng.integers(0, 256, (*size, 3), dtype=np.uint8)
        Image.fromarray(colour).save(folder / f"T33UUP_{taken}_TCI_10m.jp2", irreversible=False)
        (safe / "MTD_MSIL2A.xml").write_text("<Level-2A_User_Product/>\n")
        folders.append(folder)
    return folders
