"""Annotation files made by the tests themselves, in each format's own layout: COCO instances
JSON, Pascal VOC XML and YOLO label lines. Each function returns what a file holds (bytes), or the
entry that goes into one (a dict), so a test writes broken variants by editing them; and
`load_annotations`, an objects format read as a detection (or keypoints) run reads it."""

from __future__ import annotations

import json
from collections.abc import Sequence

from beam_tfrecord.plan.annotations.paths import AnnotationPath, parse_annotation_paths
from beam_tfrecord.plan.annotations.results import AnnotationSet
from beam_tfrecord.plan.listing import InputFile
from beam_tfrecord.plan.sources import registry
from beam_tfrecord.plan.sources.base import LoadRequest


def load_annotations(
    name: str,
    files: Sequence[InputFile],
    annotations_path: str | Sequence[AnnotationPath] | None = None,
    *,
    class_names: Sequence[str] | None = None,
    masks: bool = True,
    label_map: str | None = None,
    keypoints: bool = False,
) -> AnnotationSet:
    """The format `name`'s annotations of the listed files, as a detection run (with `keypoints`,
    a keypoints run) asks for them; `annotations_path` as a user writes it, or parsed."""
    paths = (
        parse_annotation_paths(annotations_path)
        if annotations_path is None or isinstance(annotations_path, str)
        else tuple(annotations_path)
    )
    request = LoadRequest(
        "keypoints" if keypoints else "detection",
        files,
        paths,
        class_names=tuple(class_names) if class_names is not None else None,
        masks=masks,
        label_map=label_map,
    )
    return registry.named(name).load(request)


CATEGORIES = [
    {"id": 18, "name": "dog", "supercategory": "animal"},
    {"id": 1, "name": "person", "supercategory": "person"},
    {"id": 17, "name": "cat", "supercategory": "animal"},
]


def instances(images, annotations, categories=CATEGORIES, **extra) -> bytes:
    """A COCO instances file."""
    return json.dumps(
        {
            "info": {"year": 2017},
            "images": images,
            "annotations": annotations,
            "categories": categories,
            **extra,
        }
    ).encode()


def image(image_id, file_name, width=48, height=32) -> dict:
    """A COCO `images` entry."""
    return {"id": image_id, "file_name": file_name, "width": width, "height": height}


def box(ann_id, image_id, category_id, bbox, **extra) -> dict:
    """A COCO `annotations` entry; `area` is the box's unless given."""
    return {
        "id": ann_id,
        "image_id": image_id,
        "category_id": category_id,
        "bbox": bbox,
        "iscrowd": 0,
        "area": bbox[2] * bbox[3] if len(bbox) == 4 else 0,
        **extra,
    }


def voc_xml(filename: str, objects, width: int = 48, height: int = 32) -> bytes:
    """A VOC annotation; each object is (name, (xmin, ymin, xmax, ymax), extra XML)."""
    parts = [
        "<annotation>",
        "<folder>VOC2012</folder>",
        f"<filename>{filename}</filename>",
        f"<size><width>{width}</width><height>{height}</height><depth>3</depth></size>",
        "<segmented>0</segmented>",
    ]
    for name, (xmin, ymin, xmax, ymax), extra in objects:
        parts.append(
            f"<object><name>{name}</name>{extra}<bndbox><xmin>{xmin}</xmin><ymin>{ymin}</ymin>"
            f"<xmax>{xmax}</xmax><ymax>{ymax}</ymax></bndbox></object>"
        )
    parts.append("</annotation>")
    return "\n".join(parts).encode()


def yolo_box(index: int, xmin: float, ymin: float, xmax: float, ymax: float) -> str:
    """A YOLO label line for a box given by its corners, as fractions of the image's size."""
    return f"{index} {(xmin + xmax) / 2:.6f} {(ymin + ymax) / 2:.6f} {xmax - xmin:.6f} {ymax - ymin:.6f}\n"


# Solid shapes on a noisy grey ground: every object's pixels are its own colour, so a reader's box
# or mask can be checked against the picture itself, and a contact sheet shows at a glance
# whether the boxes frame their shapes.
SHAPES = [
    {"id": 3, "name": "square", "supercategory": "shape"},
    {"id": 7, "name": "triangle", "supercategory": "shape"},
]
SHAPE_COLOURS = {3: (70, 150, 220), 7: (250, 190, 60)}  # near the contact sheet's class colours


def shapes_coco(
    root, count: int = 6, width: int = 96, height: int = 64, sizes: tuple[int, int] = (14, 26)
) -> dict[str, list[dict]]:
    """Write `count` PNG pictures of squares and triangles with their COCO instances file (boxes
    and polygons) under `root` (`images/`, `annotations/instances_shapes.json`); returns, per file
    name, its objects as {"category_id", "bbox" (COCO's x, y, w, h), "polygon"}. Shapes are
    `sizes` pixels wide (from, to), at most three a picture, side by side."""
    import pathlib

    import numpy as np
    from PIL import Image, ImageDraw

    root = pathlib.Path(root)
    (root / "images").mkdir(parents=True, exist_ok=True)
    (root / "annotations").mkdir(exist_ok=True)
    rng = np.random.default_rng(0)
    images, annotations, truth = [], [], {}
    for i in range(count):
        ground = np.clip(120 + rng.integers(-12, 12, (height, width, 3)), 0, 255).astype(np.uint8)
        picture = Image.fromarray(ground, "RGB")
        draw = ImageDraw.Draw(picture)
        name = f"shapes_{i}.png"
        objects = []
        for k in range(1 + i % 3):
            category = 3 if (i + k) % 2 == 0 else 7
            size = int(rng.integers(*sizes))
            slot = width // 3  # one third of the width per shape: shapes never overlap
            x = k * slot + int(rng.integers(0, slot - size))
            y = int(rng.integers(0, height - size))
            if category == 3:
                polygon = [x, y, x + size, y, x + size, y + size, x, y + size]
            else:
                polygon = [x, y + size, x + size // 2, y, x + size, y + size]
            draw.polygon(list(zip(polygon[::2], polygon[1::2], strict=True)), fill=SHAPE_COLOURS[category])
            xs, ys = polygon[::2], polygon[1::2]
            bbox = [min(xs), min(ys), max(xs) - min(xs), max(ys) - min(ys)]
            objects.append({"category_id": category, "bbox": bbox, "polygon": polygon})
            annotations.append(box(1000 * i + k, i, category, bbox, segmentation=[polygon]))
        picture.save(root / "images" / name, format="PNG")
        images.append(image(i, name, width, height))
        truth[name] = objects
    (root / "annotations" / "instances_shapes.json").write_bytes(instances(images, annotations, SHAPES))
    return truth


# Whole datasets as the tools that make them lay them out. Each writes under `root` and returns
# {path of the picture under root: number of objects its annotation holds}; pictures are 48x32
# JPEGs, objects boxes of classes `cat` and `dog`, one to three a picture.
def _pictures(root, folder: str, count: int, seed: int) -> list[tuple[str, int]]:
    import pathlib

    from imagegen import jpeg

    (pathlib.Path(root) / folder).mkdir(parents=True, exist_ok=True)
    made = []
    for i in range(count):
        relpath = f"{folder}/{folder.replace('/', '_')}_{i}.jpg" if folder else f"p_{i}.jpg"
        (pathlib.Path(root) / relpath).write_bytes(jpeg(seed=seed + i))
        made.append((relpath, 1 + (seed + i) % 3))
    return made


def _corners(k: int) -> tuple[int, int, int, int]:
    return 2 + 12 * k, 3, 10 + 12 * k, 20


def labelimg_xml(relpath: str, root, objects: int) -> bytes:
    """An XML as LabelImg writes it: folder, filename, the absolute path, an unknown database."""
    import pathlib

    folder, name = pathlib.PurePosixPath(relpath).parent.name, pathlib.PurePosixPath(relpath).name
    lines = [
        "<annotation>",
        f"\t<folder>{folder}</folder>",
        f"\t<filename>{name}</filename>",
        f"\t<path>{pathlib.Path(root, relpath)}</path>",
        "\t<source>\n\t\t<database>Unknown</database>\n\t</source>",
        "\t<size>\n\t\t<width>48</width>\n\t\t<height>32</height>\n\t\t<depth>3</depth>\n\t</size>",
        "\t<segmented>0</segmented>",
    ]
    for k in range(objects):
        xmin, ymin, xmax, ymax = _corners(k)
        lines += [
            "\t<object>",
            f"\t\t<name>{('cat', 'dog')[k % 2]}</name>",
            "\t\t<pose>Unspecified</pose>\n\t\t<truncated>0</truncated>\n\t\t<difficult>0</difficult>",
            f"\t\t<bndbox>\n\t\t\t<xmin>{xmin}</xmin>\n\t\t\t<ymin>{ymin}</ymin>",
            f"\t\t\t<xmax>{xmax}</xmax>\n\t\t\t<ymax>{ymax}</ymax>\n\t\t</bndbox>",
            "\t</object>",
        ]
    lines.append("</annotation>")
    return "\n".join(lines).encode()


def _yolo_lines(objects: int) -> bytes:
    return "".join(
        yolo_box(k % 2, *(v / s for v, s in zip(_corners(k), (48, 32, 48, 32), strict=True)))
        for k in range(objects)
    ).encode()


def ultralytics_tree(root, image_list: bool = False) -> dict[str, int]:
    """An Ultralytics dataset: `images/{train,val}/`, `labels/{train,val}/`, and `data.yaml` with
    `path`, `train`, `val` and `names` as a mapping (Ultralytics' own coco8.yaml style). With
    `image_list`, `train` is `train.txt`, listing `./images/train/...` as Ultralytics writes it."""
    import pathlib

    root = pathlib.Path(root)
    truth = {}
    for split, count, seed in (("train", 4, 0), ("val", 2, 10)):
        for relpath, objects in _pictures(root, f"images/{split}", count, seed):
            label = root / ("labels" + relpath[len("images") :]).rsplit(".", 1)[0]
            label.parent.mkdir(parents=True, exist_ok=True)
            label.with_suffix(".txt").write_bytes(_yolo_lines(objects))
            truth[relpath] = objects
    train = "images/train"
    if image_list:
        train = "train.txt"
        listed = sorted(r for r in truth if r.startswith("images/train/"))
        (root / "train.txt").write_text("".join(f"./{r}\n" for r in listed))
    (root / "data.yaml").write_text(
        f"# Ultralytics YOLO dataset\npath: {root}  # dataset root dir\ntrain: {train}\nval: images/val\n"
        "test:  # test images (optional)\n\nnames:\n  0: cat\n  1: dog\n"
    )
    return truth


def labelimg_pair(root) -> dict[str, int]:
    """A Kaggle-style export: `images/*.jpg` and LabelImg's `annotations/*.xml` beside them."""
    import pathlib

    truth = dict(_pictures(root, "images", 5, 20))
    (pathlib.Path(root) / "annotations").mkdir(parents=True, exist_ok=True)
    for relpath, objects in truth.items():
        name = pathlib.PurePosixPath(relpath).stem + ".xml"
        (pathlib.Path(root) / "annotations" / name).write_bytes(labelimg_xml(relpath, root, objects))
    return truth


def roboflow_coco(root) -> dict[str, int]:
    """A Roboflow COCO export: `train/`, `valid/`, `test/`, each with its pictures and its
    `_annotations.coco.json` (category 0 is the dataset's supercategory, as Roboflow writes it)."""
    import pathlib

    truth = {}
    categories = [
        {"id": 0, "name": "pets", "supercategory": "none"},
        {"id": 1, "name": "cat", "supercategory": "pets"},
        {"id": 2, "name": "dog", "supercategory": "pets"},
    ]
    for split, count, seed in (("train", 4, 30), ("valid", 2, 40), ("test", 2, 50)):
        made = _pictures(root, split, count, seed)
        images, annotations = [], []
        for index, (relpath, objects) in enumerate(made):
            images.append(image(index, pathlib.PurePosixPath(relpath).name))
            for k in range(objects):
                xmin, ymin, xmax, ymax = _corners(k)
                annotations.append(
                    box(len(annotations), index, 1 + k % 2, [xmin, ymin, xmax - xmin, ymax - ymin])
                )
            truth[relpath] = objects
        (pathlib.Path(root) / split / "_annotations.coco.json").write_bytes(
            instances(images, annotations, categories)
        )
    return truth


def voc_devkit(root, test_list: bool = False) -> dict[str, int]:
    """A VOC devkit: `VOC2012/JPEGImages`, `Annotations`, `ImageSets/Main/{train,val}.txt` (and
    `trainval.txt`, and per-class lists as the devkit has them)."""
    import pathlib

    base = pathlib.Path(root) / "VOC2012"
    truth = {f"VOC2012/{r}": n for r, n in _pictures(base, "JPEGImages", 6, 60)}
    (base / "Annotations").mkdir(parents=True, exist_ok=True)
    (base / "ImageSets" / "Main").mkdir(parents=True, exist_ok=True)
    ids = []
    for relpath, objects in truth.items():
        stem_ = pathlib.PurePosixPath(relpath).stem
        ids.append(stem_)
        (base / "Annotations" / f"{stem_}.xml").write_bytes(
            labelimg_xml(relpath.removeprefix("VOC2012/"), base, objects)
        )
    sets = base / "ImageSets" / "Main"
    (sets / "train.txt").write_text("".join(f"{i}\n" for i in ids[:4]))
    (sets / "val.txt").write_text("".join(f"{i}\n" for i in ids[4:]))
    (sets / "trainval.txt").write_text("".join(f"{i}\n" for i in ids))
    (sets / "cat_train.txt").write_text("".join(f"{i}  1\n" for i in ids[:4]))
    return truth


def coco2017(root) -> dict[str, int]:
    """COCO 2017's layout: `train2017/`, `val2017/`, `annotations/instances_{train,val}2017.json`
    with `captions_train2017.json` and `person_keypoints_val2017.json`-style files beside them."""
    import pathlib

    root = pathlib.Path(root)
    (root / "annotations").mkdir(parents=True, exist_ok=True)
    truth = {}
    for split, count, seed in (("train2017", 5, 70), ("val2017", 3, 80)):
        made = _pictures(root, split, count, seed)
        images, annotations, captions = [], [], []
        for index, (relpath, objects) in enumerate(made):
            image_id = 100 * seed + index
            images.append(image(image_id, pathlib.PurePosixPath(relpath).name))
            captions.append({"id": image_id, "image_id": image_id, "caption": "a picture of pets"})
            for k in range(objects):
                xmin, ymin, xmax, ymax = _corners(k)
                bbox = [xmin, ymin, xmax - xmin, ymax - ymin]
                annotations.append(box(1000 * seed + len(annotations), image_id, (17, 18)[k % 2], bbox))
            truth[relpath] = objects
        (root / "annotations" / f"instances_{split}.json").write_bytes(instances(images, annotations))
        (root / "annotations" / f"captions_{split}.json").write_bytes(
            json.dumps({"info": {}, "images": images, "annotations": captions}).encode()
        )
    return truth


def roboflow_yolo(root) -> dict[str, int]:
    """A Roboflow YOLO export: `{train,valid,test}/{images,labels}/` and a `data.yaml` at the root
    whose folders start with `../` (Ultralytics drops it when it leads nowhere)."""
    import pathlib

    root = pathlib.Path(root)
    truth = {}
    for split, count, seed in (("train", 3, 90), ("valid", 2, 95), ("test", 1, 99)):
        for relpath, objects in _pictures(root, f"{split}/images", count, seed):
            label = root / split / "labels" / (pathlib.PurePosixPath(relpath).stem + ".txt")
            label.parent.mkdir(parents=True, exist_ok=True)
            label.write_bytes(_yolo_lines(objects))
            truth[relpath] = objects
    (root / "data.yaml").write_text(
        "train: ../train/images\nval: ../valid/images\ntest: ../test/images\n\nnc: 2\nnames: ['cat', 'dog']\n"
    )
    return truth
