"""PyTorch feature models (`make test-torch` installs torch, torchvision and timm; elsewhere this
module is skipped): torchvision and timm architectures by name, TorchScript and torch.export
files, and an ONNX file exported from PyTorch, each storing what the model's own call gives on
the same decoded image.

Records are read back with `iter_examples` (no TensorFlow): torch's and TensorFlow's runtimes in
one process can crash each other (tests/test_torch.py), and a PyTorch run needs no TensorFlow.
Not collected by name: importing torchvision (torch._dynamo, triton) into a process where
TensorFlow is already loaded ends it with a segmentation fault, so the suite runs this module in
a fresh process (tests/test_features_torch.py), and `make test-torch` names it.
"""

from __future__ import annotations

import json

import imagegen
import numpy as np
import pytest
from conftest import convert

torch = pytest.importorskip("torch")
torchvision = pytest.importorskip("torchvision")

from beam_tfrecord import iter_examples  # noqa: E402
from beam_tfrecord.features import inputs as feature_inputs  # noqa: E402
from beam_tfrecord.features import models  # noqa: E402
from beam_tfrecord.features.options import IMAGENET_MEAN, IMAGENET_STD, FeatureConfig  # noqa: E402

SIZE = 16


@pytest.fixture(scope="module")
def tree(tmp_path_factory):
    root = tmp_path_factory.mktemp("torch") / "in"
    files = {
        f"{c}/{c}.{i}.jpg": imagegen.jpeg(50 + 9 * i, 40, seed=i + 7 * (c == "b"))
        for c in "ab"
        for i in range(2)
    }
    imagegen.write_tree(root, files)
    return root


def model_batch(encoded: bytes, size: int, normalization: str) -> torch.Tensor:
    """The image as the run decodes it, normalised as documented, NCHW float32."""
    x = feature_inputs.model_input(encoded, size, size).astype(np.float32)
    if normalization != "none":
        x = x / 255
    if normalization == "imagenet":
        x = (x - np.asarray(IMAGENET_MEAN, np.float32)) / np.asarray(IMAGENET_STD, np.float32)
    return torch.from_numpy(x).permute(2, 0, 1)[None]


def channels_last(out: torch.Tensor) -> np.ndarray:
    out = out.detach().float()[0]
    return (out.permute(1, 2, 0) if out.ndim == 3 else out).numpy()


def stored(out) -> list[dict]:
    records = list(iter_examples(str(out), "train"))
    assert records
    return records


def tiny_net() -> torch.nn.Module:
    torch.manual_seed(0)
    return torch.nn.Sequential(
        torch.nn.Conv2d(3, 5, 3, stride=2, padding=1), torch.nn.ReLU(), torch.nn.MaxPool2d(2)
    ).eval()


@pytest.mark.parametrize("pooling", ["none", "avg"])
def test_torchvision_resnet_features_equal_the_models_own_call(tree, tmp_path, pooling):
    """Weights from a state_dict file (--model_weights), so the test holds the same model: its own
    forward with the classifier replaced by Identity is the avg-pooled vector; layer4's output is
    the unpooled map (torchvision's feature extractor), stored channels-last."""
    from torchvision.models.feature_extraction import create_feature_extractor

    torch.manual_seed(0)
    model = torchvision.models.resnet18(weights=None).eval()
    weights = tmp_path / "resnet18.pth"
    torch.save(model.state_dict(), weights)
    out = tmp_path / "out"
    args = [
        "--feature_model",
        "torchvision:resnet18",
        "--model_weights",
        str(weights),
        "--feature_pooling",
        pooling,
    ]
    assert convert(tree, out, *args) == 0
    summary = json.loads((out / "summary.json").read_text())["features"]
    assert summary["framework"] == "torch" and summary["shape"] == (
        [512] if pooling == "avg" else [7, 7, 512]
    )
    extractor = create_feature_extractor(model, {"layer4": "map"})
    model.fc = torch.nn.Identity()
    for record in stored(out):
        x = model_batch(record["image"], 224, "imagenet")
        with torch.no_grad():
            expected = channels_last(model(x)) if pooling == "avg" else channels_last(extractor(x)["map"])
        np.testing.assert_allclose(record["features"], expected, rtol=1e-4, atol=1e-4)


def test_torchvision_efficientnet_random_weights_have_the_keras_shapes(tree, tmp_path):
    out = tmp_path / "out"
    argv = [
        "--feature_model",
        "torchvision:efficientnet_b0",
        "--model_weights",
        "none",
        "--feature_dtype",
        "float16",
    ]
    assert convert(tree, out, *argv) == 0
    records = stored(out)
    assert all(r["features"].shape == (7, 7, 1280) and np.isfinite(r["features"]).all() for r in records)


def test_timm_forward_features_equal_the_models_own_call(tree, tmp_path):
    timm = pytest.importorskip("timm")
    torch.manual_seed(0)
    model = timm.create_model("resnet18", pretrained=False).eval()
    weights = tmp_path / "timm_resnet18.pth"
    torch.save(model.state_dict(), weights)
    out = tmp_path / "out"
    args = ["--feature_model", "timm:resnet18", "--model_weights", str(weights), "--feature_pooling", "max"]
    assert convert(tree, out, *args) == 0
    for record in stored(out):
        with torch.no_grad():
            expected = channels_last(model.forward_features(model_batch(record["image"], 224, "imagenet")))
        np.testing.assert_allclose(record["features"], expected.max(axis=(0, 1)), rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize(
    "kind", ["torchscript", "torch_export", "torch_export_batch1", "onnx", "onnx_batch1"]
)
def test_model_files_from_pytorch_store_the_torch_call(tree, tmp_path, kind):
    """The same small network saved three ways (TorchScript, torch.export, ONNX through
    torch.onnx's TorchScript-based exporter), the last two also as their exporters write them by
    default, with the batch fixed at the example's 1: each run stores what the network gives."""
    net = tiny_net()
    example = torch.rand(2, 3, SIZE, SIZE)
    args = ["--model_input_normalization", "unit"]
    if kind == "torchscript":
        path = tmp_path / "net.pt"
        torch.jit.trace(net, example).save(str(path))
        args += ["--model_input_size", f"{SIZE}x{SIZE}"]
    elif kind == "torch_export":
        path = tmp_path / "net.pt2"
        batch = torch.export.Dim("batch", min=1, max=1024)
        torch.export.save(torch.export.export(net, (example,), dynamic_shapes=({0: batch},)), str(path))
    elif kind == "torch_export_batch1":
        path = tmp_path / "net1.pt2"
        torch.export.save(torch.export.export(net, (example[:1],)), str(path))
    elif kind == "onnx_batch1":
        path = tmp_path / "net1.onnx"
        torch.onnx.export(net, (example[:1],), str(path), dynamo=False, input_names=["x"])
    else:
        path = tmp_path / "net.onnx"
        torch.onnx.export(
            net, (example,), str(path), dynamo=False, input_names=["x"], dynamic_axes={"x": {0: "n"}}
        )
    out = tmp_path / "out"
    assert convert(tree, out, "--model_path", str(path), "--inference_batch_size", "4", *args) == 0
    assert json.loads((out / "summary.json").read_text())["features"]["framework"] == (
        "onnx" if kind.startswith("onnx") else "torch"
    )
    for record in stored(out):
        with torch.no_grad():
            expected = channels_last(net(model_batch(record["image"], SIZE, "unit")))
        np.testing.assert_allclose(record["features"], expected, rtol=1e-4, atol=1e-4)


def test_a_torchscript_file_needs_a_size_and_a_state_dict_is_not_one(tree, tmp_path, capsys):
    path = tmp_path / "net.pt"
    torch.jit.trace(tiny_net(), torch.rand(1, 3, SIZE, SIZE)).save(str(path))
    assert convert(tree, tmp_path / "out", "--model_path", str(path)) == 2
    assert "records no input size; give --model_input_size WIDTHxHEIGHT" in capsys.readouterr().err
    state = tmp_path / "state.pt"
    torch.save(tiny_net().state_dict(), state)
    assert convert(tree, tmp_path / "out", "--model_path", str(state), "--model_input_size", "16x16") == 2
    assert "is not a TorchScript file" in capsys.readouterr().err
    assert not (tmp_path / "out").exists()


def test_unknown_names_and_uncached_weights_stop_before_the_pipeline(tree, tmp_path, capsys, monkeypatch):
    monkeypatch.setenv("TORCH_HOME", str(tmp_path / "torch-home"))
    monkeypatch.setenv("HF_HOME", str(tmp_path / "hf-home"))
    out = tmp_path / "out"
    assert convert(tree, out, "--feature_model", "torchvision:no_such_net") == 2
    assert "torchvision has no model of that name" in capsys.readouterr().err
    assert convert(tree, out, "--feature_model", "torchvision:resnet18") == 2
    err = capsys.readouterr().err
    assert "https://download.pytorch.org/models/resnet18-" in err and "--model_weights none" in err
    if pytest.importorskip("timm"):
        assert convert(tree, out, "--feature_model", "timm:resnet18") == 2
        assert "not in the Hugging Face cache" in capsys.readouterr().err
    assert not out.exists()


@pytest.mark.parametrize("name", ["inception_v3", "googlenet"])
def test_architectures_with_auxiliary_classifiers_are_refused_with_their_timm_name(
    tree, tmp_path, capsys, name
):
    """Their children interleave auxiliary classifiers with the backbone: no run of layers is it."""
    out = tmp_path / "out"
    assert convert(tree, out, "--feature_model", f"torchvision:{name}", "--model_weights", "none") == 2
    assert "use its timm: name" in capsys.readouterr().err
    assert not out.exists()


def test_mixed_precision_is_close_to_float32():
    """torch.autocast: float16 on CUDA, bfloat16 on this CPU; the stored features stay float32."""
    batch = np.random.default_rng(0).integers(0, 256, (2, 224, 224, 3), dtype=np.uint8)
    results = {}
    for precision in ("float32", "mixed"):
        torch.manual_seed(0)
        options = FeatureConfig("torchvision:resnet18", model_weights="none", precision=precision)
        results[precision] = models.load_model(options).predict(batch)
    assert results["mixed"].dtype == np.float32
    scale = np.abs(results["float32"]).max()
    assert np.abs(results["mixed"] - results["float32"]).max() / scale < 0.05
