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

from apache_beam.io.filesystems import FileSystems

from beam_tfrecord import names, storage
from beam_tfrecord.edges import TfdsConnector
from beam_tfrecord.keys import RecordKey, RecordLayout, key_of, record_keys
from beam_tfrecord.summary import MixedPixels, Summary, TfdsMetadataSummary
from beam_tfrecord.write import array_record_files
from beam_tfrecord.write.tfrecord_files import count_records

__all__ = ["FILENAME_TEMPLATE", "dataset_name", "features_spec", "write_tfds_metadata"]

FILENAME_TEMPLATE = "{SPLIT}-{SHARD_X_OF_Y}.{FILEFORMAT}"
# A detection run's class 0, as the Object Detection API counts: object ids start at 1.
BACKGROUND = "background"


def features_spec(
    layout: RecordLayout, class_names: Sequence[str] | None, channels: int | None
) -> dict[str, TfdsConnector | dict[str, object]]:
    """The TFDS FeaturesDict (as nested dicts of connectors, one level per `/` of a key) of every
    key of `layout` that TFDS can describe (see keys.TfdsFeature).

    Images decode to `channels` (3 unless the run forced 1), as TFDS's Image needs a fixed count;
    a run of 16-bit pictures to their own band count, as uint16 (and a run's 16-bit class masks
    as uint16 of one channel); a run of array pictures
    (`keys.PixelLayout`) is TFDS's `Tensor(encoding="zlib")` of their type, read from the
    `image/array/value` and `image/array/shape` keys it names; the Object Detection API's
    additional channels are a `Sequence` of one-band Images beside the RGB one.
    A list key (a multi-label's ids and names, a list column) is a `Sequence` of its kind.
    """
    import numpy as np
    import tensorflow_datasets as tfds

    f = tfds.features
    numbers = {"int64": np.int64, "float32": np.float32}

    pixels = layout.depth

    def feature(key: RecordKey) -> TfdsConnector:
        if key.tfds == "image" and pixels is not None and pixels.additional:  # bands 1-3, 8-bit
            return f.Image(shape=(None, None, 3), encoding_format="png")
        if key.tfds == "image" and pixels is not None:  # a 16-bit PNG
            return f.Image(shape=(None, None, pixels.bands), dtype=np.uint16, encoding_format="png")
        if key.tfds == "image":
            return f.Image(shape=(None, None, channels or 3))
        if key.tfds == "array":
            assert pixels is not None
            shape = (None,) * (3 if pixels.stacked else 2) + (pixels.bands,)
            return f.Tensor(shape=shape, dtype=np.dtype(pixels.dtype), encoding="zlib")
        if key.tfds == "text":
            one = f.Text()
        elif key.tfds == "class_label":
            one = f.ClassLabel(names=list(class_names or []))
        elif key.tfds == "object_class_label":  # ids from 1: 0 is the background's
            one = f.ClassLabel(names=[BACKGROUND, *(class_names or [])])
        elif key.tfds in ("mask", "class_mask", "band"):  # a 0/1 mask, class ids, a band's samples
            one = f.Image(shape=(None, None, 1), encoding_format="png")
        elif key.tfds == "class_mask_uint16":  # class ids or an ignore value past 255: 16-bit PNGs
            one = f.Image(shape=(None, None, 1), dtype=np.uint16, encoding_format="png")
        else:
            one = f.Scalar(dtype=numbers[key.dtype])
        return f.Sequence(one) if key.ragged else one

    spec: dict[str, TfdsConnector | dict[str, object]] = {}
    for key in record_keys(layout):
        if key.tfds == "none":
            continue
        # An array's TFDS Tensor is named by its folder: it reads the `value` and `shape` under it.
        *folders, leaf = key.key.split("/")[: -1 if key.tfds == "array" else None]
        level = spec
        for folder in folders:
            level = level.setdefault(folder, {})
        level[leaf] = feature(key)
    return spec


def _length(output: str, name: str, known: int | None) -> int:
    if known is not None:
        return known
    path = FileSystems.join(output, name)
    if names.is_array_record(name):
        return array_record_files.count_records(path)
    return count_records(path)


def dataset_name(output: str) -> str:
    """A TFDS-valid snake_case name from the output folder's name (TFDS shows it, never parses it)."""
    base = posixpath.basename(output.rstrip("/")) or "images"
    name = re.sub(r"[^a-z0-9_]+", "_", base.lower()).strip("_")
    return name if name and name[0].isalpha() else f"images_{name}".rstrip("_")


def write_tfds_metadata(
    output: str, summary: Summary, shard_lengths: Mapping[str, int | None] | None = None
) -> TfdsMetadataSummary:
    """Write dataset_info.json and features.json for a finished run; returns what to record in
    summary.json (whether they were written, and why not).

    `shard_lengths` (shard file name -> records) are the counts the writer kept; a shard it has
    no count for (Beam's WriteToTFRecord does not report them) is counted from its record
    headers."""
    if summary.compression != "none":
        return TfdsMetadataSummary(False, "TFDS reads uncompressed TFRecord files only")
    try:
        pixels = summary.pixel_layout()
    except MixedPixels as mixed:
        return TfdsMetadataSummary(False, f"TFDS reads one kind of picture: {mixed}")
    if not summary.record_layout().has_image:
        return TfdsMetadataSummary(False, "features_only records hold no image for TFDS's Image feature")
    if summary.records == 0:
        return TfdsMetadataSummary(False, "no record was written")
    if pixels is not None and pixels.array and summary.schema == "simple":
        return TfdsMetadataSummary(False, "the simple schema's flat keys cannot hold TFDS's array Tensor")
    try:  # TFDS imports TensorFlow, which a machine that runs only PyTorch or ONNX models may lack
        import tensorflow_datasets  # noqa: F401
    except ImportError as error:
        return TfdsMetadataSummary(False, f"tensorflow-datasets does not import here: {error}")

    # TFDS writes through tf.io.gfile, which does not go through Beam's filesystems (nor honour
    # a GCS emulator): remote metadata is written to a local folder and copied with Beam.
    remote = storage.is_remote(output)
    staging = tempfile.mkdtemp(prefix="beam-tfrecord-tfds-") if remote else output
    try:
        if remote:  # TFDS lists its folder for the shard names: empty stand-ins, never copied
            for info in summary.splits.values():
                for name in info.files:
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
    # No read-back here: loading through TFDS imports TensorFlow, which costs more than a small
    # local run needs (benchmarks/NOTES.md#memory). `pipelines.inspect` and the tests load it with TFDS.
    return TfdsMetadataSummary(True, filename_template=FILENAME_TEMPLATE)


def _write(data_dir: str, output: str, summary: Summary, shard_lengths: Mapping[str, int | None]) -> None:
    """TFDS's own writer, into `data_dir`; the shards are counted where they are, in `output`."""
    import tensorflow_datasets as tfds
    from tensorflow_datasets.core import naming

    template = naming.ShardedFileTemplate(
        data_dir=data_dir,
        template=FILENAME_TEMPLATE,
        dataset_name=dataset_name(output),
        filetype_suffix=summary.shard_format.file_format,
    )
    split_infos = []
    for split, info in summary.splits.items():
        files = sorted(info.files)
        lengths = [_length(output, name, shard_lengths.get(name)) for name in files]
        split_infos.append(
            tfds.core.SplitInfo(
                name=split,
                shard_lengths=lengths,
                num_bytes=info.bytes,
                filename_template=template.replace(split=split),
            )
        )
    layout = summary.record_layout()
    schema, class_names = layout.schema, summary.class_names
    # Flat keys (the simple schema) can name TFDS's supervised pair; nested ones cannot.
    supervised = (
        (key_of(layout, "image"), key_of(layout, "label")) if schema == "simple" and layout.labeled else None
    )
    tfds.folder_dataset.write_metadata(
        data_dir=data_dir,
        features=features_spec(layout, class_names, summary.forced_channels),
        split_infos=split_infos,
        filename_template=template,
        description=f"Images from {_source(summary)} converted by beam-tfrecord "
        f"({schema} schema). labels.txt, rejects.jsonl and summary.json lie beside the shards.",
        supervised_keys=supervised,
        check_data=False,  # it would read the shards through tf.io.gfile
    )


def _source(summary: Summary) -> str:
    """Where the images came from, for TFDS's description."""
    if summary.run is not None and summary.run.input:
        return summary.run.input
    return summary.options.value("input", "unknown")
