"""benchmarks/least_work.py is the floor that issue 28's detection figures are read against: it
must write exactly the records `pipelines.convert` writes, or its CPU would be the cost of some
other, cheaper output."""

from __future__ import annotations

import io
import json
import os
import random
import subprocess
import sys

import pytest
from conftest import convert
from PIL import Image

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
LEAST_WORK = os.path.join(ROOT, "benchmarks", "least_work.py")


def _photo(seed: int) -> bytes:
    """A noisy JPEG of its own size, so that each file and its sha256 differ."""
    size = (96 + 8 * seed, 64 + 4 * seed)
    buffer = io.BytesIO()
    Image.effect_noise(size, 40 + seed).convert("RGB").save(buffer, "JPEG", quality=90)
    return buffer.getvalue()


def _coco_set(root: str) -> tuple[str, str]:
    """Six photos with boxes as COCO keeps them: categories listed out of name order, boxes that
    reach past the picture's edges, fractional corners, a crowd box."""
    images = os.path.join(root, "train2017")
    os.makedirs(images)
    rng = random.Random(7)
    entries, annotations = [], []
    for index in range(6):
        name = f"{index:012d}.jpg"
        data = _photo(index)
        with open(os.path.join(images, name), "wb") as handle:
            handle.write(data)
        width, height = Image.open(io.BytesIO(data)).size
        entries.append({"id": index + 1, "file_name": name, "width": width, "height": height})
        for number in range(3):
            x, y = round(rng.uniform(0, width / 2), 2), round(rng.uniform(0, height / 2), 2)
            w, h = round(rng.uniform(4, width / 2), 2), round(rng.uniform(4, height / 2), 2)
            if number == 2 and index % 2:
                w, h = width - x + 3.5, height - y + 1.25  # past both far edges: clipped
            if number == 0 and index == 3:
                x, y = -2.5, -0.25  # past the left and top edges: clipped
            annotations.append(
                {
                    "id": len(annotations) + 1,
                    "image_id": index + 1,
                    "category_id": (3, 1, 2)[number],
                    "bbox": [x, y, w, h],
                    "area": round(w * h, 2),
                    "iscrowd": int(number == 1 and index == 4),
                    "segmentation": [[x, y, x + w, y, x + w, y + h]],
                }
            )
    categories = [{"id": 3, "name": "zebra"}, {"id": 1, "name": "cat"}, {"id": 2, "name": "bus"}]
    instances = os.path.join(root, "instances_train2017.json")
    with open(instances, "w") as handle:
        json.dump({"images": entries, "annotations": annotations, "categories": categories}, handle)
    return images, instances


@pytest.fixture(scope="module")
def converted(tmp_path_factory) -> tuple[str, str, str]:
    """The COCO set and the pipeline's output of it, made once: each mode of the benchmark is
    compared with the same records. (images, instances, the output.)"""
    root = tmp_path_factory.mktemp("least_work")
    images, instances = _coco_set(str(root / "data"))
    ours = str(root / "ours")
    assert convert(images, ours, "--annotations", "coco", f"--annotations_path=train={instances}") == 0
    return images, instances, ours


@pytest.mark.parametrize("mode", [[], ["--checked"], ["--library"]], ids=["plain", "checked", "library"])
def test_least_work_writes_the_records_the_pipeline_writes(tmp_path, converted, mode: list[str]) -> None:
    images, instances, ours = converted
    least = str(tmp_path / "least")
    command = [sys.executable, LEAST_WORK, "--image_dir", images, "--instances", instances, *mode]
    done = subprocess.run(
        [*command, "--output", least, "--compare", ours], cwd=ROOT, capture_output=True, text=True
    )
    assert done.returncode == 0, done.stdout + done.stderr[-3000:]
    with open(os.path.join(ours, "summary.json")) as handle:
        summary = json.load(handle)
    digest = summary["splits"]["train"]["digest"]
    inline = ["photos through the library's own steps: 0"] if mode == ["--checked"] else []
    assert done.stdout.splitlines() == [
        f"6 records, digest {digest}",
        *inline,
        f"the same 6 records as {ours}",
    ]


def test_least_work_tells_other_records_apart(tmp_path, converted) -> None:
    """The comparison is not vacuous: the same class names under other ids give other labels and
    class texts, so other bytes."""
    images, instances, ours = converted
    with open(instances) as handle:
        coco = json.load(handle)
    for category in coco["categories"]:
        category["id"] = {3: 1, 1: 3, 2: 2}[category["id"]]  # the same names, other ids
    renumbered = str(tmp_path / "renumbered.json")
    with open(renumbered, "w") as handle:
        json.dump(coco, handle)
    command = [sys.executable, LEAST_WORK, "--image_dir", images, "--instances", renumbered]
    done = subprocess.run(
        [*command, "--output", str(tmp_path / "least"), "--compare", ours],
        cwd=ROOT,
        capture_output=True,
        text=True,
    )
    assert done.returncode != 0
    assert "records differ" in done.stderr


def test_checked_steps_place_what_placement_places_and_leave_the_rest_to_the_library(tmp_path) -> None:
    """`--checked` places boxes inline only in a picture whose geometry is unchanged, by
    placement's rules: a corner at -0.0 is stored as 0.0, a box wholly outside the picture is
    dropped. A photo turned by its EXIF orientation (6, its size left out of the COCO file, so
    its boxes are in the stored frame and turn with it) goes through the library's own steps.
    Every record is still the pipeline's."""
    images, instances = _coco_set(str(tmp_path / "data"))
    with open(instances) as handle:
        coco = json.load(handle)
    kept = _photo(9)
    with open(os.path.join(images, "000000000098.jpg"), "wb") as handle:
        handle.write(kept)
    width, height = Image.open(io.BytesIO(kept)).size
    coco["images"].append({"id": 98, "file_name": "000000000098.jpg", "width": width, "height": height})
    turned = Image.effect_noise((120, 80), 50).convert("RGB")
    exif = Image.Exif()
    exif[0x0112] = 6
    turned.save(os.path.join(images, "000000000099.jpg"), "JPEG", exif=exif.tobytes())
    coco["images"].append({"id": 99, "file_name": "000000000099.jpg"})
    for number, (image_id, bbox) in enumerate(
        [
            (98, [-0.0, -0.0, 20.0, 10.0]),  # a corner at -0.0
            (98, [width + 5.0, 3.0, 10.0, 10.0]),  # wholly outside: dropped
            (98, [4.0, 5.0, 12.0, 6.0]),
            (99, [10.0, 5.0, 30.0, 20.0]),
        ]
    ):
        area = bbox[2] * bbox[3]
        coco["annotations"].append(
            {
                "id": 900 + number,
                "image_id": image_id,
                "category_id": 1,
                "bbox": bbox,
                "area": area,
                "iscrowd": 0,
            }
        )
    with open(instances, "w") as handle:
        json.dump(coco, handle)
    ours, least = str(tmp_path / "ours"), str(tmp_path / "least")
    assert convert(images, ours, "--annotations", "coco", f"--annotations_path=train={instances}") == 0
    with open(os.path.join(ours, "changes.jsonl")) as handle:
        assert any("exif_rotation" in line for line in handle), "the photo was not turned"
    with open(os.path.join(ours, "dropped_objects.jsonl")) as handle:
        assert "outside_image" in handle.read(), "the box outside was not dropped"
    command = [sys.executable, LEAST_WORK, "--checked", "--image_dir", images, "--instances", instances]
    done = subprocess.run(
        [*command, "--output", least, "--compare", ours], cwd=ROOT, capture_output=True, text=True
    )
    assert done.returncode == 0, done.stdout + done.stderr[-3000:]
    assert done.stdout.splitlines()[1:] == [
        "photos through the library's own steps: 1",
        f"the same 8 records as {ours}",
    ]
