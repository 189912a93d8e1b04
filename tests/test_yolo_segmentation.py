"""Ultralytics segmentation labels (data.yaml, a polygon per line) as class masks: each polygon
filled as pycocotools fills it, larger ones first so a smaller one on top stays visible (the
order of Ultralytics' `polygons2masks_overlap`), YOLO's class i as class id i + 1 after the
background, and the records read by Model Garden's segmentation decoder."""

from __future__ import annotations

import json

import numpy as np
from conftest import convert
from imagegen import jpeg, write_tree
from outputcheck import summary
from pycocotools import mask as coco_mask
from yoloseggen import DATA_YAML, HEIGHT, LABELS, WIDTH, ultralytics_tree

from beam_tfrecord.read.examples import iter_examples


def expected_mask(shapes) -> np.ndarray:
    """pycocotools' raster of each polygon, larger areas drawn first, class id = index + 1."""
    filled = []
    for index, points in shapes:
        pixels = [v * (WIDTH if i % 2 == 0 else HEIGHT) for i, v in enumerate(points)]
        rle = coco_mask.merge(coco_mask.frPyObjects([pixels], HEIGHT, WIDTH))
        filled.append((index + 1, coco_mask.decode(rle)))
    mask = np.zeros((HEIGHT, WIDTH), dtype=np.uint8)
    for value, pixels in sorted(filled, key=lambda pair: -int(pair[1].sum())):
        mask[pixels > 0] = value
    return mask


def test_polygons_become_class_masks_drawn_as_ultralytics_overlaps_them(tmp_path):
    ultralytics_tree(tmp_path / "ds")
    out = tmp_path / "out"
    assert convert(tmp_path / "ds", out, "--task", "segmentation") == 0
    assert (out / "labels.txt").read_text().split() == ["background", "person", "car", "dog"]
    masks = {
        r["filename"]: (r["mask"], split)
        for split in ("train", "validation")
        for r in iter_examples(str(out), split)
    }
    for relpath, shapes in LABELS.items():
        mask, split = masks[relpath]
        np.testing.assert_array_equal(mask, expected_mask(shapes))
        assert split == ("train" if "/train/" in relpath else "validation")  # data.yaml's splits
    # The car under the person is visible: drawn after the larger polygon, whatever the file's order.
    assert 2 in masks["images/train/a.jpg"][0]
    # A box line has no outline to fill: named, never drawn as a rectangle.
    boxed, _ = masks["images/train/boxed.jpg"]
    np.testing.assert_array_equal(boxed, expected_mask([(2, [0.1, 0.1, 0.3, 0.1, 0.3, 0.3])]))
    dropped = [json.loads(line) for line in (out / "dropped_objects.jsonl").read_text().splitlines()]
    assert [(d["path"], d["reason"]) for d in dropped] == [("images/train/boxed.jpg", "not_drawn")]
    assert summary(out)["records"] == 4


def test_the_records_parse_with_model_garden_s_segmentation_decoder(tmp_path):
    import tensorflow as tf
    from official.vision.dataloaders import segmentation_input

    ultralytics_tree(tmp_path / "ds")
    out = tmp_path / "out"
    assert convert(tmp_path / "ds" / "images", out, "--task", "segmentation", "--annotations", "yolo") == 0
    decoder = segmentation_input.Decoder()
    read = 0
    for shard in out.glob("*.tfrecord"):
        for raw in tf.data.TFRecordDataset(str(shard)):
            parsed = decoder.decode(raw)
            mask = tf.io.decode_png(parsed["image/segmentation/class/encoded"], channels=1)
            assert tuple(mask.shape) == (HEIGHT, WIDTH, 1)
            read += 1
    assert read == 4


def test_a_tree_of_boxes_alone_fails_in_one_line(tmp_path, capsys):
    write_tree(
        tmp_path / "ds",
        {
            "data.yaml": DATA_YAML,
            "images/train/a.jpg": jpeg(WIDTH, HEIGHT),
            "labels/train/a.txt": b"0 0.5 0.5 0.2 0.2\n",
        },
    )
    assert convert(tmp_path / "ds", tmp_path / "out", "--task", "segmentation", "--annotations", "yolo") == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert "no picture has a shape with an area to draw" in err[-1] and "--task detection" in err[-1]
