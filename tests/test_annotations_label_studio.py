"""Label Studio's JSON exports (full and JSON-MIN) converted as a user points at them: the same
records from either, boxes as Label Studio's own COCO export computes them, masks equal to
pycocotools' raster of the same polygons and to the brush the editor painted, pictures matched by
name the way Label Studio names them, and a tree with an export never taken for class folders."""

from __future__ import annotations

import json

import labelstudiogen as gen
import numpy as np
import pytest
from conftest import convert
from imagegen import jpeg, write_tree
from outputcheck import rejects, summary
from pycocotools import mask as coco_mask

from beam_tfrecord.plan.annotations.catalog import partition
from beam_tfrecord.plan.listing import list_inputs
from beam_tfrecord.plan.sources import label_studio
from beam_tfrecord.read.examples import iter_examples


def records(output) -> dict[str, dict]:
    return {
        r["filename"]: r for split in summary(output)["splits"] for r in iter_examples(str(output), split)
    }


def lines(output, name: str) -> list[dict]:
    with open(f"{output}/{name}", encoding="utf-8") as handle:
        return [json.loads(line) for line in handle]


def polygon_raster(points: list[float], width: int, height: int) -> np.ndarray:
    rle = coco_mask.merge(coco_mask.frPyObjects([points], height, width))
    return coco_mask.decode(rle).astype(bool)


@pytest.fixture(scope="module")
def converted(tmp_path_factory):
    """Both exports of one project, converted for detection with masks."""
    found = {}
    for layout in ("full", "min"):
        base = tmp_path_factory.mktemp(layout)
        project = gen.project(base / "data", layout)
        out = base / "out"
        assert convert(project.root, out, "--annotations", "label_studio", "--masks") == 0
        found[layout] = (project, out)
    return found


def test_full_export_and_json_min_give_the_same_records(converted):
    (_, full), (_, short) = converted["full"], converted["min"]
    first, second = records(full), records(short)
    assert (
        set(first)
        == set(second)
        == {"images/a.jpg", "images/b.jpg", "images/c.png", "images/g.jpg", "images/h.jpg"}
    )
    for name, record in first.items():
        other = second[name]
        assert record["labels"].tolist() == other["labels"].tolist()
        np.testing.assert_allclose(record["boxes"], other["boxes"])
        assert len(record["masks"]) == len(other["masks"])
        for mine, theirs in zip(record["masks"], other["masks"], strict=True):
            np.testing.assert_array_equal(mine, theirs)
    assert (full / "labels.txt").read_text() == (short / "labels.txt").read_text() == "cat\ndog\n"


def test_boxes_are_label_studio_s_coco_export_s_and_masks_pycocotools_raster(converted):
    project, out = converted["full"]
    found = records(out)
    names = (out / "labels.txt").read_text().split()
    a = found["images/a.jpg"]
    rect, poly = gen.results_of(project, 1)[:2]
    assert [names[i] for i in a["labels"]] == ["cat", "dog"]
    for box, result in zip(a["boxes"], (rect, poly), strict=True):
        x, y, w, h = gen.coco_bbox(result)
        np.testing.assert_allclose(box, [x, y, x + w, y + h], atol=1.0)
    points = [c for x, y in poly["value"]["points"] for c in (x / 100 * 64, y / 100 * 48)]
    np.testing.assert_array_equal(a["masks"][1].astype(bool), polygon_raster(points, 64, 48))
    # The brush: the painted pixels, its box their extent.
    b = found["images/b.jpg"]
    painted = gen.brush_mask()
    np.testing.assert_array_equal(b["masks"][0].astype(bool), painted)
    np.testing.assert_allclose(b["boxes"][0], [8, 5, 41, 31])
    # The rotated box: the box that holds it, as the converter's COCO export computes it; its
    # corners (the converter's YOLO OBB corners) are its mask.
    rotated = gen.results_of(project, 2)[1]
    x, y, w, h = gen.coco_bbox(rotated)
    np.testing.assert_allclose(b["boxes"][1], [x, y, x + w, y + h], atol=1.0)
    np.testing.assert_array_equal(
        b["masks"][1].astype(bool), polygon_raster(gen.obb_corners(rotated), 48, 48)
    )
    changes = {line["path"]: line["reasons"] for line in lines(out, "changes.jsonl")}
    assert "boxes_unrotated" in changes["images/b.jpg"]


def test_one_annotation_a_task_the_newest_not_cancelled_and_never_a_prediction(converted):
    _, out = converted["full"]
    c = records(out)["images/c.png"]
    names = (out / "labels.txt").read_text().split()
    assert [names[i] for i in c["labels"]] == ["dog"]  # annotation 5, not the older 3 nor cancelled 4
    np.testing.assert_allclose(c["boxes"][0], [4, 4, 32, 28], atol=1.0)
    assert any("several annotations" in w for w in summary(out)["warnings"])
    assert records(out)["images/g.jpg"]["labels"].tolist() == []  # a task not annotated


def test_every_picture_is_a_record_or_a_reject_and_every_shape_is_counted(converted):
    _, out = converted["full"]
    found = {r["path"]: r["reason"] for r in rejects(out) if r["reason"] != "skipped"}
    assert found == {"images/d.jpg": "ambiguous_annotation", "images/more/d.jpg": "ambiguous_annotation"}
    unmatched = {u["annotation"].rsplit("#", 1)[1]: u for u in lines(out, "annotations_without_image.jsonl")}
    assert unmatched["task 4"]["reason"] == "ambiguous_image"
    assert (
        "images/d.jpg" in unmatched["task 4"]["detail"]
        and "images/more/d.jpg" in unmatched["task 4"]["detail"]
    )
    assert unmatched["task 5"]["reason"] == "missing_image"
    dropped = lines(out, "dropped_objects.jsonl")
    assert [(d["path"], d["reason"]) for d in dropped] == [("images/a.jpg", "other_shape")]
    assert "#result k1" in dropped[0]["detail"]


def test_segmentation_draws_polygons_and_brushes_in_result_order_and_model_garden_reads_it(tmp_path):
    import tensorflow as tf
    from official.vision.dataloaders import segmentation_input

    project = gen.project(tmp_path / "data")
    out = tmp_path / "out"
    assert convert(project.root, out, "--annotations", "label_studio", "--task", "segmentation") == 0
    assert (out / "labels.txt").read_text().split() == ["background", "cat", "dog"]
    found = records(out)
    poly = gen.results_of(project, 1)[1]
    points = [c for x, y in poly["value"]["points"] for c in (x / 100 * 64, y / 100 * 48)]
    expected = np.where(polygon_raster(points, 64, 48), 2, 0)
    np.testing.assert_array_equal(found["images/a.jpg"]["mask"], expected)
    np.testing.assert_array_equal(found["images/b.jpg"]["mask"], np.where(gen.brush_mask(), 1, 0))
    dropped = {(d["path"], d["reason"]) for d in lines(out, "dropped_objects.jsonl")}
    # a's box (no outline) and point, b's rotated box
    assert dropped == {
        ("images/a.jpg", "not_drawn"),
        ("images/a.jpg", "other_shape"),
        ("images/b.jpg", "not_drawn"),
    }
    decoder = segmentation_input.Decoder()
    for shard in out.glob("*.tfrecord"):
        for raw in tf.data.TFRecordDataset(str(shard)):
            parsed = decoder.decode(raw)
            mask = tf.io.decode_png(parsed["image/segmentation/class/encoded"], channels=1)
            assert tuple(mask.shape[:2]) == (int(parsed["image/height"]), int(parsed["image/width"]))


def test_found_from_the_images_folder_with_the_export_above_it(tmp_path):
    project = gen.project(tmp_path / "data")
    out = tmp_path / "out"
    assert convert(f"{project.root}/images", out, "--task", "detection") == 0
    assert "beside --input" in summary(out)["objects"]["found_at"]
    found = records(out)
    assert found["a.jpg"]["labels"].size == 2 and found["b.jpg"]["labels"].size == 2


def test_with_no_options_a_tree_with_an_export_is_never_classes_of_its_folders(tmp_path, capsys):
    project = gen.project(tmp_path / "data", "min", export_name="export.json")
    out = tmp_path / "out"
    assert convert(project.root, out) == 2
    errors = [line for line in capsys.readouterr().err.splitlines() if line.startswith("error")]
    assert len(errors) == 1 and "--annotations label_studio" in errors[0]
    assert not (out / "summary.json").exists()
    # Given the task, the layout search finds the export by its content.
    assert convert(project.root, tmp_path / "found", "--task", "detection") == 0
    assert set(records(tmp_path / "found")) >= {"images/a.jpg", "images/b.jpg"}


@pytest.mark.parametrize(
    ("reference", "listed", "matched"),
    [
        ("/data/upload/3/1a2b3c4d-cat.jpg", ["images/cat.jpg"], ["images/cat.jpg"]),
        ("/data/upload/3/1a2b3c4d-cat.jpg", ["media/1a2b3c4d-cat.jpg"], ["media/1a2b3c4d-cat.jpg"]),
        ("/data/local-files/?d=pets/images/cat.jpg", ["images/cat.jpg", "other/cat.jpg"], ["images/cat.jpg"]),
        ("s3://bucket/pets/cat%201.jpg", ["cat 1.jpg"], ["cat 1.jpg"]),
        ("https://host/b/cat.jpg?X-Amz-Signature=1", ["x/cat.jpg"], ["x/cat.jpg"]),
        ("gs://bucket/a/cat.jpg", ["a/cat.jpg", "b/cat.jpg"], ["a/cat.jpg"]),
        ("gs://bucket/z/cat.jpg", ["a/cat.jpg", "b/cat.jpg"], ["a/cat.jpg", "b/cat.jpg"]),
    ],
)
def test_pictures_are_matched_by_path_then_name_then_name_without_the_upload_prefix(
    tmp_path, reference, listed, matched
):
    for relpath in listed:
        (tmp_path / relpath).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / relpath).write_bytes(b"x")
    catalog = partition(list_inputs(str(tmp_path)))
    assert label_studio._match(catalog, reference) == matched


def test_a_brush_is_decoded_as_the_editor_packs_it():
    """A hand-packed 1 x 2 picture: a literal run of 4 bytes (0, 0, 0, 0), then a repeated run of
    4 of 255: the first pixel's RGBA is clear (alpha 0), the second's painted."""
    bits = f"{8:032b}" + "00111" + "0010" + "0011" + "0111" + "1111"
    bits += "0" + "00" + "011" + "00000000" * 4 + "1" + "00" + "011" + "11111111"
    bits += "0" * (-len(bits) % 8)
    packed = [int(bits[i : i + 8], 2) for i in range(0, len(bits), 8)]
    assert label_studio.decode_brush(packed, 2, 1).tolist() == [[False, True]]
    rng = np.random.default_rng(1)
    painted = rng.random((23, 31)) < 0.4
    assert np.array_equal(label_studio.decode_brush(gen.brush_rle(painted), 31, 23), painted)


def test_choices_are_each_picture_s_image_classes(tmp_path):
    for layout in ("full", "min"):
        project = gen.project(tmp_path / layout, layout)
        assert label_studio.image_classes(list_inputs(project.root)) == {"images/a.jpg": ("indoor",)}


def test_an_export_is_told_by_its_content():
    assert label_studio.is_export(b'[{"id": 1, "annotations": [], "data": {"image": "a.jpg"}}]')
    assert label_studio.is_export(b'[{"image": "a.jpg", "id": 1, "annotator": 1, "annotation_id": 3}]')
    assert not label_studio.is_export(b'{"images": [], "annotations": []}')  # COCO
    assert not label_studio.is_export(b'[{"file_name": "a.jpg"}]')
    assert not label_studio.is_export(b"[]")


@pytest.mark.parametrize("layout", ["full", "min"])
def test_choices_label_a_classification_run(tmp_path, layout):
    size = (40, 30)
    tasks = [
        gen.task(1, "/data/upload/1/1a2b3c4d-a.jpg", [gen.annotation(1, [gen.choices("c1", ["outdoor"])])]),
        gen.task(
            2, "/data/local-files/?d=images/b.jpg", [gen.annotation(2, [gen.choices("c2", ["indoor"])])]
        ),
        gen.task(
            3,
            "/data/upload/1/0f0f0f0f-c.jpg",
            [gen.annotation(3, [gen.rectangle("r", size, 1, 1, 9, 9, "cat")])],
        ),
    ]
    document = tasks if layout == "full" else gen.json_min(tasks)
    files = {f"images/{name}.jpg": jpeg(*size, seed=i) for i, name in enumerate("abc")}
    files["export.json"] = json.dumps(document).encode()
    write_tree(tmp_path / "project", files)
    out = tmp_path / "out"
    args = ("--task", "classification", "--annotations", "label_studio")
    assert convert(tmp_path / "project", out, *args) == 0
    assert (out / "labels.txt").read_text().split() == ["indoor", "outdoor"]
    found = {}
    for split in summary(out)["splits"]:
        for record in iter_examples(str(out), split):
            found[record["filename"]] = record["label_text"]
    assert found == {"images/a.jpg": "outdoor", "images/b.jpg": "indoor"}
    assert [r["path"] for r in rejects(out) if r["reason"] == "unlabeled"] == ["images/c.jpg"]


@pytest.fixture(scope="module")
def poses(tmp_path_factory):
    """A RectangleLabels + KeyPointLabels project's both exports, converted for keypoints."""
    found = {}
    for layout in ("full", "min"):
        base = tmp_path_factory.mktemp(f"pose-{layout}")
        project = gen.pose_project(base / "data", layout)
        out = base / "out"
        assert convert(project.root, out, "--annotations", "label_studio", "--task", "keypoints") == 0
        found[layout] = (project, out)
    return found


def test_keypoints_are_the_export_s_percent_points_in_pixels_on_their_box(poses):
    project, out = poses["full"]
    assert summary(out)["keypoints"]["names"] == {"person": ["eye", "nose", "tail"]}
    found = records(out)
    a, b = found["images/a.jpg"], found["images/b.jpg"]
    results = {r["id"]: r["value"] for r in gen.results_of(project, 1)}

    def pixels(rid: str, size=gen.A_SIZE) -> list[float]:
        return [results[rid]["x"] / 100 * size[0], results[rid]["y"] / 100 * size[1], 2]

    points = np.asarray(a["keypoints"]).reshape(2, 3, 3)
    np.testing.assert_allclose(points[0], [[0, 0, 0], pixels("ka1"), pixels("ka2")], atol=1e-3)
    # Drawn inside the second person without a parentID: its by the box that holds it.
    np.testing.assert_allclose(points[1], [pixels("kb2"), pixels("kb1"), [0, 0, 0]], atol=1e-3)
    results = {r["id"]: r["value"] for r in gen.results_of(project, 2)}
    points = np.asarray(b["keypoints"]).reshape(2, 3, 3)
    np.testing.assert_allclose(points[0], [[0, 0, 0], [0, 0, 0], pixels("kc1", gen.B_SIZE)], atol=1e-3)
    np.testing.assert_allclose(points[1], np.zeros((3, 3)))  # a person with no point
    dropped = lines(out, "dropped_objects.jsonl")
    assert [(d["path"], d["reason"]) for d in dropped] == [("images/a.jpg", "unattached_point")]
    assert "#result kx" in dropped[0]["detail"] and "0 boxes hold it" in dropped[0]["detail"]


def test_full_export_and_json_min_give_the_same_keypoints(poses):
    (_, full), (_, short) = poses["full"], poses["min"]
    first, second = records(full), records(short)
    assert set(first) == set(second) == {"images/a.jpg", "images/b.jpg"}
    for name, record in first.items():
        np.testing.assert_allclose(record["keypoints"], second[name]["keypoints"])
        np.testing.assert_allclose(record["boxes"], second[name]["boxes"])
    assert len(lines(short, "dropped_objects.jsonl")) == 1


def test_a_parent_id_joins_a_point_to_its_box_where_boxes_overlap(tmp_path):
    size = gen.A_SIZE
    results = [
        gen.rectangle("big", size, 0.0, 0.0, 100.0, 100.0, "person"),
        gen.rectangle("small", size, 40.0, 40.0, 20.0, 20.0, "person"),
        gen.keypoint("k1", size, 50.0, 50.0, "nose", parent="big"),
        gen.keypoint("k2", size, 45.0, 45.0, "nose"),  # in both boxes, no parent: joins neither
    ]
    export = json.dumps([gen.task(1, "a.jpg", [gen.annotation(1, results)])]).encode()
    write_tree(
        tmp_path / "data", {"a.jpg": jpeg(*size), "project-1-at-2024-03-01-10-00-0a1b2c3d.json": export}
    )
    out = tmp_path / "out"
    assert convert(tmp_path / "data", out, "--annotations", "label_studio", "--task", "keypoints") == 0
    (record,) = records(out).values()
    np.testing.assert_allclose(np.ravel(record["keypoints"]), [32, 24, 2, 0, 0, 0], atol=1e-3)
    (dropped,) = lines(out, "dropped_objects.jsonl")
    assert dropped["reason"] == "unattached_point" and "2 boxes hold it" in dropped["detail"]
