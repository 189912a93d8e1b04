"""100,000 small files: listing and planning hold paths and sizes only, so memory stays small.
Slow (it writes 100k files); run with `pytest -m slow`. The figure is in docs/guarantees.md."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
FILES, CLASSES = 100_000, 100
MEASURE = """
import json, sys
from conftest import plan_listing

from beam_tfrecord.plan.listing import list_inputs
from beam_tfrecord.plan.planner import LabelSource, shard_tasks
def peak_mb():  # VmHWM, not ru_maxrss: that one keeps the forking parent's peak across exec
    line = next(l for l in open("/proc/self/status") if l.startswith("VmHWM:"))
    return int(line.split()[1]) / 1024
before = peak_mb()
files = list_inputs(sys.argv[1])
plan = plan_listing(files, LabelSource("folder"), {"train": 0.8, "test": 0.2}, num_shards=64)
tasks = shard_tasks(plan)
print(json.dumps({"files": len(files), "tasks": len(tasks), "before_mb": before, "peak_mb": peak_mb()}))
"""


@pytest.mark.slow
@pytest.mark.skipif(not os.path.exists("/proc/self/status"), reason="reads peak memory from Linux's /proc")
def test_listing_and_planning_100k_files_stays_small(tmp_path):
    root = tmp_path / "many"
    for c in range(CLASSES):
        folder = root / f"class_{c:03d}"
        folder.mkdir(parents=True)
        for i in range(FILES // CLASSES):
            (folder / f"image_{i:06d}.jpg").write_bytes(b"\xff\xd8\xff")
    # The child imports tests/conftest.py's plan_listing: the tests folder goes on its path.
    path = os.pathsep.join([REPO, os.path.join(REPO, "tests"), os.environ.get("PYTHONPATH", "")])
    result = subprocess.run(
        [sys.executable, "-c", MEASURE, str(root)],
        cwd=REPO,
        env={**os.environ, "PYTHONPATH": path},
        capture_output=True,
        text=True,
        check=True,
    )
    measured = json.loads(result.stdout.strip().splitlines()[-1])
    print(measured)
    assert measured["files"] == FILES and measured["tasks"] == 128
    assert measured["peak_mb"] - measured["before_mb"] < 150  # about 1.5 KB per file, all told


def test_planning_pauses_the_cycle_collector_and_gives_it_back_as_it_was():
    """Planning a COCO-sized run makes millions of objects that form no cycles, so the collector
    is off while they are made (plan.bulk); the caller's setting is restored after, on error too,
    and a caller that had it off keeps it off."""
    import gc

    from beam_tfrecord.plan.bulk import cycles_paused

    assert gc.isenabled()
    with cycles_paused():
        assert not gc.isenabled()
        with cycles_paused():
            assert not gc.isenabled()
        assert not gc.isenabled()  # the inner block leaves the outer's choice alone
    assert gc.isenabled()
    with pytest.raises(RuntimeError), cycles_paused():
        raise RuntimeError("planning failed")
    assert gc.isenabled()
    gc.disable()
    try:
        with cycles_paused():
            pass
        assert not gc.isenabled()
    finally:
        gc.enable()
