"""The command as a user meets it in a terminal, as a real process: a local run with Beam's
worker processes prints our two lines and the table and nothing else, and Ctrl-C ends a run
with one line, exit code 130 and no process left behind; the same command then resumes it."""

from __future__ import annotations

import logging
import os
import re
import signal
import subprocess
import sys
import time

import imagegen
import pytest
from conftest import REPO, convert

from beam_tfrecord.names import CLAIM_FILE
from pipelines.interrupts import EXIT_INTERRUPTED, descendants

WORKERS = ("--direct_running_mode=multi_processing", "--direct_num_workers=2")


@pytest.fixture(scope="module")
def tree(tmp_path_factory):
    root = tmp_path_factory.mktemp("cli") / "in"
    files = {
        f"{c}/{i}.jpg": imagegen.jpeg(60, 40, seed=i + 100 * (c == "b")) for c in "ab" for i in range(40)
    }
    # libtiff prints on these itself, and Pillow logs on one: the workers keep both off the terminal.
    chatty = {f"a/{name}": data for name, data in imagegen.chatty_tiffs().items()}
    imagegen.write_tree(root, files | chatty | {"a/broken.jpg": b"\xff\xd8"})
    return root


def running(pid: int) -> bool:
    """Alive and not a zombie waiting for its (new) parent to reap it."""
    try:
        with open(f"/proc/{pid}/stat") as handle:
            return handle.read().rsplit(")", 1)[1].split()[0] != "Z"
    except FileNotFoundError:
        return False


def command(tree, out, *extra: str) -> list[str]:
    return [sys.executable, "-m", "pipelines.convert", "--input", str(tree), "--output", str(out), *extra]


def test_a_run_with_worker_processes_prints_only_its_own_lines(tree, tmp_path):
    """Our two lines and the table, and no decoder's chatter: libtiff's and Pillow's own log lines
    are in rejects.jsonl. (At 8 bits, so Pillow reads every TIFF: at full depth tifffile reads the
    one whose sample count Pillow logs about, tests/test_images_tiff.py.)"""
    done = subprocess.run(
        command(tree, tmp_path / "out", *WORKERS, "--bit_depth", "8"),
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    lines = [line for line in done.stderr.splitlines() if not line.startswith("converted ")]  # progress
    assert len(lines) == 2, done.stderr
    assert lines[0].startswith("INFO pipelines.convert: 84 inputs (0 more skipped): 84 to read")
    assert "multi_processing x 2" in lines[1]
    assert "inputs = records + rejects  yes" in done.stdout
    rejected = (tmp_path / "out" / "rejects.jsonl").read_text()
    assert "ZIPDecode" in rejected and "Pillow: More samples per pixel than can be decoded" in rejected


# Ctrl-C signals the terminal's whole foreground group; `docker stop`, a Kubernetes eviction or an
# Airflow kill send SIGTERM to the run's process alone; a closed terminal sends its group SIGHUP.
@pytest.mark.parametrize(
    ("number", "to_group"),
    [(signal.SIGINT, True), (signal.SIGTERM, False), (signal.SIGHUP, True)],
    ids=["ctrl-c", "sigterm", "sighup"],
)
def test_ctrl_c_ends_the_run_with_one_line_and_the_next_run_resumes(tree, tmp_path, caplog, number, to_group):
    out, marker = tmp_path / "out", tmp_path / "paused"
    env = {**os.environ, "BEAM_TFRECORD_PAUSE_AT": "writing", "BEAM_TFRECORD_PAUSE_FILE": str(marker)}
    process = subprocess.Popen(
        command(tree, out, *WORKERS, "--no_progress"),
        cwd=REPO,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,  # its own process group, as a terminal's foreground job
    )
    try:
        deadline = time.monotonic() + 240
        while not marker.exists():  # a worker process is half-way through writing a shard
            assert process.poll() is None, process.stderr.read()
            assert time.monotonic() < deadline, "the run never started writing"
            time.sleep(0.1)
        workers = descendants(process.pid)
        assert workers, "the run has no worker processes"
        assert (out / CLAIM_FILE).exists()
        (os.killpg if to_group else os.kill)(process.pid, number)
        _, stderr = process.communicate(timeout=60)
    finally:
        if process.poll() is None:
            os.killpg(process.pid, signal.SIGKILL)
            process.wait()
    assert process.returncode == (EXIT_INTERRUPTED if number == signal.SIGINT else 128 + number)
    lines = [line for line in stderr.splitlines() if line.strip()]
    assert "Traceback" not in stderr and len(lines) == 3, stderr  # our two INFO lines and this one
    named = "" if number == signal.SIGINT else f"{signal.Signals(number).name}: "
    assert re.match(
        rf"{named}interrupted after \d+ of 84 inputs: {re.escape(str(out))} has no summary.json", lines[-1]
    )
    assert lines[-1].endswith(
        "the next run of the same command resumes it, keeping every shard finished so far"
    )
    # SIGKILL is delivered at once but a busy machine may take a moment to finish each exit.
    deadline = time.monotonic() + 10
    while [pid for pid in workers if running(pid)] and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not [pid for pid in workers if running(pid)], "worker processes outlived the run"
    assert not (out / CLAIM_FILE).exists(), "Ctrl-C left the run's claim on its output"

    if number == signal.SIGINT:  # the same command again, as a user types it
        done = subprocess.run(
            command(tree, out, *WORKERS, "--no_progress"),
            cwd=REPO,
            capture_output=True,
            text=True,
            timeout=300,
        )
        assert done.returncode == 0, done.stderr[-3000:]
        said = done.stderr
    else:  # what a signal left resumes the same way: launched here, from this process
        caplog.set_level(logging.INFO)
        assert convert(tree, out, *WORKERS) == 0
        said = caplog.text
    assert "resuming the interrupted run" in said and "took over the claim" not in said
    assert not [name for name in os.listdir(out) if name.startswith(".temp")]
