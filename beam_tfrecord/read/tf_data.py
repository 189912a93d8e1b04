"""Reading a conversion's output back as a `tf.data.Dataset`, from its own metadata.

Everything a training job would otherwise hard-code (feature keys, label or not, gzip, shard
paths, record counts, whether the images share one size) is read from summary.json and the
shard names, so no parse function is written by hand and the defaults work on any output.

Speed, against `keras.utils.image_dataset_from_directory` on the source folder
(docs/performance.md#reading-back): records are parsed in batches (`tf.io.parse_example`)
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
import os
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Literal

import tensorflow as tf

from beam_tfrecord import gcs, names, storage
from beam_tfrecord.keys import key_of, record_keys, table
from beam_tfrecord.read.detection import PAD_BOX, PAD_LABEL, box_columns, check_box_format
from beam_tfrecord.read.files import RecordRange, SplitFiles, class_names, iter_range, split_files
from beam_tfrecord.write import array_record_files
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
    "traced_as_written",
]

AUTOTUNE = tf.data.AUTOTUNE
DEFAULT_BATCH = 32
PARSE_BATCH = 64  # records per tf.io.parse_example call
_RATIOS = (1, 2, 4, 8)  # the DCT scales libjpeg decodes at (tf.io.decode_jpeg's `ratio`)
# Record fields that describe the picture but are in no tuple load_dataset hands out: parsed only
# for `features=True`, which hands out the whole record.
_DESCRIPTIVE = frozenset({"format", "channels", "filename", "sha256", "label_text", "source_id"})
_LOGGER = logging.getLogger(__name__)


def traced_as_written(fn: Callable[..., Any]) -> Callable[..., Any]:
    """`fn` for a tf.data map, traced without AutoGraph's rewrite: the readers branch on tensors
    only through `tf.cond` and `tf.switch_case`, so the rewrite finds nothing to change, yet it
    is most of what building a process's first dataset costs (docs/performance.md)."""
    return tf.autograph.experimental.do_not_convert(fn)


def record_dataset(path: str, compression: str = "") -> tf.data.Dataset:
    """The serialized records of one shard: TensorFlow's TFRecordDataset, or Beam's filesystems
    for gs:// under a GCS emulator (see the module docstring); an ArrayRecord shard through its
    package (TensorFlow has no reader of its own for it)."""
    if names.is_array_record(path):
        array_record_files.open_reader(path).close()  # a gs:// one is refused here, in one line
        return _beam_records(path, compression)
    if storage.is_gcs(path) and gcs.emulator_host():
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
    source = _decode_source(encoded, channels, image_size, stored_size, pad_to_aspect_ratio)
    return _fit(source, channels, image_size, crop_to_aspect_ratio, pad_to_aspect_ratio)


def _decode_source(
    encoded: tf.Tensor,
    channels: int,
    image_size: tuple[int, int] | None,
    stored_size: tuple[tf.Tensor, tf.Tensor] | None,
    pad: bool,
) -> tf.Tensor:
    """The picture before any resize: full size, or a JPEG at the reduced DCT scale that still
    leaves `image_size` enough pixels."""
    if image_size is not None and stored_size is not None:
        ratio = dct_ratio(stored_size[0], stored_size[1], image_size, pad)
        return _decode_reduced(encoded, channels, ratio)
    return _decode_full(encoded, channels)


def _fit(
    image: tf.Tensor,
    channels: int,
    image_size: tuple[int, int] | None,
    crop: bool,
    pad: bool,
    method: Literal["bilinear", "nearest"] = "bilinear",
) -> tf.Tensor:
    """`image` (uint8 [height, width, channels]) brought to `image_size` as `decode` says;
    `method="nearest"` for masks, which stay 0 and 1."""
    if image_size is None:
        return image
    if pad:
        resized = tf.image.resize_with_pad(image, image_size[0], image_size[1], method=method)
    else:
        if crop:
            image = _center_crop(image, image_size)
        resized = tf.image.resize(image, image_size, method=method)
    # Bilinear and nearest take weighted means of uint8 values, so the result lies in [0, 255]:
    # a plain cast gives what saturate_cast gives without its clip, a pass over every value.
    image = tf.cast(tf.round(resized), tf.uint8)
    image.set_shape([image_size[0], image_size[1], channels or None])
    return image


def _frame(
    source_hw: tf.Tensor, image_size: tuple[int, int] | None, crop: bool, pad: bool
) -> tuple[tf.Tensor, tf.Tensor, tf.Tensor, tf.Tensor]:
    """(scale_y, offset_y, scale_x, offset_x) that take a stored box's fractions to pixels of the
    image `_fit` makes from a source of `source_hw` (height, width): the same window as the
    crop, the same fit and borders as `tf.image.resize_with_pad`."""
    height, width = tf.cast(source_hw[0], tf.float32), tf.cast(source_hw[1], tf.float32)
    zero = tf.constant(0.0)
    if image_size is None:
        return height, zero, width, zero
    target_h, target_w = float(image_size[0]), float(image_size[1])
    if pad:  # resize_with_pad: scale by the limiting side, floor the size, centre with floored borders
        ratio = tf.maximum(width / target_w, height / target_h)
        resized_h, resized_w = tf.floor(height / ratio), tf.floor(width / ratio)
        top = tf.maximum(tf.floor((target_h - height / ratio) / 2), 0.0)
        left = tf.maximum(tf.floor((target_w - width / ratio) / 2), 0.0)
        return resized_h, top, resized_w, left
    if crop:  # _center_crop's window, then stretched to the target
        aspect = target_w / target_h
        crop_h = tf.minimum(height, tf.round(width / aspect))
        crop_w = tf.minimum(width, tf.round(height * aspect))
        top, left = tf.floor((height - crop_h) / 2), tf.floor((width - crop_w) / 2)
        scale_y, scale_x = target_h / crop_h, target_w / crop_w
        return height * scale_y, -top * scale_y, width * scale_x, -left * scale_x
    return tf.constant(target_h), zero, tf.constant(target_w), zero


def _batch_size(
    files: SplitFiles,
    output_dir: str,
    batch_size: int | Literal["auto"] | None,
    image_size: tuple[int, int] | None,
    decodes: bool,
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
    dct_scaling: bool = True,
    channels: int | None = None,
    shuffle: bool = True,
    shuffle_buffer: int = 1024,
    seed: int | None = None,
    features: bool = False,
    decode_images: bool | None = None,
    drop_remainder: bool = False,
    bounding_box_format: str = "xyxy",
    max_objects: int | None = None,
    autotune: bool = False,
    cache: bool = False,
) -> tf.data.Dataset:
    """A dataset of `(image, label)` (or `image` alone for an unlabeled run) from a conversion;
    `(image, {"boxes", "labels"[, "masks"]})` from a detection run, `(image, mask)` from a
    segmentation run, `(image, captions)` from a captions run (below).

    Works with no argument but the folder on any output: `batch_size="auto"` batches 32 when
    every image has one size (summary.json says) or `image_size` is given, and otherwise gives
    single images. An explicit `batch_size` on images of several sizes without `image_size`
    raises ValueError here, naming `image_size=`. `image_size=(height, width)` (Keras's order;
    `resize` is (width, height)) resizes: stretched, or with `crop_to_aspect_ratio` /
    `pad_to_aspect_ratio` as Keras does. Images are uint8; `channels` defaults to what the run
    forced, else 3; 0 keeps each image's own count. With `dct_scaling` (the default), a JPEG at
    least twice `image_size` is decoded at 1/2, 1/4 or 1/8 of its size, which still leaves the
    resize enough pixels: a fraction of the decode's work, and a picture within a few levels of
    the full decode's (docs/reading.md, Speed); `dct_scaling=False` decodes every one in full.

    `features=True` gives instead a dict of every parsed key of the record (the encoded bytes
    included); images are decoded into `"image"` only when asked (`decode_images=True`, or an
    `image_size`). Manifest columns (extra_columns) are under their keys (`image/meta/NAME` or `NAME`: a
    scalar tensor, or a 1-D tensor for a list column, batched as a `tf.RaggedTensor`). A
    feature-model run's features come back as a float32 tensor of their stored shape under the
    float key (`image/features` or `features`, float16 runs included); a `features_only` run
    has no image, and gives `(features, label)`.

    A multi-label run's label is a multi-hot float32 vector of length K (the class count),
    what Keras' binary cross-entropy takes.

    A detection run (`--annotations`) gives `(image, targets)` in KerasHub's convention (what
    its object detectors' `fit` takes): `targets["boxes"]` float32 [N, 4] in
    `bounding_box_format` (Keras's names: `xyxy`, the default, `yxyx`, `xywh`, `center_xywh`,
    `center_yxhw` in pixels of the image handed out, or `rel_xyxy`, `rel_yxyx`, ... as fractions
    of it), `targets["labels"]` int32 [N] from 0 (the stored ids count from 1), and, where the run
    stored masks, `targets["masks"]` uint8 [N, height, width] of 0 and 1, and where it stored
    keypoints (`--task keypoints`), `targets["keypoints"]` float32 [N, K, 3]: each point's pixel
    x, y and visibility (0 not labelled, 1 hidden, 2 visible). `image_size`, crop and
    pad move the boxes and masks with the picture; an object a crop cuts out is left out. Batches
    hold `tf.RaggedTensor` targets (any number of objects per image), or with `max_objects=K`
    dense ones padded to K with -1 boxes and -1 labels (Keras's and KerasHub's padding); a K
    below the run's most objects in one image (summary.json) is refused here.

    A segmentation run (`--task segmentation`) gives `(image, mask)`: `mask` uint8 [height,
    width, 1] of class ids (labels.txt's, from 0) and the ignore value (summary.json's
    `segmentation.ignore`, 255 by default: Keras's `SparseCategoricalCrossentropy(ignore_class=255)`
    skips it). `image_size`, crop and pad move the mask with the picture, nearest neighbour, a
    pad's margins holding the ignore value.

    A captions run (`--task captions`) gives `(image, captions)`: a 1-D tf.string tensor of the
    picture's captions (UTF-8, in their file's order), batched as a `tf.RaggedTensor`.

    Shuffling is over shard files and then records; give `seed` for a repeatable order.
    Raises `IncompleteOutput` for a folder without a finished run.

    `autotune=False` (the default) runs each parallel step on as many threads as there are cores
    and turns tf.data's autotuning off: with it on, a pass over records read in sequence from a
    shard ran either at the decode's full speed or about a third slower, at random from pass to
    pass (docs/performance.md#reading-back). `autotune=True` lets tf.data tune them.

    `cache=True` holds the split's parsed records in memory from the first pass on, so later
    passes read, frame and parse no file, and a shuffled pass draws from every record of the
    split (not `shuffle_buffer` of them), a new order each pass; a shuffled first pass starts
    once the whole split is read. It needs memory for the records (about the shards' size,
    summary.json's `bytes`; more for a gzip output, whose shards are sized compressed): a split
    larger than this machine's memory is refused here. `seed`
    still gives a repeatable sequence of orders.
    """
    if crop_to_aspect_ratio and pad_to_aspect_ratio:
        raise ValueError("crop_to_aspect_ratio and pad_to_aspect_ratio cannot both be set")
    if decode_images is False and not features:
        raise ValueError("decode_images=False leaves nothing to return but the record: pass features=True")
    files = split_files(output_dir, split)
    if cache:
        _check_fits_in_memory(files, output_dir, split)
    bounding_box_format = check_box_format(bounding_box_format)
    if max_objects is not None and files.objects and max_objects < (files.max_objects or 0):
        raise ValueError(
            f"{output_dir}: an image holds up to {files.max_objects} objects (summary.json), so "
            f"max_objects={max_objects} would lose some: pass max_objects={files.max_objects} or more"
        )
    channels = (files.channels or 3) if channels is None else channels
    layout = files.features
    if not features:
        files.check_targets_readable(output_dir, "load_dataset")
    if decode_images is None:
        decode_images = not features or image_size is not None
    decodes = decode_images and files.has_images
    batch = _batch_size(files, output_dir, batch_size, image_size, decodes)
    spec = schema_lib.parse_spec(files.layout)
    if not features:
        spec = _tuple_spec(spec, files)
    image_key, label_key = key_of(files.schema, "image"), key_of(files.schema, "label")
    classes = len(files.class_names or [])
    height_key, width_key = key_of(files.schema, "height"), key_of(files.schema, "width")
    mask_key = key_of(files.schema, "mask") if files.segmentation else ""
    caption_key = key_of(files.schema, "caption") if files.captions else ""
    deterministic = not shuffle or seed is not None
    scales = dct_scaling and image_size is not None and _may_scale(files, image_size, pad_to_aspect_ratio)

    paths = tf.data.Dataset.from_tensor_slices(files.paths)
    if shuffle and not cache:  # a cached split is shuffled whole, below
        paths = paths.shuffle(len(files.paths), seed=seed)
    if files.random_access:  # a gs:// ArrayRecord output is refused before any tf.data work
        for path in files.paths[:1]:
            array_record_files.open_reader(path).close()
    beam_reads = files.random_access or (
        bool(gcs.emulator_host()) and any(storage.is_gcs(p) for p in files.paths)
    )
    read: Callable[[tf.Tensor], tf.data.Dataset] = (
        (lambda path: _beam_records(path, files.compression))
        if beam_reads
        else (lambda path: tf.data.TFRecordDataset(path, compression_type=files.compression))
    )
    records = paths.interleave(
        traced_as_written(read),
        cycle_length=max(1, min(len(files.paths), 16)),
        num_parallel_calls=AUTOTUNE,
        deterministic=deterministic,
    )
    if shuffle and not cache:
        records = records.shuffle(shuffle_buffer, seed=seed)
    parsed = (
        records.batch(PARSE_BATCH)
        .map(traced_as_written(lambda batch: tf.io.parse_example(batch, spec)), num_parallel_calls=AUTOTUNE)
        .unbatch()
    )
    if cache:  # the parsed fields the tuple needs, in file order; then every record shuffled
        parsed = parsed.cache()
        if shuffle:
            parsed = parsed.shuffle(max(files.records, 1), seed=seed)
    parsed = parsed.apply(tf.data.experimental.assert_cardinality(files.records))

    detection = _Detection(
        bounding_box_format,
        max_objects,
        files.masks,
        (image_size, crop_to_aspect_ratio, pad_to_aspect_ratio),
        files.keypoints,
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
        source = _decode_source(
            record[image_key],
            channels,
            image_size,
            (record[height_key], record[width_key]) if scales else None,
            pad_to_aspect_ratio,
        )
        image = _fit(source, channels, image_size, crop_to_aspect_ratio, pad_to_aspect_ratio)
        if features:
            return {**record, "image": image}
        if files.captions:
            return image, record[caption_key]
        if files.segmentation:
            mask = tf.io.decode_png(record[mask_key], channels=1)
            fill = files.ignore if files.ignore is not None else 0
            return image, _fit_class_mask(mask, image_size, crop_to_aspect_ratio, pad_to_aspect_ratio, fill)
        if files.objects:
            frame = _frame(tf.shape(source)[:2], image_size, crop_to_aspect_ratio, pad_to_aspect_ratio)
            if image_size is None and files.one_size and files.heights and files.widths:
                # One stored size: say so, so ragged_batch keeps the images dense.
                image = tf.ensure_shape(image, [files.heights[0], files.widths[0], channels or None])
            return image, _targets(record, frame, image, detection)
        return (image, record[label_key]) if files.labeled else image

    dataset = parsed.map(traced_as_written(finish), num_parallel_calls=AUTOTUNE, deterministic=deterministic)
    lists = (
        files.multi_label or files.objects or files.captions or any(c.is_list for c in files.extra_columns)
    )
    ragged = (features and lists) or (decodes and (files.captions or (files.objects and max_objects is None)))
    if batch and ragged:  # lists of any length batch as RaggedTensors
        dataset = dataset.ragged_batch(batch, drop_remainder=drop_remainder)
    elif batch:
        dataset = dataset.batch(batch, drop_remainder=drop_remainder, num_parallel_calls=AUTOTUNE)
    options = tf.data.Options()
    options.autotune.enabled = autotune  # off: AUTOTUNE means as many threads as cores
    return dataset.prefetch(AUTOTUNE).with_options(options)


def _machine_memory() -> int | None:
    """Bytes of memory this process may use: the machine's, or its container's limit (cgroup v2)
    where that is lower; None where the system does not say."""
    try:
        found = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    except (AttributeError, ValueError, OSError):
        return None
    try:
        with open("/sys/fs/cgroup/memory.max", encoding="ascii") as handle:
            limit = handle.read().strip()
    except OSError:
        return found
    return min(found, int(limit)) if limit.isdigit() else found


def _check_fits_in_memory(files: SplitFiles, output_dir: str, split: str) -> None:
    """`cache=True` on a split that cannot fit: refused at the call, not killed mid-epoch."""
    available = _machine_memory()
    if available is not None and files.shard_bytes > available:
        raise ValueError(
            f"{output_dir}: cache=True would hold split {split!r}'s {files.shard_bytes / 1e9:.1f} GB "
            f"of records in memory, more than this machine's {available / 1e9:.1f} GB: leave cache "
            "off (each pass then reads the shard files)"
        )


def _may_scale(files: SplitFiles, image_size: tuple[int, int], pad: bool) -> bool:
    """Whether any stored picture is large enough for a reduced DCT decode (summary.json's
    largest sides, as `dct_ratio` judges one picture): where none is, every picture is decoded
    in full without the per-picture choice, which costs its own time."""
    if files.heights is None or files.widths is None:
        return True
    by_height, by_width = files.heights[1] / image_size[0], files.widths[1] / image_size[1]
    return (max if pad else min)(by_height, by_width) >= _RATIOS[1]


def _tuple_spec(spec: dict[str, Any], files: SplitFiles) -> dict[str, Any]:
    """`spec` without the keys no tuple reads (the descriptive fields, the manifest columns): a
    key costs its parse whether it is used or not (docs/performance.md#reading-back)."""
    columns = {name for name, _kind in files.layout.extra_columns}
    unread = {key.key for key in record_keys(files.layout) if key.name in _DESCRIPTIVE | columns}
    return {key: feature for key, feature in spec.items() if key not in unread}


@dataclass(frozen=True)
class _Detection:
    """How load_dataset hands out a detection record's objects (see its docstring)."""

    box_format: str
    max_objects: int | None
    masks: bool
    resize: tuple[tuple[int, int] | None, bool, bool]  # image_size, crop, pad
    keypoints: bool = False


def _targets(
    record: dict[str, tf.Tensor],
    frame: tuple[tf.Tensor, tf.Tensor, tf.Tensor, tf.Tensor],
    image: tf.Tensor,
    detection: _Detection,
) -> dict[str, tf.Tensor]:
    """KerasHub's targets of one record: boxes in the asked format and labels from 0 in the
    picture as handed out (clipped to it; an object a crop cut out left out), masks moved with
    the picture, padded to `max_objects` where asked."""
    groups = table("tfds").groups
    key = {k.name: k.key for k in (*groups["objects"], *groups["object_masks"])}
    scale_y, top, scale_x, left = frame
    out_hw = tf.shape(image)[:2]
    height, width = tf.cast(out_hw[0], tf.float32), tf.cast(out_hw[1], tf.float32)
    x1 = tf.clip_by_value(record[key["object_xmin"]] * scale_x + left, 0.0, width)
    x2 = tf.clip_by_value(record[key["object_xmax"]] * scale_x + left, 0.0, width)
    y1 = tf.clip_by_value(record[key["object_ymin"]] * scale_y + top, 0.0, height)
    y2 = tf.clip_by_value(record[key["object_ymax"]] * scale_y + top, 0.0, height)
    keep = tf.logical_and(x2 > x1, y2 > y1)
    boxes = tf.stack(box_columns(x1, y1, x2, y2, detection.box_format, height, width), axis=-1)
    labels = tf.cast(record[key["object_label"]], tf.int32) - 1
    targets = {"boxes": tf.boolean_mask(boxes, keep), "labels": tf.boolean_mask(labels, keep)}
    if detection.masks:
        masks = _decode_masks(record[key["object_mask"]], record)
        masks = tf.boolean_mask(_fit_masks(masks, detection.resize), keep)
        targets["masks"] = tf.ensure_shape(masks, [None, *image.shape[:2]])
    if detection.keypoints:
        targets["keypoints"] = tf.boolean_mask(_points(record, frame, width, height), keep)
    if detection.max_objects is not None:
        targets = _pad(targets, detection.max_objects)
    return targets


def _points(
    record: dict[str, tf.Tensor],
    frame: tuple[tf.Tensor, tf.Tensor, tf.Tensor, tf.Tensor],
    width: tf.Tensor,
    height: tf.Tensor,
) -> tf.Tensor:
    """float32 [N, K, 3]: each object's points in pixels of the image handed out (moved as its
    boxes are by the resize, crop or pad), and their visibility; a point the crop leaves outside,
    or one not labelled, is (0, 0, 0)."""
    key = {k.name: k.key for k in table("tfds").groups["keypoints"]}
    scale_y, top, scale_x, left = frame
    objects = tf.shape(record[key_of("tfds", "object_label")])[0]
    x = record[key["keypoint_x"]] * scale_x + left
    y = record[key["keypoint_y"]] * scale_y + top
    v = tf.cast(record[key["keypoint_visibility"]], tf.float32)
    inside = (v > 0) & (x >= 0) & (x <= width) & (y >= 0) & (y <= height)
    zero = tf.zeros_like(x)
    points = tf.stack([tf.where(inside, x, zero), tf.where(inside, y, zero), tf.where(inside, v, zero)], -1)
    return tf.reshape(points, [objects, -1, 3])


def _decode_masks(pngs: tf.Tensor, record: dict[str, tf.Tensor]) -> tf.Tensor:
    """uint8 [N, stored height, stored width] from the mask PNGs (Model Garden decodes them so)."""
    height, width = record[key_of("tfds", "height")], record[key_of("tfds", "width")]

    def decode_all() -> tf.Tensor:
        return tf.map_fn(
            lambda png: tf.io.decode_png(png, channels=1)[..., 0],
            pngs,
            fn_output_signature=tf.TensorSpec([None, None], tf.uint8),
        )

    return tf.cond(tf.size(pngs) > 0, decode_all, lambda: tf.zeros([0, height, width], tf.uint8))


def _fit_masks(masks: tf.Tensor, resize: tuple[tuple[int, int] | None, bool, bool]) -> tf.Tensor:
    """[N, height, width] masks through the picture's own resize, crop or pad, nearest neighbour."""
    image_size, crop, pad = resize
    if image_size is None:
        return masks

    def fit() -> tf.Tensor:
        moved = _fit(tf.transpose(masks, [1, 2, 0]), 0, image_size, crop, pad, method="nearest")
        return tf.transpose(moved, [2, 0, 1])

    fitted = tf.cond(
        tf.shape(masks)[0] > 0, fit, lambda: tf.zeros([0, image_size[0], image_size[1]], tf.uint8)
    )
    fitted.set_shape([None, image_size[0], image_size[1]])
    return fitted


def _pad(targets: dict[str, tf.Tensor], size: int) -> dict[str, tf.Tensor]:
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


def _fit_class_mask(
    mask: tf.Tensor, image_size: tuple[int, int] | None, crop: bool, pad: bool, fill: int
) -> tf.Tensor:
    """A class-id mask (uint8 [height, width, 1]) through the picture's own resize, crop or pad:
    nearest neighbour, so no value blends into another, and a pad's margins `fill` (the ignore
    value), never class 0."""
    if image_size is None:
        return mask
    if not pad:
        return _fit(mask, 1, image_size, crop, False, method="nearest")
    shifted = tf.cast(mask, tf.int32) + 1  # 0 is the margin resize_with_pad adds
    resized = tf.image.resize_with_pad(shifted, image_size[0], image_size[1], method="nearest")
    resized = tf.cast(tf.round(resized), tf.int32)
    fitted = tf.cast(tf.where(resized == 0, fill, resized - 1), tf.uint8)
    fitted.set_shape([image_size[0], image_size[1], 1])
    return fitted


def multi_hot(ids: tf.Tensor, classes: int) -> tf.Tensor:
    """Class ids -> float32 [classes] with 1 at each id (zeros for none)."""
    return tf.minimum(tf.reduce_sum(tf.one_hot(ids, classes, dtype=tf.float32), axis=0), 1.0)
