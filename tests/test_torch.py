"""The PyTorch adapter in a real DataLoader with worker processes (`make test-torch` installs
torch; elsewhere this module is skipped, and tests/test_iter_examples.py covers the split)."""

from __future__ import annotations

import subprocess
import sys

import conftest
import imagegen
import pytest

torch = pytest.importorskip("torch")

import beam_tfrecord  # noqa: E402

FILES = {f"{k}/{k}.{i}.jpg": imagegen.jpeg(40 + i, 30, seed=i) for k in ("cat", "dog") for i in range(5)}


def test_two_workers_read_every_record_once_as_tensors(tmp_path):
    imagegen.write_tree(tmp_path / "in", FILES)
    out = tmp_path / "out"
    assert conftest.convert(tmp_path / "in", out, "--num_shards", "2") == 0
    dataset = beam_tfrecord.TorchImages(str(out), "train", image_size=(16, 24))
    loader = torch.utils.data.DataLoader(dataset, batch_size=4, num_workers=2)
    images, labels = [], []
    for batch_images, batch_labels in loader:
        assert batch_images.dtype == torch.uint8 and tuple(batch_images.shape[1:]) == (3, 16, 24)
        images.append(batch_images)
        labels += batch_labels.tolist()
    assert sorted(labels) == [0] * 5 + [1] * 5  # each record once across the two workers
    assert sum(len(b) for b in images) == 10
    image, label = next(iter(beam_tfrecord.TorchImages(str(out), "train")))
    assert image.shape[0] == 3 and image.shape[1] == 30 and label.item() in (0, 1)


def test_readme_pytorch_example_trains_one_epoch(pets_tree, tmp_path):
    """In a fresh process without TensorFlow, as a PyTorch job runs: torch's backward pass and
    TensorFlow's runtime (loaded here by the conversion) in one process can crash each other."""
    from test_readme_example import readme_block

    out = tmp_path / "out"
    assert conftest.convert(pets_tree, out) == 0
    block = readme_block("torch")
    assert 'OUTPUT = "output"' in block
    code = block.replace('OUTPUT = "output"', f"OUTPUT = {str(out)!r}")
    code += "\nimport sys\nassert 'tensorflow' not in sys.modules\n"
    code += "print(tuple(images.shape[1:]), loss.item() > 0)\n"
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stderr[-2000:]
    assert result.stdout.strip().splitlines()[-1] == "(3, 64, 64) True"
