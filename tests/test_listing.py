"""Listing through Beam's filesystems: directories, globs, single files, and clear errors."""

from __future__ import annotations

import pytest

from beam_tfrecord.listing import list_inputs, skip_reason


def make(root, *relpaths):
    for relpath in relpaths:
        path = root / relpath
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(b"x" * 3)


def test_directory_is_listed_recursively_with_relative_paths(tmp_path):
    make(tmp_path, "a/1.jpg", "a/b/2.jpg", "3.png")
    listed = list_inputs(str(tmp_path))
    assert [f.relpath for f in listed] == ["3.png", "a/1.jpg", "a/b/2.jpg"]
    assert all(f.size == 3 and f.path.endswith(f.relpath) for f in listed)


def test_glob_lists_matches_relative_to_its_fixed_part(tmp_path):
    make(tmp_path, "cat/1.jpg", "cat/2.png", "dog/3.jpg")
    listed = list_inputs(str(tmp_path / "*" / "*.jpg"))
    assert [f.relpath for f in listed] == ["cat/1.jpg", "dog/3.jpg"]


def test_single_file(tmp_path):
    make(tmp_path, "cat/1.jpg")
    assert [f.relpath for f in list_inputs(str(tmp_path / "cat" / "1.jpg"))] == ["1.jpg"]


def test_missing_and_empty_inputs_are_clear_errors(tmp_path):
    with pytest.raises(ValueError, match="does not exist"):
        list_inputs(str(tmp_path / "nope"))
    (tmp_path / "empty").mkdir()
    with pytest.raises(ValueError, match="holds no files"):
        list_inputs(str(tmp_path / "empty"))


@pytest.mark.parametrize(
    ("relpath", "skipped"),
    [
        ("cat/1.jpg", False),
        ("cat/Thumbs.db", True),
        (".DS_Store", True),
        ("cat/.hidden.jpg", True),
        (".git/objects/x", True),
        ("__MACOSX/cat/1.jpg", True),
        ("cat/desktop.ini", True),
    ],
)
def test_skip_reason(relpath, skipped):
    assert (skip_reason(relpath) is not None) == skipped
