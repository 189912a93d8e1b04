"""The plain conversion across cores: images/s with 1, 2, 4, ... local worker processes on the
same synthetic set, each run a whole process, interleaved; medians and the ratio to 1 worker.

    .venv/bin/python benchmarks/scaling.py --images 32000 --workers 1,2,4,8,16 --repeats 3
    .venv/bin/python benchmarks/scaling.py --images 500 --workers 1,2 --repeats 1   # a quick check

Every run is `python -m pipelines.convert` with its defaults and
`--direct_num_workers=N --direct_running_mode=multi_processing`, so 1 worker is one worker
process like the others (not the in-process runner that small runs get by default) and the ratio
measures scaling alone. The shard count follows the parallelism as in any run (at least one
shard task per worker while shards stay above a quarter of --shard_size_mb). Whole-process time
includes the launcher (listing, planning) and starting and stopping the workers, which do not
shrink with more workers; `--steady` also runs 2N images and reports N / (t(2N) - t(N)) per
worker count, the rate once running.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import shutil
import statistics
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)

from run import measure  # noqa: E402
from synthetic import ensure_dataset  # noqa: E402


def convert(data: str, workers: int, extra: list[str]) -> tuple[float, int]:
    out = tempfile.mkdtemp(prefix=f"bench-scaling-{workers}-")
    try:
        cmd = [
            sys.executable,
            "-m",
            "pipelines.convert",
            "--input",
            data,
            "--output",
            out,
            "--runner=DirectRunner",
            "--no_progress",
            f"--direct_num_workers={workers}",
            "--direct_running_mode=multi_processing",
            *extra,
        ]
        wall, peak, code = measure(cmd)
        if code != 0:
            raise SystemExit(f"{workers} workers: pipelines.convert exited {code}")
        return wall, peak
    finally:
        shutil.rmtree(out, ignore_errors=True)


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--images", type=int, default=32000)
    parser.add_argument("--workers", default="1,2,4,8,16", help="comma-separated worker counts")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--data", help="dataset folder (default: benchmarks/data/synthetic-N-SEED)")
    parser.add_argument("--steady", action="store_true", help="also run 2N images: the marginal rate")
    parser.add_argument("--json", help="also write the results here")
    args, extra = parser.parse_known_args()
    counts = [int(w) for w in args.workers.split(",")]
    data = args.data or os.path.join(HERE, "data", f"synthetic-{args.images}-{args.seed}")
    sets = {args.images: ensure_dataset(data, args.images, args.seed)}
    if args.steady:
        double = os.path.join(HERE, "data", f"synthetic-{2 * args.images}-{args.seed}")
        sets[2 * args.images] = ensure_dataset(double, 2 * args.images, args.seed)
    print(
        f"{args.images} images, {os.cpu_count()} cores, {platform.machine()}, Python "
        f"{platform.python_version()}, extra pipeline args: {extra or 'none'}",
        flush=True,
    )
    walls: dict[tuple[int, int], list[float]] = {}
    peaks: dict[tuple[int, int], int] = {}
    for repeat in range(args.repeats):
        for images, path in sets.items():
            for workers in counts:  # interleaved, so drift hits every count alike
                wall, peak = convert(path, workers, extra)
                walls.setdefault((images, workers), []).append(wall)
                peaks[images, workers] = max(peaks.get((images, workers), 0), peak)
                print(f"  run {repeat + 1}, {images} images, {workers} workers: {wall:.1f} s", flush=True)
    n = args.images
    one = n / statistics.median(walls[n, counts[0]])
    header = "| workers | median s | images/s | x 1 worker | per worker | peak MB (tree) |"
    if args.steady:
        header += " steady images/s | steady x 1 |"
    print(f"\n{header}\n|{'---|' * (header.count('|') - 1)}")
    rows = []
    steady_one = None
    for workers in counts:
        wall = statistics.median(walls[n, workers])
        rate = n / wall
        row = {"workers": workers, "median_s": wall, "images_per_s": rate, "ratio": rate / one}
        line = (
            f"| {workers} | {wall:.1f} | {rate:,.0f} | {rate / one:.2f} | {rate / one / workers:.0%} "
            f"| {peaks[n, workers] / 1e6:,.0f} |"
        )
        if args.steady:
            marginal = n / (statistics.median(walls[2 * n, workers]) - wall)
            steady_one = steady_one or marginal
            row.update(steady_images_per_s=marginal, steady_ratio=marginal / steady_one)
            line += f" {marginal:,.0f} | {marginal / steady_one:.2f} |"
        rows.append(row)
        print(line)
    if args.json:
        with open(args.json, "w") as handle:
            walls_by_run = {
                f"{images} images, {workers} workers": v for (images, workers), v in walls.items()
            }
            json.dump(
                {"images": n, "cores": os.cpu_count(), "rows": rows, "walls": walls_by_run}, handle, indent=2
            )


if __name__ == "__main__":
    main()
