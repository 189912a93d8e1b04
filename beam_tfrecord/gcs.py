"""Google Cloud Storage as Beam's filesystem layer speaks it: the emulator switch, reused read
clients and clear errors.

Every gs:// listing and write in this project goes through `apache_beam.io.filesystems`, whose GCS
filesystem (`apache_beam.io.gcp.gcsio`) builds a google-cloud-storage client for each operation.
That client already honours STORAGE_EMULATOR_HOST, but before building it Beam looks up
Application Default Credentials and, where there are none (a laptop or CI with only an emulator),
retries the lookup with backoff for about 20 s per process before going anonymous. With the
emulator variable set we ask Beam for its own anonymous client straight away (`compat`'s switch);
without it nothing changes and real runs use Application Default Credentials exactly as Beam does.

Image reads are the one exception to "through FileSystems": a new client per read makes them
CPU-bound, so `read_bytes` keeps one `GcsIO` per thread. Measured against the emulator
(benchmarks/gcs_emulator.py, 2 cores): 65 reads/s against 204 on one thread; with 30 ms added to
every request, 52 against 89 on 8 threads.
"""

from __future__ import annotations

import contextlib
import dataclasses
import os
import threading
import uuid
from typing import TYPE_CHECKING, Any

from apache_beam.io.filesystem import CompressionTypes
from apache_beam.io.filesystems import FileSystems

from beam_tfrecord import compat
from beam_tfrecord.settings import ConfigError

if TYPE_CHECKING:
    from apache_beam.io.gcp.gcsio import GcsIO

__all__ = [
    "EMULATOR_ENV",
    "StorageError",
    "abandon",
    "bucket_of",
    "check_writable",
    "describe",
    "emulator_host",
    "problem",
    "read_bytes",
    "thread_client",
    "wants_credentials",
]

EMULATOR_ENV = "STORAGE_EMULATOR_HOST"


def emulator_host() -> str | None:
    """The emulator's address when one is configured (checked on every client Beam builds)."""
    return os.environ.get(EMULATOR_ENV) or None


def wants_credentials(requested: bool = True) -> bool:
    """Whether Beam should look up credentials: as asked, except never for the emulator."""
    return requested and emulator_host() is None


@dataclasses.dataclass(frozen=True)
class _ThreadClient:
    """A thread's GcsIO and what it was built for; any change builds a new one."""

    pid: int
    emulator: str | None
    options: Any
    gcsio: GcsIO

    def built_for(self, emulator: str | None, options: Any) -> bool:
        return (self.pid, self.emulator) == (os.getpid(), emulator) and self.options is options


_THREAD = threading.local()


def thread_client() -> GcsIO:
    """This thread's GcsIO for reads: built on the thread's first gs:// read, then reused.

    One per thread because a google-cloud-storage client holds a requests session, which is not
    thread-safe. Built again only in another process (a connection pool is not inherited), for
    another emulator address or for other filesystem options (another pipeline in this process).
    Under the emulator the client is anonymous and no credential is looked up.
    """
    from apache_beam.io.gcp import gcsio

    options = compat.filesystem_pipeline_options()
    host = emulator_host()
    cached: _ThreadClient | None = getattr(_THREAD, "client", None)
    if cached is None or not cached.built_for(host, options):
        storage_client = _anonymous_storage_client() if host else None  # None: Beam builds it from options
        client = gcsio.GcsIO(storage_client=storage_client, pipeline_options=options)
        cached = _ThreadClient(os.getpid(), host, options, client)
        _THREAD.client = cached
    return cached.gcsio


def _anonymous_storage_client() -> Any:
    from google.cloud import storage

    return storage.Client.create_anonymous_client()  # honours STORAGE_EMULATOR_HOST


def read_bytes(path: str) -> bytes:
    """A file's bytes as stored: never decompressed by extension (a `.gz` image stays its bytes).

    gs:// objects are read through this thread's reused client (`thread_client`), because
    `FileSystems.open` builds a new client per call, which costs CPU and a request (see the module
    docstring for the figures). Other paths go through Beam's filesystems.
    """
    if path.startswith("gs://"):
        with thread_client().open(path, "rb") as handle:
            return handle.read()
    with FileSystems.open(path, compression_type=CompressionTypes.UNCOMPRESSED) as handle:
        return handle.read()


class StorageError(ConfigError):
    """A gs:// path that cannot be used: `name` is the setting that gave it (`input`, `output`,
    `manifest`), `problem` what is wrong and what to do."""

    @classmethod
    def of(cls, setting: str, path: str, error: BaseException) -> StorageError:
        return cls(setting, problem(path, error))


def _root_causes(error: BaseException) -> list[BaseException]:
    """The exceptions inside Beam's BeamIOError wrappers (match wraps list, which wraps the client's)."""
    details = getattr(error, "exception_details", None)
    if isinstance(details, dict) and details:
        found: list[BaseException] = []
        for inner in details.values():
            if isinstance(inner, BaseException):
                found += _root_causes(inner)
        return found or [error]
    return [error]


def _status(error: BaseException) -> int | None:
    """The HTTP status of a google-cloud-storage error (API call or media upload/download)."""
    code = getattr(error, "code", None)
    if isinstance(code, int):
        return code
    status = getattr(getattr(error, "response", None), "status_code", None)
    if isinstance(status, int):
        return status
    return next((arg for arg in error.args if isinstance(arg, int) and 100 <= arg < 600), None)


def bucket_of(path: str) -> str:
    return path[len("gs://") :].split("/", 1)[0]


def _bucket_missing(bucket: str) -> bool:
    try:
        FileSystems.match([f"gs://{bucket}/*"], limits=[1])
    except Exception as error:
        return any(_status(cause) == 404 for cause in _root_causes(error))
    return False


def problem(path: str, error: BaseException) -> str:
    """What is wrong with a failed gs:// operation on `path`, and what to do, in one line (read
    after the name of the setting that gave the path)."""
    bucket = bucket_of(path)
    for cause in _root_causes(error):
        status = _status(cause)
        if status == 404:
            if _bucket_missing(bucket):
                return f"{path}: bucket gs://{bucket} does not exist (or is not visible to you)"
            return f"{path} does not exist"
        if status in (401, 403):
            return (
                f"{path}: permission denied on gs://{bucket} ({status}); check the credentials "
                "(gcloud auth application-default login, or the workers' service account) and that they "
                "hold a Storage role on the bucket (Object Viewer to read, Object Admin to write)"
            )
    cause = _root_causes(error)[0]
    return f"{path}: {type(cause).__name__}: {cause}"


def describe(setting: str, path: str, error: BaseException) -> str:
    """One line for a failed gs:// operation: which setting, what is wrong, and what to do."""
    return f"{setting} {problem(path, error)}"


def check_writable(option: str, path: str) -> None:
    """Raise StorageError unless objects can be created and deleted under a gs:// `path`.

    Writing the shards needs both (Beam writes temp files, then copies and deletes them), and a
    read-only bucket would otherwise fail only after every image was converted.
    """
    if not path.startswith("gs://"):
        return
    probe = f"{path.rstrip('/')}/.beam-tfrecord-write-check-{uuid.uuid4().hex}"
    try:
        handle = FileSystems.create(probe, compression_type=CompressionTypes.UNCOMPRESSED)
    except Exception as error:
        raise StorageError.of(option, path, error) from None
    try:
        handle.write(b"")
        handle.close()
        FileSystems.delete([probe])
    except Exception as error:
        abandon(handle)
        raise StorageError.of(option, path, error) from None


def abandon(handle: Any) -> None:
    """Cancel a failed upload: google-cloud-storage's BlobWriter would otherwise retry it again
    from its finalizer, for up to two minutes, after the run has already reported the error."""
    terminate = getattr(handle, "terminate", None)
    if terminate is not None:
        with contextlib.suppress(Exception):  # refused already: nothing left to cancel
            terminate()


# Every process that imports beam_tfrecord, launcher and workers alike.
compat.install_emulator_switch(wants_credentials)
