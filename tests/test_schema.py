"""The schema module: records equal TensorFlow's Example (built from our example.proto; see
test_example_proto.py for byte equality), parse with the published spec, and building them does
not import TensorFlow."""

from __future__ import annotations

import subprocess
import sys

import pytest
import tensorflow as tf

from beam_tfrecord import schema

FIELDS = schema.RecordFields(
    encoded=b"\xff\xd8 bytes",
    format="jpeg",
    height=3,
    width=4,
    channels=3,
    relpath="cat/ü 1.jpg",
    sha256="ab" * 32,
    label=1,
    label_text="cat",
)


def tf_feature(value) -> tf.train.Feature:
    if isinstance(value, int):
        return tf.train.Feature(int64_list=tf.train.Int64List(value=[value]))
    data = value.encode() if isinstance(value, str) else value
    return tf.train.Feature(bytes_list=tf.train.BytesList(value=[data]))


@pytest.mark.parametrize("labeled", [True, False])
def test_tfds_record_equals_one_built_with_tensorflow(labeled):
    fields = (
        FIELDS if labeled else schema.RecordFields(**{**FIELDS.__dict__, "label": None, "label_text": None})
    )
    expected = {
        "image/encoded": FIELDS.encoded,
        "image/format": "jpeg",
        "image/height": 3,
        "image/width": 4,
        "image/channels": 3,
        "image/filename": FIELDS.relpath,
        "image/key/sha256": FIELDS.sha256,
    }
    if labeled:
        expected |= {"image/class/label": 1, "image/class/text": "cat"}
    built = tf.train.Example(
        features=tf.train.Features(feature={k: tf_feature(v) for k, v in expected.items()})
    )
    assert tf.train.Example.FromString(schema.serialize("tfds", fields)) == built
    parsed = tf.io.parse_single_example(schema.serialize("tfds", fields), schema.parse_spec("tfds", labeled))
    assert set(parsed) == set(expected)
    assert parsed["image/filename"].numpy().decode() == "cat/ü 1.jpg"


def test_simple_schema_keys_and_spec():
    parsed = tf.io.parse_single_example(schema.serialize("simple", FIELDS), schema.parse_spec("simple"))
    assert {k: v.numpy() for k, v in parsed.items()} == {
        "image_raw": FIELDS.encoded,
        "id": FIELDS.relpath.encode(),
        "height": 3,
        "width": 4,
        "depth": 3,
        "label": 1,
    }


def test_unknown_schema_is_an_error():
    with pytest.raises(ValueError, match="schema must be one of"):
        schema.serialize("coco", FIELDS)


def test_building_records_does_not_import_tensorflow():
    code = (
        "import sys; from beam_tfrecord import schema, records, transforms, pipeline; "
        f"schema.serialize('tfds', schema.{FIELDS!r}); "
        "print('tensorflow' in sys.modules)"
    )
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert result.stdout.strip() == "False"
