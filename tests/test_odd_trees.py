"""Odd input trees end to end: symlinks (followed, loops reported), broken links, FIFOs,
directories named like images, duplicate files, very long paths, a class with no valid image,
files that vanish or change after listing, and unreadable files."""

from __future__ import annotations

import hashlib
import os
import threading

import imagegen
import pytest
import tensorflow as tf
from outputcheck import read_records, rejects, summary

from beam_tfrecord.images import ImageOptions
from beam_tfrecord.plan import PlannedInput, RejectLine
from beam_tfrecord.records import ConvertedRecord, convert_input
from pipelines.convert import run

LONG_DIR = "/".join(["d" * 200] * 14)  # about 2,800 characters; Linux allows 4,096 in a path
LONG_NAME = "n" * 240 + ".jpg"  # Linux allows 255 in a name


def test_odd_tree_every_input_accounted_for(tmp_path):
    root = tmp_path / "in"
    imagegen.write_tree(
        root,
        {
            "cat/1.jpg": imagegen.jpeg(seed=1),
            "cat/copy of 1.jpg": imagegen.jpeg(seed=1),  # same bytes, another name
            "cat/x.jpg/inner.jpg": imagegen.jpeg(seed=2),  # a directory named like an image
            f"cat/{LONG_DIR}/{LONG_NAME}": imagegen.jpeg(seed=3),
            "empty_class/broken.jpg": b"\xff\xd8\xff",  # a class whose only file is broken
        },
    )
    imagegen.write_tree(tmp_path / "elsewhere", {"dog/1.jpg": imagegen.jpeg(seed=4)})
    (root / "dog").symlink_to(tmp_path / "elsewhere" / "dog", target_is_directory=True)
    (root / "dog" / "loop").symlink_to(root, target_is_directory=True)  # inside the linked folder
    (root / "cat" / "gone.jpg").symlink_to(tmp_path / "nowhere.jpg")
    os.mkfifo(root / "cat" / "pipe.jpg")
    out = tmp_path / "out"
    assert run(["--input", str(root), "--output", str(out), "--no_progress"]) == 0

    written = sorted(r["image/filename"].decode() for r in read_records(out, "train"))
    assert written == sorted(
        ["cat/1.jpg", "cat/copy of 1.jpg", "cat/x.jpg/inner.jpg", f"cat/{LONG_DIR}/{LONG_NAME}", "dog/1.jpg"]
    )
    assert {r["path"]: r["reason"] for r in rejects(out)} == {
        "cat/gone.jpg": "unreadable",
        "cat/pipe.jpg": "unreadable",
        "dog/loop": "skipped",
        "empty_class/broken.jpg": "not_an_image",
    }
    result = summary(out)
    assert result["consistent"] and result["inputs"] == 8 and result["skipped"] == 1
    assert result["duplicate_records"] == 1
    assert result["class_names"] == ["cat", "d" * 200, "dog", "empty_class", "x.jpg"]
    assert "class 'empty_class' has no valid image" in result["warnings"]
    assert (out / "labels.txt").read_text().splitlines() == result["class_names"]


def item(path, relpath: str = "a/1.jpg") -> PlannedInput:
    return PlannedInput(relpath, str(path), 10, "train", 0, "a")


def test_a_file_gone_after_listing_is_unreadable(tmp_path):
    outcome = convert_input(item(tmp_path / "a" / "1.jpg"), "tfds", ImageOptions())
    assert isinstance(outcome, RejectLine) and outcome.reason == "unreadable"


@pytest.mark.skipif(os.geteuid() == 0, reason="root reads files whatever their permissions say")
def test_a_file_without_read_permission_is_unreadable(tmp_path):
    path = tmp_path / "1.jpg"
    path.write_bytes(imagegen.jpeg())
    path.chmod(0)
    outcome = convert_input(item(path), "tfds", ImageOptions())
    assert isinstance(outcome, RejectLine) and outcome.reason == "unreadable"


def test_a_file_rewritten_while_being_read_gives_a_consistent_outcome(tmp_path):
    """A record always describes the bytes actually read (its sha256 matches them); a half
    written file becomes a reject; nothing raises."""
    path = tmp_path / "1.jpg"
    versions = [imagegen.jpeg(64, 48, seed=s) for s in range(3)]
    path.write_bytes(versions[0])
    stop = threading.Event()

    def rewrite() -> None:
        n = 0
        while not stop.is_set():
            data = versions[n % 3]
            with open(path, "r+b") as handle:  # in place, in two halves: readers can see a mix
                handle.write(data[: len(data) // 2])
                handle.flush()
                handle.write(data[len(data) // 2 :])
                handle.truncate()
            n += 1

    writer = threading.Thread(target=rewrite)
    writer.start()
    try:
        outcomes = [convert_input(item(path), "tfds", ImageOptions()) for _ in range(200)]
    finally:
        stop.set()
        writer.join()
    for outcome in outcomes:
        if isinstance(outcome, RejectLine):
            assert outcome.reason in ("empty", "truncated", "corrupt", "not_an_image"), outcome
            continue
        assert isinstance(outcome, ConvertedRecord)
        example = tf.train.Example.FromString(outcome.example).features.feature
        stored = example["image/encoded"].bytes_list.value[0]
        assert example["image/key/sha256"].bytes_list.value[0].decode() == outcome.content_sha256
        if not outcome.reencoded:
            assert hashlib.sha256(stored).hexdigest() == outcome.content_sha256
        assert tf.io.decode_image(stored).shape == (outcome.height, outcome.width, 3)
