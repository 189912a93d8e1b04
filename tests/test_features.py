"""The feature model: loading (Keras application, .keras, SavedModel, gs://), the model input,
pooling, storage and read-back, and whole runs through RunInference.

Nothing here downloads: EfficientNetB0 runs with random weights (`--model_weights none`) on a
handful of images, everything else on a tiny model the tests build and save.
"""

from __future__ import annotations

import json

import imagegen
import numpy as np
import pytest

from beam_tfrecord import load_dataset
from beam_tfrecord.elements import PendingRecord, RecordFields, RejectLine, ShardKey
from beam_tfrecord.features import inputs as feature_inputs
from beam_tfrecord.features import keras as features_lib
from beam_tfrecord.features.options import FeatureConfig
from beam_tfrecord.keys import FeatureLayout, key_of
from beam_tfrecord.transforms import failed_batch_rejects
from beam_tfrecord.write import schema as schema_lib
from pipelines import inspect
from pipelines.convert import run

SIZE = 16  # the tiny model's input size


def tiny_model():
    """A conv layer and a max pool: a (batch, 16, 16, 3) input gives (batch, 4, 4, 5)."""
    import keras

    keras.utils.set_random_seed(0)
    return keras.Sequential(
        [
            keras.Input(shape=(SIZE, SIZE, 3)),
            keras.layers.Rescaling(1 / 255),
            keras.layers.Conv2D(5, 3, strides=2, padding="same"),
            keras.layers.MaxPooling2D(),
        ]
    )


@pytest.fixture(scope="module")
def saved_models(tmp_path_factory):
    """The same tiny model as a .keras file and as a SavedModel folder."""
    root = tmp_path_factory.mktemp("models")
    model = tiny_model()
    keras_file = root / "tiny.keras"
    model.save(keras_file)
    saved_dir = root / "tiny_savedmodel"
    model.export(str(saved_dir), format="tf_saved_model", verbose=False)
    return model, str(keras_file), str(saved_dir)


@pytest.fixture
def small_tree(tmp_path):
    """Six labeled images of different sizes, and one broken file (a JPEG header cut short)."""
    files = {
        f"{label}/{label}.{i}.jpg": imagegen.jpeg(40 + 7 * i, 30, seed=i)
        for label in ("a", "b")
        for i in range(3)
    }
    files["a/broken.jpg"] = b"\xff\xd8\xff"
    root = tmp_path / "small"
    imagegen.write_tree(root, files)
    return root


def read_all(output, **kwargs) -> list[dict]:
    dataset = load_dataset(str(output), "train", batch_size=None, shuffle=False, features=True, **kwargs)
    return [{k: v.numpy() for k, v in record.items()} for record in dataset]


def test_pool_keeps_or_reduces_the_spatial_axes():
    batch = np.arange(2 * 3 * 3 * 4, dtype=np.float32).reshape(2, 3, 3, 4)
    assert feature_inputs.pool(batch, "none").shape == (2, 3, 3, 4)
    np.testing.assert_allclose(feature_inputs.pool(batch, "avg"), batch.mean(axis=(1, 2)))
    np.testing.assert_allclose(feature_inputs.pool(batch, "max"), batch[:, 2, 2, :])
    flat = np.ones((2, 7), np.float32)
    assert feature_inputs.pool(flat, "avg") is flat  # already a vector


def test_model_input_is_rgb_at_the_model_size_for_any_stored_image():
    for data in (
        imagegen.jpeg(90, 40, seed=1),
        imagegen.png(20, 30, mode="L"),
        imagegen.png(33, 12, mode="RGB"),
    ):
        array = feature_inputs.model_input(data, 24, 32)
        assert array.shape == (24, 32, 3) and array.dtype == np.uint8


def test_an_image_the_model_cannot_be_fed_is_reported_not_raised():
    model = feature_inputs.LoadedModel(lambda batch: batch.mean(axis=(1, 2)), 8, 8)
    out = feature_inputs.infer([imagegen.jpeg(20, 20, seed=2), b"not an image"], model, "none")
    assert out[0].shape == (3,)
    assert isinstance(out[1], str) and "UnidentifiedImageError" in out[1]


def test_a_failed_batch_becomes_one_reject_per_image():
    fields = RecordFields(b"x", "jpeg", 1, 1, 3, "a/1.jpg", "0")
    pending = [PendingRecord(ShardKey("train"), fields, "JPEG", False)] * 2
    rejects = list(failed_batch_rejects((pending, RuntimeError("out of memory"))))
    assert rejects == [RejectLine("a/1.jpg", "inference_failed", "RuntimeError: out of memory")] * 2


@pytest.mark.parametrize("dtype", ["float32", "float16"])
def test_features_round_trip_through_the_schema(dtype):
    import tensorflow as tf

    values = np.random.default_rng(0).standard_normal((7, 7, 3)).astype(np.float32)
    for schema in schema_lib.SCHEMAS:
        fields = RecordFields(b"img", "jpeg", 1, 1, 3, "x.jpg", "0", 1, "a", values, dtype, False)
        layout = FeatureLayout((7, 7, 3), dtype, image=False)
        parsed = tf.io.parse_single_example(
            schema_lib.serialize(schema, fields), schema_lib.parse_spec(schema, True, layout)
        )
        assert key_of(schema, "image") not in parsed
        restored = schema_lib.restore_features(parsed, schema, layout).numpy()
        np.testing.assert_allclose(
            restored, values, rtol=1e-3 if dtype == "float16" else 0, atol=1e-3 if dtype == "float16" else 0
        )
        float_key, half_key, shape_key = (
            key_of(schema, n) for n in ("features", "features_float16", "features_shape")
        )
        assert list(parsed[shape_key].numpy()) == [7, 7, 3]
        assert (half_key if dtype == "float16" else float_key) in parsed


def test_keras_file_and_savedmodel_load_to_the_same_compiled_call(saved_models):
    model, keras_file, saved_dir = saved_models
    batch = np.random.default_rng(1).uniform(0, 255, (3, SIZE, SIZE, 3)).astype(np.float32)
    expected = np.asarray(model(batch))
    for path in (keras_file, saved_dir):
        loaded = features_lib.load_saved(path)
        assert (loaded.height, loaded.width) == (SIZE, SIZE)
        np.testing.assert_allclose(loaded.call(batch), expected, rtol=1e-5, atol=1e-5)


def test_savedmodel_folder_is_copied_from_gcs_with_beams_filesystems(saved_models, tmp_path, monkeypatch):
    import os

    from gcsemulator import EMULATOR_ENV, Emulator

    _, keras_file, saved_dir = saved_models
    files = {}
    for folder, _, names in os.walk(saved_dir):
        for name in names:
            path = os.path.join(folder, name)
            with open(path, "rb") as handle:
                files[f"tiny_savedmodel/{os.path.relpath(path, saved_dir)}"] = handle.read()
    with open(keras_file, "rb") as handle:
        files["tiny.keras"] = handle.read()
    with Emulator() as emulator:
        monkeypatch.setenv(EMULATOR_ENV, emulator.url)
        emulator.upload_tree("models", "m", files)
        for path in ("gs://models/m/tiny_savedmodel", "gs://models/m/tiny.keras"):
            assert features_lib.load_saved(path).height == SIZE


def test_offline_imagenet_fails_before_the_pipeline_with_the_way_out(
    small_tree, tmp_path, monkeypatch, capsys
):
    monkeypatch.setenv("KERAS_HOME", str(tmp_path / "keras"))
    code = run(
        ["--input", str(small_tree), "--output", str(tmp_path / "out"), "--feature_model", "efficientnet_b0"]
    )
    assert code == 2  # before any download or pipeline
    err = capsys.readouterr().err
    assert "https://storage.googleapis.com/keras-applications/efficientnetb0_notop.h5" in err
    assert "--model_weights /path/to/efficientnetb0_notop.h5" in err
    assert not (tmp_path / "out").exists()
    # A cached file is what Keras would use offline: then the check passes.
    cached = tmp_path / "keras" / "models" / "efficientnetb0_notop.h5"
    cached.parent.mkdir(parents=True)
    cached.write_bytes(b"")
    features_lib.check_weights(FeatureConfig("efficientnet_b0"), local=True)


@pytest.mark.parametrize(
    "argv",
    [
        ["--feature_pooling", "avg"],
        ["--feature_model", "efficientnet_b0", "--model_path", "m.keras"],
        ["--model_path", "/no/such/model.keras"],
        ["--feature_model", "efficientnet_b0", "--model_weights", "/no/such/weights.h5"],
        ["--model_path", __file__, "--model_weights", "none"],
        ["--model_path", __file__, "--inference_batch_size", "0"],
    ],
)
def test_feature_options_are_checked_up_front(small_tree, tmp_path, argv, capsys):
    assert run(["--input", str(small_tree), "--output", str(tmp_path / "out"), *argv]) == 2
    assert capsys.readouterr().err.startswith("error: --")


def test_tiny_model_run_stores_features_that_match_the_model(saved_models, small_tree, tmp_path):
    model, keras_file, _ = saved_models
    output = tmp_path / "out"
    code = run(
        [
            "--input",
            str(small_tree),
            "--output",
            str(output),
            "--no_progress",
            "--model_path",
            keras_file,
            "--inference_batch_size",
            "4",
            "--schema",
            "simple",
        ]
    )
    assert code == 0
    summary = json.loads((output / "summary.json").read_text())
    assert summary["records"] == 6 and summary["rejects_per_reason"] == {"corrupt": 1}
    assert summary["consistent"] and summary["sink"] == "paths"
    assert summary["features"]["shape"] == [4, 4, 5] and summary["features"]["dtype"] == "float32"
    # features=True on a feature run: no image_size, no image decoded, and batches of mixed sizes
    batch = next(iter(load_dataset(str(output), "train", features=True, shuffle=False)))
    assert "image" not in batch and batch["features"].shape == (6, 4, 4, 5)
    records = read_all(output, decode_images=True)
    assert len(records) == 6
    for record in records:
        stored = record["image_raw"]
        assert record["features"].shape == (4, 4, 5)
        assert list(record["features_shape"]) == [4, 4, 5]
        expected = np.asarray(model(feature_inputs.model_input(stored, SIZE, SIZE)[None].astype(np.float32)))[
            0
        ]
        np.testing.assert_allclose(record["features"], expected, rtol=1e-4, atol=1e-4)
        assert record["image"].shape[2] == 3  # the stored image is the source, not the model input
    assert {r["image"].shape[:2] for r in records} != {(SIZE, SIZE)}
    assert inspect.run([str(output), "--pictures", str(tmp_path / "pictures")]) == 0


def test_savedmodel_float16_features_only_run(saved_models, small_tree, tmp_path):
    _, _, saved_dir = saved_models
    output = tmp_path / "out"
    code = run(
        [
            "--input",
            str(small_tree),
            "--output",
            str(output),
            "--no_progress",
            "--model_path",
            saved_dir,
            "--feature_dtype",
            "float16",
            "--feature_pooling",
            "max",
            "--features_only",
        ]
    )
    assert code == 0
    summary = json.loads((output / "summary.json").read_text())
    assert summary["features"]["shape"] == [5] and summary["tfds_metadata"]["written"] is False
    records = read_all(output)
    assert len(records) == 6
    assert all("image/encoded" not in r and "image" not in r for r in records)
    assert all(r["image/features"].shape == (5,) and r["image/features"].dtype == np.float32 for r in records)
    pairs = load_dataset(str(output), "train", batch_size=3)
    features, labels = next(iter(pairs))
    assert features.shape == (3, 5) and labels.shape == (3,)


@pytest.mark.parametrize("pooling, shape", [("none", (7, 7, 1280)), ("avg", (1280,))])
def test_efficientnet_b0_random_weights_on_a_handful_of_images(tmp_path, pooling, shape):
    files = {f"c/{i}.jpg": imagegen.jpeg(64, 48, seed=i) for i in range(3)}
    imagegen.write_tree(tmp_path / "in", files)
    output = tmp_path / "out"
    code = run(
        [
            "--input",
            str(tmp_path / "in"),
            "--output",
            str(output),
            "--no_progress",
            "--feature_model",
            "efficientnet_b0",
            "--model_weights",
            "none",
            "--feature_pooling",
            pooling,
        ]
    )
    assert code == 0
    records = read_all(output)
    assert len(records) == 3
    assert all(r["image/features"].shape == shape for r in records)
    assert all(np.isfinite(r["image/features"]).all() for r in records)


@pytest.mark.parametrize("sink", ["paths", "beam"])
def test_feature_runs_write_the_planned_shards_with_either_sink(saved_models, small_tree, tmp_path, sink):
    """One flow: the model is a step between reading and building, so a feature run writes the
    same planned shards as a plain run, through the sink the options name (none is forced)."""
    _, keras_file, _ = saved_models
    output = tmp_path / "out"
    argv = ["--input", str(small_tree), "--output", str(output), "--no_progress", "--model_path", keras_file]
    assert run([*argv, "--splits", "train=0.5,validation=0.5", "--num_shards", "2", "--sink", sink]) == 0
    summary = json.loads((output / "summary.json").read_text())
    assert summary["consistent"] and summary["sink"] == sink
    for name, split in summary["splits"].items():
        assert split["shards"] == split["planned_shards"] == 2
        assert split["files"] == [f"{name}-0000{i}-of-00002.tfrecord" for i in range(2)]
        records = load_dataset(str(output), name, batch_size=None, features=True)
        assert sum(1 for _ in records) == split["records"]


def test_a_model_that_raises_rejects_its_batches_and_the_run_says_so(
    small_tree, tmp_path, monkeypatch, capsys
):
    """RunInference's dead letters become `inference_failed` rejects: every input is accounted
    for, and a model that fails on everything ends the run with exit 1."""

    def failing(batch: np.ndarray) -> np.ndarray:
        raise RuntimeError("no kernel for this input")

    monkeypatch.setattr(features_lib, "load_model", lambda options: feature_inputs.LoadedModel(failing, 8, 8))
    output = tmp_path / "out"
    argv = ["--input", str(small_tree), "--output", str(output), "--no_progress"]
    assert run([*argv, "--feature_model", "efficientnet_b0", "--model_weights", "none"]) == 1
    assert "every input was rejected" in capsys.readouterr().err
    summary = json.loads((output / "summary.json").read_text())
    assert summary["consistent"]
    assert summary["rejects_per_reason"] == {"corrupt": 1, "inference_failed": 6}
    lines = [json.loads(line) for line in (output / "rejects.jsonl").read_text().splitlines()]
    assert {line["detail"] for line in lines if line["reason"] == "inference_failed"} == {
        "RuntimeError: no kernel for this input"
    }


@pytest.mark.parametrize(
    "argv",
    [
        ["--feature_model", "torchvision:resnet18", "--model_weights", "none"],
        ["--model_path", "{model}"],
    ],
)
def test_a_pytorch_model_without_torch_says_how_to_install_it(
    small_tree, tmp_path, monkeypatch, capsys, argv
):
    """torch is an optional extra: asked for where it is missing (here made so, installed or not),
    the command stops before the pipeline with the install line."""
    import sys

    monkeypatch.setitem(sys.modules, "torch", None)  # `import torch` raises ImportError
    model = tmp_path / "net.pt"
    model.write_bytes(b"a TorchScript file")
    argv = [a.replace("{model}", str(model)) for a in argv]
    assert run(["--input", str(small_tree), "--output", str(tmp_path / "out"), *argv]) == 2
    err = capsys.readouterr().err
    assert "needs torch, which is not installed: pip install 'beam-tfrecord[torch]'" in err
    assert not (tmp_path / "out").exists()
