"""The one module that uses other libraries' private or unstable APIs; each use has a test in
tests/test_compat.py, so an upgrade that moves one fails there and not in a user's run.

Uses:

- `install_emulator_switch` (and `emulator_switch_installed`, which reports it): wraps
  `apache_beam.io.gcp.gcsio.create_storage_client` (a module function, not documented API),
  relying on `GcsIO.__init__` calling it by that module-global name, to decide whether Beam
  looks up credentials for a GCS client.
- `install_client_hook` (and `client_hook_installed`): wraps the same
  `apache_beam.io.gcp.gcsio.create_storage_client`, to hand every client Beam builds to a
  callback before Beam uses it (the time limit on its requests, below).
- `bound_requests`: caps the time limit of every HTTP request one google-cloud-storage client
  sends, through the `requests` session it keeps as `client._http` (private; google-cloud-storage
  documents its `_http` constructor argument as "should be considered private"). Beam's GCS
  filesystem passes no `timeout=` to any call, so each of its requests waits google-cloud-storage's
  default 60 s for an answer that may never come; there is no public setting for it.
- `filesystem_pipeline_options`: reads `apache_beam.io.filesystems.FileSystems._pipeline_options`
  (private), falling back to `RuntimeValueProvider.runtime_options` exactly as
  `FileSystems.get_filesystem` does, so our own GCS clients are built with the options Beam's
  filesystem would use (project, impersonation, audit headers, retry and metric settings).

- `quiet_known_beam_noise` (and `KNOWN_BEAM_NOISE`, what it drops): a logging filter for two
  warnings Beam 2.77 prints on every run that are not true: "No semi_persistent_directory
  found" (`sdk_worker_main`, in every worker process the FnApiRunner starts, which need none)
  and "Resource module is not available"
  (`ml/inference/base.py` sets `resource = None` when its torch-only ModelManager import fails,
  then warns at every memory reading although the module is there).
- `dataflow_environment`: the Dataflow `Environment` message a submission would send, for dry
  runs: `apiclient.Environment` with the private `_FNAPI_ENVIRONMENT_MAJOR_VERSION` and
  `DataflowApplicationClient._apply_sdk_environment_overrides`, which Beam applies on submission.
- `portable_job_id`: the job id a portable runner's `PipelineResult` keeps as `_job_id` (private;
  Dataflow's result has a public `job_id()`, the portable one none), so a claim handed to a job
  submitted through a job service (Flink, Spark, Beam's own) names the job its service knows.
- `exit_now`: `os._exit`, the standard library's documented exit that skips other threads' joins
  and atexit handlers (its name has an underscore, so it lives here): a Ctrl-C from the signal
  thread ends the command without waiting on Beam's threads for workers just killed.
- `decode_in_one_call` (and `ONE_CALL_MAX_BYTES`, its cap): sets a Pillow image's
  `decodermaxblock` (an `ImageFile` attribute that Pillow does not document) to the size of the
  data, so `load` hands the decoder the whole file in one call: one release of the GIL per
  picture rather than one per 64 KB, and no copies of the part left over between calls.

Nothing here imports from beam_tfrecord but the names of the type check's edges (which these
objects are): callers pass in what a use needs to know.
"""

from __future__ import annotations

import functools
import logging
import os
from collections.abc import Callable
from typing import TYPE_CHECKING, TypeAlias

if TYPE_CHECKING:
    from apache_beam.options.pipeline_options import PipelineOptions
    from PIL import Image
    from urllib3.util.timeout import Timeout

    from beam_tfrecord.edges import CloudObject, ProtoMessage

__all__ = [
    "KNOWN_BEAM_NOISE",
    "ONE_CALL_MAX_BYTES",
    "bound_requests",
    "client_hook_installed",
    "dataflow_environment",
    "decode_in_one_call",
    "emulator_switch_installed",
    "exit_now",
    "filesystem_pipeline_options",
    "install_client_hook",
    "install_emulator_switch",
    "portable_job_id",
    "quiet_known_beam_noise",
]

_LOGGER = logging.getLogger(__name__)
# What Beam's filesystems build a GCS client from: a PipelineOptions, a dict of them, or None.
FilesystemOptions: TypeAlias = "PipelineOptions | dict[str, object] | None"
# A time limit as `requests` takes it: seconds, a (connect, read) pair, urllib3's Timeout, or None.
RequestTimeout: TypeAlias = "float | tuple[float | None, ...] | Timeout | None"
_SWITCH_MARK = "_beam_tfrecord_emulator_switch"
_HOOK_MARK = "_beam_tfrecord_client_hook"


def install_emulator_switch(wants_credentials: Callable[[bool], bool]) -> bool:
    """Route every credential decision of Beam's GCS client factory through `wants_credentials`.

    Wraps `gcsio.create_storage_client`, the one place Beam builds its GCS client, so that it
    passes `wants_credentials(use_credentials)` as Beam's own `use_credentials` (False gives an
    anonymous client, without the ~20 s Application Default Credentials retries). Idempotent (a
    second call keeps the first predicate); returns False, Beam's behaviour kept, if Beam's layout
    has changed.
    """
    try:
        from apache_beam.io.gcp import gcsio
    except ImportError:  # Beam without the gcp extra: there is no gs:// to speak of
        return False
    original: Callable[..., CloudObject] | None = getattr(gcsio, "create_storage_client", None)
    if original is None:
        _LOGGER.warning("apache_beam.io.gcp.gcsio has no create_storage_client; emulator runs stay slow")
        return False
    if emulator_switch_installed():
        return True

    @functools.wraps(original)  # keeps the marks of other wrappers, so each still reports itself
    def create_storage_client(
        pipeline_options: FilesystemOptions, use_credentials: bool = True
    ) -> CloudObject:
        return original(pipeline_options, wants_credentials(use_credentials))

    setattr(create_storage_client, _SWITCH_MARK, True)
    gcsio.create_storage_client = create_storage_client
    return True


def _factory_marked(mark: str) -> bool:
    try:
        from apache_beam.io.gcp import gcsio
    except ImportError:
        return False
    return bool(getattr(getattr(gcsio, "create_storage_client", None), mark, False))


def emulator_switch_installed() -> bool:
    """Whether Beam's GCS client factory is the wrapped one (for tests and diagnostics)."""
    return _factory_marked(_SWITCH_MARK)


def install_client_hook(prepare: Callable[[CloudObject], CloudObject]) -> bool:
    """Hand every google-cloud-storage client Beam's GCS filesystem builds to `prepare` (which
    returns it) before Beam uses it, by wrapping `gcsio.create_storage_client` as
    `install_emulator_switch` does. Idempotent (a second call keeps the first callback); returns
    False, Beam's behaviour kept, if Beam's layout has changed."""
    try:
        from apache_beam.io.gcp import gcsio
    except ImportError:
        return False
    original: Callable[..., CloudObject] | None = getattr(gcsio, "create_storage_client", None)
    if original is None:
        _LOGGER.warning("apache_beam.io.gcp.gcsio has no create_storage_client; gs:// limits stay Beam's")
        return False
    if client_hook_installed():
        return True

    @functools.wraps(original)
    def create_storage_client(
        pipeline_options: FilesystemOptions, use_credentials: bool = True
    ) -> CloudObject:
        return prepare(original(pipeline_options, use_credentials))

    setattr(create_storage_client, _HOOK_MARK, True)
    gcsio.create_storage_client = create_storage_client
    return True


def client_hook_installed() -> bool:
    """Whether Beam's GCS client factory hands its clients to `install_client_hook`'s callback."""
    return _factory_marked(_HOOK_MARK)


def _capped(timeout: RequestTimeout, limit: float) -> RequestTimeout:
    """`timeout` as `requests` takes it (None, seconds, a (connect, read) pair or urllib3's
    Timeout), with no part over `limit` and none left unbounded."""
    from urllib3.util.timeout import Timeout

    def cap(value: object) -> float:
        return limit if value is None or not isinstance(value, int | float) else min(value, limit)

    if isinstance(timeout, Timeout):
        return Timeout(connect=cap(timeout.connect_timeout), read=cap(timeout.read_timeout))
    if isinstance(timeout, tuple):
        return tuple(cap(part) for part in timeout)
    return cap(timeout)


class _BoundedAdapter:
    """A `requests` transport adapter that sends through the one it replaces, with the request's
    time limit capped (`requests.adapters.BaseAdapter`'s interface: `send` and `close`)."""

    def __init__(self, inner: CloudObject, limit_s: Callable[[], float | None]) -> None:
        self.inner = inner
        self.limit_s = limit_s

    def send(
        self, request: CloudObject, stream: bool = False, timeout: RequestTimeout = None, **kwargs: object
    ) -> CloudObject:
        limit = self.limit_s()
        return self.inner.send(
            request, stream=stream, timeout=timeout if limit is None else _capped(timeout, limit), **kwargs
        )

    def close(self) -> None:
        self.inner.close()


def bound_requests(client: CloudObject, limit_s: Callable[[], float | None]) -> CloudObject:
    """Cap the time limit of every HTTP request `client` (a google-cloud-storage Client) sends at
    `limit_s()` seconds (read when each request is sent; None leaves it as the caller set it):
    the wait for a connection and for each next piece of the answer, not the whole transfer.

    Wraps each transport adapter of the client's `requests` session (`client._http`), so an
    adapter it already has (mutual TLS, say) keeps sending. Idempotent; returns `client`.
    """
    session = client._http
    for prefix, adapter in list(session.adapters.items()):
        if not isinstance(adapter, _BoundedAdapter):
            session.mount(prefix, _BoundedAdapter(adapter, limit_s))
    return client


def filesystem_pipeline_options() -> FilesystemOptions:
    """The options Beam's filesystems hand to a new GCS filesystem in this process, or None.

    A PipelineOptions (set by each Pipeline and by the SDK worker at start-up), a dict, or None
    where neither is set; `GcsIO(pipeline_options=...)` accepts all three.
    """
    from apache_beam.io.filesystems import FileSystems
    from apache_beam.options.value_provider import RuntimeValueProvider

    return FileSystems._pipeline_options or RuntimeValueProvider.runtime_options


KNOWN_BEAM_NOISE = (
    "No semi_persistent_directory found",
    "Resource module is not available for current platform",
)


class _KnownBeamNoise(logging.Filter):
    def filter(self, record: logging.LogRecord) -> bool:
        message = record.getMessage()
        return not any(noise in message for noise in KNOWN_BEAM_NOISE)


def quiet_known_beam_noise(*targets: logging.Logger | logging.Handler) -> None:
    """Drop KNOWN_BEAM_NOISE from `targets` (default: the root logger and its handlers, which
    also see the worker processes' logs that the local runner forwards). Idempotent."""
    root = logging.getLogger()
    for target in targets or (root, *root.handlers):
        if not any(isinstance(f, _KnownBeamNoise) for f in target.filters):
            target.addFilter(_KnownBeamNoise())


def dataflow_environment(job: CloudObject, packages: list[str], staged_pipeline_url: str) -> ProtoMessage:
    """The `Environment` proto a Dataflow submission of `job` (a dry run's translated job) would
    carry: worker pool, image, options and packages, as Beam's apiclient builds it."""
    from apache_beam.runners.dataflow.internal import apiclient

    proto = job.proto_pipeline
    apiclient.DataflowApplicationClient._apply_sdk_environment_overrides(proto, {}, job.options)
    return apiclient.Environment(
        packages=packages,
        options=job.options,
        environment_version=apiclient._FNAPI_ENVIRONMENT_MAJOR_VERSION,
        proto_pipeline_staged_url=staged_pipeline_url,
        proto_pipeline=proto,
    ).proto


def portable_job_id(result: object) -> str | None:
    """The job id of a portable runner's PipelineResult (module docstring); None for others."""
    job_id = getattr(result, "_job_id", None)
    return str(job_id) if job_id else None


def exit_now(code: int) -> None:
    """End the process with `code` at once, from any thread: no other thread is joined and no
    atexit handler runs (sys.exit from a thread ends only that thread)."""
    os._exit(code)


# The most `decode_in_one_call` hands the decoder at once: each call copies what it reads from the
# in-memory file, so a very large file is still fed in pieces of this size, not copied whole.
ONE_CALL_MAX_BYTES = 8 * 1024 * 1024


def decode_in_one_call(image: Image.Image, size: int) -> None:
    """`image.load()` feeds its decoder at most `size` bytes a call (Pillow's default: 64 KB):
    give the file's size and an in-memory file of up to 8 MB is decoded in one call. A no-op for
    an image without the attribute (a Pillow that renamed it: the decode is the same, slower)."""
    if hasattr(image, "decodermaxblock"):
        image.decodermaxblock = min(max(size, image.decodermaxblock), ONE_CALL_MAX_BYTES)
