"""Label Studio exports as Label Studio writes them: the full export (`JSON`: a list of tasks, each
result with its `original_width`, `original_height` and a `value` in percent) and `JSON-MIN` (made
from the full one as label-studio-converter's `convert_to_json_min` makes it: one flat record per
annotation, newest first, each control's values under its name, a single choice as a bare
string). Brushes are packed as the converter's `brush.encode_rle` packs an RGBA picture (thi-ng's
rle-pack, which Label Studio's editor writes too). The expected boxes are what the converter's own
COCO export computes (`convert_to_coco`, `rotated_rectangle`), in pixels."""

from __future__ import annotations

import copy
import json
import math
import os
import pathlib
from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np
from imagegen import jpeg, png, write_tree

# The keys a result's `value` holds its labels under, by the control's type.
_CONTROL_TYPES = {
    "rectanglelabels": "RectangleLabels",
    "polygonlabels": "PolygonLabels",
    "brushlabels": "BrushLabels",
    "keypointlabels": "KeyPointLabels",
    "choices": "Choices",
}


def encode_rle(
    values: Sequence[int], wordsize: int = 8, rle_sizes: Sequence[int] = (3, 4, 8, 16)
) -> list[int]:
    """label-studio-converter's `brush.encode_rle`: a flat array of bytes -> rle-pack's bytes (32
    bits of count, 5 of word size, 4 x 4 of run-length sizes, then runs: a bit for repeated, 2 for
    which size, the length, the value)."""
    array = np.asarray(values)
    bits = [f"{len(array):032b}", f"{wordsize - 1:05b}", "".join(f"{x - 1:04b}" for x in rle_sizes)]
    change = np.append(np.flatnonzero(array[1:] != array[:-1]), len(array) - 1)
    lengths = np.diff(np.append(-1, change))
    for length, value in zip(lengths, array[change], strict=True):
        if length == 1:
            bits.append(f"000000{value:08b}")
        elif length <= 8:
            bits.append(f"100{length - 1:03b}{value:08b}")
        elif length <= 16:
            bits.append(f"101{length - 1:04b}{value:08b}")
        elif length <= 256:
            bits.append(f"110{length - 1:08b}{value:08b}")
        else:
            left = int(length)
            while left > 2**16:
                bits.append(f"111{2**16 - 1:016b}{value:08b}")
                left -= 2**16
            bits.append(f"111{left - 1:016b}{value:08b}")
    text = "".join(bits)
    text += "0" * (8 - len(text) % 8)
    return [int(text[i : i + 8], 2) for i in range(0, len(text), 8)]


def brush_rle(mask: np.ndarray) -> list[int]:
    """A painted mask (height x width, bools) as the converter's `mask2rle` packs it: each pixel's
    four RGBA bytes 255 where painted."""
    return encode_rle(np.repeat(mask.astype(np.uint8).ravel() * 255, 4))


def _result(rid: str, kind: str, value: dict, size: tuple[int, int] | None, from_name: str) -> dict:
    result = {"value": value, "id": rid, "from_name": from_name, "to_name": "image", "type": kind}
    if size is not None:
        result = {"original_width": size[0], "original_height": size[1], "image_rotation": 0, **result}
    return {**result, "origin": "manual"}


def rectangle(rid, size, x, y, w, h, label, rotation=0.0, from_name="label") -> dict:
    value = {"x": x, "y": y, "width": w, "height": h, "rotation": rotation, "rectanglelabels": [label]}
    return _result(rid, "rectanglelabels", value, size, from_name)


def polygon(rid, size, points, label, from_name="poly") -> dict:
    value = {"points": [list(p) for p in points], "closed": True, "polygonlabels": [label]}
    return _result(rid, "polygonlabels", value, size, from_name)


def brush(rid, mask: np.ndarray, label, from_name="brush") -> dict:
    height, width = mask.shape
    value = {"format": "rle", "rle": brush_rle(mask), "brushlabels": [label]}
    return _result(rid, "brushlabels", value, (width, height), from_name)


def keypoint(rid, size, x, y, label, from_name="kp", parent=None) -> dict:
    """A KeyPointLabels point; `parent`: the region selected when it was drawn (its `parentID`)."""
    value = {"x": x, "y": y, "width": 0.5, "keypointlabels": [label]}
    found = _result(rid, "keypointlabels", value, size, from_name)
    return found if parent is None else {**found, "parentID": parent}


def choices(rid, values, from_name="choice") -> dict:
    return _result(rid, "choices", {"choices": list(values)}, None, from_name)


def annotation(aid, results, created_at="2024-03-01T10:00:00.000000Z", **flags) -> dict:
    return {
        "id": aid,
        "completed_by": 1,
        "result": results,
        "was_cancelled": flags.get("was_cancelled", False),
        "ground_truth": flags.get("ground_truth", False),
        "created_at": created_at,
        "updated_at": created_at,
        "draft_created_at": None,
        "lead_time": 12.5,
        "prediction": {},
        "result_count": 0,
        "unique_id": f"00000000-0000-0000-0000-{aid:012d}",
        "import_id": None,
        "last_action": None,
        "task": None,
        "project": 1,
        "updated_by": 1,
        "parent_prediction": None,
        "parent_annotation": None,
        "last_created_by": None,
    }


def task(tid, image, annotations, predictions=()) -> dict:
    """One task of the full export, with the keys Label Studio's export writes."""
    for one in annotations:
        one["task"] = tid
    upload = image.rsplit("/", 1)[-1] if image.startswith("/data/upload/") else None
    return {
        "id": tid,
        "annotations": list(annotations),
        "file_upload": upload,
        "drafts": [],
        "predictions": [
            {"id": 100 + tid, "model_version": "v1", "score": 0.5, "result": list(p)} for p in predictions
        ],
        "data": {"image": image},
        "meta": {},
        "created_at": "2024-01-01T09:00:00.000000Z",
        "updated_at": "2024-03-01T10:00:00.000000Z",
        "inner_id": tid,
        "total_annotations": len(annotations),
        "cancelled_annotations": sum(1 for a in annotations if a["was_cancelled"]),
        "total_predictions": len(predictions),
        "comment_count": 0,
        "unresolved_comment_count": 0,
        "last_comment_updated_at": None,
        "project": 1,
        "updated_by": 1,
        "comment_authors": [],
    }


def json_min(tasks: Sequence[dict]) -> list[dict]:
    """The converter's `convert_to_json_min` of a full export: a record per annotation that is not
    cancelled, newest first; a task without any annotation is one record of its data alone."""
    records = []
    for entry in tasks:
        annotations = entry["annotations"]
        if not annotations:
            records.append(_min_record(entry, {}, {}))
            continue
        kept = [a for a in annotations if not (a.get("skipped") or a.get("was_cancelled"))]
        for one in sorted(kept, key=lambda a: a.get("created_at", 0), reverse=True):
            outputs: dict[str, list[dict]] = {}
            for result in one["result"]:
                value = copy.deepcopy(result["value"])
                value["type"] = _CONTROL_TYPES[result["type"]]
                for key in ("original_width", "original_height"):
                    if key in result:
                        value[key] = result[key]
                outputs.setdefault(result["from_name"], []).append(value)
            records.append(_min_record(entry, outputs, one))
    return records


def _min_record(entry: dict, outputs: dict, one: dict) -> dict:
    record = copy.deepcopy(entry["data"])
    record["id"] = entry["id"]
    for name, values in outputs.items():
        record[name] = _prettify(values)
    record["annotator"] = one.get("completed_by", {}) if one else {}
    record["annotation_id"] = one.get("id")
    record["created_at"] = one.get("created_at")
    record["updated_at"] = one.get("updated_at")
    record["lead_time"] = one.get("lead_time")
    return record


def _prettify(values: list[dict]) -> object:
    """The converter's `prettify_result`."""
    out, kind = [], None
    for value in values:
        value = dict(value)
        kind = value.pop("type")
        out.append(value["choices"][0] if kind == "Choices" and len(value["choices"]) == 1 else value)
    return out[0] if kind == "Choices" and len(out) == 1 else out


def coco_bbox(result: dict) -> list[float]:
    """What the converter's `convert_to_coco` stores as a rectangle's or polygon's `bbox`."""
    value, width, height = result["value"], result["original_width"], result["original_height"]
    if "points" in value:
        xs = [x / 100 * width for x, _ in value["points"]]
        ys = [y / 100 * height for _, y in value["points"]]
        return [min(xs), min(ys), max(xs) - min(xs), max(ys) - min(ys)]
    x, y, w, h = _rotated_rectangle(value)
    return [x * width / 100, y * height / 100, w * width / 100, h * height / 100]


def _rotated_rectangle(label: dict) -> tuple[float, float, float, float]:
    """The converter's `Converter.rotated_rectangle` (in percent; exact for a square picture)."""
    x, y, w, h, r = label["x"], label["y"], label["width"], label["height"], label.get("rotation", 0.0)
    if abs(r) > 0:
        alpha = math.atan(h / w)
        beta = math.pi * (r / 180)
        radius = math.sqrt((w / 2) ** 2 + (h / 2) ** 2)
        x0 = x - radius * (math.cos(math.pi - alpha - beta) - math.cos(math.pi - alpha)) + w / 2
        y0 = y + radius * (math.sin(math.pi - alpha - beta) - math.sin(math.pi - alpha)) + h / 2
        thetas = (alpha + beta, math.pi - alpha + beta, math.pi + alpha + beta, 2 * math.pi - alpha + beta)
        xs = [x0 + radius * math.cos(t) for t in thetas]
        ys = [y0 + radius * math.sin(t) for t in thetas]
        x, y, w, h = min(xs), min(ys), max(xs) - min(xs), max(ys) - min(ys)
    return x, y, w, h


def obb_corners(result: dict) -> list[float]:
    """The converter's `convert_annotation_to_yolo_obb` corners, in pixels."""
    value, width, height = result["value"], result["original_width"], result["original_height"]
    x, y = value["x"] / 100 * width, value["y"] / 100 * height
    w, h = value["width"] / 100 * width, value["height"] / 100 * height
    cos, sin = math.cos(math.radians(value["rotation"])), math.sin(math.radians(value["rotation"]))
    corners = [
        (x, y),
        (x + w * cos, y + w * sin),
        (x + w * cos - h * sin, y + w * sin + h * cos),
        (x - h * sin, y + h * cos),
    ]
    return [c for corner in corners for c in corner]


@dataclass
class Project:
    """A generated tree: its root, the export's tasks, and the pictures' relpaths."""

    root: str
    tasks: list[dict]
    pictures: dict[str, tuple[int, int]] = field(default_factory=dict)
    export: str = ""


A_SIZE = (64, 48)
B_SIZE = (48, 48)
C_SIZE = (40, 40)


def brush_mask() -> np.ndarray:
    """A 48 x 48 brush stroke: a block and a stray dot (two pieces, as a brush paints)."""
    mask = np.zeros((48, 48), bool)
    mask[5:20, 8:30] = True
    mask[30, 40] = True
    return mask


def project(
    root,
    layout: str = "full",
    export_name: str = "project-1-at-2024-03-01-10-00-0a1b2c3d.json",
    images_dir: str = "images",
) -> Project:
    """A Label Studio project's pictures under `images_dir/` and its export at the root: uploads,
    local files, cloud URLs; boxes, a rotated box, polygons, a brush, a point, choices; several
    annotations on one task, a cancelled one and predictions; an ambiguous and a missing picture."""
    root = str(root)
    a = [
        rectangle("r1", A_SIZE, 10.0, 20.0, 30.0, 40.0, "cat"),
        polygon("p1", A_SIZE, [(50.0, 10.0), (90.0, 15.0), (70.0, 60.0)], "dog"),
        keypoint("k1", A_SIZE, 40.0, 40.0, "nose"),
        choices("c1", ["indoor"]),
    ]
    b = [
        brush("b1", brush_mask(), "cat"),
        rectangle("r2", B_SIZE, 50.0, 50.0, 30.0, 20.0, "dog", rotation=30.0),
    ]
    c_old = [rectangle("r3", C_SIZE, 5.0, 5.0, 50.0, 50.0, "cat")]
    c_new = [polygon("p2", C_SIZE, [(10.0, 10.0), (80.0, 10.0), (80.0, 70.0), (10.0, 70.0)], "dog")]
    c_cancelled = [rectangle("r4", C_SIZE, 0.0, 0.0, 90.0, 90.0, "bird")]
    tasks = [
        task(1, "/data/upload/1/1a2b3c4d-a.jpg", [annotation(1, a)]),
        task(2, f"/data/local-files/?d={images_dir}/b.jpg", [annotation(2, b)]),
        task(
            3,
            "s3://bucket/raw/c.png",
            [
                annotation(3, c_old, "2024-02-01T10:00:00.000000Z"),
                annotation(4, c_cancelled, "2024-04-01T10:00:00.000000Z", was_cancelled=True),
                annotation(5, c_new, "2024-03-01T10:00:00.000000Z"),
            ],
            predictions=[[rectangle("pr", C_SIZE, 1.0, 1.0, 20.0, 20.0, "bird")]],
        ),
        task(
            4,
            "https://example.com/img/d.jpg?X-Amz-Signature=abc",
            [annotation(6, [rectangle("r5", A_SIZE, 1.0, 1.0, 10.0, 10.0, "cat")])],
        ),
        task(5, "gs://bucket/e.jpg", [annotation(7, [rectangle("r6", A_SIZE, 1.0, 1.0, 10.0, 10.0, "cat")])]),
        task(6, "/data/upload/1/0f0f0f0f-g.jpg", []),
    ]
    pictures = {
        f"{images_dir}/a.jpg": A_SIZE,
        f"{images_dir}/b.jpg": B_SIZE,
        f"{images_dir}/c.png": C_SIZE,
        f"{images_dir}/d.jpg": A_SIZE,
        f"{images_dir}/more/d.jpg": A_SIZE,
        f"{images_dir}/g.jpg": A_SIZE,
        f"{images_dir}/h.jpg": A_SIZE,  # no task names it
    }
    files = {
        relpath: (png if relpath.endswith(".png") else jpeg)(size[0], size[1], seed=index)
        for index, (relpath, size) in enumerate(pictures.items())
    }
    document = tasks if layout == "full" else json_min(tasks)
    files[export_name] = json.dumps(document, indent=2).encode()
    write_tree(pathlib.Path(root), files)
    return Project(root, tasks, pictures, os.path.join(root, export_name))


def results_of(found: Project, tid: int, aid: int | None = None) -> list[dict]:
    """A task's results (its first annotation's, or annotation `aid`'s)."""
    entry = next(t for t in found.tasks if t["id"] == tid)
    one = entry["annotations"][0] if aid is None else next(a for a in entry["annotations"] if a["id"] == aid)
    return one["result"]


def pose_project(root, layout: str = "full") -> Project:
    """A RectangleLabels + KeyPointLabels project (two people on a.jpg, one on b.jpg): points
    drawn with their box selected (`parentID`) and points drawn inside a box without one; a point
    outside every box; a person without any point. Its export at the root, pictures in images/."""
    root = str(root)
    a = [
        rectangle("pa", A_SIZE, 5.0, 10.0, 40.0, 80.0, "person"),
        keypoint("ka1", A_SIZE, 20.0, 20.0, "nose", parent="pa"),
        keypoint("ka2", A_SIZE, 30.0, 70.0, "tail", parent="pa"),
        rectangle("pb", A_SIZE, 55.0, 10.0, 40.0, 80.0, "person"),
        keypoint("kb1", A_SIZE, 70.0, 25.0, "nose"),  # inside pb, no parentID
        keypoint("kb2", A_SIZE, 80.0, 50.0, "eye"),
        keypoint("kx", A_SIZE, 50.0, 95.0, "nose"),  # outside every box
    ]
    b = [
        rectangle("pc", B_SIZE, 10.0, 10.0, 50.0, 50.0, "person"),
        rectangle("pd", B_SIZE, 60.0, 60.0, 30.0, 30.0, "person"),
        keypoint("kc1", B_SIZE, 25.0, 40.0, "tail", parent="pc"),
    ]
    tasks = [
        task(1, "/data/upload/1/1a2b3c4d-a.jpg", [annotation(1, a)]),
        task(2, "/data/upload/1/5e6f7a8b-b.jpg", [annotation(2, b)]),
    ]
    pictures = {"images/a.jpg": A_SIZE, "images/b.jpg": B_SIZE}
    files = {relpath: jpeg(*size, seed=i) for i, (relpath, size) in enumerate(pictures.items())}
    export = "project-2-at-2024-03-01-10-00-0a1b2c3d.json"
    files[export] = json.dumps(tasks if layout == "full" else json_min(tasks), indent=2).encode()
    write_tree(pathlib.Path(root), files)
    return Project(root, tasks, pictures, os.path.join(root, export))
