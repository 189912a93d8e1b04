"""Odd input trees end to end: symlinks (followed, loops reported), broken links, FIFOs,
directories named like images, duplicate files, very long paths, a class with no valid image,
files that vanish or change after listing, and unreadable files."""

from __future__ import annotations

import hashlib
import os
from collections.abc import Callable
from pathlib import Path

import imagegen
import numpy as np
import pytest
import tensorflow as tf
from outputcheck import read_records, rejects, summary

from beam_tfrecord.elements import ConvertedRecord, PlannedInput, RejectLine
from beam_tfrecord.images import inputs as records
from beam_tfrecord.images.options import ImageConfig
from beam_tfrecord.write.records import convert_input

LONG_DIR = "/".join(["d" * 200] * 14)  # about 2,800 characters; Linux allows 4,096 in a path
LONG_NAME = "n" * 240 + ".jpg"  # Linux allows 255 in a name


def test_odd_tree_every_input_accounted_for(tmp_path):
    from pipelines.convert import run  # here, so the library tests below never wait on the CLI

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
        "empty_class/broken.jpg": "corrupt",  # starts like a JPEG, cut short
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
    outcome = convert_input(item(tmp_path / "a" / "1.jpg"), "tfds", ImageConfig())
    assert isinstance(outcome, RejectLine) and outcome.reason == "unreadable"


def test_a_file_without_read_permission_is_unreadable():
    """Read without root's powers (root reads anything): the reject names the permission error."""
    with imagegen.folder_anyone_can_enter() as root:
        path = root / "1.jpg"
        path.write_bytes(imagegen.jpeg())
        path.chmod(0)
        outcome = imagegen.call_without_root(convert_input, item(path), "tfds", ImageConfig())
    assert isinstance(outcome, RejectLine) and outcome.reason == "unreadable", outcome
    assert outcome.detail.startswith("PermissionError: [Errno 13] Permission denied"), outcome.detail


# Reasons a decoder gives for bytes that are not one whole image.
DECODE_REJECTS = ("empty", "truncated", "corrupt", "not_an_image")


def rewritten_midway(path: Path, after: int, rewrite: Callable[[], None], seen: list[bytes]):
    """A stand-in for `records.read_bytes` that makes the race certain instead of likely: it
    reads the first `after` bytes of the real file, lets `rewrite` change the file, then reads
    the rest through the same descriptor. Unbuffered, so nothing read ahead hides the rewrite.
    Every byte string it returns is kept in `seen`."""

    def read_bytes(name: str, limit: int | None = None, storage: object = None) -> bytes:
        assert name == str(path)
        with open(name, "rb", buffering=0) as handle:
            first = handle.read(after)
            assert len(first) == after
            rewrite()
            data = first + handle.readall()
        seen.append(data)
        return data

    return read_bytes


def in_place(path: Path, data: bytes) -> Callable[[], None]:
    """Rewrite the same inode, as `open(path, "r+b")` does: a reader sees the new bytes next."""

    def rewrite() -> None:
        with open(path, "r+b") as handle:
            handle.write(data)
            handle.truncate()

    return rewrite


def replaced(path: Path, data: bytes) -> Callable[[], None]:
    """Write a new file and rename it over the old, as editors save: a reader keeps the old one."""

    def rewrite() -> None:
        path.with_suffix(".new").write_bytes(data)
        os.replace(path.with_suffix(".new"), path)

    return rewrite


def check_consistent(outcome: ConvertedRecord | RejectLine, data: bytes) -> None:
    """docs/guarantees.md's promise: a record of exactly the bytes read (`image/key/sha256`), or a reject."""
    if isinstance(outcome, RejectLine):
        assert outcome.reason in DECODE_REJECTS and outcome.detail, outcome
        return
    assert isinstance(outcome, ConvertedRecord), outcome
    example = tf.train.Example.FromString(outcome.example).features.feature
    stored = example["image/encoded"].bytes_list.value[0]
    assert example["image/key/sha256"].bytes_list.value[0].decode() == hashlib.sha256(data).hexdigest()
    assert outcome.content_sha256 == hashlib.sha256(data).hexdigest()
    if not outcome.reencoded:
        assert stored == data
    assert tf.io.decode_image(stored).shape == (outcome.height, outcome.width, 3)


def test_a_file_rewritten_in_place_while_being_read_is_a_record_of_the_bytes_read(tmp_path, monkeypatch):
    """The reader gets the header and first 10 rows of one picture, then the file is rewritten in
    place with another of the same size and the reader gets the rest: a valid image that is
    neither file. Its record must hash exactly those bytes and hold exactly their pixels, so a
    record hashing one read and decoding another (or re-reading the file) fails here."""
    path = tmp_path / "1.ppm"
    old, new = imagegen.ppm(48, 32, seed=1), imagegen.ppm(48, 32, seed=2)
    header = len(old) - 48 * 32 * 3
    path.write_bytes(old)
    seen: list[bytes] = []
    reader = rewritten_midway(path, header + 10 * 48 * 3, in_place(path, new), seen)
    monkeypatch.setattr(records, "read_bytes", reader)

    outcome = convert_input(item(path, "a/1.ppm"), "tfds", ImageConfig())

    (data,) = seen
    assert data != old and data != new and path.read_bytes() == new  # the race did happen
    check_consistent(outcome, data)
    assert isinstance(outcome, ConvertedRecord) and outcome.reencoded
    stored = tf.train.Example.FromString(outcome.example).features.feature["image/encoded"]
    pixels = tf.io.decode_image(stored.bytes_list.value[0]).numpy()
    rows = [np.asarray(imagegen.gradient(48, 32, seed=seed)) for seed in (1, 2)]
    np.testing.assert_array_equal(pixels, np.concatenate([rows[0][:10], rows[1][10:]]))


# libjpeg (Pillow's and TensorFlow's) decodes a scan whose data runs into another file's with a
# warning, padding or skipping what does not fit: those mixes stay records, of the mixed bytes.
@pytest.mark.parametrize(
    ("old", "new", "how", "expected"),
    [
        (imagegen.jpeg(64, 48, seed=1), imagegen.jpeg(40, 30, seed=2), in_place, "record"),
        (imagegen.jpeg(40, 30, seed=2), imagegen.jpeg(64, 48, seed=1), in_place, "record"),
        (imagegen.png(64, 48, seed=1), imagegen.png(64, 48, seed=2), in_place, "reject"),
        (imagegen.jpeg(64, 48, seed=1), b"", in_place, "reject"),
        (imagegen.jpeg(64, 48, seed=1), imagegen.jpeg(40, 30, seed=2), replaced, "record"),
    ],
    ids=["jpeg-shrinks", "jpeg-grows", "png-same-size", "emptied", "renamed-over"],
)
def test_a_file_rewritten_while_being_read_gives_a_consistent_outcome(
    tmp_path, monkeypatch, old, new, how, expected
):
    """Halfway through the read the file changes: in place (the reader sees a mix of two files,
    or a file cut short) or by a rename over it (the reader keeps the file it opened). Either
    way the outcome is a record of exactly the bytes read or a reject with a reason; never a
    crash."""
    path = tmp_path / "1.img"
    path.write_bytes(old)
    seen: list[bytes] = []
    monkeypatch.setattr(records, "read_bytes", rewritten_midway(path, len(old) // 2, how(path, new), seen))

    outcome = convert_input(item(path), "tfds", ImageConfig())

    (data,) = seen
    assert path.read_bytes() == new and data[: len(old) // 2] == old[: len(old) // 2]
    check_consistent(outcome, data)
    assert isinstance(outcome, ConvertedRecord if expected == "record" else RejectLine), outcome
    if how is in_place:
        assert data not in (old, new)  # the race did happen: the reader saw parts of both
    else:
        assert data == old  # the descriptor still reads the file that was opened


def test_a_path_that_is_not_utf8_is_a_reject_not_a_crash(tmp_path):
    """A name from an old archive or another system (`caf\\xe9`, Latin-1) cannot be a record's
    `image/filename` or a line of any JSON output: each such file is one reject line that says
    so, shown with `\\xNN`, and the rest of the run goes on (it used to stop with a
    UnicodeEncodeError while the splits were hashed)."""
    from pipelines.convert import run

    root = tmp_path / "in"
    imagegen.write_tree(root, {"cat/1.jpg": imagegen.jpeg(seed=1), "dog/2.jpg": imagegen.jpeg(seed=2)})
    base = os.fsencode(root)
    os.makedirs(base + b"/caf\xe9")  # a folder: every file in it
    for name in (b"/caf\xe9/3.jpg", b"/cat/\xff4.jpg"):
        with open(base + name, "wb") as handle:
            handle.write(imagegen.jpeg(seed=3))
    out = tmp_path / "out"
    assert run(["--input", str(root), "--output", str(out), "--no_progress"]) == 0

    written = sorted(r["image/filename"].decode() for r in read_records(out, "train"))
    assert written == ["cat/1.jpg", "dog/2.jpg"]
    assert {r["path"]: r["reason"] for r in rejects(out)} == {
        "caf\\xe9/3.jpg": "undecodable_name",
        "cat/\\xff4.jpg": "undecodable_name",
    }
    result = summary(out)
    assert result["consistent"] and result["inputs"] == 4
    assert result["class_names"] == ["cat", "dog"]  # the folder of rejects is no class
    assert (out / "labels.txt").read_text().split() == ["cat", "dog"]
