"""Ctrl-C for the command line: one line saying what is left, exit code 130, and no traceback
from Beam's workers or threads. SIGTERM (`docker stop`, a Kubernetes eviction, an Airflow kill)
and SIGHUP (a closed terminal) end a run the same way, with 143 and 129: the run's claim on its
output is released, and a rerun resumes what it finished.

A terminal sends SIGINT to its whole foreground process group: every Beam worker process
would die printing its own traceback, as would Beam's threads here. So `python -m
pipelines.convert` blocks SIGINT before its first import (`block`, called at the top of the
module: threads started later, by NumPy or Beam, inherit the block) and ignores it (`watch`:
worker processes started later inherit that through the shell Beam starts them with; Linux). A blocked
signal stays pending although ignored, and one thread waits for it: it stops the worker
processes (SIGKILL: they hold nothing a rerun needs; the next run sweeps their temporary files),
runs the clean-up set last (`set_cleanup`: the release of the run's claim on its output, once
no worker of it writes), prints the line and exits. Waiting for Beam to stop its workers would
wait for their current shard task to end. `stop` is the same way out for other causes.
"""

from __future__ import annotations

import logging
import os
import signal
import subprocess
import sys
import threading
from collections.abc import Callable
from contextlib import suppress

from beam_tfrecord import compat

__all__ = [
    "EXIT_INTERRUPTED",
    "STOPPING",
    "block",
    "descendants",
    "set_cleanup",
    "set_message",
    "stop",
    "watch",
    "watching",
]

EXIT_INTERRUPTED = 130  # 128 + SIGINT, as shells report a run stopped with Ctrl-C
# The signals that stop a run: each exits with 128 + its number, as shells report it.
STOPPING = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)
_message: list[Callable[[], str]] = [lambda: "interrupted before the pipeline started: nothing was converted"]
_cleanup: list[Callable[[], None]] = [lambda: None]
_watching = threading.Event()  # set by `watch`: this process is the command, `stop` may end it


def block() -> None:
    """Block the stopping signals in this thread and every thread started from it from now on."""
    signal.pthread_sigmask(signal.SIG_BLOCK, set(STOPPING))


def set_message(message: Callable[[], str]) -> None:
    """What the line says if Ctrl-C comes now (called at that moment, so it can count)."""
    _message[0] = message


def set_cleanup(cleanup: Callable[[], None] | None) -> None:
    """What runs on the way out, after the worker processes are stopped (None: nothing)."""
    _cleanup[0] = cleanup or (lambda: None)


def descendants(pid: int) -> list[int]:
    """Every process started under `pid` (Beam's shells and worker processes), parents first,
    from `pgrep -P` (Linux and macOS); none where pgrep is missing."""
    found: list[int] = []
    queue = [pid]
    while queue:
        try:
            done = subprocess.run(
                ["pgrep", "-P", str(queue.pop())], capture_output=True, text=True, timeout=5
            )
        except (OSError, subprocess.SubprocessError):
            return found
        children = [int(line) for line in done.stdout.split()]
        found += children
        queue += children
    return found


def _wait_and_stop() -> None:
    number = signal.sigwait(set(STOPPING))
    try:  # first, while everything it counts is still there
        line = _message[0]()
    except Exception as error:  # the line must come out whatever it tried to count
        line = f"interrupted ({type(error).__name__} while describing what was left)"
    if number != signal.SIGINT:
        line = f"{signal.Signals(number).name}: {line}"
    stop(line, 128 + int(number))


def stop(line: str, code: int) -> None:
    """End the process now, from any thread: stop the worker processes, run the clean-up, print
    `line` (on its own line) and exit with `code`, skipping every other thread's shutdown."""
    # Beam's threads, and the main thread, report their workers' deaths: expected now.
    threading.excepthook = lambda args: None
    sys.excepthook = lambda *args: None
    logging.disable(logging.CRITICAL)
    for pid in descendants(os.getpid()):
        with suppress(OSError):
            os.kill(pid, signal.SIGKILL)
    with suppress(Exception):  # the line and the exit come whatever the clean-up meets
        _cleanup[0]()
    print(f"\n{line}", file=sys.stderr, flush=True)
    # Skips the other threads' joins and atexit handlers (Beam's would wait on the workers just
    # killed); sys.exit from a thread ends only it.
    compat.exit_now(code)


def watch() -> bool:
    """Stop on Ctrl-C as described above; returns whether it does.

    Only after `block()` ran in the main thread before other threads existed: a thread that did
    not inherit the block would receive SIGINT and, ignored, drop it. Otherwise Python's own
    KeyboardInterrupt stays. SIGINT is ignored for later processes on Linux, which keeps a
    blocked signal pending although ignored; POSIX leaves that open, so elsewhere (macOS)
    worker processes keep the default and may print their own traceback before they stop."""
    if signal.SIGINT not in signal.pthread_sigmask(signal.SIG_BLOCK, []):
        return False
    if sys.platform.startswith("linux"):
        for number in STOPPING:
            signal.signal(number, signal.SIG_IGN)
    threading.Thread(target=_wait_and_stop, name="ctrl-c", daemon=True).start()
    _watching.set()
    return True


def watching() -> bool:
    """Whether `watch` runs in this process (the command), so `stop` may end it; a test or a
    notebook calling `pipelines.convert.run` is never ended from a thread."""
    return _watching.is_set()
