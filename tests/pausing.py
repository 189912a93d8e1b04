"""Runs of the real command stopped at a named point (beam_tfrecord/fault_injection.py), the way
a kill lands in practice: the process is SIGKILLed once it reports it got there."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

__all__ = ["killed_at"]


def killed_at(
    point: str, tree: Path | str, out: Path | str, *extra: str, marker_dir: Path | None = None
) -> None:
    """Start `python -m pipelines.convert --input tree --output out *extra`, wait until it reaches
    `point`, and SIGKILL it there; the test fails if it ends first or never gets there. The run
    says it got there with a file in `marker_dir` (default: beside a local `out`)."""
    marker = (marker_dir or Path(out).parent) / f"paused-{point}"
    env = dict(os.environ, BEAM_TFRECORD_PAUSE_AT=point, BEAM_TFRECORD_PAUSE_FILE=str(marker))
    command = [sys.executable, "-m", "pipelines.convert", "--input", str(tree), "--output", str(out)]
    process = subprocess.Popen(
        [*command, *extra], cwd=REPO, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE
    )
    try:
        deadline = time.monotonic() + 120
        while not marker.exists():
            if process.poll() is not None:
                pytest.fail(f"the run ended before {point}: {process.stderr.read().decode()[-2000:]}")
            if time.monotonic() > deadline:
                pytest.fail(f"the run never reached {point}")
            time.sleep(0.05)
    finally:
        process.send_signal(signal.SIGKILL)
        process.wait()
        process.stderr.close()
