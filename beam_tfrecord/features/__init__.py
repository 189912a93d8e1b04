"""Stage 3, features (optional): a model's output for every image, in batches behind Beam's
RunInference. Runs without a model never import this stage's frameworks.

Takes: `PendingRecord`s and `FeatureConfig`.
Gives: RunInference's `PredictionResult(example=PendingRecord, inference=features or why not)`.

Modules: `options` (the settings), `inputs` (what any model is fed, pooling, one batch call),
`models` (which framework, the check before a run, loading), `keras` (the Keras applications
and saved models), `onnxrt` (ONNX files on ONNX Runtime), `pytorch` (torchvision and timm names,
TorchScript and torch.export files), `handler` (the thin RunInference handler).
"""

__all__ = ["handler", "inputs", "keras", "models", "onnxrt", "options", "pytorch"]
