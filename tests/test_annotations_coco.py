"""COCO instances files read against a listing: labels, boxes, masks, splits, and every broken
file, entry and object named with a reason. Datasets are written to tmp_path and listed as a run
lists them; pycocotools is the reference for COCO's run-length masks."""

from __future__ import annotations

import json
import os

import numpy as np
import pytest
from annotationgen import CATEGORIES, box, image, instances, load_annotations
from imagegen import jpeg, png, write_tree
from pycocotools import mask as coco_mask

from beam_tfrecord.elements import Polygon, RunLengths
from beam_tfrecord.plan.annotations import rle
from beam_tfrecord.plan.annotations.options import AnnotationConfig
from beam_tfrecord.plan.annotations.paths import AnnotationPath, parse_annotation_paths
from beam_tfrecord.plan.listing import list_inputs
from beam_tfrecord.plan.planner import make_plan
from beam_tfrecord.plan.source_config import SourceConfig


def load(root, annotations_path=None, **kwargs):
    return load_annotations("coco", list_inputs(str(root)), annotations_path, **kwargs)


@pytest.fixture
def coco_tree(tmp_path):
    """The usual layout: annotations/instances_train2017.json beside train2017/."""
    root = tmp_path / "coco"
    images = [image(1, "000001.jpg"), image(2, "000002.jpg", 64, 48), image(3, "000003.jpg")]
    annotations = [
        box(101, 1, 18, [4, 5, 10, 8], segmentation=[[4, 5, 14, 5, 14, 13, 4, 13]]),
        box(102, 1, 1, [0.5, 1.5, 20, 10.25], segmentation=[[1, 2, 20, 2, 10, 11], [1, 1, 2, 1, 2, 2]]),
        box(
            103,
            2,
            17,
            [10, 10, 5, 5],
            iscrowd=1,
            area=17.0,
            segmentation={"size": [48, 64], "counts": [650, 5, 43, 5, 2369]},
        ),
    ]
    write_tree(
        root,
        {
            "annotations/instances_train2017.json": instances(images, annotations),
            "annotations/captions_train2017.json": b'{"annotations": []}',
            "train2017/000001.jpg": jpeg(48, 32),
            "train2017/000002.jpg": jpeg(64, 48),
            "train2017/000003.jpg": jpeg(48, 32),
            "train2017/000004.jpg": jpeg(48, 32),
        },
    )
    return root


def test_labels_follow_category_ids_and_boxes_become_corners_in_pixels(coco_tree):
    found = load(coco_tree)
    assert found.class_names == ("person", "cat", "dog")  # ids 1, 17, 18: contiguous 0, 1, 2
    assert found.class_ids() == {"person": 0, "cat": 1, "dog": 2}
    first = found.images["train2017/000001.jpg"]
    assert (first.source_id, first.width, first.height, first.normalized) == ("1", 48, 32, False)
    dog, person = first.objects
    assert (dog.class_name, dog.xmin, dog.ymin, dog.xmax, dog.ymax) == ("dog", 4, 5, 14, 13)
    assert (person.xmin, person.ymin, person.xmax, person.ymax) == (0.5, 1.5, 20.5, 11.75)
    assert (dog.area, dog.is_crowd) == (80.0, False)
    assert dog.source_ref == "annotations/instances_train2017.json#annotation 101"
    assert dog.mask == (Polygon((4.0, 5.0, 14.0, 5.0, 14.0, 13.0, 4.0, 13.0)),)
    assert len(person.mask) == 2


def test_crowd_run_lengths_and_area_are_kept(coco_tree):
    (crowd,) = load(coco_tree).images["train2017/000002.jpg"].objects
    assert (crowd.class_name, crowd.is_crowd, crowd.area) == ("cat", True, 17.0)
    assert crowd.mask == RunLengths(48, 64, (650, 5, 43, 5, 2369))
    pixels = rle.to_mask(crowd.mask)
    assert pixels.shape == (48, 64) and pixels.sum() == 10
    assert rle.extent(crowd.mask) == (13.0, 26.0, 15.0, 31.0)


def test_images_listed_without_objects_and_images_the_file_omits_are_told_apart(coco_tree):
    found = load(coco_tree)
    assert found.images["train2017/000003.jpg"].objects == ()  # in the file, no annotation
    assert found.images["train2017/000004.jpg"].objects == ()  # not in the file at all
    assert found.unannotated == {"train2017/000004.jpg"}
    assert not found.problems and not found.dropped and not found.unmatched


def test_annotation_files_are_sources_never_inputs(coco_tree):
    found = load(coco_tree)
    assert set(found.sources) == {
        "annotations/instances_train2017.json",
        "annotations/captions_train2017.json",
    }
    assert (
        found.sources["annotations/instances_train2017.json"] == "COCO instances file of split train, read"
    )  # its name declares it
    assert "not read" in found.sources["annotations/captions_train2017.json"]
    assert not set(found.sources) & set(found.images)


def test_an_instances_file_whose_name_is_not_utf8_is_found_and_read(coco_tree):
    """Found beside --input like any other (never left out without a word), and named with \\xNN
    in what the run says of it."""
    folder = os.fsencode(coco_tree / "annotations")
    os.rename(folder + b"/instances_train2017.json", folder + b"/instances_train2017\xe9.json")
    found = load(coco_tree / "train2017")
    assert found.class_names == ("person", "cat", "dog")
    assert len(found.images["000001.jpg"].objects) == 2
    assert "instances_train2017\\xe9.json" in found.found_at


def test_masks_false_keeps_boxes_only(coco_tree):
    found = load(coco_tree, masks=False)
    objects = [obj for image in found.images.values() for obj in image.objects]
    assert len(objects) == 3 and all(obj.mask is None for obj in objects)


def test_compressed_run_lengths_decode_as_pycocotools_encodes_them(tmp_path):
    mask = np.zeros((32, 48), np.uint8, order="F")
    mask[3:9, 20:31] = 1
    mask[20, 40] = 1
    encoded = coco_mask.encode(np.asfortranarray(mask))
    annotation = box(1, 1, 1, [20, 3, 21, 18], iscrowd=1)
    annotation["segmentation"] = {"size": encoded["size"], "counts": encoded["counts"].decode()}
    write_tree(tmp_path, {"a.jpg": jpeg(), "instances_x.json": instances([image(1, "a.jpg")], [annotation])})
    (crowd,) = load(tmp_path).images["a.jpg"].objects
    assert isinstance(crowd.mask, RunLengths)
    assert np.array_equal(rle.to_mask(crowd.mask), mask)


def test_run_length_string_codec_against_a_known_encoding_and_pycocotools():
    # A 4x4 mask with a 2x2 square at rows 1-2, columns 1-2: column-major runs 5 zeros, 2 ones,
    # 2 zeros, 2 ones, 5 zeros; counts after the third are stored as differences (2-2=0, 5-2=3).
    assert rle.encode_counts((5, 2, 2, 2, 5)) == "52203"
    assert rle.decode_counts("52203") == (5, 2, 2, 2, 5)
    square = np.zeros((4, 4), np.uint8, order="F")
    square[1:3, 1:3] = 1
    assert coco_mask.encode(square)["counts"] == b"52203"
    rng = np.random.default_rng(7)
    for _ in range(100):
        height, width = (int(v) for v in rng.integers(1, 80, 2))
        pixels = np.asfortranarray((rng.random((height, width)) < rng.random()).astype(np.uint8))
        encoded = coco_mask.encode(pixels)
        counts = rle.decode_counts(encoded["counts"].decode())
        assert rle.encode_counts(counts) == encoded["counts"].decode()
        runs = RunLengths(height, width, counts)
        assert np.array_equal(rle.to_mask(runs), pixels)
        assert rle.from_mask(pixels) == runs  # the labelling tools' masks, made COCO's
        x, y, w, h = coco_mask.toBbox(encoded)
        assert rle.extent(runs) == ((x, y, x + w, y + h) if pixels.any() else None)
    with pytest.raises(rle.BadRunLengths):
        rle.decode_counts("5\x7f")


def test_dropped_objects_name_the_annotation_and_why(tmp_path):
    annotations = [
        box(1, 1, 18, [1, 1, 5, 5]),
        box(2, 1, 42, [1, 1, 5, 5]),  # no such category
        box(3, 1, 18, [1, 1, 0, 5]),  # no width
        box(4, 1, 18, [1, "x", 5, 5]),
        box(5, 1, 18, [1, 1, 5]),
        {"id": 6, "image_id": 1, "category_id": 18, "segmentation": [[2, 2, 9, 2, 9, 6]]},  # box from mask
        box(7, 1, 18, [1, 1, 5, 5], segmentation=[[1, 2, 3]]),  # a mask that is not a polygon
        box(8, 1, 18, [1, 1, 5, 5], iscrowd=1, segmentation={"size": [4, 4], "counts": "52203"}),
    ]
    write_tree(tmp_path, {"a.jpg": jpeg(), "instances_x.json": instances([image(1, "a.jpg")], annotations)})
    found = load(tmp_path)
    kept = found.images["a.jpg"].objects
    assert [o.source_ref.rsplit(" ", 1)[1] for o in kept] == ["1", "6", "7", "8"]
    assert (kept[1].xmin, kept[1].ymin, kept[1].xmax, kept[1].ymax) == (2, 2, 9, 6)
    assert kept[2].mask is None and kept[3].mask is None and kept[3].is_crowd
    assert [(n.reason, n.detail.split(":")[0]) for n in found.dropped] == [
        ("unknown_category", "instances_x.json#annotation 2"),
        ("zero_area", "instances_x.json#annotation 3"),
        ("bad_object", "instances_x.json#annotation 4"),
        ("bad_object", "instances_x.json#annotation 5"),
    ]
    assert "category_id 42" in found.dropped[0].detail
    assert [(n.reason, n.relpath) for n in found.changed] == [("mask_malformed", "a.jpg")] * 2
    assert "polygon 0" in found.changed[0].detail
    assert found.changed[1].detail.endswith("#annotation 8: run lengths over 4x4, the image's 32x48")
    assert found.annotated_objects == len(annotations)


def test_parts_of_one_or_two_points_are_left_out_as_coco_fills_nothing_for_them(tmp_path):
    """annToMask fills nothing for a part of 1 or 2 points after the first (and fails on one
    first): the rest of the mask is kept; a mask of no fillable part is `mask_dropped`."""
    ring = [2, 2, 9, 2, 9, 6]
    annotations = [
        box(1, 1, 18, [2, 2, 7, 4], segmentation=[ring, [3, 3, 8, 5], [4, 4]]),
        box(2, 1, 18, [2, 2, 7, 4], segmentation=[[3, 3, 8, 5]]),
    ]
    write_tree(tmp_path, {"a.jpg": jpeg(), "instances_x.json": instances([image(1, "a.jpg")], annotations)})
    found = load(tmp_path)
    kept, no_mask = found.images["a.jpg"].objects
    assert kept.mask == (Polygon(tuple(map(float, ring))),) and no_mask.mask is None
    expected = coco_mask.decode(coco_mask.merge(coco_mask.frPyObjects([ring, [3, 3, 8, 5], [4, 4]], 32, 48)))
    assert np.array_equal(coco_mask.decode(coco_mask.merge(coco_mask.frPyObjects([ring], 32, 48))), expected)
    assert [(n.reason, n.detail.rsplit(": ", 1)[1]) for n in found.changed] == [
        ("mask_malformed", "no polygon has 3 points or more")
    ]


def test_each_planned_image_carries_the_changes_of_its_own_objects_and_no_others(tmp_path):
    """The notes planning makes (a mask left out) go to the image whose object changed, sorted
    and once per reason, whatever the number of images (they are gathered in one pass, not looked
    for once per image); they become that record's changes.jsonl reasons."""
    count = 30
    images = [image(i, f"{i}.jpg") for i in range(1, count + 1)]
    annotations = []
    for i in range(1, count + 1):
        masks = [[[2, 2, 9, 2, 9, 6]], [[1, 2, 3]]] if i % 3 == 0 else [[[2, 2, 9, 2, 9, 6]]]
        annotations += [box(100 * i + k, i, 18, [1, 1, 5, 5], segmentation=m) for k, m in enumerate(masks)]
    annotations.append(box(1, 5, 18, [1, 1, 5, 5], segmentation=[[1, 2]]))  # two changed on one image
    annotations.append(box(2, 5, 18, [1, 1, 5, 5], segmentation=[[3, 4]]))
    files = {f"{i}.jpg": jpeg() for i in range(1, count + 1)} | {"b.jpg": jpeg()}  # b: a negative
    write_tree(tmp_path, files | {"instances_x.json": instances(images, annotations)})
    source = SourceConfig(input=str(tmp_path), annotations=AnnotationConfig("coco", masks=True))
    plan = make_plan(list_inputs(str(tmp_path)), source)
    notes = {item.relpath: item.annotations.notes for item in plan.inputs}
    changed = {f"{i}.jpg" for i in range(3, count + 1, 3)} | {"5.jpg"}
    assert notes == {name: ("mask_malformed",) if name in changed else () for name in files}


def test_entries_naming_missing_files_or_unknown_images_are_listed_with_their_objects(tmp_path):
    images = [image(1, "a.jpg"), image(2, "gone.jpg"), {"id": 3}, "not an image"]
    annotations = [
        box(1, 1, 1, [1, 1, 4, 4]),
        box(2, 2, 1, [1, 1, 4, 4]),
        box(3, 2, 17, [1, 1, 4, 4]),
        box(4, 77, 1, [1, 1, 4, 4]),
        box(5, 3, 1, [1, 1, 4, 4]),
    ]
    write_tree(tmp_path, {"a.jpg": jpeg(), "instances_x.json": instances(images, annotations)})
    found = load(tmp_path)
    unmatched = {(u.annotation, u.reason, u.objects) for u in found.unmatched}
    assert unmatched == {
        ("instances_x.json#images[3]", "bad_entry", 0),
        ("instances_x.json#image 2", "missing_image", 2),
        ("instances_x.json#image 3", "bad_entry", 1),
        ("instances_x.json#annotation 4", "unknown_image", 1),
    }
    assert next(u for u in found.unmatched if u.reason == "missing_image").name == "gone.jpg"
    assert json.loads(found.unmatched[0].to_json())["reason"]
    assert found.annotated_objects == 5


def test_file_names_match_by_path_suffix_and_the_annotation_files_folder_settles_ties(tmp_path):
    write_tree(
        tmp_path,
        {
            "coco/train2017/x.jpg": jpeg(),
            "coco/val2017/x.jpg": jpeg(),
            "coco/val2017/y.jpg": jpeg(),
            "coco/annotations/instances_train2017.json": instances(
                [image(1, "x.jpg"), image(2, "/mnt/data/coco/val2017/y.jpg")], [box(1, 1, 1, [1, 1, 4, 4])]
            ),
        },
    )
    found = load(tmp_path)
    assert found.images["coco/train2017/x.jpg"].source_id == "1"
    assert found.images["coco/val2017/y.jpg"].source_id == "2"  # an absolute path ending in a relpath
    assert found.unannotated == {"coco/val2017/x.jpg"}


def test_an_ambiguous_file_name_rejects_every_file_it_could_mean(tmp_path):
    write_tree(
        tmp_path,
        {
            "a/x.jpg": jpeg(),
            "b/x.jpg": jpeg(),
            "a/z.jpg": jpeg(),
            "data.json": instances([image(1, "x.jpg"), image(2, "z.jpg")], [box(1, 1, 1, [1, 1, 4, 4])]),
        },
    )
    found = load(tmp_path, str(tmp_path / "data.json"))
    assert [(p.relpath, p.reason) for p in found.problems] == [
        ("a/x.jpg", "ambiguous_annotation"),
        ("b/x.jpg", "ambiguous_annotation"),
    ]
    assert "data.json#image 1" in found.problems[0].detail
    (entry,) = found.unmatched
    assert (entry.reason, entry.name, entry.objects) == ("ambiguous_image", "x.jpg", 1)
    assert "a/x.jpg, b/x.jpg" in entry.detail
    assert set(found.images) == {"a/z.jpg"}  # the listed JSON is a source, not an input
    assert found.sources["data.json"] == "COCO instances file, read"


def test_files_given_per_split_keep_their_split(tmp_path):
    write_tree(
        tmp_path,
        {
            "images/a.jpg": jpeg(),
            "images/b.png": png(),
            "images/c.jpg": jpeg(),
            "ann/train.json": instances([image(1, "a.jpg")], [box(1, 1, 1, [1, 1, 4, 4])]),
            "ann/val.json": instances([image(7, "b.png")], [box(1, 7, 17, [2, 2, 4, 4])]),
        },
    )
    spec = f"train={tmp_path}/ann/train.json,validation={tmp_path}/ann/val.json"
    found = load(tmp_path / "images", spec)
    assert found.split_names == ("train", "validation")
    assert found.split_of("a.jpg") == "train"
    assert found.split_of("b.png") == "validation"
    assert found.split_of("c.jpg") is None
    assert found.class_names == ("person", "cat", "dog")


def test_a_truncated_file_rejects_only_the_images_it_could_concern(tmp_path):
    good = instances([image(1, "a.jpg")], [box(1, 1, 1, [1, 1, 4, 4])])
    broken = json.dumps(json.loads(instances([image(2, "b.jpg")], [box(2, 2, 1, [1, 1, 4, 4])])), indent=1)
    broken = broken[: len(broken) * 2 // 3].encode()
    write_tree(
        tmp_path,
        {"a.jpg": jpeg(), "b.jpg": jpeg(), "c.jpg": jpeg(), "train.json": good, "val.json": broken},
    )
    found = load(tmp_path, f"train={tmp_path}/train.json,validation={tmp_path}/val.json")
    assert set(found.images) == {"a.jpg"}
    assert [(p.relpath, p.reason) for p in found.problems] == [
        ("b.jpg", "bad_annotation"),
        ("c.jpg", "bad_annotation"),
    ]
    detail = found.problems[0].detail
    assert detail.startswith("val.json ") and " line " in detail and "column" in detail
    assert found.sources["val.json"].endswith("malformed (its images are rejected)")


@pytest.mark.parametrize(
    ("text", "says"),
    [
        (b"", "is empty"),
        (b'{"images": [{"id": 1, "file_name": "a.jpg"}', "ends early"),
        (b'{"images": [}', "not valid JSON"),
        (b'{"images": [], "images": []}', "twice"),
        (b'{"annotations": []}', "no 'images'"),
        (
            b'{"images": [{"id": 1, "file_name": "a.jpg"}, {"id": 1, "file_name": "b.jpg"}]}',
            "image id 1 twice",
        ),
        (b'{"images": [], "categories": [{"id": 1}]}', "no name"),
        (b'{"images": []} x', "more after"),
        (b'\xff\xfe{"images": []}', "not UTF-8"),
        (b'"x"', "expected '{'"),  # a list is a results file: refused, see test_annotations_find.py
    ],
)
def test_a_malformed_file_rejects_every_image_with_what_is_wrong(tmp_path, text, says):
    write_tree(tmp_path, {"a.jpg": jpeg(), "b.jpg": jpeg(), "instances_x.json": text})
    found = load(tmp_path)
    assert [(p.relpath, p.reason) for p in found.problems] == [
        ("a.jpg", "bad_annotation"),
        ("b.jpg", "bad_annotation"),
    ]
    assert says in found.problems[0].detail and found.problems[0].detail.startswith("instances_x.json ")
    assert not found.images


def test_two_entries_for_one_file_reject_it(tmp_path):
    write_tree(
        tmp_path,
        {
            "a.jpg": jpeg(),
            "instances_one.json": instances([image(1, "a.jpg")], [box(1, 1, 1, [1, 1, 4, 4])]),
            "instances_two.json": instances([image(5, "a.jpg")], [box(1, 5, 1, [1, 1, 4, 4])]),
        },
    )
    (problem,) = load(tmp_path).problems
    assert problem.reason == "conflicting_annotations" and problem.objects == 2
    assert "instances_one.json#image 1 and instances_two.json#image 5" in problem.detail


def test_files_that_name_a_category_differently_stop_the_run(tmp_path):
    write_tree(
        tmp_path,
        {
            "a.jpg": jpeg(),
            "instances_one.json": instances([], [], [{"id": 1, "name": "cat"}]),
            "instances_two.json": instances([], [], [{"id": 1, "name": "dog"}]),
        },
    )
    with pytest.raises(ValueError, match=r"category id 1 is 'cat' in instances_one\.json but 'dog'"):
        load(tmp_path)


def test_fixed_class_names_set_the_order_and_drop_other_classes(coco_tree):
    found = load(coco_tree, class_names=["dog", "person"])
    assert found.class_names == ("dog", "person")
    assert [o.class_name for o in found.images["train2017/000001.jpg"].objects] == ["dog", "person"]
    assert found.images["train2017/000002.jpg"].objects == ()
    (note,) = found.dropped
    assert (note.relpath, note.reason) == ("train2017/000002.jpg", "unknown_category")
    assert "class 'cat' is not in class_names" in note.detail


def test_key_order_and_layout_do_not_change_what_is_read(tmp_path):
    images = [image(1, "a.jpg")]
    annotations = [box(1, 1, 17, [1, 2, 3, 4], segmentation=[[1, 2, 4, 2, 4, 6]])]
    document = {
        "categories": CATEGORIES,
        "annotations": annotations,
        "licenses": [{"id": 1}],
        "images": images,
    }
    for number, text in enumerate(
        [json.dumps(document, indent=3), json.dumps(document, separators=(",", ":"))]
    ):
        folder = tmp_path / str(number)
        write_tree(folder, {"a.jpg": jpeg(), "instances_x.json": ("\n\t " + text + " \r\n").encode()})
        found = load(folder)
        assert found.images["a.jpg"].objects[0].xmax == 4.0 and not found.problems


def test_nothing_to_read_stops_the_run(tmp_path):
    write_tree(tmp_path, {"a.jpg": jpeg()})
    source = SourceConfig(str(tmp_path), annotations=AnnotationConfig("coco"))
    with pytest.raises(
        ValueError, match="none of the 1 pictures matches an annotation: found no annotation file"
    ):
        make_plan(list_inputs(str(tmp_path)), source)
    with pytest.raises(ValueError, match="does not exist"):
        load(tmp_path, str(tmp_path / "nowhere.json"))
    with pytest.raises(ValueError, match="is a folder; name the COCO instances files in it"):
        load(tmp_path, str(tmp_path))
    with pytest.raises(ValueError, match="must be one of coco, cvat, voc, yolo"):
        load_annotations("kitti", list_inputs(str(tmp_path)))


def test_annotation_paths_as_written():
    assert parse_annotation_paths("a.json") == (AnnotationPath(os.path.abspath("a.json")),)
    assert parse_annotation_paths("train=gs://b/t.json, validation=gs://b/v.json") == (
        AnnotationPath("gs://b/t.json", "train"),
        AnnotationPath("gs://b/v.json", "validation"),
    )
    assert parse_annotation_paths("gs://b/x=1/t.json") == (AnnotationPath("gs://b/x=1/t.json"),)
    assert parse_annotation_paths(None) == ()
    with pytest.raises(ValueError, match="split train twice"):
        parse_annotation_paths("train=a.json,train=b.json")
    with pytest.raises(ValueError, match="empty path"):
        parse_annotation_paths("a.json,")


@pytest.mark.parametrize("chunk", [1, 2, 7, 61])
def test_a_file_read_in_any_size_of_chunk_reads_the_same(tmp_path, monkeypatch, chunk):
    """The reader holds one chunk of the text at a time: values, multi-byte characters and
    numbers cut at any chunk boundary read as whole, and an error names the same line."""
    categories = [{"id": 1, "name": "chien \u00e9\u00e8\u4e2d"}, {"id": 2, "name": "\U0001f408"}]
    images = [image(1, "caf\u00e9.jpg"), image(2, "b.jpg")]
    annotations = [box(10, 1, 1, [1.25, 2, 3.5, 4]), box(123456789, 2, 2, [0, 0, 12345.678, 9])]
    # A member this reader skips, a number whose text a chunk can cut after its integer part or
    # inside its exponent (1.5 and 1.5e+300 are whole numbers, 1 and 1.5e are not).
    extra = {"threshold": 1.5e300, "ratio": -0.25}
    document = json.dumps(
        json.loads(instances(images, annotations, categories, **extra)), indent=2, ensure_ascii=False
    )
    with_bom = ("\ufeff" + document).encode()
    write_tree(tmp_path, {"caf\u00e9.jpg": jpeg(), "b.jpg": jpeg(), "instances_x.json": with_bom})
    (tmp_path / "broken").mkdir()
    broken = document.replace('"width": 48,\n', '"width": 48\n', 1)
    write_tree(tmp_path / "broken", {"b.jpg": jpeg(), "instances_x.json": broken.encode()})
    whole = load(tmp_path), load(tmp_path / "broken")
    monkeypatch.setattr("beam_tfrecord.plan.annotations.coco_json._Stream.CHUNK_CHARS", chunk)
    found, failed = load(tmp_path), load(tmp_path / "broken")
    assert found == whole[0] and failed == whole[1]
    assert found.class_names == ("chien \u00e9\u00e8\u4e2d", "\U0001f408")
    assert found.images["b.jpg"].objects[0].xmax == 12345.678
    assert found.images["b.jpg"].objects[0].source_ref.endswith("#annotation 123456789")
    assert "line 10 column 7" in failed.problems[0].detail  # where "height" follows "width": 48


def test_a_file_cut_anywhere_rejects_its_images_and_never_fails_the_run(tmp_path):
    """Every prefix of a valid file: its images are rejected naming the file (never an
    exception, never a silent negative), and only the whole file reads."""
    text = json.dumps(json.loads(instances([image(1, "a.jpg")], [box(1, 1, 1, [1, 1, 4, 4])])), indent=1)
    write_tree(tmp_path, {"a.jpg": jpeg(), "instances_x.json": b""})
    files = list_inputs(str(tmp_path))
    for cut in range(len(text) + 1):
        (tmp_path / "instances_x.json").write_text(text[:cut])
        found = load_annotations("coco", files)
        if cut == len(text):
            assert len(found.images["a.jpg"].objects) == 1
        else:
            (problem,) = found.problems
            assert problem.reason == "bad_annotation" and problem.detail.startswith("instances_x.json "), cut
