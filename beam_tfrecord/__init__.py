"""beam-tfrecord: folders of images to sharded TFRecord files, and back.

The conversion as a transform for a pipeline of your own:

    import apache_beam as beam
    import beam_tfrecord

    source = beam_tfrecord.SourceConfig(input="images", splits={"train": 0.8, "validation": 0.2})
    config = beam_tfrecord.ConvertConfig(output="out", schema="simple")
    staged = beam_tfrecord.prepare(source, config)  # list, plan, stage the plan
    with beam.Pipeline() as pipeline:
        _ = pipeline | beam_tfrecord.ImagesToTFRecords(staged, config)

    train = beam_tfrecord.load_dataset("out", "train", image_size=(224, 224))  # tf.data
    for record in beam_tfrecord.iter_examples("out", "train"):  # no TensorFlow
        ...

Names are imported on first use, so `import beam_tfrecord` loads neither Beam's pipeline
machinery nor TensorFlow; the submodules (`beam_tfrecord.schema`, ...) are reachable as
attributes too.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from beam_tfrecord.config import ConvertConfig, SourceConfig
    from beam_tfrecord.features import FeatureOptions
    from beam_tfrecord.images import ImageOptions
    from beam_tfrecord.outputs import IncompleteOutput, complete_shards
    from beam_tfrecord.pipeline import ImagesToTFRecords, prepare
    from beam_tfrecord.reader import load_dataset
    from beam_tfrecord.reader_examples import iter_examples
    from beam_tfrecord.reader_files import class_names
    from beam_tfrecord.reader_torch import TorchImages
    from beam_tfrecord.schema import parse_spec
    from beam_tfrecord.staging import StagedPlan

# public name -> the module that defines it
_EXPORTS = {
    "ConvertConfig": "config",
    "SourceConfig": "config",
    "FeatureOptions": "features",
    "ImageOptions": "images",
    "IncompleteOutput": "outputs",
    "complete_shards": "outputs",
    "ImagesToTFRecords": "pipeline",
    "prepare": "pipeline",
    "class_names": "reader_files",
    "load_dataset": "reader",
    "iter_examples": "reader_examples",
    "TorchImages": "reader_torch",
    "parse_spec": "schema",
    "StagedPlan": "staging",
}
SUBMODULES = (
    "columns",
    "compat",
    "config",
    "dedupe",
    "features",
    "formats",
    "gcs",
    "images",
    "inference",
    "labels",
    "listing",
    "messages",
    "metadata",
    "modes",
    "outputs",
    "pictures",
    "pipeline",
    "plan",
    "progress",
    "quiet",
    "reader",
    "reader_examples",
    "reader_files",
    "reader_torch",
    "records",
    "runners",
    "schema",
    "sharding",
    "shardwriter",
    "splits",
    "staging",
    "tfds_metadata",
    "tfrecord_files",
    "transforms",
    "verify",
)

__all__ = [
    "ConvertConfig",
    "FeatureOptions",
    "ImageOptions",
    "ImagesToTFRecords",
    "IncompleteOutput",
    "SourceConfig",
    "StagedPlan",
    "TorchImages",
    "class_names",
    "complete_shards",
    "iter_examples",
    "load_dataset",
    "parse_spec",
    "prepare",
]


def __getattr__(name: str) -> Any:
    if name in _EXPORTS:
        return getattr(importlib.import_module(f"beam_tfrecord.{_EXPORTS[name]}"), name)
    if name in SUBMODULES:
        return importlib.import_module(f"beam_tfrecord.{name}")
    raise AttributeError(f"module 'beam_tfrecord' has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted({*globals(), *__all__, *SUBMODULES})
