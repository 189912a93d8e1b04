"""What a kill costs: a full run of the synthetic set, then the same run SIGKILLed once about half
of its shard tasks are done, then the same command again (it resumes), each a whole process;
medians of `--repeats` and the rerun's share of a full run.

    .venv/bin/python benchmarks/resume.py --images 32000 --repeats 3
    .venv/bin/python benchmarks/resume.py --images 2000 --repeats 1    # a quick check

The kill comes when the run's temporary folder holds done files (write/done_files.py) for at least
`--kill_at` of the shard tasks, counted from the staged plan. The rerun also checks its output:
the same digests as the full run's.
"""

from __future__ import annotations

import argparse
import glob
import json
import os
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
sys.path.insert(0, HERE)

from run import measure  # noqa: E402
from synthetic import ensure_dataset  # noqa: E402


def command(data: str, out: str) -> list[str]:
    args = ["--input", data, "--output", out, "--runner=DirectRunner", "--no_progress"]
    return [sys.executable, "-m", "pipelines.convert", *args]


def digests(out: str) -> dict[str, str]:
    with open(os.path.join(out, "summary.json")) as handle:
        summary = json.load(handle)
    return {name: split["digest"] for name, split in summary["splits"].items()}


def kill_at_fraction(data: str, out: str, fraction: float) -> tuple[float, int, int]:
    """Start a run and SIGKILL its process group once `fraction` of its shard tasks are done; returns
    (seconds it ran, shard tasks done, shard tasks planned)."""
    started = time.perf_counter()
    child = subprocess.Popen(
        command(data, out),
        cwd=ROOT,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,
    )
    shard_tasks = done = 0
    while child.poll() is None:
        plans = glob.glob(os.path.join(out, ".temp-beam-tfrecord-*", "plan", "shards", "*.json"))
        shard_tasks = len(plans) or shard_tasks
        done = len(glob.glob(os.path.join(out, ".temp-beam-tfrecord-*", "done", "*.written.json")))
        if shard_tasks and done >= fraction * shard_tasks:
            os.killpg(child.pid, signal.SIGKILL)
            child.wait()
            return time.perf_counter() - started, done, shard_tasks
        time.sleep(0.02)
    raise SystemExit("the run ended before the kill: use more images")


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--images", type=int, default=32000)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--kill_at", type=float, default=0.5, help="share of shard tasks done at the kill")
    parser.add_argument("--data", default=os.path.join(HERE, "data"))
    args = parser.parse_args()
    data = ensure_dataset(os.path.join(args.data, f"synthetic-{args.images}"), args.images)
    full, rerun, killed_after, done_share = [], [], [], []
    for _ in range(args.repeats):
        scratch = tempfile.mkdtemp(prefix="bench-resume-")
        try:
            out = os.path.join(scratch, "full")
            wall, _, code = measure(command(data, out))
            assert code == 0
            full.append(wall)
            expected = digests(out)
            out = os.path.join(scratch, "killed")
            seconds, done, shard_tasks = kill_at_fraction(data, out, args.kill_at)
            killed_after.append(seconds)
            done_share.append(done / shard_tasks)
            wall, _, code = measure(command(data, out))
            assert code == 0 and digests(out) == expected, "the resumed run differs from the full run"
            rerun.append(wall)
        finally:
            shutil.rmtree(scratch, ignore_errors=True)
    result = {
        "images": args.images,
        "full_s": statistics.median(full),
        "killed_after_s": statistics.median(killed_after),
        "tasks_done_at_kill": statistics.median(done_share),
        "rerun_s": statistics.median(rerun),
        "rerun_share_of_full": round(statistics.median(rerun) / statistics.median(full), 3),
        "runs": {"full": full, "rerun": rerun},
        "load": os.getloadavg(),
    }
    print(json.dumps(result, indent=2))


if __name__ == "__main__":
    main()
