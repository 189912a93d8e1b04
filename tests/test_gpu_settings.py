"""The settings a GPU run needs, checked on CPU: mixed precision (`--feature_precision mixed`) and
where the model lives (`--model_copies`: one per worker process, or shared across processes
through RunInference).

Nothing here downloads (EfficientNetB0 with random weights, the tiny model of test_features) and
nothing needs a GPU: the speed and memory on one are benchmarks/gpu_model.py's and
benchmarks/features.py's to measure.
"""

from __future__ import annotations

import json

import imagegen
import numpy as np
import pytest
from test_features import SIZE, saved_models  # noqa: F401  (a fixture)

from beam_tfrecord import load_dataset
from beam_tfrecord.elements import PendingRecord, RecordFields, ShardKey
from beam_tfrecord.features import inputs as feature_inputs
from beam_tfrecord.features import keras as features_lib
from beam_tfrecord.features.handler import FeatureModelHandler
from beam_tfrecord.features.options import PRECISIONS, FeatureConfig
from pipelines.convert import run

# Mixed against float32 EfficientNetB0 (the same random weights, avg-pooled): float16 keeps 11
# bits of mantissa, about 5e-4 relative per operation, over some 80 layers. Measured on this CPU
# (TensorFlow 2.21): the largest difference is 0.53% of the largest feature (0.76% unpooled), the
# median difference 0.4% of its feature. 2% leaves room for other kernels (a GPU's tensor cores).
MIXED_TOLERANCE = 0.02


def images(n: int) -> np.ndarray:
    return np.stack(
        [feature_inputs.model_input(imagegen.jpeg(64 + 9 * i, 48, seed=i), 224, 224) for i in range(n)]
    )


def test_mixed_precision_features_are_close_to_float32_and_the_policy_does_not_leak(tmp_path):
    import keras

    # The same random weights for both, from one file: a global seed alone gave each build other
    # weights once earlier tests in the process had drawn from Keras's generators. The float32
    # side is that model itself (EfficientNet's preprocess_input passes pixels through; the
    # float32 load_backbone is every other feature test's), which saves a third build.
    assert "mixed" in PRECISIONS
    keras.utils.set_random_seed(0)
    weights = str(tmp_path / "random.weights.h5")
    model = keras.applications.EfficientNetB0(include_top=False, weights=None)
    model.save_weights(weights)
    batch = images(4)
    full = feature_inputs.pool(np.asarray(model(batch, training=False)), "avg")
    loaded = features_lib.load_backbone(FeatureConfig("efficientnet_b0", weights, precision="mixed"))
    mixed = feature_inputs.pool(loaded.predict(batch), "avg")
    assert keras.config.dtype_policy().name == "float32"  # built mixed, restored after
    assert mixed.dtype == np.float32 and mixed.shape == full.shape == (4, 1280)
    scale = np.abs(full).max()
    # float16 arithmetic did run: the float32 graph and eager calls differ by under 1e-6 of the scale
    assert np.abs(mixed - full).max() > 1e-4 * scale
    assert np.abs(mixed - full).max() <= MIXED_TOLERANCE * scale, np.abs(mixed - full).max() / scale


def test_the_uint8_entry_point_gives_the_float32_calls_features(saved_models):  # noqa: F811
    _, keras_file, _ = saved_models
    loaded = features_lib.load_saved(keras_file)
    batch = np.random.default_rng(2).integers(0, 256, (3, SIZE, SIZE, 3), dtype=np.uint8)
    assert loaded.input_size() == (SIZE, SIZE)
    np.testing.assert_array_equal(loaded.predict(batch), loaded.call(batch.astype(np.float32)))


def test_a_mixed_run_records_its_precision(tmp_path):
    import keras

    imagegen.write_tree(tmp_path / "in", {f"c/{i}.jpg": imagegen.jpeg(64, 48, seed=i) for i in range(3)})
    output = tmp_path / "out"
    argv = ["--input", str(tmp_path / "in"), "--output", str(output), "--no_progress"]
    model = ["--feature_model", "efficientnet_b0", "--model_weights", "none", "--feature_pooling", "avg"]
    assert run([*argv, *model, "--feature_precision", "mixed", "--feature_dtype", "float16"]) == 0
    assert keras.config.dtype_policy().name == "float32"  # an in-process run leaves the user's policy
    summary = json.loads((output / "summary.json").read_text())
    assert summary["features"]["precision"] == "mixed" and summary["features"]["dtype"] == "float16"
    records = list(load_dataset(str(output), "train", batch_size=None, features=True))
    assert len(records) == 3
    assert all(
        r["image/features"].shape == (1280,) and np.isfinite(r["image/features"]).all() for r in records
    )


@pytest.mark.parametrize(
    "extra, message",
    [
        (["--feature_precision", "mixed"], "--feature_precision needs --feature_model"),
        (["--model_copies", "1"], "--model_copies needs --feature_model"),
        (
            ["--model_path", __file__, "--feature_precision", "mixed"],
            "--feature_precision is for --feature_model",
        ),
        (["--feature_model", "efficientnet_b0", "--model_copies", "-1"], "--model_copies must be 0"),
    ],
)
def test_gpu_settings_are_checked_up_front(tmp_path, capsys, extra, message):
    (tmp_path / "in").mkdir()
    assert run(["--input", str(tmp_path / "in"), "--output", str(tmp_path / "out"), *extra]) == 2
    assert capsys.readouterr().err.startswith(f"error: {message}")


@pytest.mark.parametrize(
    "copies, gpus, shared, count",
    [(None, 0, False, 1), (None, 1, True, 1), (0, 1, False, 1), (2, 0, True, 2)],
)
def test_model_copies_become_the_handlers_sharing(monkeypatch, copies, gpus, shared, count):
    """The default is decided where the handler runs: shared on a machine with a GPU."""
    monkeypatch.setattr(feature_inputs, "visible_gpus", lambda: gpus)
    handler = FeatureModelHandler(FeatureConfig("efficientnet_b0", "none", model_copies=copies))
    assert handler.share_model_across_processes() is shared
    assert handler.model_copies() == count


@pytest.mark.parametrize("visible, expected", [("", 0), ("-1", 0), ("0", 0)])
def test_visible_gpus_follows_cuda_visible_devices(monkeypatch, visible, expected):
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", visible)
    assert feature_inputs.visible_gpus() == expected  # "0": no /dev/nvidia0 on this machine


class ModelKindProbe(FeatureModelHandler):
    """The handler, reporting what RunInference handed it as each result's model_id."""

    def run_inference(self, batch, model, inference_args=None):
        from apache_beam.ml.inference.base import PredictionResult

        results = super().run_inference(batch, model, inference_args)
        return [PredictionResult(r.example, r.inference, type(model).__name__) for r in results]


@pytest.mark.parametrize("copies, kind", [(0, "LoadedModel"), (1, "_AutoProxyWrapper")])
def test_runinference_shares_the_model_as_the_handler_says(saved_models, copies, kind):  # noqa: F811
    """A real RunInference: with model_copies the model is held once and every batch reaches it
    through Beam's cross-process proxy (input_size and predict are all the handler calls), and the
    features are the model's either way."""
    import apache_beam as beam
    from apache_beam.ml.inference.base import RunInference
    from apache_beam.testing.test_pipeline import TestPipeline
    from apache_beam.testing.util import assert_that

    model, keras_file, _ = saved_models
    encoded = [imagegen.jpeg(30 + i, 20, seed=i) for i in range(5)]
    pending = [
        PendingRecord(ShardKey("train"), RecordFields(data, "jpeg", 1, 1, 3, f"{i}.jpg", "0"), "JPEG", False)
        for i, data in enumerate(encoded)
    ]
    expected = {
        f"{i}.jpg": np.asarray(model(feature_inputs.model_input(data, SIZE, SIZE)[None].astype(np.float32)))[
            0
        ]
        for i, data in enumerate(encoded)
    }
    options = FeatureConfig(model_path=keras_file, batch_size=2, model_copies=copies)

    def check(results):
        assert sorted(r.example.fields.relpath for r in results) == sorted(expected)
        for result in results:
            assert result.model_id == kind
            np.testing.assert_allclose(
                result.inference, expected[result.example.fields.relpath], rtol=1e-4, atol=1e-4
            )

    with TestPipeline() as pipeline:
        results = pipeline | beam.Create(pending) | RunInference(ModelKindProbe(options))
        assert_that(results, check)


def test_worker_processes_share_one_model_and_store_its_features(saved_models, tmp_path):  # noqa: F811
    """Two worker processes and --model_copies 1, as on a GPU machine: the process that does not
    hold the model sends it uint8 batches over Beam's proxy, and every record holds the model's
    features."""
    model, keras_file, _ = saved_models
    files = {f"{label}/{i}.jpg": imagegen.jpeg(30 + i, 20, seed=i) for label in ("a", "b") for i in range(6)}
    imagegen.write_tree(tmp_path / "in", files)
    output = tmp_path / "out"
    argv = ["--input", str(tmp_path / "in"), "--output", str(output), "--no_progress", "--schema", "simple"]
    workers = ["--direct_num_workers=2", "--direct_running_mode=multi_processing", "--num_shards", "4"]
    assert run([*argv, *workers, "--model_path", keras_file, "--model_copies", "1"]) == 0
    records = list(load_dataset(str(output), "train", batch_size=None, features=True, shuffle=False))
    assert len(records) == 12
    for record in records:
        stored = record["image_raw"].numpy()
        expected = np.asarray(model(feature_inputs.model_input(stored, SIZE, SIZE)[None].astype(np.float32)))[
            0
        ]
        np.testing.assert_allclose(record["features"].numpy(), expected, rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize(
    "mode, given, expected",
    [
        ("in_memory", None, 0),
        ("multi_threading", None, 0),
        ("multi_processing", None, None),
        ("in_memory", 1, 1),
    ],
)
def test_a_local_run_in_one_process_keeps_its_model_unshared(mode, given, expected):
    from beam_tfrecord.config import ConvertConfig
    from beam_tfrecord.runners import LocalWorkers
    from pipelines.convert import model_in_one_process

    config = ConvertConfig("out", features=FeatureConfig("efficientnet_b0", "none", model_copies=given))
    assert model_in_one_process(config, LocalWorkers(mode, 2)).features.model_copies == expected
    assert model_in_one_process(ConvertConfig("out"), LocalWorkers(mode, 1)).features is None
