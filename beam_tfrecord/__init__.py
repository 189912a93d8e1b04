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
    records = beam_tfrecord.RecordArray("out", "train")  # len() and [i]: random access

Names are imported on first use, so `import beam_tfrecord` loads neither Beam's pipeline
machinery nor TensorFlow. The stage packages (`beam_tfrecord.read`, ...) are reachable as
attributes too; the modules inside them are not public and must be imported by name.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from beam_tfrecord.config import ConvertConfig
    from beam_tfrecord.features.options import FeatureConfig
    from beam_tfrecord.images.options import ImageConfig
    from beam_tfrecord.output.claim import claim_output
    from beam_tfrecord.output.mode import OutputKind, OutputMode
    from beam_tfrecord.output.outputs import IncompleteOutput, complete_shards
    from beam_tfrecord.pipeline import ImagesToTFRecords, prepare
    from beam_tfrecord.plan.source_config import SourceConfig
    from beam_tfrecord.plan.staging import StagedPlan
    from beam_tfrecord.read.examples import decode_image, decode_pixels, iter_examples
    from beam_tfrecord.read.files import class_names
    from beam_tfrecord.read.pytorch import TorchImageArray, TorchImages, detection_collate
    from beam_tfrecord.read.random_access import RecordArray, record_parser
    from beam_tfrecord.read.tf_data import load_dataset
    from beam_tfrecord.runners import parallelism
    from beam_tfrecord.summary import Summary, read_summary
    from beam_tfrecord.write.schema import parse_spec

    # The configs' names before every config ended in Config (`_RENAMED`).
    ImageOptions = ImageConfig
    FeatureOptions = FeatureConfig

# public name -> the module that defines it
_EXPORTS = {
    "ConvertConfig": "config",
    "SourceConfig": "plan.source_config",
    "FeatureConfig": "features.options",
    "ImageConfig": "images.options",
    "IncompleteOutput": "output.outputs",
    "complete_shards": "output.outputs",
    "OutputKind": "output.mode",
    "OutputMode": "output.mode",
    "ImagesToTFRecords": "pipeline",
    "prepare": "pipeline",
    "class_names": "read.files",
    "load_dataset": "read.tf_data",
    "iter_examples": "read.examples",
    "decode_image": "read.examples",
    "decode_pixels": "read.examples",
    "TorchImages": "read.pytorch",
    "TorchImageArray": "read.pytorch",
    "detection_collate": "read.pytorch",
    "RecordArray": "read.random_access",
    "record_parser": "read.random_access",
    "parse_spec": "write.schema",
    "StagedPlan": "plan.staging",
    "claim_output": "output.claim",
    "parallelism": "runners",
    "Summary": "summary",
    "read_summary": "summary",
}
# The stages in flow order (a stage imports only those before it), then the cross-cutting modules.
SUBMODULES = (
    "plan",
    "images",
    "features",
    "write",
    "output",
    "read",
    "compat",
    "config",
    "config_base",
    "edges",
    "elements",
    "gcs",
    "keys",
    "labels",
    "names",
    "pipeline",
    "progress",
    "reasons",
    "runners",
    "storage",
    "summary",
    "tasks",
    "transforms",
    "write_failures",
)

__all__ = [
    "ConvertConfig",
    "FeatureConfig",
    "ImageConfig",
    "ImagesToTFRecords",
    "IncompleteOutput",
    "OutputKind",
    "OutputMode",
    "RecordArray",
    "SourceConfig",
    "StagedPlan",
    "Summary",
    "TorchImageArray",
    "TorchImages",
    "claim_output",
    "class_names",
    "complete_shards",
    "decode_image",
    "decode_pixels",
    "detection_collate",
    "iter_examples",
    "load_dataset",
    "parallelism",
    "parse_spec",
    "prepare",
    "read_summary",
    "record_parser",
]


# Names before the configs were named alike (every typed config ends in Config): kept so that code
# written against them runs, left out of __all__ and the docs.
_RENAMED = {"ImageOptions": "ImageConfig", "FeatureOptions": "FeatureConfig"}


def __getattr__(name: str) -> object:
    """A public name or a submodule, imported on first use (each typed where it is defined: the
    imports above give a type checker the names, `SUBMODULES` are modules of the package)."""
    name = _RENAMED.get(name, name)
    if name in _EXPORTS:
        return getattr(importlib.import_module(f"beam_tfrecord.{_EXPORTS[name]}"), name)
    if name in SUBMODULES:
        return importlib.import_module(f"beam_tfrecord.{name}")
    raise AttributeError(f"module 'beam_tfrecord' has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted({*globals(), *__all__, *SUBMODULES})
