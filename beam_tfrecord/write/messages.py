"""The record messages (`Example`, `Feature`, ...) built from `example.proto`, through protobuf's
public API only.

`example.binpb` is the `.proto` compiled by protoc into a FileDescriptorSet (`make proto`; a test
checks it is current). Loading it into a private descriptor pool, rather than importing protoc's
generated Python, keeps workers free of protobuf's gencode internals and its runtime-version
check: any protobuf runtime that reads descriptors builds the same, wire-compatible messages
(tests/test_example_proto.py proves them byte-equal to `tf.train.Example`), without TensorFlow.
"""

from __future__ import annotations

from importlib import resources

from google.protobuf import descriptor_pb2, descriptor_pool, message_factory
from google.protobuf.message import Message

__all__ = ["DESCRIPTOR", "BytesList", "Example", "Feature", "Features", "FloatList", "Int64List"]

PACKAGE = "beam_tfrecord"  # the .proto package, not this Python package


def _load() -> descriptor_pool.DescriptorPool:
    data = resources.files(__package__).joinpath("example.binpb").read_bytes()
    pool = descriptor_pool.DescriptorPool()
    for file in descriptor_pb2.FileDescriptorSet.FromString(data).file:
        pool.Add(file)
    return pool


_POOL = _load()
DESCRIPTOR = _POOL.FindFileByName("beam_tfrecord/write/example.proto")


def _message(name: str) -> type[Message]:
    # Built at run time from descriptors: a type checker knows no fields of these classes, so a
    # message is typed as protobuf's Message, whose fields are untyped (edges.ProtoMessage).
    return message_factory.GetMessageClass(_POOL.FindMessageTypeByName(f"{PACKAGE}.{name}"))


Example = _message("Example")
Features = _message("Features")
Feature = _message("Feature")
BytesList = _message("BytesList")
FloatList = _message("FloatList")
Int64List = _message("Int64List")
