"""The optional feature model: which model, how it is loaded, what it is fed, and how its output
is pooled and stored, as plain functions; the RunInference handler that adapts them is in
beam_tfrecord/features/handler.py, so runs without a model never import Beam's ML package.

TensorFlow and Keras are imported only inside the functions that need them, so a run without a
feature model never loads them (records are built without TensorFlow, see example.proto).
"""

from __future__ import annotations

import glob
import io
import os
import tempfile
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager, suppress
from dataclasses import dataclass
from typing import Any

import numpy as np
from apache_beam.io.filesystem import CompressionTypes
from apache_beam.io.filesystems import FileSystems
from PIL import Image

__all__ = [
    "BACKBONES",
    "DTYPES",
    "POOLINGS",
    "PRECISIONS",
    "Backbone",
    "FeatureOptions",
    "LoadedModel",
    "ModelUnavailable",
    "check_weights",
    "infer",
    "keras_cache_path",
    "load_backbone",
    "load_model",
    "load_saved",
    "localize",
    "model_input",
    "pool",
    "visible_gpus",
]

POOLINGS = ("none", "avg", "max")
DTYPES = ("float32", "float16")
# float32, or Keras's mixed_float16 policy (float16 compute, float32 variables): what tensor
# cores run fastest; the output is stored as float32 (or --feature_dtype) either way.
PRECISIONS = ("float32", "mixed")


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


def keras_cache_path(file_name: str) -> str:
    """Where `keras.utils.get_file(..., cache_subdir="models")` keeps a downloaded file."""
    home = os.environ.get("KERAS_HOME") or os.path.join(os.path.expanduser("~"), ".keras")
    return os.path.join(home, "models", file_name)


def check_weights(options: FeatureOptions, local: bool) -> None:
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
                f"--model_weights imagenet: {backbone.weights_file} is not in Keras's cache "
                f"({keras_cache_path(backbone.weights_file)}) and this run does not download it. "
                f"Fetch {backbone.weights_url} on a machine with network and pass "
                f"--model_weights /path/to/{backbone.weights_file} (or copy it into the cache), "
                "or use --model_weights none for random weights"
            )
        return
    if "://" not in options.model_weights and not os.path.isfile(options.model_weights):
        raise ModelUnavailable(f"--model_weights {options.model_weights} is not a file")


def localize(path: str) -> str:
    """A local path for `path`: itself when local, else a copy (file or folder) in a temp dir,
    made with Beam's filesystems so gs:// needs no second client."""
    if "://" not in path:
        return path
    base = path.rstrip("/")
    target_root = tempfile.mkdtemp(prefix="beam-tfrecord-model-")
    target = os.path.join(target_root, os.path.basename(base))
    if FileSystems.exists(base) and not FileSystems.exists(base + "/"):
        sources = [(base, target)]
    else:  # a folder (SavedModel): every object under the prefix
        matched = FileSystems.match([base + "/**"])[0].metadata_list
        sources = [(m.path, os.path.join(target, m.path[len(base) + 1 :])) for m in matched]
        if not sources:
            raise ModelUnavailable(f"{path} holds no file")
    for source, local in sources:
        os.makedirs(os.path.dirname(local), exist_ok=True)
        with (
            FileSystems.open(source, compression_type=CompressionTypes.UNCOMPRESSED) as src,
            open(local, "wb") as dst,
        ):
            dst.write(src.read())
    return target


@dataclass(frozen=True)
class LoadedModel:
    """A compiled batch call (float32 [n, h, w, 3] RGB 0..255 -> float32 features) and its input
    size; `uint8_call`, when given, is the same call fed uint8 (cast on the device).

    A dataclass, not a tuple: Beam's shared model cache holds the model by weak reference. Its
    users call methods only (`input_size`, `predict`), never fields: a model shared across
    processes (`model_copies`) reaches them as a proxy, which forwards method calls and nothing
    else.
    """

    call: Callable[[np.ndarray], np.ndarray]
    height: int
    width: int
    uint8_call: Callable[[np.ndarray], np.ndarray] | None = None

    def input_size(self) -> tuple[int, int]:
        """(height, width) of the model input."""
        return self.height, self.width

    def predict(self, images: np.ndarray) -> np.ndarray:
        """Features of a uint8 [n, h, w, 3] batch: uint8 crosses to a shared model's process
        and to the GPU at a quarter of float32's bytes."""
        if self.uint8_call is not None:
            return self.uint8_call(images)
        return self.call(images.astype(np.float32))


def _compile(fn: Callable[[Any], Any], height: int, width: int) -> LoadedModel:
    """One traced graph for every batch size (eager Keras calls are about 2x slower), its output
    cast to float32 (a mixed precision model gives float16). The uint8 entry point is traced
    only when used."""
    import tensorflow as tf

    def features(x: Any) -> Any:
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


def load_backbone(options: FeatureOptions) -> LoadedModel:
    """A Keras application without its top, with its own preprocess_input in the compiled call,
    built under `options.precision`."""
    import keras

    backbone = BACKBONES[options.feature_model or ""]
    weights: str | None = options.model_weights
    if weights == "none":
        weights = None
    elif weights != "imagenet":
        weights = localize(weights)
    size = backbone.input_size
    with _dtype_policy("mixed_float16" if options.precision == "mixed" else None):
        model = getattr(keras.applications, backbone.constructor)(
            include_top=False, weights=weights, input_shape=(size, size, 3)
        )
    preprocess = getattr(keras.applications, backbone.module).preprocess_input
    return _compile(lambda x: model(preprocess(x), training=False), size, size)


def load_saved(path: str) -> LoadedModel:
    """A `.keras` file (safe mode: no arbitrary code) or a TensorFlow SavedModel folder.

    Keras 3's load_model reads only .keras/.h5, so a SavedModel goes through tf.saved_model.load
    and its serving signature; the model is fed RGB float32 0..255 and must hold its own
    preprocessing.
    """
    local = localize(path)
    if local.endswith((".keras", ".h5")):
        import keras

        model = keras.models.load_model(local, safe_mode=True, compile=False)
        height, width = _spatial_size(tuple(model.input_shape), path)
        return _compile(lambda x: model(x, training=False), height, width)
    import tensorflow as tf

    loaded = tf.saved_model.load(local)
    signature = loaded.signatures.get("serving_default")
    if signature is None:
        raise ModelUnavailable(f"--model_path {path}: the SavedModel has no serving_default signature")
    inputs = signature.structured_input_signature[1]
    if len(inputs) != 1:
        raise ModelUnavailable(f"--model_path {path}: expected one input, found {sorted(inputs)}")
    ((name, spec),) = inputs.items()
    height, width = _spatial_size(tuple(spec.shape.as_list()), path)
    output_names = sorted(signature.structured_outputs)

    def call(x: Any) -> Any:
        _ = loaded  # the signature's variables live as long as the loaded object
        outputs = signature(**{name: tf.cast(x, spec.dtype)})
        return outputs[output_names[0]]

    return _compile(call, height, width)


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


def load_model(options: FeatureOptions) -> LoadedModel:
    _grow_gpu_memory()
    return load_saved(options.model_path) if options.model_path else load_backbone(options)


def model_input(encoded: bytes, height: int, width: int) -> np.ndarray:
    """What the model sees: the stored image as RGB uint8 resized (stretched) to its input size.

    Taken from the stored bytes, so --resize and re-encoding apply to it as to training, and the
    stored image itself never changes for the model. JPEGs decode at a reduced scale first.
    """
    image = Image.open(io.BytesIO(encoded))
    if image.format == "JPEG":
        image.draft("RGB", (width, height))
    image = image.convert("RGB")
    if image.size != (width, height):
        image = image.resize((width, height), Image.Resampling.BILINEAR)
    return np.asarray(image, dtype=np.uint8)


def pool(batch: np.ndarray, pooling: str) -> np.ndarray:
    """Spatial pooling of a [n, h, w, c] output; other ranks are kept as they are."""
    if pooling == "none" or batch.ndim != 4:
        return batch
    if pooling == "avg":
        return batch.mean(axis=(1, 2))
    if pooling == "max":
        return batch.max(axis=(1, 2))
    raise ValueError(f"pooling must be one of {POOLINGS}, not {pooling!r}")


def infer(encoded: Sequence[bytes], model: LoadedModel, pooling: str) -> list[np.ndarray | str]:
    """Features (float32) per image, or the reason an image could not be fed to the model.

    Decoding happens here, in the caller's process; only the uint8 batch goes to the model
    (which may be a proxy to a model shared across processes)."""
    height, width = model.input_size()
    arrays: list[np.ndarray | str] = []
    for data in encoded:
        try:
            arrays.append(model_input(data, height, width))
        except Exception as error:  # validated bytes; a failure here is an image, not the run
            arrays.append(f"{type(error).__name__}: {error}")
    good = [i for i, a in enumerate(arrays) if isinstance(a, np.ndarray)]
    results: list[np.ndarray | str] = list(arrays)
    if good:
        batch = np.stack([arrays[i] for i in good])
        out = pool(np.asarray(model.predict(batch), dtype=np.float32), pooling)
        for row, i in enumerate(good):
            results[i] = out[row]
    return results


def visible_gpus() -> int:
    """NVIDIA GPUs this process may use, from the device files and CUDA_VISIBLE_DEVICES, without
    importing TensorFlow or touching the driver (it decides, in every worker process, whether the
    model is shared; see FeatureOptions.model_copies)."""
    devices = len(glob.glob("/dev/nvidia[0-9]*"))
    visible = os.environ.get("CUDA_VISIBLE_DEVICES")
    if visible is None:
        return devices
    ids = [part for part in visible.split(",") if part.strip()]
    if not ids or ids[0].strip() == "-1":
        return 0
    return min(devices, len(ids))
