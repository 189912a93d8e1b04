"""`--append` grows a segmentation, captions or keypoints dataset as a run over every picture
would make it: the same records, and each task's summary section counted over old and new."""

from __future__ import annotations

import shutil

import captiongen
import keypointgen
import pytest
import segmentationgen
from conftest import convert
from outputcheck import summary

from beam_tfrecord.read.examples import iter_examples


def _build(task: str, root):
    """A dataset of the task, and the pictures (with their labels) the first run leaves out."""
    if task == "segmentation":
        tree = segmentationgen.kaggle_binary(root, count=6)
        later = [
            "images/sample_005.jpg",
            "masks/sample_005.png",
            "images/sample_006.jpg",
            "masks/sample_006.png",
        ]
        return tree.root, later, ("--task", "segmentation")
    if task == "captions":
        expected = captiongen.flickr8k(root, pictures=5)
        name = sorted(expected)[-1]
        return root, [name], ("--task", "captions")
    keypointgen.ultralytics_pose(root)
    return root, ["images/val"], ("--task", "keypoints", "--annotations", "yolo")


def _records(output) -> list[tuple]:
    found = []
    for split in summary(output)["splits"]:
        for record in iter_examples(str(output), split):
            found.append((split, record["filename"], record["sha256"]))
    return sorted(found)


@pytest.mark.parametrize("task", ["segmentation", "captions", "keypoints"])
def test_an_append_equals_a_run_over_every_picture(tmp_path, task):
    root, later, args = _build(task, tmp_path / "data")
    first = tmp_path / "first"
    shutil.copytree(root, first)
    for relpath in later:
        target = first / relpath
        shutil.rmtree(target) if target.is_dir() else target.unlink()
    if task == "captions":  # the first run's captions file names only its own pictures
        lines = (first / "captions.txt").read_text().splitlines()
        kept = [line for line in lines if not line.startswith(later[0].split("/")[-1])]
        (first / "captions.txt").write_text("\n".join(kept) + "\n")
    grown, whole = tmp_path / "grown", tmp_path / "whole"
    assert convert(first, grown, *args) == 0
    assert convert(root, grown, *args, "--append") == 0
    assert convert(root, whole, *args) == 0
    assert [r[1:] for r in _records(grown)] == [r[1:] for r in _records(whole)]
    section = {"segmentation": "segmentation", "captions": "captions", "keypoints": "keypoints"}[task]
    grown_section, whole_section = summary(grown)[section], summary(whole)[section]
    for key in ("per_class", "captions", "pictures_with_captions", "labelled", "visible"):
        assert grown_section.get(key) == whole_section.get(key), key
