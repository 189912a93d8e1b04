"""Keypoints end to end: COCO 2017's person keypoints beside its instances and captions, a CVAT
export whose animal classes have point sets of their own, and Ultralytics pose labels, converted the
way a user points at them; every labelled point within a pixel with its visibility, moved with the
picture, and the points a crop cuts off counted, never stored where they no longer are."""

from __future__ import annotations

import json
import pathlib

import keypointgen as gen
import numpy as np
import pytest
from conftest import convert
from imagegen import exif_rotated_jpeg, jpeg, write_tree
from outputcheck import summary

from beam_tfrecord.read.examples import iter_examples

Record = dict


def records(output) -> dict[str, Record]:
    return {
        r["filename"]: r for split in summary(output)["splits"] for r in iter_examples(str(output), split)
    }


def check_points(record: Record, expected, tolerance: float = 1.0) -> None:
    """The record's objects hold the source's points, in order: labelled ones within `tolerance`
    pixels with their visibility, the others unlabelled (0, 0, 0)."""
    points = record["keypoints"]
    assert points.shape[0] == len(expected)
    for stored, (_, _, source) in zip(points, expected, strict=True):
        for index, point in enumerate(source):
            x, y, v = stored[index]
            assert int(v) == point.v, (index, stored[index], point)
            if point.v:
                assert abs(x - point.x) <= tolerance and abs(y - point.y) <= tolerance, (
                    index,
                    stored[index],
                    point,
                )
            else:
                assert (x, y) == (0.0, 0.0)
        assert (stored[len(source) :] == 0).all()  # padding to the run's most points is unlabelled


def test_coco_2017_person_keypoints_are_found_beside_the_instances_and_kept_within_a_pixel(tmp_path):
    tree = gen.coco2017_keypoints(tmp_path / "coco2017")
    out = tmp_path / "out"
    assert convert(tree.root, out, "--task", "keypoints") == 0
    found = records(out)
    assert sorted(found) == sorted(tree.objects)
    for relpath, expected in tree.objects.items():
        check_points(found[relpath], expected)
        # Crowd regions stay crowd; objects without a labelled point keep their box.
        crowd = set(tree.crowd.get(relpath, ()))
        assert found[relpath]["object_is_crowd"] == [int(i in crowd) for i in range(len(expected))]
    keypoints = summary(out)["keypoints"]
    assert keypoints["names"] == {"person": list(gen.COCO_KEYPOINTS)}
    assert keypoints["skeletons"] == {"person": [list(pair) for pair in tree.skeleton["person"]]}
    labelled = sum(1 for objects in tree.objects.values() for o in objects for p in o[2] if p.v)
    assert keypoints["labelled"] == labelled and keypoints["made_unlabelled"] == 0
    assert summary(out)["split_method"].startswith("declared")


def test_classes_with_point_sets_of_their_own_are_padded_to_the_most_points(tmp_path):
    tree = gen.coco_animal_keypoints(tmp_path / "cvat")
    out = tmp_path / "out"
    assert convert(tree.root, out, "--task", "keypoints") == 0
    assert summary(out)["keypoints"]["points_per_object"] == max(map(len, tree.keypoint_names.values()))
    assert summary(out)["keypoints"]["names"] == {k: list(v) for k, v in tree.keypoint_names.items()}
    found = records(out)
    for relpath, expected in tree.objects.items():
        points = found[relpath]["keypoints"]
        for stored, (_, _, source) in zip(points, expected, strict=True):
            for index, point in enumerate(source):
                if point.v:  # CVAT keeps an absent point's place; a converter stores it unlabelled
                    assert abs(stored[index][0] - point.x) <= 1 and abs(stored[index][1] - point.y) <= 1
                assert int(stored[index][2]) == point.v


@pytest.mark.parametrize("dims", [3, 2])
def test_ultralytics_pose_labels(tmp_path, dims):
    tree = gen.ultralytics_pose(tmp_path / "pose", dims=dims)
    out = tmp_path / "out"
    assert convert(tree.root, out, "--task", "keypoints", "--annotations", "yolo") == 0
    found = records(out)
    for relpath, expected in tree.objects.items():
        check_points(found[relpath], expected, tolerance=1.0)
    assert summary(out)["keypoints"]["points_per_object"] == 17


def _one_person(root, picture: bytes, width: int, height: int, points: list[float]) -> None:
    """A COCO keypoints file of one picture and one person."""
    document = {
        "images": [{"id": 1, "file_name": "p.jpg", "width": width, "height": height}],
        "annotations": [
            {
                "id": 1,
                "image_id": 1,
                "category_id": 1,
                "bbox": [2, 2, width - 4, height - 4],
                "area": 100,
                "iscrowd": 0,
                "keypoints": points,
                "num_keypoints": sum(1 for v in points[2::3] if v),
            }
        ],
        "categories": [
            {"id": 1, "name": "person", "keypoints": ["a", "b", "c"], "skeleton": [[1, 2], [2, 3]]}
        ],
    }
    write_tree(
        root, {"images/p.jpg": picture, "annotations/person_keypoints_x.json": json.dumps(document).encode()}
    )


def test_points_move_with_an_exif_turn_and_a_crop_that_cuts_one_off_is_counted(tmp_path):
    # exif_rotated_jpeg(6): 48 wide, 32 high as stored; upright it is 32 wide, 48 high.
    _one_person(tmp_path / "data", exif_rotated_jpeg(6), 48, 32, [10, 5, 2, 40, 20, 1, 2, 30, 2])
    out = tmp_path / "out"
    assert convert(tmp_path / "data", out, "--task", "keypoints") == 0
    (record,) = records(out).values()
    # Orientation 6 turns the picture a quarter clockwise: a stored (x, y) is upright (32 - y, x).
    expected = [(32 - 5, 10, 2), (32 - 20, 40, 1), (32 - 30, 2, 2)]
    np.testing.assert_allclose(record["keypoints"][0], expected, atol=1e-3)

    cropped = tmp_path / "cropped"
    args = ("--task", "keypoints", "--resize", "32x32", "--resize_mode", "crop")
    assert convert(tmp_path / "data", cropped, *args) == 0
    (record,) = records(cropped).values()
    # The crop keeps the middle 32 of the upright 48 rows: y 8..40. The point at upright y 2 is
    # outside it: unlabelled and counted; the others move up by 8.
    np.testing.assert_allclose(record["keypoints"][0], [(27, 2, 2), (12, 32, 1), (0, 0, 0)], atol=1e-3)
    assert summary(cropped)["keypoints"]["made_unlabelled"] == 1
    assert summary(cropped)["changes_per_reason"]["keypoints_outside"] == 1


def test_visibility_written_as_floats_and_only_1_keeps_every_labelled_point(tmp_path):
    _one_person(tmp_path / "data", jpeg(48, 32), 48, 32, [10.0, 5.0, 1.0, 40.0, 20.0, 1.0, 0.0, 0.0, 0.0])
    out = tmp_path / "out"
    assert convert(tmp_path / "data", out, "--task", "keypoints") == 0
    (record,) = records(out).values()
    np.testing.assert_allclose(record["keypoints"][0], [(10, 5, 1), (40, 20, 1), (0, 0, 0)], atol=1e-3)


def test_a_detection_run_on_a_keypoints_file_says_it_leaves_the_points_out(tmp_path):
    tree = gen.coco2017_keypoints(tmp_path / "coco2017")
    out = tmp_path / "out"
    keypoints_file = str(tree.root / "annotations" / "person_keypoints_val2017.json")
    args = ("--annotations", "coco", "--annotations_path", keypoints_file)
    assert convert(tree.root / "val2017", out, *args) == 0
    assert any("--task keypoints" in warning for warning in summary(out)["warnings"])


def test_a_keypoints_file_without_boxes_is_refused_by_detection_and_read_by_keypoints(tmp_path, capsys):
    tree = gen.coco_keypoints_only_file(tmp_path / "coco2017")
    keypoints_file = str(tree.root / "annotations" / "person_keypoints_val2017.json")
    document = json.loads(pathlib.Path(keypoints_file).read_text())
    for annotation in document["annotations"]:  # keypoints only: no box, no outline
        annotation.pop("segmentation", None)
    pathlib.Path(keypoints_file).write_text(json.dumps(document))
    args = ("--annotations", "coco", "--annotations_path", keypoints_file)
    assert convert(tree.root / "val2017", tmp_path / "out", *args) == 2
    assert "--task keypoints reads it" in capsys.readouterr().err
    out = tmp_path / "keypoints"
    assert (
        convert(tree.root / "val2017", out, "--task", "keypoints", "--annotations_path", keypoints_file) == 0
    )
    assert summary(out)["keypoints"]["labelled"] > 0


def test_load_dataset_gives_the_points_in_the_image_handed_out(tmp_path):
    from beam_tfrecord.read.tf_data import load_dataset

    _one_person(tmp_path / "data", jpeg(48, 32), 48, 32, [10, 5, 2, 40, 20, 1, 0, 0, 0])
    out = tmp_path / "out"
    assert convert(tmp_path / "data", out, "--task", "keypoints") == 0
    image, targets = next(iter(load_dataset(str(out), image_size=(64, 96), batch_size=None)))
    assert image.shape == (64, 96, 3)
    # Stretched twice as large: every labelled point twice as far from the top left.
    np.testing.assert_allclose(
        targets["keypoints"].numpy()[0], [(20, 10, 2), (80, 40, 1), (0, 0, 0)], atol=1e-3
    )


def test_the_records_hold_the_object_detection_api_keypoint_keys(tmp_path):
    import tensorflow as tf

    _one_person(tmp_path / "data", jpeg(48, 32), 48, 32, [12, 8, 2, 24, 16, 2, 0, 0, 0])
    out = tmp_path / "out"
    assert convert(tmp_path / "data", out, "--task", "keypoints") == 0
    (shard,) = pathlib.Path(out).glob("train-*.tfrecord")
    spec = {
        "image/object/keypoint/x": tf.io.VarLenFeature(tf.float32),
        "image/object/keypoint/y": tf.io.VarLenFeature(tf.float32),
        "image/object/keypoint/visibility": tf.io.VarLenFeature(tf.int64),
    }
    raw = next(iter(tf.data.TFRecordDataset(str(shard))))
    parsed = {k: tf.sparse.to_dense(v).numpy() for k, v in tf.io.parse_single_example(raw, spec).items()}
    np.testing.assert_allclose(parsed["image/object/keypoint/x"], [12 / 48, 24 / 48, 0])
    np.testing.assert_allclose(parsed["image/object/keypoint/y"], [8 / 32, 16 / 32, 0])
    assert list(parsed["image/object/keypoint/visibility"]) == [2, 2, 0]
