"""What one small conversion costs beyond its pictures: CPU seconds per in-process run of the
command on a few dozen pictures, where nearly all of it is Beam building, translating and running
the job graph (what a small append, a quick try-out and every end-to-end test pay), and the number
of transforms in that graph.

    .venv/bin/python benchmarks/small_run.py --runs 15 --rounds 3
    .venv/bin/python benchmarks/small_run.py --baseline /tmp/old    # another checkout, interleaved

Each round runs `--runs` conversions of the same tree (60 pictures in two class folders) in one
fresh process, after one untimed run that imports and warms everything. With `--baseline PATH`
(`git worktree add /tmp/old HEAD~1`), each round runs that checkout too, in turn, and the ratio is
given per round and as the median of the rounds' ratios (this machine's speed drifts between
rounds more than between the two runs of one round).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)


def measure(root: str, runs: int) -> dict[str, float]:
    """In a process whose path starts at `root`'s checkout: seconds of CPU and wall per run."""
    sys.path[:0] = [root, os.path.join(ROOT, "tests")]
    from pathlib import Path

    import apache_beam as beam
    from imagegen import jpeg, write_tree

    from pipelines.convert import run

    folder = Path(tempfile.mkdtemp(prefix="small-run-"))
    files = {f"{c}/{c}.{i}.jpg": jpeg(40, 30, seed=i + 7 * len(c)) for c in ("cat", "dog") for i in range(30)}
    write_tree(folder / "in", files)

    def once(index: int) -> None:
        code = run(["--input", str(folder / "in"), "--output", str(folder / f"out{index}"), "--no_progress"])
        assert code == 0, code

    once(0)
    cpu, wall = time.process_time(), time.perf_counter()
    for index in range(1, runs + 1):
        once(index)
    cpu, wall = (time.process_time() - cpu) / runs, (time.perf_counter() - wall) / runs
    with open(folder / "out1" / "summary.json") as summary:
        records = json.load(summary)["records"]
    return {"cpu_s": cpu, "wall_s": wall, "records": records, "beam": beam.__version__}


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--runs", type=int, default=15, help="conversions timed in each round")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--baseline", help="another checkout of this project, run in turn in each round")
    parser.add_argument("--child", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        print(json.dumps(measure(args.child, args.runs)))
        return
    checkouts = {"this": ROOT, **({"baseline": os.path.abspath(args.baseline)} if args.baseline else {})}
    results: dict[str, list[dict[str, float]]] = {name: [] for name in checkouts}
    for round_index in range(args.rounds):
        for name, root in checkouts.items():
            done = subprocess.run(
                [sys.executable, __file__, "--child", root, "--runs", str(args.runs)],
                capture_output=True,
                text=True,
                check=True,
                cwd=root,
            )
            result = json.loads(done.stdout.strip().splitlines()[-1])
            results[name].append(result)
            print(
                f"round {round_index + 1} {name:9s} {result['cpu_s']:.3f} s CPU, "
                f"{result['wall_s']:.3f} s wall a run"
            )
    for name, rounds in results.items():
        cpu = statistics.median(r["cpu_s"] for r in rounds)
        wall = statistics.median(r["wall_s"] for r in rounds)
        print(f"{name:9s} median {cpu:.3f} s CPU, {wall:.3f} s wall a run ({rounds[0]['records']} records)")
    if args.baseline:
        ratios = [t["cpu_s"] / b["cpu_s"] for t, b in zip(results["this"], results["baseline"], strict=True)]
        shown = ", ".join(f"{r:.2f}" for r in ratios)
        print(f"this / baseline CPU a run: {statistics.median(ratios):.2f}x (rounds: {shown})")


if __name__ == "__main__":
    main()
