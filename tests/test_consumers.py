"""A detection run's records as the real consumers read them, not our readers: TF Model Garden's
`TfExampleDecoder` (tf-models-official, installed without its dependencies: see
requirements-dev-nodeps.txt), TFDS's `builder_from_directory`, and a KerasHub RetinaNet built
with random weights taking a training step on `load_dataset`'s batches. Each is compared with the
source annotations of a generated COCO tree (tests/annotationgen.py's shapes). torchvision's
detector is in tests/test_torch.py (`make test-torch`)."""

from __future__ import annotations

import re

import numpy as np
import tensorflow as tf
from outputcheck import shard_files
from test_detection_readers import CATEGORY_INDEX, CLASSES, polygon_mask, same_shape, source_boxes

import beam_tfrecord

NAMES = {3: "square", 7: "triangle"}  # the shapes' COCO categories (tests/annotationgen.py)


def label_map(out) -> dict[str, int]:
    """name -> id from label_map.pbtxt, the Object Detection API's own file format."""
    text = (out / "label_map.pbtxt").read_text()
    items = re.findall(r"item\s*\{\s*id:\s*(\d+)\s*name:\s*\"([^\"]+)\"", text)
    return {name: int(number) for number, name in items}


def test_model_gardens_decoder_reads_the_source_boxes_classes_and_masks(shapes_output):
    from official.vision.dataloaders import tf_example_decoder

    out, truth = shapes_output
    ids = label_map(out)
    assert ids == {"square": 1, "triangle": 2}
    decoder = tf_example_decoder.TfExampleDecoder(include_mask=True)
    seen = set()
    for serialized in tf.data.TFRecordDataset(shard_files(out, "train")):
        decoded = {k: v.numpy() for k, v in decoder.decode(serialized).items()}
        name = next(n for n in truth if decoded["source_id"].decode() == str(int(n[7:-4])))
        objects = truth[name]
        height, width = decoded["height"], decoded["width"]
        assert (height, width) == (64, 96) and decoded["image"].shape == (64, 96, 3)
        # Model Garden's boxes: normalized ymin, xmin, ymax, xmax.
        expected = source_boxes(objects)[:, [1, 0, 3, 2]] / [height, width, height, width]
        np.testing.assert_allclose(decoded["groundtruth_boxes"], expected, atol=1e-5)
        assert decoded["groundtruth_classes"].tolist() == [ids[NAMES[o["category_id"]]] for o in objects]
        assert not decoded["groundtruth_is_crowd"].any()
        np.testing.assert_allclose(
            decoded["groundtruth_area"], [o["bbox"][2] * o["bbox"][3] for o in objects]
        )
        masks = decoded["groundtruth_instance_masks"]
        assert masks.shape == (len(objects), 64, 96)
        for mask, source in zip(masks, objects, strict=True):
            assert same_shape(mask, polygon_mask(source["polygon"], 64, 96))
        seen.add(name)
    assert seen == set(truth)


def test_tfds_reads_boxes_class_labels_and_masks(shapes_output):
    import tensorflow_datasets as tfds

    out, truth = shapes_output
    builder = tfds.builder_from_directory(str(out))
    label = builder.info.features["image"]["object"]["class"]["label"].feature
    assert label.names == ["background", *CLASSES]  # ids from 1: the stored ids read as names
    seen = set()
    for example in tfds.as_numpy(builder.as_dataset(split="train")):
        image = example["image"]
        name = image["filename"].decode().split("/")[-1]
        objects = truth[name]
        box = image["object"]["bbox"]
        corners = np.stack([box["xmin"], box["ymin"], box["xmax"], box["ymax"]], axis=1) * [96, 64, 96, 64]
        np.testing.assert_allclose(corners, source_boxes(objects), atol=1e-3)
        names = [label.int2str(i) for i in image["object"]["class"]["label"]]
        assert names == [NAMES[o["category_id"]] for o in objects]
        masks = image["object"]["mask"]
        assert masks.shape == (len(objects), 64, 96, 1) and image["encoded"].shape == (64, 96, 3)
        for mask, source in zip(masks[..., 0], objects, strict=True):
            assert same_shape(mask, polygon_mask(source["polygon"], 64, 96))
        seen.add(name)
    assert seen == set(truth)


def tiny_retinanet(num_classes: int, image_shape: tuple[int, int, int], bounding_box_format: str):
    """KerasHub's RetinaNet on the smallest ResNet its checks allow, random weights (nothing is
    downloaded): about 3 s for a step on 2 cores."""
    import keras_hub

    encoder = keras_hub.models.ResNetBackbone(
        input_conv_filters=[64],
        input_conv_kernel_sizes=[3],
        stackwise_num_filters=[64, 16, 16],
        stackwise_num_blocks=[1, 1, 1],
        stackwise_num_strides=[1, 2, 2],
        block_type="basic_block",
        image_shape=image_shape,
    )
    backbone = keras_hub.models.RetinaNetBackbone(
        image_encoder=encoder, min_level=3, max_level=4, use_p5=False, image_shape=image_shape
    )
    return keras_hub.models.RetinaNetObjectDetector(
        backbone=backbone,
        num_classes=num_classes,
        bounding_box_format=bounding_box_format,
        pre_logits_num_conv_layers=1,
    )


def test_a_kerashub_detector_trains_a_step_on_load_dataset(shapes_output):
    import keras

    out, _ = shapes_output
    keras.utils.set_random_seed(0)
    # yxyx, KerasHub's default (its anchor generator takes no relative format).
    model = tiny_retinanet(len(CLASSES), (128, 192, 3), "yxyx")
    model.compile(optimizer=keras.optimizers.SGD(0.001))
    # Twice the stored size: the shapes (14 to 25 px) then span the smallest anchors (32 px and up).
    train = beam_tfrecord.load_dataset(
        str(out),
        "train",
        batch_size=6,
        image_size=(128, 192),
        max_objects=3,
        bounding_box_format="yxyx",
        seed=0,
    )
    train = train.map(
        lambda image, t: (tf.cast(image, tf.float32) / 255, {"boxes": t["boxes"], "labels": t["labels"]})
    )
    images, targets = next(iter(train))
    # The detector's own label encoder (yxyx, as the model) matches our boxes to its anchors:
    # every class we hand out gets positive anchors.
    assert model.label_encoder.bounding_box_format == "yxyx"
    _, classes = model.label_encoder(images, targets["boxes"], targets["labels"])
    positive = set(np.unique(np.asarray(classes)).tolist()) - {-1.0, -2.0}
    assert positive == {float(i) for i in CATEGORY_INDEX.values()}
    history = model.fit(train, epochs=1, steps_per_epoch=1, verbose=0)
    assert np.isfinite(history.history["loss"][0])
