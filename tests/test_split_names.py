"""`--keep_split_names`: the splits keep the names the dataset declares, so DeepLab's
`data_generator` (`os.path.join(dataset_dir, '%s-*' % split)`) finds its shards; without it the
splits are the readers' train, validation and test, as before."""

from __future__ import annotations

import glob
import os

import annotationgen
import numpy as np
import segmentationgen as gen
import yoloseggen
from conftest import convert
from imagegen import jpeg, write_tree
from outputcheck import rejects, summary
from test_segmentation import splits_of, stored_masks

from beam_tfrecord.read.examples import iter_examples


def deeplab_files(dataset_dir, split: str) -> list[str]:
    """The files DeepLab's data_generator reads for `split`, found as it finds them."""
    return sorted(glob.glob(os.path.join(str(dataset_dir), "%s-*" % split)))  # noqa: UP031 (DeepLab's own expression)


def test_voc_with_sbd_keeps_deeplab_s_split_names_and_its_globs_find_the_shards(tmp_path):
    tree = gen.voc2012_aug(tmp_path / "data")
    out = tmp_path / "out"
    assert convert(tree.root, out, "--task", "segmentation", "--keep_split_names") == 0

    def stem(path: str) -> str:
        return os.path.splitext(os.path.basename(path))[0]

    stored = {stem(name): split for name, split in splits_of(out).items()}
    assert {n for n, s in stored.items() if s == "val"} == {
        stem(r) for r, s in tree.splits.items() if s == "validation"
    }
    assert set(stored.values()) == {"train_aug", "val"}
    assert len(stored) == len(tree.images)
    for split in ("train_aug", "val"):  # the shards, and their .idx offsets beside them
        found = deeplab_files(out, split)
        assert any(f.endswith(".tfrecord") for f in found), (split, found)
    assert not deeplab_files(out, "train") and not deeplab_files(out, "validation")
    # Every mask is the source's, whatever the split is called.
    masks = {stem(name): mask for name, mask in stored_masks(out).items()}
    for relpath, expected in tree.images.items():
        np.testing.assert_array_equal(
            masks[stem(relpath)][..., 0] if masks[stem(relpath)].ndim == 3 else masks[stem(relpath)],
            expected,
            err_msg=relpath,
        )
    # The lists left out, and why, are in the summary.
    method = summary(out)["split_method"]
    assert "left out: train (repeats pictures of train_aug), trainval" in method, method
    assert len([r for r in rejects(out) if r["reason"] == "undeclared_split"]) == len(tree.unmasked)


def test_the_default_names_are_unchanged(tmp_path):
    tree = gen.voc2012_aug(tmp_path / "data")
    out = tmp_path / "out"
    assert convert(tree.root, out, "--task", "segmentation") == 0
    assert set(splits_of(out).values()) == {"train", "validation"}
    assert not deeplab_files(out, "val") and not deeplab_files(out, "train_aug")


def test_a_devkit_without_sbd_keeps_train_and_val_and_leaves_trainval_out(tmp_path):
    tree = gen.voc2012(tmp_path / "data")
    out = tmp_path / "out"
    assert convert(tree.root, out, "--task", "segmentation", "--keep_split_names") == 0
    assert set(splits_of(out).values()) == {"train", "val"}
    assert deeplab_files(out, "train") and deeplab_files(out, "val")
    assert "left out: trainval (repeats pictures of train)" in summary(out)["split_method"]


def test_split_folders_keep_their_names(tmp_path):
    files = {
        f"{split}/{c}/{c}_{i}.jpg": jpeg(16, 12, seed=10 * n + 3 * j + i)
        for n, split in enumerate(("train", "val"))
        for j, c in enumerate(("cat", "dog"))
        for i in range(2)
    }
    write_tree(tmp_path / "data", files)
    out = tmp_path / "out"
    assert convert(tmp_path / "data", out, "--keep_split_names") == 0
    assert set(summary(out)["splits"]) == {"train", "val"}


def test_voc_s_detection_lists_and_yolo_s_data_yaml_keep_their_names(tmp_path):
    tree = gen.voc2012(tmp_path / "data")
    out = tmp_path / "voc"
    assert convert(tree.root, out, "--task", "detection", "--keep_split_names") == 0
    assert set(summary(out)["splits"]) == {"train", "val"}
    yoloseggen.ultralytics_tree(tmp_path / "coco8-seg")
    out = tmp_path / "yolo"
    assert convert(tmp_path / "coco8-seg", out, "--annotations", "yolo", "--keep_split_names") == 0
    assert set(summary(out)["splits"]) == {"train", "val"}


def test_a_source_whose_names_are_not_kept_yet_is_refused_in_one_line(tmp_path, capsys):
    images, boxes, files = [], [], {}
    for i in range(1, 4):
        files[f"val2017/{i:012d}.jpg"] = jpeg(48, 32, seed=i)
        images.append(annotationgen.image(i, f"{i:012d}.jpg"))
        boxes.append(annotationgen.box(i, i, 18, [4, 4, 20, 16]))
    files["annotations/instances_val2017.json"] = annotationgen.instances(images, boxes)
    write_tree(tmp_path / "coco2017", files)
    assert (
        convert(tmp_path / "coco2017", tmp_path / "out", "--annotations", "coco", "--keep_split_names") == 2
    )
    assert "keep_split_names" in capsys.readouterr().err


def test_overlapping_lists_are_each_a_split_when_asked_and_every_deeplab_glob_finds_its_shards(tmp_path):
    tree = gen.voc2012_aug(tmp_path / "data")
    lists = tree.root / "ImageSets" / "Segmentation"
    out = tmp_path / "out"
    args = ("--task", "segmentation", "--keep_split_names", "--overlapping_splits")
    assert convert(tree.root, out, *args) == 0
    found = summary(out)
    for split in ("train", "val", "train_aug", "trainval"):  # DeepLab's pascal_voc_seg splits
        assert any(f.endswith(".tfrecord") for f in deeplab_files(out, split)), split
        listed = set((lists / f"{split}.txt").read_text().split())
        stored = {
            os.path.splitext(os.path.basename(r["filename"]))[0] for r in iter_examples(str(out), split)
        }
        assert stored == listed, split
        assert found["splits"][split]["records"] == len(listed)
    # Each picture read once, its record written in each of its lists; said, and accounted for.
    repeats = sum(found["splits"][s]["records"] for s in found["splits"]) - len(tree.images)
    assert found["in_two_splits"] == repeats > 0
    assert found["consistent"] and found["records"] == found["inputs"] + repeats - found["rejects"]
    assert "pictures in two splits or more" in found["split_method"]
    assert found["duplicate_records"] == 0  # a picture in two splits is no copy


def test_overlapping_splits_needs_the_dataset_s_names(tmp_path, capsys):
    tree = gen.voc2012(tmp_path / "data")
    assert convert(tree.root, tmp_path / "out", "--task", "segmentation", "--overlapping_splits") == 2
    assert "keep_split_names" in capsys.readouterr().err


def test_an_append_with_overlapping_splits_is_refused_in_one_line(tmp_path, capsys):
    tree = gen.voc2012_aug(tmp_path / "data")
    out = tmp_path / "out"
    args = ("--task", "segmentation", "--keep_split_names", "--overlapping_splits")
    assert convert(tree.root, out, *args) == 0
    assert convert(tree.root, out, *args, "--append") == 2
    assert "--overlapping_splits" in capsys.readouterr().err
