"""`load_dataset`'s target of a detection record, in KerasHub's convention (what its object
detectors' `fit` takes): boxes in the asked format and labels from 0 in the picture as handed out
(clipped to it; an object a crop cut out left out), masks and keypoints moved with the picture,
padded to `max_objects` where asked. TensorFlow: imported only by the reader that asks for it.
"""

from __future__ import annotations

import tensorflow as tf

from beam_tfrecord.edges import Tensor
from beam_tfrecord.keys import table
from beam_tfrecord.labels.base import PictureFit, ReadContext, TargetOptions, TfTarget, TfTargetPair
from beam_tfrecord.labels.objects.reading import PAD_BOX, PAD_LABEL, box_columns

__all__ = ["ObjectTargets"]

_GROUPS = table("tfds").groups
_KEY = {k.name: k.key for k in (*_GROUPS["objects"], *_GROUPS["object_masks"], *_GROUPS["keypoints"])}
_HEIGHT, _WIDTH = (next(k.key for k in table("tfds").image if k.name == name) for name in ("height", "width"))
# (scale_y, offset_y, scale_x, offset_x): a stored box's fractions to the pixels handed out.
Frame = tuple[Tensor, Tensor, Tensor, Tensor]


class ObjectTargets(TfTarget):
    """`(image, {"boxes", "labels"[, "masks"][, "keypoints"]})`: `boxes` float32 [N, 4] in
    `bounding_box_format` (Keras's names) of the picture handed out, `labels` int32 from 0 (the
    stored ids count from 1), `masks` uint8 [N, height, width] of 0 and 1, `keypoints` float32
    [N, K, 3] (pixel x, y and visibility); ragged, or dense with `max_objects`, padded with -1
    boxes and labels (docs/detection.md#reading-detection-records)."""

    def __init__(self, context: ReadContext, options: TargetOptions, channels: int | None) -> None:
        self.options = options
        self.masks = "object_masks" in context.layout.groups
        self.keypoints = "keypoints" in context.layout.groups
        self.ragged = options.max_objects is None
        self.stored_size = context.stored_size
        self.channels = channels

    def pair(
        self, record: dict[str, Tensor], image: Tensor, source_hw: Tensor, fit: PictureFit
    ) -> TfTargetPair:
        frame = fit.frame(source_hw)
        if self.options.image_size is None and self.stored_size is not None:
            # One stored size: say so, so ragged_batch keeps the images dense.
            image = tf.ensure_shape(image, [*self.stored_size, self.channels or None])
        return image, self._targets(record, frame, image, fit)

    def _targets(
        self, record: dict[str, Tensor], frame: Frame, image: Tensor, fit: PictureFit
    ) -> dict[str, Tensor]:
        scale_y, top, scale_x, left = frame
        out_hw = tf.shape(image)[:2]
        height, width = tf.cast(out_hw[0], tf.float32), tf.cast(out_hw[1], tf.float32)
        x1 = tf.clip_by_value(record[_KEY["object_xmin"]] * scale_x + left, 0.0, width)
        x2 = tf.clip_by_value(record[_KEY["object_xmax"]] * scale_x + left, 0.0, width)
        y1 = tf.clip_by_value(record[_KEY["object_ymin"]] * scale_y + top, 0.0, height)
        y2 = tf.clip_by_value(record[_KEY["object_ymax"]] * scale_y + top, 0.0, height)
        keep = tf.logical_and(x2 > x1, y2 > y1)
        boxes = tf.stack(box_columns(x1, y1, x2, y2, self.options.box_format, height, width), axis=-1)
        labels = tf.cast(record[_KEY["object_label"]], tf.int32) - 1
        targets = {"boxes": tf.boolean_mask(boxes, keep), "labels": tf.boolean_mask(labels, keep)}
        if self.masks:
            masks = _fit_masks(_decode_masks(record[_KEY["object_mask"]], record), self.options, fit)
            targets["masks"] = tf.ensure_shape(tf.boolean_mask(masks, keep), [None, *image.shape[:2]])
        if self.keypoints:
            targets["keypoints"] = tf.boolean_mask(_points(record, frame, width, height), keep)
        if self.options.max_objects is not None:
            targets = _pad(targets, self.options.max_objects)
        return targets


def _points(record: dict[str, Tensor], frame: Frame, width: Tensor, height: Tensor) -> Tensor:
    """float32 [N, K, 3]: each object's points in pixels of the image handed out (moved as its
    boxes are by the resize, crop or pad), and their visibility; a point the crop leaves outside,
    or one not labelled, is (0, 0, 0)."""
    scale_y, top, scale_x, left = frame
    objects = tf.shape(record[_KEY["object_label"]])[0]
    x = record[_KEY["keypoint_x"]] * scale_x + left
    y = record[_KEY["keypoint_y"]] * scale_y + top
    v = tf.cast(record[_KEY["keypoint_visibility"]], tf.float32)
    inside = (v > 0) & (x >= 0) & (x <= width) & (y >= 0) & (y <= height)
    zero = tf.zeros_like(x)
    points = tf.stack([tf.where(inside, x, zero), tf.where(inside, y, zero), tf.where(inside, v, zero)], -1)
    return tf.reshape(points, [objects, -1, 3])


def _decode_masks(pngs: Tensor, record: dict[str, Tensor]) -> Tensor:
    """uint8 [N, stored height, stored width] from the mask PNGs (Model Garden decodes them so)."""
    height, width = record[_HEIGHT], record[_WIDTH]

    def decode_all() -> Tensor:
        return tf.map_fn(
            lambda png: tf.io.decode_png(png, channels=1)[..., 0],
            pngs,
            fn_output_signature=tf.TensorSpec([None, None], tf.uint8),
        )

    return tf.cond(tf.size(pngs) > 0, decode_all, lambda: tf.zeros([0, height, width], tf.uint8))


def _fit_masks(masks: Tensor, options: TargetOptions, fit: PictureFit) -> Tensor:
    """[N, height, width] masks through the picture's own resize, crop or pad, nearest neighbour."""
    image_size = options.image_size
    if image_size is None:
        return masks

    def moved() -> Tensor:
        return tf.transpose(fit.fit(tf.transpose(masks, [1, 2, 0]), 0, method="nearest"), [2, 0, 1])

    fitted = tf.cond(
        tf.shape(masks)[0] > 0, moved, lambda: tf.zeros([0, image_size[0], image_size[1]], tf.uint8)
    )
    fitted.set_shape([None, image_size[0], image_size[1]])
    return fitted


def _pad(targets: dict[str, Tensor], size: int) -> dict[str, Tensor]:
    """Targets padded to `size` objects: boxes of -1, labels -1, empty masks."""
    count = tf.shape(targets["labels"])[0]
    check = tf.debugging.assert_less_equal(
        count, size, message=f"an image holds more objects than max_objects={size}"
    )
    with tf.control_dependencies([check]):
        missing = size - count
    padded = {
        "boxes": tf.pad(targets["boxes"], [[0, missing], [0, 0]], constant_values=PAD_BOX),
        "labels": tf.pad(targets["labels"], [[0, missing]], constant_values=PAD_LABEL),
    }
    padded["boxes"].set_shape([size, 4])
    padded["labels"].set_shape([size])
    if "masks" in targets:
        masks = tf.pad(targets["masks"], [[0, missing], [0, 0], [0, 0]])
        masks.set_shape([size, *targets["masks"].shape[1:]])
        padded["masks"] = masks
    if "keypoints" in targets:  # padded objects' points are unlabelled (0, 0, 0)
        points = tf.pad(targets["keypoints"], [[0, missing], [0, 0], [0, 0]])
        points.set_shape([size, None, 3])
        padded["keypoints"] = points
    return padded
