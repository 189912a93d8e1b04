"""What reading a conversion's shards costs before any parse or decode: CPU per record for
TensorFlow's `TFRecordDataset` (its framing and CRC32C checks), for the same framing and checks in
this project's `iter_records` (the CRC by google-crc32c), for `iter_records` without the checks,
and for `iter_records` fed to tf.data through `Dataset.from_generator`. It is what `load_dataset`
pays above the decode from memory that benchmarks/read.py compares it with.

Three more ways skip the CRC checks and stay inside tf.data's public ops, cutting records at the
`.idx` offsets: `tf.io.read_file` of a whole shard and `tf.strings.substr`; `FixedLengthRecordDataset`
reading one range of whole records (`--chunk-mb`) per dataset; and a `tf.py_function` that reads
`--chunk-records` records with one `os.pread` and frames them with `iter_records`. They ask
whether a reader that skips the checks, or checks them with google-crc32c, could beat
`TFRecordDataset` without an op of our own.

    .venv/bin/python benchmarks/read.py --images 3000 --photos --readers in-memory   # makes the output
    .venv/bin/python benchmarks/record_framing.py /tmp/beam-tfrecord-bench/out-photos-3000

Each way reads every shard of the output's train split `--passes` times in this one process (the
files in the page cache after the first); the median pass is printed, in CPU seconds, GB/s of
shard bytes and microseconds a record.
"""

from __future__ import annotations

import argparse
import io
import os
import statistics
import time
from collections.abc import Callable

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("output", help="a conversion's output folder on this machine (TFRecord shards)")
    parser.add_argument("--split", default="train")
    parser.add_argument("--passes", type=int, default=5)
    parser.add_argument("--chunk-mb", type=float, default=16.0, help="FixedLengthRecordDataset's range")
    parser.add_argument("--chunk-records", type=int, default=32, help="records a py_function call reads")
    args = parser.parse_args()

    import numpy as np
    import tensorflow as tf

    from beam_tfrecord.read.files import read_index
    from beam_tfrecord.read.tf_data import split_files
    from beam_tfrecord.write.tfrecord_files import FOOTER_BYTES, HEADER_BYTES, iter_records

    paths = split_files(args.output, args.split).paths
    size = sum(os.path.getsize(path) for path in paths)
    indexes = {path: read_index(path) for path in paths}
    if any(index is None for index in indexes.values()):
        raise SystemExit(f"{args.output}: every shard needs its .idx file (uncompressed TFRecord output)")

    def python_framing(check_crc: bool) -> int:
        count = 0
        for path in paths:
            with open(path, "rb") as handle:
                count += sum(1 for _ in iter_records(handle, check_crc=check_crc))
        return count

    def shard_records(path: bytes):  # -> Iterator[bytes]
        with open(path, "rb") as handle:
            yield from iter_records(handle)

    generated = tf.data.Dataset.from_tensor_slices(paths).interleave(
        lambda path: tf.data.Dataset.from_generator(
            shard_records, args=(path,), output_signature=tf.TensorSpec([], tf.string)
        ),
        cycle_length=len(paths),
    )

    def cut(path: str, entries: list[tuple[int, int]], start: int) -> tuple:
        """(path, first byte, length, bytes after, record starts in the range, record sizes)."""
        end = entries[-1][0] + entries[-1][1]
        starts = [offset - start + HEADER_BYTES for offset, _ in entries]
        sizes = [framed - HEADER_BYTES - FOOTER_BYTES for _, framed in entries]
        return path, start, end - start, os.path.getsize(path) - end, starts, sizes

    def ranges(limit: int, by_count: bool) -> list[tuple]:
        found = []
        for path, index in indexes.items():
            first = 0
            for last in range(1, len(index) + 1):
                span = index[last - 1][0] + index[last - 1][1] - index[first][0]
                full = last - first >= limit if by_count else span >= limit
                if full or last == len(index):
                    found.append(cut(path, index[first:last], index[first][0]))
                    first = last
        return found

    def columns(found: list[tuple]) -> tuple:
        return (
            tf.constant([row[0] for row in found]),
            *(tf.constant([row[i] for row in found], tf.int64) for i in (1, 2, 3)),
            *(tf.ragged.constant([row[i] for row in found], tf.int64) for i in (4, 5)),
        )

    shards = [cut(path, index, 0) for path, index in indexes.items()]
    whole = tf.data.Dataset.from_tensor_slices(columns(shards)).interleave(
        lambda path, _start, _length, _after, starts, sizes: tf.data.Dataset.from_tensor_slices(
            tf.strings.substr(tf.io.read_file(path), starts, sizes)
        ),
        cycle_length=1,
    )
    fixed = (
        tf.data.Dataset.from_tensor_slices(columns(ranges(int(args.chunk_mb * 2**20), False)))
        .interleave(
            lambda path, start, length, after, starts, sizes: tf.data.FixedLengthRecordDataset(
                path, record_bytes=length, header_bytes=start, footer_bytes=after
            ).map(lambda block: tf.strings.substr(block, starts, sizes)),
            cycle_length=1,
        )
        .unbatch()
    )

    def read_range(path: tf.Tensor, start: tf.Tensor, length: tf.Tensor) -> np.ndarray:
        with open(path.numpy(), "rb", buffering=0) as handle:
            block = os.pread(handle.fileno(), int(length), int(start))
        return np.array(list(iter_records(io.BytesIO(block))), dtype=object)

    called = tf.data.Dataset.from_tensor_slices(columns(ranges(args.chunk_records, True))[:3]).interleave(
        lambda path, start, length: tf.data.Dataset.from_tensor_slices(
            tf.ensure_shape(tf.py_function(read_range, [path, start, length], tf.string), [None])
        ),
        cycle_length=1,
    )

    def count(dataset: tf.data.Dataset) -> int:
        return int(dataset.reduce(0, lambda total, _: total + 1))

    ways: dict[str, Callable[[], int]] = {
        "TFRecordDataset (TensorFlow's CRC32C)": lambda: count(tf.data.TFRecordDataset(paths)),
        "iter_records, CRC by google-crc32c": lambda: python_framing(True),
        "iter_records, no CRC check": lambda: python_framing(False),
        "iter_records through from_generator": lambda: count(generated),
        "read_file + substr, no CRC": lambda: count(whole),
        f"FixedLengthRecordDataset {args.chunk_mb:g} MB, no CRC": lambda: count(fixed),
        f"py_function {args.chunk_records} records, google-crc32c": lambda: count(called),
    }
    expected = sum(len(index) for index in indexes.values())
    print(f"{args.output}: {len(paths)} shards, {size / 1e6:.0f} MB")
    print(f"{'way':42s} {'CPU s':>7s} {'GB/s':>6s} {'us/record':>10s}")
    for name, read in ways.items():
        seconds, records = [], 0
        for _ in range(args.passes):
            start = time.process_time()
            records = read()
            seconds.append(time.process_time() - start)
        if records != expected:
            raise SystemExit(f"{name} read {records} records, the index lists {expected}")
        median = statistics.median(seconds)
        print(f"{name:42s} {median:7.3f} {size / median / 1e9:6.2f} {median / records * 1e6:10.0f}")


if __name__ == "__main__":
    main()
