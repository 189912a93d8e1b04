"""gs:// faults a long run meets: a 503, a reset connection, and a request accepted but never
answered (a stall), on reads, listing and writes alike. A proxy in front of the emulator the tests
start injects them (tests/gcsemulator.py's FaultProxy); the client, Beam and the emulator are real.

Each run must survive its faults with nothing lost (the records equal a clean run's, by digest), and
a stall must end because the client gave up at its own time limit (`--gcs_timeout_s`, 1 s here),
not because the proxy let go: the proxy holds a stall for 45 s, which google-cloud-storage's
default limit (60 s) outlasts. What the stalls cost in seconds is measured in
benchmarks/storage_stalls.py, not asserted here.
"""

from __future__ import annotations

import json
import uuid

import imagegen
import pytest
from apache_beam.io.filesystems import FileSystems
from conftest import convert
from gcsemulator import EMULATOR_ENV, Emulator, FaultProxy

from beam_tfrecord import gcs

FILES = {
    f"{c}/{i}.jpg": imagegen.jpeg(40, 30, seed=i + 50 * (c == "dog"))
    for c in ("cat", "dog")
    for i in range(6)
}
LIMIT = ("--gcs_timeout_s", "1")
# The n-th request of each kind that gets the fault (retries count, so a retry is never faulted
# twice in a row): the launcher's listing, image downloads on the workers, uploads (the write
# probe, the staged plan, the shard, its index, the metadata) and the batch calls that rename
# and delete.
PLACES = {"list": (1,), "download": (2, 7), "upload": (3, 11, 19, 27), "batch": (1,)}


@pytest.fixture(scope="module")
def emulator():
    with Emulator() as emu, pytest.MonkeyPatch.context() as patch:
        patch.setenv(EMULATOR_ENV, emu.url)
        yield emu


@pytest.fixture(scope="module")
def images(emulator) -> str:
    bucket = f"faults-{uuid.uuid4().hex[:12]}"
    emulator.upload_tree(bucket, "images", FILES)
    return f"gs://{bucket}/images"


@pytest.fixture(autouse=True)
def default_settings():
    """Each run sets its process's gs:// settings; leave the defaults for the next test."""
    yield
    gcs.use_settings(gcs.GcsConfig())


def summary(output: str) -> dict:
    with FileSystems.open(f"{output}/summary.json") as handle:
        return json.loads(handle.read())


def outcome(found: dict) -> tuple:
    """What a run wrote, apart from when and how fast: counts and each split's record digest."""
    digests = {name: split["digest"] for name, split in found["splits"].items()}
    return found["inputs"], found["records"], found["rejects"], found["consistent"], digests


@pytest.fixture(scope="module")
def clean(images) -> tuple:
    output = images.replace("/images", "/clean")
    assert convert(images, output, *LIMIT) == 0
    return outcome(summary(output))


@pytest.mark.parametrize("fault", FaultProxy.FAULTS)
def test_each_fault_is_survived_on_reads_listing_and_writes(emulator, images, clean, monkeypatch, fault):
    output = images.replace("/images", f"/out-{fault}")
    plan = {kind: dict.fromkeys(places, fault) for kind, places in PLACES.items()}
    with FaultProxy(emulator.url, plan, hold_s=45) as proxy:
        monkeypatch.setenv(EMULATOR_ENV, proxy.url)
        assert convert(images, output, *LIMIT) == 0
    monkeypatch.setenv(EMULATOR_ENV, emulator.url)

    injected = {(kind, ordinal) for kind, ordinal, _ in proxy.injected}
    assert injected == {(kind, n) for kind, places in PLACES.items() for n in places}, proxy.counts
    assert outcome(summary(output)) == clean  # every input, the same records: nothing lost
    assert clean[1] == len(FILES)
    if fault == "stall":
        assert proxy.stalls == ["client gave up"] * len(injected)


def test_without_the_time_limit_a_stall_lasts_until_the_other_side_lets_go(emulator, images, monkeypatch):
    """The control: a request with google-cloud-storage's own limit (60 s) outwaits a stall the
    proxy holds for 2 s, so "client gave up" above is the limit's doing, not the proxy's."""
    from google.cloud import storage

    with FaultProxy(emulator.url, {"download": {1: "stall"}}, hold_s=2) as proxy:
        monkeypatch.setenv(EMULATOR_ENV, proxy.url)
        client = storage.Client.create_anonymous_client()  # a plain client, not one of Beam's
        bucket, name = images[len("gs://") :].split("/", 1)
        data = client.bucket(bucket).blob(f"{name}/cat/0.jpg").download_as_bytes()
    assert data == FILES["cat/0.jpg"]
    assert proxy.stalls == ["held"]
