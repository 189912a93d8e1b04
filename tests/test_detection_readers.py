"""Each reader hands a detection run's objects out in its framework's convention (docs/detection.md,
"Reading detection records"): load_dataset as KerasHub's detectors take them, iter_examples as
NumPy, TorchImages as torchvision's targets (its NumPy half here; tests/test_torch.py runs the
dataset), and the contact sheet draws them. Checked against the source annotations of a
generated COCO tree of solid shapes, so a box that does not frame its shape shows."""

from __future__ import annotations

import annotationgen
import numpy as np
import pytest
import tensorflow as tf
from PIL import Image
from pycocotools import mask as coco_mask

import beam_tfrecord
from beam_tfrecord.labels.drawing import Sheet
from beam_tfrecord.labels.objects import reading as detection
from beam_tfrecord.labels.objects.checks import ObjectMarks, draw_objects
from beam_tfrecord.read import pictures

# labels.txt order: COCO categories by id (square is 3, triangle 7), so ids 1 and 2 stored.
CLASSES = ["square", "triangle"]
CATEGORY_INDEX = {3: 0, 7: 1}  # from 0, as KerasHub and iter_examples give them


def source_boxes(objects) -> np.ndarray:
    """The source's COCO boxes (x, y, w, h) as pixel xyxy."""
    return np.array([[x, y, x + w, y + h] for x, y, w, h in (o["bbox"] for o in objects)], np.float32)


def polygon_mask(polygon, height: int, width: int) -> np.ndarray:
    """The source polygon as pycocotools rasterises it (the COCO reference)."""
    return coco_mask.decode(coco_mask.frPyObjects([polygon], height, width))[..., 0]


def same_shape(a: np.ndarray, b: np.ndarray) -> bool:
    """A stored mask and pycocotools' raster of its source polygon: equal pixel for pixel (masks
    are filled as COCO fills them, and these pictures are stored at their size)."""
    return bool(a.sum()) and np.array_equal(a.astype(bool), b.astype(bool))


def by_name(out) -> dict[str, dict]:
    return {record["filename"].split("/")[-1]: record for record in beam_tfrecord.iter_examples(str(out))}


def test_iter_examples_gives_pixel_boxes_labels_from_zero_and_decoded_masks(shapes_output):
    out, truth = shapes_output
    records = by_name(out)
    assert set(records) == set(truth)
    for name, objects in truth.items():
        record = records[name]
        assert record["boxes"].dtype == np.float32 and record["boxes"].shape == (len(objects), 4)
        np.testing.assert_allclose(record["boxes"], source_boxes(objects), atol=1e-3)
        assert record["labels"].tolist() == [CATEGORY_INDEX[o["category_id"]] for o in objects]
        assert record["object_label"] == [i + 1 for i in record["labels"].tolist()]  # stored from 1
        masks = record["masks"]
        assert masks.dtype == np.uint8 and masks.shape == (len(objects), 64, 96)
        for mask, source in zip(masks, objects, strict=True):
            assert same_shape(mask, polygon_mask(source["polygon"], 64, 96))


def test_torchvision_targets_count_from_one_and_follow_image_size(shapes_output):
    """TorchImages' conversion, without torch: labels keep the stored ids (torchvision's class 0
    is the background), boxes and masks scale with image_size."""
    out, truth = shapes_output
    record = by_name(out)["shapes_2.png"]
    target = detection.detection_target(record, image_size=(32, 192), labels_from=1)
    expected = source_boxes(truth["shapes_2.png"]) * np.array([2, 0.5, 2, 0.5], np.float32)
    np.testing.assert_allclose(target["boxes"], expected, atol=1e-3)
    assert target["labels"].dtype == np.int64
    assert target["labels"].tolist() == [CATEGORY_INDEX[o["category_id"]] + 1 for o in truth["shapes_2.png"]]
    assert target["masks"].shape == (3, 32, 192) and set(np.unique(target["masks"])) <= {0, 1}
    assert target["iscrowd"].tolist() == [0, 0, 0]
    np.testing.assert_allclose(target["area"], np.array(record["object_area"]) * 2 * 0.5, rtol=1e-5)
    for mask, box in zip(target["masks"], target["boxes"], strict=True):
        ys, xs = np.nonzero(mask)
        extent = [xs.min(), ys.min(), xs.max() + 1, ys.max() + 1]
        np.testing.assert_allclose(extent, box, atol=2.0)


def test_load_dataset_gives_kerashub_targets_in_stored_pixels(shapes_output):
    out, truth = shapes_output
    names = {}
    dataset = beam_tfrecord.load_dataset(str(out), "train", batch_size=None, shuffle=False, features=False)
    for (image, targets), record in zip(dataset, beam_tfrecord.iter_examples(str(out)), strict=True):
        name = record["filename"].split("/")[-1]
        names[name] = True
        assert image.dtype == tf.uint8 and tuple(image.shape) == (64, 96, 3)
        assert set(targets) == {"boxes", "labels", "masks"}
        np.testing.assert_allclose(targets["boxes"].numpy(), source_boxes(truth[name]), atol=1e-3)
        assert targets["labels"].dtype == tf.int32
        assert targets["labels"].numpy().tolist() == [CATEGORY_INDEX[o["category_id"]] for o in truth[name]]
        np.testing.assert_array_equal(targets["masks"].numpy(), record["masks"])
    assert set(names) == set(truth)


@pytest.mark.parametrize(
    "resize",
    [
        {},
        {"image_size": (48, 48)},
        {"image_size": (48, 48), "crop_to_aspect_ratio": True},
        {"image_size": (80, 60), "pad_to_aspect_ratio": True},
    ],
    ids=["stored", "stretch", "crop", "pad"],
)
def test_boxes_and_masks_move_with_the_picture(shapes_output, resize):
    """Whatever image_size, crop and pad do to the picture, each box still frames its mask, and
    the mask covers pixels of its shape's colour in the image handed out."""
    out, _ = shapes_output
    batches = beam_tfrecord.load_dataset(str(out), "train", batch_size=3, shuffle=False, **resize)
    colours = {CATEGORY_INDEX[category]: colour for category, colour in annotationgen.SHAPE_COLOURS.items()}
    seen = 0
    for images, targets in batches:
        assert isinstance(targets["boxes"], tf.RaggedTensor)  # any number of objects per image
        for image, boxes, labels, masks in zip(
            images.numpy(),
            targets["boxes"].to_list(),
            targets["labels"].to_list(),
            targets["masks"].to_list(),
            strict=True,
        ):
            for box, label, mask in zip(boxes, labels, np.asarray(masks, np.uint8), strict=True):
                ys, xs = np.nonzero(mask)
                assert len(xs), resize
                # The mask's extent is the box (a mask pixel spans [x, x + 1)).
                np.testing.assert_allclose([xs.min(), ys.min(), xs.max() + 1, ys.max() + 1], box, atol=2.0)
                inside = image[mask.astype(bool)].astype(int)
                near = np.abs(inside - np.array(colours[label])).max(axis=1) < 60
                assert near.mean() > 0.7, (resize, label, near.mean())
                seen += 1
    assert seen > 0 if resize.get("crop_to_aspect_ratio") else seen == 12


def test_max_objects_pads_as_keras_does_and_refuses_to_cut(shapes_output):
    out, _ = shapes_output
    _, targets = next(iter(beam_tfrecord.load_dataset(str(out), batch_size=6, shuffle=False, max_objects=4)))
    assert tuple(targets["boxes"].shape) == (6, 4, 4) and tuple(targets["labels"].shape) == (6, 4)
    assert tuple(targets["masks"].shape) == (6, 4, 64, 96)
    counts = (targets["labels"].numpy() >= 0).sum(axis=1)
    assert sorted(counts.tolist()) == [1, 1, 2, 2, 3, 3]
    padded = targets["labels"].numpy() < 0
    assert (targets["labels"].numpy()[padded] == -1).all() and (targets["boxes"].numpy()[padded] == -1).all()
    with pytest.raises(ValueError, match=r"up to 3 objects .* max_objects=3"):
        beam_tfrecord.load_dataset(str(out), max_objects=2)


@pytest.fixture(scope="module")
def xyxy_boxes(shapes_output) -> list[np.ndarray]:
    """The first three records' boxes in the default format (xyxy), at 40x50: each format's
    reference starts from them (read once, not once per format)."""
    dataset = beam_tfrecord.load_dataset(
        str(shapes_output[0]), batch_size=None, shuffle=False, image_size=(40, 50)
    )
    return [targets["boxes"].numpy() for _, targets in dataset.take(3)]


@pytest.mark.parametrize("bounding_box_format", detection.BOX_FORMATS)
def test_every_box_format_is_what_keras_converts_to(shapes_output, xyxy_boxes, bounding_box_format):
    """Keras's own converter is the reference for what each format name means."""
    import keras

    out, _ = shapes_output
    ours = beam_tfrecord.load_dataset(
        str(out), batch_size=None, shuffle=False, image_size=(40, 50), bounding_box_format=bounding_box_format
    )
    converted_boxes = [targets["boxes"].numpy() for _, targets in ours.take(3)]
    assert len(converted_boxes) == len(xyxy_boxes) == 3
    for xyxy, converted in zip(xyxy_boxes, converted_boxes, strict=True):
        expected = keras.utils.bounding_boxes.convert_format(
            xyxy, source="xyxy", target=bounding_box_format, height=40, width=50
        )
        np.testing.assert_allclose(converted, np.asarray(expected), rtol=1e-5, atol=1e-4)
        np.testing.assert_allclose(
            detection.convert_boxes(xyxy, bounding_box_format, 40, 50),
            np.asarray(expected),
            rtol=1e-5,
            atol=1e-4,
        )


def test_an_unknown_box_format_is_refused_with_the_choices(shapes_output):
    with pytest.raises(ValueError, match="rel_yxyx"):
        beam_tfrecord.load_dataset(str(shapes_output[0]), bounding_box_format="yolo")


def test_the_contact_sheet_draws_each_box_in_its_class_colour(shapes_output):
    out, _ = shapes_output
    record = by_name(out)["shapes_1.png"]
    height, width = record["height"], record["width"]
    boxes = tuple(tuple(b) for b in (record["boxes"] / [width, height, width, height]).tolist())
    marks = ObjectMarks(boxes, tuple(record["object_text"]), tuple(record["object_mask"]))
    colours = {"square": (0, 114, 178), "triangle": (230, 159, 0)}
    thumb = draw_objects(pictures.thumbnail(record["image"], 192), marks, Sheet(colours))
    scale = (thumb.width - 1) / width  # the fractions span the thumbnail's first to last pixel
    for (xmin, ymin, xmax, ymax), name in zip(record["boxes"].tolist(), record["object_text"], strict=True):
        mid_y = int((ymin + ymax) / 2 * scale)
        for edge in (xmin * scale, xmax * scale):  # the left and right sides, 2 px wide
            found = {thumb.getpixel((x, mid_y)) for x in range(int(edge) - 1, int(edge) + 2)}
            assert colours[name] in found, (name, edge, found)


def test_inspect_draws_the_detection_contact_sheet(shapes_output, tmp_path):
    from pipelines.inspect import run

    out, _ = shapes_output
    assert run([str(out), "--pictures", str(tmp_path)]) == 0
    with Image.open(tmp_path / "contact_sheet.png") as sheet:
        pixels = np.asarray(sheet.convert("RGB")).reshape(-1, 3)
    for colour in ((0, 114, 178), (230, 159, 0)):  # the two classes' boxes
        assert (np.abs(pixels.astype(int) - colour).max(axis=1) == 0).sum() > 100


def test_a_features_only_detection_run_is_read_with_its_targets_or_refused_in_one_line(tmp_path):
    """No picture is stored: load_dataset, which hands targets out beside the picture, says so and
    what to use; load_dataset(features=True) and iter_examples give the features and the objects."""
    import onnxgen
    from conftest import convert

    truth = annotationgen.shapes_coco(tmp_path / "in")
    model = onnxgen.conv_pool(tmp_path / "m.onnx", size="s")
    out = tmp_path / "out"
    args = [
        "--annotations",
        "coco",
        "--splits",
        "train=1",
        "--model_path",
        model,
        "--model_input_size",
        "16x16",
    ]
    assert convert(tmp_path / "in", out, *args, "--feature_pooling", "avg", "--features_only") == 0
    with pytest.raises(ValueError, match=r"is a features_only detection run.*iter_examples"):
        beam_tfrecord.load_dataset(str(out), "train")
    batch = next(iter(beam_tfrecord.load_dataset(str(out), "train", features=True, batch_size=2)))
    assert batch["image/features"].shape == (2, 5)
    records = {r["filename"]: r for r in beam_tfrecord.iter_examples(str(out), "train")}
    assert len(records) == len(truth)
    for name, objects in truth.items():
        record = records[f"images/{name}"]
        assert record["features"].shape == (5,) and "image" not in record
        np.testing.assert_allclose(record["boxes"], source_boxes(objects), atol=1e-3)
