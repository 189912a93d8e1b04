"""Reading a conversion's output back the way a training job would, for assertions."""

from __future__ import annotations

import hashlib
import json
import os
from glob import glob

import tensorflow as tf

from beam_tfrecord import names
from beam_tfrecord.keys import key_of
from beam_tfrecord.write import schema as schema_lib


def shard_files(output, split: str) -> list[str]:
    """The split's shards: named like one exactly (a shard's `.idx` beside it is not a shard)."""
    found = glob(os.path.join(output, f"{split}-*-of-*.*record*"))
    return sorted(p for p in found if names.is_shard_name(os.path.basename(p)))


def serialized_records(output, split: str) -> list[bytes]:
    """Every record of a split, as bytes, read by the format's own reader: TensorFlow's for
    TFRecord, the array_record package's for ArrayRecord."""
    files = shard_files(output, split)
    if files and files[0].endswith(".array_record"):
        from array_record.python.array_record_module import ArrayRecordReader

        found = []
        for path in files:
            reader = ArrayRecordReader(path)
            found += reader.read_all()
            reader.close()
        return found
    compression = "GZIP" if files and files[0].endswith(".gz") else ""
    return [raw.numpy() for raw in tf.data.TFRecordDataset(files, compression_type=compression)]


def read_records(output, split: str, schema: str = "tfds", labeled: bool = True) -> list[dict]:
    """Every record of a split parsed with the schema's own spec; images decoded with TF."""
    spec = schema_lib.parse_spec(schema, labeled)
    records = []
    for raw in serialized_records(output, split):
        parsed = {k: v.numpy() for k, v in tf.io.parse_single_example(raw, spec).items()}
        pixels = tf.io.decode_image(parsed[key_of(schema, "image")], expand_animations=False)
        parsed["pixels_shape"] = tuple(pixels.shape)
        records.append(parsed)
    return records


def rejects(output) -> list[dict]:
    with open(os.path.join(output, "rejects.jsonl"), encoding="utf-8") as handle:
        return [json.loads(line) for line in handle]


def summary(output) -> dict:
    with open(os.path.join(output, "summary.json"), encoding="utf-8") as handle:
        return json.load(handle)


def all_inputs(root) -> set[str]:
    return {os.path.relpath(os.path.join(d, f), root) for d, _, files in os.walk(root) for f in files}


def digest_from_shards(output, split: str) -> str:
    """The split's content digest recomputed from the shard files alone, as summary.json's
    `digest_method` states it (sum of sha256 of every serialized record, mod 2**256), read with
    TensorFlow and hashlib only: an independent check of the pipeline's own tally."""
    total = 0
    for raw in serialized_records(output, split):
        total += int.from_bytes(hashlib.sha256(raw).digest(), "big")
    return f"{total % 2**256:064x}"
