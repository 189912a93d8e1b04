"""Reading a conversion's output back as a `tf.data.Dataset`, from its own metadata.

Everything a training job would otherwise hard-code (feature keys, label or not, gzip, shard
paths, record counts) is read from summary.json and the shard names, so no parse function is
written by hand. Works on local and `gs://` output: TFRecordDataset reads `gs://` itself.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import tensorflow as tf
from apache_beam.io.filesystems import FileSystems

from beam_tfrecord import schema as schema_lib
from beam_tfrecord.columns import ExtraColumn
from beam_tfrecord.metadata import read_summary

__all__ = ["SplitFiles", "class_names", "decode", "load_dataset", "multi_hot", "split_files"]

AUTOTUNE = tf.data.AUTOTUNE


@dataclass(frozen=True)
class SplitFiles:
    """What a reader needs to know about one split of an output directory."""

    schema: str
    labeled: bool
    class_names: list[str] | None
    paths: list[str]
    compression: str  # "GZIP" or "" as TFRecordDataset spells it
    records: int
    channels: int | None  # what the run forced with --channels, if anything
    features: schema_lib.FeatureLayout | None = None  # a feature-model run's stored features
    extra_columns: tuple[ExtraColumn, ...] = ()  # manifest columns stored in the records
    multi_label: bool = False  # label keys hold lists of class ids and names


def split_files(output_dir: str, split: str = "train", summary: dict[str, Any] | None = None) -> SplitFiles:
    """The shards of `split` and how to parse them, from summary.json."""
    summary = summary if summary is not None else read_summary(output_dir)
    if split not in summary["splits"]:
        raise ValueError(f"{output_dir} has no split {split!r}; it has {sorted(summary['splits'])}")
    info = summary["splits"][split]
    paths = [FileSystems.join(output_dir, name) for name in sorted(info["files"])]
    options = summary.get("options", {})
    return SplitFiles(
        schema=options.get("schema", "tfds"),
        labeled=summary.get("class_names") is not None,
        class_names=summary.get("class_names"),
        paths=paths,
        compression="GZIP" if any(p.endswith(".gz") for p in paths) else "",
        records=info["records"],
        channels=options.get("channels"),
        features=schema_lib.layout_from_summary(summary),
        extra_columns=tuple(ExtraColumn(c["name"], c["type"]) for c in summary.get("extra_columns") or []),
        multi_label=bool(summary.get("multi_label")),
    )


def decode(encoded: tf.Tensor, channels: int, image_size: tuple[int, int] | None) -> tf.Tensor:
    """uint8 [height, width, channels] as the training job sees it; resizing keeps it uint8."""
    image = tf.io.decode_image(encoded, channels=channels, expand_animations=False)
    if image_size is not None:
        resized = tf.image.resize(image, image_size)
        image = tf.cast(tf.clip_by_value(tf.round(resized), 0.0, 255.0), tf.uint8)
    return image


def load_dataset(
    output_dir: str,
    split: str = "train",
    *,
    batch_size: int | None = 32,
    image_size: tuple[int, int] | None = None,
    channels: int | None = None,
    shuffle: bool = True,
    shuffle_buffer: int = 1024,
    seed: int | None = None,
    features: bool = False,
    drop_remainder: bool = False,
) -> tf.data.Dataset:
    """A dataset of `(image, label)` (or `image` alone for an unlabeled run) from a conversion.

    `features=True` gives instead a dict of every parsed key of the record (the encoded bytes
    included) plus `"image"`, the decoded image; --extra_columns values are under their keys
    (`image/meta/NAME` or `NAME`: a scalar tensor, or a 1-D tensor for a list column, batched as
    a `tf.RaggedTensor`). A --multi_label run's label is a multi-hot float32 vector of length K
    (the class count), what Keras' binary cross-entropy takes. A feature-model run's features come back as a
    float32 tensor of their stored shape under the float key (`image/features` or `features`,
    float16 runs included); a `--features_only` run has no image, and gives `(features, label)`.
    Images are uint8; `image_size=(height, width)` resizes them. `channels` defaults to what the
    run forced, else 3 (grayscale becomes RGB, as TFDS does); 0 keeps each image's own count.
    Shuffling is over shard files and then records; give `seed` for a repeatable order. Batching
    needs images of one size: use `image_size`, or `batch_size=None` for single examples.
    """
    files = split_files(output_dir, split)
    channels = (files.channels or 3) if channels is None else channels
    layout = files.features
    spec = schema_lib.parse_spec(files.schema, files.labeled, layout, files.extra_columns, files.multi_label)
    image_key = schema_lib.image_key(files.schema)
    label_key = schema_lib.label_key(files.schema)
    classes = len(files.class_names or [])

    paths = tf.data.Dataset.from_tensor_slices(files.paths)
    if shuffle:
        paths = paths.shuffle(len(files.paths), seed=seed)
    records = paths.interleave(
        lambda path: tf.data.TFRecordDataset(path, compression_type=files.compression),
        cycle_length=max(1, min(len(files.paths), 16)),
        num_parallel_calls=AUTOTUNE,
        deterministic=not shuffle or seed is not None,
    )
    records = records.apply(tf.data.experimental.assert_cardinality(files.records))
    if shuffle:
        records = records.shuffle(shuffle_buffer, seed=seed)

    def parse(serialized: tf.Tensor) -> Any:
        parsed = tf.io.parse_single_example(serialized, spec)
        if files.multi_label and files.labeled:
            parsed[label_key] = multi_hot(parsed[label_key], classes)
        if layout is not None:
            float_key, half_key, _ = schema_lib.feature_keys(files.schema)
            parsed[float_key] = schema_lib.restore_features(parsed, files.schema, layout)
            parsed.pop(half_key, None)
            if not layout.image:
                if features:
                    return parsed
                return (parsed[float_key], parsed[label_key]) if files.labeled else parsed[float_key]
        image = decode(parsed[image_key], channels, image_size)
        if features:
            return {**parsed, "image": image}
        return (image, parsed[label_key]) if files.labeled else image

    dataset = records.map(parse, num_parallel_calls=AUTOTUNE, deterministic=not shuffle or seed is not None)
    ragged = features and (files.multi_label or any(c.is_list for c in files.extra_columns))
    if batch_size and ragged:  # lists of any length batch as RaggedTensors
        dataset = dataset.ragged_batch(batch_size, drop_remainder=drop_remainder)
    elif batch_size:
        dataset = dataset.batch(batch_size, drop_remainder=drop_remainder, num_parallel_calls=AUTOTUNE)
    return dataset.prefetch(AUTOTUNE)


def multi_hot(ids: tf.Tensor, classes: int) -> tf.Tensor:
    """Class ids -> float32 [classes] with 1 at each id (zeros for none)."""
    return tf.minimum(tf.reduce_sum(tf.one_hot(ids, classes, dtype=tf.float32), axis=0), 1.0)


def class_names(output_dir: str) -> list[str] | None:
    """The label names in id order (labels.txt's lines), or None for an unlabeled run."""
    return read_summary(output_dir).get("class_names")
