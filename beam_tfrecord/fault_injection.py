"""Test-only fault injection, inert in every real run: a hook that stops a run at a named point,
so tests can kill it there (SIGKILL) and prove that an interrupted run never leaves output that
looks complete, and one that fails a write there as a full disk does.

Off unless BEAM_TFRECORD_PAUSE_AT names a point; then the run creates the file named by
BEAM_TFRECORD_PAUSE_FILE when it gets there and sleeps until killed, or, when
BEAM_TFRECORD_RESUME_FILE names a file, until that file exists (then it goes on: a test holds a
live run there while it starts another). Points, in run order:
`listed`, `cleared` (earlier output removed), `writing` (a temporary shard half written),
`finalizing` (one shard renamed into place, the others not yet), `metadata` (labels and
rejects written, summary.json not yet); then an append's merge (output.append): `append_marked`
(its marker written, no old shard renamed yet), `append_linked` (old shards under their new
names, new ones moved in), `append_metadata` (side files written, summary.json not yet).
"""

from __future__ import annotations

import errno
import os
import time

__all__ = ["fail_point", "pause_point"]

PAUSE_AT = os.environ.get("BEAM_TFRECORD_PAUSE_AT")  # read once: checked in per-record loops
# BEAM_TFRECORD_FAIL_AT=writing|metadata: that write fails as a full disk does (ENOSPC), so tests
# prove what a run does then without filling a real disk.
FAIL_AT = os.environ.get("BEAM_TFRECORD_FAIL_AT")


def fail_point(name: str) -> None:
    """Raise the error a full disk raises here when the environment asks for this point."""
    if name == FAIL_AT:
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))


def pause_point(name: str) -> None:
    """Sleep here for good when the environment asks for this point; otherwise nothing."""
    if name != PAUSE_AT:
        return
    marker = os.environ.get("BEAM_TFRECORD_PAUSE_FILE")
    if marker:
        with open(marker, "w") as handle:
            handle.write(name)
    resume = os.environ.get("BEAM_TFRECORD_RESUME_FILE")
    deadline = time.monotonic() + 3600
    while time.monotonic() < deadline:
        if resume and os.path.exists(resume):
            return
        time.sleep(0.05)
