"""The one module that uses other libraries' private or unstable APIs; each use has a test in
tests/test_compat.py, so an upgrade that moves one fails there and not in a user's run.

Uses:

- `install_emulator_switch` (and `emulator_switch_installed`, which reports it): wraps
  `apache_beam.io.gcp.gcsio.create_storage_client` (a module function, not documented API),
  relying on `GcsIO.__init__` calling it by that module-global name, to decide whether Beam
  looks up credentials for a GCS client.
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

Nothing here imports from beam_tfrecord: callers pass in what a use needs to know.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any

__all__ = [
    "KNOWN_BEAM_NOISE",
    "dataflow_environment",
    "emulator_switch_installed",
    "filesystem_pipeline_options",
    "install_emulator_switch",
    "quiet_known_beam_noise",
]

_LOGGER = logging.getLogger(__name__)
_SWITCH_MARK = "_beam_tfrecord_emulator_switch"


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
    original: Callable[..., Any] | None = getattr(gcsio, "create_storage_client", None)
    if original is None:
        _LOGGER.warning("apache_beam.io.gcp.gcsio has no create_storage_client; emulator runs stay slow")
        return False
    if emulator_switch_installed():
        return True

    def create_storage_client(pipeline_options: Any, use_credentials: bool = True) -> Any:
        return original(pipeline_options, wants_credentials(use_credentials))

    setattr(create_storage_client, _SWITCH_MARK, True)
    create_storage_client.__doc__ = original.__doc__
    gcsio.create_storage_client = create_storage_client
    return True


def emulator_switch_installed() -> bool:
    """Whether Beam's GCS client factory is the wrapped one (for tests and diagnostics)."""
    try:
        from apache_beam.io.gcp import gcsio
    except ImportError:
        return False
    return bool(getattr(getattr(gcsio, "create_storage_client", None), _SWITCH_MARK, False))


def filesystem_pipeline_options() -> Any:
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


def dataflow_environment(job: Any, packages: list[str], staged_pipeline_url: str) -> Any:
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
