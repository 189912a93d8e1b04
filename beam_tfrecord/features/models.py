"""Which framework runs a feature model, and the two things a run asks of it: a check before the
pipeline starts, and the loaded model on a worker. Each framework's module is imported only when
its model is used, so an ONNX run loads no TensorFlow, and neither an ONNX nor a Keras run loads
torch through this project (Beam's RunInference imports torch itself wherever it is installed).
"""

from __future__ import annotations

from beam_tfrecord import storage
from beam_tfrecord.features.inputs import LoadedModel
from beam_tfrecord.features.options import FeatureConfig, ModelUnavailable

__all__ = ["check_model", "load_model"]


def check_model(options: FeatureConfig, local: bool) -> None:
    """Fail before the pipeline starts when the model cannot be had: unknown names, weights no
    local run can fetch, a framework that is not installed, a local model file its framework
    cannot load (loaded here once: a broken file is one line, not a failed job)."""
    framework = options.framework
    if framework == "keras":
        from beam_tfrecord.features import keras

        keras.check_weights(options, local)
        return
    if framework == "onnx":
        try:
            import onnxruntime  # noqa: F401
        except ImportError:
            raise ModelUnavailable(
                "an .onnx model needs onnxruntime, which is not installed: pip install -r requirements.txt"
            ) from None
        if _local_file(options.model_path):
            from beam_tfrecord.features import onnxrt

            onnxrt.load_onnx(options)
        return
    from beam_tfrecord.features import pytorch

    pytorch.import_torch()
    if options.model_path:
        if _local_file(options.model_path):
            pytorch.load_file(options)
    else:
        pytorch.check_weights(options, local)


def _local_file(path: str | None) -> bool:
    return bool(path) and storage.is_file(path or "", if_remote=False)


def load_model(options: FeatureConfig) -> LoadedModel:
    """The model on a worker, by its framework (keras.load_model is looked up at call time, so
    a test may replace it)."""
    framework = options.framework
    if framework == "onnx":
        from beam_tfrecord.features import onnxrt

        return onnxrt.load_onnx(options)
    if framework == "torch":
        from beam_tfrecord.features import pytorch

        return pytorch.load_torch(options)
    from beam_tfrecord.features import keras

    return keras.load_model(options)
