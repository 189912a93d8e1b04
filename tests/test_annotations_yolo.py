"""YOLO label files read against a listing: the `labels/` tree that mirrors `images/`, class
names from data.yaml or classes.txt, boxes and polygons as fractions, and every malformed line
named by its file and line number."""

from __future__ import annotations

import re

import pytest
from annotationgen import load_annotations, yolo_box
from imagegen import jpeg, png, write_tree

from beam_tfrecord.elements import Polygon
from beam_tfrecord.plan.listing import list_inputs

DATA_YAML = b"""
path: ../datasets/pets
train: images/train
val: images/val
nc: 3
names: [cat, dog, 'bird']
"""


# Nine levels of nine aliases: 9**9 strings if anything expanded it into text.
ALIAS_BOMB = (
    b'a: &a ["lol", "lol", "lol", "lol", "lol", "lol", "lol", "lol", "lol"]\n'
    + b"".join(
        f"{c}: &{c} [{', '.join([f'*{p}'] * 9)}]\n".encode()
        for p, c in zip("abcdefgh", "bcdefghi", strict=True)
    )
    + b"names: [*i]\n"
)


def load(root, annotations_path=None, **kwargs):
    return load_annotations("yolo", list_inputs(str(root)), annotations_path, **kwargs)


@pytest.fixture
def yolo_tree(tmp_path):
    root = tmp_path / "pets"
    write_tree(
        root,
        {
            "data.yaml": DATA_YAML,
            "images/train/a.jpg": jpeg(),
            "labels/train/a.txt": b"1 0.5 0.5 0.25 0.5\n0 0.1 0.2 0.1 0.2\n",
            "images/train/b.png": png(),
            "labels/train/b.txt": b"2 0.1 0.1 0.9 0.2 0.5 0.8\n\n",
            "images/val/c.jpg": jpeg(),
            "labels/val/c.txt": b"",
            "images/val/d.jpg": jpeg(),  # no label file
            "labels/val/gone.txt": b"0 0.5 0.5 0.2 0.2\n1 0.5 0.5 0.2 0.2\n",
            "README.txt": b"a dataset\n",
        },
    )
    return root


def test_boxes_are_corners_in_fractions_with_names_from_data_yaml(yolo_tree):
    found = load(yolo_tree)
    assert found.class_names == ("cat", "dog", "bird")
    first = found.images["images/train/a.jpg"]
    assert (first.normalized, first.source_id, first.width, first.split) == (
        True,
        "images/train/a",
        None,
        None,
    )
    dog, cat = first.objects
    assert (dog.class_name, dog.xmin, dog.ymin, dog.xmax, dog.ymax) == ("dog", 0.375, 0.25, 0.625, 0.75)
    assert cat.class_name == "cat" and cat.xmin == pytest.approx(0.05) and cat.ymax == pytest.approx(0.3)
    assert dog.source_ref == "labels/train/a.txt:1" and cat.source_ref == "labels/train/a.txt:2"


def test_segmentation_lines_become_polygons_boxed_by_their_extent(yolo_tree):
    (bird,) = load(yolo_tree).images["images/train/b.png"].objects
    assert bird.mask == (Polygon((0.1, 0.1, 0.9, 0.2, 0.5, 0.8)),)
    assert (bird.class_name, bird.xmin, bird.ymin, bird.xmax, bird.ymax) == ("bird", 0.1, 0.1, 0.9, 0.8)
    (unmasked,) = load(yolo_tree, masks=False).images["images/train/b.png"].objects
    assert unmasked.mask is None and unmasked.xmax == 0.9


def test_negatives_orphans_and_sources(yolo_tree):
    found = load(yolo_tree)
    assert found.images["images/val/c.jpg"].objects == ()  # an empty label file
    assert found.images["images/val/d.jpg"].objects == ()  # no label file
    assert found.unannotated == {"images/val/d.jpg"}
    (orphan,) = found.unmatched
    assert (orphan.annotation, orphan.name, orphan.reason, orphan.objects) == (
        "labels/val/gone.txt",
        "images/val/gone.*",
        "missing_image",
        2,
    )
    assert set(found.sources) == {
        "data.yaml",
        "labels/train/a.txt",
        "labels/train/b.txt",
        "labels/val/c.txt",
        "labels/val/gone.txt",
        "README.txt",
    }
    assert found.sources["data.yaml"] == "YOLO class names, read"
    assert found.sources["labels/train/a.txt"] == "YOLO labels of images/train/a.jpg"
    assert set(found.images) == {
        "images/train/a.jpg",
        "images/train/b.png",
        "images/val/c.jpg",
        "images/val/d.jpg",
    }


@pytest.mark.parametrize(
    ("line", "says"),
    [
        ("0 0.5 0.5 0.2", "4 values; expected 'class cx cy w h'"),
        ("0 0.5 0.5 0.2 0.2 0.93", "6 values"),
        ("0 0.5 0.5 wide 0.2", "'wide' is not a number"),
        ("0 0.5 0.5 nan 0.2", "'nan' is not a finite number"),
        ("1.5 0.5 0.5 0.2 0.2", "class '1.5' is not a class index"),
    ],
)
def test_a_malformed_line_rejects_its_image_naming_file_and_line(yolo_tree, line, says):
    (yolo_tree / "labels/train/a.txt").write_text(f"1 0.5 0.5 0.25 0.5\n\n{line}\n")
    found = load(yolo_tree)
    (problem,) = found.problems
    assert (problem.relpath, problem.reason) == ("images/train/a.jpg", "bad_annotation")
    assert problem.detail.startswith("labels/train/a.txt:3: ") and says in problem.detail
    assert "images/train/a.jpg" not in found.images
    assert len(found.images["images/train/b.png"].objects) == 1


def test_unknown_classes_and_empty_boxes_are_dropped_by_line(yolo_tree):
    (yolo_tree / "labels/train/a.txt").write_text("1 0.5 0.5 0.25 0.5\n7 0.5 0.5 0.2 0.2\n0 0.5 0.5 0 0.2\n")
    found = load(yolo_tree)
    assert len(found.images["images/train/a.jpg"].objects) == 1
    assert [(n.reason, n.detail) for n in found.dropped] == [
        ("unknown_category", "labels/train/a.txt:2: class 7 has no name (names: 0..2)"),
        ("zero_area", "labels/train/a.txt:3: the box has no area"),
    ]


def test_names_as_a_mapping_classes_txt_or_a_file_outside_the_input(tmp_path):
    files = {"images/a.jpg": jpeg(), "labels/a.txt": b"5 0.5 0.5 0.2 0.2\n0 0.5 0.5 0.2 0.2\n"}
    write_tree(tmp_path / "mapping", {**files, "data.yaml": b"names:\n  0: person\n  5: car\n"})
    found = load(tmp_path / "mapping")
    assert found.class_names == ("person", "car")
    assert [o.class_name for o in found.images["images/a.jpg"].objects] == ["car", "person"]

    write_tree(tmp_path / "txt", {**files, "labels/classes.txt": b"c0\nc1\nc2\nc3\nc4\nc5\n\n"})
    found = load(tmp_path / "txt")
    assert found.class_names == ("c0", "c1", "c2", "c3", "c4", "c5")
    assert found.sources["labels/classes.txt"] == "YOLO class names, read"
    assert not found.unmatched  # classes.txt is not a label file without an image

    write_tree(tmp_path / "bare", files)
    (tmp_path / "names.yaml").write_bytes(b"names: [a, b, c, d, e, f]\n")
    assert load(tmp_path / "bare", str(tmp_path / "names.yaml")).class_names == tuple("abcdef")


def test_label_files_beside_the_images(tmp_path):
    line = yolo_box(0, 0.125, 0.25, 0.5, 0.875)
    write_tree(tmp_path, {"x.jpg": jpeg(), "x.txt": line.encode(), "classes.txt": b"thing\n"})
    (thing,) = load(tmp_path).images["x.jpg"].objects
    assert (thing.class_name, thing.xmin, thing.ymin, thing.xmax, thing.ymax) == (
        "thing",
        0.125,
        0.25,
        0.5,
        0.875,
    )


@pytest.mark.parametrize(
    ("names_file", "text", "says"),
    [
        ("data.yaml", b"names: [a, b\nnc: 2\n", "is not valid YAML"),
        ("data.yaml", b"nc: 3\nnames: [a, b]\n", "says nc: 3 but names 2 classes"),
        ("data.yaml", b"names: [a, a]\n", "names 'a' twice"),
        ("data.yaml", b"names: {zero: a}\n", "not an index"),
        ("classes.txt", b"a\n\nb\n", "line 2 is blank"),
        ("data.yaml", ALIAS_BOMB, "gives class 0 a list, not a name"),
    ],
)
def test_class_names_that_do_not_parse_stop_the_run_naming_the_file(tmp_path, names_file, text, says):
    write_tree(tmp_path, {"images/a.jpg": jpeg(), names_file: text})
    with pytest.raises(ValueError, match=re.escape(f"YOLO class names: {names_file}")) as raised:
        load(tmp_path)
    assert says in str(raised.value)


def test_no_class_names_stops_the_run(tmp_path):
    write_tree(tmp_path, {"images/a.jpg": jpeg(), "labels/a.txt": b"0 0.5 0.5 0.1 0.1\n"})
    with pytest.raises(ValueError, match="no YAML file with 'names'"):
        load(tmp_path)
    with pytest.raises(ValueError, match="takes one path, without a split"):
        load(tmp_path, f"train={tmp_path}/labels/a.txt")


def test_two_data_files_that_disagree_at_one_depth_must_be_chosen_between(tmp_path):
    write_tree(tmp_path, {"images/a.jpg": jpeg(), "a.yaml": b"names: [x]\n", "b.yaml": b"names: [y]\n"})
    with pytest.raises(ValueError, match=r"a\.yaml and b\.yaml give different names"):
        load(tmp_path)
    write_tree(tmp_path, {"b.yaml": b"names: [x]\n", "deeper/c.yaml": b"names: [z]\n"})
    assert load(tmp_path).class_names == ("x",)
