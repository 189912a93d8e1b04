"""Semantic segmentation end to end: each layout built as its own tools write it (segmentationgen),
converted the way a user points at it, and every stored mask compared with the source's class ids
pixel for pixel; the masks move with their pictures; bad masks are named rejects; nothing that is
not a picture becomes a record."""

from __future__ import annotations

import io
import json
import os
import pathlib
import shutil

import numpy as np
import pytest
import segmentationgen as gen
from conftest import convert
from imagegen import exif_rotated_jpeg, jpeg, write_tree
from outputcheck import rejects, summary
from PIL import Image

from beam_tfrecord.read.examples import iter_examples


def stored_masks(output, split: str | None = None) -> dict[str, np.ndarray]:
    """filename -> stored class ids, over every split (or one)."""
    splits = [split] if split else list(summary(output)["splits"])
    found = {}
    for name in splits:
        for record in iter_examples(str(output), name):
            found[record["filename"]] = record["mask"]
    return found


def splits_of(output) -> dict[str, str]:
    return {
        record["filename"]: name
        for name in summary(output)["splits"]
        for record in iter_examples(str(output), name)
    }


def gen_files(root) -> set[str]:
    return {os.path.relpath(os.path.join(d, f), root) for d, _, files in os.walk(root) for f in files}


def labels(output) -> list[str]:
    with open(os.path.join(output, "labels.txt"), encoding="utf-8") as handle:
        return handle.read().splitlines()


LAYOUTS = {
    "labelme2voc": lambda root: gen.labelme2voc(root),
    "labelme5": lambda root: gen.labelme2voc(root, labelme5=True),
    "voc2012": lambda root: gen.voc2012(root),
    "cityscapes": lambda root: gen.cityscapes(root),
    "ade20k": lambda root: gen.ade20k(root),
    "kaggle_binary": lambda root: gen.kaggle_binary(root),
    "camvid": lambda root: gen.camvid(root),
    "rgb_coloured_voc": lambda root: gen.rgb_coloured_voc(root),
}


@pytest.mark.parametrize("layout", sorted(LAYOUTS))
def test_every_layout_is_found_and_every_mask_equals_the_source_class_ids(tmp_path, layout):
    tree = LAYOUTS[layout](tmp_path / "data")
    out = tmp_path / "out"
    assert convert(tree.root, out, "--task", "segmentation") == 0
    found = summary(out)
    masks = stored_masks(out)
    assert sorted(masks) == sorted(set(tree.images) - set(tree.unmasked))
    for relpath, expected in tree.images.items():
        if relpath in tree.unmasked:
            continue
        np.testing.assert_array_equal(masks[relpath], expected, err_msg=relpath)
    assert labels(out) == list(tree.class_names)
    assert found["consistent"]
    # VOC's pictures without a mask are in none of its segmentation lists: named, not guessed.
    assert {r["path"]: r["reason"] for r in rejects(out) if r["reason"] != "skipped"} == dict.fromkeys(
        tree.unmasked, "undeclared_split"
    )
    assert found["segmentation"]["ignore"] == 255
    if tree.splits:
        assert splits_of(out) == {r: s for r, s in tree.splits.items() if r in masks}
        assert found["split_method"].startswith("declared")
    # Every file that is not one of the pictures (masks, visualisations, ground truth of other
    # kinds, split lists, names files) is a skipped line saying what it is, never a record.
    skipped = {r["path"] for r in rejects(out) if r["reason"] == "skipped"}
    assert skipped == gen_files(tree.root) - set(tree.images) - set(tree.unmasked)


def test_cityscapes_train_ids_are_read_from_the_scripts_files_or_mapped_by_the_table(tmp_path):
    tree = gen.cityscapes(tmp_path / "data", train_ids=True)
    out = tmp_path / "out"
    assert (
        convert(tree.root, out, "--task", "segmentation", "--annotations", "cityscapes", "--train_ids") == 0
    )
    masks = stored_masks(out)
    for relpath, expected in tree.images.items():
        np.testing.assert_array_equal(masks[relpath], expected, err_msg=relpath)
    assert labels(out) == list(tree.class_names)
    assert "train ids" in summary(out)["segmentation"]["found_at"]
    # Without createTrainIdLabelImgs.py's files, the label ids are mapped by Cityscapes' table.
    for path in (tree.root / "gtFine").rglob("*_labelTrainIds.png"):
        path.unlink()
    mapped = tmp_path / "mapped"
    assert convert(tree.root, mapped, "--task", "segmentation", "--train_ids") == 0
    masks = stored_masks(mapped)
    for relpath, expected in tree.images.items():
        np.testing.assert_array_equal(masks[relpath], expected, err_msg=relpath)
    assert "mapped to train ids" in summary(mapped)["segmentation"]["found_at"]


def test_voc_given_its_images_folder_finds_the_masks_and_split_lists_beside_it(tmp_path):
    tree = gen.voc2012(tmp_path / "data")
    out = tmp_path / "out"
    assert convert(tree.root / "JPEGImages", out, "--task", "segmentation") == 0
    masks = stored_masks(out)
    expected = {r.removeprefix("JPEGImages/"): m for r, m in tree.images.items() if r not in tree.unmasked}
    assert sorted(masks) == sorted(expected)
    for relpath, mask in expected.items():
        np.testing.assert_array_equal(masks[relpath], mask)
    # The pictures no segmentation list names are in no split, said so, not guessed into one.
    undeclared = [r for r in rejects(out) if r["reason"] == "undeclared_split"]
    assert sorted(r["path"] for r in undeclared) == sorted(
        r.removeprefix("JPEGImages/") for r in tree.unmasked
    )


def _pair_tree(root, masks: dict[str, bytes], pictures: dict[str, bytes] | None = None) -> None:
    files = {f"images/{name}.jpg": data for name, data in (pictures or {}).items()}
    files |= {f"masks/{name}.png": data for name, data in masks.items()}
    write_tree(root, files)
    (root / "class_names.txt").write_text("background\nroad\ncar\n")


def _png(array: np.ndarray, mode: str = "L") -> bytes:
    out = io.BytesIO()
    Image.fromarray(array.astype(np.uint8), mode=mode).save(out, format="PNG")
    return out.getvalue()


def _ids(height: int, width: int, seed: int = 0) -> np.ndarray:
    return np.random.default_rng(seed).integers(0, 3, size=(height, width)).astype(np.uint8)


def test_a_mask_moves_with_its_picture_under_exif_turns_and_resize(tmp_path):
    stored = _ids(32, 48)  # the mask of the picture as its file stores it (48 wide, 32 high)
    _pair_tree(tmp_path / "data", {"turned": _png(stored)}, {"turned": exif_rotated_jpeg(6)})
    out = tmp_path / "out"
    assert convert(tmp_path / "data", out, "--task", "segmentation") == 0
    # EXIF 6: the picture is turned a quarter clockwise, and so is its mask.
    np.testing.assert_array_equal(stored_masks(out)["images/turned.jpg"], np.rot90(stored, k=-1))

    resized = tmp_path / "resized"
    assert convert(tmp_path / "data", resized, "--task", "segmentation", "--resize", "64x96") == 0
    # Twice the upright size: nearest neighbour repeats each value in a 2x2 block, never blends.
    doubled = np.rot90(stored, k=-1).repeat(2, axis=0).repeat(2, axis=1)
    np.testing.assert_array_equal(stored_masks(resized)["images/turned.jpg"], doubled)

    padded = tmp_path / "padded"
    args = ("--task", "segmentation", "--resize", "64x64", "--resize_mode", "pad")
    assert convert(tmp_path / "data", padded, *args) == 0
    mask = stored_masks(padded)["images/turned.jpg"]
    assert mask.shape == (64, 64)
    # The upright picture (32 wide, 48 high) fits 64 high, 43 wide: the margins are the ignore value.
    assert (mask[:, :10] == 255).all() and (mask[:, -10:] == 255).all()
    assert set(np.unique(mask[:, 11:-11])) <= {0, 1, 2}


def test_bad_masks_are_named_rejects_and_nothing_is_lost(tmp_path):
    good = _ids(32, 48)
    unknown = good.copy()
    unknown[0, 0] = 7  # not one of the three classes, and not the ignore value
    masks = {
        "good": _png(good),
        "small": _png(_ids(10, 10)),
        "unknown": _png(unknown),
        "colours": _png(np.dstack([good * 60, good * 20, good * 90]), "RGB"),
        "broken": b"\x89PNG\r\n\x1a\nnot really",
        "orphan": _png(good),
    }
    pictures = {name: jpeg(48, 32, seed=i) for i, name in enumerate(masks) if name != "orphan"}
    pictures["nomask"] = jpeg(48, 32, seed=9)
    _pair_tree(tmp_path / "data", masks, pictures)
    out = tmp_path / "out"
    assert convert(tmp_path / "data", out, "--task", "segmentation", "--allow_unmatched_annotations") == 0
    reasons = {r["path"]: r["reason"] for r in rejects(out) if r["reason"] != "skipped"}
    assert reasons == {
        "images/small.jpg": "class_mask_size_mismatch",
        "images/unknown.jpg": "class_mask_unknown_value",
        "images/colours.jpg": "class_mask_colours",
        "images/broken.jpg": "class_mask_unreadable",
    }
    detail = next(r["detail"] for r in rejects(out) if r["path"] == "images/unknown.jpg")
    assert "7" in detail and "0 to 2" in detail
    found = summary(out)
    assert found["consistent"]
    # A picture without a mask is kept, its mask all ignored, and counted; a mask without a
    # picture is listed.
    assert sorted(stored_masks(out)) == ["images/good.jpg", "images/nomask.jpg"]
    assert (stored_masks(out)["images/nomask.jpg"] == 255).all()
    assert found["segmentation"]["pictures_without_mask"] == 1
    with open(out / "annotations_without_image.jsonl", encoding="utf-8") as handle:
        assert [json.loads(line)["annotation"] for line in handle] == ["masks/orphan.png"]

    dropped = tmp_path / "dropped"
    args = ("--task", "segmentation", "--unannotated", "drop", "--allow_unmatched_annotations")
    assert convert(tmp_path / "data", dropped, *args) == 0
    assert {r["path"]: r["reason"] for r in rejects(dropped)}["images/nomask.jpg"] == "unannotated"


def test_binary_masks_of_0_and_255_are_class_1_never_all_ignored(tmp_path):
    tree = gen.kaggle_binary(tmp_path / "data")
    out = tmp_path / "out"
    assert convert(tree.root, out, "--task", "segmentation", "--annotations", "folders") == 0
    per_class = summary(out)["segmentation"]["per_class"]
    assert per_class["foreground"]["pixels"] > 0 and summary(out)["segmentation"]["ignored_pixels"] == 0
    assert "255 is class 1" in summary(out)["segmentation"]["found_at"]


def test_a_masks_folder_named_with_annotations_path_is_matched_by_stem(tmp_path):
    tree = gen.kaggle_binary(tmp_path / "data")
    shutil.move(tree.root / "masks", tmp_path / "elsewhere")
    out = tmp_path / "out"
    args = ("--task", "segmentation", "--annotations_path", str(tmp_path / "elsewhere"))
    assert convert(tree.root / "images", out, *args) == 0
    masks = stored_masks(out)
    for relpath, expected in tree.images.items():
        np.testing.assert_array_equal(masks[relpath.removeprefix("images/")], expected)


def test_masks_that_match_nothing_fail_in_one_line(tmp_path, capsys):
    write_tree(tmp_path / "data", {f"images/{i}.jpg": jpeg(seed=i) for i in range(4)})
    code = convert(tmp_path / "data", tmp_path / "out", "--task", "segmentation", "--annotations", "folders")
    assert code == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len([line for line in err if line.startswith("error")]) == 1
    assert "masks/ beside images/" in err[-1]
    assert not (tmp_path / "out" / "summary.json").exists()


def test_the_records_parse_with_model_garden_s_segmentation_decoder(tmp_path):
    """TF Model Garden's semantic segmentation input reads the records as DeepLab wrote them."""
    from official.vision.dataloaders import segmentation_input

    tree = gen.labelme2voc(tmp_path / "data")
    out = tmp_path / "out"
    assert convert(tree.root, out, "--task", "segmentation") == 0
    import tensorflow as tf

    decoder = segmentation_input.Decoder()
    (shard,) = out.glob("train-*.tfrecord")
    names = [record["filename"] for record in iter_examples(str(out))]  # the shard's order
    masks = []
    for raw in tf.data.TFRecordDataset(str(shard)):
        parsed = decoder.decode(raw)
        mask = tf.io.decode_png(parsed["image/segmentation/class/encoded"], channels=1)
        assert tuple(mask.shape[:2]) == (int(parsed["image/height"]), int(parsed["image/width"]))
        masks.append(mask.numpy()[..., 0])
    assert len(masks) == len(names) == len(tree.images)
    for name, mask in zip(names, masks, strict=True):
        np.testing.assert_array_equal(mask, tree.images[name])


def test_load_dataset_gives_image_and_mask_pairs_that_move_together(tmp_path):
    from beam_tfrecord.read.tf_data import load_dataset

    tree = gen.labelme2voc(tmp_path / "data")
    out = tmp_path / "out"
    assert convert(tree.root, out, "--task", "segmentation") == 0
    pairs = list(load_dataset(str(out), shuffle=False, batch_size=None))
    assert len(pairs) == len(tree.images)
    by_size = {expected.shape: expected for expected in tree.images.values()}
    for image, mask in pairs:
        assert mask.shape[:2] == image.shape[:2] and mask.shape[2] == 1 and mask.dtype.name == "uint8"
        np.testing.assert_array_equal(mask.numpy()[..., 0], by_size[tuple(mask.shape[:2])])
    batches = load_dataset(str(out), image_size=(64, 64), pad_to_aspect_ratio=True, batch_size=2)
    images, masks = next(iter(batches))
    assert images.shape == (2, 64, 64, 3) and masks.shape == (2, 64, 64, 1)
    assert masks.numpy()[:, 0, :, 0].min() == 255  # the pad's margin is ignored, not class 0


def test_tfds_reads_the_masks(tmp_path):
    import tensorflow_datasets as tfds

    tree = gen.labelme2voc(tmp_path / "data")
    out = tmp_path / "out"
    assert convert(tree.root, out, "--task", "segmentation") == 0
    builder = tfds.builder_from_directory(str(out))
    for example in builder.as_dataset(split="train"):
        name = example["image"]["filename"].numpy().decode()
        mask = example["image"]["segmentation"]["class"]["encoded"].numpy()[..., 0]
        np.testing.assert_array_equal(mask, tree.images[name])


def test_a_voc_tree_in_a_bucket_given_by_its_images_folder_finds_its_masks_beside_it(tmp_path):
    """gs:// as on disk: the masks and split lists are found beside the images folder, read by the
    workers from the bucket (the real GCS emulator over HTTP)."""
    import uuid

    from gcsemulator import EMULATOR_ENV, Emulator

    tree = gen.voc2012(tmp_path / "data")
    files = {
        str(path.relative_to(tree.root)): path.read_bytes() for path in tree.root.rglob("*") if path.is_file()
    }
    with Emulator() as emulator, pytest.MonkeyPatch.context() as patch:
        patch.setenv(EMULATOR_ENV, emulator.url)
        bucket = f"test-{uuid.uuid4().hex[:12]}"
        emulator.client().create_bucket(bucket)
        emulator.upload_tree(bucket, "VOC2012", files)
        out = tmp_path / "out"
        assert convert(f"gs://{bucket}/VOC2012/JPEGImages", out, "--task", "segmentation") == 0
    masks = stored_masks(out)
    expected = {r.removeprefix("JPEGImages/"): m for r, m in tree.images.items() if r not in tree.unmasked}
    assert sorted(masks) == sorted(expected)
    for relpath, mask in expected.items():
        np.testing.assert_array_equal(masks[relpath], mask)
    assert summary(out)["split_method"].startswith("declared by Pascal VOC split lists")


def test_binary_masks_whose_first_ones_are_empty_still_read_255_as_the_object(tmp_path):
    """Sorted names often put empty masks first (a medical set's healthy slices): the rule is
    binary for them too, so a later mask's 255 is class 1, never ignored."""
    empty, full = np.zeros((32, 48), np.uint8), np.zeros((32, 48), np.uint8)
    full[8:20, 10:30] = 255
    masks = {f"a{i:02d}": _png(empty) for i in range(20)}
    masks["z99"] = _png(full)
    pictures = {name: jpeg(48, 32, seed=i) for i, name in enumerate(masks)}
    files = {f"images/{n}.jpg": d for n, d in pictures.items()} | {
        f"masks/{n}.png": d for n, d in masks.items()
    }
    write_tree(tmp_path / "data", files)
    out = tmp_path / "out"
    assert convert(tmp_path / "data", out, "--task", "segmentation") == 0
    np.testing.assert_array_equal(stored_masks(out)["images/z99.jpg"], (full == 255).astype(np.uint8))
    assert summary(out)["segmentation"]["ignored_pixels"] == 0


def test_a_split_without_masks_keeps_its_pictures_and_a_devkit_reads_one_mask_folder(tmp_path):
    """`train/images` + `train/masks` beside a `test/images` without masks: the test pictures
    are pictures without a mask (kept and counted), never skipped as not pictures."""
    good = _ids(32, 48)
    files = {f"train/images/t{i}.jpg": jpeg(48, 32, seed=i) for i in range(3)}
    files |= {f"train/masks/t{i}.png": _png(good) for i in range(3)}
    files |= {f"test/images/q{i}.jpg": jpeg(48, 32, seed=10 + i) for i in range(2)}
    write_tree(tmp_path / "data", files)
    (tmp_path / "data" / "class_names.txt").write_text("background\nroad\ncar\n")
    out = tmp_path / "out"
    assert convert(tmp_path / "data", out, "--task", "segmentation") == 0
    assert sorted(stored_masks(out)) == sorted(f for f in files if "/images/" in f)
    assert summary(out)["segmentation"]["pictures_without_mask"] == 2
    assert splits_of(out)["test/images/q0.jpg"] == "test"


def test_a_devkit_with_the_augmented_masks_reads_them_with_their_train_list(tmp_path):
    """DeepLab's augmented VOC: SegmentationClassAug/ holds masks for more pictures than
    SegmentationClass/, and ImageSets/Segmentation/train_aug.txt names them: one folder is read
    (the one that pairs the most pictures) and its train list kept."""
    tree = gen.voc2012(tmp_path / "data")
    aug = tree.root / "SegmentationClassAug"
    aug.mkdir()
    for relpath, mask in tree.images.items():
        (aug / (pathlib.PurePosixPath(relpath).stem + ".png")).write_bytes(_png(mask))
    extra = tree.unmasked[0]
    with Image.open(tree.root / extra) as picture:
        width, height = picture.size
    (aug / (pathlib.PurePosixPath(extra).stem + ".png")).write_bytes(
        _png(np.zeros((height, width), np.uint8))
    )
    lists = tree.root / "ImageSets" / "Segmentation"
    (lists / "train_aug.txt").write_text(pathlib.PurePosixPath(extra).stem + "\n")
    out = tmp_path / "out"
    assert convert(tree.root, out, "--task", "segmentation") == 0
    assert extra in stored_masks(out) and splits_of(out)[extra] == "train"
    assert "SegmentationClassAug" in summary(out)["segmentation"]["found_at"]


@pytest.mark.parametrize(
    ("names", "where"), [("classes", "root"), ("names_list", "masks"), ("names_map", "beside")]
)
@pytest.mark.parametrize("given", ["root", "images"])
def test_class_names_come_from_the_dataset_yaml_beside_or_above_the_masks(tmp_path, names, where, given):
    """COCO128 with semantic masks keeps its 81 names in a dataset YAML (`classes: {0: unlabeled,
    1: person, ...}`) two folders above the masks; `names:` (a list or a map) beside them or one
    folder up is read alike, from the dataset root or its images folder. The 70-odd classes no
    picture holds are one warning line, not one each."""
    tree = gen.coco128_semantic(tmp_path / "data", names, where)
    out = tmp_path / "out"
    source = tree.root if given == "root" else tree.root / "images"
    assert convert(source, out, "--task", "segmentation") == 0
    assert labels(out) == list(tree.class_names)
    masks = stored_masks(out)
    assert len(masks) == len(tree.images)
    for relpath, expected in tree.images.items():
        name = relpath if given == "root" else relpath.removeprefix("images/")
        np.testing.assert_array_equal(masks[name], expected, err_msg=relpath)
    found = summary(out)
    assert "coco128-seg.yaml" in found["segmentation"]["found_at"]
    empty = [w for w in found["warnings"] if "no valid image" in w]
    assert len(empty) == 1 and empty[0].startswith("classes with no valid image (")
    assert "more" in empty[0]


def test_a_set_that_names_no_classes_takes_its_ids_as_names_and_says_so_once(tmp_path, caplog):
    """Masks of ids 0..5 (255 the border) and no names anywhere: the names are "0" to "5", the
    largest id read, so labels.txt's length is num_classes; one warning line says so, in the
    summary too."""
    tree = gen.unnamed_ids(tmp_path / "data")
    out = tmp_path / "out"
    with caplog.at_level("WARNING"):
        assert convert(tree.root, out, "--task", "segmentation") == 0
    assert labels(out) == ["0", "1", "2", "3", "4", "5"]
    masks = stored_masks(out)
    for relpath, expected in tree.images.items():
        np.testing.assert_array_equal(masks[relpath], expected, err_msg=relpath)
    said = [w for w in summary(out)["warnings"] if "names no classes" in w]
    assert len(said) == 1 and "0 to 5" in said[0] and "num_classes 6" in said[0]
    assert [r.getMessage() for r in caplog.records if "names no classes" in r.getMessage()] == said
    assert not any("no valid image" in w for w in summary(out)["warnings"])


def test_an_id_past_the_sampled_ones_is_a_reject_that_names_it(tmp_path, monkeypatch):
    """The plan reads a sample of the masks: a mask holding an id larger than any sampled one is
    a class_mask_unknown_value reject naming the value, never a silent class."""
    from beam_tfrecord.plan.annotations import segmentation

    monkeypatch.setattr(segmentation, "IDS_SAMPLE", 4)  # 6 masks: the 3rd and the 6th are not read
    tree = gen.unnamed_ids(tmp_path / "data", largest=9)
    out = tmp_path / "out"
    assert convert(tree.root, out, "--task", "segmentation") == 0
    assert labels(out) == [str(i) for i in range(5)]
    reasons = {r["path"]: r for r in rejects(out) if r["reason"] != "skipped"}
    assert list(reasons) == ["images/frame_0005.png"]
    assert reasons["images/frame_0005.png"]["reason"] == "class_mask_unknown_value"
    assert "9" in reasons["images/frame_0005.png"]["detail"]
    assert summary(out)["consistent"]


def test_the_records_of_a_set_without_names_parse_with_model_garden_s_decoder(tmp_path):
    import tensorflow as tf
    from official.vision.dataloaders import segmentation_input

    tree = gen.unnamed_ids(tmp_path / "data")
    out = tmp_path / "out"
    assert convert(tree.root, out, "--task", "segmentation") == 0
    decoder = segmentation_input.Decoder()
    names = [
        record["filename"] for split in summary(out)["splits"] for record in iter_examples(str(out), split)
    ]
    masks = []
    for shard in sorted(out.glob("*.tfrecord")):
        for raw in tf.data.TFRecordDataset(str(shard)):
            parsed = decoder.decode(raw)
            masks.append(
                tf.io.decode_png(parsed["image/segmentation/class/encoded"], channels=1).numpy()[..., 0]
            )
    assert len(masks) == len(names) == len(tree.images)
    for name, mask in zip(names, masks, strict=True):
        np.testing.assert_array_equal(mask, tree.images[name])
