"""What the house makes generic, run once for each labelling tool's export: an append equals a
run over every picture, ArrayRecord holds the TFRecord run's records, a tree in a bucket gives
the local tree's records, and inspect passes the output and draws its contact sheet."""

from __future__ import annotations

import shutil
import uuid

import pytest
from conftest import convert
from gcsemulator import EMULATOR_ENV, Emulator
from labelmegen import flat, sibling
from outputcheck import summary
from PIL import Image
from yoloseggen import ultralytics_tree

from beam_tfrecord.read.examples import iter_examples
from beam_tfrecord.read.random_access import RecordArray
from pipelines import inspect


def _yolo_segmentation(root):
    ultralytics_tree(root)
    later = ["images/val/c.jpg", "labels/val/c.txt"]
    return ("--task", "segmentation", "--annotations", "yolo"), later


def _cvat(task: str, *extra: str):
    def build(root):
        import cvatgen

        shapes = [cvatgen.polygon("car", [4, 4, 30, 6, 20, 25]), cvatgen.box("road", 1, 1, 10, 8)]
        entries = [cvatgen.Entry(f"{name}.jpg", 40, 30, shapes) for name in "abcd"]
        cvatgen.write_export(root, entries, [cvatgen.Label("car"), cvatgen.Label("road")])
        return ("--annotations", "cvat", "--task", task, *extra), ["images/d.jpg"]

    return build


def _label_studio(root):
    import labelstudiogen

    labelstudiogen.project(root, "full")
    return ("--annotations", "label_studio", "--masks"), ["images/b.jpg"]


def _panoptic(root):
    import panopticgen

    panopticgen.coco_panoptic(root, crowded=False)
    pictures = sorted(path.name for path in (root / "train2017").iterdir())
    return ("--task", "panoptic"), [f"train2017/{pictures[-1]}"]


def _labelme_detection(root):
    flat(root)
    return ("--annotations", "labelme", "--masks"), ["c.jpg", "c.json"]


def _labelme_segmentation(root):
    sibling(root)
    return ("--annotations", "labelme", "--task", "segmentation"), ["images/c.jpg", "annotations/c.json"]


# name -> builder(root) -> (the command's options, the relpaths a first run leaves out)
EXPORTS = {
    "yolo_segmentation": _yolo_segmentation,
    "cvat_detection": _cvat("detection", "--masks"),
    "cvat_segmentation": _cvat("segmentation"),
    "label_studio": _label_studio,
    "panoptic": _panoptic,
    "labelme_detection": _labelme_detection,
    "labelme_segmentation": _labelme_segmentation,
}


def records(output) -> list[tuple]:
    """(split, filename, sha256, every value as bytes) of every record, sorted."""
    found = []
    for split in summary(output)["splits"]:
        for record in iter_examples(str(output), split):
            values = tuple(sorted((k, repr(v)) for k, v in record.items()))
            found.append((split, record["filename"], values))
    return sorted(found)


@pytest.fixture(scope="module")
def emulator():
    with Emulator() as emu, pytest.MonkeyPatch.context() as patch:
        patch.setenv(EMULATOR_ENV, emu.url)
        yield emu


@pytest.mark.parametrize("export", sorted(EXPORTS))
def test_an_append_equals_a_run_over_every_picture(tmp_path, export):
    args, later = EXPORTS[export](tmp_path / "data")
    first = tmp_path / "first"
    shutil.copytree(tmp_path / "data", first)
    for relpath in later:
        (first / relpath).unlink()
    grown, whole = tmp_path / "grown", tmp_path / "whole"
    assert convert(first, grown, *args) == 0
    assert convert(tmp_path / "data", grown, *args, "--append") == 0
    assert convert(tmp_path / "data", whole, *args) == 0
    assert records(grown) == records(whole)
    assert summary(grown)["records"] == summary(whole)["records"]


@pytest.mark.parametrize("export", sorted(EXPORTS))
def test_array_record_holds_the_same_records_and_inspect_draws_them(tmp_path, export, monkeypatch):
    args, _ = EXPORTS[export](tmp_path / "data")
    tfrecord, array = tmp_path / "tfrecord", tmp_path / "array_record"
    assert convert(tmp_path / "data", tfrecord, *args) == 0
    assert convert(tmp_path / "data", array, *args, "--file_format", "array_record") == 0
    assert records(array) == records(tfrecord)
    for split, counts in summary(array)["splits"].items():
        assert len(RecordArray(str(array), split)) == counts["records"]
    monkeypatch.chdir(tmp_path)
    assert inspect.run([str(tfrecord), "--pictures", str(tmp_path / "pictures")]) == 0
    with Image.open(tmp_path / "pictures" / "contact_sheet.png") as sheet:
        assert sheet.width > 200 and sheet.height > 100


@pytest.mark.parametrize("export", sorted(EXPORTS))
def test_a_tree_in_a_bucket_gives_the_local_tree_s_records(tmp_path, export, emulator):
    args, _ = EXPORTS[export](tmp_path / "data")
    bucket = f"test-{uuid.uuid4().hex[:12]}"
    emulator.client().create_bucket(bucket)
    tree = {
        str(path.relative_to(tmp_path / "data")): path.read_bytes()
        for path in (tmp_path / "data").rglob("*")
        if path.is_file()
    }
    emulator.upload_tree(bucket, "data", tree)
    assert convert(tmp_path / "data", tmp_path / "local", *args) == 0
    assert convert(f"gs://{bucket}/data", tmp_path / "remote", *args) == 0
    assert records(tmp_path / "remote") == records(tmp_path / "local")


def _cvat_task(root):
    import cvatgen

    entries = [
        cvatgen.Entry("sub/a.jpg", 40, 30, [cvatgen.box("car", 2, 3, 20, 25)]),
        cvatgen.Entry("other/b.jpg", 40, 30, [cvatgen.box("car", 5, 5, 30, 20)]),
    ]
    cvatgen.write_export(root, entries, [cvatgen.Label("car")])
    return "cvat"


def _label_studio_project(root):
    import labelstudiogen

    labelstudiogen.project(root, "full")
    return "label_studio"


@pytest.mark.parametrize("build", [_cvat_task, _label_studio_project])
def test_an_images_folder_whose_export_is_above_it_is_never_classes_of_its_folders(tmp_path, capsys, build):
    name = build(tmp_path / "export")
    assert convert(tmp_path / "export" / "images", tmp_path / "out") == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and f"pass --annotations {name}" in err[0], err
    assert not (tmp_path / "out" / "summary.json").exists()
    assert convert(tmp_path / "export" / "images", tmp_path / "out", "--annotations", name) == 0
