"""The storage module, where local paths and gs:// ones meet: the same questions asked of files in
tmp_path and of objects in the real GCS emulator over HTTP on 127.0.0.1 get the answers a user
expects of a folder, a file, a JSON file that may be absent and a write that is whole or absent."""

from __future__ import annotations

import json
import os
import uuid

import pytest
from gcsemulator import EMULATOR_ENV, Emulator

from beam_tfrecord import storage


@pytest.fixture(scope="module")
def emulator():
    with Emulator() as emu, pytest.MonkeyPatch.context() as patch:
        patch.setenv(EMULATOR_ENV, emu.url)
        yield emu


def _new_bucket(emulator: Emulator) -> str:
    """A fresh bucket, so tests never see each other's objects."""
    name = f"test-{uuid.uuid4().hex[:12]}"
    emulator.client().create_bucket(name)
    return name


def test_a_path_is_remote_when_it_names_a_scheme_and_only_gs_is_cloud_storage():
    assert storage.is_remote("gs://b/x") and storage.is_remote("s3://b/x") and not storage.is_remote("/b/x")
    assert storage.is_gcs("gs://b/x") and not storage.is_gcs("s3://b/x") and not storage.is_gcs("gs/x")
    assert storage.split_scheme("gs://b/a/b.json") == ("gs", "b/a/b.json")
    assert storage.split_scheme("data/a.json") == ("", "data/a.json")


def test_a_local_path_is_made_absolute_and_a_remote_one_is_left_alone(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    assert storage.absolute("in/a.jpg") == str(tmp_path / "in" / "a.jpg")
    assert storage.absolute("gs://b/in") == "gs://b/in"
    assert storage.is_absolute("gs://b/in") and storage.is_absolute("/in") and not storage.is_absolute("in")


def test_normalizing_keeps_the_scheme_and_resolves_dots_on_both_sides():
    assert storage.normalize("gs://b/data/../images/./a.jpg") == "gs://b/images/a.jpg"
    assert storage.normalize("/data//x/../images/a.jpg") == "/data/images/a.jpg"


def test_parents_stop_at_the_filesystems_root_or_the_bucket():
    assert storage.parents("/data/coco/images/") == ["/data/coco", "/data", "/"]
    assert storage.parents("gs://b/data/coco") == ["gs://b/data", "gs://b"]
    assert storage.parents("gs://b") == [] and storage.parents("/") == []


def test_a_symlink_and_its_target_are_the_same_file_and_remote_paths_compare_as_written(tmp_path):
    target = tmp_path / "labels.csv"
    target.write_text("a,b\n")
    (tmp_path / "link.csv").symlink_to(target)
    assert storage.same_file(str(tmp_path / "link.csv"), str(target))
    assert storage.same_file(str(target), str(tmp_path / "link.csv"))  # either side
    assert not storage.same_file(str(target), str(tmp_path / "other.csv"))
    assert storage.same_file("gs://b/labels.csv", "gs://b/labels.csv")
    assert not storage.same_file("gs://b/labels.csv", "gs://b/./labels.csv")


def test_local_files_and_folders_are_told_apart_and_if_remote_never_speaks_for_a_local_path(tmp_path):
    (tmp_path / "labels").mkdir()
    (tmp_path / "labels" / "a.txt").write_text("0 .5 .5 .1 .1\n")
    folder, file, missing = str(tmp_path / "labels"), str(tmp_path / "labels" / "a.txt"), str(tmp_path / "no")
    assert storage.is_folder(folder) and not storage.is_file(folder) and storage.exists(folder)
    assert storage.is_file(file) and not storage.is_folder(file) and storage.exists(file)
    assert not storage.exists(missing, if_remote=True) and not storage.is_file(missing, if_remote=True)
    assert not storage.is_folder(missing, if_remote=True)


def test_a_remote_path_counts_as_if_remote_says_without_a_request():
    """No bucket of that name, no emulator: an answer asked of the store would be False or fail."""
    nowhere = f"gs://no-such-bucket-{uuid.uuid4().hex[:8]}/data.yaml"
    assert storage.exists(nowhere, if_remote=True) and storage.is_file(nowhere, if_remote=True)
    assert not storage.is_folder(nowhere, if_remote=False)


def test_a_gs_prefix_with_objects_under_it_is_a_folder_that_exists(emulator):
    bucket = _new_bucket(emulator)
    emulator.upload_tree(bucket, "", {"yolo/labels/train/a.txt": b"0 .5 .5 .1 .1\n", "yolo/data.yaml": b"x"})
    labels, names = f"gs://{bucket}/yolo/labels", f"gs://{bucket}/yolo/data.yaml"
    # Only sub-folders under it (GCS has no folder objects): a folder all the same, with or without /.
    assert storage.is_folder(labels) and storage.is_folder(labels + "/") and storage.exists(labels)
    assert not storage.is_file(labels)
    assert storage.is_file(names) and storage.exists(names) and not storage.is_folder(names)
    assert not storage.exists(f"gs://{bucket}/yolo/images")
    assert not storage.is_folder(f"gs://{bucket}/yolo/lab")  # a prefix of a name is no folder
    assert [m.path for m in storage.match(f"gs://{bucket}/yolo/**")] == [
        f"gs://{bucket}/yolo/data.yaml",
        f"gs://{bucket}/yolo/labels/train/a.txt",
    ]
    assert len(storage.match(f"gs://{bucket}/yolo/**", limit=1)) == 1


@pytest.fixture(params=["local", "gcs"])
def folder(request, tmp_path) -> str:
    """A place to write: a folder in tmp_path, or a prefix of a fresh bucket in the emulator."""
    if request.param == "local":
        return str(tmp_path / "out")
    return f"gs://{_new_bucket(request.getfixturevalue('emulator'))}/out"


def test_what_write_atomic_writes_reads_back_as_bytes_text_json_and_lines(folder):
    path = storage.join(folder, "marker.json")
    storage.write_atomic(path, json.dumps({"extra": ["é.jpg"]}, ensure_ascii=False))
    assert storage.read_json(path) == {"extra": ["é.jpg"]}
    assert storage.read_bytes(path) == '{"extra": ["é.jpg"]}'.encode()
    storage.write_atomic(path, b'{"a": 1}\n\n{"b": 2}\n')  # replaces the old one whole
    assert storage.read_text(path) == '{"a": 1}\n\n{"b": 2}\n'
    assert storage.lines(path) == ['{"a": 1}', '{"b": 2}']
    assert [m.path.rsplit("/", 1)[1] for m in storage.match(storage.join(folder, "*"))] == ["marker.json"]


def test_an_absent_file_is_none_or_no_lines_and_a_broken_one_still_raises(folder):
    missing = storage.join(folder, "append.json")
    assert storage.read_json_or_none(missing) is None and storage.read_text_or_none(missing) is None
    assert storage.lines(missing) == []
    broken = storage.join(folder, "broken.json")
    storage.write_atomic(broken, b'{"extra": [')  # a marker cut short must not pass for no marker
    with pytest.raises(json.JSONDecodeError):
        storage.read_json_or_none(broken)
    with pytest.raises(Exception):  # noqa: B017 (each side's own error: FileNotFoundError, NotFound)
        storage.read_json(missing)


def test_delete_takes_what_is_there_and_missing_ok_forgives_what_is_not(folder):
    paths = [storage.join(folder, name) for name in ("a.txt", "b.txt")]
    for path in paths:
        storage.write_atomic(path, b"x")
    storage.delete([paths[0]])
    assert not storage.exists(paths[0]) and storage.exists(paths[1])
    storage.delete([paths[0], paths[1]], missing_ok=True)
    assert not storage.exists(paths[1])
    storage.delete([], missing_ok=True)


def test_a_failed_local_write_leaves_the_old_file_and_no_partial_one(tmp_path):
    """A rename that cannot happen (a folder stands where the file goes) fails the write: what was
    there stays whole, and the bytes written aside are removed."""
    target = tmp_path / "summary.json"
    target.mkdir()
    (target / "kept").write_text("old")
    with pytest.raises(OSError):
        storage.write_atomic(str(target), b'{"records": 3}')
    assert (target / "kept").read_text() == "old"
    assert sorted(os.listdir(tmp_path)) == ["summary.json"]  # no summary.json.partial


def test_a_local_write_goes_aside_to_the_temporary_path_it_is_given(tmp_path):
    work = tmp_path / "work"
    path, temp = str(tmp_path / "marker"), str(work / "marker.tmp")
    storage.write_atomic(path, b"{}", temp=temp)
    assert (tmp_path / "marker").read_bytes() == b"{}" and os.listdir(work) == []


def test_make_folders_makes_local_ones_and_needs_none_on_a_store(tmp_path):
    storage.make_folders(str(tmp_path / "a" / "b"))
    storage.make_folders(str(tmp_path / "a" / "b"))  # there already: fine
    assert (tmp_path / "a" / "b").is_dir()
    storage.make_folders("gs://no-such-bucket/a")  # no request: a store has no folders to make


def test_reading_a_local_folder_says_so_and_names_it(tmp_path):
    with pytest.raises(IsADirectoryError, match=str(tmp_path)):
        storage.read_bytes(str(tmp_path))
