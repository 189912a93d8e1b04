"""`--append` grows a detection dataset (issue 29): a dataset re-exported by its tool with new
pictures (COCO 2017's instances files grown, Roboflow's per-folder COCO files with masks, an
Ultralytics tree with new image and label files and a class added to data.yaml, a VOC devkit
with new XMLs and split lists, a LabelImg export split by hash) holds, after the
append, the records a from-scratch run over every picture holds: each new picture in the split
the dataset declares for it, with the same objects, every old class id kept and a new class
given the next one. The old pictures' annotation entries are theirs, never `unmatched`; a class
id the annotations now give another class is refused in one line."""

from __future__ import annotations

import json
import shutil

import numpy as np
import pausing
import pytest
from annotationgen import (
    CATEGORIES,
    box,
    coco2017,
    image,
    labelimg_pair,
    labelimg_xml,
    roboflow_coco,
    shapes_coco,
    ultralytics_tree,
    voc_devkit,
    voc_xml,
    yolo_box,
)
from conftest import convert
from imagegen import jpeg, write_tree
from test_label_map import TUTORIAL_MAP

import beam_tfrecord
from beam_tfrecord import names, reasons
from beam_tfrecord.output.outputs import complete_summary
from beam_tfrecord.read.examples import iter_examples

BIRD = {"id": 19, "name": "bird", "supercategory": "animal"}


def _records(output, masks: bool = False) -> dict[str, tuple]:
    """filename -> (split, class ids from 0, class names, boxes to 0.01 px[, mask pixels per
    object]), via iter_examples."""
    found = {}
    for split in complete_summary(str(output)).splits:
        for record in iter_examples(str(output), split):
            boxes = tuple(tuple(round(float(v), 2) for v in b) for b in record["boxes"])
            texts = tuple(record.get("object_text") or ())
            found[record["filename"]] = (split, tuple(record["labels"].tolist()), texts, boxes)
            if masks:
                found[record["filename"]] += (tuple(int(m.sum()) for m in record["masks"]),)
    return found


def _by_name(records: dict[str, tuple]) -> dict[str, tuple]:
    """The records without their class ids (a from-scratch run may number classes otherwise)."""
    return {path: (split, texts, boxes) for path, (split, _, texts, boxes) in records.items()}


# Facts of the runs rather than of the records: shards, times, where, the first run's options.
RUN_KEYS = ("history", "options", "input", "output", "started_at", "wall_time_s", "workers", "read_threads")


def _comparable(output) -> dict:
    data = json.loads((output / "summary.json").read_text())
    for key in (*RUN_KEYS, "resumed"):
        data.pop(key, None)
    for split in data["splits"].values():
        for key in ("shards", "planned_shards", "files"):
            split.pop(key)
    data["warnings"] = sorted(data["warnings"])
    return data


def _appended_like_a_whole_run(images, out, scratch, *args: str) -> tuple[dict, dict]:
    """Convert, re-export (by the caller, between), append; then a from-scratch run over the
    union; returns the grown dataset's records and the from-scratch run's."""
    assert convert(images, out, *args, "--append") == 0
    assert convert(images, scratch, *args) == 0
    return _records(out), _records(scratch)


def _every_reader_sees_boxes(output) -> None:
    """load_dataset and iter_examples read every record of every split, each with its boxes."""
    summary = complete_summary(str(output))
    for name, split in summary.splits.items():
        records = list(iter_examples(str(output), name))
        assert len(records) == split.records
        assert all(r["boxes"].shape == (len(r["labels"]), 4) for r in records)
        dataset = beam_tfrecord.load_dataset(str(output), name, batch_size=None, shuffle=False)
        read = [(image, targets) for image, targets in dataset]
        assert len(read) == split.records
        assert sum(int(t["boxes"].shape[0]) for _, t in read) == sum(len(r["labels"]) for r in records)


# COCO 2017: train2017/, val2017/ and annotations/instances_{train,val}2017.json, whose names
# declare the splits. A re-export writes each instances file again, holding old and new images.
def _coco_reexport(root, split: str, count: int, seed: int, categories=None) -> None:
    path = root / "annotations" / f"instances_{split}.json"
    data = json.loads(path.read_text())
    write_tree(root / split, {f"new_{i}.jpg": jpeg(48, 32, seed=seed + i) for i in range(count)})
    for i in range(count):
        image_id = 900_000 + seed + i
        data["images"].append(image(image_id, f"new_{i}.jpg"))
        for k, category in enumerate((19, 17)[: 1 + i % 2]):
            data["annotations"].append(box(image_id * 10 + k, image_id, category, [2 + 12 * k, 3, 8, 17]))
    data["categories"] = categories or [*CATEGORIES, BIRD]
    path.write_text(json.dumps(data))


def test_coco_declared_split_files_grow_like_a_run_over_the_union(tmp_path):
    images, out, scratch = tmp_path / "coco", tmp_path / "out", tmp_path / "scratch"
    coco2017(images)
    assert convert(images, out, "--annotations", "coco") == 0
    before = _records(out)
    first = complete_summary(str(out))
    assert first.split_method.startswith("declared") and first.class_names == ["person", "cat", "dog"]
    _coco_reexport(images, "train2017", 4, 100)
    _coco_reexport(images, "val2017", 2, 200)
    grown, whole = _appended_like_a_whole_run(images, out, scratch, "--annotations", "coco")
    # The same records, each new picture in the split its instances file declares, bird next.
    assert grown == whole
    assert grown["train2017/new_1.jpg"][0] == "train" and grown["val2017/new_0.jpg"][0] == "validation"
    assert grown["train2017/new_1.jpg"][1:3] == ((3, 1), ("bird", "cat"))
    assert {k: v for k, v in grown.items() if k in before} == before  # old ids unchanged
    summary = complete_summary(str(out))
    assert summary.class_names == ["person", "cat", "dog", "bird"]
    assert summary.history[-1]["new_classes"] == ["bird"]
    # The old pictures' entries matched them: none is unmatched, none counted twice.
    assert summary.sections["objects"].unmatched_entries == 0 and summary.sections["objects"].consistent
    assert (out / names.ANNOTATIONS_UNMATCHED_FILE).read_text() == ""
    assert _comparable(out) == _comparable(scratch)
    assert 'id: 4\n  name: "bird"' in (out / names.LABEL_MAP_FILE).read_text()
    assert (out / names.LABEL_MAP_FILE).read_text() == (scratch / names.LABEL_MAP_FILE).read_text()
    # Each grown instances file is listed as changed since converted (its old pictures' objects
    # are kept as converted), never read as new pictures.
    changed = [json.loads(line)["path"] for line in (out / names.CHANGED_SINCE_FILE).read_text().splitlines()]
    assert changed == ["annotations/instances_train2017.json", "annotations/instances_val2017.json"]
    # No old picture's annotations changed: none is listed as such, and the history says 0.
    assert summary.history[-1]["annotations_changed"] == 0
    assert not any("annotations changed" in w for w in summary.warnings)
    _every_reader_sees_boxes(out)


def test_a_class_id_that_names_another_class_now_is_refused(tmp_path, capsys):
    images, out = tmp_path / "coco", tmp_path / "out"
    coco2017(images)
    assert convert(images, out, "--annotations", "coco") == 0
    before = _records(out)
    renamed = [{**c, "name": "lion"} if c["id"] == 17 else c for c in CATEGORIES]
    _coco_reexport(images, "train2017", 1, 300, categories=[*renamed, BIRD])
    _coco_reexport(images, "val2017", 0, 310, categories=[*renamed, BIRD])  # files agree on 17
    capsys.readouterr()
    assert convert(images, out, "--annotations", "coco", "--append") == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1
    assert "class id 2 is 'lion' in the annotations" in err and "'cat' in the dataset" in err
    # Masks shape a record; --splits would hash the pictures the dataset declares splits for.
    assert convert(images, out, "--annotations", "coco", "--masks", "--append") == 2
    assert "--masks is True, the dataset's False" in capsys.readouterr().err
    assert convert(images, out, "--annotations", "coco", "--splits", "train=1", "--append") == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "the dataset's splits are declared by COCO" in err
    assert "this run's would be hashed (--splits given)" in err
    assert _records(out) == before and not (out / names.APPEND_DIR).exists()


# Roboflow's COCO export: train/, valid/, test/, each with its _annotations.coco.json; with masks.
def test_roboflow_split_folders_grow_with_masks(tmp_path):
    root, out, scratch = tmp_path / "rf", tmp_path / "out", tmp_path / "scratch"
    roboflow_coco(root)
    args = ("--annotations", "coco", "--masks")
    assert convert(root, out, *args) == 0
    before = _records(out, masks=True)
    for split, count in (("valid", 2), ("test", 1)):
        path = root / split / "_annotations.coco.json"
        data = json.loads(path.read_text())
        for i in range(count):
            image_id = 100 + i
            write_tree(root / split, {f"new_{i}.jpg": jpeg(48, 32, seed=600 + i)})
            data["images"].append(image(image_id, f"new_{i}.jpg"))
            polygon = [4, 4, 20, 4, 12, 24]
            data["annotations"].append(box(1000 + i, image_id, 2, [4, 4, 16, 20], segmentation=[polygon]))
        path.write_text(json.dumps(data))
    assert convert(root, out, *args, "--append") == 0
    assert convert(root, scratch, *args) == 0
    grown = _records(out, masks=True)
    assert grown == _records(scratch, masks=True)
    assert grown["test/new_0.jpg"][0] == "test" and grown["valid/new_1.jpg"][1:3] == ((1,), ("dog",))
    assert {k: v for k, v in grown.items() if k in before} == before
    assert _comparable(out) == _comparable(scratch)
    _every_reader_sees_boxes(out)


# Ultralytics: images/{train,val}/, labels/{train,val}/, data.yaml declaring train and val.
def test_yolo_tree_grows_with_new_image_and_label_files(tmp_path, capsys):
    """With --dedupe, a copy of an old picture (and of its label file) is a `duplicate` reject
    naming it, whose objects are accounted for."""
    root, out, scratch = tmp_path / "ds", tmp_path / "out", tmp_path / "scratch"
    args = ("--annotations", "yolo", "--dedupe")
    ultralytics_tree(root)
    assert convert(root, out, *args) == 0
    before = _records(out)
    new = {
        f"images/{split}/new_{i}.jpg": jpeg(48, 32, seed=400 + 10 * k + i)
        for k, split in enumerate(("train", "val"))
        for i in range(3)
    }
    write_tree(root, new)
    # New pictures without their label files: none matches an annotation, refused in one line.
    capsys.readouterr()
    assert convert(root, out, *args, "--append") == 2
    assert "none of the 6 pictures matches an annotation" in capsys.readouterr().err
    for relpath in new:
        label = root / ("labels" + relpath[len("images") :]).replace(".jpg", ".txt")
        label.write_text(yolo_box(2, 0.1, 0.1, 0.5, 0.9) + yolo_box(0, 0.55, 0.2, 0.95, 0.8))
    shutil.copy(root / "images/train/images_train_1.jpg", root / "images/train/z_copy.jpg")
    shutil.copy(root / "labels/train/images_train_1.txt", root / "labels/train/z_copy.txt")
    data = (root / "data.yaml").read_text()
    (root / "data.yaml").write_text(data.replace("  1: dog\n", "  1: dog\n  2: bird\n"))
    grown, whole = _appended_like_a_whole_run(root, out, scratch, *args)
    assert grown == whole
    assert {grown[r][0] for r in new if "/train/" in r} == {"train"}
    assert {grown[r][0] for r in new if "/val/" in r} == {"validation"}
    assert grown["images/val/new_2.jpg"][1:3] == ((2, 0), ("bird", "cat"))
    assert {k: v for k, v in grown.items() if k in before} == before
    summary = complete_summary(str(out))
    assert (
        summary.class_names == ["cat", "dog", "bird"] and summary.sections["objects"].unmatched_entries == 0
    )
    copy = [json.loads(line) for line in (out / names.REJECTS_FILE).read_text().splitlines()]
    copy = [r for r in copy if r["path"] == "images/train/z_copy.jpg"]
    assert (
        copy[0]["reason"] == reasons.DUPLICATE.code and "images/train/images_train_1.jpg" in copy[0]["detail"]
    )
    assert copy[0]["objects"] == 2 and summary.sections["objects"].dropped_per_reason == {
        reasons.IMAGE_REJECTED.code: 2
    }
    assert summary.sections["objects"].consistent
    assert _comparable(out) == _comparable(scratch)
    _every_reader_sees_boxes(out)


# VOC devkit: JPEGImages/, Annotations/*.xml, ImageSets/Main/{train,val,trainval}.txt.
def test_voc_devkit_grows_with_new_xmls_and_split_lists(tmp_path):
    root, out, scratch = tmp_path / "voc", tmp_path / "out", tmp_path / "scratch"
    voc_devkit(root)
    base = root / "VOC2012"
    assert convert(root, out, "--annotations", "voc") == 0
    before = _records(out)
    sets = base / "ImageSets" / "Main"
    for i, split in enumerate(("train", "train", "val")):
        stem = f"new_{i}"
        write_tree(base / "JPEGImages", {f"{stem}.jpg": jpeg(48, 32, seed=500 + i)})
        objects = [("bird", (2, 3, 10, 20), ""), ("dog", (14, 3, 22, 20), "")][: 1 + i % 2]
        (base / "Annotations" / f"{stem}.xml").write_bytes(voc_xml(f"{stem}.jpg", objects))
        for name in (split, "trainval"):
            with open(sets / f"{name}.txt", "a") as handle:
                handle.write(f"{stem}\n")
    assert convert(root, out, "--annotations", "voc", "--append") == 0
    grown = _records(out)
    # VOC names its classes without ids (a run sorts them): bird is new, so it gets the next id,
    # 2, where a from-scratch run sorts it first. The records are that run's, by class name...
    assert convert(root, scratch, "--annotations", "voc") == 0
    assert complete_summary(str(scratch)).class_names == ["bird", "cat", "dog"]
    assert _by_name(grown) == _by_name(_records(scratch))
    # ... and, given the append's class order, with the same ids and the same summary.
    shutil.rmtree(scratch)
    assert convert(root, scratch, "--annotations", "voc", "--class_names", "cat,dog,bird") == 0
    assert grown == _records(scratch)
    assert {k: v for k, v in grown.items() if k in before} == before
    assert grown["VOC2012/JPEGImages/new_2.jpg"][:2] == ("validation", (2,))
    summary = complete_summary(str(out))
    assert (
        summary.class_names == ["cat", "dog", "bird"] and summary.sections["objects"].unmatched_entries == 0
    )
    assert _comparable(out) == _comparable(scratch)
    _every_reader_sees_boxes(out)


# A Kaggle-style LabelImg export (images/*.jpg, annotations/*.xml) declares no split: hashed.
def test_labelimg_pair_with_hash_splits_grows_like_a_run_over_the_union(tmp_path):
    root, out, scratch = tmp_path / "kaggle", tmp_path / "out", tmp_path / "scratch"
    args = ("--annotations", "voc", "--splits", "train=0.5,validation=0.5")
    labelimg_pair(root)
    assert convert(root, out, *args) == 0
    before = _records(out)
    for i in range(6):
        relpath = f"images/more_{i}.jpg"
        write_tree(root, {relpath: jpeg(48, 32, seed=800 + i)})
        (root / "annotations" / f"more_{i}.xml").write_bytes(labelimg_xml(relpath, root, 1 + i % 3))
    grown, whole = _appended_like_a_whole_run(root, out, scratch, *args)
    assert grown == whole and {k: v for k, v in grown.items() if k in before} == before
    assert {split for split, *_ in grown.values()} == {"train", "validation"}
    assert complete_summary(str(out)).split_method == "hash"
    assert _comparable(out) == _comparable(scratch)


@pytest.mark.parametrize("killed", [False, True])
def test_old_entries_are_never_unmatched_and_each_is_listed_once(tmp_path, killed):
    """Entries no picture answered in the first run (kept on purpose) are the dataset's: the
    append neither counts them against its new pictures (most entries would be unmatched, exit
    2) nor lists them twice, and drops the one whose picture it brings; an old picture's entry
    stays matched when its file is gone. Objects dropped in either run are listed once each,
    also when the append was killed in its merge (after the side files, before summary.json)
    and run again."""
    images, out = tmp_path / "coco", tmp_path / "out"
    coco2017(images)
    path = images / "annotations" / "instances_val2017.json"
    data = json.loads(path.read_text())
    for i, name in enumerate(["later.jpg", *(f"never_{k}.jpg" for k in range(9))]):
        data["images"].append(image(7000 + i, name))
        data["annotations"].append(box(70000 + i, 7000 + i, 17, [2, 3, 8, 17]))
    unknown = [box(80000 + n, image_id, 99, [4, 4, 8, 8]) for n, image_id in enumerate((7000, 8000))]
    data["annotations"] += unknown  # a category no file declares: dropped, on an old and a new picture
    path.write_text(json.dumps(data))
    assert convert(images, out, "--annotations", "coco") == 2  # most entries name no picture
    assert convert(images, out, "--annotations", "coco", "--allow_unmatched_annotations") == 0
    assert complete_summary(str(out)).sections["objects"].unmatched_entries == 10
    assert len((out / names.DROPPED_OBJECTS_FILE).read_text().splitlines()) == 1
    write_tree(images / "val2017", {"later.jpg": jpeg(48, 32, seed=7001)})
    (images / "val2017" / "val2017_0.jpg").unlink()  # gone: its entry is an old picture's
    if killed:
        pausing.killed_at(
            "append_metadata", images, out, "--no_progress", "--annotations", "coco", "--append"
        )
    assert convert(images, out, "--annotations", "coco", "--append") == 0
    summary = complete_summary(str(out))
    lines = [json.loads(line) for line in (out / names.ANNOTATIONS_UNMATCHED_FILE).read_text().splitlines()]
    assert sorted(line["name"] for line in lines) == [f"never_{k}.jpg" for k in range(9)]
    dropped = [json.loads(line) for line in (out / names.DROPPED_OBJECTS_FILE).read_text().splitlines()]
    assert sorted(d["path"] for d in dropped) == ["val2017/later.jpg", "val2017/val2017_0.jpg"]
    objects = summary.sections["objects"]
    assert objects.unmatched_entries == 9
    assert objects.dropped_per_reason == {reasons.NO_IMAGE.code: 9, reasons.UNKNOWN_CATEGORY.code: 2}
    assert objects.consistent and objects.annotated == objects.stored + objects.dropped
    assert _records(out)["val2017/later.jpg"][:3] == ("validation", (1,), ("cat",))
    assert np.isclose(objects.per_image["mean"], objects.stored / summary.records, atol=0.01)


def test_an_append_whose_new_files_hold_no_picture_is_refused(tmp_path, capsys):
    """New files that are no picture (a label file for a picture the dataset holds, an XML whose
    picture is missing) give an append nothing to add: refused in one line, as when nothing is
    new, never a run that exits 0 having added nothing; the dataset is untouched."""
    root, out = tmp_path / "ds", tmp_path / "out"
    ultralytics_tree(root)
    write_tree(root, {"images/train/negative.jpg": jpeg(48, 32, seed=333)})
    assert convert(root, out, "--annotations", "yolo") == 0
    summary = (out / "summary.json").read_text()
    (root / "labels/train/negative.txt").write_text(yolo_box(1, 0.1, 0.1, 0.5, 0.9))
    (root / "labels/train/ghost.txt").write_text(yolo_box(0, 0.1, 0.1, 0.5, 0.9))
    capsys.readouterr()
    assert convert(root, out, "--annotations", "yolo", "--append") == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "holds no picture the dataset lacks" in err
    assert "2 new files, none a picture" in err and "labels/train/ghost.txt" in err
    assert (out / "summary.json").read_text() == summary and not (out / names.APPEND_DIR).exists()


def test_a_class_given_an_id_the_label_map_left_free_keeps_that_id(tmp_path, capsys):
    """A label map with gaps (the Object Detection API's maps have them): a class the map now
    names at a free id takes that id, as a run over every picture gives it; no old record holds
    a free id, so no old id changes and the append is not refused."""
    root, out, scratch, map_path = (
        tmp_path / "in",
        tmp_path / "out",
        tmp_path / "scratch",
        tmp_path / "m.pbtxt",
    )
    shapes_coco(root, count=3)
    map_path.write_text(TUTORIAL_MAP)  # circle 2, square 5: ids 1, 3 and 4 free
    args = ("--annotations", "coco", "--label_map", str(map_path))
    assert convert(root, out, *args) == 0
    path = root / "annotations" / "instances_shapes.json"
    data = json.loads(path.read_text())
    write_tree(root / "images", {"new.jpg": jpeg(96, 64, seed=5)})
    data["images"].append(image(77, "new.jpg", 96, 64))
    data["annotations"] += [box(7700, 77, 7, [2, 3, 20, 17]), box(7701, 77, 3, [40, 3, 20, 17])]
    path.write_text(json.dumps(data))
    map_path.write_text(TUTORIAL_MAP + "item {\n  id: 3\n  name: 'triangle'\n}\n")
    capsys.readouterr()
    assert convert(root, out, *args, "--append") == 0, capsys.readouterr().err
    assert convert(root, scratch, *args) == 0
    summary = complete_summary(str(out))
    assert summary.class_names == complete_summary(str(scratch)).class_names
    assert summary.class_names[2] == "triangle" and summary.history[-1]["new_classes"] == ["triangle"]
    assert _records(out)["images/new.jpg"] == _records(scratch)["images/new.jpg"]
    assert _records(out)["images/new.jpg"][1:3] == ((2, 4), ("triangle", "square"))
    assert 'id: 3\n  name: "triangle"' in (out / names.LABEL_MAP_FILE).read_text()
    assert (out / names.LABEL_MAP_FILE).read_text() == (scratch / names.LABEL_MAP_FILE).read_text()


def test_a_batch_of_background_pictures_is_appended_when_allowed(tmp_path, capsys):
    """Pictures without objects (Ultralytics' background images: no label file) match no
    annotation on their own, so an append of only those is refused in one line that says how to
    go on: --allow_unmatched_annotations, which then keeps them as a run over every picture
    does (negatives). The source annotates the dataset's pictures: it was found."""
    root, out, scratch = tmp_path / "ds", tmp_path / "out", tmp_path / "scratch"
    ultralytics_tree(root)
    assert convert(root, out, "--annotations", "yolo") == 0
    write_tree(root, {f"images/train/background_{i}.jpg": jpeg(48, 32, seed=600 + i) for i in range(2)})
    capsys.readouterr()
    assert convert(root, out, "--annotations", "yolo", "--append") == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "none of the 2 pictures matches an annotation" in err
    assert "found no annotation file" not in err and "--allow_unmatched_annotations" in err
    args = ("--annotations", "yolo", "--allow_unmatched_annotations")
    assert convert(root, out, *args, "--append") == 0
    assert convert(root, scratch, *args) == 0
    assert _records(out) == _records(scratch)
    assert _records(out)["images/train/background_1.jpg"] == ("train", (), (), ())
    grown, whole = (
        complete_summary(str(out)).sections["objects"],
        complete_summary(str(scratch)).sections["objects"],
    )
    assert grown.negatives == whole.negatives == 2 and grown.consistent


def _annotation_changes(output) -> list[dict]:
    lines = (output / names.CHANGED_SINCE_FILE).read_text().splitlines()
    return [line for line in map(json.loads, lines) if line["change"] == "annotations_changed"]


def test_an_old_picture_whose_boxes_a_reexport_edits_is_listed_never_converted_again(tmp_path, capsys):
    """A COCO re-export that edits an old picture's boxes and adds new pictures: the new ones
    are appended, the edited one keeps its record as converted and is listed (with its split),
    counted in the history and warned of (a full run rebuilds); a rerun lists it again."""
    images, out = tmp_path / "coco", tmp_path / "out"
    coco2017(images)
    assert convert(images, out, "--annotations", "coco") == 0
    before = _records(out)
    path = images / "annotations" / "instances_val2017.json"
    data = json.loads(path.read_text())
    edited = next(a for a in data["annotations"])  # one box of an old picture, moved
    edited["bbox"] = [edited["bbox"][0] + 5, *edited["bbox"][1:]]
    name = next(i["file_name"] for i in data["images"] if i["id"] == edited["image_id"])
    path.write_text(json.dumps(data))
    _coco_reexport(images, "train2017", 2, 100)
    capsys.readouterr()
    assert convert(images, out, "--annotations", "coco", "--append") == 0
    assert "old pictures' annotations changed" in capsys.readouterr().out
    grown = _records(out)
    assert {k: v for k, v in grown.items() if k in before} == before  # never converted again
    assert {"train2017/new_0.jpg", "train2017/new_1.jpg"} <= set(grown)
    assert _annotation_changes(out) == [
        {"path": f"val2017/{name}", "change": "annotations_changed", "split": "validation"}
    ]
    summary = complete_summary(str(out))
    assert summary.history[-1]["annotations_changed"] == 1
    warning = "1 old pictures' annotations changed since they were converted"
    assert any(w.startswith(warning) and "--overwrite" in w for w in summary.warnings)
    # The next append (one more new picture) still finds it: the index keeps the digest the
    # record was made from, and the warning is this run's, not repeated.
    _coco_reexport(images, "val2017", 1, 900)
    assert convert(images, out, "--annotations", "coco", "--append") == 0
    assert [c["path"] for c in _annotation_changes(out)] == [f"val2017/{name}"]
    warnings = complete_summary(str(out)).warnings
    assert sum("annotations changed" in w for w in warnings) == 1


def test_a_label_file_for_an_old_unannotated_picture_is_listed(tmp_path):
    """An Ultralytics tree whose old background picture (no label file) gets a label file, as new
    pictures arrive with theirs: the old picture stays a negative record and is listed."""
    root, out = tmp_path / "ds", tmp_path / "out"
    ultralytics_tree(root)
    write_tree(root, {"images/train/negative.jpg": jpeg(48, 32, seed=333)})
    assert convert(root, out, "--annotations", "yolo") == 0
    assert _records(out)["images/train/negative.jpg"] == ("train", (), (), ())
    (root / "labels/train/negative.txt").write_text(yolo_box(1, 0.1, 0.1, 0.5, 0.9))
    write_tree(root, {"images/val/new.jpg": jpeg(48, 32, seed=334)})
    (root / "labels/val/new.txt").write_text(yolo_box(0, 0.1, 0.1, 0.5, 0.9))
    assert convert(root, out, "--annotations", "yolo", "--append") == 0
    grown = _records(out)
    assert grown["images/train/negative.jpg"] == ("train", (), (), ())
    assert grown["images/val/new.jpg"][:3] == ("validation", (0,), ("cat",))
    listed = {"path": "images/train/negative.jpg", "change": "annotations_changed", "split": "train"}
    assert _annotation_changes(out) == [listed]
    assert complete_summary(str(out)).history[-1]["annotations_changed"] == 1


def test_an_index_without_annotation_digests_is_not_compared(tmp_path, caplog):
    """A dataset indexed before the index kept annotation digests: its old pictures are not
    compared (the log says so once), nothing is listed, and the append goes on."""
    root, out = tmp_path / "ds", tmp_path / "out"
    ultralytics_tree(root)
    assert convert(root, out, "--annotations", "yolo") == 0
    index = out / names.INDEX_FILE
    rows = [json.loads(line) for line in index.read_text().splitlines()]
    assert all(len(r) == 8 for r in rows if r[3] is not None)  # each record's digest is kept
    index.write_text("".join(json.dumps(r[:5]) + "\n" for r in rows))  # as written before
    (root / "labels/train/images_train_0.txt").write_text(yolo_box(1, 0.2, 0.2, 0.6, 0.9))
    write_tree(root, {"images/val/new.jpg": jpeg(48, 32, seed=334)})
    (root / "labels/val/new.txt").write_text(yolo_box(0, 0.1, 0.1, 0.5, 0.9))
    caplog.set_level("INFO")
    assert convert(root, out, "--annotations", "yolo", "--append") == 0
    assert sum("annotations' digest" in r.getMessage() for r in caplog.records) == 1
    assert _annotation_changes(out) == []
    assert complete_summary(str(out)).history[-1]["annotations_changed"] == 0


@pytest.mark.parametrize("killed", [None, "append_metadata"])
def test_the_same_dropped_box_of_two_folders_is_listed_twice(tmp_path, killed):
    """A second folder whose pictures and label files have the names of the first's (an export
    delivered again, copied without its times), each with the same box that has no area (found
    in review): dropped_objects.jsonl joined the two runs' lines as a set, so it listed the box
    once while the summary counted it twice. A merge killed after writing it and run again lists
    each once."""
    first, again, out = tmp_path / "a", tmp_path / "b", tmp_path / "out"
    args = ("--annotations", "yolo")
    ultralytics_tree(first)
    label = sorted((first / "labels" / "train").glob("*.txt"))[0]
    label.write_text(label.read_text() + yolo_box(0, 0.5, 0.5, 0.5, 0.5))  # a box with no area
    assert convert(first, out, *args) == 0
    shutil.copytree(first, again, copy_function=shutil.copyfile)  # new times: other files
    if killed:
        pausing.killed_at(killed, again, out, "--no_progress", *args, "--append")
    assert convert(again, out, *args, "--append") == 0
    summary = complete_summary(str(out))
    lines = (out / names.DROPPED_OBJECTS_FILE).read_text().splitlines()
    assert summary.sections["objects"].dropped_per_reason == {reasons.ZERO_AREA.code: 2}
    assert len(lines) == summary.sections["objects"].dropped == 2 and lines[0] == lines[1]
