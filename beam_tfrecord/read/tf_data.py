"""Reading a conversion's output back as a `tf.data.Dataset`, from its own metadata.

Everything a training job would otherwise hard-code (feature keys, label or not, gzip, shard
paths, record counts, whether the images share one size) is read from summary.json and the
shard names, so no parse function is written by hand and the defaults work on any output.

Speed, measured against `keras.utils.image_dataset_from_directory` on the source folder
(benchmarks/read.py, README "Read speed"): records are parsed in batches (`tf.io.parse_example`)
rather than one by one, and a JPEG that is resized to at most half its stored size is decoded
at a reduced DCT scale (1/2, 1/4 or 1/8, chosen per record from its stored height and width),
which skips most of the inverse DCT and the colour conversion.

gs:// output is read by TensorFlow's own GCS filesystem, except where STORAGE_EMULATOR_HOST
points at an emulator: TensorFlow's GCS client has its endpoints compiled in (TF 2.21's
`libtensorflow_framework` holds `https://www.googleapis.com/storage/v1/` and reads only caching,
timeout and header settings from the environment), so there the records come through Beam's
filesystems, as the rest of the project reads GCS.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any, Literal

import tensorflow as tf

from beam_tfrecord import gcs
from beam_tfrecord.keys import key_of
from beam_tfrecord.read.files import RecordRange, SplitFiles, class_names, iter_range, split_files
from beam_tfrecord.write import schema as schema_lib

__all__ = [
    "SplitFiles",
    "class_names",
    "dct_ratio",
    "decode",
    "load_dataset",
    "multi_hot",
    "record_dataset",
    "split_files",
]

AUTOTUNE = tf.data.AUTOTUNE
DEFAULT_BATCH = 32
PARSE_BATCH = 64  # records per tf.io.parse_example call
_RATIOS = (1, 2, 4, 8)  # the DCT scales libjpeg decodes at (tf.io.decode_jpeg's `ratio`)
_LOGGER = logging.getLogger(__name__)


def record_dataset(path: str, compression: str = "") -> tf.data.Dataset:
    """The serialized records of one shard: TensorFlow's TFRecordDataset, or Beam's filesystems
    for gs:// under a GCS emulator (see the module docstring)."""
    if path.startswith("gs://") and gcs.emulator_host():
        return _beam_records(path, compression)
    return tf.data.TFRecordDataset(path, compression_type=compression)


def _beam_records(path: str | tf.Tensor, compression: str) -> tf.data.Dataset:
    def records(name: bytes) -> Any:
        return iter_range(RecordRange(name.decode("utf-8")), compression)

    return tf.data.Dataset.from_generator(
        records, args=(path,), output_signature=tf.TensorSpec([], tf.string)
    )


def dct_ratio(
    height: tf.Tensor, width: tf.Tensor, image_size: tuple[int, int], pad: bool = False
) -> tf.Tensor:
    """Index into (1, 2, 4, 8) of the largest DCT scale-down that still leaves at least the
    pixels the resize to `image_size` needs: stretching and cropping need both sides, padding
    (which fits the longer side) only the side that limits the fit."""
    by_height = tf.cast(height, tf.float32) / image_size[0]
    by_width = tf.cast(width, tf.float32) / image_size[1]
    limit = tf.maximum(by_height, by_width) if pad else tf.minimum(by_height, by_width)
    return tf.add_n([tf.cast(limit >= ratio, tf.int32) for ratio in _RATIOS[1:]])


def _decode_full(encoded: tf.Tensor, channels: int) -> tf.Tensor:
    return tf.io.decode_image(encoded, channels=channels, expand_animations=False)


def _decode_reduced(encoded: tf.Tensor, channels: int, ratio: tf.Tensor) -> tf.Tensor:
    """A JPEG at 1/2^ratio scale; anything else (PNG, the re-encoded formats) at full size."""

    def jpeg() -> tf.Tensor:
        branches = [
            (lambda scale=scale: tf.io.decode_jpeg(encoded, channels=channels, ratio=scale))
            for scale in _RATIOS
        ]
        return tf.switch_case(ratio, branches)

    return tf.cond(tf.io.is_jpeg(encoded), jpeg, lambda: _decode_full(encoded, channels))


def _center_crop(image: tf.Tensor, image_size: tuple[int, int]) -> tf.Tensor:
    """The largest centred window of the target's aspect ratio (as Keras's smart_resize)."""
    shape = tf.shape(image)
    height, width = tf.cast(shape[0], tf.float32), tf.cast(shape[1], tf.float32)
    target = image_size[1] / image_size[0]
    crop_h = tf.cast(tf.minimum(height, tf.round(width / target)), tf.int32)
    crop_w = tf.cast(tf.minimum(width, tf.round(height * target)), tf.int32)
    top, left = (shape[0] - crop_h) // 2, (shape[1] - crop_w) // 2
    return image[top : top + crop_h, left : left + crop_w]


def decode(
    encoded: tf.Tensor,
    channels: int,
    image_size: tuple[int, int] | None,
    *,
    stored_size: tuple[tf.Tensor, tf.Tensor] | None = None,
    crop_to_aspect_ratio: bool = False,
    pad_to_aspect_ratio: bool = False,
) -> tf.Tensor:
    """uint8 [height, width, channels] as the training job sees it.

    `image_size=(height, width)` resizes (bilinear): stretched by default, or like Keras with
    `crop_to_aspect_ratio` (centre crop to the target's aspect ratio first) or
    `pad_to_aspect_ratio` (fit inside, zero borders). `stored_size`, the record's stored
    (height, width), lets a JPEG be decoded at a reduced DCT scale."""
    if image_size is None:
        return _decode_full(encoded, channels)
    if stored_size is not None:
        ratio = dct_ratio(stored_size[0], stored_size[1], image_size, pad_to_aspect_ratio)
        image = _decode_reduced(encoded, channels, ratio)
    else:
        image = _decode_full(encoded, channels)
    if pad_to_aspect_ratio:
        resized = tf.image.resize_with_pad(image, image_size[0], image_size[1])
    else:
        if crop_to_aspect_ratio:
            image = _center_crop(image, image_size)
        resized = tf.image.resize(image, image_size)
    image = tf.saturate_cast(tf.round(resized), tf.uint8)
    image.set_shape([image_size[0], image_size[1], channels or None])
    return image


def _batch_size(
    files: SplitFiles, output_dir: str, batch_size: int | str | None, image_size: Any, decodes: bool
) -> int | None:
    """The batch size to use; refuses, at call time, batches that would fail at iteration."""
    fixed = not decodes or image_size is not None or files.one_size
    if batch_size == "auto":
        if fixed:
            return DEFAULT_BATCH
        _LOGGER.info(
            "%s: images differ in size, so single images (not batches) are returned; pass "
            "image_size=(height, width) for batches",
            output_dir,
        )
        return None
    if batch_size and not fixed:
        assert files.heights is not None and files.widths is not None
        raise ValueError(
            f"{output_dir}: its images range from {files.widths[0]}x{files.heights[0]} to "
            f"{files.widths[1]}x{files.heights[1]} (width x height, summary.json), so batches of "
            f"{batch_size} need one size: pass image_size=(height, width), or batch_size=None"
        )
    return batch_size or None


def load_dataset(
    output_dir: str,
    split: str = "train",
    *,
    batch_size: int | Literal["auto"] | None = "auto",
    image_size: tuple[int, int] | None = None,
    crop_to_aspect_ratio: bool = False,
    pad_to_aspect_ratio: bool = False,
    channels: int | None = None,
    shuffle: bool = True,
    shuffle_buffer: int = 1024,
    seed: int | None = None,
    features: bool = False,
    decode_images: bool | None = None,
    drop_remainder: bool = False,
) -> tf.data.Dataset:
    """A dataset of `(image, label)` (or `image` alone for an unlabeled run) from a conversion.

    Works with no argument but the folder on any output: `batch_size="auto"` batches 32 when
    every image has one size (summary.json says) or `image_size` is given, and otherwise gives
    single images. An explicit `batch_size` on images of several sizes without `image_size`
    raises ValueError here, naming `image_size=`. `image_size=(height, width)` (Keras's order;
    `resize` is (width, height)) resizes: stretched, or with `crop_to_aspect_ratio` /
    `pad_to_aspect_ratio` as Keras does. Images are uint8; `channels` defaults to what the run
    forced, else 3; 0 keeps each image's own count.

    `features=True` gives instead a dict of every parsed key of the record (the encoded bytes
    included); images are decoded into `"image"` only when asked (`decode_images=True`, or an
    `image_size`). Manifest columns (extra_columns) are under their keys (`image/meta/NAME` or `NAME`: a
    scalar tensor, or a 1-D tensor for a list column, batched as a `tf.RaggedTensor`). A
    feature-model run's features come back as a float32 tensor of their stored shape under the
    float key (`image/features` or `features`, float16 runs included); a `features_only` run
    has no image, and gives `(features, label)`.

    A multi-label run's label is a multi-hot float32 vector of length K (the class count),
    what Keras' binary cross-entropy takes.

    Shuffling is over shard files and then records; give `seed` for a repeatable order.
    Raises `IncompleteOutput` for a folder without a finished run.
    """
    if crop_to_aspect_ratio and pad_to_aspect_ratio:
        raise ValueError("crop_to_aspect_ratio and pad_to_aspect_ratio cannot both be set")
    if decode_images is False and not features:
        raise ValueError("decode_images=False leaves nothing to return but the record: pass features=True")
    files = split_files(output_dir, split)
    channels = (files.channels or 3) if channels is None else channels
    layout = files.features
    if decode_images is None:
        decode_images = not features or image_size is not None
    decodes = decode_images and files.has_images
    batch = _batch_size(files, output_dir, batch_size, image_size, decodes)
    spec = schema_lib.parse_spec(files.layout)
    image_key, label_key = key_of(files.schema, "image"), key_of(files.schema, "label")
    classes = len(files.class_names or [])
    height_key, width_key = key_of(files.schema, "height"), key_of(files.schema, "width")
    deterministic = not shuffle or seed is not None

    paths = tf.data.Dataset.from_tensor_slices(files.paths)
    if shuffle:
        paths = paths.shuffle(len(files.paths), seed=seed)
    beam_reads = bool(gcs.emulator_host()) and any(p.startswith("gs://") for p in files.paths)
    read: Callable[[tf.Tensor], tf.data.Dataset] = (
        (lambda path: _beam_records(path, files.compression))
        if beam_reads
        else (lambda path: tf.data.TFRecordDataset(path, compression_type=files.compression))
    )
    records = paths.interleave(
        read,
        cycle_length=max(1, min(len(files.paths), 16)),
        num_parallel_calls=AUTOTUNE,
        deterministic=deterministic,
    )
    if shuffle:
        records = records.shuffle(shuffle_buffer, seed=seed)
    parsed = (
        records.batch(PARSE_BATCH)
        .map(lambda batch: tf.io.parse_example(batch, spec), num_parallel_calls=AUTOTUNE)
        .unbatch()
        .apply(tf.data.experimental.assert_cardinality(files.records))
    )

    def finish(record: dict[str, tf.Tensor]) -> Any:
        record = dict(record)
        if files.multi_label and files.labeled:
            record[label_key] = multi_hot(record[label_key], classes)
        if layout is not None:
            float_key, half_key = key_of(files.schema, "features"), key_of(files.schema, "features_float16")
            record[float_key] = schema_lib.restore_features(record, files.schema, layout)
            record.pop(half_key, None)
            if not layout.image:
                if features:
                    return record
                return (record[float_key], record[label_key]) if files.labeled else record[float_key]
        if not decodes:
            return record
        image = decode(
            record[image_key],
            channels,
            image_size,
            stored_size=(record[height_key], record[width_key]),
            crop_to_aspect_ratio=crop_to_aspect_ratio,
            pad_to_aspect_ratio=pad_to_aspect_ratio,
        )
        if features:
            return {**record, "image": image}
        return (image, record[label_key]) if files.labeled else image

    dataset = parsed.map(finish, num_parallel_calls=AUTOTUNE, deterministic=deterministic)
    ragged = features and (files.multi_label or any(c.is_list for c in files.extra_columns))
    if batch and ragged:  # lists of any length batch as RaggedTensors
        dataset = dataset.ragged_batch(batch, drop_remainder=drop_remainder)
    elif batch:
        dataset = dataset.batch(batch, drop_remainder=drop_remainder, num_parallel_calls=AUTOTUNE)
    return dataset.prefetch(AUTOTUNE)


def multi_hot(ids: tf.Tensor, classes: int) -> tf.Tensor:
    """Class ids -> float32 [classes] with 1 at each id (zeros for none)."""
    return tf.minimum(tf.reduce_sum(tf.one_hot(ids, classes, dtype=tf.float32), axis=0), 1.0)
