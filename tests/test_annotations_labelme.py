"""LabelMe JSON files converted as a user points at them: boxes within a pixel of what
labelme2coco.py makes of the same files, masks equal to pycocotools' fill of the same outlines,
class masks drawn in file order as labelme2voc.py draws them, shapes joined by group_id, lines
dropped with a reason, found from the dataset's root and from its images folder, and a LabelMe
folder converted with no options never taken for class folders."""

from __future__ import annotations

import json

import labelmegen as gen
import numpy as np
import pytest
import tensorflow as tf
from conftest import convert
from imagegen import jpeg, write_tree
from outputcheck import rejects, summary
from test_detection import boxes_of, records

from beam_tfrecord.read.examples import iter_examples

AREA_SHAPES = ("polygon", "rectangle", "circle", "mask")


def jsonl(path) -> list[dict]:
    return [json.loads(line) for line in path.read_text().splitlines() if line]


def labelme2coco_instances(shapes: list[dict], height: int, width: int) -> list[tuple[str, list[float]]]:
    """labelme2coco.py's instances of a file, in its order: (label, bbox x, y, w, h), shapes of one
    label and group_id joined; the lines (which it draws 10 px wide) left out, as we leave them."""
    masks: dict[tuple, list[np.ndarray]] = {}
    for number, item in enumerate(shapes):
        if item["shape_type"] not in AREA_SHAPES:
            continue
        if item["shape_type"] == "mask":
            mask = np.zeros((height, width), dtype=bool)
            (x1, y1), (x2, y2) = np.asarray(item["points"]).astype(int)
            mask[y1 : y2 + 1, x1 : x2 + 1] = _region(item)
        else:
            mask = gen.shape_to_mask(height, width, item)
        group = item["group_id"] if item["group_id"] is not None else f"alone {number}"
        masks.setdefault((item["label"], group), []).append(mask)
    return [(label, gen.coco_bbox(found)) for (label, _), found in masks.items()]


def _region(item: dict) -> np.ndarray:
    import base64
    import io

    from PIL import Image

    return np.asarray(Image.open(io.BytesIO(base64.b64decode(item["mask"])))).astype(bool)


def test_boxes_are_within_a_pixel_of_labelme2coco_and_group_id_makes_one_object(tmp_path):
    tree = gen.flat(tmp_path / "data")
    out = tmp_path / "out"
    assert convert(tree.root, out, "--annotations", "labelme") == 0
    found = records(out)
    assert set(found) == set(tree.shapes)
    for filename, shapes in tree.shapes.items():
        expected = labelme2coco_instances(shapes, tree.height, tree.width)
        record = found[filename]
        assert [name.decode() for name in record["image/object/class/text"]] == [n for n, _ in expected]
        stored = boxes_of(record)
        for (_, (x, y, w, h)), box in zip(expected, stored, strict=True):
            np.testing.assert_allclose(box, [x, y, x + w, y + h], atol=1.0)
    # b's dog is two polygons of group 1: one object, boxed by both.
    assert [n.decode() for n in found["b.png"]["image/object/class/text"]] == ["dog", "cat"]
    assert (out / "labels.txt").read_text().split() == ["ball", "cat", "dog"]  # the labels, sorted


def test_masks_equal_pycocotools_fill_of_the_same_outlines(tmp_path):
    tree = gen.flat(tmp_path / "data")
    out = tmp_path / "out"
    assert convert(tree.root, out, "--annotations", "labelme", "--masks") == 0
    found = records(out, masks=True)

    def stored(filename: str) -> list[np.ndarray]:
        return [
            tf.io.decode_png(png, channels=1).numpy()[..., 0].astype(bool)
            for png in found[filename]["image/object/mask"]
        ]

    H, W = tree.height, tree.width
    _, polygon, circle = tree.shapes["a.jpg"][:3]
    cat, dog, ball = stored("a.jpg")
    np.testing.assert_array_equal(dog, gen.coco_raster([gen.coco_polygon(polygon)], H, W))
    np.testing.assert_array_equal(ball, gen.coco_raster([gen.coco_polygon(circle)], H, W))
    # A lone rectangle is a box: its filled box stands for its mask (masks_from_boxes).
    assert cat.sum() > 0 and not cat[:5].any()
    part1, part2, mask = tree.shapes["b.png"]
    dog, cat = stored("b.png")
    joined = gen.coco_raster([gen.coco_polygon(part1), gen.coco_polygon(part2)], H, W)
    np.testing.assert_array_equal(dog, joined)
    expected = np.zeros((H, W), dtype=bool)
    region = _region(mask)
    expected[3 : 3 + region.shape[0], 40 : 40 + region.shape[1]] = region
    np.testing.assert_array_equal(cat, expected)


def test_lines_are_dropped_with_a_reason_and_every_shape_is_counted(tmp_path):
    tree = gen.flat(tmp_path / "data")
    out = tmp_path / "out"
    assert convert(tree.root, out, "--annotations", "labelme") == 0
    dropped = jsonl(out / "dropped_objects.jsonl")
    found = sorted((d["detail"].split(":")[0], d["reason"]) for d in dropped if d["path"] == "a.jpg")
    assert found == [
        ("a.json#shape 4", "not_drawn"),  # a line
        ("a.json#shape 5", "not_drawn"),  # a linestrip
        ("a.json#shape 6", "other_shape"),  # a point, in a detection run
    ]
    assert len(dropped) == 3
    assert summary(out)["inputs"] == 3 and all(r["reason"] == "skipped" for r in rejects(out))


def test_found_from_the_root_and_from_the_images_folder_with_windows_image_paths(tmp_path):
    tree = gen.sibling(tmp_path / "data", windows=True)
    boxes = {}
    for name, where in (("root", tree.root), ("images", tree.root / "images")):
        out = tmp_path / name
        assert convert(where, out, "--annotations", "labelme") == 0
        found = records(out)
        boxes[name] = {k.split("/")[-1]: boxes_of(r).round(3).tolist() for k, r in found.items()}
        skipped = [r["path"] for r in rejects(out) if r["reason"] != "skipped"]
        assert skipped == []
    assert boxes["root"] == boxes["images"] and len(boxes["root"]) == 3
    assert boxes["root"]["a.jpg"][0] == pytest.approx([10.2, 5.7, 40.5, 30.2], abs=0.01)


def test_a_labelme_folder_with_no_options_is_never_taken_for_class_folders(tmp_path, capsys):
    tree = gen.flat(tmp_path / "data")
    out = tmp_path / "out"
    assert convert(tree.root, out) == 2
    errors = [line for line in capsys.readouterr().err.splitlines() if line.startswith("error")]
    assert len(errors) == 1 and "--annotations labelme" in errors[0]
    assert not (out / "summary.json").exists()
    # Given the task alone, the layout search finds the JSON files.
    assert convert(tree.root, tmp_path / "detection", "--task", "detection") == 0
    assert summary(tmp_path / "detection")["records"] == 3


def test_segmentation_draws_in_file_order_as_labelme2voc_with_its_labels_file(tmp_path):
    """labels.txt gives the ids (`__ignore__` first, `_background_` 0); later shapes cover earlier
    ones; `__ignore__` is drawn 255; rectangles and circles are filled too."""
    W, H = 64, 48
    shapes = [
        gen.shape("road", [(0, 30), (63.5, 30), (63.5, 47.5), (0, 47.5)]),
        gen.shape("car", [(10, 20), (40, 40)], "rectangle"),
        gen.shape("__ignore__", [(30, 35), (45, 35), (45, 44)]),
        gen.shape("sign", [(50, 10), (50, 17)], "circle"),
        gen.shape("lane", [(0, 46), (63, 46)], "line"),
    ]
    write_tree(
        tmp_path / "data",
        {
            "labels.txt": b"__ignore__\n_background_\ncar\nroad\nsign\n",
            "shots/x.jpg": jpeg(W, H, seed=3),
            "shots/x.json": gen.label_file(shapes, "x.jpg", W, H),
        },
    )
    out = tmp_path / "out"
    assert convert(tmp_path / "data", out, "--annotations", "labelme", "--task", "segmentation") == 0
    assert (out / "labels.txt").read_text().split() == ["_background_", "car", "road", "sign"]
    expected = np.zeros((H, W), dtype=np.uint8)
    for item, value in zip(shapes[:4], (2, 1, 255, 3), strict=True):
        expected[gen.coco_raster([gen.coco_polygon(item)], H, W)] = value
    (record,) = list(iter_examples(str(out)))
    np.testing.assert_array_equal(record["mask"], expected)
    dropped = jsonl(out / "dropped_objects.jsonl")
    assert [(d["reason"], d["detail"].split(":")[0]) for d in dropped] == [
        ("not_drawn", "shots/x.json#shape 5")
    ]

    from official.vision.dataloaders import segmentation_input

    decoder = segmentation_input.Decoder()
    (shard,) = out.glob("train-*.tfrecord")
    (raw,) = list(tf.data.TFRecordDataset(str(shard)))
    parsed = decoder.decode(raw)
    mask = tf.io.decode_png(parsed["image/segmentation/class/encoded"], channels=1).numpy()[..., 0]
    np.testing.assert_array_equal(mask, expected)


def test_a_json_whose_picture_is_missing_is_unmatched_and_its_embedded_copy_is_not_used(tmp_path):
    tree = gen.flat(tmp_path / "data", embed=("a", "b"))
    (tree.root / "b.png").unlink()
    out = tmp_path / "out"
    assert convert(tree.root, out, "--annotations", "labelme", "--allow_unmatched_annotations") == 0
    (entry,) = jsonl(out / "annotations_without_image.jsonl")
    assert (entry["annotation"], entry["name"], entry["reason"]) == ("b.json", "b.png", "missing_image")
    assert "embedded imageData is not used" in entry["detail"] and entry["objects"] == 3
    assert summary(out)["records"] == 2


def test_a_declared_size_that_is_not_the_picture_s_rejects_it(tmp_path):
    write_tree(
        tmp_path / "data",
        {
            "a.jpg": jpeg(64, 48, seed=1),
            "a.json": gen.label_file([gen.shape("cat", [(1, 1), (9, 9)], "rectangle")], "a.jpg", 48, 64),
            "b.jpg": jpeg(64, 48, seed=2),
            "b.json": gen.label_file([gen.shape("cat", [(1, 1), (9, 9)], "rectangle")], "b.jpg", 64, 48),
        },
    )
    out = tmp_path / "out"
    convert(tmp_path / "data", out, "--annotations", "labelme")
    found = [(r["path"], r["reason"]) for r in rejects(out) if r["reason"] != "skipped"]
    assert found == [("a.jpg", "annotation_size_mismatch")]


def test_points_are_keypoints_of_the_object_of_their_group(tmp_path):
    W, H = 64, 48
    shapes = [
        gen.shape("person", [(10, 5), (30, 45)], "rectangle", group_id=1),
        gen.shape("nose", [(20, 10)], "point", group_id=1),
        gen.shape("tail", [(25, 40)], "point", group_id=1),
        gen.shape("person", [(40, 5), (60, 45)], "rectangle", group_id=2),
        gen.shape("nose", [(50, 9)], "point", group_id=2),
        gen.shape("nose", [(5, 5)], "point"),  # no group: joins nothing
    ]
    write_tree(tmp_path / "data", {"a.jpg": jpeg(W, H), "a.json": gen.label_file(shapes, "a.jpg", W, H)})
    out = tmp_path / "out"
    assert convert(tmp_path / "data", out, "--annotations", "labelme", "--task", "keypoints") == 0
    assert summary(out)["keypoints"]["names"] == {"person": ["nose", "tail"]}
    (record,) = list(iter_examples(str(out)))
    points = np.asarray(record["keypoints"]).reshape(2, 2, 3)
    np.testing.assert_allclose(points[0], [[20, 10, 2], [25, 40, 2]], atol=1e-4)  # in pixels
    np.testing.assert_allclose(points[1], [[50, 9, 2], [0, 0, 0]], atol=1e-4)
    (dropped,) = jsonl(out / "dropped_objects.jsonl")
    assert dropped["reason"] == "unattached_point" and "a.json#shape 6" in dropped["detail"]


def test_labels_txt_beside_the_annotations_folder_orders_the_classes_from_the_images_folder(tmp_path):
    tree = gen.sibling(tmp_path / "data", windows=False)
    (tree.root / "labels.txt").write_text("__ignore__\n_background_\ndog\ncat\n")
    out = tmp_path / "out"
    where = tree.root / "images"
    assert convert(where, out, "--annotations", "labelme", "--task", "segmentation") == 0
    assert (out / "labels.txt").read_text().split() == ["_background_", "dog", "cat"]
    dropped = jsonl(out / "dropped_objects.jsonl")
    # The ball is in no class of labels.txt (labelme2voc would fail on it; labelme2coco skips it).
    assert ("a.jpg", "unknown_category") in {(d["path"], d["reason"]) for d in dropped}
    masks = {r["filename"]: r["mask"] for r in iter_examples(str(out))}
    polygon = tree.shapes["a.jpg"][1]
    np.testing.assert_array_equal(
        masks["a.jpg"] == 1, gen.coco_raster([gen.coco_polygon(polygon)], tree.height, tree.width)
    )


def test_a_json_that_does_not_parse_rejects_its_picture_and_another_tool_s_json_is_skipped(tmp_path):
    write_tree(
        tmp_path / "data",
        {
            "a.jpg": jpeg(64, 48, seed=1),
            "a.json": b'{"version": "5.5.0", "shapes": [',
            "b.jpg": jpeg(64, 48, seed=2),
            "b.json": gen.label_file([gen.shape("cat", [(1, 1), (9, 9)], "rectangle")], "b.jpg", 64, 48),
            "meta.json": b'{"author": "someone"}',
        },
    )
    out = tmp_path / "out"
    assert convert(tmp_path / "data", out, "--annotations", "labelme") == 0
    found = {r["path"]: (r["reason"], r["detail"]) for r in rejects(out)}
    assert found["a.jpg"][0] == "bad_annotation" and "a.json is not valid JSON" in found["a.jpg"][1]
    assert found["meta.json"][0] == "skipped" and "without LabelMe's 'shapes'" in found["meta.json"][1]
    assert summary(out)["records"] == 1
