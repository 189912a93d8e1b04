"""What stalled gs:// downloads cost a conversion: the command reads N images from the GCS emulator
through tests/gcsemulator.py's FaultProxy, which accepts K of the downloads and never answers them
(evenly spread: for 100 and 4, the 12th, 38th, 62nd and 88th), against the same run without faults.

    .venv/bin/python benchmarks/storage_stalls.py --images 100 --stalls 4 --timeouts default,60 --threads 1,8

Each run is `python -m pipelines.convert` in a fresh process (gs:// input, local output, so the only
downloads are the images), with STORAGE_EMULATOR_HOST pointing at the proxy. `--timeouts` lists
`--gcs_timeout_s` values; `default` passes none (5 s; google-cloud-storage's own limit before it
was bounded). `--threads` lists `--read_threads`: with 1 the reads, and so the stalls, come one
after another (the worst case); with 8 (the default for gs:// input) stalls can overlap. The
proxy never lets a stall go: only the client's time limit ends it. `--repo` runs the command of
another checkout (e.g. a copy of main), to measure before a change.

Prints one JSON line per run: the wall time, the records and rejects, and the added seconds
(`extra_s`, against the run without stalls at the same thread count and limit).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
import uuid

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path[:0] = [os.path.join(REPO, "tests")]

from gcsemulator import EMULATOR_ENV, Emulator, FaultProxy  # noqa: E402
from imagegen import jpeg  # noqa: E402


def stall_places(downloads: int, stalls: int) -> list[int]:
    """`stalls` download ordinals spread evenly over the first `downloads`."""
    return [round((j + 0.5) * downloads / stalls) for j in range(stalls)]


def run_once(repo: str, url: str, input_path: str, timeout: str, threads: int) -> dict:
    """One conversion through the proxy at `url`: wall time and what the summary says."""
    with tempfile.TemporaryDirectory(prefix="stalls-") as out:
        command = [sys.executable, "-m", "pipelines.convert", "--input", input_path, "--output", out]
        command += ["--no_progress", "--read_threads", str(threads)]
        if timeout != "default":
            command += ["--gcs_timeout_s", timeout]
        env = {**os.environ, EMULATOR_ENV: url, "PYTHONPATH": repo}
        started = time.monotonic()
        done = subprocess.run(command, cwd=repo, env=env, capture_output=True, text=True, timeout=3600)
        wall = time.monotonic() - started
        if done.returncode != 0:
            raise RuntimeError(f"the run failed ({done.returncode}): {done.stderr[-2000:]}")
        with open(os.path.join(out, "summary.json")) as handle:
            summary = json.load(handle)
    return {"wall_s": round(wall, 1), "records": summary["records"], "rejects": summary["rejects"]}


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--images", type=int, default=100)
    parser.add_argument("--stalls", type=int, default=4)
    parser.add_argument("--timeouts", default="default", help="--gcs_timeout_s values; default passes none")
    parser.add_argument("--threads", default="1,8", help="--read_threads values")
    parser.add_argument("--repo", default=REPO, help="the checkout whose command runs")
    args = parser.parse_args()

    files = {f"c{i % 4}/{i:04d}.jpg": jpeg(64, 48, seed=i) for i in range(args.images)}
    places = stall_places(args.images, args.stalls)
    with Emulator() as emulator:
        bucket = f"stalls-{uuid.uuid4().hex[:8]}"
        emulator.upload_tree(bucket, "images", files)
        input_path = f"gs://{bucket}/images"
        for timeout in args.timeouts.split(","):
            for threads in (int(t) for t in args.threads.split(",")):
                row = {"images": args.images, "gcs_timeout_s": timeout, "read_threads": threads}
                with FaultProxy(emulator.url, {}) as proxy:
                    clean = run_once(args.repo, proxy.url, input_path, timeout, threads)
                faults = {"download": dict.fromkeys(places, "stall")}
                with FaultProxy(emulator.url, faults, hold_s=3600) as proxy:
                    stalled = run_once(args.repo, proxy.url, input_path, timeout, threads)
                row |= {
                    "clean_s": clean["wall_s"],
                    "stalled_s": stalled["wall_s"],
                    "extra_s": round(stalled["wall_s"] - clean["wall_s"], 1),
                    "stalls": proxy.stalls,
                    "records": stalled["records"],
                    "rejects": stalled["rejects"],
                }
                print(json.dumps(row), flush=True)


if __name__ == "__main__":
    main()
