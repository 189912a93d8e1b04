"""ONNX feature models (`--model_path model.onnx`) on ONNX Runtime, in `make test` (no torch):
the stored features equal ONNX Runtime's own call on the same decoded image, pooled or not and
as float16; a model's layout is read from its input; a broken file stops the command before the
pipeline; and the ONNX path never imports TensorFlow. tests/test_portable.py runs one off one
process; tests/torch_feature_cases.py exports one from PyTorch.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys

import imagegen
import numpy as np
import onnxgen
import onnxruntime
import pytest
from conftest import REPO, convert

from beam_tfrecord import iter_examples
from beam_tfrecord.features import inputs as feature_inputs
from beam_tfrecord.features import models
from beam_tfrecord.features.options import IMAGENET_MEAN, IMAGENET_STD, FeatureConfig, ModelUnavailable

SIZE = 16


@pytest.fixture(scope="module")
def tree(tmp_path_factory):
    """Six images of different sizes in two classes, and one cut-short JPEG."""
    root = tmp_path_factory.mktemp("onnx") / "in"
    files = {
        f"{c}/{c}.{i}.jpg": imagegen.jpeg(40 + 7 * i, 30, seed=i + 10 * (c == "b"))
        for c in "ab"
        for i in range(3)
    }
    imagegen.write_tree(root, files | {"a/broken.jpg": b"\xff\xd8\xff"})
    return root


@pytest.fixture(scope="module")
def nchw(tmp_path_factory) -> str:
    return onnxgen.conv_pool(tmp_path_factory.mktemp("m") / "nchw.onnx")


def reference(path: str, encoded: bytes, normalization: str, size: int = SIZE) -> np.ndarray:
    """ONNX Runtime's own call on the image the run decodes (features.inputs.model_input),
    normalised as documented, in the model's layout; channels-last, as the run stores it."""
    session = onnxruntime.InferenceSession(path, providers=["CPUExecutionProvider"])
    (model_input,) = session.get_inputs()
    x = feature_inputs.model_input(encoded, size, size).astype(np.float32)
    if normalization in ("unit", "imagenet"):
        x = x / 255
    if normalization == "imagenet":
        x = (x - np.asarray(IMAGENET_MEAN, np.float32)) / np.asarray(IMAGENET_STD, np.float32)
    channels_first = model_input.shape[1] == 3
    batch = x[None].transpose(0, 3, 1, 2) if channels_first else x[None]
    if model_input.type == "tensor(float16)":
        batch = batch.astype(np.float16)
    out = np.asarray(session.run(None, {model_input.name: batch})[0], np.float32)[0]
    return out.transpose(1, 2, 0) if channels_first else out


@pytest.mark.parametrize(
    "pooling, dtype, normalization, shape",
    [
        ("none", "float32", "imagenet", (4, 4, 5)),
        ("avg", "float32", "unit", (5,)),
        ("max", "float16", "none", (5,)),
    ],
)
def test_stored_features_equal_onnx_runtimes_own_call(
    tree, nchw, tmp_path, pooling, dtype, normalization, shape
):
    out = tmp_path / "out"
    args = ["--model_path", nchw, "--feature_pooling", pooling, "--feature_dtype", dtype]
    args += ["--model_input_normalization", normalization, "--inference_batch_size", "4"]
    assert convert(tree, out, *args) == 0
    summary = json.loads((out / "summary.json").read_text())
    assert summary["records"] == 6 and summary["rejects_per_reason"] == {"corrupt": 1}
    features = summary["features"]
    assert features["shape"] == list(shape) and features["framework"] == "onnx"
    assert features["input_normalization"] == normalization and features["dtype"] == dtype
    records = list(iter_examples(str(out), "train"))
    assert len(records) == 6
    for record in records:
        expected = reference(nchw, record["image"], normalization)
        if pooling == "avg":
            expected = expected.mean(axis=(0, 1))
        elif pooling == "max":
            expected = expected.max(axis=(0, 1))
        tolerance = 2e-3 * max(1.0, float(np.abs(expected).max())) if dtype == "float16" else 1e-4
        assert record["features"].shape == shape
        np.testing.assert_allclose(record["features"], expected, rtol=tolerance, atol=tolerance)


def test_a_model_that_fixes_its_batch_at_one_gets_every_image(tree, nchw, tmp_path):
    """What torch.onnx.export writes without dynamic_axes: a batch axis of 1. The run feeds it one
    image at a time, and every record holds what the free-batch model gives it."""
    fixed = onnxgen.conv_pool(tmp_path / "batch1.onnx", batch=1)
    outputs = {}
    for name, model in (("free", nchw), ("fixed", fixed)):
        out = tmp_path / name
        assert convert(tree, out, "--model_path", model, "--inference_batch_size", "4") == 0
        summary = json.loads((out / "summary.json").read_text())
        assert summary["records"] == 6 and summary["rejects_per_reason"] == {"corrupt": 1}
        outputs[name] = {r["filename"]: r["features"] for r in iter_examples(str(out), "train")}
    assert outputs["fixed"].keys() == outputs["free"].keys()
    for name, features in outputs["fixed"].items():
        np.testing.assert_allclose(features, outputs["free"][name], rtol=1e-5, atol=1e-5)
    loaded = models.load_model(FeatureConfig(model_path=fixed))
    batch = np.random.default_rng(1).integers(0, 256, (5, SIZE, SIZE, 3), dtype=np.uint8)
    assert loaded.predict(batch).shape == (5, 4, 4, 5)  # 5 in pieces of 1, none padded in


@pytest.mark.parametrize(
    "channels_last, size, dtype, given",
    [(True, SIZE, "float", None), (False, "height", "float", (SIZE, SIZE)), (False, SIZE, "float16", None)],
)
def test_layout_and_size_are_read_from_the_models_input(tmp_path, channels_last, size, dtype, given):
    path = onnxgen.conv_pool(tmp_path / "m.onnx", channels_last=channels_last, size=size, dtype=dtype)
    loaded = models.load_model(FeatureConfig(model_path=path, input_size=given))
    assert loaded.input_size() == (SIZE, SIZE)
    encoded = [imagegen.jpeg(30 + i, 20, seed=i) for i in range(3)]
    out = feature_inputs.infer(encoded, loaded, "none")
    tolerance = 5e-3 if dtype == "float16" else 1e-5
    for data, features in zip(encoded, out, strict=True):
        assert features.shape == (4, 4, 5)
        expected = reference(path, data, "none")
        np.testing.assert_allclose(
            features, expected, rtol=tolerance, atol=tolerance * np.abs(expected).max()
        )


def test_a_model_with_free_spatial_axes_needs_a_size_and_a_fixed_one_must_agree(tmp_path):
    free = onnxgen.conv_pool(tmp_path / "free.onnx", size="side")
    with pytest.raises(ModelUnavailable, match="fixes no height and width; give input_size"):
        models.load_model(FeatureConfig(model_path=free))
    fixed = onnxgen.conv_pool(tmp_path / "fixed.onnx")
    with pytest.raises(ModelUnavailable, match="takes 16x16 images, not input_size 32x24"):
        models.load_model(FeatureConfig(model_path=fixed, input_size=(24, 32)))


@pytest.mark.parametrize(
    "content, message",
    [
        (b"not a model", "is not an ONNX model ONNX Runtime can load"),
        (None, "expected an image input"),
    ],
)
def test_a_bad_onnx_file_stops_the_command_before_the_pipeline(tree, tmp_path, capsys, content, message):
    path = tmp_path / "bad.onnx"
    if content is None:  # a valid ONNX file whose input is no image: (n, 7)
        import onnx
        from onnx import TensorProto, helper

        graph = helper.make_graph(
            [helper.make_node("Relu", ["x"], ["y"])],
            "vector",
            [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["n", 7])],
            [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["n", 7])],
        )
        model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
        model.ir_version = 9
        onnx.save(model, str(path))
    else:
        path.write_bytes(content)
    out = tmp_path / "out"
    assert convert(tree, out, "--model_path", str(path)) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"error: --model_path {path}") and message in err
    assert not out.exists()


def test_a_free_size_model_runs_with_model_input_size_from_the_command(tree, tmp_path):
    path = onnxgen.conv_pool(tmp_path / "free.onnx", size="side")
    out = tmp_path / "out"
    assert convert(tree, out, "--model_path", path) == 2
    assert (
        convert(tree, out, "--model_path", path, "--model_input_size", "16x16", "--feature_pooling", "avg")
        == 0
    )
    assert json.loads((out / "summary.json").read_text())["features"]["shape"] == [5]


def test_options_for_a_model_path_only_are_refused_for_a_named_backbone(tree, tmp_path, capsys):
    out = tmp_path / "out"
    argv = ["--feature_model", "efficientnet_b0", "--model_weights", "none"]
    assert convert(tree, out, *argv, "--model_input_normalization", "unit") == 2
    assert "--model_input_normalization is for --model_path" in capsys.readouterr().err
    assert convert(tree, out, "--feature_model", "vgg16") == 2
    assert "torchvision:NAME or timm:NAME" in capsys.readouterr().err
    assert convert(tree, out, "--feature_model", "keras:resnet50") == 2
    assert "prefix is torchvision: or timm:" in capsys.readouterr().err


def test_the_onnx_path_never_imports_tensorflow(nchw):
    """In a fresh process, as a worker loads it: the handler, the model and a batch through
    RunInference's calls, and TensorFlow (or Keras) never imported. (torch is not asserted: where
    it is installed, Beam's RunInference module imports it itself, for its model manager.)"""
    code = f"""
import sys
import imagegen
from beam_tfrecord.elements import PendingRecord, RecordFields, ShardKey
from beam_tfrecord.features.handler import FeatureModelHandler
from beam_tfrecord.features.models import check_model
from beam_tfrecord.features.options import FeatureConfig

options = FeatureConfig(model_path={nchw!r}, pooling="avg", model_copies=0)
check_model(options, local=True)
handler = FeatureModelHandler(options)
model = handler.load_model()
fields = [RecordFields(imagegen.jpeg(30, 20, seed=i), "jpeg", 1, 1, 3, f"{{i}}.jpg", "0") for i in range(3)]
batch = [PendingRecord(ShardKey("train"), f, "JPEG", False) for f in fields]
results = list(handler.run_inference(batch, model))
assert [r.inference.shape for r in results] == [(5,)] * 3
print(sorted(m for m in ("tensorflow", "keras") if m in sys.modules))
"""
    done = subprocess.run(
        [sys.executable, "-c", code],
        cwd=REPO,
        env={**os.environ, "PYTHONPATH": f"{REPO}:{REPO}/tests"},
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    assert done.stdout.strip().splitlines()[-1] == "[]"


@pytest.mark.parametrize("copies", [0, 1])
def test_runinference_runs_an_onnx_model_shared_or_not(nchw, copies):
    """Through a real RunInference, with the model in this process (0) or held once and reached
    through Beam's cross-process proxy (1, as on a GPU machine): the features are the model's."""
    import apache_beam as beam
    from apache_beam.ml.inference.base import RunInference
    from apache_beam.testing.test_pipeline import TestPipeline
    from apache_beam.testing.util import assert_that

    from beam_tfrecord.elements import PendingRecord, RecordFields, ShardKey
    from beam_tfrecord.features.handler import FeatureModelHandler

    encoded = [imagegen.jpeg(30 + i, 20, seed=i) for i in range(5)]
    pending = [
        PendingRecord(ShardKey("train"), RecordFields(data, "jpeg", 1, 1, 3, f"{i}.jpg", "0"), "JPEG", False)
        for i, data in enumerate(encoded)
    ]
    expected = {f"{i}.jpg": reference(nchw, data, "unit") for i, data in enumerate(encoded)}
    options = FeatureConfig(model_path=nchw, batch_size=2, model_copies=copies, input_normalization="unit")

    def check(results):
        assert sorted(r.example.fields.relpath for r in results) == sorted(expected)
        for result in results:
            np.testing.assert_allclose(
                result.inference, expected[result.example.fields.relpath], rtol=1e-4, atol=1e-4
            )

    with TestPipeline() as pipeline:
        results = pipeline | beam.Create(pending) | RunInference(FeatureModelHandler(options))
        assert_that(results, check)
