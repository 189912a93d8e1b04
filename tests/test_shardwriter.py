"""The path-planned sink without Beam: shard planning, ordered bounded threads, temp-then-rename."""

from __future__ import annotations

import os
import threading
import time

import imagegen
import pytest
from outputcheck import read_records

from beam_tfrecord import shardwriter
from beam_tfrecord.images import ImageOptions
from beam_tfrecord.listing import InputFile
from beam_tfrecord.plan import LabelSource, make_plan, shard_tasks
from beam_tfrecord.records import convert_input


def test_shard_tasks_cover_every_input_once_balanced_by_bytes():
    listing = [InputFile(f"c/{i}.jpg", f"/x/c/{i}.jpg", 1000 + (i % 7) * 100) for i in range(200)]
    plan = make_plan(listing, LabelSource("folder"), {"train": 0.5, "test": 0.5}, num_shards=4)
    tasks = shard_tasks(plan)
    assert [(t.split, t.index, t.count) for t in tasks] == [
        (s, i, 4) for s in ("train", "test") for i in range(4)
    ]
    relpaths = [item.relpath for t in tasks for item in t.inputs]
    assert sorted(relpaths) == sorted(f.relpath for f in listing)
    for split in ("train", "test"):
        sizes = [sum(i.size for i in t.inputs) for t in tasks if t.split == split]
        assert max(sizes) - min(sizes) <= 1600
    assert tasks == shard_tasks(make_plan(listing[::-1], LabelSource("folder"), plan.splits, num_shards=4))


def test_ordered_map_keeps_order_and_bounds_work_in_flight():
    in_flight, peak, lock = [0], [0], threading.Lock()

    def slow(i: int) -> int:
        with lock:
            in_flight[0] += 1
            peak[0] = max(peak[0], in_flight[0])
        time.sleep(0.001 * (i % 3))
        with lock:
            in_flight[0] -= 1
        return i * i

    assert list(shardwriter.ordered_map(slow, range(60), threads=3, window=5)) == [i * i for i in range(60)]
    assert 2 <= peak[0] <= 3


def test_ordered_map_passes_worker_errors_on():
    def boom(i: int) -> int:
        if i == 4:
            raise RuntimeError("bug in a worker")
        return i

    with pytest.raises(RuntimeError, match="bug in a worker"):
        list(shardwriter.ordered_map(boom, range(10), threads=2))


@pytest.mark.parametrize("compression", ["none", "gzip"])
def test_shards_appear_only_at_finalize_and_temp_files_go(tmp_path, compression):
    files = {f"a/{i}.jpg": imagegen.jpeg(seed=i) for i in range(6)} | {"a/bad.jpg": b""}
    imagegen.write_tree(tmp_path / "in", files)
    listing = [InputFile(r, str(tmp_path / "in" / r), len(d)) for r, d in sorted(files.items())]
    plan = make_plan(listing, LabelSource("folder"), {"train": 1.0}, num_shards=2)
    out = tmp_path / "out"
    temp = shardwriter.temp_dir_for(str(out), "test")

    def convert(item):
        return convert_input(item, "tfds", ImageOptions())

    written, outcomes = [], []
    for task in shard_tasks(plan):
        converted = shardwriter.ordered_map(convert, task.inputs, threads=2)
        shard, seen = shardwriter.write_shard(task, temp, converted, compression)
        written.append(shard)
        outcomes += seen
    assert not [n for n in os.listdir(out) if "tfrecord" in n and not n.startswith(".temp")]
    assert sum(s.records for s in written) == 6 and len(outcomes) == 7
    assert all(getattr(o, "example", b"") == b"" for o in outcomes)  # bytes never leave the shard
    finals = shardwriter.finalize_shards(written, str(out), temp, compression)
    suffix = ".tfrecord.gz" if compression == "gzip" else ".tfrecord"
    assert sorted(os.listdir(out)) == [f"train-0000{i}-of-00002{suffix}" for i in range(2)]
    assert [os.path.basename(f) for f in finals] == sorted(os.listdir(out))
    assert len(read_records(out, "train")) == 6
