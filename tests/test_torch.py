"""The PyTorch adapter in a real DataLoader with worker processes (`make test-torch` installs
torch; elsewhere this module is skipped, and tests/test_iter_examples.py covers the split).

The loaders here start their workers with "spawn": this test process has loaded TensorFlow (the
conversions, other tests in the same pytest worker), and a worker forked from it crashed at
random (a segfault in one of three whole-suite runs); a PyTorch job has no TensorFlow loaded.
Spawned workers also prove the datasets pickle, as they must for "spawn" and "forkserver"."""

from __future__ import annotations

import subprocess
import sys

import conftest
import imagegen
import pytest

torch = pytest.importorskip("torch")

import beam_tfrecord  # noqa: E402

SPAWN = "spawn"  # see the module's docstring
FILES = {f"{k}/{k}.{i}.jpg": imagegen.jpeg(40 + i, 30, seed=i) for k in ("cat", "dog") for i in range(5)}


def test_two_workers_read_every_record_once_as_tensors(tmp_path):
    imagegen.write_tree(tmp_path / "in", FILES)
    out = tmp_path / "out"
    assert conftest.convert(tmp_path / "in", out, "--num_shards", "2") == 0
    dataset = beam_tfrecord.TorchImages(str(out), "train", image_size=(16, 24))
    loader = torch.utils.data.DataLoader(dataset, batch_size=4, num_workers=2, multiprocessing_context=SPAWN)
    images, labels = [], []
    for batch_images, batch_labels in loader:
        assert batch_images.dtype == torch.uint8 and tuple(batch_images.shape[1:]) == (3, 16, 24)
        images.append(batch_images)
        labels += batch_labels.tolist()
    assert sorted(labels) == [0] * 5 + [1] * 5  # each record once across the two workers
    assert sum(len(b) for b in images) == 10
    image, label = next(iter(beam_tfrecord.TorchImages(str(out), "train")))
    assert image.shape[0] == 3 and image.shape[1] == 30 and label.item() in (0, 1)


def test_array_record_output_is_a_map_style_dataset_a_loader_shuffles(tmp_path):
    imagegen.write_tree(tmp_path / "in", FILES)
    out = tmp_path / "out"
    assert conftest.convert(tmp_path / "in", out, "--num_shards", "2", "--file_format", "array_record") == 0
    dataset = beam_tfrecord.TorchImageArray(str(out), "train", image_size=(16, 24))
    assert len(dataset) == 10 and tuple(dataset[7][0].shape) == (3, 16, 24)
    loader = torch.utils.data.DataLoader(
        dataset, batch_size=4, num_workers=2, shuffle=True, multiprocessing_context=SPAWN
    )
    labels = [label for _, batch in loader for label in batch.tolist()]
    assert sorted(labels) == [0] * 5 + [1] * 5  # every record once, from worker processes


DETECTION_STEP = """
import sys

import torch
import torchvision

import beam_tfrecord
from beam_tfrecord.read.pytorch import detection_collate

torch.manual_seed(0)
data = beam_tfrecord.TorchImages(OUTPUT, "train")
loader = torch.utils.data.DataLoader(data, batch_size=3, num_workers=2, collate_fn=detection_collate)
images, targets = next(iter(loader))
target = targets[0]
assert target["boxes"].dtype == torch.float32 and target["boxes"].shape[1] == 4
assert target["labels"].dtype == torch.int64 and int(target["labels"].min()) >= 1  # 0: background
assert target["masks"].dtype == torch.uint8 and target["masks"].shape[1:] == images[0].shape[1:]
model = torchvision.models.detection.fasterrcnn_mobilenet_v3_large_fpn(
    weights=None, weights_backbone=None, num_classes=3, min_size=128, max_size=192
)
model.train()
losses = model([image.float() / 255 for image in images], list(targets))
loss = sum(losses.values())
loss.backward()
assert 'tensorflow' not in sys.modules
print(sorted(losses), bool(torch.isfinite(loss)))
"""


def test_a_torchvision_detector_trains_a_step_on_torch_images(shapes_output):
    """torchvision's own detector takes TorchImages' targets as they come (in a fresh process
    without TensorFlow, as above)."""
    out, _ = shapes_output
    code = f"OUTPUT = {str(out)!r}\n" + DETECTION_STEP
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stderr[-2000:]
    expected = "['loss_box_reg', 'loss_classifier', 'loss_objectness', 'loss_rpn_box_reg'] True"
    assert result.stdout.strip().splitlines()[-1] == expected


def test_torch_images_targets_follow_image_size(shapes_output):
    out, _ = shapes_output
    stored = {r["filename"]: r["boxes"] for r in beam_tfrecord.iter_examples(str(out))}
    data = beam_tfrecord.TorchImages(str(out), "train", image_size=(32, 48))
    for (image, target), name in zip(data, stored, strict=True):
        assert tuple(image.shape) == (3, 32, 48) and tuple(target["masks"].shape[1:]) == (32, 48)
        torch.testing.assert_close(target["boxes"], torch.from_numpy(stored[name] / 2))
