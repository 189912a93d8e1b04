"""Stage 3, features (optional): a model's output for every image, in batches behind Beam's
RunInference. Runs without a model never import this stage's frameworks.

Takes: `PendingRecord`s and `FeatureOptions`.
Gives: RunInference's `PredictionResult(example=PendingRecord, inference=features or why not)`.

Modules: `keras` (the Keras applications and saved models: loading, input, pooling), `handler`
(the thin RunInference model handler).
"""

__all__ = ["handler", "keras"]
