"""The feature model's settings and its one error: what a run asks of the model, whatever the
framework that runs it."""

from __future__ import annotations

from dataclasses import dataclass

from beam_tfrecord.settings import ConfigError, check_choice

__all__ = ["DTYPES", "POOLINGS", "PRECISIONS", "FeatureOptions", "ModelUnavailable"]

POOLINGS = ("none", "avg", "max")
DTYPES = ("float32", "float16")
# float32, or Keras's mixed_float16 policy (float16 compute, float32 variables): what tensor
# cores run fastest; the output is stored as float32 (or --feature_dtype) either way.
PRECISIONS = ("float32", "mixed")


class ModelUnavailable(ValueError):
    """The model or its weights cannot be had here; raised before the pipeline starts."""


@dataclass(frozen=True)
class FeatureOptions:
    """Which model computes the features and how they are stored."""

    feature_model: str | None = None  # a BACKBONES name
    model_weights: str = "imagenet"  # imagenet | none | a weights file (local or gs://)
    model_path: str | None = None  # a .keras file or a SavedModel folder (local or gs://)
    pooling: str = "none"  # none | avg | max over the spatial axes
    dtype: str = "float32"  # float32 (FloatList) | float16 (bytes)
    features_only: bool = False  # drop the encoded image from the record
    batch_size: int = 32
    precision: str = "float32"  # float32 | mixed (Keras's mixed_float16 policy; backbones only)
    # Models per machine, shared by all its worker processes (RunInference's model_copies);
    # 0: one model in every worker process; None: 1 on a machine with a GPU, else 0.
    model_copies: int | None = None

    def __post_init__(self) -> None:
        """Settings that cannot work fail here, before any file is looked at."""
        if bool(self.feature_model) == bool(self.model_path):
            raise ConfigError("feature_model", "and model_path exclude each other: give exactly one")
        if self.model_path and self.model_weights != "imagenet":
            raise ConfigError("model_weights", "is for feature_model; a model_path model holds its weights")
        check_choice("pooling", self.pooling, POOLINGS)
        check_choice("dtype", self.dtype, DTYPES)
        check_choice("precision", self.precision, PRECISIONS)
        if self.precision != "float32" and self.model_path:
            raise ConfigError(
                "precision",
                "is for feature_model; a model_path model runs in the precision it was saved with",
            )
        if self.batch_size < 1:
            raise ConfigError("batch_size", "must be at least 1")
        if self.model_copies is not None and self.model_copies < 0:
            raise ConfigError("model_copies", "must be 0 (one model per worker process) or more")
