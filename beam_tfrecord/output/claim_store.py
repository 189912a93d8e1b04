"""Where a claim lives and how it is written: a file beside the output's files, or an object
under a gs:// output. Every write is conditional, so of two runs only one wins:
  - locally, a claim is written whole beside its name and `os.link`ed into place (a link, like
    `O_EXCL`, fails when the name exists; no reader sees half a claim), and the run holds an
    `flock` on the output folder for as long as it holds the claim: the kernel drops the lock
    when the process dies, zombie or not, so on one kernel the lock says who is alive;
  - on gs://, an upload with google-cloud-storage's `if_generation_match` precondition (0:
    only if absent; else only over the generation read), which GCS refuses with 412.
A read gives the record with what storage says of it: its generation (the precondition of the
next write), a version that changes with every write (what a reader watches), and when storage
last wrote it, by storage's clock (GCS's `updated`, the file's modification time).
"""

from __future__ import annotations

import contextlib
import dataclasses
import enum
import fcntl
import os
from collections.abc import Callable
from typing import Final, Literal, TypeAlias

from beam_tfrecord import gcs, storage
from beam_tfrecord.edges import CloudObject
from beam_tfrecord.names import APPEND_DIR, CLAIM_FILE, SUMMARY_FILE
from beam_tfrecord.output.claim_record import UNREADABLE, ClaimRecord, alive
from beam_tfrecord.write_failures import writing

__all__ = [
    "LOST",
    "ClaimStore",
    "Found",
    "GcsStore",
    "Generation",
    "LocalStore",
    "Replaced",
    "Version",
    "claim_path",
    "store_for",
]


class _Lost(enum.Enum):
    LOST = "lost"


LOST: Final = _Lost.LOST  # `replace`: the claim is no longer this run's
# What a conditional write must match: the gs:// object's generation (0: absent); None locally.
Generation: TypeAlias = int | None
# What changes with every write: the gs:// generation, or a local file's (inode, mtime, size).
Version: TypeAlias = int | tuple[int, int, int] | None
# What `replace` gives: the new generation, or LOST.
Replaced: TypeAlias = Generation | Literal[_Lost.LOST]


def claim_path(output: str) -> str:
    """Where the claim on `output` lives: directly under it."""
    return storage.join(output, CLAIM_FILE)


@dataclasses.dataclass(frozen=True)
class Found:
    """A claim as read: its record, the generation a conditional write must match (gs://;
    locally None), a version that changes with every write, and when storage last wrote it."""

    record: ClaimRecord
    generation: Generation
    version: Version
    written_at: float


class ClaimStore:
    """The claim object's reads and conditional writes (module docstring)."""

    remote = False  # its calls cross a network: no lock is held across them (output.claim)

    def __init__(self, output: str) -> None:
        self.output = output
        self.path = claim_path(output)

    def lock(self) -> bool | None:
        """Take the output's lock for this run: True taken, False held by a live process, None
        where there is none (gs://, a filesystem without locks)."""
        return None

    def unlock(self) -> None:
        """Drop the lock `lock` took, if any."""

    def read(self) -> Found | None:
        raise NotImplementedError

    def create(self, record: ClaimRecord) -> tuple[bool, Generation]:
        """(True, the new generation), or (False, None) when a claim is there already."""
        raise NotImplementedError

    def replace(self, record: ClaimRecord, generation: Generation, run_id: str) -> Replaced:
        """Overwrite the claim of `run_id` at `generation`: the new generation, or LOST when it
        is no longer that run's."""
        raise NotImplementedError

    def take_over(self, record: ClaimRecord, dead: Found) -> tuple[bool, Generation]:
        """Replace the dead claim `dead` with `record`: (True, its generation), or (False, None)
        when the claim changed since it was read (another run took it first)."""
        raise NotImplementedError

    def delete(self, generation: Generation, run_id: str) -> None:
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


class LocalStore(ClaimStore):
    """A file, and an flock on the output folder (module docstring). Renewed by writing beside
    it and renaming over it, once it is read to be still this run's."""

    made_folder = False  # the output folder was made for the claim: removed with it while empty

    def __init__(self, output: str) -> None:
        super().__init__(output)
        self._lock: int | None = None

    def _make_folder(self) -> None:
        with writing(self.path):  # a folder that cannot be written: one line (WriteFailed)
            if not os.path.isdir(self.output):
                os.makedirs(self.output, exist_ok=True)
                self.made_folder = True

    def lock(self) -> bool | None:
        for _ in range(3):  # the folder removed and made again meanwhile: lock the new one
            taken = self._lock_folder()
            if taken != "moved":
                return taken
        return None

    def _lock_folder(self) -> bool | Literal["moved"] | None:
        self._make_folder()
        try:
            descriptor = os.open(self.output, os.O_RDONLY | os.O_DIRECTORY)
        except OSError:
            return None
        try:
            fcntl.flock(descriptor, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            os.close(descriptor)
            return False
        except OSError:  # a filesystem without flock (some network ones): the claim alone decides
            os.close(descriptor)
            return None
        try:  # the folder locked is the one at the path, not one removed meanwhile
            same = os.fstat(descriptor).st_ino == os.stat(self.output).st_ino
        except OSError:
            same = False
        if not same:
            os.close(descriptor)
            return "moved"
        self._lock = descriptor
        return True

    def unlock(self) -> None:
        if self._lock is not None:
            with contextlib.suppress(OSError):
                os.close(self._lock)
            self._lock = None

    def read(self) -> Found | None:
        try:
            record, stat = _read_local(self.path)
        except FileNotFoundError:
            return None
        return Found(record, None, (stat.st_ino, stat.st_mtime_ns, stat.st_size), stat.st_mtime)

    def create(self, record: ClaimRecord) -> tuple[bool, Generation]:
        # Written whole beside it, then linked into place: a link, like O_EXCL, fails when the
        # name exists, and no reader ever sees a half-written claim.
        self._make_folder()
        temporary = self._beside(record)
        with writing(self.path):
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
            if rest.startswith("dead-") or (pid.isdigit() and not alive(int(pid))):
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

    def replace(self, record: ClaimRecord, generation: Generation, run_id: str) -> Replaced:
        current = self.read()
        if current is None or current.record.run_id != run_id:
            return LOST
        temporary = self._beside(record)
        with open(temporary, "wb") as handle:
            handle.write(record.to_bytes())
        os.replace(temporary, self.path)
        return None

    def take_over(self, record: ClaimRecord, dead: Found) -> tuple[bool, Generation]:
        """Move the dead claim aside (one rename wins), check that what moved is the dead one
        (another rerun may have taken it over first: then put theirs back), then create ours."""
        aside = f"{self.path}.dead-{record.run_id}"
        try:
            os.rename(self.path, aside)
        except FileNotFoundError:
            return False, None
        if _read_local(aside)[0] != dead.record:
            with contextlib.suppress(FileExistsError):
                os.link(aside, self.path)
            os.remove(aside)
            return False, None
        os.remove(aside)
        return self.create(record)

    def delete(self, generation: Generation, run_id: str) -> None:
        current = self.read()
        if current is not None and current.record.run_id == run_id:
            with contextlib.suppress(FileNotFoundError):
                os.remove(self.path)
        if self.made_folder:
            with contextlib.suppress(OSError):  # only while empty: a run that wrote nothing
                os.rmdir(self.output)


def _read_local(path: str) -> tuple[ClaimRecord, os.stat_result]:
    """A claim file's record and its file's facts; one that does not parse (half written) as
    renewed when its file was last written."""
    with open(path, "rb") as handle:
        record = ClaimRecord.of_bytes(handle.read())
        stat = os.fstat(handle.fileno())
    if record.run_id == UNREADABLE:
        record = dataclasses.replace(record, started_at=stat.st_mtime, renewed_at=stat.st_mtime)
    return record, stat


class GcsStore(ClaimStore):
    """An object, written with google-cloud-storage's generation preconditions (GCS answers 412
    when the object's generation differs: 0 means "absent"), through this thread's client."""

    remote = True

    def __init__(self, output: str) -> None:
        super().__init__(output)
        bucket, _, self.name = self.path[len("gs://") :].partition("/")
        self.bucket = bucket
        # A claim's requests give up sooner than the run's reads: a renewal retried past half a
        # heartbeat would outlive the lease it keeps (Claim sets it from its timing).
        self.deadline_s: float | None = None

    def _blob(self) -> CloudObject:
        return gcs.thread_client().client.bucket(self.bucket).blob(self.name)

    def _call(self, method: Callable[..., CloudObject], *expected: int, **kwargs: object) -> CloudObject:
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
            if gcs.http_status(error) in expected:
                raise
            raise gcs.StorageError.of("output", self.output, error) from None

    def read(self) -> Found | None:
        for _ in range(5):  # rewritten between its metadata and its bytes: read again
            blob = self._blob()
            try:
                self._call(blob.reload, 404)
            except Exception as error:
                if gcs.http_status(error) == 404:
                    return None
                raise
            # Taken before the download, which rewrites the blob's properties from its answer's
            # headers (without the generation, where a server does not send it).
            generation, updated = blob.generation, blob.updated
            try:
                data = self._call(blob.download_as_bytes, 404, 412, if_generation_match=generation)
            except Exception as error:
                if gcs.http_status(error) in (404, 412):
                    continue
                raise
            record = ClaimRecord.of_bytes(data)
            written = updated.timestamp() if updated is not None else record.renewed_at
            if record.run_id == UNREADABLE:
                record = dataclasses.replace(record, started_at=written, renewed_at=written)
            return Found(record, generation, generation, written)
        raise gcs.StorageError(
            "output", f"{self.path} changed between every read of it: too many runs are writing it"
        )

    def _upload(self, record: ClaimRecord, generation: Generation) -> int | None:
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
            if gcs.http_status(error) != 412:
                raise
            # Refused; unless a retry of our own upload found the first attempt had landed.
            current = self.read()
            if current is not None and current.record == record:
                return current.generation
            return None
        return blob.generation

    def create(self, record: ClaimRecord) -> tuple[bool, Generation]:
        generation = self._upload(record, 0)
        return generation is not None, generation

    def replace(self, record: ClaimRecord, generation: Generation, run_id: str) -> Replaced:
        new = self._upload(record, generation)
        if new is None:  # refused: lost, unless the object is this run's own earlier renewal,
            current = self.read()  # one that landed although its call failed (a timeout)
            if current is not None and current.record.run_id == run_id:
                new = self._upload(record, current.generation)
        return LOST if new is None else new

    def take_over(self, record: ClaimRecord, dead: Found) -> tuple[bool, Generation]:
        generation = self._upload(record, dead.generation)
        return generation is not None, generation

    def delete(self, generation: Generation, run_id: str) -> None:
        """Delete the claim at `generation`; refused because a renewal of the same run landed
        meanwhile, delete it at that one. Another run's claim is never deleted."""
        for _ in range(3):
            try:
                self._call(self._blob().delete, 404, 412, if_generation_match=generation)
                return
            except Exception as error:
                if gcs.http_status(error) == 404:
                    return
                if gcs.http_status(error) != 412:
                    raise
            current = self.read()
            if current is None or current.record.run_id != run_id:
                return  # gone, or another run's now: not ours to delete
            generation = current.generation


def store_for(output: str) -> ClaimStore:
    return GcsStore(output) if storage.is_gcs(output) else LocalStore(output)
