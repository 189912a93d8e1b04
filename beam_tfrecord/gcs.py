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
CPU-bound, so `read_bytes` keeps one client per thread, which reads faster against the
emulator with and without added latency (benchmarks/NOTES.md#gs-requests).

Every request has a time limit (`GcsConfig.timeout_s`) and is retried with exponential backoff.
google-cloud-storage waits 60 s by default for an answer, and Beam's filesystem sets no other
limit, so a request that is accepted and never answered cost a minute, and a few such stalls
stretched a short run to minutes (benchmarks/NOTES.md#gs-requests). Reads pass the limit and a
retry through google-cloud-storage's public `timeout=` and `retry=`; the clients Beam's filesystem
builds (listing, writes, copies, deletes) get it on their transport (`compat.bound_requests`), and
Beam's own retry (google-cloud-storage's `DEFAULT_RETRY`, which retries timeouts, 503s and reset
connections) does the rest. The limit is process-wide: `use_settings` sets it, on the launcher
before listing and on every worker in the setup of the DoFns that touch storage.
"""

from __future__ import annotations

import contextlib
import dataclasses
import os
import posixpath
import threading
import uuid
from collections.abc import Sequence
from typing import TYPE_CHECKING

from apache_beam.io.filesystem import CompressionTypes
from apache_beam.io.filesystems import FileSystems

from beam_tfrecord import compat
from beam_tfrecord.compat import FilesystemOptions
from beam_tfrecord.config_base import Config, ConfigError, documented, setting
from beam_tfrecord.edges import CloudObject

if TYPE_CHECKING:
    from apache_beam.io.gcp.gcsio import GcsIO

__all__ = [
    "DEFAULT_TIMEOUT_S",
    "EMULATOR_ENV",
    "GcsConfig",
    "StorageError",
    "abandon",
    "bucket_of",
    "check_writable",
    "current_settings",
    "delete_files",
    "describe",
    "emulator_host",
    "http_status",
    "problem",
    "read_bytes",
    "thread_client",
    "use_settings",
    "wants_credentials",
]

EMULATOR_ENV = "STORAGE_EMULATOR_HOST"
# The connect and read time limits of Google's Cloud Storage connector for Hadoop (its
# fs.gs.http.connect-timeout and fs.gs.http.read-timeout), which also retries what times out.
# GCS answers a read in tens of milliseconds, and says 429 or 503 when it is busy rather than
# keep silent; a request that hears nothing for 5 s is stalled, and a new one is cheaper than
# waiting: stalls cost a run seconds with this limit, minutes with google-cloud-storage's 60 s
# (benchmarks/NOTES.md#gs-requests).
DEFAULT_TIMEOUT_S = 5.0


@documented
@dataclasses.dataclass(frozen=True)
class GcsConfig(Config):
    """How long a gs:// request may wait for an answer before it is abandoned and retried."""

    timeout_s: float = setting(
        DEFAULT_TIMEOUT_S,
        details="seconds a `gs://` request may stall before it is retried with backoff",
        option="gcs_timeout_s",
        group="storage",
        label="GCS request time limit (seconds)",
        value_type=float,
        record=None,
        help="seconds a gs:// request may wait for a connection or the next part of its answer "
        "before it is retried with backoff",
    )
    retry_deadline_s: float = setting(
        120.0,
        option=None,
        record=None,
        help="how long the attempts of one image read may go on, backoff included, before the read "
        "fails (the input is then rejected as `unreadable`); Beam's own requests keep Beam's retry, "
        "with the same deadline",
    )

    def retry(self) -> CloudObject:
        """google-cloud-storage's default retry (timeouts, resets, 429 and 5xx, with exponential
        backoff from 1 s), with this deadline."""
        from google.cloud.storage.retry import DEFAULT_RETRY

        return DEFAULT_RETRY.with_timeout(self.retry_deadline_s)


_SETTINGS = GcsConfig()


def use_settings(settings: GcsConfig) -> None:
    """Make `settings` this process's, for every gs:// request from now on (ours and Beam's)."""
    global _SETTINGS
    _SETTINGS = settings


def current_settings() -> GcsConfig:
    return _SETTINGS


def _bounded(client: CloudObject) -> CloudObject:
    """`client`, with each of its requests limited to the current `timeout_s`."""
    return compat.bound_requests(client, lambda: _SETTINGS.timeout_s)


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
    options: FilesystemOptions
    gcsio: GcsIO

    def built_for(self, emulator: str | None, options: FilesystemOptions) -> bool:
        return (self.pid, self.emulator) == (os.getpid(), emulator) and self.options is options


_THREAD = threading.local()


def thread_client() -> GcsIO:
    """This thread's GcsIO for reads (its `client` reads): built on the thread's first gs:// read,
    then reused.

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
        # None: Beam builds it from the options, through the hook that bounds its requests.
        storage_client = _bounded(_anonymous_storage_client()) if host else None
        client = gcsio.GcsIO(storage_client=storage_client, pipeline_options=options)
        cached = _ThreadClient(os.getpid(), host, options, client)
        _THREAD.client = cached
    return cached.gcsio


def _anonymous_storage_client() -> CloudObject:
    from google.cloud.storage import Client

    return Client.create_anonymous_client()  # honours STORAGE_EMULATOR_HOST


def delete_files(paths: Sequence[str]) -> None:
    """`paths` gone: on gs:// a hundred to a batch request (FileSystems.delete lists each path
    first, then sends a batch of one); elsewhere through Beam's filesystems."""
    if not paths:
        return
    if not paths[0].startswith("gs://"):
        FileSystems.delete(list(paths))
        return
    for path, code in thread_client().delete_batch(list(paths)):
        if code is not None:
            raise OSError(None, f"Cloud Storage answered HTTP {code} deleting {posixpath.basename(path)}")


def read_bytes(path: str, settings: GcsConfig | None = None) -> bytes:
    """A file's bytes as stored: never decompressed by extension (a `.gz` image stays its bytes).

    gs:// objects are read through this thread's reused client (`thread_client`), because
    `FileSystems.open` builds a new client per call, which costs CPU and a request (see the module
    docstring for the figures), in one request (Beam's reader asks for the object's metadata
    first), limited and retried as `settings` say (the process's, `current_settings()`, when not
    given). Other paths go through Beam's filesystems.
    """
    if path.startswith("gs://"):
        bucket, _, name = path[len("gs://") :].partition("/")
        settings = settings or _SETTINGS
        blob = thread_client().client.bucket(bucket).blob(name)
        # raw_download: the bytes as stored, never decompressed (gzip content-encoding included).
        return blob.download_as_bytes(raw_download=True, timeout=settings.timeout_s, retry=settings.retry())
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


def http_status(error: BaseException) -> int | None:
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
        return any(http_status(cause) == 404 for cause in _root_causes(error))
    return False


def problem(path: str, error: BaseException) -> str:
    """What is wrong with a failed gs:// operation on `path`, and what to do, in one line (read
    after the name of the setting that gave the path)."""
    bucket = bucket_of(path)
    for cause in _root_causes(error):
        status = http_status(cause)
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


def abandon(handle: object) -> None:
    """Cancel a failed upload: google-cloud-storage's BlobWriter would otherwise retry it again
    from its finalizer, for up to two minutes, after the run has already reported the error."""
    terminate = getattr(handle, "terminate", None)
    if terminate is not None:
        with contextlib.suppress(Exception):  # refused already: nothing left to cancel
            terminate()


# Every process that imports beam_tfrecord, launcher and workers alike.
compat.install_emulator_switch(wants_credentials)
compat.install_client_hook(_bounded)
