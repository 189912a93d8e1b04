"""Where a conversion's wall time goes (issue 28): how many cores the command's whole process
tree keeps busy, every quarter of a second, from the command to its exit. The CPU per image
(benchmarks/cpu_split.py) says what the work costs; this says how much of the machine the run
uses while it does it: a start-up on one core, the conversion on two, the end on one.

    .venv/bin/python benchmarks/timeline.py --task detection --images 12000
    .venv/bin/python benchmarks/timeline.py --task detection --images 12000 --tool od_api_coco

The same data and commands as benchmarks/peers.py (arguments it does not know go to this
project's command). The tree's CPU is read from /proc through psutil: each live process's
user and system time and that of the children it reaped, so a pool worker that exits keeps
counting. One run: read it as one run's shape, on a quiet machine.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import shutil
import subprocess
import sys
import tempfile
import time

import psutil

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path[:0] = [HERE]

import peers  # noqa: E402

TICK_S = 0.25
BUSY = 1.5  # cores: at or above it, the run keeps both cores of this machine busy


def tree_cpu_s(root: psutil.Process) -> float:
    """User + system seconds of `root` and its live descendants, reaped children included."""
    total = 0.0
    for process in (root, *root.children(recursive=True)):
        with contextlib.suppress(psutil.Error):
            times = process.cpu_times()
            total += times.user + times.system + times.children_user + times.children_system
    return total


def timeline(command: list[str]) -> tuple[float, list[float]]:
    """The command's wall seconds and the cores its tree kept busy in each tick."""
    started = time.perf_counter()
    with tempfile.TemporaryFile() as errors:
        child = subprocess.Popen(command, cwd=peers.ROOT, stdout=subprocess.DEVNULL, stderr=errors)
        root = psutil.Process(child.pid)
        cores, last, last_at = [], 0.0, started
        while child.poll() is None:
            time.sleep(TICK_S)
            with contextlib.suppress(psutil.Error):
                now, now_at = tree_cpu_s(root), time.perf_counter()
                # A process that ends unreaped (its parent gone first) takes its time with it: a
                # tick never counts below zero for it.
                cores.append(max(0.0, now - last) / (now_at - last_at))
                last, last_at = max(now, last), now_at
        if child.returncode:
            errors.seek(0)
            tail = errors.read().decode(errors="replace")[-2000:]
            sys.exit(f"{' '.join(command[:4])} ... failed with exit code {child.returncode}:\n{tail}")
    return time.perf_counter() - started, cores


def busy_ticks(cores: list[float]) -> tuple[int, int]:
    """The first tick at BUSY or more cores and the one after the last such tick ((n, n): none)."""
    busy = [i for i, c in enumerate(cores) if c >= BUSY]
    return (busy[0], busy[-1] + 1) if busy else (len(cores), len(cores))


def chart(cores: list[float]) -> list[str]:
    """One line per second: the cores busy in each of its ticks."""
    per_line = round(1 / TICK_S)
    return [
        f"{i * TICK_S:5.1f} s  " + "  ".join(f"{c:4.2f}" for c in cores[i : i + per_line])
        for i in range(0, len(cores), per_line)
    ]


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    peers.add_task_arguments(parser)
    parser.add_argument(
        "--tool",
        help="one tool only: pipelines.convert, od_api_coco, tf_loop, or least_work.py's least_work, "
        "checked_steps or library_steps",
    )
    args, extra = parser.parse_known_args()
    images = args.images or peers.DEFAULT_IMAGES[args.task]
    with tempfile.TemporaryDirectory(prefix="bench-timeline-") as out:
        least = args.tool in peers.LEAST_WORK_TOOLS
        tools, _ = peers.task_tools(args.task, images, args.seed, out, extra, least_work=least)
        for tool in tools:
            if args.tool and tool.name != args.tool:
                continue
            shutil.rmtree(tool.output, ignore_errors=True)
            os.makedirs(tool.output)
            wall, cores = timeline(tool.command)
            first, last = busy_ticks(cores)
            mean = sum(c * TICK_S for c in cores) / max(wall, TICK_S)
            print(f"\n{tool.name}, {images} images: {wall:.2f} s wall, {mean:.2f} cores busy on average")
            converting = sum(cores[first:last]) / max(1, last - first)
            before, during, after = first * TICK_S, (last - first) * TICK_S, (len(cores) - last) * TICK_S
            print(
                f"  {before:.2f} s before the tree first keeps {BUSY} cores busy, {during:.2f} s from then "
                f"to the last such tick ({converting:.2f} cores busy on average), {after:.2f} s after"
            )
            print("\n".join(chart(cores)))


if __name__ == "__main__":
    main()
