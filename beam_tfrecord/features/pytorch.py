"""PyTorch feature models: torchvision and timm architectures by name (without their classifier),
TorchScript (`.pt`, `.pth`) and `torch.export` (`.pt2`) files, compiled into one batch call.

torch is an optional extra (`pip install .[torch]`, 5.5 GB with its CUDA libraries): it is
imported only inside these functions, so a run without a PyTorch model never loads it, and a
run that asks for one without it stops before the pipeline with the install line. TensorFlow is
never imported here.

Not Beam's `pytorch_inference.PytorchModelHandlerTensor`: it is built from a model class and a
state_dict path (or a TorchScript path) and calls the whole model, so it has no place for "the
backbone without its classifier", for timm's `forward_features`, or for torch.export files; and
its shared object would be the nn.Module, reached through Beam's proxy only by method calls, so
every process would send float32 batches (4x the uint8 batch this project sends) and the
normalisation would run before the model's device. The project's handler runs every framework
through one `LoadedModel` instead (see onnxrt.py for the same reasoning).
"""

from __future__ import annotations

import os
from collections.abc import Callable
from contextlib import nullcontext
from types import ModuleType

import numpy as np

from beam_tfrecord import storage
from beam_tfrecord.edges import TorchValue
from beam_tfrecord.features.inputs import LoadedModel, fixed_batch, in_batches_of, input_layout, localize
from beam_tfrecord.features.options import (
    FeatureConfig,
    ModelUnavailable,
    file_type,
    normalization_constants,
)

__all__ = [
    "DEFAULT_INPUT_SIZE",
    "check_weights",
    "import_torch",
    "load_file",
    "load_named",
    "load_torch",
    "torchvision_backbone",
]

# The input size of a torchvision architecture whose weights name none (its weights' transforms
# give it otherwise).
DEFAULT_INPUT_SIZE = 224


def import_torch() -> TorchValue:
    """torch, or the reason it is not here and how to get it."""
    try:
        import torch
    except ImportError:
        raise ModelUnavailable(
            "a PyTorch model needs torch, which is not installed: pip install 'beam-tfrecord[torch]' "
            "(or pip install -r requirements-torch.txt)"
        ) from None
    return torch


def _split_name(feature_model: str) -> tuple[str, str]:
    prefix, _, name = feature_model.partition(":")
    return prefix, name


def _import(module: str) -> ModuleType:
    import_torch()
    try:
        return __import__(module)
    except ImportError:
        raise ModelUnavailable(
            f"{module} is not installed: pip install 'beam-tfrecord[torch]' (requirements-torch.txt pins it)"
        ) from None


def _torchvision_weights(name: str) -> TorchValue:
    """The architecture's DEFAULT weights entry (its URL, input size and normalisation), or None
    for one with no published weights."""
    models = _import("torchvision").models
    if name not in models.list_models():
        raise ModelUnavailable(f"feature_model torchvision:{name}: torchvision has no model of that name")
    try:
        return models.get_model_weights(name).DEFAULT
    except (ValueError, AttributeError):
        return None


# Their children interleave auxiliary classifiers with the backbone (and Inception transforms its
# input in forward), so no run of their layers is the backbone: refused, pointing at timm.
WITH_AUXILIARY_HEADS = ("googlenet", "inception_v3")


def _with_auxiliary_heads(name: str) -> ModelUnavailable:
    return ModelUnavailable(
        f"torchvision {name}: its backbone is not a run of its layers (auxiliary classifiers sit "
        "among them); use its timm: name (e.g. timm:inception_v3)"
    )


def check_weights(options: FeatureConfig, local: bool) -> None:
    """Fail before the pipeline starts when the architecture is unknown, or a local run's
    `imagenet` weights are in no cache (nothing here downloads; remote workers do)."""
    prefix, name = _split_name(options.feature_model or "")
    if prefix == "torchvision":
        weights = _torchvision_weights(name)
        if name in WITH_AUXILIARY_HEADS:
            raise _with_auxiliary_heads(name)
        if options.model_weights == "imagenet":
            if weights is None:
                raise ModelUnavailable(f"feature_model torchvision:{name} has no imagenet weights")
            torch = import_torch()
            cached = os.path.join(torch.hub.get_dir(), "checkpoints", os.path.basename(weights.url))
            if local and not os.path.exists(cached):
                raise ModelUnavailable(
                    f"model_weights imagenet: {os.path.basename(weights.url)} is not in torch's cache "
                    f"({cached}) "
                    f"and this run does not download it. Fetch {weights.url} on a machine with network and "
                    f"pass model_weights /path/to/{os.path.basename(weights.url)}, or use model_weights none"
                )
    else:
        timm = _import("timm")
        if not timm.is_model(name):
            raise ModelUnavailable(f"feature_model timm:{name}: timm has no model of that name")
        if options.model_weights == "imagenet" and local and not _timm_cached(timm, name):
            raise ModelUnavailable(
                f"model_weights imagenet: timm:{name}'s weights are not in the Hugging Face cache and this "
                "run does not download them. Pass model_weights /path/to/weights.safetensors (or .pth), "
                "or use model_weights none"
            )
    weights_path = options.model_weights
    if (
        weights_path not in ("imagenet", "none")
        and not storage.is_file(weights_path, if_remote=True)  # a worker reads a remote one
    ):
        raise ModelUnavailable(f"model_weights {weights_path} is not a file")


def _timm_cached(timm: ModuleType, name: str) -> bool:
    """Whether timm's pretrained weights for `name` are already on this machine."""
    config = timm.models.get_pretrained_cfg(name)
    if config is None:
        return False
    if config.hf_hub_id:
        from huggingface_hub import try_to_load_from_cache

        return any(
            isinstance(try_to_load_from_cache(config.hf_hub_id, file), str)
            for file in ("model.safetensors", "pytorch_model.bin", "open_clip_pytorch_model.bin")
        )
    torch = import_torch()
    return bool(config.url) and os.path.exists(
        os.path.join(torch.hub.get_dir(), "checkpoints", os.path.basename(config.url))
    )


def torchvision_backbone(model: TorchValue) -> TorchValue:
    """The layers before the classifier: `model.features` where the architecture has it
    (EfficientNet, MobileNet, ConvNeXt, VGG, DenseNet), else its children up to its global
    pooling (ResNet, RegNet, ResNeXt, Wide ResNet)."""
    nn = import_torch().nn
    if any(hasattr(model, head) for head in ("AuxLogits", "aux1")):
        raise _with_auxiliary_heads(type(model).__name__)
    features = getattr(model, "features", None)
    if isinstance(features, nn.Module):
        return features
    children = list(model.children())
    for index, child in enumerate(children):
        if isinstance(child, nn.AdaptiveAvgPool2d):
            return nn.Sequential(*children[:index])
    raise ModelUnavailable(
        f"torchvision {type(model).__name__}: no convolutional backbone before a global pooling; "
        "try its timm: name (timm's forward_features)"
    )


def _device() -> str:
    return "cuda" if import_torch().cuda.is_available() else "cpu"


def _compile(
    forward: Callable[[TorchValue], TorchValue],
    height: int,
    width: int,
    normalization: tuple[float, tuple[float, ...], tuple[float, ...]],
    channels_last_output: bool,
    mixed: bool,
    device: str,
    batch: int | None = None,
) -> LoadedModel:
    """A uint8 NHWC batch to the device, cast, normalised and made NCHW there; the model under
    inference_mode (and autocast: float16 on CUDA, bfloat16 on a CPU); a 4-D output made
    channels-last (so it is stored and pooled as a Keras model's is) and float32 on the host."""
    torch = import_torch()
    scale, mean, std = normalization
    std_t = torch.tensor(std, dtype=torch.float32, device=device).view(1, 3, 1, 1)
    factor = scale / std_t
    offset = torch.tensor(mean, dtype=torch.float32, device=device).view(1, 3, 1, 1) / std_t

    def call(batch: np.ndarray) -> np.ndarray:
        with torch.inference_mode():
            x = torch.from_numpy(np.ascontiguousarray(batch)).to(device).permute(0, 3, 1, 2).float()
            x = x * factor - offset
            autocast = (
                torch.autocast(device, dtype=torch.float16 if device == "cuda" else torch.bfloat16)
                if mixed
                else nullcontext()
            )
            with autocast:
                out = forward(x)
            if isinstance(out, (tuple, list)):
                out = out[0]
            if out.ndim == 4 and not channels_last_output:
                out = out.permute(0, 2, 3, 1)
            return out.float().cpu().numpy()

    batched = in_batches_of(batch, call)  # a torch.export file may fix its batch (1 by default)
    return LoadedModel(batched, height, width, batched)


def load_named(options: FeatureConfig) -> LoadedModel:
    """torchvision:NAME (the backbone before the classifier, its weights' normalisation and crop
    size) or timm:NAME (`forward_features`, timm's data config), in eval mode on the GPU when
    there is one."""
    torch = import_torch()
    prefix, name = _split_name(options.feature_model or "")
    device = _device()
    weights_option = options.model_weights
    weights_file = None if weights_option in ("imagenet", "none") else localize(weights_option)
    if prefix == "torchvision":
        torchvision = _import("torchvision")
        entry = _torchvision_weights(name)
        model = torchvision.models.get_model(name, weights=entry if weights_option == "imagenet" else None)
        if weights_file is not None:
            model.load_state_dict(torch.load(weights_file, map_location="cpu", weights_only=True))
        if entry is not None:
            transforms = entry.transforms()
            size = int(transforms.crop_size[0])
            normalization = (1 / 255, tuple(transforms.mean), tuple(transforms.std))
        else:
            size = DEFAULT_INPUT_SIZE
            normalization = normalization_constants("imagenet")
        backbone = torchvision_backbone(model).eval().to(device)
        height = width = size
        forward, channels_last = backbone, False
    else:
        timm = _import("timm")
        overlay = {"file": weights_file} if weights_file is not None else None
        model = timm.create_model(
            name,
            pretrained=weights_option != "none",
            num_classes=0,
            **({"pretrained_cfg_overlay": overlay} if overlay else {}),
        )
        model = model.eval().to(device)
        config = timm.data.resolve_data_config({}, model=model)
        _, height, width = (int(n) for n in config["input_size"])
        normalization = (1 / 255, tuple(config["mean"]), tuple(config["std"]))
        forward = model.forward_features
        channels_last = getattr(model, "output_fmt", "NCHW") == "NHWC"
    return _compile(
        forward, height, width, normalization, channels_last, options.precision == "mixed", device
    )


def load_file(options: FeatureConfig) -> LoadedModel:
    """A TorchScript file (its input size is input_size: the file records none) or a
    torch.export file (its example input's size); fed as input_normalization says,
    NCHW float32."""
    torch = import_torch()
    path = options.model_path or ""
    local = localize(path)
    device = _device()
    if file_type(path) == "torch_export":
        try:
            program = torch.export.load(local)
        except Exception as error:
            raise ModelUnavailable(f"model_path {path} is not a torch.export file: {error}") from None
        shape = _exported_input_shape(program, path)
        channels_first, size = input_layout(shape, options.input_size, f"model_path {path}")
        if not channels_first:
            raise ModelUnavailable(f"model_path {path}: a PyTorch model takes (batch, 3, height, width)")
        module = program.module().to(device)
        batch = fixed_batch(shape)
    else:
        try:
            module = torch.jit.load(local, map_location=device).eval()
        except Exception as error:
            raise ModelUnavailable(
                f"model_path {path} is not a TorchScript file ({error}); a state_dict is loaded with "
                "--feature_model torchvision:NAME or timm:NAME and --model_weights"
            ) from None
        if options.input_size is None:
            raise ModelUnavailable(
                f"model_path {path}: a TorchScript file records no input size; give input_size WIDTHxHEIGHT"
            )
        size = options.input_size
        batch = None
    normalization = normalization_constants(options.input_normalization)
    return _compile(module, size[0], size[1], normalization, False, False, device, batch)


def _exported_input_shape(program: TorchValue, path: str) -> list[int | None]:
    """The shape of a torch.export program's one user input (ints, or None where it is free)."""
    names = list(program.graph_signature.user_inputs)
    if len(names) != 1:
        raise ModelUnavailable(f"model_path {path}: expected one input, found {names}")
    for node in program.graph.nodes:
        if node.op == "placeholder" and node.name == names[0]:
            value = node.meta.get("val")
            if value is None:
                break
            return [int(d) if isinstance(d, int) or str(d).isdigit() else None for d in value.shape]
    raise ModelUnavailable(f"model_path {path}: its input's shape is not recorded")


def load_torch(options: FeatureConfig) -> LoadedModel:
    return load_file(options) if options.model_path else load_named(options)
