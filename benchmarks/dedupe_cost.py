"""What --dedupe costs: the hashing pass alone, and whole runs with and without it.

The synthetic dataset (benchmarks/synthetic.py: 400x300 JPEGs, about 27 KB each) is written
once; the hashing pass is then timed on a warm page cache (as the pipeline's own read of the
same files is), and whole `python -m pipelines.convert` processes are timed interleaved, with
and without --dedupe, median of the repeats.

    .venv/bin/python benchmarks/dedupe_cost.py --images 8000 --repeats 3
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

from synthetic import ensure_dataset

from beam_tfrecord.plan.dedupe import content_hashes
from beam_tfrecord.plan.listing import list_inputs

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def hash_pass(data: str) -> tuple[float, int, int]:
    """Seconds for the launcher's hashing pass over every listed file, files, bytes."""
    files = list_inputs(data)
    started = time.perf_counter()
    content_hashes([f.path for f in files])
    return time.perf_counter() - started, len(files), sum(f.size for f in files)


def run_seconds(data: str, out: str, dedupe: bool) -> float:
    cmd = [sys.executable, "-m", "pipelines.convert", f"--input={data}", f"--output={out}"]
    cmd += ["--no_progress", "--overwrite", "--runner=DirectRunner"] + (["--dedupe"] if dedupe else [])
    started = time.perf_counter()
    subprocess.run(cmd, cwd=ROOT, check=True, capture_output=True)
    return time.perf_counter() - started


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--images", type=int, default=8000)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--data_dir", default=os.path.join(tempfile.gettempdir(), "beam-tfrecord-bench"))
    args = parser.parse_args()
    data = ensure_dataset(os.path.join(args.data_dir, f"synthetic-{args.images}"), args.images)
    hash_pass(data)  # warm the page cache, as the runs below find it
    passes = [hash_pass(data) for _ in range(args.repeats)]
    seconds, files, size = statistics.median(p[0] for p in passes), passes[0][1], passes[0][2]
    print(
        f"hashing pass: {files} files, {size / 1e6:.0f} MB: {seconds:.2f} s ({files / seconds:,.0f} files/s)"
    )
    out = tempfile.mkdtemp(prefix="beam-tfrecord-dedupe-")
    try:
        times: dict[bool, list[float]] = {False: [], True: []}
        for _ in range(args.repeats):
            for dedupe in (False, True):
                times[dedupe].append(run_seconds(data, out, dedupe))
    finally:
        shutil.rmtree(out, ignore_errors=True)
    plain, deduped = statistics.median(times[False]), statistics.median(times[True])
    print(f"whole run, median of {args.repeats}: {plain:.1f} s without --dedupe, {deduped:.1f} s with it")
    print(f"  runs without: {times[False]}; with: {times[True]}")
    print(f"  cost: {deduped - plain:+.1f} s ({100 * (deduped / plain - 1):+.0f}%)")


if __name__ == "__main__":
    main()
