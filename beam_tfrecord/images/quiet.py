"""Keep decoder chatter off the terminal: C libraries (libtiff above all) print warnings and
errors straight to file descriptor 2, past Python's `sys.stderr`, in the middle of the progress
line and of every worker's log.

`captured_stderr()` points descriptor 2 at a scratch file while a decoder runs and hands back
what was written, so a reject can carry it as its detail. Descriptor 2 belongs to the whole
process, so captures are serialized by one lock, and only formats that chatter take it (JPEG and
PNG decode through Pillow's own quiet error handlers and never do).

What another thread writes to descriptor 2 during a capture would land in it too. The command
(`pipelines.convert`) therefore moves Python's own `sys.stderr` (logging, the progress line, the
Ctrl-C message) to a duplicate of descriptor 2 before anything runs (`keep_python_stderr`), so
only C libraries' direct writes are ever captured. Elsewhere (a user's own pipeline), captured
text is still logged at DEBUG, never dropped silently. When a capture cannot be set up (no
descriptor 2, no temporary file), the decode runs uncaptured rather than failing.
"""

from __future__ import annotations

import contextlib
import logging
import os
import sys
import tempfile
import threading
from collections.abc import Iterator
from dataclasses import dataclass

__all__ = ["Captured", "captured_stderr", "keep_python_stderr"]

_LOCK = threading.Lock()
_LIMIT = 4096  # bytes of chatter kept: libtiff repeats one line per bad strip
_log = logging.getLogger(__name__)


@dataclass
class Captured:
    """What descriptor 2 received during the capture (decoded, at most `_LIMIT` bytes)."""

    text: str = ""

    def summary(self, lines: int = 3) -> str:
        """The first distinct lines, joined: enough for a reject's detail."""
        seen: list[str] = []
        for line in self.text.splitlines():
            line = line.strip()
            if line and line not in seen:
                seen.append(line)
        more = f" (+{len(seen) - lines} more)" if len(seen) > lines else ""
        return "; ".join(seen[:lines]) + more


def keep_python_stderr() -> None:
    """Point `sys.stderr` at a duplicate of descriptor 2, so that captures (which redirect the
    descriptor itself) never take what Python writes. For a command's entry point: logging
    configured afterwards writes to the new `sys.stderr`."""
    with contextlib.suppress(OSError, ValueError):
        sys.stderr.flush()
        sys.stderr = open(  # noqa: SIM115 - it lives as long as the process
            os.dup(2), "w", buffering=1, encoding=sys.stderr.encoding, errors="backslashreplace"
        )


@contextlib.contextmanager
def captured_stderr() -> Iterator[Captured]:
    """Descriptor 2 goes to a scratch file for the duration; the result is filled in on exit."""
    captured = Captured()
    with _LOCK, contextlib.ExitStack() as stack:
        try:
            scratch = stack.enter_context(tempfile.TemporaryFile())
            saved = os.dup(2)
        except OSError:  # nowhere to capture to: decode as it is, noise and all
            scratch = None
        if scratch is None:
            yield captured
            return
        with contextlib.suppress(Exception):
            sys.stderr.flush()  # Python's own pending output belongs before the capture
        try:
            os.dup2(scratch.fileno(), 2)
            yield captured
        finally:
            os.dup2(saved, 2)
            os.close(saved)
            scratch.seek(0)
            captured.text = scratch.read(_LIMIT).decode("utf-8", "replace")
    if captured.text:
        _log.debug("decoder output: %s", captured.text.strip())
