"""Class masks past 255: a run whose class ids or ignore value pass 255 (ADE20K's full class list,
a microscopy set's thousands of nucleus ids) stores every mask as a 16-bit PNG, says so in
summary.json, and every reader gives the source's values exactly as uint16: iter_examples,
load_dataset, TFDS, PyTorch's target, inspect's checks and contact sheet. Masks are written as the
tools write them (Pillow's `Image.fromarray(uint16)`, tifffile); a run of 8-bit masks is as it
always was; a value outside the class list is still a named reject."""

from __future__ import annotations

import io
import json

import numpy as np
import pytest
import segmentationgen as gen
import tifffile
from conftest import convert
from outputcheck import rejects, summary
from PIL import Image

from beam_tfrecord import reasons
from beam_tfrecord.elements import MaskRule
from beam_tfrecord.labels.class_mask import class_ids, decode_class_mask, draw_class_mask, mask_target
from beam_tfrecord.plan.annotations.options import AnnotationConfig
from beam_tfrecord.read.examples import iter_examples
from beam_tfrecord.reasons import Reject

SEGMENTATION = ("--task", "segmentation")


def stored(output) -> dict[str, np.ndarray]:
    """filename -> the mask iter_examples gives, over every split."""
    return {
        record["filename"]: record["mask"]
        for split in summary(output)["splits"]
        for record in iter_examples(str(output), split)
    }


def assert_masks(seen: dict[str, np.ndarray], truth: dict[str, np.ndarray]) -> None:
    assert sorted(seen) == sorted(truth)
    for name, expected in truth.items():
        assert seen[name].dtype == expected.dtype, name
        np.testing.assert_array_equal(seen[name], expected, err_msg=name)


@pytest.fixture(scope="module")
def ade_full(tmp_path_factory):
    """ADE20K's layout with its 3,688 classes, 65535 its ignore value, converted once."""
    root = tmp_path_factory.mktemp("ade_full")
    tree = gen.ade20k_full(root / "data")
    out = root / "out"
    assert convert(tree.root, out, *SEGMENTATION, "--ignore_value", "65535") == 0
    return tree, out


def test_more_than_256_classes_store_16_bit_masks_and_the_summary_says_so(ade_full):
    tree, out = ade_full
    section = summary(out)["segmentation"]
    assert section["mask_dtype"] == "uint16"
    assert "16-bit PNG" in section["mask_key"] and "16-bit PNGs" in section["found_at"]
    assert section["ignore"] == 65535 and section["ignored_pixels"] > 0
    assert section["per_class"]["object 3687"]["pixels"] > 0  # an id far past 255, counted as itself
    with open(out / "labels.txt", encoding="utf-8") as handle:
        assert len(handle.read().splitlines()) == gen.ADE20K_FULL_CLASSES
    assert_masks(stored(out), tree.images)
    for record in iter_examples(str(out)):
        assert record["mask_png"][24] == 16  # the PNG's bit depth: every record of the run


def test_load_dataset_gives_uint16_masks_that_move_with_the_picture(ade_full):
    from beam_tfrecord import load_dataset

    tree, out = ade_full
    seen = {}
    for split in ("train", "validation"):
        records = load_dataset(str(out), split, batch_size=None, shuffle=False, features=True)
        for record in records:
            name = record["image/filename"].numpy().decode()
            seen[name] = decode_class_mask(record["image/segmentation/class/encoded"].numpy(), "uint16")
    assert_masks(seen, tree.images)
    by_shape = {mask.shape: mask for mask in tree.images.values()}
    for _, mask in load_dataset(str(out), "train", batch_size=None, shuffle=False):
        assert mask.dtype.name == "uint16"
        np.testing.assert_array_equal(mask.numpy()[..., 0], by_shape[tuple(mask.shape[:2])])
    _, masks = next(iter(load_dataset(str(out), "train", image_size=(64, 64), pad_to_aspect_ratio=True)))
    assert masks.dtype.name == "uint16" and masks.shape[1:] == (64, 64, 1)
    assert masks.numpy()[:, 0, :, 0].min() == 65535  # the pad's margin is the ignore value, unscaled
    held = np.unique(np.concatenate([mask.ravel() for mask in tree.images.values()]))
    assert set(np.unique(masks.numpy())) <= set(held)  # moved by the nearest neighbour: no value blends


def test_tfds_reads_the_16_bit_masks_as_uint16(ade_full):
    import tensorflow_datasets as tfds

    tree, out = ade_full
    with open(out / "features.json", encoding="utf-8") as handle:
        features = json.load(handle)
    assert '"uint16"' in json.dumps(features)
    builder = tfds.builder_from_directory(str(out))
    seen = {}
    for split in ("train", "validation"):
        for example in tfds.as_numpy(builder.as_dataset(split=split)):
            mask = example["image"]["segmentation"]["class"]["encoded"]
            seen[example["image"]["filename"].decode()] = mask[..., 0]
    assert_masks(seen, tree.images)


def test_pytorch_s_target_is_every_stored_id_and_follows_the_resize(ade_full):
    tree, out = ade_full
    for record in iter_examples(str(out)):
        target = mask_target(record["mask"], None)
        assert target.dtype == np.int64
        np.testing.assert_array_equal(target, tree.images[record["filename"]])
        resized = mask_target(record["mask"], (16, 20))
        assert resized.shape == (16, 20) and set(np.unique(resized)) <= set(np.unique(record["mask"]))


def test_torch_images_gives_image_and_mask(ade_full):
    torch = pytest.importorskip("torch")
    import beam_tfrecord

    _, out = ade_full
    for image, mask in beam_tfrecord.TorchImages(str(out), "train"):
        assert mask.dtype == torch.int64 and tuple(mask.shape) == tuple(image.shape[1:])
        assert int(mask.max()) > 255


def test_inspect_checks_and_draws_the_16_bit_masks(ade_full, tmp_path, capsys):
    from pipelines import inspect

    _, out = ade_full
    assert inspect.run([str(out), "--pictures", str(tmp_path)]) == 0, capsys.readouterr().err
    assert (tmp_path / "contact_sheet.png").exists()


def test_inspect_names_a_mask_whose_depth_is_not_the_run_s(ade_full, tmp_path):
    """A record of an 8-bit mask in a run summary.json says is 16-bit is an error, not a mask read
    with its values scaled."""
    import shutil

    import tensorflow as tf

    from beam_tfrecord.read.verify import verify_output

    _, out = ade_full
    copy = tmp_path / "out"
    shutil.copytree(out, copy)
    (shard,) = copy.glob("validation-*.tfrecord")
    records = [tf.train.Example.FromString(r.numpy()) for r in tf.data.TFRecordDataset(str(shard))]
    feature = records[0].features.feature["image/segmentation/class/encoded"].bytes_list
    eight = io.BytesIO()
    Image.fromarray(np.zeros((4, 4), np.uint8)).save(eight, format="PNG")
    feature.value[0] = eight.getvalue()
    with tf.io.TFRecordWriter(str(shard)) as writer:
        for record in records:
            writer.write(record.SerializeToString())
    errors = verify_output(str(copy)).errors
    assert any("its mask is a PNG of 8 bits; summary.json says uint16" in e for e in errors), errors


def test_the_contact_sheet_colours_ids_past_255_from_the_palette():
    palette = [(0, 0, 0)] * 300 + [(10, 200, 30)]
    ids = np.full((8, 8), 300, np.uint16)
    ids[:, :4] = 65535  # ignored: left as the picture shows it
    png = io.BytesIO()
    Image.fromarray(ids).save(png, format="PNG")
    thumb = draw_class_mask(Image.new("RGB", (8, 8), (255, 255, 255)), png.getvalue(), palette, 65535)
    pixels = np.asarray(thumb)
    assert tuple(pixels[0, 0]) == (255, 255, 255)
    assert tuple(pixels[0, 7]) != (255, 255, 255) and pixels[0, 7, 1] > pixels[0, 7, 0]


def test_a_value_outside_the_class_list_is_still_a_named_reject(tmp_path):
    tree = gen.ade20k_full(tmp_path / "data", training=2, validation=1)
    path = tree.root / "annotations" / "training" / "ADE_train_00000002.png"
    mask = np.asarray(Image.open(path)).copy()
    mask[0, 0] = gen.ADE20K_FULL_CLASSES  # 3688: one past the last class, not the ignore value
    Image.fromarray(mask).save(path)
    out = tmp_path / "out"
    assert convert(tree.root, out, *SEGMENTATION, "--ignore_value", "65535") == 0
    found = {r["path"]: r for r in rejects(out) if r["reason"] != "skipped"}
    assert list(found) == ["images/training/ADE_train_00000002.jpg"]
    assert found["images/training/ADE_train_00000002.jpg"]["reason"] == reasons.CLASS_MASK_UNKNOWN_VALUE.code
    assert "3688" in found["images/training/ADE_train_00000002.jpg"]["detail"]
    assert "0 to 3687 or the ignore value 65535" in found["images/training/ADE_train_00000002.jpg"]["detail"]
    assert summary(out)["consistent"]


def test_the_default_ignore_value_among_more_than_255_classes_fails_in_one_line(tmp_path, capsys):
    tree = gen.ade20k_full(tmp_path / "data", training=1, validation=1)
    assert convert(tree.root, tmp_path / "out", *SEGMENTATION) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert "255 is a class id of the 3688 classes" in err[-1] and "ignore_value" in err[-1]


@pytest.mark.parametrize("masks", ["png", "tiff"])
def test_microscopy_label_images_keep_every_nucleus_id(tmp_path, masks):
    """16-bit label images (a PNG as Pillow writes it, a Deflate TIFF as tifffile does) of 16-bit
    pictures, no class list: the ids are the names, up to the largest (1200), and every reader
    gives them unscaled, beside the picture's own 16 bits."""
    from beam_tfrecord import load_dataset

    tree = gen.microscopy_nuclei(tmp_path / "data", masks=masks)
    out = tmp_path / "out"
    assert convert(tree.root, out, *SEGMENTATION, "--ignore_value", "65535") == 0
    assert summary(out)["segmentation"]["mask_dtype"] == "uint16"
    with open(out / "labels.txt", encoding="utf-8") as handle:
        assert handle.read().splitlines()[-1] == "1200"
    assert_masks(stored(out), tree.images)
    seen = {}
    for split in summary(out)["splits"]:
        for image, mask in load_dataset(str(out), split, batch_size=None, shuffle=False):
            assert image.dtype.name == "uint16" and mask.dtype.name == "uint16"
            seen[image.shape[:2]] = mask.numpy()[..., 0]
    for expected in tree.images.values():
        np.testing.assert_array_equal(seen[expected.shape], expected)


def test_ids_past_255_with_the_default_ignore_value_say_which_option_to_give(tmp_path, capsys):
    tree = gen.microscopy_nuclei(tmp_path / "data", count=2, largest=600)
    assert convert(tree.root, tmp_path / "out", *SEGMENTATION) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert "255 is a class id of the 601 classes" in err[-1] and "ignore_value" in err[-1]


def test_a_run_of_8_bit_masks_is_as_it_always_was(tmp_path):
    """Ids and the ignore value within 255: 8-bit PNGs, and the section written without
    `mask_dtype`, as before."""
    tree = gen.unnamed_ids(tmp_path / "data")
    out = tmp_path / "out"
    assert convert(tree.root, out, *SEGMENTATION) == 0
    section = summary(out)["segmentation"]
    assert "mask_dtype" not in section and "16-bit" not in section["found_at"]
    assert section["mask_key"] == "image/segmentation/class/encoded (a single-channel PNG the picture's size)"
    assert_masks(stored(out), tree.images)
    assert all(record["mask_png"][24] == 8 for record in iter_examples(str(out)))
    assert MaskRule(256, None).dtype == "uint8"


@pytest.mark.parametrize(
    ("rule", "dtype"),
    [
        (MaskRule(21), "uint8"),  # VOC: 255 the ignore value
        (MaskRule(256, None), "uint8"),  # ids 0..255
        (MaskRule(257, None), "uint16"),  # id 256
        (MaskRule(151, 256), "uint16"),  # an ignore value past 255
        (MaskRule(3688, 65535), "uint16"),
    ],
)
def test_the_run_s_mask_type_comes_from_its_largest_id_or_ignore_value(rule, dtype):
    assert rule.dtype == dtype


def test_the_ignore_value_takes_16_bits_and_no_more():
    assert AnnotationConfig(task="segmentation", ignore_value=65535).ignore_value == 65535
    from beam_tfrecord.config_base import ConfigError

    with pytest.raises(ConfigError, match="0 to 65535"):
        AnnotationConfig(task="segmentation", ignore_value=65536)


def _tiff(array: np.ndarray, **options) -> bytes:
    out = io.BytesIO()
    tifffile.imwrite(out, array, **options)
    return out.getvalue()


def test_tiff_masks_are_read_whole_or_named_unreadable():
    ids = np.arange(12 * 10, dtype=np.uint16).reshape(12, 10) * 30
    rule = MaskRule(4000, 65535)
    for options in ({}, {"compression": "zlib"}, {"tile": (16, 16)}):
        found, _ = class_ids(_tiff(ids, **options), rule, "m.tif")
        assert found.dtype == np.uint16
        np.testing.assert_array_equal(found, ids)
    found, _ = class_ids(_tiff(ids.astype(np.int32)), rule, "m.tif")  # scikit-image's label images
    np.testing.assert_array_equal(found, ids)
    for bad, said in (
        (_tiff(ids.astype(np.float32)), "float32 samples"),
        (_tiff(np.stack([ids, ids])), "2 pages"),
        (_tiff(ids)[:-40], "ends at byte"),
    ):
        with pytest.raises(Reject, match=said) as caught:
            class_ids(bad, rule, "m.tif")
        assert caught.value.registered == reasons.CLASS_MASK_UNREADABLE
    negative = ids.astype(np.int32)
    negative[0, 0] = -1
    with pytest.raises(Reject) as caught:
        class_ids(_tiff(negative), rule, "m.tif")
    assert caught.value.registered == reasons.CLASS_MASK_UNKNOWN_VALUE


def test_shapes_of_a_class_past_255_are_drawn_with_their_own_id(tmp_path):
    """A YOLO segmentation tree naming 400 classes: a polygon of its class 399 is class id 400
    (0 the background), drawn into a 16-bit mask, never wrapped into 8 bits."""
    from imagegen import jpeg, write_tree
    from yoloseggen import label_text

    names = "".join(f"  {i}: c{i}\n" for i in range(400))
    files = {"data.yaml": f"path: .\ntrain: images/train\nval: images/train\nnames:\n{names}".encode()}
    files["images/train/a.jpg"] = jpeg(64, 48, seed=1)
    shapes = [(399, [0.05, 0.05, 0.95, 0.05, 0.95, 0.95]), (3, [0.1, 0.6, 0.4, 0.6, 0.4, 0.9, 0.1, 0.9])]
    files["labels/train/a.txt"] = label_text(shapes)
    write_tree(tmp_path / "data", files)
    out = tmp_path / "out"
    args = (*SEGMENTATION, "--annotations", "yolo", "--ignore_value", "65535")
    assert convert(tmp_path / "data", out, *args) == 0
    assert summary(out)["segmentation"]["mask_dtype"] == "uint16"
    (mask,) = stored(out).values()
    assert mask.dtype == np.uint16 and set(np.unique(mask)) == {0, 4, 400}


def test_mask2former_s_ade20k_full_tiffs_are_a_pair_of_folders_named_with_annotations_path(tmp_path):
    """Mask2Former's 16-bit TIFFs of 847 ids beside its images_detectron2/: every id as stored,
    the split folders kept, and the ids the names (the tree holds no class list)."""
    tree = gen.mask2former_ade20k_full(tmp_path / "data")
    out = tmp_path / "out"
    args = ("--annotations", "folders", "--annotations_path", str(tree.root / "annotations_detectron2"))
    assert convert(tree.root / "images_detectron2", out, *SEGMENTATION, *args, "--ignore_value", "65535") == 0
    assert summary(out)["segmentation"]["mask_dtype"] == "uint16"
    with open(out / "labels.txt", encoding="utf-8") as handle:
        assert len(handle.read().splitlines()) == gen.MASK2FORMER_ADE_FULL_CLASSES
    assert_masks(stored(out), tree.images)
    splits = {r["filename"]: name for name in ("train", "validation") for r in iter_examples(str(out), name)}
    assert splits == tree.splits
