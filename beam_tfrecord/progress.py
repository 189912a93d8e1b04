"""A progress line for local runs: workers count into small files, the launcher adds them up.

Files, not Beam metrics, because the DirectRunner only reports metrics when the run is over, and
files work the same for one in-process worker and for several worker processes.
"""

from __future__ import annotations

import os
import sys
import threading
import time
import uuid
from typing import TextIO

__all__ = ["ProgressCounter", "ProgressPrinter", "total_done"]


class ProgressCounter:
    """Worker side: counts processed inputs and flushes the count at most every `interval` s."""

    def __init__(self, directory: str, interval: float = 0.5) -> None:
        self.path = os.path.join(directory, f"{os.getpid()}-{uuid.uuid4().hex}")
        self.interval = interval
        self.count = 0
        self._flushed_at = time.monotonic()

    def add(self, n: int = 1) -> None:
        self.count += n
        now = time.monotonic()
        if now - self._flushed_at >= self.interval:
            self.flush(now)

    def flush(self, now: float | None = None) -> None:
        self._flushed_at = time.monotonic() if now is None else now
        temp = self.path + ".tmp"
        with open(temp, "w") as handle:
            handle.write(str(self.count))
        os.replace(temp, self.path)


def total_done(directory: str) -> int:
    done = 0
    for name in os.listdir(directory):
        if name.endswith(".tmp"):
            continue
        try:
            with open(os.path.join(directory, name)) as handle:
                done += int(handle.read() or 0)
        except (OSError, ValueError):
            continue
    return done


class ProgressPrinter:
    """Launcher side: a thread that prints `done/total, rate` until stopped."""

    def __init__(self, directory: str, total: int, stream: TextIO | None = None) -> None:
        self.directory = directory
        self.total = total
        self.stream = stream if stream is not None else sys.stderr  # sys.stderr of now, not of import
        self.interactive = self.stream.isatty()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, daemon=True)
        self._started = time.monotonic()

    def __enter__(self) -> ProgressPrinter:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()
        if self.interactive:
            self.stream.write("\n")
        self.stream.flush()

    def line(self) -> str:
        done = total_done(self.directory)
        elapsed = max(time.monotonic() - self._started, 1e-9)
        percent = 100.0 * done / self.total if self.total else 100.0
        return f"converted {done}/{self.total} inputs ({percent:.0f}%), {done / elapsed:.0f}/s"

    def _loop(self) -> None:
        period = 1.0 if self.interactive else 10.0
        while not self._stop.wait(period):
            if self.interactive:
                self.stream.write("\r" + self.line())
            else:
                self.stream.write(self.line() + "\n")
            self.stream.flush()
