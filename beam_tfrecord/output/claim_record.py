"""What a claim on an output says (its run, host, process, timing and, once known, its job) and
what this process can tell about that run from here: whether its process still runs, in which
pid space, on which kernel. Plain data and the kernel's answers; the stores read and write it
(`output.claim_store`), the claim judges it (`output.claim`).
"""

from __future__ import annotations

import dataclasses
import datetime
import json
import os
import socket
import uuid

from beam_tfrecord.config_base import ConfigError

__all__ = [
    "STALE_ENV",
    "UNREADABLE",
    "ClaimRecord",
    "ClaimTiming",
    "alive",
    "pid_space",
    "process_start",
    "timing_from_environment",
    "utc",
]

# Seconds without renewal after which a claim is dead, for tests and for operators whose runs
# may stall longer (a laptop that sleeps); the heartbeat is a quarter of it.
STALE_ENV = "BEAM_TFRECORD_CLAIM_STALE_S"
UNREADABLE = "unknown"  # the run id of a claim whose text does not parse
_VERSION = 1


@dataclasses.dataclass(frozen=True)
class ClaimTiming:
    """How often a live run renews its claim, and how long a claim may go unrenewed before
    another run takes it for a dead run's.

    Args:
      stale_after_s: a claim not renewed for longer than this is dead (from any host). Four
        heartbeats: a renewal that fails once or twice (a gs:// request retried) is not a death.
        A holder that cannot renew for half of it stops itself (`output.claim`).
      heartbeat_s: seconds between renewals; a quarter of `stale_after_s` unless given.
    """

    stale_after_s: float = 120.0
    heartbeat_s: float | None = None

    @property
    def every_s(self) -> float:
        return self.heartbeat_s if self.heartbeat_s is not None else self.stale_after_s / 4


def timing_from_environment() -> ClaimTiming:
    """ClaimTiming, with `stale_after_s` from STALE_ENV when it is set."""
    value = os.environ.get(STALE_ENV)
    if not value:
        return ClaimTiming()
    try:
        stale = float(value)
    except ValueError:
        raise ConfigError(STALE_ENV, f"must be a number of seconds, not {value!r}") from None
    if stale <= 0:
        raise ConfigError(STALE_ENV, f"must be more than 0 seconds, not {value!r}")
    return ClaimTiming(stale_after_s=stale)


def process_start(pid: int) -> int | None:
    """When `pid` started, in clock ticks since boot (Linux's /proc/PID/stat field 22), so a pid
    reused by a later process is not taken for the claim's; None where /proc has no answer."""
    try:
        with open(f"/proc/{pid}/stat") as handle:
            return int(handle.read().rsplit(")", 1)[1].split()[19])
    except (OSError, ValueError, IndexError):
        return None


def utc(seconds: float) -> str:
    return datetime.datetime.fromtimestamp(seconds, datetime.UTC).strftime("%Y-%m-%d %H:%M:%S UTC")


def pid_space() -> str | None:
    """This process's pid space: the kernel's boot id and the pid namespace's inode (Linux), so a
    pid is judged only by a process that can see it; None where neither can be read."""
    try:
        with open("/proc/sys/kernel/random/boot_id") as handle:
            boot = handle.read().strip()
        return f"{boot}:{os.stat('/proc/self/ns/pid').st_ino}"
    except OSError:
        return None


def alive(pid: int) -> bool:
    """The process runs: it exists and is neither a zombie (exited, not yet reaped: in a
    container whose first process reaps nothing, it stays so) nor being torn down."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # someone else's process: alive, unless /proc says it has exited
        pass
    try:
        with open(f"/proc/{pid}/stat") as handle:
            state = handle.read().rsplit(")", 1)[1].split()[0]
    except (OSError, IndexError):
        return True  # no /proc (not Linux): kill's answer stands
    return state not in ("Z", "X", "x")


@dataclasses.dataclass(frozen=True)
class ClaimRecord:
    """What a claim says: whose run holds the output, and since when; for a remote job, where
    its runner can be asked about it."""

    run_id: str
    host: str
    pid: int
    started_at: float
    renewed_at: float
    pid_started: int | None = None
    job_id: str | None = None
    detached: bool = False  # a remote job holds it, no launcher renews it (output.claim)
    # Where its pid means something: this boot of this kernel, this pid namespace. Two containers
    # (or a container and its host) may share a host name and an output, not their pids.
    pid_space: str | None = None
    # The timing its run keeps (ClaimTiming): a reader judges it by the longer stale time.
    stale_after_s: float | None = None
    heartbeat_s: float | None = None
    # Its run holds the output folder's lock (local outputs): on its kernel, the lock decides.
    locked: bool = False
    # A remote job's runner and where to ask it (output.job_state): the job service's address
    # (portable runners), the project and region (Dataflow), and the job's name.
    runner: str | None = None
    job_name: str | None = None
    job_endpoint: str | None = None
    project: str | None = None
    region: str | None = None
    # When storage first wrote it, by storage's clock (recorded from its first renewal on): a
    # remote job's summary.json is compared with it, never with the launcher's clock.
    stored_at: float | None = None

    @classmethod
    def mine(cls, now: float, timing: ClaimTiming | None = None) -> ClaimRecord:
        pid = os.getpid()
        timing = timing or ClaimTiming()
        return cls(
            uuid.uuid4().hex[:12],
            socket.gethostname(),
            pid,
            now,
            now,
            process_start(pid),
            pid_space=pid_space(),
            stale_after_s=timing.stale_after_s,
            heartbeat_s=timing.every_s,
        )

    def stale_after(self, timing: ClaimTiming) -> float:
        """The stale time a reader with `timing` judges this claim by: the longer of the two."""
        return max(timing.stale_after_s, self.stale_after_s or 0.0)

    def heartbeat(self, timing: ClaimTiming) -> float:
        """How often its run renews it: as it says, else a quarter of its stale time."""
        return self.heartbeat_s or self.stale_after(timing) / 4

    def on_this_kernel(self) -> bool:
        """Written by a process of this boot of this kernel (any pid namespace): a lock it held
        on a local folder would be seen here."""
        here = pid_space()
        if here is None or self.pid_space is None:
            return False
        return self.pid_space.split(":", 1)[0] == here.split(":", 1)[0]

    def in_this_pid_space(self) -> bool:
        """Its pid means the same process here: same host, same boot, same pid namespace."""
        here = pid_space()
        return (
            self.host == socket.gethostname() and self.pid > 0 and here is not None and self.pid_space == here
        )

    @property
    def remote(self) -> bool:
        """A remote job holds it, or may (its id, or a name given before the id was known)."""
        return bool(self.detached or self.job_id)

    def to_bytes(self) -> bytes:
        return json.dumps({"version": _VERSION, **dataclasses.asdict(self)}, indent=1).encode()

    @classmethod
    def of_bytes(cls, data: bytes) -> ClaimRecord:
        """A claim's text; one that does not parse is a claim all the same (someone made the
        file, or is writing it), held by an unknown run: the store dates it by when storage
        last wrote it, so a claim read half written is not taken over while its writer may live."""
        try:
            fields = json.loads(data)
            known = {f.name for f in dataclasses.fields(cls)}
            return cls(**{k: v for k, v in fields.items() if k in known})
        except (ValueError, TypeError, AttributeError):
            return cls(UNREADABLE, "unknown host", 0, 0.0, 0.0)

    def describe(self) -> str:
        """`run 1a2b on host h (pid 42), started 2026-01-02 03:04:05 UTC, job j`."""
        job = f", job {self.job_id}" if self.job_id else ""
        if not job and self.job_name:  # submitted, its id never learned (Ctrl-C during submission)
            job = f", job named {self.job_name}"
        return f"run {self.run_id} on host {self.host} (pid {self.pid}), started {utc(self.started_at)}{job}"
