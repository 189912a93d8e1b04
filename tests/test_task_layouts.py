"""A class-folder tree with split folders keeps its splits; a tree that holds another task's labels
is never converted into classes named after its folders."""

from __future__ import annotations

import captiongen
import pytest
import segmentationgen
from conftest import convert
from imagegen import jpeg, write_tree
from outputcheck import rejects, summary

from beam_tfrecord.read.examples import iter_examples


def _split_tree(root) -> dict[str, tuple[str, str]]:
    """train/, val/ and test/ of cat and dog folders (Kaggle's and TFDS ImageFolder's layout), one
    picture copied into train and val; relpath -> (split, class)."""
    files, expected = {}, {}
    for s, (split, word) in enumerate((("train", "train"), ("val", "validation"), ("test", "test"))):
        for c, label in enumerate(("cat", "dog")):
            for i in range(3):
                relpath = f"{split}/{label}/{label}{i}.jpg"
                # A seed of its own for each picture: hash() of strings changes with each process,
                # and two equal seeds would be one more copy than the test plants.
                files[relpath] = jpeg(30 + i, 20, seed=100 * s + 10 * c + i)
                expected[relpath] = (word, label)
    files["val/cat/copy.jpg"] = files["train/cat/cat0.jpg"]
    expected["val/cat/copy.jpg"] = ("validation", "cat")
    write_tree(root, files)
    return expected


def test_split_folders_are_the_splits_and_the_folder_under_them_the_class(tmp_path):
    expected = _split_tree(tmp_path / "data")
    out = tmp_path / "out"
    assert convert(tmp_path / "data", out) == 0
    names = (out / "labels.txt").read_text().split()
    found = {
        record["filename"]: (split, names[record["label"]])
        for split in summary(out)["splits"]
        for record in iter_examples(str(out), split)
    }
    assert found == expected
    assert summary(out)["split_method"].startswith("declared by the split folders")
    # The copy in two splits is a leak, said so (not only counted as a duplicate).
    assert summary(out)["cross_split_duplicates"] == 2
    assert any("splits leak" in warning for warning in summary(out)["warnings"])


def test_given_splits_override_the_split_folders(tmp_path, caplog):
    _split_tree(tmp_path / "data")
    out = tmp_path / "out"
    with caplog.at_level("INFO"):
        assert convert(tmp_path / "data", out, "--splits", "train=0.5,validation=0.5") == 0
    assert summary(out)["split_method"] == "hash"
    assert "override the split folders" in caplog.text


@pytest.mark.parametrize(
    ("layout", "told"),
    [
        ("voc_segmentation", "--task segmentation"),
        ("cityscapes", "--task segmentation"),
        ("coco_captions", "--annotations coco"),
        ("flickr8k", "--task captions"),
    ],
)
def test_a_tree_of_another_task_is_never_turned_into_classes(tmp_path, capsys, layout, told):
    root = tmp_path / "data"
    if layout == "voc_segmentation":
        root = segmentationgen.voc2012(root).root
    elif layout == "cityscapes":
        segmentationgen.cityscapes(root)
    elif layout == "coco_captions":
        captiongen.coco2017(root)
    else:
        captiongen.flickr8k(root)
    out = tmp_path / "out"
    assert convert(root, out) == 2
    errors = [line for line in capsys.readouterr().err.splitlines() if line.startswith("error")]
    assert len(errors) == 1 and told in errors[0] and "--task classification" in errors[0]
    assert not out.exists() or not (out / "summary.json").exists()
    # Asked for on purpose, the folders are classes all the same.
    assert convert(root, tmp_path / "asked", "--task", "classification") == 0


def test_a_voc_devkit_converted_for_detection_keeps_its_segmentation_masks_out(tmp_path):
    """VOC 2012 holds SegmentationClass/ and SegmentationObject/ PNGs beside JPEGImages/: they are
    no pictures of the detection dataset (as negatives, the real devkit would gain 5,826)."""
    tree = segmentationgen.voc2012(tmp_path / "data")
    out = tmp_path / "out"
    assert convert(tree.root, out, "--annotations", "voc") == 0
    stored = {r["filename"] for split in summary(out)["splits"] for r in iter_examples(str(out), split)}
    assert stored == set(tree.images) | set(
        tree.unmasked
    )  # every JPEG (the devkit's Main lists name them all), nothing else
    skipped = {r["path"]: r["detail"] for r in rejects(out) if r["reason"] == "skipped"}
    masks = [path for path in skipped if path.startswith(("SegmentationClass/", "SegmentationObject/"))]
    assert masks and all("not a picture of the Pascal VOC devkit" in skipped[path] for path in masks)


def test_an_append_over_split_folders_to_a_hashed_dataset_is_refused_in_one_line(tmp_path, capsys):
    """A dataset split by hash grows only by hash: new pictures put in split folders since would
    land by their folders, apart from where a full run would hash them."""
    write_tree(
        tmp_path / "data",
        {f"{c}/{c}{i}.jpg": jpeg(30 + i, 20, seed=i) for c in ("cat", "dog") for i in range(3)},
    )
    out = tmp_path / "out"
    assert convert(tmp_path / "data", out) == 0
    write_tree(tmp_path / "data", {"train/cat/new.jpg": jpeg(33, 21, seed=5)})
    assert convert(tmp_path / "data", out, "--append") == 2
    errors = [line for line in capsys.readouterr().err.splitlines() if line.startswith("error")]
    assert len(errors) == 1 and "--append refused" in errors[0] and "splits are hash" in errors[0]
