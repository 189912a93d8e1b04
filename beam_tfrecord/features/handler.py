"""The thin RunInference model handler over beam_tfrecord/features/ (imported only by runs
with a feature model)."""

from __future__ import annotations

import logging
from collections.abc import Iterable, Sequence
from typing import Protocol

from apache_beam.ml.inference.base import ModelHandler, PredictionResult

from beam_tfrecord import compat
from beam_tfrecord.features import inputs as feature_inputs
from beam_tfrecord.features import models
from beam_tfrecord.features.inputs import LoadedModel
from beam_tfrecord.features.options import FeatureConfig

__all__ = ["FeatureModelHandler", "HoldsImage"]


class HoldsImage(Protocol):
    """What RunInference is fed: an element that holds its stored image's bytes
    (`elements.PendingRecord`)."""

    @property
    def encoded(self) -> bytes: ...


class FeatureModelHandler(ModelHandler[HoldsImage, PredictionResult, LoadedModel]):
    """RunInference handler for every feature model (Keras, ONNX, PyTorch: features/models.py).

    Elements are any objects with an `encoded` attribute (the stored image bytes); each result's
    `example` is the element itself, so a record's facts travel with its features and no key or
    join is needed.

    Where the model lives is `options.model_copies` (see `_copies`), given to RunInference through
    ModelHandler's public `share_model_across_processes` and `model_copies`: either one model per
    worker process, shared by its threads, or that many models per machine, each held by one
    process and called by every other one through Beam's multi_process_shared proxy, so several
    worker processes share one GPU without each taking its memory. Images are decoded in the
    calling process either way; only the uint8 batch crosses.
    """

    def __init__(self, options: FeatureConfig) -> None:
        super().__init__(min_batch_size=1, max_batch_size=options.batch_size)
        self.options = options

    def _copies(self) -> int:
        """Models per machine shared across its processes; 0: one in every process. Decided on
        the worker (the default looks for a GPU there, not where the job was launched)."""
        if self.options.model_copies is not None:
            return self.options.model_copies
        return 1 if feature_inputs.visible_gpus() else 0

    def share_model_across_processes(self) -> bool:
        return self._copies() > 0

    def model_copies(self) -> int:
        return max(self._copies(), 1)

    def load_model(self) -> LoadedModel:
        # Beam warns at every memory reading of RunInference (see compat), in the process that
        # holds the model too: quieted there, as the run's other steps quiet their workers.
        compat.quiet_known_beam_noise(logging.getLogger())
        return models.load_model(self.options)

    def run_inference(
        self, batch: Sequence[HoldsImage], model: LoadedModel, inference_args: dict[str, object] | None = None
    ) -> Iterable[PredictionResult]:
        outputs = feature_inputs.infer([item.encoded for item in batch], model, self.options.pooling)
        return [PredictionResult(item, out) for item, out in zip(batch, outputs, strict=True)]

    def get_num_bytes(self, batch: Sequence[HoldsImage]) -> int:
        return sum(len(item.encoded) for item in batch)

    def get_metrics_namespace(self) -> str:
        return "beam_tfrecord_features"
