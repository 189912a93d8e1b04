"""PyTorch: a `torch.utils.data.IterableDataset` over `iter_examples` (`TorchImages`), and a
map-style `Dataset` with `len()` and `[i]` over `RecordArray` (`TorchImageArray`: ArrayRecord
output, or uncompressed TFRecord with its `.idx` files), no TensorFlow.

Each DataLoader worker of each distributed rank reads its own part of the split
(`files.worker_shard`, then `plan_reads`: with the `.idx` files a contiguous run of
records it seeks to), so every record arrives exactly once per epoch across all of them.
`torch` is an optional extra (`pip install .[torch]`); this module imports without it, and the
dataset says how to install it when made.

Not done here: shuffling (the order is the same every epoch; shuffle in a buffer downstream),
and equal counts per rank (ranks may differ by up to the worker count with `.idx` files, more
without them; under DDP, drop the last batches or use `join`).
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator
from typing import Any

from beam_tfrecord.edges import ParsedRecord, TorchValue
from beam_tfrecord.labels import AnyKind
from beam_tfrecord.labels import kind as label_kind
from beam_tfrecord.read.examples import decode_pixels, iter_examples
from beam_tfrecord.read.files import split_files, worker_shard
from beam_tfrecord.read.random_access import RecordArray

try:  # an optional extra: without it the classes still import, and refuse to be made
    from torch.utils.data import Dataset as _MapBase
    from torch.utils.data import IterableDataset as _Base
except ImportError:  # pragma: no cover - exercised where torch is not installed
    _Base = object
    _MapBase = object

__all__ = ["TorchImageArray", "TorchImages", "detection_collate", "distributed_position", "torch_position"]

INSTALL_HINT = "PyTorch is not installed: pip install 'beam-tfrecord[torch]' (or .[torch] in a checkout)"


def distributed_position() -> tuple[int, int]:
    """(rank, world size) of this process: from torch.distributed when it is initialized, else
    from torchrun's RANK and WORLD_SIZE variables, else (0, 1).

    Taken when the dataset is made, in the training process: a DataLoader worker started with
    `spawn` or `forkserver` (macOS's default, common with CUDA) has no process group, and would
    otherwise read every rank's records."""
    import torch.distributed as dist

    if dist.is_available() and dist.is_initialized():
        return dist.get_rank(), dist.get_world_size()
    return int(os.environ.get("RANK", 0)), int(os.environ.get("WORLD_SIZE", 1))


def torch_position(rank: int = 0, world_size: int = 1) -> tuple[int, int, int, int]:
    """(rank, world size, worker, workers) of the calling DataLoader worker process."""
    from torch.utils.data import get_worker_info

    info = get_worker_info()
    worker, workers = (info.id, info.num_workers) if info is not None else (0, 1)
    return rank, world_size, worker, workers


def detection_collate(
    batch: list[tuple[TorchValue, TorchValue]],
) -> tuple[tuple[TorchValue, ...], tuple[TorchValue, ...]]:
    """A DataLoader's `collate_fn` for detection: (images, targets) as tuples, since each image
    has its own number of objects (torchvision's detection references collate so)."""
    images, targets = zip(*batch, strict=True)
    return images, targets


class TorchImages(_Base):
    """An IterableDataset of `(image, label)` (image alone for an unlabeled run; `(features,
    label)` for a `features_only` run) from a conversion's split, local or gs://.

    Images are uint8 tensors `[channels, height, width]` (torchvision's layout), decoded with
    Pillow; `image_size=(height, width)` resizes (bilinear, JPEGs decoded at a reduced DCT scale
    where that still leaves enough pixels). `transform` is applied to each image tensor.

    A detection run (`--annotations`) gives `(image, target)` with torchvision's detection
    target dict (what `torchvision.models.detection` models take in train mode): `boxes`
    float32 [N, 4] pixel xyxy, `labels` int64 from 1 (the stored ids: torchvision's class 0 is
    the background, so `num_classes` is the class count + 1), `area` float32, `iscrowd` int64,
    and where the run stored masks `masks` uint8 [N, height, width]; boxes and masks follow
    `image_size`. There `transform(image, target)` returns both, as torchvision's detection
    transforms do. Batch with `collate_fn=detection_collate` (lists: objects differ per image).

    A segmentation run gives `(image, mask)`: the class ids as an int64 tensor `[height, width]`
    (what `cross_entropy` takes as its target; a run of 16-bit masks' ids past 255 as stored),
    stretched by the nearest neighbour to `image_size`; `transform` takes the image.

    Args:
      output: the output folder of a conversion.
      split: the split to read.
      image_size: `(height, width)` to resize to, or None for the stored size.
      channels: 3 (RGB) or 1 (grayscale).
      transform: a callable on each image tensor (torchvision transforms, ...).
    """

    def __init__(
        self,
        output: str,
        split: str = "train",
        *,
        image_size: tuple[int, int] | None = None,
        channels: int = 3,
        transform: Callable[..., TorchValue] | None = None,
    ) -> None:
        if _Base is object:
            raise ImportError(INSTALL_HINT)
        super().__init__()
        self.files = split_files(output, split)  # a wrong folder fails here, with the readers' message
        self.files.check_targets_readable(output, "TorchImages")
        self.target = label_kind(self.files.kinds[0])  # the run's first kind gives the target
        self.output, self.split = output, split
        self.image_size, self.channels, self.transform = image_size, channels, transform
        self.rank, self.world_size = distributed_position()

    def __iter__(self) -> Iterator[TorchValue]:
        index, count = worker_shard(*torch_position(self.rank, self.world_size))
        for record in iter_examples(self.output, self.split, shard=(index, count)):
            yield _item(record, self.target, self.channels, self.image_size, self.transform)


class TorchImageArray(_MapBase):
    """A map-style Dataset of the same items as `TorchImages`: `len(dataset)` and `dataset[i]`,
    so a DataLoader may shuffle (`shuffle=True`) and a `DistributedSampler` may divide records.

    Needs random access: ArrayRecord output (`--file_format array_record`, local files), or
    uncompressed TFRecord with its `.idx` files. Takes the same arguments as `TorchImages`.
    """

    def __init__(
        self,
        output: str,
        split: str = "train",
        *,
        image_size: tuple[int, int] | None = None,
        channels: int = 3,
        transform: Callable[..., TorchValue] | None = None,
    ) -> None:
        if _MapBase is object:
            raise ImportError(INSTALL_HINT)
        super().__init__()
        self.records = RecordArray(output, split)
        self.records.files.check_targets_readable(output, "TorchImageArray")
        self.target = label_kind(self.records.files.kinds[0])  # the run's first kind gives the target
        self.image_size, self.channels, self.transform = image_size, channels, transform

    def __len__(self) -> int:
        return len(self.records)

    def __getitem__(self, position: int) -> TorchValue:
        record = self.records[position]
        return _item(record, self.target, self.channels, self.image_size, self.transform)


def _channels_first(image: Any) -> Any:
    """[C, H, W] from [H, W, C]; a stack's [D, H, W, C] as [C, D, H, W], what Conv3d takes."""
    return image.permute(2, 0, 1) if image.dim() == 3 else image.permute(3, 0, 1, 2)


def _item(
    record: ParsedRecord,
    kind: AnyKind,
    channels: int,
    image_size: tuple[int, int] | None,
    transform: Callable[..., TorchValue] | None,
) -> TorchValue:
    """One record as the datasets give it: (image, label), image alone, (features, label), or
    a detection record's (image, torchvision target dict): the target is the run's first kind
    of label's (`labels.LabelKind.torch_target`)."""
    import torch

    if kind.transforms_target:  # the transform takes (image, target), as torchvision's detection ones
        image = _channels_first(torch.from_numpy(decode_pixels(record, channels, image_size)))
        target = kind.torch_target(record, image_size)
        return transform(image, target) if transform is not None else (image, target)
    label = kind.torch_target(record, image_size)
    if "image" in record or "pixels" in record:
        value = _channels_first(torch.from_numpy(decode_pixels(record, channels, image_size)))
        if transform is not None:
            value = transform(value)
    else:
        value = torch.from_numpy(record["features"])
    return value if label is None else (value, label)
