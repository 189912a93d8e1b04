"""A label map the user already has (--label_map) fixes a detection run's class names and ids:
label_map.pbtxt as the Object Detection API's tutorials and COCO's own map write it, or the
labels.txt a run writes; ids with gaps come back as given, in label_map.pbtxt, in every record
and through every reader; classes the map lacks are dropped, named."""

from __future__ import annotations

import json

import annotationgen
import numpy as np
import pytest
from annotationgen import load_annotations
from conftest import convert
from imagegen import jpeg, write_tree

import beam_tfrecord
from beam_tfrecord.config_base import ConfigError
from beam_tfrecord.labels.objects import reading as detection
from beam_tfrecord.plan.annotations.label_map import parse_label_map, read_label_map
from beam_tfrecord.plan.annotations.options import AnnotationConfig
from beam_tfrecord.plan.listing import list_inputs
from beam_tfrecord.plan.source_config import SourceConfig

# As the TF2 Object Detection API tutorial tells users to write it: single quotes, blank lines,
# four-space indents, a comment. `circle` is a class the pictures lack; the pictures' triangles
# are a class the map lacks. Ids 1, 3, 4 are gaps.
TUTORIAL_MAP = """# label_map.pbtxt for the shapes detector
item {
    id: 2
    name: 'circle'
}

item {
    id: 5
    name: 'square'  # the pictures' squares
}
"""

# As COCO's mscoco_label_map.pbtxt writes it: double quotes, `name` a machine id and
# `display_name` the class COCO's instances files use; fields the run has no use for.
COCO_STYLE_MAP = """item {
  name: "/m/01g317"
  id: 1
  display_name: "circle"
}
item {
  name: "/m/0square"
  id: 5
  display_name: "square"
  keypoints { id: 0 label: "corner" }
  frequency: FREQUENT
}
"""


def test_the_tutorials_label_map_gives_its_ids_with_placeholders_for_the_gaps():
    found = parse_label_map(TUTORIAL_MAP)
    assert found.names == {2: "circle", 5: "square"}
    assert found.class_names == ("(unused id 1)", "circle", "(unused id 3)", "(unused id 4)", "square")


def test_cocos_label_map_classes_are_display_names_and_objects_match_either_name():
    found = parse_label_map(COCO_STYLE_MAP)
    assert found.names == {1: "circle", 5: "square"}
    assert found.aliases["/m/0square"] == "square" and found.aliases["square"] == "square"


def test_a_runs_labels_txt_reads_back_as_the_same_ids():
    text = "(unused id 1)\ncircle\n(unused id 3)\n\nsquare\n"
    assert parse_label_map(text).names == {2: "circle", 5: "square"}


@pytest.mark.parametrize(
    "text, says",
    [
        ("item {\n  id: 1\n  name: 'a'\n}\nitem {\n  id: 1\n  name: 'b'\n}\n", "id 1 is given twice"),
        ("item { id: 1 name: 'a' }\nitem { id: 2 name: 'a' }\n", "class 'a' has two ids"),
        ("item { id: 0 name: 'a' }\n", "id 0 of 'a' is not between 1"),
        ("item { id: -3 name: 'a' }\n", "id -3"),
        ("item { name: 'a' }\n", "item 1 needs an id and a name"),
        ("item { id: 1 name: 'a' \n", "is not a label_map.pbtxt"),
        ("item { id: 'one' name: 'a' }\n", "is not a label_map.pbtxt"),
        ("\n\n", "names no class"),
    ],
)
def test_a_label_map_that_cannot_give_one_id_per_class_is_refused_with_why(text, says):
    with pytest.raises(ValueError, match=r"^label_map") as error:
        parse_label_map(text)
    assert says in str(error.value)


def test_the_background_item_some_maps_carry_at_id_0_is_not_a_class():
    found = parse_label_map("item { id: 0 name: 'background' }\nitem { id: 1 name: 'cat' }\n")
    assert found.class_names == ("cat",)


def test_a_missing_file_names_the_option(tmp_path):
    with pytest.raises(ValueError, match=r"^label_map .*nope.pbtxt cannot be read"):
        read_label_map(str(tmp_path / "nope.pbtxt"))


def test_label_map_and_class_names_are_exclusive_and_label_map_needs_annotations(tmp_path):
    with pytest.raises(ConfigError, match="leave class_names out"):
        SourceConfig("in", class_names=("a",), annotations=AnnotationConfig("coco", label_map="m.pbtxt"))
    write_tree(tmp_path / "in", {"a.jpg": jpeg()})
    assert convert(tmp_path / "in", tmp_path / "out", "--label_map", "m.pbtxt") == 2


def test_objects_match_the_map_by_name_or_display_name_and_others_are_dropped(tmp_path):
    annotationgen.shapes_coco(tmp_path / "in", count=3)
    (tmp_path / "map.pbtxt").write_text(COCO_STYLE_MAP)
    found = load_annotations("coco", list_inputs(str(tmp_path / "in")), label_map=str(tmp_path / "map.pbtxt"))
    assert found.class_names == ("circle", "(unused id 2)", "(unused id 3)", "(unused id 4)", "square")
    labels = {obj.class_name for image in found.images.values() for obj in image.objects}
    assert labels == {"square"}
    assert {note.reason for note in found.dropped} == {"unknown_category"}
    assert all("is not in the label map" in note.detail for note in found.dropped)


@pytest.fixture(scope="module")
def mapped_output(tmp_path_factory):
    """Shapes (squares, triangles) converted with the tutorial's map: squares keep id 5."""
    root = tmp_path_factory.mktemp("label_map")
    truth = annotationgen.shapes_coco(root / "in")
    (root / "label_map.pbtxt").write_text(TUTORIAL_MAP)
    out = root / "out"
    code = convert(
        root / "in", out, "--annotations", "coco", "--masks", "--label_map", str(root / "label_map.pbtxt")
    )
    assert code == 0
    return out, truth


SQUARE, TRIANGLE = 3, 7  # shapes_coco's category ids


def test_the_written_label_map_keeps_the_given_ids_and_labels_txt_their_places(mapped_output):
    out, truth = mapped_output
    assert parse_label_map((out / "label_map.pbtxt").read_text()).names == {2: "circle", 5: "square"}
    assert (out / "labels.txt").read_text().splitlines() == [
        "(unused id 1)",
        "circle",
        "(unused id 3)",
        "(unused id 4)",
        "square",
    ]
    summary = json.loads((out / "summary.json").read_text())
    triangles = sum(o["category_id"] == TRIANGLE for objects in truth.values() for o in objects)
    assert summary["objects"]["dropped_per_reason"] == {"unknown_category": triangles}
    assert summary["objects"]["per_class"]["circle"]["objects"] == 0
    assert summary["options"]["label_map"].endswith("label_map.pbtxt")
    # A missing id is no class: no "has no valid image" warning for its placeholder.
    assert not [w for w in summary["warnings"] if "(unused id" in w]


def test_every_reader_gives_the_maps_ids_and_names(mapped_output):
    out, truth = mapped_output
    names = beam_tfrecord.class_names(str(out))
    records = {r["filename"].split("/")[-1]: r for r in beam_tfrecord.iter_examples(str(out))}
    for name, objects in truth.items():
        squares = sum(o["category_id"] == SQUARE for o in objects)
        record = records[name]
        assert record["object_label"] == [5] * squares  # as stored: image/object/class/label
        assert record["labels"].tolist() == [4] * squares  # from 0
        assert [names[i] for i in record["labels"]] == ["square"] * squares
        # TorchImages' targets (its NumPy half; torchvision counts from 1, 0 the background).
        target = detection.detection_target(record, labels_from=1)
        assert target["labels"].tolist() == [5] * squares
    dataset = beam_tfrecord.load_dataset(str(out), "train", batch_size=None, shuffle=False)
    seen = [np.asarray(targets["labels"]).tolist() for _, targets in dataset]
    assert sorted(label for labels in seen for label in labels) == [4] * sum(
        o["category_id"] == SQUARE for objects in truth.values() for o in objects
    )


def test_a_pbtxt_that_does_not_parse_is_refused_never_read_as_lines():
    with pytest.raises(ValueError, match=r"is not a label_map\.pbtxt"):
        parse_label_map("items {\n  id: 1\n  name: 'cat'\n}\n", "maps/label_map.pbtxt")
    assert parse_label_map("item: { id: 3 name: 'cat' }").names == {3: "cat"}
