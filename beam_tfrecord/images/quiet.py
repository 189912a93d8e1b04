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

Pillow also reports some files on its own logger (`ERROR PIL.TiffImagePlugin: More samples per
pixel than can be decoded: ...`) before refusing them, which the command's log handler printed
in the middle of the run, and the local runner forwarded from every worker process. While a
thread converts an image under `pillow_log()`, the records Pillow logs from that thread are taken
off its loggers before any handler sees them; those of WARNING and up are kept for the reject's
detail, the rest (Pillow's parse trace at DEBUG) go nowhere. Pillow's records from any other
thread, or outside a conversion, are left alone.

tifffile does the same on its one logger (`tifffile`: "TiffFrame 2 is missing required tags",
"invalid page offset"), and `tifffile_log()` takes its records the same way while a thread reads
a TIFF (`images.tiff`).
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

__all__ = [
    "Captured",
    "captured_stderr",
    "keep_python_stderr",
    "pillow_log",
    "quiet_pillow_loggers",
    "tifffile_log",
]

_LOCK = threading.Lock()
_PILLOW_LOGGERS = ("PIL", "pillow_heif")
_TIFFFILE_LOGGER = "tifffile"  # tifffile logs everything on this one logger
_THREAD = threading.local()
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


class _ThreadRecords(logging.Filter):
    """On a library's loggers: a record logged by a thread inside that library's capture
    (`pillow_log()`, `tifffile_log()`) goes to that thread's list (WARNING and up) or nowhere,
    never on to logging's handlers."""

    def __init__(self, attribute: str) -> None:
        super().__init__()
        self.attribute = attribute  # the thread-local list this filter fills

    def filter(self, record: logging.LogRecord) -> bool:
        kept: list[str] | None = getattr(_THREAD, self.attribute, None)
        if kept is None:
            return True
        if record.levelno >= logging.WARNING:
            kept.append(record.getMessage())
        return False


_PILLOW_FILTER = _ThreadRecords("pillow_lines")
_TIFFFILE_FILTER = _ThreadRecords("tifffile_lines")


def quiet_pillow_loggers() -> None:
    """Put the filter `pillow_log` relies on on every logger of Pillow and pillow-heif that exists.

    Each module logs on its own logger (`PIL.TiffImagePlugin`), and a logger's filters see only
    its own records, not those of the loggers below it, so each gets the filter: call this once
    their modules are imported (`formats.register_plugins`, after `Image.init()`). Idempotent."""
    for name, logger in list(logging.Logger.manager.loggerDict.items()):
        if not isinstance(logger, logging.Logger) or name.split(".")[0] not in _PILLOW_LOGGERS:
            continue
        if _PILLOW_FILTER not in logger.filters:
            logger.addFilter(_PILLOW_FILTER)


@contextlib.contextmanager
def pillow_log() -> Iterator[list[str]]:
    """The messages (WARNING and up) Pillow logs from this thread for the duration, instead of
    logging them; for a reject's detail. Nests: an inner capture keeps its own."""
    with _thread_log("pillow_lines", "Pillow") as lines:
        yield lines


@contextlib.contextmanager
def tifffile_log() -> Iterator[list[str]]:
    """The messages (WARNING and up) tifffile logs from this thread for the duration, instead of
    logging them; for a reject's detail. tifffile logs on one logger, filtered from the first call."""
    logger = logging.getLogger(_TIFFFILE_LOGGER)
    if _TIFFFILE_FILTER not in logger.filters:
        logger.addFilter(_TIFFFILE_FILTER)
    with _thread_log("tifffile_lines", "tifffile") as lines:
        yield lines


@contextlib.contextmanager
def _thread_log(attribute: str, library: str) -> Iterator[list[str]]:
    previous = getattr(_THREAD, attribute, None)
    lines: list[str] = []
    setattr(_THREAD, attribute, lines)
    try:
        yield lines
    finally:
        setattr(_THREAD, attribute, previous)
        if lines:
            _log.debug("%s's log: %s", library, "; ".join(lines))
