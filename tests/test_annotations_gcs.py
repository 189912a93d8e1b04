"""Annotation sources on gs://, against the real GCS emulator over HTTP on 127.0.0.1: a COCO file
named by a gs:// annotations_path, a Pascal VOC tree and a YOLO tree listed from a bucket."""

from __future__ import annotations

import json
import uuid

import pytest
from annotationgen import load_annotations, voc_xml
from gcsemulator import EMULATOR_ENV, Emulator
from imagegen import jpeg

from beam_tfrecord.plan.listing import list_inputs


@pytest.fixture(scope="module")
def emulator():
    with Emulator() as emu, pytest.MonkeyPatch.context() as patch:
        patch.setenv(EMULATOR_ENV, emu.url)
        yield emu


@pytest.fixture
def bucket(emulator) -> str:
    name = f"test-{uuid.uuid4().hex[:12]}"
    emulator.client().create_bucket(name)
    return name


def test_every_format_reads_from_a_bucket(emulator, bucket):
    coco = {
        "images": [{"id": 1, "file_name": "a.jpg"}, {"id": 2, "file_name": "b.jpg"}],
        "annotations": [{"id": 1, "image_id": 2, "category_id": 5, "bbox": [1, 2, 3, 4]}],
        "categories": [{"id": 5, "name": "cat"}],
    }
    voc = {f"VOC/JPEGImages/{i}.jpg": jpeg(seed=i) for i in range(40)}
    voc |= {
        f"VOC/Annotations/{i}.xml": voc_xml(f"{i}.jpg", [("cat", (1, 1, 2 + i, 9), "")]) for i in range(40)
    }
    yolo = {
        "YOLO/data.yaml": b"names: [cat]\n",
        "YOLO/images/a.jpg": jpeg(),
        "YOLO/labels/a.txt": b"0 .5 .5 .2 .2\n",
    }
    emulator.upload_tree(
        bucket, "", {"coco/a.jpg": jpeg(), "coco/b.jpg": jpeg(), "ann/val.json": json.dumps(coco).encode()}
    )
    emulator.upload_tree(bucket, "", voc | yolo)

    found = load_annotations(
        "coco", list_inputs(f"gs://{bucket}/coco"), f"validation=gs://{bucket}/ann/val.json"
    )
    (cat,) = found.images["b.jpg"].objects
    assert (cat.class_name, cat.xmax, cat.source_ref) == (
        "cat",
        4.0,
        f"gs://{bucket}/ann/val.json#annotation 1",
    )
    assert found.split_of("a.jpg") == "validation"

    found = load_annotations("voc", list_inputs(f"gs://{bucket}/VOC"))
    assert [found.images[f"JPEGImages/{i}.jpg"].objects[0].xmax for i in range(40)] == [
        2.0 + i for i in range(40)
    ]
    assert not found.problems and not found.unannotated

    found = load_annotations("yolo", list_inputs(f"gs://{bucket}/YOLO"))
    assert [o.class_name for o in found.images["images/a.jpg"].objects] == ["cat"]

    with pytest.raises(ValueError, match="does not exist"):
        load_annotations("coco", list_inputs(f"gs://{bucket}/coco"), f"gs://{bucket}/ann/missing.json")


def test_a_label_map_reads_from_a_bucket(emulator, bucket):
    emulator.upload_tree(
        bucket,
        "",
        {
            "YOLO/data.yaml": b"names: [cat, dog]\n",
            "YOLO/images/a.jpg": jpeg(),
            "YOLO/labels/a.txt": b"0 .5 .5 .2 .2\n1 .3 .3 .1 .1\n",
            "maps/label_map.pbtxt": b"item {\n  id: 7\n  name: 'dog'\n}\n",
        },
    )
    found = load_annotations(
        "yolo", list_inputs(f"gs://{bucket}/YOLO"), label_map=f"gs://{bucket}/maps/label_map.pbtxt"
    )
    assert found.class_names[6] == "dog" and len(found.class_names) == 7
    assert [obj.class_name for obj in found.images["images/a.jpg"].objects] == ["dog"]
    assert [note.reason for note in found.dropped] == ["unknown_category"]
    with pytest.raises(ValueError, match=r"^label_map gs://.*/maps/none.pbtxt cannot be read"):
        load_annotations(
            "yolo", list_inputs(f"gs://{bucket}/YOLO"), label_map=f"gs://{bucket}/maps/none.pbtxt"
        )


def test_a_captions_file_of_pairs_and_a_masks_dataset_yaml_are_read_from_a_bucket(emulator, bucket, tmp_path):
    """A headerless `name.jpg,caption` file named by a gs:// annotations_path is told from its
    first bytes (read by range) and read as pairs; COCO128's semantic masks given by their
    images folder find `coco128-seg.yaml` two folders above the masks, outside the input."""
    import captiongen
    import segmentationgen
    from conftest import convert
    from outputcheck import summary

    from beam_tfrecord.read.examples import iter_examples

    expected = captiongen.flickr8k(tmp_path / "flickr")
    (tmp_path / "flickr" / "captions.txt").unlink()
    captiongen.pairs_file(tmp_path / "caps.csv", expected, "csv")
    tree = segmentationgen.coco128_semantic(tmp_path / "seg")
    files = {
        f"flickr/{p.relative_to(tmp_path / 'flickr')}": p.read_bytes()
        for p in (tmp_path / "flickr").rglob("*.jpg")
    }
    files["elsewhere/caps.csv"] = (tmp_path / "caps.csv").read_bytes()
    files |= {
        f"coco128-seg/{p.relative_to(tree.root)}": p.read_bytes() for p in tree.root.rglob("*") if p.is_file()
    }
    emulator.upload_tree(bucket, "", files)

    from beam_tfrecord import storage

    head = storage.read_head(f"gs://{bucket}/elsewhere/caps.csv", 40)
    assert head == (tmp_path / "caps.csv").read_bytes()[:40]
    out = tmp_path / "captions"
    args = ("--task", "captions", "--annotations_path", f"gs://{bucket}/elsewhere/caps.csv")
    assert convert(f"gs://{bucket}/flickr/Images", out, *args) == 0
    stored = {r["filename"]: r["caption"] for s in summary(out)["splits"] for r in iter_examples(str(out), s)}
    assert stored == {k.removeprefix("Images/"): v for k, v in expected.items()}

    out = tmp_path / "masks"
    assert convert(f"gs://{bucket}/coco128-seg/images", out, "--task", "segmentation") == 0
    assert (out / "labels.txt").read_text().splitlines() == list(tree.class_names)
