"""What reading a conversion's shards costs before any parse or decode: CPU per record for
TensorFlow's `TFRecordDataset` (its framing and CRC32C checks), for the same framing and checks in
this project's `iter_records` (the CRC by google-crc32c), for `iter_records` without the checks,
and for `iter_records` fed to tf.data through `Dataset.from_generator`. It is what `load_dataset`
pays above the decode from memory that benchmarks/read.py compares it with.

    .venv/bin/python benchmarks/read.py --images 3000 --photos --readers in-memory   # makes the output
    .venv/bin/python benchmarks/record_framing.py /tmp/beam-tfrecord-bench/out-photos-3000

Each way reads every shard of the output's train split `--passes` times in this one process (the
files in the page cache after the first); the median pass is printed, in CPU seconds, GB/s of
shard bytes and microseconds a record.
"""

from __future__ import annotations

import argparse
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
    args = parser.parse_args()

    import tensorflow as tf

    from beam_tfrecord.read.tf_data import split_files
    from beam_tfrecord.write.tfrecord_files import iter_records

    paths = split_files(args.output, args.split).paths
    size = sum(os.path.getsize(path) for path in paths)

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
    ways: dict[str, Callable[[], int]] = {
        "TFRecordDataset (TensorFlow's CRC32C)": lambda: int(
            tf.data.TFRecordDataset(paths).reduce(0, lambda count, _: count + 1)
        ),
        "iter_records, CRC by google-crc32c": lambda: python_framing(True),
        "iter_records, no CRC check": lambda: python_framing(False),
        "iter_records through from_generator": lambda: int(generated.reduce(0, lambda count, _: count + 1)),
    }
    print(f"{args.output}: {len(paths)} shards, {size / 1e6:.0f} MB")
    print(f"{'way':40s} {'CPU s':>7s} {'GB/s':>6s} {'us/record':>10s}")
    for name, read in ways.items():
        seconds, records = [], 0
        for _ in range(args.passes):
            start = time.process_time()
            records = read()
            seconds.append(time.process_time() - start)
        median = statistics.median(seconds)
        print(f"{name:40s} {median:7.3f} {size / median / 1e9:6.2f} {median / records * 1e6:10.0f}")


if __name__ == "__main__":
    main()
