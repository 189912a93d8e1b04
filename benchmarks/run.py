"""Time the TensorFlow tutorial loop and this pipeline on the same synthetic dataset, each as a
whole process, several times; print medians, peak memory of the process tree and the ratios.

    .venv/bin/python benchmarks/run.py --images 8000 --repeats 3
    .venv/bin/python benchmarks/run.py --images 32000 --variant loop --variant pipeline-size
    .venv/bin/python benchmarks/run.py --images 32000 --baseline /tmp/old   # another checkout too

`--baseline PATH` adds the variant `baseline`: the same command (`pipeline-size`) run from another
checkout of this project (say an earlier commit: `git worktree add /tmp/old cd09707`), with this
interpreter, interleaved with the rest.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import platform
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

import psutil

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
sys.path.insert(0, HERE)

from synthetic import ensure_dataset  # noqa: E402

VARIANTS: dict[str, list[str]] = {
    "loop": [],
    "pipeline-size": [],  # the defaults: shard count from --shard_size_mb and the workers
    "pipeline-4": ["--num_shards", "4"],
    "pipeline-1worker": ["--direct_num_workers=1"],  # one in-process worker, threads only
    "pipeline-2threads": ["--read_threads=2"],  # Beam's workers, 2 read threads inside each task
    "baseline": [],  # pipeline-size from the --baseline checkout
}


def command(variant: str, data: str, out: str, extra: list[str]) -> list[str]:
    if variant == "loop":
        return [sys.executable, os.path.join(HERE, "tf_loop.py"), data, os.path.join(out, "loop.tfrecord")]
    args = ["--input", data, "--output", out, "--runner=DirectRunner", "--no_progress"]
    return [sys.executable, "-m", "pipelines.convert", *args, *VARIANTS[variant], *extra]


def tree_rss(process: psutil.Process) -> int:
    total = 0
    for p in [process, *process.children(recursive=True)]:
        with contextlib.suppress(psutil.Error):
            total += p.memory_info().rss
    return total


def measure(cmd: list[str], cwd: str = ROOT) -> tuple[float, int, int]:
    """(wall seconds, peak RSS of the process tree in bytes, exit code)."""
    started = time.perf_counter()
    child = subprocess.Popen(cmd, cwd=cwd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    watched = psutil.Process(child.pid)
    peak = 0
    while child.poll() is None:
        with contextlib.suppress(psutil.Error):
            peak = max(peak, tree_rss(watched))
        time.sleep(0.05)
    wall = time.perf_counter() - started
    if child.returncode != 0:
        sys.stderr.write(child.stderr.read().decode(errors="replace")[-3000:])
    return wall, peak, child.returncode


def dir_bytes(path: str, exclude: tuple[str, ...] = ()) -> int:
    return sum(
        os.path.getsize(os.path.join(d, f))
        for d, _, files in os.walk(path)
        for f in files
        if not f.startswith(".") and f not in exclude
    )


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--images", type=int, default=8000)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--data", help="dataset folder (default: benchmarks/data/synthetic-N-SEED)")
    parser.add_argument("--variant", action="append", choices=sorted(VARIANTS), help="repeatable")
    parser.add_argument("--json", help="also write the results here")
    parser.add_argument("--baseline", help="another checkout of this project: adds the variant `baseline`")
    args, extra = parser.parse_known_args()
    variants = args.variant or [v for v in VARIANTS if v != "baseline"]
    if args.baseline and "baseline" not in variants:
        variants.append("baseline")
    if "baseline" in variants and not args.baseline:
        parser.error("--variant baseline needs --baseline PATH")
    data = args.data or os.path.join(HERE, "data", f"synthetic-{args.images}-{args.seed}")
    ensure_dataset(data, args.images, args.seed)
    input_bytes = dir_bytes(data)
    print(
        f"{args.images} images, {input_bytes / 1e6:.0f} MB, {os.cpu_count()} cores, "
        f"{platform.python_version()}, extra pipeline args: {extra or 'none'}"
    )
    results: dict[str, dict] = {}
    for repeat in range(args.repeats):
        for variant in variants:  # interleaved, so drift hits every variant alike
            out = tempfile.mkdtemp(prefix=f"bench-{variant}-")
            try:
                cwd = args.baseline if variant == "baseline" else ROOT
                wall, peak, code = measure(command(variant, data, out, extra), cwd)
                written = dir_bytes(out, exclude=("summary.json", "rejects.jsonl", "labels.txt"))
            finally:
                shutil.rmtree(out, ignore_errors=True)
            entry = results.setdefault(variant, {"wall": [], "peak": [], "codes": [], "out": written})
            entry["wall"].append(wall)
            entry["peak"].append(peak)
            entry["codes"].append(code)
            print(
                f"  run {repeat + 1} {variant}: {wall:.1f} s, peak {peak / 1e6:.0f} MB, exit {code}",
                flush=True,
            )
    loop_wall = statistics.median(results["loop"]["wall"]) if "loop" in results else None
    print(f"\n{'variant':<16}{'median s':>9}{'images/s':>10}{'peak MB':>9}{'out/in':>8}{'x loop':>8}")
    for variant, entry in results.items():
        wall = statistics.median(entry["wall"])
        ratio = f"{wall / loop_wall:.2f}" if loop_wall else "-"
        print(
            f"{variant:<16}{wall:>9.1f}{args.images / wall:>10.0f}{max(entry['peak']) / 1e6:>9.0f}"
            f"{entry['out'] / input_bytes:>8.3f}{ratio:>8}"
        )
        entry.update(median_wall=wall, images_per_s=args.images / wall, ratio_to_loop=ratio)
    if args.json:
        with open(args.json, "w") as handle:
            json.dump(
                {"images": args.images, "input_bytes": input_bytes, "results": results}, handle, indent=2
            )


if __name__ == "__main__":
    main()
