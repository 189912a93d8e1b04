"""Keypoint (pose) datasets made by the tests themselves, laid out on disk exactly as their tools
leave them: the COCO 2017 download (`person_keypoints_*2017.json` beside `instances_*` and
`captions_*`), CVAT's "COCO Keypoints 1.0" export with animal skeletons of their own, the
Ultralytics pose layout (`data.yaml` with `kpt_shape` and `flip_idx`, normalized label lines) and a
COCO keypoints file without boxes. A converter meets these trees as they are: negatives, persons
whose points are all unlabelled, crowd regions, visibilities written as floats, hidden and
missing points, points CVAT keeps the coordinates of while marking them absent. Each builder
returns a `PoseTree` that says what a converter must store: every picture's objects with their
boxes and points in the stored picture's pixels, each class's keypoint names and skeleton
(0-based), the pictures' sizes and the declared splits. Pictures are small and deterministic."""

from __future__ import annotations

import json
import pathlib
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import NamedTuple

import numpy as np
from imagegen import jpeg, write_tree


class Point(NamedTuple):
    """One keypoint, in the stored picture's pixels (for YOLO: the fraction times the picture's
    size), with COCO's visibility."""

    x: float
    y: float
    v: int  # 0 not labelled, 1 labelled but hidden, 2 labelled and visible


Box = tuple[float, float, float, float]  # xmin, ymin, xmax, ymax in pixels
PoseObject = tuple[str, Box, tuple[Point, ...]]  # class name, box, its points in order


@dataclass(frozen=True)
class PoseTree:
    """A keypoint dataset on disk and what a converter must make of it."""

    root: pathlib.Path  # the dataset root: what a user passes as --input
    objects: dict[str, list[PoseObject]]  # picture relpath (posix) -> its objects in source order
    keypoint_names: dict[str, tuple[str, ...]]  # class name -> its keypoint names
    skeleton: dict[str, tuple[tuple[int, int], ...]]  # class name -> 0-based pairs; {} when none
    sizes: dict[str, tuple[int, int]]  # picture relpath -> (width, height)
    splits: dict[str, str]  # picture relpath -> "train" or "validation"; {} when none declared
    crowd: dict[str, tuple[int, ...]] = field(default_factory=dict)  # relpath -> iscrowd objects' indices


COCO_KEYPOINTS = (
    "nose",
    "left_eye",
    "right_eye",
    "left_ear",
    "right_ear",
    "left_shoulder",
    "right_shoulder",
    "left_elbow",
    "right_elbow",
    "left_wrist",
    "right_wrist",
    "left_hip",
    "right_hip",
    "left_knee",
    "right_knee",
    "left_ankle",
    "right_ankle",
)
# As person_keypoints_*2017.json holds it: 1-based, in this order.
COCO_SKELETON = (
    (16, 14),
    (14, 12),
    (17, 15),
    (15, 13),
    (12, 13),
    (6, 12),
    (7, 13),
    (6, 7),
    (6, 8),
    (7, 9),
    (8, 10),
    (9, 11),
    (2, 3),
    (1, 2),
    (1, 3),
    (2, 4),
    (3, 5),
    (4, 6),
    (5, 7),
)
COCO_FLIP_IDX = (0, 2, 1, 4, 3, 6, 5, 8, 7, 10, 9, 12, 11, 14, 13, 16, 15)

# Where each point sits in its box (fractions of the box's width and height): a person facing the
# camera, so their left side is on the picture's right.
PERSON_POSE = (
    (0.50, 0.08),
    (0.55, 0.05),
    (0.45, 0.05),
    (0.62, 0.07),
    (0.38, 0.07),
    (0.70, 0.22),
    (0.30, 0.22),
    (0.80, 0.40),
    (0.20, 0.40),
    (0.85, 0.55),
    (0.15, 0.55),
    (0.62, 0.55),
    (0.38, 0.55),
    (0.64, 0.75),
    (0.36, 0.75),
    (0.65, 0.92),
    (0.35, 0.92),
)

# Animals seen from the side, head on the left. 14 and 21 points, as a CVAT project's skeletons.
DOG_KEYPOINTS = (
    "nose",
    "left_eye",
    "right_eye",
    "left_ear",
    "right_ear",
    "throat",
    "withers",
    "tail_base",
    "left_front_knee",
    "left_front_paw",
    "right_front_knee",
    "right_front_paw",
    "left_back_paw",
    "right_back_paw",
)
DOG_SKELETON = (
    (1, 2),
    (1, 3),
    (2, 4),
    (3, 5),
    (1, 6),
    (6, 7),
    (7, 8),
    (7, 9),
    (9, 10),
    (7, 11),
    (11, 12),
    (8, 13),
    (8, 14),
)
DOG_POSE = (
    (0.05, 0.22),
    (0.12, 0.12),
    (0.10, 0.15),
    (0.20, 0.06),
    (0.18, 0.09),
    (0.20, 0.35),
    (0.35, 0.30),
    (0.85, 0.30),
    (0.33, 0.65),
    (0.32, 0.94),
    (0.40, 0.66),
    (0.40, 0.95),
    (0.80, 0.94),
    (0.88, 0.95),
)
CAT_KEYPOINTS = (
    "nose",
    "left_eye",
    "right_eye",
    "left_ear_base",
    "left_ear_tip",
    "right_ear_base",
    "right_ear_tip",
    "chin",
    "throat",
    "withers",
    "tail_base",
    "tail_middle",
    "tail_tip",
    "left_front_elbow",
    "left_front_paw",
    "right_front_elbow",
    "right_front_paw",
    "left_back_knee",
    "left_back_paw",
    "right_back_knee",
    "right_back_paw",
)
CAT_SKELETON = (
    (1, 2),
    (1, 3),
    (2, 4),
    (4, 5),
    (3, 6),
    (6, 7),
    (1, 8),
    (8, 9),
    (9, 10),
    (10, 11),
    (11, 12),
    (12, 13),
    (10, 14),
    (14, 15),
    (10, 16),
    (16, 17),
    (11, 18),
    (18, 19),
    (11, 20),
    (20, 21),
)
CAT_POSE = (
    (0.04, 0.25),
    (0.10, 0.18),
    (0.08, 0.20),
    (0.14, 0.10),
    (0.16, 0.03),
    (0.11, 0.12),
    (0.12, 0.05),
    (0.07, 0.33),
    (0.15, 0.40),
    (0.30, 0.35),
    (0.75, 0.35),
    (0.88, 0.20),
    (0.96, 0.05),
    (0.30, 0.60),
    (0.30, 0.95),
    (0.36, 0.62),
    (0.37, 0.96),
    (0.70, 0.60),
    (0.68, 0.95),
    (0.76, 0.62),
    (0.75, 0.96),
)

COCO_SIZES = ((64, 48), (48, 64), (56, 40))  # cycled over the pictures


def zero_based(pairs: Sequence[Sequence[int]]) -> tuple[tuple[int, int], ...]:
    """COCO's 1-based skeleton pairs as 0-based point indices."""
    return tuple((a - 1, b - 1) for a, b in pairs)


def place(
    pose: Sequence[tuple[float, float]],
    box: Box,
    rng: np.random.Generator,
    visibility: Sequence[int],
    offset: int = 0,
    decimals: int = 0,
    absent_at_zero: bool = True,
) -> tuple[Point, ...]:
    """Points laid on `pose` inside `box`, jittered a pixel, rounded to `decimals` (0: whole
    pixels); point k's visibility is `visibility[(k + offset) % len]`. Unlabelled points sit at
    (0, 0) as COCO writes them, unless `absent_at_zero` is False (CVAT keeps where they were)."""
    x0, y0, x1, y1 = box
    points = []
    for k, (u, w) in enumerate(pose):
        v = visibility[(k + offset) % len(visibility)]
        x = min(max(x0 + u * (x1 - x0) + rng.uniform(-1, 1), x0 + 0.5), x1 - 0.5)
        y = min(max(y0 + w * (y1 - y0) + rng.uniform(-1, 1), y0 + 0.5), y1 - 0.5)
        x, y = (round(x, decimals), round(y, decimals)) if decimals else (float(round(x)), float(round(y)))
        if v == 0 and absent_at_zero:
            x = y = 0.0
        points.append(Point(x, y, v))
    return tuple(points)


def flat_keypoints(points: Sequence[Point], as_floats: bool = False) -> list[float | int]:
    """COCO's `keypoints`: x1, y1, v1, ...; whole numbers written as ints unless `as_floats`
    (then `12.0, 30.0, 2.0`, as some exporters write them)."""
    out: list[float | int] = []
    for p in points:
        if as_floats:
            out += [float(p.x), float(p.y), float(p.v)]
        else:
            out += [int(c) if float(c).is_integer() else c for c in (p.x, p.y)] + [p.v]
    return out


def polygon_in(x0: float, y0: float, x1: float, y1: float) -> list[float]:
    """A person-like pentagon touching the four sides of the given extent, 2 decimals."""
    w, h = x1 - x0, y1 - y0
    corners = [(0.0, 0.3), (0.5, 0.0), (1.0, 0.3), (0.8, 1.0), (0.2, 1.0)]
    return [round(c, 2) for u, v in corners for c in (x0 + u * w, y0 + v * h)]


def polygon_area(polygon: Sequence[float]) -> float:
    """The shoelace area of a flat x, y, x, y, ... polygon."""
    xs, ys = polygon[::2], polygon[1::2]
    n = len(xs)
    return abs(sum(xs[i] * ys[(i + 1) % n] - xs[(i + 1) % n] * ys[i] for i in range(n))) / 2


def rle(mask: np.ndarray) -> dict:
    """COCO's uncompressed RLE of a boolean (H, W) mask: runs in column-major order, zeros first."""
    flat = mask.flatten(order="F").astype(np.uint8)
    counts, current, run = [], 0, 0
    for value in flat:
        if value != current:
            counts.append(run)
            current, run = value, 0
        run += 1
    counts.append(run)
    return {"counts": counts, "size": [int(mask.shape[0]), int(mask.shape[1])]}


def _coco_kinds(index: int, count: int) -> list[str]:
    """What picture `index` of `count` in a COCO split holds: two persons first, then a person with
    an all-unlabelled person and a crowd region, the last a negative, the rest one or two persons."""
    if index == count - 1:
        return []
    if index == 0:
        return ["person", "person"]
    if index == 1:
        return ["person", "unlabelled", "crowd"]
    return ["person"] * (1 + index % 2)


def coco2017_keypoints(root: pathlib.Path, per_split: int = 3) -> PoseTree:
    """The COCO 2017 download: {train2017,val2017}/<12 digits>.jpg with annotations/
    person_keypoints_*2017.json, instances_*2017.json (the same persons as boxes and polygons, the
    crowd as RLE) and captions_*2017.json (a caption each) beside them. Per split: a picture with
    two persons, one with a person, an all-unlabelled person (num_keypoints 0) and a crowd region
    (iscrowd 1, keypoints all zeros), a negative last; in train, one annotation's keypoints are
    written as floats (`2.0`)."""
    if per_split < 3:
        raise ValueError("per_split must be at least 3: two kinds of persons and a negative")
    rng = np.random.default_rng(17)
    files: dict[str, bytes] = {}
    objects: dict[str, list[PoseObject]] = {}
    sizes: dict[str, tuple[int, int]] = {}
    splits: dict[str, str] = {}
    crowd: dict[str, tuple[int, ...]] = {}
    category = {
        "supercategory": "person",
        "id": 1,
        "name": "person",
        "keypoints": list(COCO_KEYPOINTS),
        "skeleton": [list(pair) for pair in COCO_SKELETON],
    }
    image_id, ann_id = 0, 200000
    for folder, split in (("train2017", "train"), ("val2017", "validation")):
        images, keypoint_anns, instance_anns, captions = [], [], [], []
        for index in range(per_split):
            image_id += 1
            width, height = COCO_SIZES[(image_id - 1) % len(COCO_SIZES)]
            name = f"{image_id:012d}.jpg"
            relpath = f"{folder}/{name}"
            files[relpath] = jpeg(width, height, seed=image_id)
            images.append(
                {
                    "license": 1 + image_id % 6,
                    "file_name": name,
                    "coco_url": f"http://images.cocodataset.org/{folder}/{name}",
                    "height": height,
                    "width": width,
                    "date_captured": "2013-11-14 16:28:13",
                    "flickr_url": f"http://farm4.staticflickr.com/4/{image_id}_0000000000_z.jpg",
                    "id": image_id,
                }
            )
            captions.append({"image_id": image_id, "id": 900000 + image_id, "caption": f"people {index}."})
            sizes[relpath], splits[relpath], objects[relpath] = (width, height), split, []
            kinds = _coco_kinds(index, per_split)
            slot = width / max(len(kinds), 1)
            for k, kind in enumerate(kinds):
                ann_id += 1
                left, right = k * slot + 1.37, (k + 1) * slot - 1.61
                top, bottom = 2.25 + k, height - 2.5
                if kind == "crowd":
                    mask = np.zeros((height, width), bool)
                    r0, r1, c0, c1 = int(top) + 2, int(bottom) - 1, int(left) + 1, int(right)
                    mask[r0:r1, c0:c1] = True
                    segmentation: list | dict = rle(mask)
                    bbox = [float(c0), float(r0), float(c1 - c0), float(r1 - r0)]
                    area = float(mask.sum())
                else:
                    polygon = polygon_in(left, top, right, bottom)
                    xs, ys = polygon[::2], polygon[1::2]
                    bbox = [min(xs), min(ys), round(max(xs) - min(xs), 2), round(max(ys) - min(ys), 2)]
                    segmentation, area = [polygon], round(polygon_area(polygon), 4)
                box = (bbox[0], bbox[1], bbox[0] + bbox[2], bbox[1] + bbox[3])
                if kind == "person":
                    points = place(PERSON_POSE, box, rng, (2, 2, 1, 2, 0, 2, 1), offset=image_id + k)
                else:  # the crowd and the all-unlabelled person: every point (0, 0, 0)
                    points = tuple(Point(0.0, 0.0, 0) for _ in COCO_KEYPOINTS)
                iscrowd = int(kind == "crowd")
                as_floats = split == "train" and index == 0 and k == 1
                labelled = sum(p.v > 0 for p in points)
                common = {
                    "segmentation": segmentation,
                    "area": area,
                    "iscrowd": iscrowd,
                    "image_id": image_id,
                }
                keypoint_anns.append(
                    {
                        **common,
                        "num_keypoints": labelled,
                        "keypoints": flat_keypoints(points, as_floats),
                        "bbox": bbox,
                        "category_id": 1,
                        "id": ann_id,
                    }
                )
                instance_anns.append({**common, "bbox": bbox, "category_id": 1, "id": ann_id})
                objects[relpath].append(("person", box, points))
                if iscrowd:
                    crowd[relpath] = (*crowd.get(relpath, ()), k)
        header = {
            "info": {"description": "COCO 2017 Dataset", "url": "http://cocodataset.org", "year": 2017},
            "licenses": [{"url": "http://creativecommons.org/licenses/by/2.0/", "id": 4, "name": "By"}],
            "images": images,
        }
        kind_files = {
            "person_keypoints": {**header, "annotations": keypoint_anns, "categories": [category]},
            "instances": {
                **header,
                "annotations": instance_anns,
                "categories": [{"supercategory": "person", "id": 1, "name": "person"}],
            },
            "captions": {**header, "annotations": captions},
        }
        for kind, document in kind_files.items():
            files[f"annotations/{kind}_{folder}.json"] = json.dumps(document).encode()
    write_tree(root, files)
    return PoseTree(
        root=root,
        objects=objects,
        keypoint_names={"person": COCO_KEYPOINTS},
        skeleton={"person": zero_based(COCO_SKELETON)},
        sizes=sizes,
        splits=splits,
        crowd=crowd,
    )


def coco_animal_keypoints(root: pathlib.Path) -> PoseTree:
    """CVAT's "COCO Keypoints 1.0" export of a task with two skeletons, `dog` (14 points) and `cat`
    (21): images/*.jpg and annotations/person_keypoints_default.json (CVAT names it so whatever the
    classes). As CVAT writes it: coordinates as 2-decimal floats, an empty `segmentation`, an
    `attributes` dict, categories with an empty supercategory, and points marked absent (v=0) that
    keep where they were instead of (0, 0). Four pictures, the last a negative; no splits."""
    rng = np.random.default_rng(23)
    classes = {
        "dog": (1, DOG_KEYPOINTS, DOG_SKELETON, DOG_POSE),
        "cat": (2, CAT_KEYPOINTS, CAT_SKELETON, CAT_POSE),
    }
    plan = [("dog_park.jpg", (64, 48), ["dog"]), ("yard_01.jpg", (72, 40), ["cat", "dog"])]
    plan += [("sofa.jpg", (64, 56), ["cat", "cat", "dog"]), ("empty_room.jpg", (48, 48), [])]
    files: dict[str, bytes] = {}
    objects: dict[str, list[PoseObject]] = {}
    sizes: dict[str, tuple[int, int]] = {}
    images, annotations = [], []
    ann_id = 0
    for image_id, (name, (width, height), kinds) in enumerate(plan, start=1):
        relpath = f"images/{name}"
        files[relpath] = jpeg(width, height, seed=100 + image_id)
        images.append(
            {
                "id": image_id,
                "width": width,
                "height": height,
                "file_name": name,
                "license": 0,
                "flickr_url": "",
                "coco_url": "",
                "date_captured": 0,
            }
        )
        sizes[relpath], objects[relpath] = (width, height), []
        slot = width / max(len(kinds), 1)
        for k, kind in enumerate(kinds):
            ann_id += 1
            category_id, _, _, pose = classes[kind]
            x, y = round(k * slot + 0.73, 2), round(1.5 + 2 * k + rng.uniform(0, 2), 2)
            w, h = round(slot - 1.9, 2), round(height - y - 1.35, 2)
            box = (x, y, x + w, y + h)
            points = place(
                pose, box, rng, (2, 2, 2, 1, 2, 0), offset=ann_id, decimals=2, absent_at_zero=False
            )
            annotations.append(
                {
                    "id": ann_id,
                    "image_id": image_id,
                    "category_id": category_id,
                    "segmentation": [],
                    "area": round(w * h, 4),
                    "bbox": [x, y, w, h],
                    "iscrowd": 0,
                    "attributes": {"occluded": False, "keyframe": False},
                    "keypoints": flat_keypoints(points),
                    "num_keypoints": sum(p.v > 0 for p in points),
                }
            )
            objects[relpath].append((kind, box, points))
    document = {
        "licenses": [{"name": "", "id": 0, "url": ""}],
        "info": {
            "contributor": "",
            "date_created": "",
            "description": "",
            "url": "",
            "version": "",
            "year": "",
        },
        "categories": [
            {
                "id": category_id,
                "name": kind,
                "supercategory": "",
                "keypoints": list(names),
                "skeleton": [list(pair) for pair in skeleton],
            }
            for kind, (category_id, names, skeleton, _) in classes.items()
        ],
        "images": images,
        "annotations": annotations,
    }
    files["annotations/person_keypoints_default.json"] = json.dumps(document).encode()
    write_tree(root, files)
    return PoseTree(
        root=root,
        objects=objects,
        keypoint_names={kind: names for kind, (_, names, _, _) in classes.items()},
        skeleton={kind: zero_based(skeleton) for kind, (_, _, skeleton, _) in classes.items()},
        sizes=sizes,
        splits={},
    )


def ultralytics_pose(root: pathlib.Path, dims: int = 3, names: bool = False) -> PoseTree:
    """The Ultralytics pose layout, as coco8-pose.yaml describes it: data.yaml (`path: .`, `train`,
    `val`, `kpt_shape: [17, dims]`, `flip_idx`, `names: {0: person}`, and with `names` the
    optional `kpt_names: {0: [...]}`), images/{train,val}/*.jpg and labels/{train,val}/*.txt lines
    `0 cx cy w h px py [v] ...` normalized to 6 decimals. A missing point is `0.000000 0.000000 0`
    (dims 3) or `0 0` (dims 2); with dims 2 the expected v is 2 for a point and 0 for (0, 0). Train's
    last picture has no label file (a negative). Without `names`, the points are named "0".."16"."""
    if dims not in (2, 3):
        raise ValueError("dims must be 2 or 3")
    rng = np.random.default_rng(31 + dims)
    visibility = (2, 2, 1, 2, 0, 2, 2, 1) if dims == 3 else (2, 2, 2, 0, 2, 2)
    files: dict[str, bytes] = {}
    objects: dict[str, list[PoseObject]] = {}
    sizes: dict[str, tuple[int, int]] = {}
    splits: dict[str, str] = {}
    plan = [("train", [2, 1, 1, 0]), ("val", [1, 2])]
    image_id = 0
    for folder, persons in plan:
        for index, count in enumerate(persons):
            image_id += 9
            width, height = COCO_SIZES[image_id % len(COCO_SIZES)]
            stem = f"{image_id:012d}"
            relpath = f"images/{folder}/{stem}.jpg"
            files[relpath] = jpeg(width, height, seed=300 + image_id)
            sizes[relpath] = (width, height)
            splits[relpath] = "train" if folder == "train" else "validation"
            objects[relpath] = []
            if folder == "train" and index == len(persons) - 1:
                continue  # a negative: no label file at all
            lines = []
            slot = width / count
            for k in range(count):
                pixels = (round(k * slot) + 2, 3 + k, round((k + 1) * slot) - 2, height - 2)
                fractions = [
                    f"{(pixels[0] + pixels[2]) / 2 / width:.6f}",
                    f"{(pixels[1] + pixels[3]) / 2 / height:.6f}",
                    f"{(pixels[2] - pixels[0]) / width:.6f}",
                    f"{(pixels[3] - pixels[1]) / height:.6f}",
                ]
                cx, cy, w, h = map(float, fractions)
                box = (
                    (cx - w / 2) * width,
                    (cy - h / 2) * height,
                    (cx + w / 2) * width,
                    (cy + h / 2) * height,
                )
                drawn = place(PERSON_POSE, tuple(map(float, pixels)), rng, visibility, offset=image_id + k)
                words, points = ["0", *fractions], []
                for p in drawn:
                    if p.v == 0:
                        words += ["0.000000", "0.000000", "0"] if dims == 3 else ["0", "0"]
                        points.append(Point(0.0, 0.0, 0))
                        continue
                    px, py = f"{p.x / width:.6f}", f"{p.y / height:.6f}"
                    words += [px, py, str(p.v)] if dims == 3 else [px, py]
                    points.append(Point(float(px) * width, float(py) * height, p.v if dims == 3 else 2))
                lines.append(" ".join(words) + "\n")
                objects[relpath].append(("person", box, tuple(points)))
            files[f"labels/{folder}/{stem}.txt"] = "".join(lines).encode()
    yaml_lines = [
        "# Ultralytics pose dataset, laid out as coco8-pose.yaml describes it",
        "path: . # dataset root dir",
        "train: images/train # train images (relative to 'path')",
        "val: images/val # val images (relative to 'path')",
        "",
        "# Keypoints",
        f"kpt_shape: [{len(COCO_KEYPOINTS)}, {dims}] # number of keypoints, number of dims"
        " (2 for x,y or 3 for x,y,visible)",
        f"flip_idx: [{', '.join(map(str, COCO_FLIP_IDX))}]",
        "",
        "# Classes",
        "names:",
        "  0: person",
    ]
    if names:
        yaml_lines += ["", "# Keypoint names per class", "kpt_names:", "  0:"]
        yaml_lines += [f"    - {name}" for name in COCO_KEYPOINTS]
    files["data.yaml"] = ("\n".join(yaml_lines) + "\n").encode()
    write_tree(root, files)
    point_names = COCO_KEYPOINTS if names else tuple(str(i) for i in range(len(COCO_KEYPOINTS)))
    return PoseTree(
        root=root,
        objects=objects,
        keypoint_names={"person": point_names},
        skeleton={},
        sizes=sizes,
        splits=splits,
    )


def coco_keypoints_only_file(root: pathlib.Path, per_split: int = 3) -> PoseTree:
    """`coco2017_keypoints`'s tree with every `bbox` key removed from the person_keypoints files
    (some tools write keypoints without boxes), for the refusal message. The instances and
    captions files stay as they were; the returned tree is the full one's, boxes included (as the
    instances files still state them)."""
    tree = coco2017_keypoints(root, per_split)
    for path in sorted((root / "annotations").glob("person_keypoints_*.json")):
        document = json.loads(path.read_bytes())
        for annotation in document["annotations"]:
            del annotation["bbox"]
        path.write_bytes(json.dumps(document).encode())
    return tree
