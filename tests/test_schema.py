"""The schema module: records equal TensorFlow's Example (built from our example.proto; see
test_example_proto.py for byte equality), parse with the published spec, and building them does
not import TensorFlow."""

from __future__ import annotations

import dataclasses
import subprocess
import sys

import pytest
import tensorflow as tf

from beam_tfrecord.elements import RecordFields
from beam_tfrecord.keys import key_of
from beam_tfrecord.plan.columns import parse_extra_columns
from beam_tfrecord.write import schema

FIELDS = RecordFields(
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
    fields = FIELDS if labeled else RecordFields(**{**FIELDS.__dict__, "label": None, "label_text": None})
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
        "sha256": FIELDS.sha256.encode(),  # the source file's, so copies can be found afterwards
        "label": 1,
    }


@pytest.mark.parametrize("name", ["tfds", "simple"])
def test_extra_columns_and_multi_labels_round_trip_through_the_spec(name):
    """Typed manifest columns (empty lists included) and several class ids per record parse
    back as they were planned, under `image/meta/NAME` (tfds) or `NAME` (simple)."""
    columns = parse_extra_columns("caption,score:float,year:int,tags:str_list,boxes:int_list,w:float_list")
    values = ("a ü", 0.5, 2019, ("x", "y"), (), (1.5,))
    fields = dataclasses.replace(
        FIELDS,
        label=(0, 2),
        label_text=("cat", "outdoor"),
        extras=tuple((c.name, c.type, v) for c, v in zip(columns, values, strict=True)),
    )
    spec = schema.parse_spec(name, True, extra_columns=columns, multi_label=True)
    parsed = tf.io.parse_single_example(schema.serialize(name, fields), spec)
    prefix = "image/meta/" if name == "tfds" else ""
    got = {c.name: parsed[prefix + c.name].numpy() for c in columns}
    assert got["caption"].decode() == "a ü" and got["score"] == 0.5 and got["year"] == 2019
    assert [t.decode() for t in got["tags"]] == ["x", "y"]
    assert list(got["boxes"]) == [] and list(got["w"]) == [1.5]
    assert list(parsed[key_of(name, "label")].numpy()) == [0, 2]
    if name == "tfds":
        assert [t.decode() for t in parsed["image/class/text"].numpy()] == ["cat", "outdoor"]


def test_unknown_schema_is_an_error():
    with pytest.raises(ValueError, match="schema must be one of"):
        schema.serialize("coco", FIELDS)


def test_building_records_does_not_import_tensorflow():
    code = (
        "import sys; from beam_tfrecord import transforms, pipeline; from beam_tfrecord.write import schema; "
        "from beam_tfrecord.images import inputs; "
        f"schema.serialize('tfds', schema.{FIELDS!r}); "
        "print('tensorflow' in sys.modules)"
    )
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert result.stdout.strip() == "False"
