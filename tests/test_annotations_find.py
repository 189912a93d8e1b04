"""Annotations found the way each format's tools find them, from every folder a user may name
(the dataset's root, its images folder, one split's folder, the labels folder), and never a
silent loss: a run that matches nothing, or little, fails at plan time in one line.

Each layout is built as the tool that makes it lays it out (tests/annotationgen.py): an
Ultralytics tree with data.yaml, a Kaggle/LabelImg images + annotations pair, a Roboflow COCO
export, a VOC devkit and COCO 2017 with its captions files beside the instances files."""

from __future__ import annotations

import pytest
from annotationgen import (
    coco2017,
    instances,
    labelimg_pair,
    roboflow_coco,
    roboflow_yolo,
    ultralytics_tree,
    voc_devkit,
)
from conftest import convert
from imagegen import jpeg, write_tree
from outputcheck import rejects, summary

from beam_tfrecord.config_base import ConfigError
from beam_tfrecord.plan.annotations.options import AnnotationConfig
from beam_tfrecord.plan.listing import list_inputs
from beam_tfrecord.plan.planner import make_plan
from beam_tfrecord.plan.source_config import SourceConfig


def plan(input_dir, kind: str, path: str | None = None, **options):
    source = SourceConfig(str(input_dir), annotations=AnnotationConfig(kind, path, **options))
    return make_plan(list_inputs(str(input_dir)), source)


def stored(found) -> dict[str, int]:
    """relpath -> objects planned for it; every other listed file must be a `skipped` sidecar."""
    assert [r.reason for r in found.rejects if r.reason != "skipped"] == []
    assert found.unmatched_lines == ()  # no annotation file left without its picture
    return {item.relpath: len(item.annotations.objects) for item in found.inputs}


def under(truth: dict[str, int], folder: str) -> dict[str, int]:
    """The truth seen from `folder` (relpaths under it)."""
    prefix = folder + "/" if folder else ""
    return {r[len(prefix) :]: n for r, n in truth.items() if r.startswith(prefix)}


@pytest.mark.parametrize("image_list", [False, True])
@pytest.mark.parametrize("folder", ["", "images", "images/train"])
def test_ultralytics_tree_from_any_folder(tmp_path, folder, image_list):
    truth = ultralytics_tree(tmp_path, image_list=image_list)
    found = plan(tmp_path / folder if folder else tmp_path, "yolo")
    assert stored(found) == under(truth, folder)
    assert found.class_names == ["cat", "dog"]


@pytest.mark.parametrize("folder", ["images", "images/train"])
def test_ultralytics_data_yaml_or_labels_folder_named(tmp_path, folder):
    truth = ultralytics_tree(tmp_path)
    assert stored(plan(tmp_path / folder, "yolo", str(tmp_path / "data.yaml"))) == under(truth, folder)
    labels = tmp_path / "labels" / folder.removeprefix("images").strip("/")
    assert stored(plan(tmp_path / folder, "yolo", str(labels))) == under(truth, folder)


def test_yolo_labels_folder_apart_from_the_images(tmp_path):
    truth = ultralytics_tree(tmp_path / "ds")
    (tmp_path / "ds" / "labels").rename(tmp_path / "elsewhere")
    found = plan(tmp_path / "ds" / "images", "yolo", str(tmp_path / "elsewhere"))
    assert stored(found) == under(truth, "images")


@pytest.mark.parametrize("folder", ["", "images"])
def test_labelimg_pair_from_root_or_images(tmp_path, folder):
    truth = labelimg_pair(tmp_path)
    assert stored(plan(tmp_path / folder, "voc")) == under(truth, folder)
    assert stored(plan(tmp_path / "images", "voc", str(tmp_path / "annotations"))) == under(truth, "images")


@pytest.mark.parametrize("folder", ["", "VOC2012", "VOC2012/JPEGImages"])
def test_voc_devkit_from_any_folder(tmp_path, folder):
    truth = voc_devkit(tmp_path)
    found = plan(tmp_path / folder, "voc")
    assert stored(found) == under(truth, folder)
    skipped = {r.path: r.detail for r in found.rejects}
    if folder != "VOC2012/JPEGImages":
        lists = [d for r, d in skipped.items() if "ImageSets" in r]
        assert lists and all("VOC split list" in d for d in lists)


@pytest.mark.parametrize("folder", ["", "train", "valid"])
def test_roboflow_coco_export_from_root_or_a_split(tmp_path, folder):
    truth = roboflow_coco(tmp_path)
    assert stored(plan(tmp_path / folder, "coco")) == under(truth, folder)


def test_roboflows_project_category_is_no_class(tmp_path):
    """Roboflow lists the project itself as category 0 (the supercategory of every other, used by
    no annotation): the classes are the same dataset's YOLO or VOC export's, ids unshifted."""
    roboflow_coco(tmp_path)
    assert plan(tmp_path, "coco").class_names == ["cat", "dog"]


@pytest.mark.parametrize("folder", ["", "train2017", "val2017"])
def test_coco2017_from_root_or_a_split_folder(tmp_path, folder):
    truth = coco2017(tmp_path)
    assert stored(plan(tmp_path / folder, "coco")) == under(truth, folder)


@pytest.mark.parametrize("folder", ["images", "images/val2017"])
def test_coco_with_an_images_folder_finds_annotations_two_levels_up(tmp_path, folder):
    truth = coco2017(tmp_path)
    (tmp_path / "images").mkdir()
    for split in ("train2017", "val2017"):
        (tmp_path / split).rename(tmp_path / "images" / split)
    truth = {f"images/{r}": n for r, n in truth.items()}
    found = plan(tmp_path / folder, "coco")
    assert stored(found) == under(truth, folder)
    assert set(splits_of(found).values()) == (
        {"validation"} if folder.endswith("val2017") else {"train", "validation"}
    )


def test_voc_annotations_path_as_a_folder_or_one_file(tmp_path):
    truth = voc_devkit(tmp_path)
    images = tmp_path / "VOC2012" / "JPEGImages"
    annotations = tmp_path / "VOC2012" / "Annotations"
    assert stored(plan(images, "voc", str(annotations))) == under(truth, "VOC2012/JPEGImages")
    first = sorted(truth)[0]
    xml = annotations / (first.split("/")[-1][:-4] + ".xml")
    found = plan(images / first.split("/")[-1], "voc", str(xml))
    assert stored(found) == {first.split("/")[-1]: truth[first]}


@pytest.mark.parametrize(
    ("name", "text", "says"),
    [
        ("captions_train2017.json", None, "COCO captions file"),
        (
            "results.json",
            b'[{"image_id": 1, "category_id": 1, "bbox": [1, 1, 2, 2], "score": 0.9}]',
            "results",
        ),
        (
            "panoptic_val2017.json",
            b'{"images": [], "annotations": [{"image_id": 1, "file_name": "a.png", "segments_info": []}]}',
            "panoptic",
        ),
        (
            "keypoints.json",
            b'{"images": [], "annotations": [{"image_id": 1, "keypoints": [1, 2, 2]}], "categories": []}',
            "keypoints",
        ),
        ("image_info_test2017.json", b'{"images": [], "categories": []}', "image list"),
    ],
)
def test_a_coco_file_of_another_task_is_refused_naming_it(tmp_path, name, text, says):
    coco2017(tmp_path)
    path = tmp_path / "annotations" / name
    if text is not None:
        path.write_bytes(text)
    with pytest.raises(ConfigError, match=f"{says}.*pass the instances_\\*.json"):
        plan(tmp_path, "coco", str(path))


def test_another_datasets_instances_file_matches_nothing(tmp_path):
    coco2017(tmp_path / "ours")
    other = tmp_path / "other.json"
    other.write_bytes(instances([{"id": 1, "file_name": "000000000139.jpg"}], []))
    with pytest.raises(ConfigError, match="none of the 8 pictures matches") as error:
        plan(tmp_path / "ours", "coco", str(other))
    assert "000000000139.jpg" in str(error.value) and "train2017/" in str(error.value)


def test_voc_on_a_coco_tree_says_what_it_found_instead(tmp_path):
    coco2017(tmp_path)
    with pytest.raises(
        ConfigError,
        match=r"found no annotation file; looked for Annotations/ beside JPEGImages/.*--annotations coco",
    ):
        plan(tmp_path, "voc")


def test_yolo_without_labels_fails_in_one_line(tmp_path):
    write_tree(tmp_path, {"images/a.jpg": jpeg(), "data.yaml": b"names: [cat]\n"})
    with pytest.raises(ConfigError, match=r"none of the 1 pictures.*images/a.jpg has no annotation"):
        plan(tmp_path, "yolo")


def test_mostly_unmatched_fails_unless_allowed(tmp_path):
    truth = labelimg_pair(tmp_path)
    for name in list(truth)[:3]:  # 3 of 5 annotations lost
        (tmp_path / "annotations" / (name.split("/")[-1][:-4] + ".xml")).unlink()
    with pytest.raises(ConfigError, match=r"2 of 5 pictures have an annotation.*allow_unmatched_annotations"):
        plan(tmp_path, "voc")
    found = plan(tmp_path, "voc", allow_unmatched_annotations=True)
    assert sum(stored(found).values()) == sum(list(truth.values())[3:])
    assert "2 of 5 pictures" in found.annotations.warnings[0]


def test_label_map_and_sidecars_are_skipped_with_what_they_are(tmp_path):
    truth = ultralytics_tree(tmp_path)
    (tmp_path / "label_map.pbtxt").write_text("item { id: 1 name: 'cat' }\n")
    (tmp_path / "classes.txt").write_text("cat\ndog\n")
    found = plan(tmp_path, "yolo")
    assert stored(found) == truth
    skipped = {r.path: r.detail for r in found.rejects}
    assert skipped["label_map.pbtxt"].startswith("a label map")
    assert skipped["classes.txt"].startswith("a class names list")


def test_the_command_fails_in_one_line_and_logs_where_it_found_them(tmp_path, capsys, caplog):
    truth = voc_devkit(tmp_path / "ds")
    images = tmp_path / "ds" / "VOC2012" / "JPEGImages"
    for kind in ("yolo", "coco"):
        assert convert(tmp_path / "ds", tmp_path / kind, "--annotations", kind) == 2
        line = capsys.readouterr().err.strip()
        assert line.count("\n") == 0 and line.startswith(
            f"error: --annotations {kind}: none of the 6 pictures"
        )
        assert "found instead 6 XML files (Pascal VOC): pass --annotations voc" in line
    with caplog.at_level("INFO"):
        assert convert(images, tmp_path / "out", "--annotations", "voc") == 0
    assert any("Annotations" in m and "6 of 6 pictures" in m for m in caplog.messages)
    result = summary(tmp_path / "out")
    assert result["objects"]["stored"] == sum(truth.values())
    assert "6 of 6 pictures" in result["objects"]["found_at"]
    assert [r for r in rejects(tmp_path / "out") if r["reason"] != "skipped"] == []


def splits_of(found) -> dict[str, str]:
    return {item.relpath: item.split for item in found.inputs}


@pytest.mark.parametrize("image_list", [False, True])
def test_ultralytics_splits_come_from_data_yaml(tmp_path, image_list):
    truth = ultralytics_tree(tmp_path, image_list=image_list)
    found = plan(tmp_path, "yolo")
    assert splits_of(found) == {r: "train" if "/train/" in r else "validation" for r in truth}
    assert found.splits == {"train": 4 / 6, "validation": 2 / 6}
    assert (
        found.annotations.split_source.startswith("declared by")
        and "data.yaml" in found.annotations.split_source
    )
    # From one split's folder, its pictures keep their split.
    assert set(splits_of(plan(tmp_path / "images" / "val", "yolo")).values()) == {"validation"}


@pytest.mark.parametrize("folder", ["", "valid", "valid/images"])
def test_roboflow_yolo_export_with_its_dotdot_folders(tmp_path, folder):
    truth = roboflow_yolo(tmp_path)
    found = plan(tmp_path / folder, "yolo")
    assert stored(found) == under(truth, folder)
    expected = {"train": "train", "valid": "validation", "test": "test"}
    assert splits_of(found) == {
        r[len(folder) :].lstrip("/"): expected[r.split("/")[0]] for r in truth if r.startswith(folder)
    }


def test_voc_splits_come_from_imagesets_and_conflicts_are_rejected(tmp_path):
    truth = voc_devkit(tmp_path)
    ids = [r.split("/")[-1][:-4] for r in truth]
    found = plan(tmp_path, "voc")
    assert splits_of(found) == {r: "train" if i < 4 else "validation" for i, r in enumerate(truth)}
    sets = tmp_path / "VOC2012" / "ImageSets" / "Main"
    (sets / "val.txt").write_text(f"{ids[3]}\n{ids[4]}\n")  # ids[3] in train too; ids[5] in none
    found = plan(tmp_path, "voc")
    reasons = {r.path: r.reason for r in found.rejects if r.reason != "skipped"}
    assert reasons == {
        f"VOC2012/JPEGImages/{ids[3]}.jpg": "conflicting_split",
        f"VOC2012/JPEGImages/{ids[5]}.jpg": "undeclared_split",
    }
    assert "1 pictures are in none of the declared splits" in found.annotations.warnings[0]
    (sets / "train.txt").unlink()
    (sets / "val.txt").unlink()  # trainval.txt alone: every picture in train
    assert set(splits_of(plan(tmp_path, "voc")).values()) == {"train"}


def test_coco_splits_come_from_file_names(tmp_path):
    truth = coco2017(tmp_path / "coco")
    found = plan(tmp_path / "coco", "coco")
    assert splits_of(found) == {r: "train" if r.startswith("train2017/") else "validation" for r in truth}
    truth = roboflow_coco(tmp_path / "rf")
    expected = {"train": "train", "valid": "validation", "test": "test"}
    assert splits_of(plan(tmp_path / "rf", "coco")) == {r: expected[r.split("/")[0]] for r in truth}


def test_splits_given_override_the_declared_ones(tmp_path):
    ultralytics_tree(tmp_path)
    source = SourceConfig(
        str(tmp_path),
        splits={"train": 0.5, "test": 0.5},
        annotations=AnnotationConfig("yolo", declared_splits=False),
    )
    found = make_plan(list_inputs(str(tmp_path)), source)
    assert found.splits == {"train": 0.5, "test": 0.5}
    assert found.annotations.split_source.startswith("hash (--splits overrides the splits declared by")


def test_the_command_keeps_the_declared_splits_and_says_so(tmp_path, capsys):
    truth = ultralytics_tree(tmp_path / "ds")
    assert convert(tmp_path / "ds" / "images", tmp_path / "out", "--annotations", "yolo") == 0
    table = capsys.readouterr().out
    result = summary(tmp_path / "out")
    assert {name: split["records"] for name, split in result["splits"].items()} == {
        "train": 4,
        "validation": 2,
    }
    assert result["split_method"].startswith("declared by") and "declared by" in table
    assert result["objects"]["stored"] == sum(truth.values())


def test_an_ultralytics_tree_in_a_bucket_from_its_images_folder(tmp_path):
    from gcsemulator import EMULATOR_ENV, Emulator

    truth = ultralytics_tree(tmp_path)
    tree = {str(p.relative_to(tmp_path)): p.read_bytes() for p in tmp_path.rglob("*") if p.is_file()}
    with Emulator() as emulator, pytest.MonkeyPatch.context() as patch:
        patch.setenv(EMULATOR_ENV, emulator.url)
        emulator.client().create_bucket("ultralytics")
        emulator.upload_tree("ultralytics", "ds", tree)
        found = plan("gs://ultralytics/ds/images", "yolo")
        assert stored(found) == under(truth, "images")
        assert splits_of(found) == {
            r: "train" if r.startswith("train/") else "validation" for r in under(truth, "images")
        }
        found = plan("gs://ultralytics/ds/images/train", "yolo", "gs://ultralytics/ds/labels/train")
        assert stored(found) == under(truth, "images/train")


def test_a_val_that_repeats_train_keeps_every_picture_in_train(tmp_path):
    """Ultralytics' coco128.yaml validates on its training folder (`val: images/train2017`):
    not a conflict that rejects every picture."""
    truth = ultralytics_tree(tmp_path)
    text = (tmp_path / "data.yaml").read_text().replace("val: images/val", "val: images/train")
    (tmp_path / "data.yaml").write_text(text)
    found = plan(tmp_path / "images" / "train", "yolo")
    assert [r.reason for r in found.rejects if r.reason != "skipped"] == []
    assert set(splits_of(found).values()) == {"train"}
    assert len(found.inputs) == sum(1 for r in truth if "/train/" in r)


def test_a_copied_dataset_keeps_its_splits_although_its_yaml_names_the_original(tmp_path):
    """data.yaml's absolute `path` still names the folder the dataset was copied from."""
    import shutil

    truth = ultralytics_tree(tmp_path / "original")
    shutil.copytree(tmp_path / "original", tmp_path / "copy")
    found = plan(tmp_path / "copy", "yolo")
    assert splits_of(found) == {r: "train" if "/train/" in r else "validation" for r in truth}


@pytest.mark.parametrize(
    "given", [{"stratify": True}, {"group_pattern": r"^images/(\w+)/"}, {"split_seed": 3}]
)
def test_hash_split_settings_are_refused_with_declared_splits(tmp_path, given):
    ultralytics_tree(tmp_path)
    source = SourceConfig(str(tmp_path), annotations=AnnotationConfig("yolo"), **given)
    with pytest.raises(ConfigError) as error:
        make_plan(list_inputs(str(tmp_path)), source)
    assert error.value.name == next(iter(given))


def test_splits_given_as_the_default_text_still_override(tmp_path):
    from pipelines.options import check_options, parse_options

    ultralytics_tree(tmp_path / "ds")
    argv = ["--input", str(tmp_path / "ds"), "--output", str(tmp_path / "out"), "--annotations", "yolo"]
    assert check_options(parse_options(argv)).source.annotations.declared_splits
    given = check_options(parse_options([*argv, "--splits", "train=1"]))
    assert not given.source.annotations.declared_splits
