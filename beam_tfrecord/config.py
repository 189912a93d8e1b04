"""The typed settings of a run, in one import: what goes in (`SourceConfig`, the plan stage's) and
what comes out (`ConvertConfig`, the write stage's, holding the image stage's `ImageConfig` and
the feature stage's `FeatureConfig`). Each setting is declared once, on its field
(`config_base.setting`); `pipelines/options.py` turns the declarations into options.
"""

from __future__ import annotations

from beam_tfrecord.config_base import ConfigError
from beam_tfrecord.features.options import FeatureConfig
from beam_tfrecord.gcs import GcsConfig
from beam_tfrecord.images.options import ImageConfig
from beam_tfrecord.keys import SCHEMAS
from beam_tfrecord.plan.annotations.options import AnnotationConfig
from beam_tfrecord.plan.source_config import LABEL_SOURCES, SourceConfig
from beam_tfrecord.write.output_config import COMPRESSIONS, SINKS, ConvertConfig

__all__ = [
    "COMPRESSIONS",
    "LABEL_SOURCES",
    "SCHEMAS",
    "SINKS",
    "AnnotationConfig",
    "ConfigError",
    "ConvertConfig",
    "FeatureConfig",
    "GcsConfig",
    "ImageConfig",
    "SourceConfig",
]
