"""One output, one writer: a claim under the output, taken before anything there is touched,
renewed while the run lives and released when it ends; a lease, in the sense etcd's and
ZooKeeper's are: who holds it may write, and nobody else.

Two runs into one output at once lose work: a second run with `overwrite` deletes the first's
staged plan while its workers read it, and one without takes the live run's temporary folder for
a killed run's and "resumes" it. So a run first creates `names.CLAIM_FILE` in the output, only if
it is absent (`output.claim_store`: an exclusive create locally, with an flock on the output folder
held for the whole run; a generation precondition on gs://). The claim names the run, host,
process, start time, its own timing and, once known, its remote job and where to ask about it.

A claim found there is the live run's unless it is dead, which the next run decides so:
  - the output folder's lock held by another process: alive (the kernel drops a dead process's
    lock, zombie or not). A claim whose run held the lock, made on this kernel, with the lock
    free: dead;
  - a remote job's claim (its id, or a job submitted without waiting): dead once the output holds
    a `summary.json` written after it (for an `--append` job, its work folder's, which the next
    `--append` merges), or once the job's runner says the job ended (`output.job_state`: failed,
    cancelled, done); alive while the runner says it runs, or cannot be asked;
  - written in this pid space: the kernel decides. Its process is gone (its pid missing, a
    zombie, or reused by a later process), or it is alive and the claim stands however long it
    went unrenewed (Ctrl-Z, a laptop asleep, a clock set forward: none of them is a death);
  - otherwise (another host): by storage's clock and the reader's own, never the writer's. A
    claim storage wrote within one and a half heartbeats, by this machine's clock, is alive. Every
    other is watched on this machine's monotonic clock for half its stale time plus a heartbeat:
    a live run renews it within a heartbeat, and one that cannot stops itself within half its
    stale time (below), so a claim unchanged that long is dead, however far any clock is off.
The stale time is the longer of the reader's and the one the claim records (120 s by default). A
dead claim is taken over, and the log says whose: on gs:// by an upload that matches the dead
claim's generation; locally by renaming it aside (one rename wins) and creating ours.

The holder renews every heartbeat (`Claim.start_heartbeat`), on gs:// with a precondition on
the generation it last wrote, so a claim taken over meanwhile is noticed rather than overwritten.
A renewal's requests give up after half a heartbeat. A run that has not renewed for half its
stale time, or finds its claim taken over, fences itself: it cancels its remote job, if any,
`on_lost` stops it, and every commit step after (`check_held`: a shard's final name, the side
files and `summary.json`, an append's merge) refuses to write, in library use too.
"""

from __future__ import annotations

import contextlib
import dataclasses
import logging
import os
import threading
import time
from collections.abc import Callable, Iterator
from typing import Literal

from beam_tfrecord.config_base import ConfigError
from beam_tfrecord.edges import Json
from beam_tfrecord.names import SUMMARY_FILE
from beam_tfrecord.output import job_state
from beam_tfrecord.output.claim_record import (
    STALE_ENV,
    UNREADABLE,
    ClaimRecord,
    ClaimTiming,
    alive,
    process_start,
    timing_from_environment,
    utc,
)
from beam_tfrecord.output.claim_store import (
    LOST,
    ClaimStore,
    Found,
    GcsStore,
    Generation,
    claim_path,
    store_for,
)
from beam_tfrecord.write_failures import FENCED_MARKER

__all__ = [
    "LOST_MARKER",
    "STALE_ENV",
    "UNREADABLE",
    "Claim",
    "ClaimHeld",
    "ClaimLost",
    "ClaimRecord",
    "ClaimTiming",
    "Fence",
    "Verdict",
    "check_held",
    "claim_output",
    "claim_path",
    "judge",
    "lost_line",
    "read_claim",
    "take_claim",
    "timing_from_environment",
]

_LOGGER = logging.getLogger(__name__)
LOST_MARKER = FENCED_MARKER
# Runs of this process that fenced themselves (could not renew), with why: their commit steps
# refuse although the claim still names them (storage could not be told).
_FENCED: dict[str, str] = {}
# Runs of this process that released their claim: one whose delete failed is no live run's.
_ENDED: set[str] = set()


@dataclasses.dataclass(frozen=True)
class Verdict:
    """What a reader makes of a claim found on an output (module docstring).

    Args:
      dead_why: why its run is dead; None while it may be alive.
      watch_s: seconds to watch it on this machine's clock: dead if it does not change.
      quiet_s: seconds since storage last wrote it, by this machine's clock.
      job: what its remote job's runner said, where it was asked.
    """

    dead_why: str | None = None
    watch_s: float = 0.0
    quiet_s: float = 0.0
    job: job_state.JobState | None = None


def judge(
    found: Found,
    store: ClaimStore,
    timing: ClaimTiming,
    lock: bool | None,
    now: float,
    launcher_gone: bool = False,
) -> Verdict:
    """Whether the claim `found` is a dead run's (module docstring). `lock`: whether this reader
    took the output folder's lock (None: there is none). A remote job's claim whose launcher
    still waits is its launcher's to keep: the job's rules apply once the launcher is gone
    (detached, or `launcher_gone`: watched unrenewed)."""
    record = found.record
    quiet = now - found.written_at
    if lock is False:  # a live process on this kernel holds the output folder's lock
        return Verdict(quiet_s=quiet)
    if record.detached or launcher_gone:
        return _job_verdict(record, store, quiet)
    if record.in_this_pid_space():
        if not alive(record.pid):
            return _launcher_gone(record, store, quiet, f"process {record.pid} is gone")
        started = process_start(record.pid)
        if None not in (started, record.pid_started) and started != record.pid_started:
            return _launcher_gone(
                record, store, quiet, f"process {record.pid} is gone (its pid now belongs to a later process)"
            )
        if record.pid == os.getpid() and record.run_id in _ENDED:
            return Verdict(f"this process ended run {record.run_id} (its release failed)", quiet_s=quiet)
        if not (lock and record.locked):
            return Verdict(quiet_s=quiet)  # alive on this host: never dead by time
    if lock and record.locked and record.on_this_kernel():
        return _launcher_gone(
            record, store, quiet, f"process {record.pid} no longer holds the output folder's lock"
        )
    heartbeat = record.heartbeat(timing)
    if 0 <= quiet <= 1.5 * heartbeat:
        return Verdict(quiet_s=quiet)
    return Verdict(watch_s=record.stale_after(timing) / 2 + heartbeat, quiet_s=quiet)


def _launcher_gone(record: ClaimRecord, store: ClaimStore, quiet: float, why: str) -> Verdict:
    """The claim's process is dead: so is the claim, unless it had a remote job (which the
    job's rules judge)."""
    return _job_verdict(record, store, quiet) if record.remote else Verdict(why, quiet_s=quiet)


def _job_verdict(record: ClaimRecord, store: ClaimStore, quiet: float) -> Verdict:
    """A claim left to its remote job: dead once the job wrote a summary since the claim was
    made (storage's clock for both), or its runner says it ended; held otherwise."""
    summary_at = store.summary_time()
    since = record.stored_at if record.stored_at is not None else record.started_at
    if summary_at is not None and summary_at >= since:
        return Verdict(f"its job wrote {SUMMARY_FILE} at {utc(summary_at)}", quiet_s=quiet)
    state = job_state.ask(record)
    if state is not None and state.ended:
        job = state.job_id or record.job_name
        return Verdict(f"its job {job} ended ({state.state}, says {state.source})", quiet_s=quiet, job=state)
    return Verdict(quiet_s=quiet, job=state)


def _watch(store: ClaimStore, found: Found, watch_s: float, quiet_s: float) -> Found | Literal[True] | None:
    """Watch the claim `found` for `watch_s` seconds of this machine's monotonic clock: True if
    it did not change, else what it became (None: gone)."""
    _LOGGER.info(
        "%s is claimed by %s, last written %s (%.0f s ago by this machine's clock): watching it "
        "for up to %g s, and taking it over unless its run renews it",
        store.output,
        found.record.describe(),
        utc(found.written_at),
        quiet_s,
        watch_s,
    )
    deadline = time.monotonic() + watch_s
    while (left := deadline - time.monotonic()) > 0:
        time.sleep(min(1.0, left))
        now = store.read()
        if now is None or now.version != found.version:
            return now
    return True


class ClaimHeld(ConfigError):
    """The output is claimed by a live run; `holder` says whose. Its text is the whole line."""

    def __init__(self, output: str, holder: ClaimRecord, timing: ClaimTiming, verdict: Verdict) -> None:
        self.output = output
        self.holder = holder
        path = claim_path(output)
        stale = holder.stale_after(timing)
        watched = stale / 2 + holder.heartbeat(timing)
        job = verdict.job
        if holder.detached or (holder.job_id and verdict.quiet_s > stale):
            if job is not None:
                said = f"{job.source} says it is {job.state}. Nothing was touched. Wait for it or cancel it"
            else:
                said = (
                    f"it has written no {SUMMARY_FILE} since. Nothing was touched. If that job has "
                    f"ended without finishing (failed or cancelled), delete {path} and run again; "
                    "otherwise wait for it"
                )
            line = (
                f"{output} is being written by {holder.describe()}, submitted without waiting; {said}, "
                "or choose another --output"
            )
        else:
            line = (
                f"{output} is being written by {holder.describe()}; its claim was last renewed "
                f"{max(0.0, verdict.quiet_s):.0f} s ago ({utc(time.time() - verdict.quiet_s)}). Nothing was "
                "touched, and --overwrite does not replace a live run's output. Wait for that run to end "
                "or stop it, or choose another --output; a run that died is recognised (its process gone "
                f"on its host, or, from another host, its claim not renewed for {watched:g} s "
                "while watched) and its claim taken over by the next run"
            )
        super().__init__("output", line)

    def __str__(self) -> str:
        return f"{self.problem}"


class Claim:
    """This run's claim on `output`: `with` it (or `release()`), and `start_heartbeat()` to keep it
    alive. `took_over` is the dead run's claim this one replaced, if any."""

    def __init__(
        self,
        output: str,
        store: ClaimStore,
        record: ClaimRecord,
        generation: Generation,
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
        self.fenced_why: str | None = None  # why this run stopped writing (it could not renew)
        self._store = store
        if isinstance(store, GcsStore):  # renewals and the release bounded: module docstring
            store.deadline_s = timing.every_s / 2
        self._generation = generation
        self._renewed_at = time.monotonic()  # the last renewal that landed, on this machine's clock
        self._cancel: Callable[[], object] | None = None  # cancels this run's remote job
        self._lock = threading.Lock()  # guards the fields; never held across a storage call
        self._write_lock = threading.Lock()  # one write to the claim at a time
        self.stored_at: float | None = None  # storage's time of the claim's first write
        self._released = False
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    @property
    def held(self) -> bool:
        return not self._released and self.lost_to is None and self.fenced_why is None

    @property
    def fence(self) -> Fence:
        """The check every commit step of this run makes first (`check_held`)."""
        return Fence(self.output, self.record.run_id)

    @property
    def cancels_job(self) -> bool:
        """Whether losing the claim cancels a remote job of this run (`set_job`)."""
        return self._cancel is not None

    def lost_why(self) -> str:
        """Why this run no longer holds its output, in a few words for its last line."""
        if self.lost_to is not None:
            return f"was taken over by {self.lost_to.describe()}"
        return self.fenced_why or "was released"

    def note_storage_time(self) -> Claim:
        """Read back storage's time of the claim just written: it goes into the next renewal, so
        a job's summary is compared with it on storage's clock, never the launcher's."""
        found = self._store.read()
        if found is not None and found.record == self.record:
            self.stored_at = found.written_at
        return self

    def renew(self, **changes: Json) -> bool:
        """Rewrite the claim as renewed now (with `changes`: fields of its JSON record, a job's
        facts); False once it is lost.
        One write at a time (a renewal, a job's facts, the hand-over: none undoes another), and
        none under the lock a release takes, so a release never waits on gs:// requests."""
        with self._write_lock:
            with self._lock:
                if not self.held:
                    return False
                if self.stored_at is not None and self.record.stored_at is None:
                    changes = {"stored_at": self.stored_at, **changes}
                record = dataclasses.replace(self.record, renewed_at=time.time(), **changes)
                generation = self._generation
            new = self._store.replace(record, generation, record.run_id)
            holder = self._store.read() if new is LOST else None
            with self._lock:
                if self._released:  # released meanwhile: the release deletes whichever generation is ours
                    return False
                if new is LOST:
                    self.lost_to = holder.record if holder else dataclasses.replace(record, run_id="none")
                    return False
                self.record, self._generation = record, new
                self._renewed_at = time.monotonic()
                return True

    def set_job(self, job_id: str | None, cancel: Callable[[], object] | None = None, **facts: str) -> None:
        """Record the remote job (its id once the runner gives one; `facts`: where to ask about it,
        `job_state.job_facts`), so a refused run can name it and a later one ask its runner; and
        how to cancel it, should this run lose its claim. A failed write is a warning, never an
        error: the job is running, and the claim is still this run's."""
        self._cancel = cancel
        changes = {**facts, **({"job_id": job_id} if job_id else {})}
        if not changes:
            return
        try:
            self.renew(**changes)
        except Exception as error:
            _LOGGER.warning("could not record job %s in the claim on %s: %s", job_id, self.output, error)

    def hand_over(self, job_id: str | None = None, **facts: str) -> None:
        """Leave the claim to the remote job this launcher no longer waits for (module docstring):
        marked detached, never released here; a later run sees it dead once the job has ended."""
        self._stop.set()
        try:
            self.renew(detached=True, **facts, **({"job_id": job_id} if job_id else {}))
        except Exception as error:  # the job runs all the same: say what a later run may meet
            _LOGGER.warning(
                "could not hand the claim on %s to the job (%s): until the job ends, a later run may "
                "take the claim over once it is stale",
                self.output,
                error,
            )
        with self._lock:
            self._released = True
        self._store.unlock()

    def start_heartbeat(self, on_lost: Callable[[Claim], None] | None = None) -> None:
        """Renew every `timing.every_s` in a daemon thread until released. If another run took
        the claim over meanwhile, or no renewal landed for half the stale time, the run fences
        itself (module docstring) and `on_lost(self)` is called once."""
        give_up_s = self.timing.stale_after_s / 2

        def beat() -> None:
            while True:
                left = self._renewed_at + give_up_s - time.monotonic()
                if self._stop.wait(max(0.0, min(self.timing.every_s, left))):
                    return
                try:
                    kept: bool | None = self.renew()
                except Exception as error:  # a failed request: the next beat tries again
                    _LOGGER.warning("could not renew the claim on %s: %s", self.output, error)
                    kept = None
                if self._stop.is_set():
                    return
                unrenewed = time.monotonic() - self._renewed_at
                if kept is False or (kept is None and unrenewed >= give_up_s):
                    if kept is None:
                        self.fenced_why = f"could not be renewed for {unrenewed:.0f} s"
                    self._fence_self()
                    if on_lost is not None:
                        on_lost(self)
                    return

        self._thread = threading.Thread(target=beat, name="output-claim", daemon=True)
        self._thread.start()

    def _fence_self(self) -> None:
        """Write nothing more: every later commit step of this run refuses (`check_held`), and
        its remote job, if any, is cancelled."""
        _FENCED[self.record.run_id] = self.lost_why()
        if self._cancel is not None:
            try:
                self._cancel()
                _LOGGER.error("cancelled this run's job: its claim on %s %s", self.output, self.lost_why())
            except Exception as error:
                _LOGGER.error("could not cancel this run's job (%s): cancel it by hand", error)

    def release(self) -> None:
        """Delete the claim if it is still this run's; safe to call twice, from any thread. Never
        waits on a gs:// renewal under way (Ctrl-C releases in seconds): the delete matches
        whichever generation is this run's, and a renewal that lands after it is refused by its
        precondition."""
        self._stop.set()
        # A local renewal reads, then renames over: one under way would put the file back.
        writing = self._write_lock if not self._store.remote else contextlib.nullcontext()
        with writing, self._lock:
            if self._released:
                return
            self._released = True
            generation, lost = self._generation, self.lost_to is not None
        _ENDED.add(self.record.run_id)
        try:
            if not lost:
                self._store.delete(generation, self.record.run_id)
        except Exception as error:  # the run's outcome matters more; staleness frees it later
            _LOGGER.warning("could not release the claim %s: %s", self.path, error)
        finally:
            self._store.unlock()

    def __enter__(self) -> Claim:
        return self

    def __exit__(self, *exc: object) -> None:
        self.release()


class ClaimLost(RuntimeError):
    """A commit step found this run's claim gone or another run's: it writes nothing. The text
    starts with LOST_MARKER, so the command finds it in whatever the runner raises."""


def check_held(output: str, run_id: str, what: str) -> None:
    """Fence a commit step (the shards' final names, the side files and summary.json, an
    append's merge): raise ClaimLost unless the claim on `output` is still run `run_id`'s.
    Cheap: one read of a small file or object, once per step, not per record."""
    fenced = _FENCED.get(run_id)
    found = None if fenced else store_for(output).read()
    if found is not None and found.record.run_id == run_id:
        return
    if fenced:
        holder = fenced
    else:
        holder = f"was taken over by {found.record.describe()}" if found is not None else "was removed"
    raise ClaimLost(
        f"{LOST_MARKER} {output}: its claim {holder}, so this run stopped before writing {what} "
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
    found = store_for(output).read()
    return found.record if found else None


def _mine(timing: ClaimTiming, lock: bool | None, job_id: str | None) -> ClaimRecord:
    record = ClaimRecord.mine(time.time(), timing)
    return dataclasses.replace(record, locked=bool(lock), job_id=job_id)


def take_claim(output: str, timing: ClaimTiming | None = None, job_id: str | None = None) -> Claim:
    """Claim `output` for this process, before anything under it is read or written.

    Raises ClaimHeld (a ConfigError) when a live run holds it, and gcs.StorageError when a gs://
    output cannot be written. A dead run's claim is taken over (`Claim.took_over` says whose)."""
    timing = timing or ClaimTiming()
    store = store_for(output)
    for turn in range(10):  # each turn ends in ours, a live holder's, or a claim that moved meanwhile
        lock = store.lock()
        try:
            claim = _try_claim(output, store, timing, lock, job_id)
        except BaseException:
            store.unlock()
            raise
        if claim is not None:
            return claim
        store.unlock()
        time.sleep(0.02 * turn)
    raise ConfigError("output", f"could not claim {output}: its claim {store.path} kept changing")


def _try_claim(
    output: str, store: ClaimStore, timing: ClaimTiming, lock: bool | None, job_id: str | None
) -> Claim | None:
    """One turn of `take_claim`: the claim, ClaimHeld, or None when it moved meanwhile."""
    if lock is not False:  # a lock held elsewhere: its holder is about to create, or just released
        record = _mine(timing, lock, job_id)
        created, generation = store.create(record)
        if created:
            return Claim(output, store, record, generation, timing, None, None).note_storage_time()
    found = store.read()
    if found is None:
        return None
    if lock is False and found.record.in_this_pid_space() and not alive(found.record.pid):
        return None  # exiting: its last threads hold the lock a moment longer (a zombie leader)
    verdict = judge(found, store, timing, lock, time.time())
    why = verdict.dead_why
    if why is None and verdict.watch_s:
        changed = _watch(store, found, verdict.watch_s, verdict.quiet_s)
        if changed is True and found.record.remote:  # its launcher is gone: the job decides
            verdict = judge(found, store, timing, lock, time.time(), launcher_gone=True)
            why = verdict.dead_why
        elif changed is True:
            why = (
                f"not renewed while watched for {verdict.watch_s:g} s (last written "
                f"{verdict.quiet_s:.0f} s before, by this machine's clock)"
            )
        elif changed is None or changed.record.run_id != found.record.run_id:
            return None
        if changed is not True:
            verdict = dataclasses.replace(verdict, quiet_s=0.0)  # it renewed: alive
    if why is None:
        raise ClaimHeld(output, found.record, timing, verdict)
    record = _mine(timing, lock, job_id)
    taken, generation = store.take_over(record, found)
    if not taken:
        return None
    return Claim(output, store, record, generation, timing, found.record, why).note_storage_time()


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
    with claim:
        claim.start_heartbeat(on_lost)
        yield claim
