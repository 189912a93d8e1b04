"""The project's own Example messages (example.proto): records byte-equal to those built with
`tf.train.Example`, descriptors that match TensorFlow's field for field, and a checked-in
example.binpb that is exactly what the pinned grpcio-tools compiles from example.proto."""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
import zipfile
from importlib import metadata
from pathlib import Path

import numpy as np
import pytest
import tensorflow as tf
from google.protobuf import descriptor_pb2
from google.protobuf.descriptor import FileDescriptor

from beam_tfrecord.elements import RecordFields
from beam_tfrecord.write import messages, schema

REPO = Path(__file__).resolve().parents[1]
PROTO = "beam_tfrecord/write/example.proto"

BASE = RecordFields(
    encoded=b"\xff\xd8 image bytes",
    format="jpeg",
    height=3,
    width=4,
    channels=3,
    relpath="cat/ü 1.jpg",
    sha256="ab" * 32,
)
FEATURES = np.random.default_rng(7).standard_normal((2, 3, 5)).astype(np.float32)

# What each schema calls each field, written out here rather than taken from schema.py.
KEYS = {
    "tfds": {
        "encoded": "image/encoded",
        "format": "image/format",
        "height": "image/height",
        "width": "image/width",
        "channels": "image/channels",
        "relpath": "image/filename",
        "sha256": "image/key/sha256",
        "label": "image/class/label",
        "label_text": "image/class/text",
        "float32": "image/features",
        "float16": "image/features/float16",
        "shape": "image/features/shape",
    },
    "simple": {
        "encoded": "image_raw",
        "relpath": "id",
        "height": "height",
        "width": "width",
        "channels": "depth",
        "sha256": "sha256",
        "label": "label",
        "float32": "features",
        "float16": "features_float16",
        "shape": "features_shape",
    },
}
VARIANTS = ("image only", "float32 features", "float16 features", "features only")


def tf_feature(value) -> tf.train.Feature:
    if isinstance(value, int):
        return tf.train.Feature(int64_list=tf.train.Int64List(value=[value]))
    if isinstance(value, tuple):
        return tf.train.Feature(int64_list=tf.train.Int64List(value=list(value)))
    if isinstance(value, np.ndarray):
        return tf.train.Feature(float_list=tf.train.FloatList(value=value.ravel().tolist()))
    data = value.encode() if isinstance(value, str) else value
    return tf.train.Feature(bytes_list=tf.train.BytesList(value=[data]))


def fields_and_tensorflow_example(
    schema_name: str, labeled: bool, variant: str
) -> tuple[RecordFields, tf.train.Example]:
    """The RecordFields of one case and the same record built with TensorFlow's own classes."""
    keys = KEYS[schema_name]
    fields = BASE
    values: dict[str, object] = {
        "encoded": BASE.encoded,
        "format": BASE.format,
        "height": BASE.height,
        "width": BASE.width,
        "channels": BASE.channels,
        "relpath": BASE.relpath,
        "sha256": BASE.sha256,
    }
    if labeled:
        fields = RecordFields(**{**fields.__dict__, "label": 1, "label_text": "cat"})
        values |= {"label": 1, "label_text": "cat"}
    if variant != "image only":
        dtype = "float16" if variant == "float16 features" else "float32"
        fields = RecordFields(
            **{
                **fields.__dict__,
                "features": FEATURES,
                "feature_dtype": dtype,
                "include_image": variant != "features only",
            }
        )
        if dtype == "float16":
            values["float16"] = FEATURES.astype("<f2").tobytes()
        else:
            values["float32"] = FEATURES
        values["shape"] = FEATURES.shape
    if variant == "features only":
        del values["encoded"]
    feature = {keys[name]: tf_feature(value) for name, value in values.items() if name in keys}
    return fields, tf.train.Example(features=tf.train.Features(feature=feature))


@pytest.mark.parametrize("variant", VARIANTS)
@pytest.mark.parametrize("labeled", [True, False], ids=["labeled", "unlabeled"])
@pytest.mark.parametrize("schema_name", schema.SCHEMAS)
def test_record_is_byte_equal_to_tensorflows(schema_name, labeled, variant):
    fields, expected = fields_and_tensorflow_example(schema_name, labeled, variant)
    record = schema.serialize(schema_name, fields)
    assert record == expected.SerializeToString(deterministic=True)
    assert tf.train.Example.FromString(record) == expected


def _wire_shapes(file: FileDescriptor, package: str) -> dict[str, list[tuple]]:
    """Each message's fields (in `file` and the files it imports) as the wire sees them: number,
    label, type, message type, oneof, packing, map entry."""
    shapes = {}

    def visit(message: descriptor_pb2.DescriptorProto, prefix: str) -> None:
        shapes[prefix + message.name] = [
            (
                field.name,
                field.number,
                field.label,
                field.type,
                field.type_name.removeprefix(f".{package}."),
                field.HasField("oneof_index") and message.oneof_decl[field.oneof_index].name,
                field.options.packed,
                message.options.map_entry,
            )
            for field in message.field
        ]
        for nested in message.nested_type:
            visit(nested, f"{prefix}{message.name}.")

    for each in [file, *file.dependencies]:
        proto = descriptor_pb2.FileDescriptorProto()
        each.CopyToProto(proto)
        for message in proto.message_type:
            visit(message, "")
    return shapes


def test_descriptors_match_tensorflows_field_for_field():
    ours = _wire_shapes(messages.DESCRIPTOR, "beam_tfrecord")
    assert ours == _wire_shapes(tf.train.Example.DESCRIPTOR.file, "tensorflow")
    assert {"Example", "SequenceExample", "Features.FeatureEntry", "FeatureLists.FeatureListEntry"} <= set(
        ours
    )
    # Our own package, in a private descriptor pool: it never meets TensorFlow's in one process.
    assert messages.Example.DESCRIPTOR.full_name == "beam_tfrecord.Example"


def test_checked_in_example_binpb_is_what_the_pinned_grpcio_tools_compiles(tmp_path):
    pins = (REPO / "requirements-dev.txt").read_text()
    (pinned,) = re.findall(r"^grpcio-tools==(\S+)", pins, flags=re.MULTILINE)
    installed = metadata.version("grpcio-tools")
    assert installed == pinned, f"grpcio-tools {installed} is installed, requirements-dev.txt pins {pinned}"
    subprocess.run(
        [
            sys.executable,
            "-m",
            "grpc_tools.protoc",
            f"--proto_path={REPO}",
            f"--descriptor_set_out={tmp_path / 'example.binpb'}",
            PROTO,
        ],
        check=True,
        cwd=REPO,
    )
    compiled = (tmp_path / "example.binpb").read_bytes()
    checked_in = (REPO / "beam_tfrecord" / "write" / "example.binpb").read_bytes()
    assert compiled == checked_in, "beam_tfrecord/write/example.binpb is stale: run `make proto`"


def test_the_installed_package_carries_the_compiled_schema(tmp_path):
    """Workers get the code from setup.py (Dataflow's --setup_file); without the data file the
    messages cannot be built there. Built from a copy: setuptools writes build/ beside setup.py."""
    source = tmp_path / "source"
    source.mkdir()
    for name in (
        "setup.py",
        "requirements.txt",
        "requirements-torch.txt",
        "requirements-grain.txt",
        "requirements-dicom.txt",
    ):  # what setup.py reads
        shutil.copy(REPO / name, source / name)
    for package in ("beam_tfrecord", "pipelines"):
        shutil.copytree(REPO / package, source / package, ignore=shutil.ignore_patterns("__pycache__"))
    subprocess.run(
        [
            sys.executable,
            "-m",
            "pip",
            "wheel",
            "--no-deps",
            "--no-build-isolation",
            "-q",
            "-w",
            str(tmp_path),
            str(source),
        ],
        check=True,
    )
    (wheel,) = tmp_path.glob("beam_tfrecord-*.whl")
    assert "beam_tfrecord/write/example.binpb" in zipfile.ZipFile(wheel).namelist()
