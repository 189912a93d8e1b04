"""The feature model's settings and its one error: what a run asks of the model, whatever the
framework that runs it."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from beam_tfrecord.config_base import GCS_OBJECT, Config, ConfigError, check_choice, documented, setting
from beam_tfrecord.images.options import format_size, parse_size

__all__ = [
    "DTYPES",
    "FRAMEWORK_PREFIXES",
    "IMAGENET_MEAN",
    "IMAGENET_STD",
    "KERAS_NAMES",
    "MODEL_FILE_TYPES",
    "NORMALIZATIONS",
    "POOLINGS",
    "PRECISIONS",
    "FeatureConfig",
    "ModelFileType",
    "ModelUnavailable",
    "file_type",
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
# What a --model_path holds, told by its name: a Keras file, an ONNX file, a TorchScript file, a
# torch.export file; anything else is a TensorFlow SavedModel folder.
ModelFileType = Literal["keras", "onnx", "torchscript", "torch_export", "savedmodel"]
MODEL_FILE_TYPES: dict[str, ModelFileType] = {
    ".keras": "keras",
    ".h5": "keras",
    ".onnx": "onnx",
    ".pt": "torchscript",
    ".pth": "torchscript",
    ".pt2": "torch_export",
}


class ModelUnavailable(ValueError):
    """The model or its weights cannot be had here; raised before the pipeline starts."""


def file_type(path: str) -> ModelFileType:
    """What a --model_path holds, by its name: a MODEL_FILE_TYPES value or `savedmodel`."""
    lowered = path.rstrip("/").lower()
    for suffix, found in MODEL_FILE_TYPES.items():
        if lowered.endswith(suffix):
            return found
    return "savedmodel"


def framework_of(feature_model: str | None, model_path: str | None) -> str:
    """keras, onnx or torch: which framework runs the model (and so which one is imported)."""
    if model_path:
        found = file_type(model_path)
        if found == "onnx":
            return "onnx"
        return "torch" if found in ("torchscript", "torch_export") else "keras"
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


def _height_width(text: str) -> tuple[int, int]:
    """WIDTHxHEIGHT, as the option is written (and --resize) -> (height, width), the fields' order."""
    width, height = parse_size(text)
    return height, width


@documented
@dataclass(frozen=True)
class FeatureConfig(Config):
    """Which model computes the features and how they are stored (summary.json's `features`
    section records them: `summary.FeatureSummary`)."""

    # A Keras application (KERAS_NAMES), or torchvision:NAME / timm:NAME
    feature_model: str | None = setting(
        None,
        details="store a backbone's output (no classifier) in every record: `efficientnet_b0`, "
        "`resnet50`, `mobilenet_v2` (Keras), `torchvision:NAME` or `timm:NAME` (PyTorch) "
        "([features](features.md))",
        default_doc="none",
        group="features",
        label="Feature model",
        record=None,
        pattern="^(" + "|".join(KERAS_NAMES) + "|(torchvision|timm):[A-Za-z0-9_.]+)$",
        help="store this backbone's features in every record: "
        + ", ".join(KERAS_NAMES)
        + " (Keras), torchvision:NAME or timm:NAME (PyTorch)",
    )
    model_weights: str = setting(
        "imagenet",
        details="`imagenet`, `none` (random) or a weights file (a `state_dict` for PyTorch); locally, "
        "`imagenet` only from a cache ([features](features.md#weights-on-a-machine-without-network))",
        group="features",
        label="Feature model weights",
        record=None,
        pattern="^(imagenet|none|gs://[a-z0-9][-_.a-z0-9]{1,220}[a-z0-9]/.+)$",
        help="imagenet, none (random) or a weights file (local or gs://; a state_dict for PyTorch)",
    )
    # A .keras/.h5 file, a SavedModel folder, an .onnx file, a TorchScript .pt/.pth or a
    # torch.export .pt2 file (local or gs://)
    model_path: str | None = setting(
        None,
        details="instead of `--feature_model`: a `.keras`/`.h5` file or SavedModel folder, an `.onnx`, "
        "TorchScript `.pt`/`.pth` or `torch.export` `.pt2` file",
        group="features",
        label="Saved feature model",
        record=None,
        pattern=GCS_OBJECT,
        help="a model file whose output is stored: .keras/.h5/SavedModel, .onnx, .pt/.pth or .pt2",
    )
    pooling: str = setting(
        "none",
        details="`avg` or `max` over the spatial axes (EfficientNetB0: 1280 floats instead of 7x7x1280)",
        option="feature_pooling",
        group="features",
        label="Feature pooling",
        record=None,
        choices=POOLINGS,
        help="pool the spatial axes",
    )
    dtype: str = setting(
        "float32",
        details="`float16` stores little-endian half floats as bytes, half the size",
        option="feature_dtype",
        group="features",
        label="Feature dtype",
        record=None,
        choices=DTYPES,
        help="float16 is stored as bytes",
    )
    features_only: bool = setting(
        False,
        group="features",
        label="Features only",
        value_type=bool,
        record=None,
        help="drop the encoded image from feature records",
    )
    batch_size: int = setting(
        32,
        option="inference_batch_size",
        group="features",
        label="Inference batch size",
        value_type=int,
        minimum=1,
        record=None,
        help="images per model call",
    )
    precision: str = setting(
        "float32",
        details="`mixed`: Keras `mixed_float16` or PyTorch `torch.autocast`; stored as `--feature_dtype`; "
        "not for `--model_path`",
        option="feature_precision",
        group="features",
        label="Feature model precision",
        record=None,
        choices=PRECISIONS,
        help="mixed: --feature_model runs in mixed precision (GPU tensor cores)",
    )
    # Models per machine, shared by all its worker processes (RunInference's model_copies);
    # 0: one model in every worker process; None: 1 on a machine with a GPU, else 0.
    model_copies: int | None = setting(
        None,
        details="models per machine, shared by its worker processes; `0`: one per process "
        "([features](features.md#gpu))",
        default_doc="1 with a GPU, else 0",
        group="features",
        label="Feature models per worker machine",
        value_type=int,
        minimum=0,
        record=None,
        help="models per machine, shared by its worker processes; 0: one per process "
        "(default: 1 with a GPU, else 0)",
    )
    # What a model_path model is fed (NORMALIZATIONS); named backbones apply their own.
    input_normalization: str = setting(
        "none",
        details="what a `--model_path` model is fed: `none` (RGB 0..255), `unit` (0..1) or `imagenet` "
        "(torchvision's and timm's)",
        option="model_input_normalization",
        group="features",
        label="Model input normalization",
        record=None,
        choices=NORMALIZATIONS,
        help="what a --model_path model is fed: none (RGB 0..255), unit (0..1) or imagenet",
    )
    # (height, width) fed to a model_path model whose file does not fix it (TorchScript, or
    # an ONNX model with free spatial axes); must agree with a file that does.
    input_size: tuple[int, int] | None = setting(
        None,
        details="`WIDTHxHEIGHT` fed to a `--model_path` model whose file fixes none (TorchScript, ONNX "
        "with free axes)",
        default_doc="from the model",
        option="model_input_size",
        group="features",
        label="Model input size",
        record=None,
        parse=_height_width,
        text=lambda size: format_size((size[1], size[0])),
        pattern="^[1-9][0-9]*x[1-9][0-9]*$",
        help="WIDTHxHEIGHT a --model_path model is fed when its file fixes none",
    )

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
