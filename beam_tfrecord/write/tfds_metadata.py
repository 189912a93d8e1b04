"""TensorFlow Datasets metadata beside the shards, so `tfds.builder_from_directory(OUTPUT)` loads them.

Written with TFDS's own writer (`tfds.folder_dataset.write_metadata`), never by hand, so the JSON
is whatever the installed TFDS reads. Two facts make our shards loadable as they are:

- TFDS's filename template `{SPLIT}-{SHARD_X_OF_Y}.{FILEFORMAT}` is exactly our shard name
  `{split}-{index:05d}-of-{count:05d}.tfrecord`.
- TFDS serializes a nested `FeaturesDict` under `/`-joined keys, so `{"image": {"encoded": ...}}`
  reads the `image/encoded` key of the `tfds` schema; the `simple` schema's keys are flat.

TFDS reads uncompressed TFRecord files only, so gzip output gets no TFDS metadata (the summary
says why). `tensorflow_datasets` is imported only here and only when writing; its metadata
writer does not import TensorFlow.
"""

from __future__ import annotations

import os
import posixpath
import re
import shutil
import tempfile
from collections.abc import Mapping, Sequence
from typing import Any

from apache_beam.io.filesystems import FileSystems

from beam_tfrecord import names
from beam_tfrecord.plan.columns import ExtraColumn
from beam_tfrecord.write.tfrecord_files import count_records

__all__ = ["FILENAME_TEMPLATE", "dataset_name", "features_spec", "write_tfds_metadata"]

FILENAME_TEMPLATE = "{SPLIT}-{SHARD_X_OF_Y}.{FILEFORMAT}"
FILE_FORMAT = "tfrecord"


def features_spec(
    schema: str,
    class_names: Sequence[str] | None,
    channels: int | None,
    extra_columns: Sequence[ExtraColumn] = (),
    multi_label: bool = False,
) -> dict[str, Any]:
    """The TFDS FeaturesDict (as nested dicts of connectors) whose keys are the schema's record keys.

    Images decode to `channels` (3 unless the run forced 1), as TFDS's Image needs a fixed count.
    A --multi_label label is a `Sequence(ClassLabel)` (its names a `Sequence(Text)`); an
    --extra_columns column a `Text` or `Scalar`, or a `Sequence` of them for a list.
    """
    import numpy as np
    import tensorflow_datasets as tfds

    f = tfds.features
    image = f.Image(shape=(None, None, channels or 3))
    int64 = f.Scalar(dtype=np.int64)

    def label() -> Any:
        label_names = f.ClassLabel(names=list(class_names or []))
        return f.Sequence(label_names) if multi_label else label_names

    extras: dict[str, Any] = {}
    for column in extra_columns:
        kind = column.scalar_type
        one = f.Text() if kind == "str" else f.Scalar(dtype=np.int64 if kind == "int" else np.float32)
        extras[column.name] = f.Sequence(one) if column.is_list else one
    if schema == "tfds":
        spec: dict[str, Any] = {
            "encoded": image,
            "format": f.Text(),
            "height": int64,
            "width": int64,
            "channels": int64,
            "filename": f.Text(),
            "key": {"sha256": f.Text()},
        }
        if class_names is not None:
            spec["class"] = {"label": label(), "text": f.Sequence(f.Text()) if multi_label else f.Text()}
        if extras:
            spec["meta"] = extras
        return {"image": spec}
    if schema == "simple":
        spec = {
            "image_raw": image,
            "id": f.Text(),
            "height": int64,
            "width": int64,
            "depth": int64,
            "sha256": f.Text(),
        }
        if class_names is not None:
            spec["label"] = label()
        return {**spec, **extras}
    raise ValueError(f"unknown schema {schema!r}")


def _length(output: str, name: str, known: int | None) -> int:
    return known if known is not None else count_records(FileSystems.join(output, name))


def dataset_name(output: str) -> str:
    """A TFDS-valid snake_case name from the output folder's name (TFDS shows it, never parses it)."""
    base = posixpath.basename(output.rstrip("/")) or "images"
    name = re.sub(r"[^a-z0-9_]+", "_", base.lower()).strip("_")
    return name if name and name[0].isalpha() else f"images_{name}".rstrip("_")


def write_tfds_metadata(
    output: str, summary: Mapping[str, Any], shard_lengths: Mapping[str, int | None] | None = None
) -> dict[str, Any]:
    """Write dataset_info.json and features.json for a finished run; returns what to record in
    summary.json (`written`, and a `reason` when not).

    `shard_lengths` (shard file name -> records) are the counts the writer kept; a shard it has
    no count for (Beam's WriteToTFRecord does not report them) is counted from its record
    headers."""
    options = summary.get("options", {})
    if options.get("compression", "none") != "none":
        return {"written": False, "reason": "TFDS reads uncompressed TFRecord files only"}
    if options.get("features_only"):
        return {"written": False, "reason": "--features_only records hold no image for TFDS's Image feature"}
    if summary.get("records", 0) == 0:
        return {"written": False, "reason": "no record was written"}

    # TFDS writes through tf.io.gfile, which does not go through Beam's filesystems (nor honour
    # a GCS emulator): remote metadata is written to a local folder and copied with Beam.
    remote = "://" in output
    staging = tempfile.mkdtemp(prefix="beam-tfrecord-tfds-") if remote else output
    try:
        if remote:  # TFDS lists its folder for the shard names: empty stand-ins, never copied
            for info in summary["splits"].values():
                for name in info["files"]:
                    open(os.path.join(staging, name), "wb").close()
        _write(staging, output, summary, shard_lengths or {})
        if remote:
            for name in sorted(os.listdir(staging)):
                if names.is_shard_name(name):
                    continue
                with (
                    open(os.path.join(staging, name), "rb") as source,
                    FileSystems.create(FileSystems.join(output, name)) as target,
                ):
                    target.write(source.read())
    finally:
        if remote:
            shutil.rmtree(staging, ignore_errors=True)
    # No read-back here: loading through TFDS imports TensorFlow (about 4 s and 520 MB, more than
    # a local run of 8,000 images needs). `pipelines.inspect` and the tests load it with TFDS.
    return {"written": True, "filename_template": FILENAME_TEMPLATE}


def _write(
    data_dir: str, output: str, summary: Mapping[str, Any], shard_lengths: Mapping[str, int | None]
) -> None:
    """TFDS's own writer, into `data_dir`; the shards are counted where they are, in `output`."""
    import tensorflow_datasets as tfds
    from tensorflow_datasets.core import naming

    options = summary.get("options", {})
    template = naming.ShardedFileTemplate(
        data_dir=data_dir,
        template=FILENAME_TEMPLATE,
        dataset_name=dataset_name(output),
        filetype_suffix=FILE_FORMAT,
    )
    split_infos = []
    for split, info in summary["splits"].items():
        files = sorted(info["files"])
        lengths = [_length(output, name, shard_lengths.get(name)) for name in files]
        split_infos.append(
            tfds.core.SplitInfo(
                name=split,
                shard_lengths=lengths,
                num_bytes=info["bytes"],
                filename_template=template.replace(split=split),
            )
        )
    schema, class_names = options.get("schema", "tfds"), summary.get("class_names")
    supervised = ("image_raw", "label") if schema == "simple" and class_names is not None else None
    tfds.folder_dataset.write_metadata(
        data_dir=data_dir,
        features=features_spec(
            schema,
            class_names,
            options.get("channels"),
            tuple(ExtraColumn(c["name"], c["type"]) for c in summary.get("extra_columns") or []),
            bool(summary.get("multi_label")),
        ),
        split_infos=split_infos,
        filename_template=template,
        description=f"Images from {summary.get('input', 'unknown')} converted by beam-tfrecord "
        f"({schema} schema). labels.txt, rejects.jsonl and summary.json lie beside the shards.",
        supervised_keys=supervised,
        check_data=False,  # it would read the shards through tf.io.gfile
    )
