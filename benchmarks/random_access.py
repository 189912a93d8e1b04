"""ArrayRecord against TFRecord output of one input, in one run on one machine:

- write: the conversion's wall time and the bytes it leaves (shards, and `.idx` for TFRecord);
- random reads: `--reads` records drawn uniformly (one seed), fetched one at a time, in that
  order: ArrayRecord (`RecordArray`), TFRecord at its `.idx` offsets (`RecordArray`), and
  TFRecord read front to back, keeping those records (what a reader without an index must do);
- an epoch: Grain's `MapDataset` over `ArrayRecordDataSource` with a global shuffle, every
  record fetched (bytes, then bytes parsed to dicts), against one front-to-back TFRecord pass.

Every measurement is a fresh process; they alternate, `--repeats` times, and the medians are
printed with their ratios. The files are read from the page cache (written just before, and
smaller than memory): this measures the formats' work, not a disk's seeks.

    .venv/bin/python benchmarks/random_access.py --images 4000 --repeats 3
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import random
import shutil
import statistics
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
sys.path.insert(0, HERE)

# name -> (--file_format, --array_record_options): TFDS's default (zstd inside), and uncompressed.
FORMATS = {
    "tfrecord": ("tfrecord", None),
    "array_record": ("array_record", None),
    "array_record_uncompressed": ("array_record", "group_size:1,uncompressed"),
}
READS = ("array_record", "array_record_uncompressed", "tfrecord_idx", "tfrecord_scan")
EPOCHS = ("grain_shuffled_bytes", "grain_shuffled_parsed", "tfrecord_scan_bytes")


def convert(folder: str, output: str, name: str) -> float:
    shutil.rmtree(output, ignore_errors=True)
    file_format, options = FORMATS[name]
    args = ["--input", folder, "--output", output, "--runner=DirectRunner", "--no_progress"]
    args += ["--file_format", file_format] + (["--array_record_options", options] if options else [])
    start = time.perf_counter()
    subprocess.run(
        [sys.executable, "-m", "pipelines.convert", *args], check=True, cwd=ROOT, capture_output=True
    )
    return time.perf_counter() - start


def output_bytes(output: str) -> dict[str, int]:
    shards = indexes = 0
    for name in os.listdir(output):
        size = os.path.getsize(os.path.join(output, name))
        if name.endswith((".tfrecord", ".array_record")):
            shards += size
        elif name.endswith(".idx"):
            indexes += size
    return {"shards": shards, "idx": indexes}


def measure_reads(kind: str, outputs: dict[str, str], reads: int) -> dict:
    """In a fresh process: seconds to fetch `reads` uniformly drawn records, one at a time."""
    import beam_tfrecord
    from beam_tfrecord.read.files import RecordRange, iter_range, split_files

    output = outputs[kind if kind.startswith("array_record") else "tfrecord"]
    files = split_files(output, "train")
    positions = [random.Random(0).randrange(files.records) for _ in range(reads)]
    records = None if kind == "tfrecord_scan" else beam_tfrecord.RecordArray(output, "train")
    start = time.perf_counter()
    if records is None:
        wanted, found, position = set(positions), {}, 0
        for path in files.paths:
            for record in iter_range(RecordRange(path)):
                if position in wanted:
                    found[position] = record
                position += 1
        got = [found[p] for p in positions]
    else:
        got = [records.serialized(p) for p in positions]
    seconds = time.perf_counter() - start
    return {"kind": kind, "seconds": seconds, "bytes": sum(map(len, got))}


def measure_epoch(kind: str, outputs: dict[str, str]) -> dict:
    """In a fresh process: records/s of one epoch (imports before the clock starts)."""
    import grain

    import beam_tfrecord
    from beam_tfrecord.read.files import RecordRange, iter_range, split_files

    start, count = time.perf_counter(), 0
    if kind == "tfrecord_scan_bytes":
        for path in split_files(outputs["tfrecord"], "train").paths:
            for _ in iter_range(RecordRange(path)):
                count += 1
    else:
        output = outputs["array_record"]
        source = grain.sources.ArrayRecordDataSource(split_files(output, "train").paths)
        dataset = grain.MapDataset.source(source).shuffle(seed=0)
        if kind == "grain_shuffled_parsed":
            dataset = dataset.map(beam_tfrecord.record_parser(output, "train"))
        for _ in dataset:
            count += 1
    seconds = time.perf_counter() - start
    return {"kind": kind, "records": count, "per_s": count / seconds}


def _child(what: str, kind: str, outputs: dict[str, str], reads: int) -> dict:
    args = [sys.executable, __file__, "--child", what, kind, json.dumps(outputs), "--reads", str(reads)]
    done = subprocess.run(args, check=True, cwd=ROOT, capture_output=True, text=True)
    return json.loads(done.stdout.strip().splitlines()[-1])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--images", type=int, default=4000)
    parser.add_argument("--size", default="400x300", help="WIDTHxHEIGHT of the synthetic JPEGs")
    parser.add_argument("--reads", type=int, default=1000)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--work", default="/tmp/beam-tfrecord-bench")
    parser.add_argument("--child", nargs=3, metavar=("WHAT", "KIND", "OUTPUTS"), help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        what, kind, outputs = args.child
        outputs = json.loads(outputs)
        result = measure_reads(kind, outputs, args.reads) if what == "reads" else measure_epoch(kind, outputs)
        print(json.dumps(result))
        return

    from synthetic import ensure_dataset

    width, height = map(int, args.size.split("x"))
    name = f"{width}x{height}-{args.images}"
    folder = ensure_dataset(
        os.path.join(args.work, f"images-{name}"), args.images, size=(width, height), broken=False
    )
    outputs = {f: os.path.join(args.work, f"ar-bench-{f}-{name}") for f in FORMATS}
    writes: dict[str, list[float]] = {f: [] for f in FORMATS}
    reads: dict[str, list[float]] = {k: [] for k in READS}
    epochs: dict[str, list[float]] = {k: [] for k in EPOCHS}
    for _ in range(args.repeats):
        for name in FORMATS:
            writes[name].append(convert(folder, outputs[name], name))
        for kind in READS:
            reads[kind].append(_child("reads", kind, outputs, args.reads)["seconds"])
        for kind in EPOCHS:
            epochs[kind].append(_child("epoch", kind, outputs, args.reads)["per_s"])

    sizes = {f: output_bytes(outputs[f]) for f in FORMATS}
    with open(os.path.join(outputs["tfrecord"], "summary.json"), encoding="utf-8") as handle:
        records = json.load(handle)["records"]
    print(f"machine: {platform.machine()}, {os.cpu_count()} cores; {records} records of {args.size} JPEGs")
    print(f"{'write (conversion wall time)':34} {'median s':>9} {'shard MB':>9} {'.idx MB':>8}")
    for f in FORMATS:
        print(
            f"{f:34} {statistics.median(writes[f]):9.2f} {sizes[f]['shards'] / 1e6:9.1f} "
            f"{sizes[f]['idx'] / 1e6:8.2f}"
        )
    base = statistics.median(reads["array_record"])
    print(f"\n{args.reads} uniform random reads, one at a time {'median s':>9} {'x ArrayRecord':>14}")
    for kind in READS:
        seconds = statistics.median(reads[kind])
        print(f"{kind:43} {seconds:9.3f} {seconds / base:14.1f}")
    print(f"\none epoch {'records/s (median)':>43}")
    for kind in EPOCHS:
        print(f"{kind:34} {statistics.median(epochs[kind]):18.0f}")
    print(json.dumps({"writes": writes, "sizes": sizes, "reads": reads, "epochs": epochs}))


if __name__ == "__main__":
    main()
