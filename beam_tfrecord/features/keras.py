"""Keras feature models: the Keras applications by name (without their classifier) and `.keras` or
SavedModel files, compiled into one batch call; the RunInference handler that adapts them is in
beam_tfrecord/features/handler.py, so runs without a model never import Beam's ML package.

TensorFlow and Keras are imported only inside the functions that need them, so a run without a
feature model never loads them (records are built without TensorFlow, see example.proto).
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager, suppress
from dataclasses import dataclass

from beam_tfrecord import storage
from beam_tfrecord.edges import Tensor
from beam_tfrecord.features.inputs import LoadedModel, localize
from beam_tfrecord.features.options import (
    KERAS_NAMES,
    FeatureConfig,
    ModelUnavailable,
    normalization_constants,
)

__all__ = [
    "BACKBONES",
    "Backbone",
    "check_weights",
    "keras_cache_path",
    "load_backbone",
    "load_model",
    "load_saved",
]


@dataclass(frozen=True)
class Backbone:
    """A Keras application without its classifier, and where Keras would fetch its weights."""

    constructor: str  # attribute of keras.applications
    module: str  # keras.applications.<module>.preprocess_input
    input_size: int
    weights_file: str  # the file Keras caches under ~/.keras/models/
    weights_base_url: str

    @property
    def weights_url(self) -> str:
        return self.weights_base_url + self.weights_file


BACKBONES: dict[str, Backbone] = {
    "efficientnet_b0": Backbone(
        "EfficientNetB0",
        "efficientnet",
        224,
        "efficientnetb0_notop.h5",
        "https://storage.googleapis.com/keras-applications/",
    ),
    "resnet50": Backbone(
        "ResNet50",
        "resnet50",
        224,
        "resnet50_weights_tf_dim_ordering_tf_kernels_notop.h5",
        "https://storage.googleapis.com/tensorflow/keras-applications/resnet/",
    ),
    "mobilenet_v2": Backbone(
        "MobileNetV2",
        "mobilenet_v2",
        224,
        "mobilenet_v2_weights_tf_dim_ordering_tf_kernels_1.0_224_no_top.h5",
        "https://storage.googleapis.com/tensorflow/keras-applications/mobilenet_v2/",
    ),
}
assert tuple(BACKBONES) == KERAS_NAMES  # the settings name them without importing this module


def keras_cache_path(file_name: str) -> str:
    """Where `keras.utils.get_file(..., cache_subdir="models")` keeps a downloaded file."""
    home = os.environ.get("KERAS_HOME") or os.path.join(os.path.expanduser("~"), ".keras")
    return os.path.join(home, "models", file_name)


def check_weights(options: FeatureConfig, local: bool) -> None:
    """Fail before the pipeline starts when a local run's weights cannot be had offline.

    `imagenet` is fine when Keras has the file cached; otherwise Keras would download it, which
    this machine (and a firewalled one) cannot. Remote workers download it themselves.
    """
    if options.model_path or options.model_weights == "none":
        return
    backbone = BACKBONES[options.feature_model or ""]
    if options.model_weights == "imagenet":
        if local and not os.path.exists(keras_cache_path(backbone.weights_file)):
            raise ModelUnavailable(
                f"model_weights imagenet: {backbone.weights_file} is not in Keras's cache "
                f"({keras_cache_path(backbone.weights_file)}) and this run does not download it. "
                f"Fetch {backbone.weights_url} on a machine with network and pass "
                f"model_weights /path/to/{backbone.weights_file} (or copy it into the cache), "
                "or use model_weights none for random weights"
            )
        return
    if not storage.is_file(options.model_weights, if_remote=True):  # a worker reads a remote one
        raise ModelUnavailable(f"model_weights {options.model_weights} is not a file")


def _compile(fn: Callable[[Tensor], Tensor], height: int, width: int) -> LoadedModel:
    """One traced graph for every batch size (eager Keras calls are slower:
    benchmarks/NOTES.md#feature-model), its output cast to float32 (a mixed precision model gives
    float16). The uint8 entry point is traced only when used."""
    import tensorflow as tf

    def features(x: Tensor) -> Tensor:
        return tf.cast(fn(x), tf.float32)

    graph = tf.function(features, input_signature=[tf.TensorSpec([None, height, width, 3], tf.float32)])
    graph_uint8 = tf.function(
        lambda x: features(tf.cast(x, tf.float32)),
        input_signature=[tf.TensorSpec([None, height, width, 3], tf.uint8)],
    )
    return LoadedModel(
        lambda batch: graph(tf.constant(batch, tf.float32)).numpy(),
        height,
        width,
        lambda batch: graph_uint8(tf.constant(batch, tf.uint8)).numpy(),
    )


def _spatial_size(shape: Sequence[int | None], what: str) -> tuple[int, int]:
    if len(shape) != 4 or shape[1] is None or shape[2] is None or shape[3] not in (3, None):
        raise ModelUnavailable(f"{what}: expected an input of shape (batch, height, width, 3), got {shape}")
    return int(shape[1]), int(shape[2])


@contextmanager
def _dtype_policy(name: str | None) -> Iterator[None]:
    """Keras's dtype policy while a model is built, then the caller's again: a layer keeps the
    policy it was built under, and Keras keeps the policy per thread, so neither the user's
    process (an in-process run) nor another thread sees it."""
    if name is None:
        yield
        return
    import keras

    previous = keras.config.dtype_policy()
    keras.config.set_dtype_policy(name)
    try:
        yield
    finally:
        keras.config.set_dtype_policy(previous)


def load_backbone(options: FeatureConfig) -> LoadedModel:
    """A Keras application without its top, with its own preprocess_input in the compiled call,
    built under `options.precision`."""
    import keras

    backbone = BACKBONES[options.feature_model or ""]
    weights: str | None = options.model_weights
    if weights == "none":
        weights = None
    elif weights != "imagenet":
        weights = localize(options.model_weights)
    size = backbone.input_size
    with _dtype_policy("mixed_float16" if options.precision == "mixed" else None):
        model = getattr(keras.applications, backbone.constructor)(
            include_top=False, weights=weights, input_shape=(size, size, 3)
        )
    preprocess = getattr(keras.applications, backbone.module).preprocess_input
    return _compile(lambda x: model(preprocess(x), training=False), size, size)


def _normalized(fn: Callable[[Tensor], Tensor], normalization: str) -> Callable[[Tensor], Tensor]:
    """`fn` fed (x * scale - mean) / std of the RGB 0..255 float32 batch (input_normalization)."""
    if normalization == "none":
        return fn
    import tensorflow as tf

    scale, mean, std = normalization_constants(normalization)
    factor = tf.constant([scale / s for s in std], tf.float32)
    offset = tf.constant([m / s for m, s in zip(mean, std, strict=True)], tf.float32)
    return lambda x: fn(x * factor - offset)


def load_saved(path: str, normalization: str = "none") -> LoadedModel:
    """A `.keras` file (safe mode: no arbitrary code) or a TensorFlow SavedModel folder.

    Keras 3's load_model reads only .keras/.h5, so a SavedModel goes through tf.saved_model.load
    and its serving signature; the model is fed RGB float32 0..255 (or as `normalization` says)
    and must hold the rest of its preprocessing.
    """
    local = localize(path)
    if local.endswith((".keras", ".h5")):
        import keras

        model = keras.models.load_model(local, safe_mode=True, compile=False)
        height, width = _spatial_size(tuple(model.input_shape), path)
        return _compile(_normalized(lambda x: model(x, training=False), normalization), height, width)
    import tensorflow as tf

    loaded = tf.saved_model.load(local)
    signature = loaded.signatures.get("serving_default")
    if signature is None:
        raise ModelUnavailable(f"model_path {path}: the SavedModel has no serving_default signature")
    inputs = signature.structured_input_signature[1]
    if len(inputs) != 1:
        raise ModelUnavailable(f"model_path {path}: expected one input, found {sorted(inputs)}")
    ((name, spec),) = inputs.items()
    height, width = _spatial_size(tuple(spec.shape.as_list()), path)
    output_names = sorted(signature.structured_outputs)

    def call(x: Tensor) -> Tensor:
        _ = loaded  # the signature's variables live as long as the loaded object
        outputs = signature(**{name: tf.cast(x, spec.dtype)})
        return outputs[output_names[0]]

    return _compile(_normalized(call, normalization), height, width)


def _grow_gpu_memory() -> None:
    """TensorFlow takes nearly all of a GPU's memory when it first uses it; growing takes what
    the model needs, so a second model copy (`model_copies` 2, perhaps in another process) fits
    beside the first. TF_FORCE_GPU_ALLOW_GROWTH, when set, is the user's choice and stands."""
    if "TF_FORCE_GPU_ALLOW_GROWTH" in os.environ:
        return
    import tensorflow as tf

    for gpu in tf.config.list_physical_devices("GPU"):
        with suppress(RuntimeError):  # this process used the GPU already: its setting stands
            tf.config.experimental.set_memory_growth(gpu, True)


def load_model(options: FeatureConfig) -> LoadedModel:
    _grow_gpu_memory()
    if not options.model_path:
        return load_backbone(options)
    loaded = load_saved(options.model_path, options.input_normalization)
    if options.input_size is not None and options.input_size != loaded.input_size():
        height, width = loaded.input_size()
        raise ModelUnavailable(
            f"model_path {options.model_path} takes {width}x{height} images, not input_size "
            f"{options.input_size[1]}x{options.input_size[0]}"
        )
    return loaded
