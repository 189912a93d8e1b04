"""CVAT for images 1.1 exports (tests/cvatgen.py writes them as CVAT's server does) converted the way
a user points at them: boxes within a pixel of CVAT's own COCO export of the same shapes, masks
equal to pycocotools' raster of the same polygons and run lengths, class masks drawn in z_order,
skeletons as keypoints, a project's subsets as splits, and a tree that holds an export never taken
for class folders."""

from __future__ import annotations

import json

import cvatgen as g
import numpy as np
import pytest
import tensorflow as tf
from annotationgen import load_annotations
from conftest import convert
from outputcheck import rejects, shard_files, summary
from pycocotools import mask as coco_mask

from beam_tfrecord.keys import RecordLayout
from beam_tfrecord.plan.listing import list_inputs
from beam_tfrecord.plan.sources import cvat, registry
from beam_tfrecord.plan.sources.base import LoadRequest
from beam_tfrecord.read.examples import iter_examples
from beam_tfrecord.write import schema as schema_lib

W, H = 64, 48
LABELS = [
    g.Label("car"),
    g.Label("person", type="skeleton", svg=g.skeleton_svg(["nose", "tail", "paw"], [(0, 1), (1, 2)])),
    g.Label("nose", type="points", parent="person"),
    g.Label("tail", type="points", parent="person"),
    g.Label("paw", type="points", parent="person"),
    g.Label("road"),
    g.Label("never_used"),
]
TRIANGLE = [30.25, 5.5, 50.75, 5.5, 40.5, 25.25]
ELLIPSE = (20.4, 24.6, 9.2, 5.3, 30.0)  # cx, cy, rx, ry, rotation


def brush() -> np.ndarray:
    """A brush mask with a hole, picture-sized."""
    full = g.disk(W, H, 48, 36, 7)
    full[36, 48] = 0
    return full


def shapes_export(root) -> dict:
    """A task export of two pictures (one in a subfolder): every kind of shape CVAT draws."""
    entries = [
        g.Entry(
            "a.jpg",
            W,
            H,
            [
                g.box("car", 2.5, 3.25, 20.75, 30.5, z_order=1, occluded=True),
                g.polygon("road", TRIANGLE),
                g.ellipse("car", *ELLIPSE[:4], rotation=ELLIPSE[4]),
                g.mask("road", brush()),
                g.polyline("road", [1, 40, 30, 45]),
                g.points("person", [5, 5]),
                g.cuboid("car", 3, 3, 8),
            ],
            tags=["daytime"],
        ),
        g.Entry("sub/b.png", W, H, [g.box("car", 10, 10, 30, 20, rotation=90)]),
    ]
    return g.write_export(root, entries, LABELS)


def detection_records(output, split: str = "train") -> dict[str, dict]:
    spec = schema_lib.parse_spec(RecordLayout("tfds", labeled=False, groups=("objects", "object_masks")))
    found = {}
    for raw in tf.data.TFRecordDataset(shard_files(output, split)):
        record = {k: v.numpy() for k, v in tf.io.parse_single_example(raw, spec).items()}
        found[record["image/filename"].decode()] = record
    return found


def stored(record: dict, index: int) -> tuple[np.ndarray, np.ndarray]:
    """An object's box in pixels and its mask."""
    box = np.array([record[f"image/object/bbox/{k}"][index] for k in ("xmin", "ymin", "xmax", "ymax")])
    mask = tf.io.decode_png(record["image/object/mask"][index], channels=1).numpy()[..., 0]
    return box * np.array([W, H, W, H]), mask


def coco_bbox(mask: np.ndarray) -> np.ndarray:
    """The box CVAT's COCO export gives a mask-shaped annotation (datumaro's bbox of its pixels),
    as corners."""
    x, y, w, h = coco_mask.toBbox(coco_mask.encode(np.asfortranarray(mask.astype(np.uint8))))
    return np.array([x, y, x + w, y + h])


def boundary(mask: np.ndarray) -> np.ndarray:
    """The pixels next to (or on) the mask's edge: those with a 4-neighbour of the other value."""
    padded = np.pad(mask, 1, mode="edge")
    near = [padded[1:-1, :-2], padded[1:-1, 2:], padded[:-2, 1:-1], padded[2:, 1:-1]]
    return np.logical_or.reduce([side != mask for side in near])


def polygon_raster(points) -> np.ndarray:
    return coco_mask.decode(coco_mask.merge(coco_mask.frPyObjects([list(points)], H, W)))


def test_detection_keeps_every_outline_as_cvat_s_coco_export_does(tmp_path):
    where = shapes_export(tmp_path / "task")
    out = tmp_path / "out"
    assert convert(tmp_path / "task", out, "--task", "detection", "--masks", "--splits", "train=1") == 0
    records = detection_records(out)
    record = records[where["a.jpg"]]
    # Drawn in z_order: the polygon, ellipse and mask (z 0, file order), then the box (z 1).
    assert record["image/object/class/text"].tolist() == [b"road", b"car", b"road", b"car"]
    assert (out / "labels.txt").read_text().split() == ["car", "person", "road", "never_used"]

    triangle_box, triangle = stored(record, 0)
    np.testing.assert_array_equal(triangle, polygon_raster(TRIANGLE))
    np.testing.assert_allclose(triangle_box, [30.25, 5.5, 50.75, 25.25], atol=1e-3)

    ellipse_box, ellipse = stored(record, 1)
    cvat_ellipse = g.ellipse_raster(W, H, *ELLIPSE)
    assert np.abs(ellipse_box - coco_bbox(cvat_ellipse)).max() <= 1.0
    differ = ellipse != cvat_ellipse
    assert differ.sum() < cvat_ellipse.sum() / 10 and not (differ & ~boundary(cvat_ellipse)).any()

    brush_box, brushed = stored(record, 2)
    np.testing.assert_array_equal(brushed, brush())
    np.testing.assert_allclose(brush_box, coco_bbox(brush()), atol=1e-3)

    car_box, _ = stored(record, 3)
    np.testing.assert_allclose(car_box, [2.5, 3.25, 20.75, 30.5], atol=1e-3)

    turned_box, turned = stored(records[where["sub/b.png"]], 0)
    np.testing.assert_allclose(turned_box, [15, 5, 25, 25], atol=1e-3)  # a box turned 90 degrees
    np.testing.assert_array_equal(turned, polygon_raster([25, 5, 25, 25, 15, 25, 15, 5]))

    dropped = [json.loads(line) for line in (out / "dropped_objects.jsonl").read_text().splitlines()]
    assert sorted((d["reason"], d["detail"].split(":")[0].split(", ")[1]) for d in dropped) == [
        ("not_drawn", "polyline 4 (z_order 0)"),
        ("other_shape", "cuboid 6 (z_order 0)"),
        ("other_shape", "points 5 (z_order 0)"),
    ]
    assert any("1 tags (image-level classes)" in w for w in summary(out)["warnings"])


def test_found_from_the_images_folder_and_without_masks(tmp_path):
    where = shapes_export(tmp_path / "task")
    out = tmp_path / "out"
    assert convert(tmp_path / "task" / "images", out, "--annotations", "cvat", "--splits", "train=1") == 0
    records = detection_records(out)
    assert set(records) == {name for name in where}  # relpaths under images/
    assert records["a.jpg"]["image/object/class/text"].tolist() == [b"road", b"car", b"road", b"car"]


def test_segmentation_draws_outlines_in_z_order_and_leaves_boxes_out(tmp_path):
    from official.vision.dataloaders import segmentation_input

    below = g.polygon("road", [0, 0, 40, 0, 40, 40, 0, 40], z_order=0)
    above = g.polygon("car", [20, 20, 60, 20, 60, 44, 20, 44], z_order=2)
    entries = [
        # Written top first: z_order, not the file's order, says what lies on top.
        g.Entry("a.jpg", W, H, [above, below, g.box("car", 1, 1, 5, 5), g.mask("road", brush())]),
    ]
    entries[0].shapes[3].attrs["z_order"] = "3"
    g.write_export(tmp_path / "task", entries, LABELS)
    xml = (tmp_path / "task" / "annotations.xml").read_bytes()
    (tmp_path / "task" / "annotations.xml").write_bytes(xml)
    out = tmp_path / "out"
    assert convert(tmp_path / "task", out, "--task", "segmentation", "--splits", "train=1") == 0
    names = (out / "labels.txt").read_text().split()
    assert names == ["background", "car", "person", "road", "never_used"]
    expected = np.zeros((H, W), np.uint8)
    expected[polygon_raster([0, 0, 40, 0, 40, 40, 0, 40]) == 1] = names.index("road")
    expected[polygon_raster([20, 20, 60, 20, 60, 44, 20, 44]) == 1] = names.index("car")
    expected[brush() == 1] = names.index("road")
    decoder = segmentation_input.Decoder()
    (shard,) = out.glob("train-*.tfrecord")
    (raw,) = list(tf.data.TFRecordDataset(str(shard)))
    parsed = decoder.decode(raw)
    mask = tf.io.decode_png(parsed["image/segmentation/class/encoded"], channels=1).numpy()[..., 0]
    np.testing.assert_array_equal(mask, expected)
    found = registry.named("cvat").load(LoadRequest("segmentation", list_inputs(str(tmp_path / "task"))))
    assert [(n.reason, n.detail.split(", ")[1].split(" ")[0]) for n in found.dropped] == [
        ("not_drawn", "box")
    ]


def test_skeletons_become_keypoints_with_their_sublabels(tmp_path):
    person = g.skeleton(
        "person",
        [g.point("tail", 30, 20, occluded=True), g.point("nose", 10, 12), g.point("paw", 0, 0, outside=True)],
        group=1,
    )
    entries = [
        g.Entry("a.jpg", W, H, [g.box("person", 5, 5, 40, 30, group=1), person, g.box("car", 1, 1, 9, 9)])
    ]
    g.write_export(tmp_path / "task", entries, LABELS)
    out = tmp_path / "out"
    assert convert(tmp_path / "task", out, "--task", "keypoints", "--splits", "train=1") == 0
    keypoints = summary(out)["keypoints"]
    assert keypoints["names"] == {"person": ["nose", "tail", "paw"]}
    assert keypoints["skeletons"] == {"person": [[0, 1], [1, 2]]}
    (record,) = iter_examples(str(out), "train")
    points = record["keypoints"]
    assert points.shape[:2] == (1, 3)
    np.testing.assert_allclose(points[0], [[10, 12, 2], [30, 20, 1], [0, 0, 0]], atol=1.0)
    dropped = (out / "dropped_objects.jsonl").read_text()
    assert '"other_shape"' in dropped and "box 3" in dropped  # the car's box, not the person's


def test_a_project_export_declares_its_subsets_as_splits(tmp_path):
    entries = [
        g.Entry("x.jpg", W, H, [g.box("car", 1, 1, 20, 20)], subset="Train", task_id=1),
        g.Entry("y.jpg", W, H, [g.box("car", 2, 2, 20, 20)], subset="Train", task_id=1),
        g.Entry("x.jpg", W, H, [g.box("road", 3, 3, 20, 20)], subset="Validation", task_id=2),
    ]
    g.write_export(tmp_path / "project", entries, LABELS, project=True)
    assert (tmp_path / "project" / "images" / "Validation" / "x.jpg").exists()
    out = tmp_path / "out"
    assert convert(tmp_path / "project", out, "--task", "detection") == 0
    assert summary(out)["split_method"].startswith("declared")
    found = {
        split: {r["filename"]: list(r["object_text"]) for r in iter_examples(str(out), split)}
        for split in summary(out)["splits"]
    }
    assert found == {
        "train": {"images/Train/x.jpg": ["car"], "images/Train/y.jpg": ["car"]},
        "validation": {"images/Validation/x.jpg": ["road"]},
    }
    # From one subset's folder, the export's annotations.xml two folders up.
    found = load_annotations("cvat", list_inputs(str(tmp_path / "project" / "images" / "Train")))
    assert {r: [o.class_name for o in a.objects] for r, a in found.images.items()} == {
        "x.jpg": ["car"],
        "y.jpg": ["car"],
    }
    assert found.declared is not None and set(found.declared.split_of.values()) == {"train"}


def test_a_cvat_tree_without_options_is_never_classes_from_its_folders(tmp_path, capsys):
    shapes_export(tmp_path / "task")
    out = tmp_path / "out"
    assert convert(tmp_path / "task", out) == 2
    errors = [line for line in capsys.readouterr().err.splitlines() if line.startswith("error")]
    assert len(errors) == 1 and "--annotations cvat" in errors[0] and "voc" not in errors[0]
    assert not (out / "summary.json").exists()
    # Given alone, --annotations cvat is a detection run.
    assert convert(tmp_path / "task", tmp_path / "given", "--annotations", "cvat") == 0
    assert summary(tmp_path / "given")["objects"]["stored"] == 5


def test_voc_asked_of_a_cvat_export_matches_nothing_and_names_cvat(tmp_path, capsys):
    shapes_export(tmp_path / "task")
    assert not registry.named("cvat").claims("images/a.xml", "detection")
    assert convert(tmp_path / "task", tmp_path / "out", "--annotations", "voc") == 2
    errors = [line for line in capsys.readouterr().err.splitlines() if line.startswith("error")]
    assert len(errors) == 1 and "pass --annotations cvat" in errors[0]


def test_tags_are_each_picture_s_classes(tmp_path):
    shapes_export(tmp_path / "task")
    found = cvat.image_classes(LoadRequest("classification", list_inputs(str(tmp_path / "task"))))
    assert found == {"images/a.jpg": ("daytime",)}


def test_tags_label_a_classification_run(tmp_path):
    labels = [g.Label("car"), g.Label("night"), g.Label("day")]
    entries = [
        g.Entry("a.jpg", W, H, [g.box("car", 2, 3, 20, 30)], tags=["day"]),
        g.Entry("sub/b.jpg", W, H, [], tags=["night"]),
        g.Entry("c.jpg", W, H, [g.box("car", 2, 3, 20, 30)]),  # no tag: unlabeled, never "images"
    ]
    g.write_export(tmp_path / "task", entries, labels)
    out = tmp_path / "out"
    assert convert(tmp_path / "task", out, "--task", "classification", "--annotations", "cvat") == 0
    assert (out / "labels.txt").read_text().split() == ["night", "day"]  # the meta's order, tags alone
    found = {}
    for split in summary(out)["splits"]:
        for record in iter_examples(str(out), split):
            found[record["filename"]] = (int(record["label"]), record["label_text"])
    assert found == {"images/a.jpg": (1, "day"), "images/sub/b.jpg": (0, "night")}
    unlabeled = [r["path"] for r in rejects(out) if r["reason"] == "unlabeled"]
    assert unlabeled == ["images/c.jpg"]


@pytest.mark.parametrize(
    ("xml", "says"),
    [
        (b"<annotation><filename>a.jpg</filename></annotation>", "not CVAT's <annotations>"),
        (b'<?xml version="1.0"?><!DOCTYPE a [<!ENTITY e "x">]><annotations><version>1.1</version>'
         b"<meta/></annotations>", "refused"),
        (b"<annotations><version>1.1</version><meta><task><labels>", "is not valid XML"),
    ],
)  # fmt: skip
def test_a_broken_or_unsafe_file_given_stops_the_run_naming_it(tmp_path, xml, says):
    shapes_export(tmp_path / "task")
    (tmp_path / "bad.xml").write_bytes(xml)
    with pytest.raises(ValueError, match=r"bad\.xml") as raised:
        load_annotations("cvat", list_inputs(str(tmp_path / "task")), str(tmp_path / "bad.xml"))
    assert says in str(raised.value)


def test_entries_that_name_no_picture_are_listed(tmp_path):
    shapes_export(tmp_path / "task")
    (tmp_path / "task" / "images" / "sub" / "b.png").unlink()
    out = tmp_path / "out"
    assert convert(tmp_path / "task", out, "--annotations", "cvat", "--allow_unmatched_annotations") == 0
    lines = (out / "annotations_without_image.jsonl").read_text().splitlines()
    (entry,) = [json.loads(line) for line in lines]
    assert (entry["annotation"], entry["name"], entry["reason"], entry["objects"]) == (
        "annotations.xml#image 1",
        "sub/b.png",
        "missing_image",
        1,
    )
    assert not [r for r in rejects(out) if r["reason"] not in ("skipped",)]
