"""Reading a conversion's output back as a `tf.data.Dataset`, from its own metadata.

Everything a training job would otherwise hard-code (feature keys, label or not, gzip, shard
paths, record counts, whether the images share one size) is read from summary.json and the
shard names, so no parse function is written by hand and the defaults work on any output.

Speed, against `keras.utils.image_dataset_from_directory` on the source folder
(benchmarks/NOTES.md#reading-back): records are parsed in batches (`tf.io.parse_example`)
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
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from typing import Literal

import tensorflow as tf

from beam_tfrecord import gcs, names, storage
from beam_tfrecord.edges import Tensor
from beam_tfrecord.keys import PixelLayout, key_of, record_keys
from beam_tfrecord.labels import TargetOptions, TfTarget, TfTargetPair
from beam_tfrecord.labels import kind as label_kind
from beam_tfrecord.labels import kinds as label_kinds
from beam_tfrecord.labels.class_label import multi_hot
from beam_tfrecord.labels.objects.reading import check_box_format
from beam_tfrecord.read.files import RecordRange, SplitFiles, class_names, iter_range, split_files
from beam_tfrecord.write import array_record_files
from beam_tfrecord.write import schema as schema_lib

__all__ = [
    "SplitFiles",
    "class_names",
    "dct_ratio",
    "decode",
    "decode_pixels",
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


def traced_as_written(fn: Callable[..., Tensor]) -> Callable[..., Tensor]:
    """`fn` for a tf.data map, traced without AutoGraph's rewrite: the readers branch on tensors
    only through `tf.cond` and `tf.switch_case`, so the rewrite finds nothing to change, yet it
    is most of what building a process's first dataset costs (benchmarks/NOTES.md#reading-back)."""
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
    def records(name: bytes) -> Iterator[bytes]:
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


def decode_pixels(record: Mapping[str, tf.Tensor], pixels: PixelLayout, schema: str = "tfds") -> tf.Tensor:
    """A picture past 8 bits in its stored type (images.pixels): [H, W, C] from a 16-bit PNG,
    [H, W, C] or [D, H, W, C] from an array; uint8 [H, W, C] from the Object Detection API's
    additional channels, decoded and concatenated as that API's `tf_example_decoder` does."""
    dtype = tf.dtypes.as_dtype(pixels.dtype)
    if pixels.additional:
        rgb = tf.io.decode_png(record[key_of(schema, "image")], channels=3)
        extra = tf.map_fn(
            lambda band: tf.io.decode_png(band, channels=1),
            record[key_of(schema, "additional_channels")],
            fn_output_signature=tf.TensorSpec([None, None, 1], tf.uint8),
        )  # [C - 3, H, W, 1]
        image = tf.concat([rgb, tf.transpose(tf.squeeze(extra, axis=3), [1, 2, 0])], axis=2)
        image.set_shape([None, None, pixels.bands])
        return image
    if not pixels.array:
        return tf.io.decode_png(record[key_of(schema, "image")], channels=pixels.bands, dtype=tf.uint16)
    raw = tf.io.decode_compressed(record[key_of(schema, "array")], compression_type="ZLIB")
    image = tf.reshape(
        tf.io.decode_raw(raw, dtype, little_endian=True), record[key_of(schema, "array_shape")]
    )
    image.set_shape([None] * (4 if pixels.stacked else 3))
    return image


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
    # Bilinear and nearest take weighted means of the values, so the result lies in the type's
    # range: a plain cast gives what saturate_cast gives without its clip, a pass over every value.
    # A picture past 8 bits comes back in its own type (float stays float, unrounded).
    dtype = image.dtype
    image = tf.cast(resized if dtype.is_floating else tf.round(resized), dtype)
    leading = [None] * (image.shape.rank - 3) if image.shape.rank is not None else []
    image.set_shape([*leading, image_size[0], image_size[1], channels or None])
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
    """A dataset of `split` of a conversion: `(image, label)`, the image alone for an unlabeled
    run, or the pair each other task gives (`(image, {"boxes", "labels", ...})` for detection and
    keypoints, `(image, mask)` for segmentation, `(image, captions)` for captions: each kind of
    label's `TfTarget`); with `features=True`, a dict of every parsed key of the record instead.
    Images are uint8; labels and points move with the picture where `image_size`, crop or pad
    change it.

    Works with no argument but the folder on any output: `batch_size="auto"` batches 32 when
    every image has one size (summary.json says) or `image_size` is given, and otherwise gives
    single images. An explicit `batch_size` on images of several sizes without `image_size`
    raises ValueError here, naming `image_size=`; so do a `max_objects` below the run's most
    objects in one image and `cache=True` on a split larger than this machine's memory.
    Shuffling is over shard files and then records; give `seed` for a repeatable order.
    Raises `IncompleteOutput` for a folder without a finished run.

    What each argument does and what each task gives, in detail: docs/reading.md (Keras and
    tf.data; What each task gives) and docs/api.md#load_dataset.
    """
    if crop_to_aspect_ratio and pad_to_aspect_ratio:
        raise ValueError("crop_to_aspect_ratio and pad_to_aspect_ratio cannot both be set")
    if decode_images is False and not features:
        raise ValueError("decode_images=False leaves nothing to return but the record: pass features=True")
    files = split_files(output_dir, split)
    files.check_one_kind_of_picture()
    if cache:
        _check_fits_in_memory(files, output_dir, split)
    channels = (files.channels or 3) if channels is None else channels
    if files.depth is not None:  # a picture past 8 bits is read with every band it has
        channels = files.depth.bands
    resize = _Fit(image_size, crop_to_aspect_ratio, pad_to_aspect_ratio)
    kind = label_kind(files.kinds[0])  # the run's first kind of label gives the tuple's target
    options = TargetOptions(
        check_box_format(bounding_box_format),
        max_objects,
        image_size,
        crop_to_aspect_ratio,
        pad_to_aspect_ratio,
    )
    target = kind.tf_target(files.context(output_dir, kind), options, channels)
    if not features:
        files.check_targets_readable(output_dir, "load_dataset")
    if decode_images is None:
        decode_images = not features or image_size is not None
    decodes = decode_images and files.has_images
    batch = _batch_size(files, output_dir, batch_size, image_size, decodes)
    spec = schema_lib.parse_spec(files.layout)
    if not features:
        spec = _tuple_spec(spec, files)
    deterministic = not shuffle or seed is not None
    parsed = _parsed_records(files, spec, shuffle, shuffle_buffer, seed, cache, deterministic)
    scales = (
        dct_scaling
        and files.depth is None
        and image_size is not None
        and _may_scale(files, image_size, pad_to_aspect_ratio)
    )
    reading = _Reading(files, target, resize, channels, features, decodes, scales)
    dataset = parsed.map(
        traced_as_written(reading.finish), num_parallel_calls=AUTOTUNE, deterministic=deterministic
    )
    layout = files.layout
    lists = any(k.holds_lists(layout) for k in label_kinds(files.kinds)) or any(
        c.is_list for c in files.extra_columns
    )
    ragged = (features and lists) or (decodes and target.ragged)
    if batch and ragged:  # lists of any length batch as RaggedTensors
        dataset = dataset.ragged_batch(batch, drop_remainder=drop_remainder)
    elif batch:
        dataset = dataset.batch(batch, drop_remainder=drop_remainder, num_parallel_calls=AUTOTUNE)
    tuning = tf.data.Options()
    tuning.autotune.enabled = autotune  # off: AUTOTUNE means as many threads as cores
    return dataset.prefetch(AUTOTUNE).with_options(tuning)


def _parsed_records(
    files: SplitFiles,
    spec: dict[str, Tensor],
    shuffle: bool,
    shuffle_buffer: int,
    seed: int | None,
    cache: bool,
    deterministic: bool,
) -> tf.data.Dataset:
    """The split's records parsed with `spec`, in batches: shard files (and records) shuffled, or
    a cached split shuffled whole each pass."""
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
    return parsed.apply(tf.data.experimental.assert_cardinality(files.records))


@dataclass(frozen=True)
class _Fit:
    """The picture's resize as `load_dataset` was asked (labels.PictureFit): labels that lie on
    the picture move with it."""

    image_size: tuple[int, int] | None
    crop: bool
    pad: bool

    def fit(self, image: tf.Tensor, channels: int, method: str = "bilinear") -> tf.Tensor:
        return _fit(image, channels, self.image_size, self.crop, self.pad, method)  # type: ignore[arg-type]  # bilinear or nearest

    def frame(self, source_hw: tf.Tensor) -> tuple[tf.Tensor, tf.Tensor, tf.Tensor, tf.Tensor]:
        return _frame(source_hw, self.image_size, self.crop, self.pad)


@dataclass(frozen=True)
class _Reading:
    """One parsed record to what `load_dataset` hands out (its docstring): features restored,
    the picture decoded and fitted, then the run's target beside it."""

    files: SplitFiles
    target: TfTarget
    resize: _Fit
    channels: int
    features: bool
    decodes: bool
    scales: bool

    def finish(self, record: dict[str, Tensor]) -> TfTargetPair | dict[str, Tensor]:
        files, schema = self.files, self.files.schema
        record = self.target.parsed(dict(record))
        layout = files.features
        if layout is not None:
            float_key, half_key = key_of(schema, "features"), key_of(schema, "features_float16")
            record[float_key] = schema_lib.restore_features(record, schema, layout)
            record.pop(half_key, None)
            if not layout.image:
                if self.features:
                    return record
                target = self.target.without_image(record)
                return (record[float_key], target) if target is not None else record[float_key]
        if not self.decodes:
            return record
        resize = self.resize
        stored = (record[key_of(schema, "height")], record[key_of(schema, "width")]) if self.scales else None
        if files.depth is not None:
            source = decode_pixels(record, files.depth, schema)
        else:
            source = _decode_source(
                record[key_of(schema, "image")], self.channels, resize.image_size, stored, resize.pad
            )
        image = resize.fit(source, self.channels)
        if self.features:
            return {**record, "image": image}
        return self.target.pair(record, image, tf.shape(source)[:2], resize)


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


def _tuple_spec(spec: dict[str, Tensor], files: SplitFiles) -> dict[str, Tensor]:
    """`spec` without the keys no tuple reads (the descriptive fields, the manifest columns): a
    key costs its parse whether it is used or not (benchmarks/NOTES.md#reading-back)."""
    columns = {name for name, _type in files.layout.extra_columns}
    unread = {key.key for key in record_keys(files.layout) if key.name in _DESCRIPTIVE | columns}
    return {key: feature for key, feature in spec.items() if key not in unread}
