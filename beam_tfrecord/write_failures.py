"""A file that cannot be written (a full disk, a quota, a permission) as one error that names the
file and why, wherever in the run it happens: the staged plan, a shard, its index, the finalize
renames, the side files, TFDS's metadata.

Every write of the project goes through `writing(path)`, which turns whatever the filesystem
raised into a `WriteFailed` whose message starts with `MARKER`; the runner carries that message
out of the worker that failed (in another process, or on another machine), and `find` reads the
file and the reason back from it, so the command can say it in one line and clean up.
"""

from __future__ import annotations

import errno
import logging
import re
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from typing import TextIO

__all__ = ["FENCED_MARKER", "MARKER", "WriteFailed", "find", "quiet_write_failures", "writing"]

MARKER = "beam-tfrecord could not write"
# A commit step refused because the run no longer holds its output (output.claim.ClaimLost): a
# write not made, said in one line by the command, its traceback kept quiet as a failed write's.
FENCED_MARKER = "beam-tfrecord no longer holds"
_QUIET = (MARKER, FENCED_MARKER)
_FOUND = re.compile(
    re.escape(MARKER)
    + r" (?P<path>\S+?): (?P<reason>.+?)(?: \[errno (?P<errno>\d+)\])?(?: \[while running|\n|'|$)"
)


class WriteFailed(OSError):
    """A file the run could not write; `path` and `reason` say which and why (`errno` kept)."""

    def __init__(self, path: str, reason: str, code: int | None = None) -> None:
        suffix = f" [errno {code}]" if code is not None else ""
        super().__init__(code, f"{MARKER} {path}: {reason}{suffix}")
        self.path, self.reason, self.code = path, reason, code

    def __str__(self) -> str:
        return str(self.strerror)

    def __reduce__(self) -> tuple[type, tuple[str, str, int | None]]:  # crosses processes whole
        return type(self), (self.path, self.reason, self.code)


def _reason(error: BaseException) -> tuple[str, int | None]:
    if isinstance(error, OSError) and error.errno is not None:
        return (error.strerror or str(error)), error.errno
    return f"{type(error).__name__}: {error}", None


@contextmanager
def writing(path: str) -> Iterator[None]:
    """Whatever writing `path` raises becomes a WriteFailed that names it."""
    try:
        yield
    except WriteFailed:
        raise
    except Exception as error:
        reason, code = _reason(error)
        raise WriteFailed(path, reason, code) from error


def find(error: BaseException | str) -> WriteFailed | None:
    """The WriteFailed an error is, holds, or whose message it carries (a worker's failure comes
    back from the runner as another exception with the message inside); None otherwise."""
    seen: set[int] = set()
    current: BaseException | None = error if isinstance(error, BaseException) else None
    while current is not None and id(current) not in seen:
        if isinstance(current, WriteFailed):
            return current
        seen.add(id(current))
        current = current.__cause__ or current.__context__
    match = _FOUND.search(str(error))
    if match is None:
        return None
    code = int(match["errno"]) if match["errno"] else None
    return WriteFailed(match["path"], match["reason"].strip(), code)


def is_full(failure: WriteFailed) -> bool:
    return failure.code in (errno.ENOSPC, errno.EDQUOT) or "quota" in failure.reason.lower()


class _WriteFailures(logging.Filter):
    """Drops a record whose message or exception is a write failure."""

    def filter(self, record: logging.LogRecord) -> bool:
        error = record.exc_info[1] if record.exc_info else None
        texts = (record.getMessage(), str(error or ""), record.exc_text or "")
        return not any(marker in text for text in texts for marker in _QUIET)


class _QuietStream:
    """A worker process's stderr without write failures' tracebacks: Beam's SDK worker prints
    the traceback of a failed bundle straight to stderr (sdk_worker.py, `_execute`), past
    logging, and a local run's worker processes share the terminal."""

    def __init__(self, stream: TextIO) -> None:
        self._stream = stream

    def write(self, text: str) -> int:
        return len(text) if any(marker in text for marker in _QUIET) else self._stream.write(text)

    def __getattr__(self, name: str) -> object:
        return getattr(self._stream, name)


def quiet_write_failures(*targets: logging.Logger | logging.Handler) -> None:
    """Keep a write failure's traceback, which Beam logs where the DoFn failed, off the terminal:
    the command says it in one line. Idempotent."""
    main = sys.modules.get("__main__")
    in_worker = getattr(getattr(main, "__spec__", None), "name", "").endswith("sdk_worker_main")
    if in_worker and not isinstance(sys.stderr, _QuietStream):
        sys.stderr = _QuietStream(sys.stderr)
    root = logging.getLogger()
    loggers = (
        "apache_beam.runners.common",
        "apache_beam.runners.worker.sdk_worker",
        "apache_beam.runners.worker.bundle_processor",
        "apache_beam.runners.portability.fn_api_runner.fn_runner",
        "apache_beam",
    )
    for target in targets or (*map(logging.getLogger, loggers), root, *root.handlers):
        if not any(isinstance(f, _WriteFailures) for f in target.filters):
            target.addFilter(_WriteFailures())
