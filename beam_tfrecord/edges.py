"""The edges of the type check: the values whose types come from outside what mypy can follow,
each named here once, so that `Any` says where it comes from and nowhere else stands for a type
the code could state.

    Json          a JSON value: what `json.loads` gives and `json.dumps` takes
    JsonObject    a JSON object: a staged file's, a done file's, a section of summary.json
    ByKind        each kind of label's value, by kind name: where the kinds' own types meet
    ParsedRecord  a record read back as a dict of its values by name (`iter_examples`, `inspect`)
    ProtoMessage  a protobuf or apitools message (`tf.train.Example`, Dataflow's Job), no stubs
    FeatureValue  what a record key's protobuf Feature takes: str, bytes, numbers, lists of them
    Tensor        a TensorFlow value: TensorFlow ships no types
    TfdsConnector a TensorFlow Datasets feature connector (`tfds.features.Image`, ...)
    TorchValue    a PyTorch tensor, module or batch: torch is not followed (pyproject.toml)
    CloudObject   a Google Cloud client, bucket, blob or response, and the HTTP sessions below them

Everything else is typed as what it is: a kind of label by its own types (`labels.base.LabelKind`),
a fixed set of keys by a TypedDict, a DoFn's input by the element it takes.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, TypeAlias

__all__ = [
    "ByKind",
    "CloudObject",
    "FeatureValue",
    "Json",
    "JsonObject",
    "ParsedRecord",
    "ProtoMessage",
    "Tensor",
    "TfdsConnector",
    "TorchValue",
]

# A JSON value (a dict, list, str, int, float, bool or None, nested). Any rather than a recursive
# union: every reader takes the key or index its format defines, and a union would make each of
# those steps a cast that checks nothing more.
Json: TypeAlias = Any
JsonObject: TypeAlias = dict[str, Json]
# Each of a run's kinds of label's value, by kind name (a stored value, the tally's facts, a
# staged setting): the kinds are one registry of different types (`labels.base.AnyKind`), and each
# kind reads its own entry as its own type.
ByKind: TypeAlias = Mapping[str, Any]
# A record read back as a dict by field or key name: as `iter_examples` hands it out, or as
# `inspect`'s checks see it; each value as its key says (an int, a str, bytes, a NumPy array, a
# list of them), the keys the run's layout's.
ParsedRecord: TypeAlias = dict[str, Any]
# A protobuf message whose module has no stubs (`tf.train.Example`, `Feature`, the label map's
# descriptor), or Dataflow's apitools and proto-plus messages (a Job, a job's state): its fields
# read as Any.
ProtoMessage: TypeAlias = Any
# What goes into a record key's Feature (`write.schema`): a str, bytes, an int, a float, a tuple of
# them or a NumPy array, as the key's dtype and shape say; which one is known per key, not per type.
FeatureValue: TypeAlias = Any
# A TensorFlow value (a tensor, a RaggedTensor, a dataset, a parse spec's feature, an op error):
# TensorFlow's values are Any to mypy (`ignore_missing_imports`).
Tensor: TypeAlias = Any
# A TensorFlow Datasets feature connector (`tfds.features.Image`, `Sequence`, ...): no stubs either.
TfdsConnector: TypeAlias = Any
# A PyTorch value: torch is not followed, so the check says the same with or without it.
TorchValue: TypeAlias = Any
# google.cloud's storage clients, buckets, blobs and responses, and the requests sessions under
# them: untyped libraries (`ignore_missing_imports`).
CloudObject: TypeAlias = Any
