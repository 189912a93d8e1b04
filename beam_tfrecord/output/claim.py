"""One output, one writer: a claim object under the output, taken before anything there is
touched, renewed while the run lives and released when it ends.

Two runs into one output at once lose work: a second run with `overwrite` deletes the first's
staged plan while its workers read it, and one without takes the live run's temporary folder for
a killed run's and "resumes" it. So a run first creates `names.CLAIM_FILE` in the output, only if
it is absent: locally an exclusive create (written beside it, then `os.link`ed into place, which
like `O_EXCL` fails when the name exists, and no reader sees half a claim); on gs:// an upload
with google-cloud-storage's `if_generation_match=0` precondition, which GCS refuses (412) when
the object exists. The claim names the run, host, process, start time and, once known, the job id.

A claim found there is the live run's unless it is dead, which the next run can tell offline:
  - written on this host, in this pid namespace: the kernel decides. Its process is gone (its
    pid missing, a zombie waiting to be reaped, or the pid reused by a process that started
    later), or it is alive and the claim stands however long it went unrenewed (a run suspended
    with Ctrl-Z, a laptop asleep, a wall clock set forward: none of them is a death);
  - written on another host: not renewed for longer than the stale time (120 s by default: four
    heartbeats of 30 s). The claim records the stale time and heartbeat it was made with, and a
    reader waits the longer of its own and the claim's, so a run started with a longer stale time
    is not taken over by a shell without it.
A dead claim is taken over, and the log says whose it was: on gs:// by an upload that matches
the dead claim's generation; locally by renaming it aside (one rename wins) and creating ours. Of
two reruns taking over one dead claim, one wins either way.

A claim with a job id marked `detached` (a remote job submitted without waiting, or one whose
launcher stopped waiting) is never judged dead by time, because no launcher renews it while the
job runs: it is dead once the output holds a `summary.json` written after it (the job finished),
or, for an `--append` job, once its work folder does (the job converted the new pictures: the next
`--append` run takes the claim over and merges them); a job that failed or was cancelled leaves
it, and the refusal says which job to check and which file to delete.

Renewal (`Claim.start_heartbeat`) rewrites the claim every `heartbeat_s` seconds; on gs:// with a
precondition on the generation it last wrote, so a claim taken over meanwhile (this run stalled
longer than the stale time) is noticed rather than overwritten, and `on_lost` is called. A
renewal's requests give up after half a heartbeat, retries included, so no renewal outlives the
lease it keeps, and a release (Ctrl-C) waits for one under way no longer than that.
"""

from __future__ import annotations

import contextlib
import dataclasses
import datetime
import json
import logging
import os
import posixpath
import socket
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from typing import Any

from beam_tfrecord import gcs
from beam_tfrecord.config_base import ConfigError
from beam_tfrecord.names import APPEND_DIR, CLAIM_FILE, SUMMARY_FILE
from beam_tfrecord.write_failures import FENCED_MARKER, writing

__all__ = [
    "LOST_MARKER",
    "STALE_ENV",
    "Claim",
    "ClaimLost",
    "Fence",
    "ClaimHeld",
    "ClaimRecord",
    "ClaimTiming",
    "claim_output",
    "check_held",
    "claim_path",
    "lost_line",
    "read_claim",
    "take_claim",
    "timing_from_environment",
]

_LOGGER = logging.getLogger(__name__)

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


def _process_start(pid: int) -> int | None:
    """When `pid` started, in clock ticks since boot (Linux's /proc/PID/stat field 22), so a pid
    reused by a later process is not taken for the claim's; None where /proc has no answer."""
    try:
        with open(f"/proc/{pid}/stat") as handle:
            return int(handle.read().rsplit(")", 1)[1].split()[19])
    except (OSError, ValueError, IndexError):
        return None


def _utc(seconds: float) -> str:
    return datetime.datetime.fromtimestamp(seconds, datetime.UTC).strftime("%Y-%m-%d %H:%M:%S UTC")


@dataclasses.dataclass(frozen=True)
class ClaimRecord:
    """What a claim says: whose run holds the output, and since when."""

    run_id: str
    host: str
    pid: int
    started_at: float
    renewed_at: float
    pid_started: int | None = None
    job_id: str | None = None
    detached: bool = False  # a remote job holds it, no launcher renews it (module docstring)
    # Where its pid means something: this boot of this kernel, this pid namespace. Two containers
    # (or a container and its host) may share a host name and an output, not their pids.
    pid_space: str | None = None
    # The timing its run keeps (ClaimTiming): a reader judges it by the longer stale time.
    stale_after_s: float | None = None
    heartbeat_s: float | None = None

    @classmethod
    def mine(cls, now: float, timing: ClaimTiming | None = None) -> ClaimRecord:
        pid = os.getpid()
        record = cls(uuid.uuid4().hex[:12], socket.gethostname(), pid, now, now, _process_start(pid))
        timing = timing or ClaimTiming()
        return dataclasses.replace(
            record, pid_space=_pid_space(), stale_after_s=timing.stale_after_s, heartbeat_s=timing.every_s
        )

    def stale_after(self, timing: ClaimTiming) -> float:
        """The stale time a reader with `timing` judges this claim by: the longer of the two."""
        return max(timing.stale_after_s, self.stale_after_s or 0.0)

    def to_bytes(self) -> bytes:
        return json.dumps({"version": _VERSION, **dataclasses.asdict(self)}, indent=1).encode()

    @classmethod
    def of_bytes(cls, data: bytes) -> ClaimRecord:
        """A claim's text; one that does not parse is a claim all the same (someone made the
        file, or is writing it), held by an unknown run: the store dates it by when it was last
        written (locally; on gs:// it goes stale at once), so a claim read half written is not
        taken over while its writer may be alive."""
        try:
            fields = json.loads(data)
            known = {f.name for f in dataclasses.fields(cls)}
            return cls(**{k: v for k, v in fields.items() if k in known})
        except (ValueError, TypeError, AttributeError):
            return cls(UNREADABLE, "unknown host", 0, 0.0, 0.0)

    def describe(self) -> str:
        """`run 1a2b on host h (pid 42), started 2026-01-02 03:04:05 UTC, job j`."""
        job = f", job {self.job_id}" if self.job_id else ""
        return f"run {self.run_id} on host {self.host} (pid {self.pid}), started {_utc(self.started_at)}{job}"

    def gone_why(self, timing: ClaimTiming, now: float, summary_at: float | None) -> str | None:
        """Why this claim's run is dead, or None while it may be alive (module docstring)."""
        if self.detached or self.job_id:  # a remote job outlives a launcher killed (SIGHUP, SIGKILL)
            if summary_at is not None and summary_at >= self.started_at:
                return f"its job wrote {SUMMARY_FILE} at {_utc(summary_at)}"
            return None
        here = _pid_space()
        if self.host == socket.gethostname() and self.pid > 0 and here is not None and self.pid_space == here:
            if not _alive(self.pid):
                return f"process {self.pid} is gone"
            started = _process_start(self.pid)
            if None not in (started, self.pid_started) and started != self.pid_started:
                return f"process {self.pid} is gone (its pid now belongs to a later process)"
            return None  # alive on this host: never dead by time (module docstring)
        quiet = now - self.renewed_at
        stale = self.stale_after(timing)
        if quiet > stale:
            return f"not renewed for {quiet:.0f} s (dead after {stale:g} s)"
        return None


def _pid_space() -> str | None:
    """This process's pid space: the kernel's boot id and the pid namespace's inode (Linux), so a
    pid is judged only by a process that can see it; None where neither can be read."""
    try:
        with open("/proc/sys/kernel/random/boot_id") as handle:
            boot = handle.read().strip()
        return f"{boot}:{os.stat('/proc/self/ns/pid').st_ino}"
    except OSError:
        return None


def _alive(pid: int) -> bool:
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


class ClaimHeld(ConfigError):
    """The output is claimed by a live run; `holder` says whose. Its text is the whole line."""

    def __init__(self, output: str, holder: ClaimRecord, timing: ClaimTiming, now: float) -> None:
        self.output = output
        self.holder = holder
        path = claim_path(output)
        if holder.detached or (holder.job_id and now - holder.renewed_at > holder.stale_after(timing)):
            line = (
                f"{output} is being written by {holder.describe()}, submitted without waiting; it has "
                f"written no {SUMMARY_FILE} since. Nothing was touched. If that job has ended without "
                f"finishing (failed or cancelled), delete {path} and run again; otherwise wait for it "
                "or choose another --output"
            )
        else:
            line = (
                f"{output} is being written by {holder.describe()}; its claim was last renewed "
                f"{max(0.0, now - holder.renewed_at):.0f} s ago ({_utc(holder.renewed_at)}). Nothing was "
                "touched, and --overwrite does not replace a live run's output. Wait for that run to end "
                "or stop it, or choose another --output; a run that died is recognised (its process gone "
                f"on its host, or, from another host, its claim not renewed for {holder.stale_after(timing):g} s) "
                "and its claim "
                "taken over by the next run"
            )
        super().__init__("output", line)

    def __str__(self) -> str:
        return f"{self.problem}"


def claim_path(output: str) -> str:
    """Where the claim on `output` lives: directly under it."""
    if "://" in output:
        return posixpath.join(output.rstrip("/"), CLAIM_FILE)
    return os.path.join(output, CLAIM_FILE)


class _Store:
    """The claim object's reads and writes; `generation` is GCS's (locally: None). Every write
    is conditional: `create` only if absent, `replace` only over the generation read."""

    def __init__(self, output: str) -> None:
        self.output = output
        self.path = claim_path(output)

    def read(self) -> tuple[ClaimRecord, Any] | None:
        raise NotImplementedError

    def create(self, record: ClaimRecord) -> tuple[bool, Any]:
        """(True, the new generation), or (False, None) when a claim is there already."""
        raise NotImplementedError

    def replace(self, record: ClaimRecord, generation: Any, run_id: str) -> Any | None:
        """Overwrite the claim of `run_id` at `generation`; None when it is no longer that one."""
        raise NotImplementedError

    def delete(self, generation: Any, run_id: str) -> None:
        raise NotImplementedError

    def summary_time(self) -> float | None:
        """When a job last finished here: the output's summary.json, or an `--append` job's in
        its work folder (converted, waiting for the next run to merge it), or None."""
        from apache_beam.io.filesystems import FileSystems

        times = []
        for summary in (SUMMARY_FILE, f"{APPEND_DIR}/{SUMMARY_FILE}"):
            try:
                (found,) = FileSystems.match([FileSystems.join(self.output, summary)])
            except Exception:
                continue
            times += [m.last_updated_in_seconds for m in found.metadata_list]
        return max(times) if times else None


class _LocalStore(_Store):
    """A file: created whole or not at all (a link, else O_EXCL); renewed by writing beside it
    and renaming over it, once it is read to be still this run's."""

    made_folder = False  # the output folder was made for the claim: removed with it while empty

    def read(self) -> tuple[ClaimRecord, Any] | None:
        try:
            return _read_local(self.path), None
        except FileNotFoundError:
            return None

    def create(self, record: ClaimRecord) -> tuple[bool, Any]:
        # Written whole beside it, then linked into place: a link, like O_EXCL, fails when the
        # name exists, and no reader ever sees a half-written claim.
        temporary = self._beside(record)
        with writing(self.path):  # a folder that cannot be written: one line (WriteFailed)
            if not os.path.isdir(self.output):
                os.makedirs(self.output, exist_ok=True)
                self.made_folder = True
            try:
                with open(temporary, "wb") as handle:
                    handle.write(record.to_bytes())
            except OSError:
                with contextlib.suppress(OSError):
                    os.remove(temporary)
                raise
        try:
            os.link(temporary, self.path)
        except FileExistsError:
            return False, None
        except OSError:  # a filesystem without hard links: O_EXCL, and a moment half-written
            return self._create_exclusive(record), None
        finally:
            os.remove(temporary)
        self._sweep()
        return True, None

    def _sweep(self) -> None:
        """Remove what killed runs left beside the claim: a claim written aside and never linked
        (`CLAIM.RUN.PID`, its process gone) and a dead claim moved aside (`CLAIM.dead-RUN`). Only
        the holder sweeps, so no live run's file goes."""
        prefix = os.path.basename(self.path) + "."
        try:
            names = [n for n in os.listdir(self.output) if n.startswith(prefix)]
        except OSError:
            return
        for name in names:
            rest = name[len(prefix) :]
            pid = rest.rsplit(".", 1)[-1]
            if rest.startswith("dead-") or (pid.isdigit() and not _alive(int(pid))):
                with contextlib.suppress(OSError):
                    os.remove(os.path.join(self.output, name))

    def _create_exclusive(self, record: ClaimRecord) -> bool:
        try:
            descriptor = os.open(self.path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644)
        except FileExistsError:
            return False
        with os.fdopen(descriptor, "wb") as handle:
            handle.write(record.to_bytes())
        return True

    def _beside(self, record: ClaimRecord) -> str:
        return f"{self.path}.{record.run_id}.{os.getpid()}"

    def replace(self, record: ClaimRecord, generation: Any, run_id: str) -> Any | None:
        current = self.read()
        if current is None or current[0].run_id != run_id:
            return _LOST
        temporary = self._beside(record)
        with open(temporary, "wb") as handle:
            handle.write(record.to_bytes())
        os.replace(temporary, self.path)
        return None

    def take_over(self, record: ClaimRecord, dead: ClaimRecord) -> bool:
        """Move the dead claim aside (one rename wins), check that what moved is the dead one
        (another rerun may have taken it over first: then put theirs back), then create ours."""
        aside = f"{self.path}.dead-{record.run_id}"
        try:
            os.rename(self.path, aside)
        except FileNotFoundError:
            return False
        if _read_local(aside) != dead:
            with contextlib.suppress(FileExistsError):
                os.link(aside, self.path)
            os.remove(aside)
            return False
        os.remove(aside)
        return self.create(record)[0]

    def delete(self, generation: Any, run_id: str) -> None:
        current = self.read()
        if current is not None and current[0].run_id == run_id:
            with contextlib.suppress(FileNotFoundError):
                os.remove(self.path)
        if self.made_folder:
            with contextlib.suppress(OSError):  # only while empty: a run that wrote nothing
                os.rmdir(self.output)


_LOST = object()  # `replace`: the claim is no longer this run's


def _read_local(path: str) -> ClaimRecord:
    """A claim file's record; one that does not parse (half written) as renewed when its file
    was last written."""
    with open(path, "rb") as handle:
        record = ClaimRecord.of_bytes(handle.read())
        if record.run_id == UNREADABLE:
            modified = os.fstat(handle.fileno()).st_mtime
            record = dataclasses.replace(record, started_at=modified, renewed_at=modified)
    return record


class _GcsStore(_Store):
    """An object, written with google-cloud-storage's generation preconditions (GCS answers 412
    when the object's generation differs: 0 means "absent"), through this thread's client."""

    def __init__(self, output: str) -> None:
        super().__init__(output)
        bucket, _, self.name = self.path[len("gs://") :].partition("/")
        self.bucket = bucket
        # A claim's requests give up sooner than the run's reads: a renewal retried past half a
        # heartbeat would outlive the lease it keeps (Claim sets it from its timing).
        self.deadline_s: float | None = None

    def _blob(self) -> Any:
        return gcs.thread_client().client.bucket(self.bucket).blob(self.name)

    def _call(self, method: Callable[..., Any], *expected: int, **kwargs: Any) -> Any:
        """`method` with the run's time limit and retry; an error whose status is one of
        `expected` is raised as it is, any other as the one-line StorageError."""
        settings = gcs.current_settings()
        if self.deadline_s is not None:
            deadline = min(settings.retry_deadline_s, self.deadline_s)
            settings = dataclasses.replace(
                settings, timeout_s=min(settings.timeout_s, deadline), retry_deadline_s=deadline
            )
        try:
            return method(timeout=settings.timeout_s, retry=settings.retry(), **kwargs)
        except Exception as error:
            if _status(error) in expected:
                raise
            raise gcs.StorageError.of("output", self.output, error) from None

    def read(self) -> tuple[ClaimRecord, Any] | None:
        for _ in range(5):  # rewritten between its metadata and its bytes: read again
            blob = self._blob()
            try:
                self._call(blob.reload, 404)
            except Exception as error:
                if _status(error) == 404:
                    return None
                raise
            try:
                data = self._call(blob.download_as_bytes, 404, 412, if_generation_match=blob.generation)
            except Exception as error:
                if _status(error) in (404, 412):
                    continue
                raise
            return ClaimRecord.of_bytes(data), blob.generation
        return None

    def _upload(self, record: ClaimRecord, generation: int) -> int | None:
        blob = self._blob()
        try:
            self._call(
                blob.upload_from_string,
                412,
                data=record.to_bytes(),
                content_type="application/json",
                if_generation_match=generation,
            )
        except Exception as error:
            if _status(error) != 412:
                raise
            # Refused; unless a retry of our own upload found the first attempt had landed.
            current = self.read()
            if current is not None and current[0] == record:
                return current[1]
            return None
        return blob.generation

    def create(self, record: ClaimRecord) -> tuple[bool, Any]:
        generation = self._upload(record, 0)
        return generation is not None, generation

    def replace(self, record: ClaimRecord, generation: Any, run_id: str) -> Any | None:
        new = self._upload(record, generation)
        if new is None:  # refused: lost, unless the object is this run's own earlier renewal,
            current = self.read()  # one that landed although its call failed (a timeout)
            if current is not None and current[0].run_id == run_id:
                new = self._upload(record, current[1])
        return _LOST if new is None else new

    def take_over(self, record: ClaimRecord, dead_generation: Any) -> Any | None:
        return self._upload(record, dead_generation)

    def delete(self, generation: Any, run_id: str) -> None:
        blob = self._blob()
        try:
            self._call(blob.delete, 404, 412, if_generation_match=generation)
        except Exception as error:
            if _status(error) not in (404, 412):  # gone, or another run's now: not ours to delete
                raise


def _status(error: BaseException) -> int | None:
    code = getattr(error, "code", None)
    return code if isinstance(code, int) else None


class Claim:
    """This run's claim on `output`: `with` it (or `release()`), and `start_heartbeat()` to keep it
    alive. `took_over` is the dead run's claim this one replaced, if any."""

    def __init__(
        self,
        output: str,
        store: _Store,
        record: ClaimRecord,
        generation: Any,
        timing: ClaimTiming,
        took_over: ClaimRecord | None,
        took_over_why: str | None,
    ) -> None:
        self.output = output
        self.path = store.path
        self.record = record
        self.timing = timing
        self.took_over = took_over
        self.took_over_why = took_over_why
        self.lost_to: ClaimRecord | None = None  # the run that took it over while this one ran
        self._store = store
        if isinstance(store, _GcsStore):  # renewals and the release bounded: module docstring
            store.deadline_s = timing.every_s / 2
        self._generation = generation
        self._lock = threading.Lock()
        self._released = False
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    @property
    def held(self) -> bool:
        return not self._released and self.lost_to is None

    @property
    def fence(self) -> Fence:
        """The check every commit step of this run makes first (`check_held`)."""
        return Fence(self.output, self.record.run_id)

    def renew(self, **changes: Any) -> bool:
        """Rewrite the claim as renewed now (with `changes`: a job id); False once it is lost."""
        with self._lock:
            if not self.held:
                return False
            record = dataclasses.replace(self.record, renewed_at=time.time(), **changes)
            generation = self._store.replace(record, self._generation, self.record.run_id)
            if generation is _LOST:
                found = self._store.read()
                self.lost_to = found[0] if found else dataclasses.replace(self.record, run_id="none")
                return False
            self.record, self._generation = record, generation
            return True

    def set_job(self, job_id: str | None) -> None:
        """Record the job id once the runner gives one, so a refused run can name it. A failed
        write is a warning, never an error: the job is running, and the claim is still this run's."""
        if not job_id:
            return
        try:
            self.renew(job_id=job_id)
        except Exception as error:
            _LOGGER.warning("could not record job %s in the claim on %s: %s", job_id, self.output, error)

    def hand_over(self, job_id: str | None = None) -> None:
        """Leave the claim to the remote job this launcher no longer waits for (module docstring):
        marked detached, never released here; a later run sees it dead once the job finished."""
        self._stop.set()
        try:
            self.renew(detached=True, **({"job_id": job_id} if job_id else {}))
        except Exception as error:  # the job runs all the same: say what a later run may meet
            _LOGGER.warning(
                "could not hand the claim on %s to the job (%s): until the job ends, a later run may "
                "take the claim over once it is stale",
                self.output,
                error,
            )
        with self._lock:
            self._released = True

    def start_heartbeat(self, on_lost: Callable[[Claim], None] | None = None) -> None:
        """Renew every `timing.every_s` in a daemon thread until released; `on_lost(self)` once,
        if another run took the claim over meanwhile (this run stalled past the stale time)."""

        def beat() -> None:
            while not self._stop.wait(self.timing.every_s):
                try:
                    kept = self.renew()
                except Exception as error:  # a failed request: the next beat tries again
                    _LOGGER.warning("could not renew the claim on %s: %s", self.output, error)
                    continue
                if not kept:
                    if self.lost_to is not None and on_lost is not None:
                        on_lost(self)
                    return

        self._thread = threading.Thread(target=beat, name="output-claim", daemon=True)
        self._thread.start()

    def release(self) -> None:
        """Delete the claim if it is still this run's; safe to call twice, from any thread.
        Waits for a renewal under way no longer than its bounded deadline (Ctrl-C releases in
        seconds): a renewal that lands after the delete is refused by its precondition."""
        self._stop.set()
        waited = self._lock.acquire(timeout=self.timing.every_s / 2 + 1)
        try:
            if self._released:
                return
            self._released = True
            if self.lost_to is not None:
                return
            try:
                self._store.delete(self._generation, self.record.run_id)
            except Exception as error:  # the run's outcome matters more; staleness frees it later
                _LOGGER.warning("could not release the claim %s: %s", self.path, error)
        finally:
            if waited:
                self._lock.release()

    def __enter__(self) -> Claim:
        return self

    def __exit__(self, *exc: object) -> None:
        self.release()


def _store_for(output: str) -> _Store:
    return _GcsStore(output) if output.startswith("gs://") else _LocalStore(output)


LOST_MARKER = FENCED_MARKER


class ClaimLost(RuntimeError):
    """A commit step found this run's claim gone or another run's: it writes nothing. The text
    starts with LOST_MARKER, so the command finds it in whatever the runner raises."""


def check_held(output: str, run_id: str, what: str) -> None:
    """Fence a commit step (the shards' final names, the side files and summary.json, an
    append's merge): raise ClaimLost unless the claim on `output` is still run `run_id`'s.
    Cheap: one read of a small file or object, once per step, not per record."""
    found = _store_for(output).read()
    if found is not None and found[0].run_id == run_id:
        return
    holder = f"taken over by {found[0].describe()}" if found is not None else "removed"
    raise ClaimLost(
        f"{LOST_MARKER} {output}: its claim was {holder}, so this run stopped before writing {what} "
        "(one run writes an output; run again once the other has ended)"
    )


@dataclasses.dataclass(frozen=True)
class Fence:
    """What a commit step calls with what it is about to write (`StagedPlan.fence`): raises
    ClaimLost unless run `run_id` still holds `output`. A class of the project's own, so a
    pickled pipeline names no foreign class."""

    output: str
    run_id: str

    def __call__(self, what: str) -> None:
        check_held(self.output, self.run_id, what)


def lost_line(error: BaseException) -> str | None:
    """The one line of a ClaimLost, from the error itself or from the text a runner wraps it in."""
    text = str(error)
    start = text.find(LOST_MARKER)
    if start < 0:
        return None
    line = text[start:].splitlines()[0]
    return line.split(" [while running", 1)[0].rstrip("'\" ")


def read_claim(output: str) -> ClaimRecord | None:
    """The claim on `output`, if there is one (live or dead)."""
    found = _store_for(output).read()
    return found[0] if found else None


def take_claim(output: str, timing: ClaimTiming | None = None, job_id: str | None = None) -> Claim:
    """Claim `output` for this process, before anything under it is read or written.

    Raises ClaimHeld (a ConfigError) when a live run holds it, and gcs.StorageError when a gs://
    output cannot be written. A dead run's claim is taken over (`Claim.took_over` says whose)."""
    timing = timing or ClaimTiming()
    store = _store_for(output)
    for _ in range(10):  # each turn ends in ours, a live holder's, or a claim that moved meanwhile
        record = ClaimRecord.mine(time.time(), timing)
        if job_id:
            record = dataclasses.replace(record, job_id=job_id)
        created, generation = store.create(record)
        if created:
            return Claim(output, store, record, generation, timing, None, None)
        found = store.read()
        if found is None:
            continue  # released meanwhile: try again
        holder, generation = found
        now = time.time()
        why = holder.gone_why(timing, now, store.summary_time() if holder.detached or holder.job_id else None)
        if why is None:
            raise ClaimHeld(output, holder, timing, now)
        record = dataclasses.replace(ClaimRecord.mine(time.time(), timing), job_id=job_id)
        if isinstance(store, _GcsStore):
            taken = store.take_over(record, generation)
            if taken is not None:
                return Claim(output, store, record, taken, timing, holder, why)
        elif store.take_over(record, holder):
            return Claim(output, store, record, None, timing, holder, why)
    raise ConfigError("output", f"could not claim {output}: its claim {store.path} kept changing")


@contextlib.contextmanager
def claim_output(
    output: str, timing: ClaimTiming | None = None, on_lost: Callable[[Claim], None] | None = None
) -> Iterator[Claim]:
    """`with claim_output(config.output) as claim:` around `prepare` and the pipeline's run: the
    claim is taken, renewed while the block runs, and released however it ends."""
    claim = take_claim(output, timing)
    if claim.took_over is not None:
        _LOGGER.info(
            "took over the claim on %s of %s, which is dead: %s",
            output,
            claim.took_over.describe(),
            claim.took_over_why,
        )
    claim.start_heartbeat(on_lost)
    with claim:
        yield claim
