"""What every feature model is fed and how its output is kept, whatever the framework: the stored
image decoded to the model's input size, one batch call, spatial pooling, and where a model file
on gs:// is copied to be loaded.
"""

from __future__ import annotations

import glob
import io
import os
import tempfile
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TypeAlias

import numpy as np
from apache_beam.io.filesystem import CompressionTypes
from apache_beam.io.filesystems import FileSystems
from PIL import Image

from beam_tfrecord import storage
from beam_tfrecord.features.options import POOLINGS, ModelUnavailable

__all__ = [
    "LoadedModel",
    "fixed_batch",
    "in_batches_of",
    "infer",
    "input_layout",
    "localize",
    "model_input",
    "pool",
    "visible_gpus",
]


def localize(path: str) -> str:
    """A local path for `path`: itself when local, else a copy (file or folder) in a temp dir,
    made with Beam's filesystems so gs:// needs no second client."""
    if not storage.is_remote(path):
        return path
    base = path.rstrip("/")
    target_root = tempfile.mkdtemp(prefix="beam-tfrecord-model-")
    target = os.path.join(target_root, os.path.basename(base))
    if FileSystems.exists(base) and not FileSystems.exists(base + "/"):
        sources = [(base, target)]
    else:  # a folder (SavedModel): every object under the prefix
        matched = FileSystems.match([base + "/**"])[0].metadata_list
        sources = [(m.path, os.path.join(target, m.path[len(base) + 1 :])) for m in matched]
        if not sources:
            raise ModelUnavailable(f"{path} holds no file")
    for source, local in sources:
        os.makedirs(os.path.dirname(local), exist_ok=True)
        with (
            FileSystems.open(source, compression_type=CompressionTypes.UNCOMPRESSED) as src,
            open(local, "wb") as dst,
        ):
            dst.write(src.read())
    return target


@dataclass(frozen=True)
class LoadedModel:
    """A compiled batch call (float32 [n, h, w, 3] RGB 0..255 -> float32 features) and its input
    size; `uint8_call`, when given, is the same call fed uint8 (cast on the device).

    A dataclass, not a tuple: Beam's shared model cache holds the model by weak reference. Its
    users call methods only (`input_size`, `predict`), never fields: a model shared across
    processes (`model_copies`) reaches them as a proxy, which forwards method calls and nothing
    else.
    """

    call: Callable[[np.ndarray], np.ndarray]
    height: int
    width: int
    uint8_call: Callable[[np.ndarray], np.ndarray] | None = None

    def input_size(self) -> tuple[int, int]:
        """(height, width) of the model input."""
        return self.height, self.width

    def predict(self, images: np.ndarray) -> np.ndarray:
        """Features of a uint8 [n, h, w, 3] batch: uint8 crosses to a shared model's process
        and to the GPU at a quarter of float32's bytes."""
        if self.uint8_call is not None:
            return self.uint8_call(images)
        return self.call(images.astype(np.float32))


def model_input(encoded: bytes, height: int, width: int) -> np.ndarray:
    """What the model sees: the stored image as RGB uint8 resized (stretched) to its input size.

    Taken from the stored bytes, so a resize and re-encoding apply to it as to training, and the
    stored image itself never changes for the model. JPEGs decode at a reduced scale first.
    """
    source = Image.open(io.BytesIO(encoded))
    if source.format == "JPEG":
        source.draft("RGB", (width, height))
    image = source.convert("RGB")
    if image.size != (width, height):
        image = image.resize((width, height), Image.Resampling.BILINEAR)
    return np.asarray(image, dtype=np.uint8)


def pool(batch: np.ndarray, pooling: str) -> np.ndarray:
    """Spatial pooling of a [n, h, w, c] output; other ranks are kept as they are."""
    if pooling == "none" or batch.ndim != 4:
        return batch
    if pooling == "avg":
        return batch.mean(axis=(1, 2))
    if pooling == "max":
        return batch.max(axis=(1, 2))
    raise ValueError(f"pooling must be one of {POOLINGS}, not {pooling!r}")


def infer(encoded: Sequence[bytes], model: LoadedModel, pooling: str) -> list[np.ndarray | str]:
    """Features (float32) per image, or the reason an image could not be fed to the model.

    Decoding happens here, in the caller's process; only the uint8 batch goes to the model
    (which may be a proxy to a model shared across processes)."""
    height, width = model.input_size()
    arrays: list[np.ndarray | str] = []
    for data in encoded:
        try:
            arrays.append(model_input(data, height, width))
        except Exception as error:  # validated bytes; a failure here is an image, not the run
            arrays.append(f"{type(error).__name__}: {error}")
    good = [i for i, a in enumerate(arrays) if isinstance(a, np.ndarray)]
    results: list[np.ndarray | str] = list(arrays)
    if good:
        batch = np.stack([arrays[i] for i in good])
        out = pool(np.asarray(model.predict(batch), dtype=np.float32), pooling)
        for row, i in enumerate(good):
            results[i] = out[row]
    return results


# One axis of a model input's shape: a size, or free (None; ONNX names a free axis by a string).
Dim: TypeAlias = int | str | None


def _fixed(dim: Dim) -> int | None:
    return dim if isinstance(dim, int) and dim > 0 else None


def fixed_batch(shape: Sequence[Dim]) -> int | None:
    """The batch size a model's input fixes (exporters fix 1 unless told otherwise), or None."""
    return _fixed(shape[0]) if len(shape) else None


def in_batches_of(
    size: int | None, call: Callable[[np.ndarray], np.ndarray]
) -> Callable[[np.ndarray], np.ndarray]:
    """`call` for a model whose batch axis is fixed at `size`: any batch is fed in pieces of that
    size, the last one padded with zeros and its padding's rows left out of the result."""
    if size is None:
        return call

    def pieces(batch: np.ndarray) -> np.ndarray:
        outputs = []
        for start in range(0, len(batch), size):
            piece = batch[start : start + size]
            short = size - len(piece)
            if short:
                piece = np.concatenate([piece, np.zeros((short, *piece.shape[1:]), piece.dtype)])
            outputs.append(np.asarray(call(piece))[: size - short])
        return np.concatenate(outputs)

    return pieces


def input_layout(
    shape: Sequence[Dim], given: tuple[int, int] | None, what: str
) -> tuple[bool, tuple[int, int]]:
    """(channels_first, (height, width)) of a 4-D image input: NHWC when its last axis is 3,
    else NCHW when its second is (what a model exported from PyTorch has). A free spatial axis
    takes `given` (input_size); a fixed one must agree with it."""
    if len(shape) != 4 or 3 not in (shape[1], shape[3]):
        raise ModelUnavailable(
            f"{what}: expected an image input (batch, 3, height, width) or (batch, height, width, 3), "
            f"got {list(shape)}"
        )
    channels_first = shape[3] != 3
    spatial = (shape[2], shape[3]) if channels_first else (shape[1], shape[2])
    height, width = _fixed(spatial[0]), _fixed(spatial[1])
    if height is not None and width is not None:
        size = (int(height), int(width))
        if given is not None and given != size:
            raise ModelUnavailable(
                f"{what} takes {size[1]}x{size[0]} images, not input_size {given[1]}x{given[0]}"
            )
        return channels_first, size
    if given is None:
        raise ModelUnavailable(
            f"{what}: its input {list(shape)} fixes no height and width; give input_size WIDTHxHEIGHT"
        )
    return channels_first, given


def visible_gpus() -> int:
    """NVIDIA GPUs this process may use, from the device files and CUDA_VISIBLE_DEVICES, without
    importing TensorFlow or touching the driver (it decides, in every worker process, whether the
    model is shared; see FeatureConfig.model_copies)."""
    devices = len(glob.glob("/dev/nvidia[0-9]*"))
    visible = os.environ.get("CUDA_VISIBLE_DEVICES")
    if visible is None:
        return devices
    ids = [part for part in visible.split(",") if part.strip()]
    if not ids or ids[0].strip() == "-1":
        return 0
    return min(devices, len(ids))
