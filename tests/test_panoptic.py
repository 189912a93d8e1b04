"""COCO panoptic end to end (`--task panoptic`): a tree as COCO ships it (panopticgen), found from
the dataset root and from the pictures' folder, converted, and every record compared with what
TF Model Garden's own `create_coco_tf_record.py --include_panoptic_masks --include_masks` writes
from the same files, pixel for pixel; where Model Garden's uint8 instance ids cannot hold a
picture's segments, ours are the true ids in a 16-bit PNG. Then the readers and inspect."""

from __future__ import annotations

import io
import json
import pathlib

import numpy as np
import panopticgen as gen
import pytest
import tensorflow as tf
from conftest import convert
from outputcheck import rejects, serialized_records, summary
from PIL import Image

from beam_tfrecord.read.examples import iter_examples

ROOT = "coco"


def _decoded(png: bytes) -> np.ndarray:
    with Image.open(io.BytesIO(png)) as image:
        return np.asarray(image).astype(np.int64)


def _features(raw: bytes) -> dict[str, list]:
    example = tf.train.Example.FromString(raw)
    found = {}
    for key, feature in example.features.feature.items():
        kind = feature.WhichOneof("kind")
        found[key] = list(getattr(feature, kind).value)
    return found


@pytest.fixture(scope="module")
def panoptic(tmp_path_factory):
    """The tree, its truth, and our conversion of it from the dataset root with `--task panoptic`."""
    base = tmp_path_factory.mktemp("panoptic")
    truth = gen.coco_panoptic(base / ROOT)
    out = base / "out"
    assert convert(base / ROOT, out, "--task", "panoptic") == 0
    return base, truth, out


def _ours(out: pathlib.Path) -> dict[str, dict[str, list]]:
    found = {}
    for split in summary(out)["splits"]:
        for raw in serialized_records(str(out), split):
            features = _features(raw)
            found[features["image/filename"][0].decode()] = features
    return found


def _model_garden(root: pathlib.Path, monkeypatch) -> tuple[dict[str, dict[str, list]], dict[int, Exception]]:
    """Model Garden's create_tf_example on each picture of the tree, as its
    `--include_panoptic_masks --include_masks` run calls it (objects from the instances file).
    Its `read_image` returns the PNG's uint8 array, whose `g * 256` NumPy 2 refuses: the array
    is widened first, which is what NumPy 1 did by value-based casting. A picture it cannot
    convert (a 256th segment's id under NumPy 2) is returned with its error."""
    from absl import flags
    from official.vision.data import create_coco_tf_record as mg
    from official.vision.data import tfrecord_lib

    if not flags.FLAGS.is_parsed():
        flags.FLAGS.mark_as_parsed()
    monkeypatch.setattr(flags.FLAGS, "panoptic_skip_crowd", False)
    read = tfrecord_lib.read_image
    monkeypatch.setattr(tfrecord_lib, "read_image", lambda path: read(path).astype(np.int64))
    annotations = root / "annotations"
    objects, names = mg._load_object_annotations(str(annotations / "instances_train2017.json"))
    segments, is_thing = mg._load_panoptic_annotations(str(annotations / "panoptic_train2017.json"))
    images = json.loads((annotations / "panoptic_train2017.json").read_text())["images"]
    found, failed = {}, {}
    for image in images:
        try:
            example, _ = mg.create_tf_example(
                image,
                [str(root / "train2017")],
                str(annotations / "panoptic_train2017"),
                objects.get(image["id"]),
                names,
                None,
                segments.get(image["id"]),
                is_thing,
                include_panoptic_masks=True,
                include_masks=True,
            )
        except OverflowError as error:
            failed[image["id"]] = error
            continue
        found[f"train2017/{image['file_name']}"] = _features(example.SerializeToString())
    return found, failed


MASK_KEYS = (
    "image/panoptic/category_mask",
    "image/panoptic/instance_mask",
    "image/segmentation/class/encoded",
)


def test_records_equal_model_gardens_converter_pixel_for_pixel(panoptic, monkeypatch):
    base, truth, out = panoptic
    ours = _ours(out)
    theirs, failed = _model_garden(base / ROOT, monkeypatch)
    assert set(ours) == set(truth)
    assert set(theirs) == set(truth) - {f"train2017/{gen.CROWDED_ID:012d}.jpg"}
    assert set(failed) <= {gen.CROWDED_ID}
    for name, them in theirs.items():
        us = ours[name]
        for key in MASK_KEYS:
            np.testing.assert_array_equal(
                _decoded(us[key][0]), _decoded(them[key][0]), err_msg=f"{name} {key}"
            )
        assert us["image/source_id"] == them["image/source_id"]
        count = len(them.get("image/object/bbox/xmin", []))
        assert len(us["image/object/bbox/xmin"]) == count, name
        if not count:
            continue
        assert us["image/object/class/text"] == them["image/object/class/text"]
        assert us["image/object/is_crowd"] == them["image/object/is_crowd"]
        for side, scale in (
            ("xmin", gen.WIDTH),
            ("xmax", gen.WIDTH),
            ("ymin", gen.HEIGHT),
            ("ymax", gen.HEIGHT),
        ):
            key = f"image/object/bbox/{side}"
            np.testing.assert_allclose(np.array(us[key]) * scale, np.array(them[key]) * scale, atol=1.0)
        for mine, model_garden in zip(us["image/object/mask"], them["image/object/mask"], strict=True):
            np.testing.assert_array_equal(_decoded(mine), _decoded(model_garden))


def test_more_than_255_segments_keep_their_ids_in_a_16_bit_png(panoptic):
    """Model Garden's uint8 instance mask wraps a 256th segment's id (NumPy 1) or fails (NumPy 2);
    ours holds each thing's position in segments_info + 1, as a 16-bit PNG, said as a change."""
    _, truth, out = panoptic
    name = f"train2017/{gen.CROWDED_ID:012d}.jpg"
    ids, segments = truth[name]
    record = next(r for r in iter_examples(str(out), "train") if r["filename"] == name)
    expected = np.zeros(ids.shape, dtype=np.int64)
    thing = {c["id"] for c in gen.CATEGORIES if c["isthing"]}
    for index, segment in enumerate(segments):
        if segment["category_id"] in thing:
            expected[ids == segment["id"]] = index + 1
    assert expected.max() > 255
    np.testing.assert_array_equal(record["instance_mask"], expected)
    with Image.open(io.BytesIO(record["instance_mask_png"])) as png:
        assert png.mode.startswith("I")
    changes = (out / "changes.jsonl").read_text().splitlines()
    assert any("panoptic_wide_ids" in line and name in line for line in changes)
    assert summary(out)["panoptic"]["wide_records"] == 1


def test_every_input_ends_as_a_record_or_a_reject_and_pngs_are_no_pictures(panoptic):
    _, truth, out = panoptic
    found = summary(out)
    assert found["records"] == len(truth) and found["consistent"]
    lines = rejects(out)
    assert {line["reason"] for line in lines} == {"skipped"}  # the PNGs and the JSON files
    skipped = {line["path"] for line in lines}
    assert {f"annotations/panoptic_train2017/{name[10:-4]}.png" for name in truth} <= skipped
    assert not any("panoptic_train2017/" in name for name in _ours(out))
    labels = (out / "labels.txt").read_text().split()
    assert labels == [c["name"] for c in gen.CATEGORIES]


def test_found_from_the_pictures_folder(panoptic, tmp_path):
    base, truth, _ = panoptic
    out = tmp_path / "out"
    assert convert(base / ROOT / "train2017", out, "--task", "panoptic") == 0
    ours = {r["filename"]: r for r in iter_examples(str(out), "train")}
    assert set(ours) == {name.split("/", 1)[1] for name in truth}
    for name, (ids, segments) in truth.items():
        record = ours[name.split("/", 1)[1]]
        expected = np.zeros(ids.shape, dtype=np.int64)
        for segment in segments:
            expected[ids == segment["id"]] = segment["category_id"]
        np.testing.assert_array_equal(record["category_mask"], expected)


def test_annotations_coco_reads_panoptic_too(panoptic, tmp_path):
    base, truth, _ = panoptic
    out = tmp_path / "out"
    assert convert(base / ROOT, out, "--annotations", "coco", "--task", "panoptic") == 0
    assert summary(out)["records"] == len(truth)


def test_readers_hand_out_the_masks(panoptic):
    _, truth, out = panoptic
    from beam_tfrecord.read.tf_data import load_dataset

    name = f"train2017/{gen.CROWDED_ID:012d}.jpg"
    by_name = {r["filename"]: r for r in iter_examples(str(out), "train")}
    record = by_name["train2017/000000000139.jpg"]
    assert record["masks"].shape == (3, gen.HEIGHT, gen.WIDTH)
    assert set(np.unique(record["masks"])) <= {0, 1}
    dataset = load_dataset(str(out), "train", batch_size=None, shuffle=False)
    seen = 0
    for image, target in dataset:
        assert image.shape[:2] == (gen.HEIGHT, gen.WIDTH)
        for key in ("category_mask", "instance_mask", "semantic_mask"):
            assert target[key].shape == (gen.HEIGHT, gen.WIDTH, 1)
            assert target[key].dtype == tf.int32
        seen += 1
        if int(tf.reduce_max(target["instance_mask"])) > 255:
            np.testing.assert_array_equal(
                target["instance_mask"].numpy()[..., 0], by_name[name]["instance_mask"]
            )
    assert seen == len(truth)


def test_torch_target_holds_masks_and_things(panoptic):
    pytest.importorskip("torch")
    _, _, out = panoptic
    from beam_tfrecord.read.pytorch import TorchImages

    image, target = next(iter(TorchImages(str(out), "train")))  # an IterableDataset
    assert {"category_mask", "instance_mask", "semantic_mask", "boxes", "labels"} <= set(target)
    assert target["category_mask"].shape == tuple(image.shape[1:])


def test_inspect_checks_and_draws_the_segments(panoptic, tmp_path):
    _, _, out = panoptic
    from beam_tfrecord.read.verify import verify_output

    report = verify_output(str(out))
    assert report.errors == []


def test_a_panoptic_tree_without_options_is_refused_naming_the_task(panoptic, tmp_path, capsys):
    """No silent misread: never a classification run whose classes are its folders."""
    tree = tmp_path / "coco"
    gen.coco_panoptic(tree, crowded=False)
    (tree / "annotations" / "instances_train2017.json").unlink()
    assert convert(tree, tmp_path / "out") == 2
    assert "pass --task panoptic" in capsys.readouterr().err


def test_the_contact_sheet_draws_each_segment(panoptic):
    _, _, out = panoptic
    from beam_tfrecord.labels.panoptic import draw_segments

    record = next(r for r in iter_examples(str(out), "train") if r["filename"].endswith("139.jpg"))
    thumb = Image.new("RGB", (gen.WIDTH, gen.HEIGHT), (0, 0, 0))
    drawn = np.asarray(draw_segments(thumb, (record["category_mask_png"], record["instance_mask_png"])))
    void = record["category_mask"] == 0
    assert (drawn[void] == 0).all() and (drawn[~void] > 0).any(axis=-1).all()
    first, second = sorted(set(np.unique(record["instance_mask"])) - {0})[:2]  # a person and a car
    person, car = record["instance_mask"] == first, record["instance_mask"] == second
    assert not (drawn[person][0] == drawn[car][0]).all()


def test_a_png_of_another_size_or_not_a_png_is_a_named_reject(tmp_path):
    """The picture is kept out with the PNG named, never stored with masks of another frame."""
    tree = tmp_path / "coco"
    gen.coco_panoptic(tree, crowded=False)
    pngs = sorted((tree / "annotations" / "panoptic_train2017").glob("*.png"))
    Image.new("RGB", (gen.WIDTH // 2, gen.HEIGHT // 2)).save(pngs[0])
    pngs[1].write_bytes(b"not a png")
    out = tmp_path / "out"
    assert convert(tree, out, "--task", "panoptic") == 0
    by_reason = {r["reason"]: r["detail"] for r in rejects(out) if r["reason"] != "skipped"}
    assert set(by_reason) == {"panoptic_size_mismatch", "panoptic_unreadable"}
    assert pngs[0].name in by_reason["panoptic_size_mismatch"]
    assert f"is {gen.WIDTH // 2}x{gen.HEIGHT // 2}; the picture is" in by_reason["panoptic_size_mismatch"]
    assert pngs[1].name in by_reason["panoptic_unreadable"]
