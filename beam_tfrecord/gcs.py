"""Google Cloud Storage as Beam's filesystem layer speaks it: the emulator switch and clear errors.

Every gs:// read, listing and write in this project goes through `apache_beam.io.filesystems`,
whose GCS filesystem (`apache_beam.io.gcp.gcsio`) builds a google-cloud-storage client for each
operation. That client already honours STORAGE_EMULATOR_HOST, but before building it Beam looks
up Application Default Credentials and, where there are none (a laptop or CI with only an
emulator), retries the lookup with backoff for about 20 s per process before going anonymous.
With the emulator variable set we ask Beam for its own anonymous client straight away; without
it nothing changes and real runs use Application Default Credentials exactly as Beam does.
"""

from __future__ import annotations

import contextlib
import logging
import os
import uuid
from collections.abc import Callable
from typing import Any

from apache_beam.io.filesystem import CompressionTypes
from apache_beam.io.filesystems import FileSystems

EMULATOR_ENV = "STORAGE_EMULATOR_HOST"
_LOGGER = logging.getLogger(__name__)
_SWITCH_MARK = "_beam_tfrecord_emulator_switch"


def emulator_host() -> str | None:
    """The emulator's address when one is configured (checked on every client Beam builds)."""
    return os.environ.get(EMULATOR_ENV) or None


def wants_credentials(requested: bool = True) -> bool:
    """Whether Beam should look up credentials: as asked, except never for the emulator."""
    return requested and emulator_host() is None


def install_emulator_switch() -> bool:
    """Make Beam's GCS clients anonymous whenever STORAGE_EMULATOR_HOST is set.

    Wraps `gcsio.create_storage_client`, the one place Beam builds its GCS client, so that it
    passes Beam's own `use_credentials=False` (an anonymous client) while the variable is set.
    Idempotent; returns False (Beam's behaviour kept, only slower) if Beam's layout has changed.
    """
    try:
        from apache_beam.io.gcp import gcsio
    except ImportError:  # Beam without the gcp extra: there is no gs:// to speak of
        return False
    original: Callable[..., Any] | None = getattr(gcsio, "create_storage_client", None)
    if original is None:
        _LOGGER.warning("apache_beam.io.gcp.gcsio has no create_storage_client; emulator runs stay slow")
        return False
    if getattr(original, _SWITCH_MARK, False):
        return True

    def create_storage_client(pipeline_options: Any, use_credentials: bool = True) -> Any:
        return original(pipeline_options, wants_credentials(use_credentials))

    setattr(create_storage_client, _SWITCH_MARK, True)
    create_storage_client.__doc__ = original.__doc__
    gcsio.create_storage_client = create_storage_client
    return True


class StorageError(ValueError):
    """A gs:// path that cannot be used, with a message a user can act on."""


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


def describe(option: str, path: str, error: BaseException) -> str:
    """One line for a failed gs:// operation: which option, what is wrong, and what to do."""
    bucket = bucket_of(path)
    for cause in _root_causes(error):
        status = _status(cause)
        if status == 404:
            if _bucket_missing(bucket):
                return f"{option} {path}: bucket gs://{bucket} does not exist (or is not visible to you)"
            return f"{option} {path} does not exist"
        if status in (401, 403):
            return (
                f"{option} {path}: permission denied on gs://{bucket} ({status}); check the credentials "
                "(gcloud auth application-default login, or the workers' service account) and that they "
                "hold a Storage role on the bucket (Object Viewer to read, Object Admin to write)"
            )
    cause = _root_causes(error)[0]
    return f"{option} {path}: {type(cause).__name__}: {cause}"


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
        raise StorageError(describe(option, path, error)) from None
    try:
        handle.write(b"")
        handle.close()
        FileSystems.delete([probe])
    except Exception as error:
        _abandon(handle)
        raise StorageError(describe(option, path, error)) from None


def _abandon(handle: Any) -> None:
    """Cancel a failed upload: google-cloud-storage's BlobWriter would otherwise retry it again
    from its finalizer, for up to two minutes, after the run has already reported the error."""
    terminate = getattr(handle, "terminate", None)
    if terminate is not None:
        with contextlib.suppress(Exception):  # refused already: nothing left to cancel
            terminate()


install_emulator_switch()  # every process that imports beam_tfrecord, launcher and workers alike
