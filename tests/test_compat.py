"""One test per private or unstable API that beam_tfrecord.compat uses: an upgrade that moves one
fails here, by name, instead of silently in a user's run."""

from __future__ import annotations

import inspect

import pytest
from apache_beam.io.filesystems import FileSystems
from apache_beam.io.gcp import gcsio
from apache_beam.options.pipeline_options import PipelineOptions
from apache_beam.options.value_provider import RuntimeValueProvider

from beam_tfrecord import compat, gcs


def test_every_use_is_listed_in_the_module_docstring():
    for name in compat.__all__:
        assert f"`{name}`" in compat.__doc__, name


def test_beam_builds_every_gcs_client_through_create_storage_client(monkeypatch):
    """The emulator switch wraps `gcsio.create_storage_client`; it works only while that function
    exists with this signature and `GcsIO()` calls it by its module-global name."""
    assert gcs.EMULATOR_ENV  # importing beam_tfrecord installs the switch
    assert compat.emulator_switch_installed()
    parameters = list(inspect.signature(gcsio.create_storage_client).parameters)
    assert parameters[:2] == ["pipeline_options", "use_credentials"]

    asked: list[bool] = []

    def recording_factory(pipeline_options: object, use_credentials: bool = True) -> object:
        asked.append(use_credentials)
        return object()  # GcsIO only stores its client

    monkeypatch.setattr(gcsio, "create_storage_client", recording_factory)
    gcsio.GcsIO(pipeline_options=PipelineOptions())
    assert asked == [True], "GcsIO no longer builds its client through gcsio.create_storage_client"

    # The switch, installed over that factory, turns credentials off exactly while an emulator is set.
    assert not compat.emulator_switch_installed()
    assert compat.install_emulator_switch(gcs.wants_credentials)
    assert compat.install_emulator_switch(gcs.wants_credentials)  # idempotent: wraps once
    monkeypatch.delenv(gcs.EMULATOR_ENV, raising=False)
    gcsio.GcsIO(pipeline_options=PipelineOptions())
    monkeypatch.setenv(gcs.EMULATOR_ENV, "http://127.0.0.1:1")
    gcsio.GcsIO(pipeline_options=PipelineOptions())
    assert asked == [True, True, False]


def test_switch_keeps_beams_behaviour_when_the_factory_is_gone(monkeypatch):
    monkeypatch.delattr(gcsio, "create_storage_client")
    assert not compat.install_emulator_switch(gcs.wants_credentials)
    assert not compat.emulator_switch_installed()


@pytest.fixture
def filesystem_options(monkeypatch):
    """Restore Beam's process-wide filesystem options after the test changes them."""
    monkeypatch.setattr(FileSystems, "_pipeline_options", FileSystems._pipeline_options)
    monkeypatch.setattr(RuntimeValueProvider, "runtime_options", RuntimeValueProvider.runtime_options)


def test_filesystem_options_are_the_ones_beams_gcs_filesystem_gets(filesystem_options):
    """`FileSystems.set_options` (called by every Pipeline and by the SDK worker) is public, reading
    the options back is not: `gcs.thread_client` builds its GcsIO with what Beam's would get."""
    options = PipelineOptions(["--project", "compat-test"])
    FileSystems.set_options(options)
    assert compat.filesystem_pipeline_options() is options
    assert FileSystems.get_filesystem("gs://bucket/object")._pipeline_options is options

    FileSystems.set_options(None)
    runtime = {"project": "compat-runtime"}
    RuntimeValueProvider.set_runtime_options(runtime)
    assert compat.filesystem_pipeline_options() is runtime
    assert FileSystems.get_filesystem("gs://bucket/object")._pipeline_options is runtime


def test_known_beam_noise_is_still_emitted_by_beam():
    """Each filtered message is still in Beam's source and still untrue; when Beam stops
    printing one, this fails and the filter can go."""
    from apache_beam.ml.inference import base
    from apache_beam.runners.worker import sdk_worker_main

    assert "No semi_persistent_directory found" in inspect.getsource(sdk_worker_main)
    assert "Resource module is not available" in inspect.getsource(base)
    # Set so when Beam's model manager does not import (it needs torch and scipy), although
    # `resource` imports; where torch is installed (make test-torch) Beam says nothing.
    if base.ModelManager is None:
        assert base.resource is None
    import resource  # noqa: F401  (the module Beam says is not available)


def test_quiet_known_beam_noise_drops_only_that(caplog):
    import logging

    logger = logging.getLogger("test_compat_noise")
    compat.quiet_known_beam_noise(logger)
    compat.quiet_known_beam_noise(logger)
    assert len(logger.filters) == 1
    with caplog.at_level(logging.WARNING, logger="test_compat_noise"):
        for noise in compat.KNOWN_BEAM_NOISE:
            logger.warning("Worker: message: %s: User registered objects", noise)
        logger.warning("a real problem")
    assert [r.getMessage() for r in caplog.records] == ["a real problem"]


def test_dataflow_environment_uses_what_beams_apiclient_still_has():
    from apache_beam.runners.dataflow.internal import apiclient

    assert isinstance(apiclient._FNAPI_ENVIRONMENT_MAJOR_VERSION, str)
    parameters = list(
        inspect.signature(apiclient.DataflowApplicationClient._apply_sdk_environment_overrides).parameters
    )
    assert parameters[:3] == ["proto_pipeline", "sdk_overrides", "pipeline_options"]
    # The whole translation through it: tests/test_dataflow_dry_run.py.


def test_client_hook_gets_every_client_beam_builds(monkeypatch):
    """`install_client_hook` wraps the same factory as the emulator switch; both report
    themselves when stacked, and the hook sees the client GcsIO goes on to use."""
    assert compat.client_hook_installed() and compat.emulator_switch_installed()  # importing gcs
    built, seen = object(), []

    def factory(pipeline_options: object, use_credentials: bool = True) -> object:
        return built

    monkeypatch.setattr(gcsio, "create_storage_client", factory)
    assert not compat.client_hook_installed()
    assert compat.install_client_hook(lambda client: seen.append(client) or client)
    assert compat.install_emulator_switch(gcs.wants_credentials)
    assert compat.install_client_hook(lambda client: None)  # idempotent: the first callback stays
    assert compat.client_hook_installed() and compat.emulator_switch_installed()
    assert gcsio.GcsIO(pipeline_options=PipelineOptions()).client is built
    assert seen == [built]


def test_bound_requests_caps_google_cloud_storages_own_time_limit(monkeypatch):
    """google-cloud-storage keeps its requests session as `client._http` and passes every request
    its own timeout (60 s by default): a stall outlives a 3 s hold without the cap, not with it."""
    from gcsemulator import FaultProxy
    from google.cloud import storage

    with FaultProxy("http://127.0.0.1:9", {"download": {1: "stall", 2: "stall"}}, hold_s=3) as proxy:
        monkeypatch.setenv(gcs.EMULATOR_ENV, proxy.url)
        client = storage.Client.create_anonymous_client()
        assert compat.bound_requests(client, lambda: 0.5) is compat.bound_requests(client, lambda: 0.5)
        with pytest.raises(Exception, match="timed out"):
            client.bucket("b").blob("x").download_as_bytes(retry=None)
        uncapped = compat.bound_requests(storage.Client.create_anonymous_client(), lambda: None)
        with pytest.raises(Exception, match="503"):  # the proxy let go first, then answered 503
            uncapped.bucket("b").blob("x").download_as_bytes(retry=None)
    assert proxy.stalls == ["client gave up", "held"]


def test_exit_now_ends_the_process_from_a_thread_without_joining_the_others(tmp_path):
    """A non-daemon thread that would wait an hour, and an atexit handler: neither holds the exit."""
    import subprocess
    import sys

    marker = tmp_path / "atexit-ran"
    script = f"""
import atexit, threading, time
from beam_tfrecord import compat
atexit.register(lambda: open({str(marker)!r}, "w").close())
threading.Thread(target=time.sleep, args=(3600,)).start()
threading.Thread(target=compat.exit_now, args=(7,)).start()
time.sleep(3600)
"""
    done = subprocess.run([sys.executable, "-c", script], timeout=60, check=False)
    assert done.returncode == 7
    assert not marker.exists()


def test_decode_in_one_call_hands_pillow_s_decoder_the_whole_file_at_once():
    """Pillow reads an in-memory JPEG's scan 64 KB a call; with the file's size it reads it once."""
    import io

    import imagegen
    from PIL import Image

    data = imagegen.jpeg(1024, 768)
    assert len(data) > 3 * 65536

    class CountingBytes(io.BytesIO):
        def __init__(self, initial: bytes) -> None:
            super().__init__(initial)
            self.reads: list[int] = []

        def read(self, size: int | None = -1) -> bytes:
            chunk = super().read(size)
            self.reads.append(len(chunk))
            return chunk

    def scan_reads(one_call: bool) -> list[int]:
        handle = CountingBytes(data)
        image = Image.open(handle, formats=["JPEG"])
        if one_call:
            compat.decode_in_one_call(image, len(data))
        handle.reads = []
        image.load()
        return [n for n in handle.reads if n]

    assert max(scan_reads(False)) <= 65536 and len(scan_reads(False)) >= 3
    assert len(scan_reads(True)) == 1
    image = Image.open(io.BytesIO(data), formats=["JPEG"])
    compat.decode_in_one_call(image, 100 * compat.ONE_CALL_MAX_BYTES)  # a huge file: in pieces
    assert image.decodermaxblock == compat.ONE_CALL_MAX_BYTES


def test_portable_job_id_reads_the_id_a_portable_runners_result_keeps():
    """Beam's portable PipelineResult keeps its job's id as `_job_id` and offers no accessor;
    should that move, a detached claim would name no job, and this fails first."""
    from apache_beam.runners.portability.portable_runner import PipelineResult

    result = PipelineResult(None, "job-42", iter(()), iter(()))
    assert compat.portable_job_id(result) == "job-42"
    assert compat.portable_job_id(object()) is None
