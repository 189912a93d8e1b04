"""The path-planned sink without Beam: shard planning, ordered bounded threads, streaming shard
files, temp-then-rename with empty shards for fully rejected tasks."""

from __future__ import annotations

import contextlib
import os
import struct
import threading
import time
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import imagegen
import pytest
from conftest import plan_listing
from outputcheck import read_records

from beam_tfrecord.elements import RejectLine, ShardKey
from beam_tfrecord.images.inputs import ordered_map, ordered_submit
from beam_tfrecord.images.options import ImageConfig
from beam_tfrecord.names import TFRECORD, ShardFormat
from beam_tfrecord.plan.listing import InputFile
from beam_tfrecord.plan.planner import LabelSource, shard_tasks
from beam_tfrecord.write import shardwriter
from beam_tfrecord.write.messages import Example
from beam_tfrecord.write.records import convert_input


def test_shard_tasks_cover_every_input_once_balanced_by_bytes():
    listing = [InputFile(f"c/{i}.jpg", f"/x/c/{i}.jpg", 1000 + (i % 7) * 100) for i in range(200)]
    plan = plan_listing(listing, LabelSource("folder"), {"train": 0.5, "test": 0.5}, num_shards=4)
    tasks = shard_tasks(plan)
    assert [(t.split, t.index, t.count) for t in tasks] == [
        (s, i, 4) for s in ("train", "test") for i in range(4)
    ]
    relpaths = [item.relpath for t in tasks for item in t.inputs]
    assert sorted(relpaths) == sorted(f.relpath for f in listing)
    for split in ("train", "test"):
        sizes = [sum(i.size for i in t.inputs) for t in tasks if t.split == split]
        assert max(sizes) - min(sizes) <= 1600
    assert tasks == shard_tasks(plan_listing(listing[::-1], LabelSource("folder"), plan.splits, num_shards=4))


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

    assert list(ordered_map(slow, range(60), threads=3, window=5)) == [i * i for i in range(60)]
    assert 2 <= peak[0] <= 3


def test_ordered_map_in_batches_keeps_order_and_bounds_work_in_flight():
    consumed: list[int] = []

    def feed():
        for i in range(61):  # not a multiple of the batch: the last batch is short
            assert i + 1 - len(consumed) <= 12  # taken from the input, not yet given back: the window
            yield i

    def slow(i: int) -> int:
        time.sleep(0.001 * (i % 3))
        return i * i

    for result in ordered_map(slow, feed(), threads=2, window=12, batch=4):
        consumed.append(result)
    assert consumed == [i * i for i in range(61)]


def fails_at(index: int, error: BaseException | None = None) -> Callable[[int], int]:
    """The identity on ints, raising `error` (a worker's bug by default) at `index`."""

    def work(i: int) -> int:
        if i == index:
            raise error if error is not None else RuntimeError("bug in a worker")
        return i

    return work


def test_ordered_map_in_batches_gives_the_results_before_an_error():
    boom = fails_at(6)
    seen = []
    with pytest.raises(RuntimeError, match="bug in a worker"):
        for result in ordered_map(boom, range(20), threads=2, batch=4):
            seen.append(result)
    assert seen == [0, 1, 2, 3, 4, 5]


@contextlib.contextmanager
def pool_held_up() -> Iterator[ThreadPoolExecutor]:
    """A pool of one thread, busy until the block ends: every batch the consumer gets done in
    the block, it ran itself. A safety timer frees the thread after 30 s, so a regression fails
    an assertion rather than hanging."""
    held = threading.Event()
    release = threading.Timer(30, held.set)
    release.start()
    with ThreadPoolExecutor(1) as pool:
        pool.submit(held.wait)
        try:
            yield pool
        finally:
            held.set()
    release.cancel()


def test_ordered_submit_runs_what_the_pool_has_not_started_on_the_consumers_thread():
    """The consumer never waits for a batch no pool thread has taken: with the pool's one thread
    held up, every item is still done, in order, on the consumer's own thread."""
    ran_on: list[int] = []

    def square(i: int) -> int:
        ran_on.append(threading.get_ident())
        return i * i

    with pool_held_up() as pool:
        assert list(ordered_submit(pool, square, range(21), window=8, batch=4)) == [i * i for i in range(21)]
    assert set(ran_on) == {threading.get_ident()}


def test_ordered_submit_gives_a_stolen_batchs_error_after_the_results_before_it():
    boom = fails_at(9)
    seen = []
    with pool_held_up() as pool, pytest.raises(RuntimeError, match="bug in a worker"):
        for result in ordered_submit(pool, boom, range(20), window=8, batch=4):
            seen.append(result)
    assert seen == list(range(9))


def test_ordered_submit_raises_an_interrupt_in_a_batch_it_runs_at_once():
    """Ctrl-C in a batch the consumer runs itself is not held back behind the results before it
    (nor lost if the consumer stops before it would have come out)."""

    interrupted = fails_at(5, KeyboardInterrupt())
    seen = []
    with pool_held_up() as pool, pytest.raises(KeyboardInterrupt):
        for result in ordered_submit(pool, interrupted, range(20), window=8, batch=4):
            seen.append(result)
    assert seen == [0, 1, 2, 3]  # item 4's result, in the interrupted batch, is not waited for


def test_ordered_submit_closed_early_runs_nothing_it_had_not_started():
    ran: list[int] = []
    with pool_held_up() as pool:
        results = ordered_submit(pool, lambda i: ran.append(i) or i, range(40), window=12, batch=4)
        assert next(results) == 0  # the consumer ran the first batch itself
        results.close()
    assert ran == [0, 1, 2, 3]


def test_ordered_map_passes_worker_errors_on():
    boom = fails_at(4)
    with pytest.raises(RuntimeError, match="bug in a worker"):
        list(ordered_map(boom, range(10), threads=2))


def write_plan(tmp_path, files: dict[str, bytes], num_shards: int, compression: str, file_format="tfrecord"):
    """Convert and write every shard task of a plan the way the sink's DoFn does, in one ShardFiles."""
    imagegen.write_tree(tmp_path / "in", files)
    listing = [InputFile(r, str(tmp_path / "in" / r), len(d)) for r, d in sorted(files.items())]
    plan = plan_listing(listing, LabelSource("folder"), {"train": 1.0}, num_shards=num_shards)
    out = tmp_path / "out"
    writer = shardwriter.ShardFiles(
        str(out / ".temp-beam-tfrecord-test"), ShardFormat(file_format, compression)
    )
    outcomes = []
    for task in shard_tasks(plan):
        shard = ShardKey(task.split, task.index, task.count)
        for item in task.inputs:
            outcome = convert_input(item, "tfds", ImageConfig(), shard)
            outcomes.append(outcome)
            if not isinstance(outcome, RejectLine):
                writer.write(outcome.shard, outcome.example)
    return out, plan, writer.close(), outcomes


@pytest.mark.parametrize(
    ("file_format", "compression", "suffix"),
    [
        ("tfrecord", "none", ".tfrecord"),
        ("tfrecord", "gzip", ".tfrecord.gz"),
        ("array_record", "none", ".array_record"),
    ],
)
def test_shards_appear_only_at_finalize_and_temp_files_go(tmp_path, file_format, compression, suffix):
    files = {f"a/{i}.jpg": imagegen.jpeg(seed=i) for i in range(6)} | {"a/bad.jpg": b""}
    out, plan, written, outcomes = write_plan(tmp_path, files, 2, compression, file_format)
    assert not [n for n in os.listdir(out) if "record" in n and not n.startswith(".temp")]
    assert sum(s.records for s in written) == 6 and len(outcomes) == 7
    shard_format = ShardFormat(file_format, compression)
    finals = shardwriter.finalize_shards(written, str(out), shard_format, plan.shard_counts)
    shardwriter.remove_tree(str(out / ".temp-beam-tfrecord-test"))
    names = [f"train-0000{i}-of-00002{suffix}" for i in range(2)]
    indexes = [f"{name}.idx" for name in names] if shard_format.indexed else []  # gzip, ArrayRecord: none
    assert sorted(os.listdir(out)) == sorted(names + indexes)
    assert [os.path.basename(f.path) for f in finals] == names
    assert [f.records for f in finals] == [s.records for s in sorted(written, key=lambda s: s.index)]
    assert len(read_records(out, "train")) == 6


def test_a_shard_whose_every_input_was_rejected_is_written_empty(tmp_path):
    files = {"a/1.jpg": imagegen.jpeg(seed=1), "a/2.jpg": b"", "a/3.jpg": b"", "a/4.jpg": b""}
    out, plan, written, _ = write_plan(tmp_path, files, 3, "none")
    assert len(written) < 3  # some shard task produced no record at all
    finals = shardwriter.finalize_shards(written, str(out), TFRECORD, plan.shard_counts)
    names = [f"train-0000{i}-of-00003.tfrecord" for i in range(3)]
    assert sorted(os.listdir(out))[-6:] == sorted(names + [f"{n}.idx" for n in names])
    assert sum(f.records for f in finals) == 1 and sorted(f.records for f in finals)[:2] == [0, 0]
    assert len(read_records(out, "train")) == 1


def test_index_files_point_at_every_record_as_written(tmp_path):
    """DALI's tfrecord2idx format, `offset size` per record with the framing, from the writer."""
    files = {f"a/{i}.jpg": imagegen.jpeg(seed=i) for i in range(5)}
    out, plan, written, _ = write_plan(tmp_path, files, 2, "none")
    finals = shardwriter.finalize_shards(written, str(out), TFRECORD, plan.shard_counts)
    total = 0
    for final in finals:
        data = Path(final.path).read_bytes()
        lines = Path(final.path + ".idx").read_text().splitlines()
        assert len(lines) == final.records
        end = 0
        for line in lines:
            offset, size = map(int, line.split())
            assert offset == end  # records follow each other with nothing between
            (length,) = struct.unpack("<Q", data[offset : offset + 8])
            assert size == length + 16
            example = Example.FromString(data[offset + 12 : offset + size - 4])
            assert example.features.feature["image/filename"].bytes_list.value[0].startswith(b"a/")
            end += size
        assert end == len(data)
        total += len(lines)
    assert total == 5


def test_records_of_a_closed_shard_fail_loudly(tmp_path):
    """The sink relies on a shard task's records arriving together; if a runner ever split them,
    writing on would lose records at finalize, so the writer refuses."""
    writer = shardwriter.ShardFiles(str(tmp_path / "temp"))
    writer.write(ShardKey("train", 0, 2), b"a")
    writer.write(ShardKey("train", 1, 2), b"b")
    with pytest.raises(RuntimeError, match="use the beam sink"):
        writer.write(ShardKey("train", 0, 2), b"c")


def test_a_shard_written_twice_is_refused_at_finalize(tmp_path):
    first = shardwriter.ShardFiles(str(tmp_path / "temp"))
    first.write(ShardKey("train", 0, 1), b"a")
    second = shardwriter.ShardFiles(str(tmp_path / "temp"))
    second.write(ShardKey("train", 0, 1), b"b")
    with pytest.raises(RuntimeError, match="written twice"):
        shardwriter.finalize_shards([*first.close(), *second.close()], str(tmp_path), TFRECORD, {"train": 1})
    assert not (tmp_path / "train-00000-of-00001.tfrecord").exists()
