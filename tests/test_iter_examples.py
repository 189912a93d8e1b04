"""iter_examples and the split between workers, without TensorFlow: every record arrives exactly
once across 2 DataLoader workers x 2 ranks, with and without index files, byte for byte."""

from __future__ import annotations

import hashlib
import json
import shutil
import subprocess
import sys
import textwrap

import conftest
import imagegen
import numpy as np
import pytest

import beam_tfrecord
from beam_tfrecord.read.examples import decode_image
from beam_tfrecord.read.files import plan_reads, split_files, worker_shard

# sizes differ, as in real folders
FILES = {
    f"{k}/{k}.{i}.jpg": imagegen.jpeg(40 + i, 30, seed=i + 10 * (k == "dog"))
    for k in ("cat", "dog")
    for i in range(7)
}


@pytest.fixture(scope="module")
def outputs(tmp_path_factory):
    """The same 14 pictures as 3 indexed shards, and as 2 gzip shards (no index)."""
    root = tmp_path_factory.mktemp("in")
    imagegen.write_tree(root, FILES)
    plain, gzip = root.parent / "plain", root.parent / "gzip"
    assert conftest.convert(root, plain, "--num_shards", "3") == 0
    assert (
        conftest.convert(root, gzip, "--num_shards", "2", "--compression", "gzip", "--schema", "simple") == 0
    )
    return plain, gzip


def test_worker_shards_are_distinct_and_cover_every_pair():
    pairs = [worker_shard(rank, 2, worker, 2) for rank in range(2) for worker in range(2)]
    assert sorted(pairs) == [(i, 4) for i in range(4)]
    with pytest.raises(ValueError, match="out of range"):
        worker_shard(2, 2, 0, 2)


@pytest.mark.parametrize("which", [0, 1], ids=["indexed", "gzip"])
def test_every_record_exactly_once_across_2_workers_x_2_ranks(outputs, which):
    out = str(outputs[which])
    seen = []
    for rank in range(2):
        for worker in range(2):
            part = beam_tfrecord.iter_examples(out, "train", shard=worker_shard(rank, 2, worker, 2))
            names = [record["filename"] for record in part]
            assert names  # 14 records over 4 workers: nobody idles
            seen += names
    assert sorted(seen) == sorted(FILES)


def test_the_index_gives_contiguous_balanced_runs_that_seek(outputs):
    files = split_files(str(outputs[0]), "train")
    parts = [plan_reads(files.paths, index, 4) for index in range(4)]
    lengths = [sum(r.stop - r.start for r in ranges) for ranges in parts]
    assert sorted(lengths) == [3, 3, 4, 4] and sum(lengths) == 14
    assert any(r.offset > 0 for ranges in parts for r in ranges)  # a worker starts mid-shard


def test_records_are_plain_python_and_numpy(outputs):
    plain, gzip = (str(p) for p in outputs)
    records = {r["filename"]: r for r in beam_tfrecord.iter_examples(plain, "train")}
    assert set(records) == set(FILES)
    for name, record in records.items():
        assert record["image"] == FILES[name] and record["format"] == "jpeg"
        assert record["label"] == (0 if name.startswith("cat") else 1) and record["label_text"] == name[:3]
        assert (record["height"], record["width"], record["channels"]) == (30, 40 + int(name[-5]), 3)
        assert record["sha256"] == hashlib.sha256(FILES[name]).hexdigest()
    simple = next(iter(beam_tfrecord.iter_examples(gzip, "train")))
    assert set(simple) == {"image", "height", "width", "channels", "filename", "sha256", "label"}
    pixels = decode_image(simple["image"], 3, (16, 20))
    assert pixels.shape == (16, 20, 3) and pixels.dtype == np.uint8


def test_reads_with_tensorflow_unimportable(outputs):
    code = textwrap.dedent(
        """
        import hashlib, json, sys

        class NoTensorFlow:
            def find_spec(self, name, path=None, target=None):
                if name.split(".")[0] in ("tensorflow", "keras", "tensorflow_datasets"):
                    raise ImportError(f"{name} is blocked in this test")

        sys.meta_path.insert(0, NoTensorFlow())
        import beam_tfrecord

        seen = {}
        for index in range(4):
            for record in beam_tfrecord.iter_examples(sys.argv[1], "train", shard=(index, 4)):
                seen[record["filename"]] = hashlib.sha256(record["image"]).hexdigest()
        assert not [m for m in sys.modules if m.startswith("tensorflow")]
        print(json.dumps(seen))
        """
    )
    result = subprocess.run(
        [sys.executable, "-c", code, str(outputs[0])], check=True, capture_output=True, text=True
    )
    seen = json.loads(result.stdout)
    assert seen == {name: hashlib.sha256(data).hexdigest() for name, data in FILES.items()}


def test_the_torch_dataset_says_how_to_install_torch():
    try:
        import torch  # noqa: F401
    except ImportError:
        with pytest.raises(ImportError, match=r"pip install .*\[torch\]"):
            beam_tfrecord.TorchImages("anywhere")
    else:
        pytest.skip("torch is installed: tests/test_torch.py runs the dataset")


def test_a_stale_index_is_not_trusted_and_no_record_is_lost(outputs, tmp_path):
    """An .idx short of its shard (an older run's, a copy cut short) would drop records
    silently if trusted: its count disagrees with summary.json, so the shards are read whole."""
    copy = tmp_path / "copy"
    shutil.copytree(outputs[0], copy)
    index = sorted(copy.glob("*.idx"))[0]
    index.write_text("".join(index.read_text().splitlines(keepends=True)[:-1]))
    seen = [
        r["filename"] for i in range(2) for r in beam_tfrecord.iter_examples(str(copy), "train", shard=(i, 2))
    ]
    assert sorted(seen) == sorted(FILES)
