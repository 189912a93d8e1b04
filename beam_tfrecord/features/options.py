"""The feature model's settings and its one error: what a run asks of the model, whatever the
framework that runs it."""

from __future__ import annotations

from dataclasses import dataclass

from beam_tfrecord.config_base import ConfigError, check_choice

__all__ = [
    "DTYPES",
    "FRAMEWORK_PREFIXES",
    "IMAGENET_MEAN",
    "IMAGENET_STD",
    "KERAS_NAMES",
    "MODEL_FILE_KINDS",
    "NORMALIZATIONS",
    "POOLINGS",
    "PRECISIONS",
    "FeatureOptions",
    "ModelUnavailable",
    "file_kind",
    "framework_of",
    "normalization_constants",
]

POOLINGS = ("none", "avg", "max")
DTYPES = ("float32", "float16")
# float32, or mixed: Keras's mixed_float16 policy (float16 compute, float32 variables), or
# torch.autocast for a torchvision/timm model (float16 on CUDA, bfloat16 on a CPU): what tensor
# cores run fastest; the output is stored as float32 (or --feature_dtype) either way.
PRECISIONS = ("float32", "mixed")
# What a --model_path model is fed (a named backbone applies its own): RGB float 0..255 (`none`,
# as Keras applications and this project's Keras files take it), 0..1 (`unit`), or 0..1 less
# ImageNet's mean over its standard deviation per channel (`imagenet`, what torchvision's and
# most timm weights expect).
NORMALIZATIONS = ("none", "unit", "imagenet")
IMAGENET_MEAN = (0.485, 0.456, 0.406)
IMAGENET_STD = (0.229, 0.224, 0.225)
# The Keras applications (beam_tfrecord/features/keras.py BACKBONES, kept here so the settings
# need no framework); `torchvision:NAME` and `timm:NAME` name PyTorch architectures.
KERAS_NAMES = ("efficientnet_b0", "resnet50", "mobilenet_v2")
FRAMEWORK_PREFIXES = ("torchvision", "timm")
# --model_path kinds, told by the name: a Keras file, an ONNX file, a TorchScript file, a
# torch.export file; anything else is a TensorFlow SavedModel folder.
MODEL_FILE_KINDS = {
    ".keras": "keras",
    ".h5": "keras",
    ".onnx": "onnx",
    ".pt": "torchscript",
    ".pth": "torchscript",
    ".pt2": "torch_export",
}


class ModelUnavailable(ValueError):
    """The model or its weights cannot be had here; raised before the pipeline starts."""


def file_kind(path: str) -> str:
    """What a --model_path holds, by its name: a MODEL_FILE_KINDS value or `savedmodel`."""
    lowered = path.rstrip("/").lower()
    for suffix, kind in MODEL_FILE_KINDS.items():
        if lowered.endswith(suffix):
            return kind
    return "savedmodel"


def framework_of(feature_model: str | None, model_path: str | None) -> str:
    """keras, onnx or torch: which framework runs the model (and so which one is imported)."""
    if model_path:
        kind = file_kind(model_path)
        if kind == "onnx":
            return "onnx"
        return "torch" if kind in ("torchscript", "torch_export") else "keras"
    prefix, _, _ = (feature_model or "").partition(":")
    return "torch" if prefix in FRAMEWORK_PREFIXES else "keras"


def normalization_constants(name: str) -> tuple[float, tuple[float, ...], tuple[float, ...]]:
    """(scale, mean, std) such that the model gets (x * scale - mean) / std of RGB 0..255 x."""
    if name == "none":
        return 1.0, (0.0, 0.0, 0.0), (1.0, 1.0, 1.0)
    if name == "unit":
        return 1 / 255, (0.0, 0.0, 0.0), (1.0, 1.0, 1.0)
    if name == "imagenet":
        return 1 / 255, IMAGENET_MEAN, IMAGENET_STD
    raise ValueError(f"normalization must be one of {NORMALIZATIONS}, not {name!r}")


@dataclass(frozen=True)
class FeatureOptions:
    """Which model computes the features and how they are stored."""

    # A Keras application (KERAS_NAMES), or torchvision:NAME / timm:NAME
    feature_model: str | None = None
    model_weights: str = "imagenet"  # imagenet | none | a weights file (local or gs://)
    # A .keras/.h5 file, a SavedModel folder, an .onnx file, a TorchScript .pt/.pth or a
    # torch.export .pt2 file (local or gs://)
    model_path: str | None = None
    pooling: str = "none"  # none | avg | max over the spatial axes
    dtype: str = "float32"  # float32 (FloatList) | float16 (bytes)
    features_only: bool = False  # drop the encoded image from the record
    batch_size: int = 32
    precision: str = "float32"  # float32 | mixed (feature_model only)
    # Models per machine, shared by all its worker processes (RunInference's model_copies);
    # 0: one model in every worker process; None: 1 on a machine with a GPU, else 0.
    model_copies: int | None = None
    # What a model_path model is fed (NORMALIZATIONS); named backbones apply their own.
    input_normalization: str = "none"
    # (height, width) fed to a model_path model whose file does not fix it (TorchScript, or
    # an ONNX model with free spatial axes); must agree with a file that does.
    input_size: tuple[int, int] | None = None

    @property
    def framework(self) -> str:
        return framework_of(self.feature_model, self.model_path)

    def __post_init__(self) -> None:
        """Settings that cannot work fail here, before any file is looked at."""
        if bool(self.feature_model) == bool(self.model_path):
            raise ConfigError("feature_model", "and model_path exclude each other: give exactly one")
        if self.feature_model:
            prefix, colon, name = self.feature_model.partition(":")
            if colon and (prefix not in FRAMEWORK_PREFIXES or not name):
                raise ConfigError(
                    "feature_model", f"{self.feature_model}: the prefix is torchvision: or timm:, then a name"
                )
            if not colon and self.feature_model not in KERAS_NAMES:
                raise ConfigError(
                    "feature_model",
                    f"{self.feature_model} is not one of {', '.join(KERAS_NAMES)} (Keras), "
                    "torchvision:NAME or timm:NAME (PyTorch)",
                )
        if self.model_path and self.model_weights != "imagenet":
            raise ConfigError("model_weights", "is for feature_model; a model_path model holds its weights")
        check_choice("pooling", self.pooling, POOLINGS)
        check_choice("dtype", self.dtype, DTYPES)
        check_choice("precision", self.precision, PRECISIONS)
        check_choice("input_normalization", self.input_normalization, NORMALIZATIONS)
        if self.precision != "float32" and self.model_path:
            raise ConfigError(
                "precision",
                "is for feature_model; a model_path model runs in the precision it was saved with",
            )
        if self.feature_model and (self.input_normalization != "none" or self.input_size is not None):
            field = "input_normalization" if self.input_normalization != "none" else "input_size"
            raise ConfigError(
                field, "is for model_path; a feature_model applies its own preprocessing and size"
            )
        if self.input_size is not None and min(self.input_size) < 1:
            raise ConfigError("input_size", "must be positive")
        if self.batch_size < 1:
            raise ConfigError("batch_size", "must be at least 1")
        if self.model_copies is not None and self.model_copies < 0:
            raise ConfigError("model_copies", "must be 0 (one model per worker process) or more")
