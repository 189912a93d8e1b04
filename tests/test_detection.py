"""Detection runs through the command, as a user meets them: COCO, Pascal VOC and YOLO trees made by
the tests (broken parts included) become records whose boxes still frame their objects after
every change made to the pictures, and every input and every annotated object is accounted for."""

from __future__ import annotations

import io
import json

import annotationgen as ag
import imagegen
import numpy as np
import pytest
import tensorflow as tf
from conftest import convert
from outputcheck import rejects, shard_files, summary
from test_geometry import colour_box, jpeg_with_orientation, picture

from beam_tfrecord.keys import RecordLayout
from beam_tfrecord.write import schema as schema_lib

OBJECTS = RecordLayout("tfds", labeled=False, groups=("objects",))


def records(output, split: str = "train", masks: bool = False) -> dict[str, dict]:
    """filename -> the record parsed with the detection layout's own spec, image decoded."""
    groups = ("objects", "object_masks") if masks else ("objects",)
    spec = schema_lib.parse_spec(RecordLayout("tfds", labeled=False, groups=groups))
    found = {}
    for raw in tf.data.TFRecordDataset(shard_files(output, split)):
        parsed = tf.io.parse_single_example(raw, spec)
        record = {key: value.numpy() for key, value in parsed.items()}
        record["pixels"] = tf.io.decode_image(parsed["image/encoded"], channels=3).numpy()
        found[record["image/filename"].decode()] = record
    return found


def boxes_of(record: dict) -> np.ndarray:
    """[N, 4] xmin, ymin, xmax, ymax in the stored image's pixels."""
    height, width = record["pixels"].shape[:2]
    keys = ("xmin", "ymin", "xmax", "ymax")
    corners = np.stack([record[f"image/object/bbox/{k}"] for k in keys], axis=1)
    return corners * np.array([width, height, width, height])


def jsonl(path) -> list[dict]:
    return [json.loads(line) for line in path.read_text().splitlines() if line]


@pytest.fixture
def coco_tree(tmp_path):
    """Six annotated pictures, a negative, a duplicate, and annotations with every problem a
    COCO file has: an unknown category, a box partly and one wholly outside, an entry for a
    missing file."""
    root = tmp_path / "coco"
    (root / "images").mkdir(parents=True)
    (root / "annotations").mkdir()
    images, annotations = [], []
    for i in range(6):
        (root / "images" / f"{i}.jpg").write_bytes(imagegen.jpeg(48, 32, seed=i))
        images.append(ag.image(i, f"{i}.jpg"))
        annotations.append(ag.box(100 + i, i, 18 if i % 2 else 17, [4, 4, 20, 10]))
    annotations += [
        ag.box(200, 2, 1, [40, 20, 20, 20]),  # person, partly outside: clipped to 40..48 x 20..32
        ag.box(201, 3, 1, [60, 40, 5, 5]),  # wholly outside
        ag.box(202, 4, 5, [1, 1, 5, 5]),  # category 5 is not among the categories
    ]
    images.append(ag.image(50, "missing.jpg"))
    annotations.append(ag.box(203, 50, 17, [1, 1, 5, 5]))
    (root / "annotations" / "instances_all.json").write_bytes(ag.instances(images, annotations))
    (root / "images" / "negative.jpg").write_bytes(imagegen.jpeg(48, 32, seed=9))
    return root


def test_a_coco_dataset_becomes_object_detection_records_and_nothing_is_lost(coco_tree, tmp_path):
    out = tmp_path / "out"
    assert convert(coco_tree, out, "--annotations", "coco") == 0
    result = summary(out)
    assert result["consistent"] and result["records"] == 7  # six annotated pictures and the negative
    objects = result["objects"]
    assert (objects["annotated"], objects["stored"]) == (10, 7)
    assert objects["dropped_per_reason"] == {"no_image": 1, "outside_image": 1, "unknown_category": 1}
    assert objects["consistent"] and objects["negatives"] == 1
    assert objects["per_class"]["cat"] == {"objects": 3, "images": 3}
    # Class ids from 1, as label_map.pbtxt says; labels.txt in id order.
    assert (out / "labels.txt").read_text().split() == ["person", "cat", "dog"]
    assert 'id: 1\n  name: "person"' in (out / "label_map.pbtxt").read_text()
    found = records(out)
    assert list(found["images/1.jpg"]["image/object/class/label"]) == [3]  # dog
    assert found["images/1.jpg"]["image/object/class/text"].tolist() == [b"dog"]
    assert found["images/1.jpg"]["image/source_id"] == b"1"
    np.testing.assert_allclose(boxes_of(found["images/0.jpg"]), [[4, 4, 24, 14]], atol=1e-4)
    clipped = boxes_of(found["images/2.jpg"])
    np.testing.assert_allclose(clipped[1], [40, 20, 48, 32], atol=1e-4)
    assert len(found["images/negative.jpg"]["image/object/bbox/xmin"]) == 0
    # Every problem is named: where the annotation file went, each dropped object, the entry
    # without an image, the clipped box.
    assert {(r["path"], r["reason"]) for r in rejects(out)} == {("annotations/instances_all.json", "skipped")}
    dropped = {(d["path"], d["reason"]) for d in jsonl(out / "dropped_objects.jsonl")}
    assert dropped == {("images/3.jpg", "outside_image"), ("images/4.jpg", "unknown_category")}
    (unmatched,) = jsonl(out / "annotations_without_image.jsonl")
    assert (unmatched["name"], unmatched["reason"], unmatched["objects"]) == (
        "missing.jpg",
        "missing_image",
        1,
    )
    changes = {c["path"]: c["reasons"] for c in jsonl(out / "changes.jsonl")}
    assert "boxes_clipped" in changes["images/2.jpg"] and "objects_dropped" in changes["images/3.jpg"]


def test_a_broken_instances_file_rejects_its_images_and_the_run_goes_on(coco_tree, tmp_path):
    path = coco_tree / "annotations" / "instances_all.json"
    path.write_bytes(path.read_bytes()[:-40])  # cut short
    out = tmp_path / "out"
    assert convert(coco_tree, out, "--annotations", "coco", "--unannotated", "keep") == 1  # no record
    reasons = {r["path"]: r["reason"] for r in rejects(out)}
    assert reasons["images/0.jpg"] == "bad_annotation" and reasons["images/negative.jpg"] == "bad_annotation"
    detail = next(r["detail"] for r in rejects(out) if r["path"] == "images/0.jpg")
    assert "instances_all.json" in detail and "line" in detail
    assert summary(out)["consistent"]


def test_unannotated_images_can_be_dropped_with_a_reason(coco_tree, tmp_path):
    out = tmp_path / "out"
    assert convert(coco_tree, out, "--annotations", "coco", "--unannotated", "drop") == 0
    assert ("images/negative.jpg", "unannotated") in {(r["path"], r["reason"]) for r in rejects(out)}
    assert summary(out)["objects"]["negatives"] == 0


def test_per_split_coco_files_keep_their_images_in_their_split(coco_tree, tmp_path):
    annotations = coco_tree / "annotations"
    data = json.loads((annotations / "instances_all.json").read_text())
    for split, ids in (("train", {0, 1, 2}), ("validation", {3, 4, 5})):
        part = dict(data)
        part["images"] = [i for i in data["images"] if i["id"] in ids]
        part["annotations"] = [a for a in data["annotations"] if a["image_id"] in ids]
        (annotations / f"{split}.json").write_text(json.dumps(part))
    (annotations / "instances_all.json").unlink()
    spec = f"train={annotations / 'train.json'},validation={annotations / 'validation.json'}"
    out = tmp_path / "out"
    # --splits left out: the files' splits are the run's.
    assert convert(coco_tree, out, "--annotations", "coco", "--annotations_path", spec) == 0
    assert set(records(out, "train")) >= {"images/0.jpg", "images/1.jpg", "images/2.jpg"}
    assert set(records(out, "validation")) >= {"images/3.jpg", "images/4.jpg", "images/5.jpg"}


def test_the_simple_schema_refuses_annotations_with_the_reason(coco_tree, tmp_path, capsys):
    assert convert(coco_tree, tmp_path / "out", "--annotations", "coco", "--schema", "simple") == 2
    assert "--schema simple holds one label per image" in capsys.readouterr().err


def test_a_pascal_voc_tree_keeps_difficult_truncated_and_pose(tmp_path):
    root = tmp_path / "VOC2012"
    (root / "JPEGImages").mkdir(parents=True)
    (root / "Annotations").mkdir()
    for i in range(3):
        (root / "JPEGImages" / f"{i}.jpg").write_bytes(imagegen.jpeg(48, 32, seed=i))
        objects = [
            ("cat", (5, 5, 20, 20), "<pose>Left</pose><truncated>1</truncated><difficult>1</difficult>")
        ]
        (root / "Annotations" / f"{i}.xml").write_bytes(ag.voc_xml(f"{i}.jpg", objects))
    bomb = '<?xml version="1.0"?><!DOCTYPE a [<!ENTITY b "bbbb">]><annotation>&b;</annotation>'
    (root / "Annotations" / "2.xml").write_text(bomb)
    out = tmp_path / "out"
    assert convert(root, out, "--annotations", "voc") == 0
    found = records(out)
    record = found["JPEGImages/0.jpg"]
    assert list(record["image/object/difficult"]) == [1] and list(record["image/object/truncated"]) == [1]
    assert record["image/object/view"].tolist() == [b"Left"]
    assert ("JPEGImages/2.jpg", "unsafe_annotation") in {(r["path"], r["reason"]) for r in rejects(out)}
    assert summary(out)["objects"]["consistent"]


def test_a_yolo_tree_with_segmentation_stores_its_masks(tmp_path):
    root = tmp_path / "yolo"
    for part in ("images/train", "labels/train"):
        (root / part).mkdir(parents=True)
    (root / "data.yaml").write_text("names:\n  0: cat\n  1: dog\n")
    (root / "images/train/a.png").write_bytes(imagegen.png(40, 40, seed=1))
    # A dog's triangle, as YOLO writes segmentation: class, then x y pairs, normalized.
    (root / "labels/train/a.txt").write_text(
        "1 0.1 0.1 0.9 0.1 0.1 0.9\n" + ag.yolo_box(0, 0.5, 0.5, 0.75, 1.0)
    )
    (root / "images/train/b.png").write_bytes(imagegen.png(40, 40, seed=2))
    (root / "labels/train/b.txt").write_text("0 not numbers\n")
    out = tmp_path / "out"
    assert convert(root, out, "--annotations", "yolo", "--masks") == 0
    record = records(out, masks=True)["images/train/a.png"]
    assert record["image/object/class/text"].tolist() == [b"dog", b"cat"]
    triangle = tf.io.decode_png(record["image/object/mask"][0], channels=1).numpy()[..., 0]
    assert triangle.shape == (40, 40) and set(np.unique(triangle)) == {0, 1}
    assert triangle[6, 6] == 1 and triangle[34, 34] == 0  # inside the triangle, past its diagonal
    reasons = {r["path"]: (r["reason"], r["detail"]) for r in rejects(out)}
    assert (
        reasons["images/train/b.png"][0] == "bad_annotation" and "b.txt" in reasons["images/train/b.png"][1]
    )


# Every change made to a picture, through the whole pipeline: EXIF orientations (the source drew
# on the stored pixels), each resize mode, a multi-frame file, and both at once.
GEOMETRY_CASES = {
    "exif_6": ((), 6),
    "exif_3": ((), 3),
    "exif_8_pad": (("--resize", "64x40", "--resize_mode", "pad"), 8),
    "stretch": (("--resize", "60x60"), 1),
    "crop": (("--resize", "50x50", "--resize_mode", "crop"), 1),
    "pad": (("--resize", "60x40", "--resize_mode", "pad"), 1),
}


@pytest.mark.parametrize("case", sorted(GEOMETRY_CASES))
def test_a_stored_box_frames_its_object_after_every_change_to_the_picture(case, tmp_path):
    options, orientation = GEOMETRY_CASES[case]
    box = (30, 12, 70, 40)
    root = tmp_path / "in"
    (root / "images").mkdir(parents=True)
    data = jpeg_with_orientation(picture((100, 60), box), orientation)
    (root / "images" / "a.jpg").write_bytes(data)
    frames = [picture((100, 60), box, seed=k) for k in range(3)]
    gif = io.BytesIO()
    frames[0].save(gif, format="GIF", save_all=True, append_images=frames[1:])
    (root / "images" / "b.gif").write_bytes(gif.getvalue())
    coco = [ag.image(1, "a.jpg", 100, 60), ag.image(2, "b.gif", 100, 60)]
    boxes = [ag.box(1, 1, 17, [30, 12, 40, 28]), ag.box(2, 2, 17, [30, 12, 40, 28])]
    (root / "instances_default.json").write_bytes(ag.instances(coco, boxes))
    out = tmp_path / "out"
    assert convert(root, out, "--annotations", "coco", *options) == 0
    for name, record in records(out).items():
        stored = boxes_of(record)[0]
        found = colour_box(record["pixels"])
        assert np.abs(stored - np.array(found)).max() <= 1.5, (case, name, stored, found)
