"""ONNX feature models: an `.onnx` file (local or gs://) run with ONNX Runtime, on CUDA where the
installed runtime offers it (the onnxruntime-gpu wheel), else on the CPU.

Not Beam's `onnx_inference.OnnxModelHandlerNumpy`: its shared object is the InferenceSession,
so with `model_copies` the calling processes would reach `run` through Beam's proxy and have to
cast, normalise and transpose first, sending float32 (4x the uint8 batch this project sends);
its default call stacks the elements as they are (ours are records to decode, each failing on
its own); and its module imports the `onnx` package (32 MB installed) to read the file, which
ONNX Runtime does itself. So an ONNX model is one more `LoadedModel` behind the project's
handler, with the same decoding, pooling, sharing and error paths as the Keras models, and only
onnxruntime (79 MB) on the workers. Neither TensorFlow nor torch is imported here.
"""

from __future__ import annotations

import numpy as np

from beam_tfrecord.features.inputs import LoadedModel, fixed_batch, in_batches_of, input_layout, localize
from beam_tfrecord.features.options import FeatureConfig, ModelUnavailable, normalization_constants

__all__ = ["INPUT_TYPES", "load_onnx", "providers"]

# ONNX element types a model's image input may have, and the NumPy type it is fed.
INPUT_TYPES = {"tensor(float)": np.float32, "tensor(float16)": np.float16, "tensor(uint8)": np.uint8}


def providers() -> list[str]:
    """CUDA first where this onnxruntime build has it (onnxruntime-gpu), then the CPU."""
    import onnxruntime

    available = onnxruntime.get_available_providers()
    return [p for p in ("CUDAExecutionProvider", "CPUExecutionProvider") if p in available]


def load_onnx(options: FeatureConfig) -> LoadedModel:
    """An InferenceSession of `options.model_path` as a LoadedModel fed uint8 NHWC batches: cast,
    normalised (`options.input_normalization`) and put in the model's layout in this process, the
    model process when shared; a 4-D output of a channels-first model comes back channels-last,
    so it is stored and pooled as a Keras model's is."""
    import onnxruntime

    path = options.model_path or ""
    try:
        session = onnxruntime.InferenceSession(localize(path), providers=providers())
    except Exception as error:  # onnxruntime raises its own types for a file it cannot read
        raise ModelUnavailable(
            f"model_path {path} is not an ONNX model ONNX Runtime can load: {error}"
        ) from None
    inputs = session.get_inputs()
    if len(inputs) != 1:
        raise ModelUnavailable(f"model_path {path}: expected one input, found {[i.name for i in inputs]}")
    (image_input,) = inputs
    dtype = INPUT_TYPES.get(image_input.type)
    if dtype is None:
        raise ModelUnavailable(
            f"model_path {path}: its input is {image_input.type}, not float, float16 or uint8"
        )
    if dtype is np.uint8 and options.input_normalization != "none":
        raise ModelUnavailable(f"model_path {path} takes uint8 images, which cannot be normalised")
    channels_first, (height, width) = input_layout(
        image_input.shape, options.input_size, f"model_path {path}"
    )
    scale, mean, std = normalization_constants(options.input_normalization)
    offset = np.asarray(mean, np.float32) / np.asarray(std, np.float32)
    factor = np.float32(scale) / np.asarray(std, np.float32)
    name = image_input.name

    def call(batch: np.ndarray) -> np.ndarray:
        x = batch if dtype is np.uint8 else (batch.astype(np.float32) * factor - offset).astype(dtype)
        if channels_first:
            x = x.transpose(0, 3, 1, 2)
        out = np.asarray(session.run(None, {name: np.ascontiguousarray(x)})[0], dtype=np.float32)
        return out.transpose(0, 2, 3, 1) if channels_first and out.ndim == 4 else out

    # An exported model often fixes its batch at 1 (torch.onnx.export without dynamic_axes).
    batched = in_batches_of(fixed_batch(image_input.shape), call)
    return LoadedModel(batched, height, width, batched)
