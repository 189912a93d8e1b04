"""Listing through Beam's filesystems: directories, globs, single files, and clear errors."""

from __future__ import annotations

import os

import imagegen
import pytest

from beam_tfrecord.plan.listing import list_inputs, skip_reason


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


def problems(listed) -> dict[str, str | None]:
    return {f.relpath: f.problem[0] if f.problem else None for f in listed}


def test_symlinked_directories_are_followed_and_loops_reported_once(tmp_path):
    make(tmp_path, "in/cat/1.jpg", "elsewhere/dog/2.jpg")
    root = tmp_path / "in"
    (root / "dog").symlink_to(tmp_path / "elsewhere" / "dog", target_is_directory=True)
    (root / "cat" / "again").symlink_to(root, target_is_directory=True)  # a loop back to the top
    (root / "cat" / "self").symlink_to(root / "cat", target_is_directory=True)
    listed = list_inputs(str(root))
    assert problems(listed) == {
        "cat/1.jpg": None,
        "cat/again": "skipped",
        "cat/self": "skipped",
        "dog/2.jpg": None,
    }
    assert "loop" in next(f for f in listed if f.relpath == "cat/again").problem[1]


def test_broken_symlinks_and_fifos_are_listed_as_unreadable_not_dropped(tmp_path):
    make(tmp_path, "cat/1.jpg")
    (tmp_path / "cat" / "gone.jpg").symlink_to(tmp_path / "nowhere.jpg")
    os.mkfifo(tmp_path / "cat" / "pipe.jpg")
    listed = list_inputs(str(tmp_path))
    assert problems(listed) == {"cat/1.jpg": None, "cat/gone.jpg": "unreadable", "cat/pipe.jpg": "unreadable"}
    assert "broken symbolic link" in next(f for f in listed if f.relpath == "cat/gone.jpg").problem[1]
    globbed = list_inputs(str(tmp_path / "cat" / "*.jpg"))
    assert [f.relpath for f in globbed] == ["1.jpg", "gone.jpg", "pipe.jpg"]


def test_directories_named_like_images_are_walked_not_listed(tmp_path):
    make(tmp_path, "cat/x.jpg/1.jpg", "cat/2.jpg")
    assert problems(list_inputs(str(tmp_path))) == {"cat/2.jpg": None, "cat/x.jpg/1.jpg": None}


def test_very_long_paths(tmp_path):
    deep = "/".join(["d" * 200] * 15)  # about 3,000 characters, near Linux's PATH_MAX of 4,096
    name = "n" * 240 + ".jpg"  # near NAME_MAX of 255
    make(tmp_path, f"{deep}/{name}")
    (listed,) = list_inputs(str(tmp_path))
    assert listed.relpath == f"{deep}/{name}" and listed.size == 3 and listed.problem is None


def test_unreadable_directory_is_reported():
    """A folder the user may not list is one `unreadable` entry that says why, and the rest of
    the tree is still listed. Listed without root's powers (root lists anything)."""
    with imagegen.folder_anyone_can_enter() as root:
        make(root, "cat/1.jpg", "locked/2.jpg")
        (root / "locked").chmod(0)
        listed = imagegen.call_without_root(list_inputs, str(root))
    assert problems(listed) == {"cat/1.jpg": None, "locked": "unreadable"}
    detail = next(f for f in listed if f.relpath == "locked").problem[1]
    assert detail == "directory cannot be listed: PermissionError: Permission denied"


def test_a_name_that_is_not_utf8_is_shown_escaped_and_keeps_what_the_listing_found(tmp_path):
    base = os.fsencode(tmp_path)
    for name in (b"/caf\xe9.jpg", b"/ok.jpg"):
        with open(base + name, "wb") as handle:
            handle.write(b"xyz")
    os.symlink(base + b"/nowhere", base + b"/gone\xff.jpg")
    listed = {f.relpath: f.problem for f in list_inputs(str(tmp_path))}
    assert listed["ok.jpg"] is None
    assert listed["caf\\xe9.jpg"][0] == "undecodable_name"
    assert listed["gone\\xff.jpg"][0] == "unreadable"  # a broken link stays one


def test_an_escaped_name_that_equals_another_files_name_fails_in_one_line(tmp_path):
    base = os.fsencode(tmp_path)
    for name in (b"/caf\xe9.jpg", b"/caf\\xe9.jpg"):  # the second is a real name with a backslash
        with open(base + name, "wb") as handle:
            handle.write(b"xyz")
    with pytest.raises(ValueError, match=r"names two files .* rename one of them"):
        list_inputs(str(tmp_path))


def test_an_input_folder_that_is_not_utf8_is_a_clear_error(tmp_path):
    folder = os.fsencode(tmp_path) + b"/caf\xe9"
    os.makedirs(folder)
    with open(folder + b"/1.jpg", "wb") as handle:
        handle.write(b"xyz")
    with pytest.raises(ValueError, match=r"caf\\xe9 is not valid UTF-8: rename it"):
        list_inputs(os.fsdecode(folder))


def test_a_glob_within_one_folder_lists_that_folder_only(tmp_path, monkeypatch):
    """`data/*.json` (how the annotation search looks beside an input) never walks below the
    folder: one beside a dataset may hold a whole disk."""
    from beam_tfrecord.plan import listing

    (tmp_path / "deep" / "er").mkdir(parents=True)
    for name in ("a.json", "b.txt", "deep/c.json", "deep/er/d.json"):
        (tmp_path / name).write_text("{}")
    walked = []
    real_walk = listing.walk_local
    monkeypatch.setattr(listing, "walk_local", lambda root: walked.append(root) or real_walk(root))
    assert [f.relpath for f in listing.list_inputs(str(tmp_path / "*.json"))] == ["a.json"]
    assert walked == []
    assert sorted(f.relpath for f in listing.list_inputs(str(tmp_path / "**.json"))) == [
        "a.json",
        "deep/c.json",
        "deep/er/d.json",
    ]
