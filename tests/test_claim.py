"""One output, one writer: a run claims its output before touching it (beam_tfrecord/output/claim.py).

Real processes (`python -m pipelines.convert`) held at a named point by the pause hook
(beam_tfrecord/fault_injection.py) while a second starts, on local disk and on gs:// against the
GCS emulator, behind tests/gcsemulator.py's GenerationProxy: the emulator ignores GCS's generation
preconditions, and the proxy answers 412 as GCS does (the first test here shows why it is needed).
"""

from __future__ import annotations

import dataclasses
import json
import os
import pathlib
import signal
import socket
import subprocess
import sys
import time
import uuid

import imagegen
import pytest
from apache_beam.io.filesystems import FileSystems
from conftest import REPO
from gcsemulator import EMULATOR_ENV, Emulator, GenerationProxy
from google.api_core.exceptions import PreconditionFailed

from beam_tfrecord import names
from beam_tfrecord.config import ConvertConfig, SourceConfig
from beam_tfrecord.config_base import ConfigError
from beam_tfrecord.output import claim as claims
from beam_tfrecord.output import outputs
from beam_tfrecord.pipeline import prepare
from pipelines.convert import EXIT_CLAIMED, run

ARGS = ("--splits", "train=0.5,test=0.5", "--num_shards", "2", "--no_progress")


@pytest.fixture(scope="module")
def tree(tmp_path_factory):
    root = tmp_path_factory.mktemp("claim") / "in"
    imagegen.write_tree(
        root, {f"{c}/{i}.jpg": imagegen.jpeg(seed=i + 40 * (c == "b")) for c in "ab" for i in range(8)}
    )
    return root


def command(source, out, *extra: str) -> list[str]:
    return [
        sys.executable,
        "-m",
        "pipelines.convert",
        "--input",
        str(source),
        "--output",
        str(out),
        *ARGS,
        *extra,
    ]


class Held:
    """A conversion held at `point` (the pause hook) until `go_on()`; `finish()` waits for its end."""

    def __init__(self, argv: list[str], point: str, tmp_path, env: dict[str, str] | None = None) -> None:
        tag = uuid.uuid4().hex[:6]
        self.marker, self.resume = tmp_path / f"paused-{tag}", tmp_path / f"resume-{tag}"
        environment = {
            **os.environ,
            **(env or {}),
            "PYTHONPATH": REPO,
            "BEAM_TFRECORD_PAUSE_AT": point,
            "BEAM_TFRECORD_PAUSE_FILE": str(self.marker),
            "BEAM_TFRECORD_RESUME_FILE": str(self.resume),
        }
        self.process = subprocess.Popen(
            argv, cwd=REPO, env=environment, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
        )
        deadline = time.monotonic() + 180
        while not self.marker.exists():
            if self.process.poll() is not None:
                pytest.fail(f"the run ended before {point}: {self.process.stderr.read()[-3000:]}")
            assert time.monotonic() < deadline, f"the run never reached {point}"
            time.sleep(0.05)

    def go_on(self) -> None:
        self.resume.write_text("go")

    def finish(self) -> tuple[int, str]:
        self.go_on()
        _, stderr = self.process.communicate(timeout=300)
        return self.process.returncode, stderr

    def kill(self) -> None:
        if self.process.poll() is None:
            self.process.kill()
            self.process.communicate()


def refused_line(done: subprocess.CompletedProcess, output: str) -> str:
    """The one line a refused run prints, checked for what it must say."""
    assert done.returncode == EXIT_CLAIMED, done.stderr[-3000:]
    (line,) = [line for line in done.stderr.splitlines() if line.strip()]
    assert line.startswith(f"error: {output} is being written by run "), line
    assert f"on host {socket.gethostname()}" in line and "last renewed" in line, line
    assert "--overwrite does not replace a live run's output" in line and "choose another --output" in line
    return line


def listing(out) -> dict[str, int]:
    """Every file under a local output, with its size: what a refused run must leave as it was."""
    found = {}
    for folder, _, files in os.walk(out):
        for name in files:
            path = os.path.join(folder, name)
            found[os.path.relpath(path, out)] = os.path.getsize(path)
    return found


def digests(summary: dict) -> dict[str, str]:
    return {split: facts["digest"] for split, facts in summary["splits"].items()}


# --- local -----------------------------------------------------------------------------------


def test_a_second_run_is_refused_in_one_line_and_the_first_finishes_as_a_lone_run(tree, tmp_path):
    lone = tmp_path / "lone"
    assert subprocess.run(command(tree, lone), cwd=REPO, capture_output=True, timeout=300).returncode == 0
    out = tmp_path / "out"
    first = Held(command(tree, out), "writing", tmp_path)  # a shard half written, its plan staged
    try:
        before = listing(out)
        assert names.CLAIM_FILE in before and any(n.startswith(names.TEMP_PREFIX) for n in before)
        started = time.monotonic()
        for extra in ((), ("--overwrite",)):  # --overwrite never overrides a live claim
            done = subprocess.run(
                command(tree, out, *extra), cwd=REPO, capture_output=True, text=True, timeout=120
            )
            refused_line(done, str(out))
        assert time.monotonic() - started < 60  # seconds each, even on a busy machine
        assert listing(out) == before, "the refused run touched the live run's files"
        code, stderr = first.finish()
    finally:
        first.kill()
    assert code == 0, stderr[-3000:]
    with open(out / names.SUMMARY_FILE) as handle, open(lone / names.SUMMARY_FILE) as lone_handle:
        assert digests(json.load(handle)) == digests(json.load(lone_handle))
    assert not (out / names.CLAIM_FILE).exists()  # released at the end
    assert outputs.complete_shards(str(out))


def claim_of_another_host(out, written_ago_s: float, **fields) -> dict:
    """A claim as a run on another machine writes it, last written `written_ago_s` ago by the
    file's own time (what storage says, not what the claim says)."""
    now = time.time()
    record = {
        **fields,
        "version": 1,
        "run_id": "0ther0run0id",
        "host": "another-host",
        "pid": 4242,
        "started_at": now - 3600,
        "renewed_at": now,  # the writer's clock: no reader trusts it
        "job_id": None,
    }
    out.mkdir(parents=True, exist_ok=True)
    path = out / names.CLAIM_FILE
    path.write_text(json.dumps(record))
    os.utime(path, (now - written_ago_s, now - written_ago_s))
    return record


def test_a_claim_of_another_host_is_taken_over_once_it_goes_unchanged_while_watched(tree, tmp_path):
    """The stale time is 120 s by default; BEAM_TFRECORD_CLAIM_STALE_S makes it 4 s here (a
    heartbeat of 1 s). Written 1 s ago by a run that renews every 60 s: alive, refused at once.
    Written 40 s ago by one that renews every second: watched for half the stale time and a
    heartbeat (3 s), unchanged, so taken over; no clock of the writer's counts."""
    out = tmp_path / "out"
    claim_of_another_host(out, written_ago_s=1, heartbeat_s=60)
    env = {**os.environ, claims.STALE_ENV: "4"}
    done = subprocess.run(command(tree, out), cwd=REPO, env=env, capture_output=True, text=True, timeout=120)
    assert done.returncode == EXIT_CLAIMED, done.stderr
    assert "run 0ther0run0id on host another-host (pid 4242)" in done.stderr
    assert "not renewed for 62 s while watched" in done.stderr and os.listdir(out) == [names.CLAIM_FILE]
    claim_of_another_host(out, written_ago_s=40)  # nothing renews it: watched, it is a dead run's
    done = subprocess.run(command(tree, out), cwd=REPO, env=env, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    assert "watching it for up to 3 s" in done.stderr
    assert (
        "took over the claim on" in done.stderr and "of run 0ther0run0id on host another-host" in done.stderr
    )
    assert "not renewed while watched for 3 s" in done.stderr and not (out / names.CLAIM_FILE).exists()


def test_the_claim_of_a_dead_process_on_this_host_is_taken_over_at_once(tmp_path):
    gone = subprocess.Popen([sys.executable, "-c", "pass"])
    gone.wait()
    out = tmp_path / "out"
    out.mkdir()
    record = claims.ClaimRecord("deadrun", socket.gethostname(), gone.pid, time.time(), time.time())
    record = dataclasses.replace(record, pid_space=claims.ClaimRecord.mine(time.time()).pid_space)
    (out / names.CLAIM_FILE).write_bytes(record.to_bytes())
    with claims.take_claim(str(out)) as claim:
        assert claim.took_over == record and claim.took_over_why == f"process {gone.pid} is gone"
        assert claims.read_claim(str(out)) == claim.record
    assert claims.read_claim(str(out)) is None


def test_a_pid_of_another_pid_namespace_is_never_judged_gone(tmp_path):
    """A container sharing the host name (--network host, hostNetwork) and the output: its pid
    means nothing here, so its fresh claim is refused, not taken over for a dead one."""
    gone = subprocess.Popen([sys.executable, "-c", "pass"])
    gone.wait()
    out = tmp_path / "out"
    out.mkdir()
    record = claims.ClaimRecord("container", socket.gethostname(), gone.pid, time.time(), time.time())
    record = dataclasses.replace(record, pid_space="another-boot:4026531836")
    (out / names.CLAIM_FILE).write_bytes(record.to_bytes())
    with pytest.raises(claims.ClaimHeld):
        claims.take_claim(str(out))


def test_a_live_claim_is_refused_and_the_claim_is_no_output_nor_temporary(tmp_path):
    out = str(tmp_path / "out")
    with claims.take_claim(out) as claim:
        with pytest.raises(claims.ClaimHeld) as refused:
            claims.take_claim(out)
        assert refused.value.holder == claim.record
        assert outputs.existing_outputs(out) == [] and outputs.leftover_temp(out) == []
        outputs.prepare_output(out)  # what a run clears before staging: never the claim
        assert claims.read_claim(out) == claim.record
    assert not os.path.exists(out)  # the folder made for the claim, empty again: removed


def test_the_heartbeat_renews_and_notices_a_claim_taken_over(tmp_path):
    out = str(tmp_path / "out")
    lost = []
    timing = claims.ClaimTiming(stale_after_s=60, heartbeat_s=0.2)
    with claims.take_claim(out, timing) as claim:
        claim.start_heartbeat(on_lost=lost.append)
        first = claim.record.renewed_at
        time.sleep(1)
        assert claims.read_claim(out).renewed_at > first
        thief = claims.ClaimRecord("thief", "another-host", 1, time.time(), time.time())
        # Written aside and renamed over it, as a run writes a claim: the heartbeat never reads
        # a half-written one (under load it did, and saw an 'unknown' holder instead).
        with open(claims.claim_path(out) + ".thief", "wb") as handle:
            handle.write(thief.to_bytes())
        os.replace(claims.claim_path(out) + ".thief", claims.claim_path(out))
        deadline = time.monotonic() + 10
        while not lost and time.monotonic() < deadline:
            time.sleep(0.05)
        assert lost == [claim] and claim.lost_to == thief and not claim.held
    assert claims.read_claim(out) == thief  # the release leaves another run's claim alone


def test_prepare_refuses_a_claim_that_is_not_held_on_its_output(tree, tmp_path):
    source = SourceConfig(input=str(tree), splits={"train": 1.0})
    config = ConvertConfig(output=str(tmp_path / "out"))
    with claims.take_claim(str(tmp_path / "elsewhere")) as other, pytest.raises(ConfigError, match="not on"):
        prepare(source, config, claim=other)
    with pytest.raises(ConfigError, match="no longer held"):
        prepare(source, config, claim=other)
    with claims.claim_output(config.output) as claim:
        assert prepare(source, config, claim=claim).inputs == 16


# --- gs:// -----------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def storage():
    """The emulator, and the proxy that keeps GCS's preconditions in front of it (its address
    is the one every client here uses)."""
    with (
        Emulator() as emulator,
        GenerationProxy(emulator.url) as proxy,
        pytest.MonkeyPatch.context() as patch,
    ):
        patch.setenv(EMULATOR_ENV, proxy.url)
        yield emulator, proxy


@pytest.fixture
def bucket(storage) -> str:
    name = f"claim-{uuid.uuid4().hex[:12]}"
    storage[0].client().create_bucket(name)
    return name


def test_the_emulator_alone_ignores_generation_preconditions_and_the_proxy_keeps_them(storage, bucket):
    """Why GenerationProxy exists: gcp-storage-emulator accepts a second create-if-absent (GCS
    answers 412). Should a release honour it, this fails and the proxy can go."""
    emulator, proxy = storage
    direct = emulator.client().bucket(bucket)
    direct.blob("x").upload_from_string(b"one", if_generation_match=0)
    direct.blob("x").upload_from_string(b"two", if_generation_match=0)  # GCS would refuse this
    from google.auth.credentials import AnonymousCredentials
    from google.cloud import storage as gcs_storage

    through = gcs_storage.Client(
        project="test", credentials=AnonymousCredentials(), client_options={"api_endpoint": proxy.url}
    ).bucket(bucket)
    with pytest.raises(PreconditionFailed):
        through.blob("x").upload_from_string(b"three", if_generation_match=0)
    assert through.blob("x").download_as_bytes() == b"two"


def test_a_gcs_claim_is_created_once_renewed_on_its_generation_and_released(storage, bucket):
    out = f"gs://{bucket}/out"
    lost = []
    with claims.take_claim(out, claims.ClaimTiming(60, heartbeat_s=0.2)) as claim:
        with pytest.raises(claims.ClaimHeld):
            claims.take_claim(out)
        claim.start_heartbeat(on_lost=lost.append)
        time.sleep(1)
        assert claims.read_claim(out).renewed_at > claim.record.started_at
        # Another run writes over it (as one that found it stale would): the next renewal's
        # precondition fails, and the run hears of it.
        thief = claims.ClaimRecord("thief", "another-host", 1, time.time(), time.time())
        with FileSystems.create(claims.claim_path(out)) as handle:
            handle.write(thief.to_bytes())
        deadline = time.monotonic() + 10
        while not lost and time.monotonic() < deadline:
            time.sleep(0.05)
        assert claim.lost_to == thief
    assert claims.read_claim(out) == thief
    FileSystems.delete([claims.claim_path(out)])
    with claims.take_claim(out):
        pass
    assert claims.read_claim(out) is None


def test_two_gcs_runs_the_second_is_refused_and_the_first_finishes_as_a_lone_run(
    storage, bucket, tree, tmp_path
):
    emulator, proxy = storage
    emulator.upload_tree(
        bucket, "in", {str(p.relative_to(tree)): p.read_bytes() for p in tree.rglob("*.jpg")}
    )
    source, out, lone = f"gs://{bucket}/in", f"gs://{bucket}/out", f"gs://{bucket}/lone"
    env = {**os.environ, EMULATOR_ENV: proxy.url, "PYTHONPATH": REPO}
    done = subprocess.run(
        command(source, lone), cwd=REPO, env=env, capture_output=True, text=True, timeout=300
    )
    assert done.returncode == 0, done.stderr[-3000:]
    first = Held(command(source, out), "writing", tmp_path, env)
    try:
        before = sorted(m.path for m in FileSystems.match([out + "/**"])[0].metadata_list)
        assert claims.claim_path(out) in before
        done = subprocess.run(
            command(source, out, "--overwrite"),
            cwd=REPO,
            env=env,
            capture_output=True,
            text=True,
            timeout=120,
        )
        refused_line(done, out)
        after = sorted(m.path for m in FileSystems.match([out + "/**"])[0].metadata_list)
        assert after == before, "the refused run touched the live run's objects"
        code, stderr = first.finish()
    finally:
        first.kill()
    assert code == 0, stderr[-3000:]

    def summary_of(output: str) -> dict:
        with FileSystems.open(f"{output}/{names.SUMMARY_FILE}") as handle:
            return json.loads(handle.read())

    assert digests(summary_of(out)) == digests(summary_of(lone))
    assert claims.read_claim(out) is None


def test_a_claim_handed_to_a_remote_job_holds_until_the_job_writes_its_summary(tmp_path):
    """`--no_wait` (or Ctrl-C while waiting): the launcher leaves the claim to the job, which no
    one renews; time never frees it, the job's summary.json does."""
    out = tmp_path / "out"
    claim = claims.take_claim(str(out), claims.ClaimTiming(stale_after_s=0.5))
    claim.set_job("2026-11-25_01_02_03-123")
    claim.hand_over()
    claim.release()  # the launcher's exit: a handed-over claim stays
    time.sleep(1)  # past the stale time: no matter for a detached claim
    with pytest.raises(claims.ClaimHeld, match="job 2026-11-25_01_02_03-123, submitted without waiting"):
        claims.take_claim(str(out), claims.ClaimTiming(stale_after_s=0.5))
    (out / names.SUMMARY_FILE).write_text("{}")  # the job finished
    with claims.take_claim(str(out)) as taken:
        assert taken.took_over.job_id == "2026-11-25_01_02_03-123" and taken.took_over.detached
        assert taken.took_over_why.startswith("its job wrote summary.json at ")


def test_an_output_where_no_claim_can_be_written_is_one_line(tree, tmp_path, capsys):
    blocker = tmp_path / "a-file"
    blocker.write_text("not a folder")
    out = blocker / "out"
    assert run(["--input", str(tree), "--output", str(out), *ARGS]) == 1
    (line,) = capsys.readouterr().err.strip().splitlines()
    assert line == (
        f"error: could not claim {out}: could not write {out}/{names.CLAIM_FILE}: Not a directory. "
        "Nothing was written; make it writable (or free space), then run again"
    )


def test_a_remote_jobs_claim_is_not_dead_when_only_its_launcher_is(tmp_path):
    """A launcher killed (SIGHUP, SIGKILL) while it waited for a remote job: the job goes on
    writing, so its claim is dead only once its launcher stopped renewing it (watched) and the
    job wrote summary.json (its runner cannot be asked here: no job service named)."""
    out = tmp_path / "out"
    out.mkdir()
    now = time.time()
    held = claims.ClaimRecord("r1", "another-host", 42, now - 900, now - 600, None, job_id="job-1")
    (out / names.CLAIM_FILE).write_bytes(held.to_bytes())
    old = now - 600
    os.utime(out / names.CLAIM_FILE, (old, old))
    with pytest.raises(claims.ClaimHeld, match="job job-1, submitted without waiting"):
        claims.take_claim(str(out), claims.ClaimTiming(stale_after_s=1))
    (out / names.SUMMARY_FILE).write_text("{}")
    with claims.take_claim(str(out), claims.ClaimTiming(stale_after_s=1)) as claim:
        assert claim.took_over.run_id == "r1" and claim.took_over_why.startswith("its job wrote summary.json")


# A holder in a process of its own: takes the claim, says so on stdout, then waits for stdin.
HOLDER = """
import os, sys, time
from beam_tfrecord.output import claim as claims
if os.environ.get("FAKE_HOST"):  # a run on another machine, over a filesystem without shared locks
    import socket
    from beam_tfrecord.output import claim_store
    socket.gethostname = lambda: os.environ["FAKE_HOST"]
    claim_store.LocalStore.lock = lambda self: None
claim = claims.take_claim(sys.argv[1], claims.timing_from_environment())
claim.start_heartbeat()
print(claim.record.run_id, flush=True)
if sys.argv[2] == "exit":
    import os
    os._exit(0)  # no release: the claim stays behind its process
sys.stdin.readline()
claim.release()
"""


def _holder(out, then: str, **env: str) -> tuple[subprocess.Popen, str]:
    process = subprocess.Popen(
        [sys.executable, "-c", HOLDER, str(out), then],
        cwd=REPO,
        env={**os.environ, **env},
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    return process, process.stdout.readline().strip()


def test_a_zombie_holder_is_dead_and_its_claim_taken_over_at_once(tmp_path):
    """Killed and not yet reaped (a container whose first process reaps nothing): `kill(pid, 0)`
    still succeeds, but the kernel says it has exited."""
    out = tmp_path / "out"
    holder, run_id = _holder(out, "exit")
    deadline = time.monotonic() + 30
    while pathlib.Path(f"/proc/{holder.pid}/stat").read_text().rsplit(")", 1)[1].split()[0] != "Z":
        assert time.monotonic() < deadline, "the holder never exited"
        time.sleep(0.05)
    try:
        assert claims.read_claim(str(out)).run_id == run_id
        with claims.take_claim(str(out)) as claim:
            assert claim.took_over.run_id == run_id
            assert claim.took_over_why == f"process {holder.pid} is gone"
    finally:
        holder.wait()


def test_a_suspended_holder_past_the_stale_time_keeps_its_claim_on_its_host(tmp_path):
    """Ctrl-Z (SIGSTOP) for longer than the stale time: the process lives, so no run takes its
    output; once it goes on (SIGCONT) it renews, and releases at its end."""
    out = tmp_path / "out"
    holder, run_id = _holder(out, "wait", **{claims.STALE_ENV: "1"})
    try:
        os.kill(holder.pid, signal.SIGSTOP)
        time.sleep(2.5)  # past its own stale time of 1 s, and far past its heartbeat
        with pytest.raises(claims.ClaimHeld, match=f"run {run_id}"):
            claims.take_claim(str(out), claims.ClaimTiming(stale_after_s=1))
        os.kill(holder.pid, signal.SIGCONT)
        holder.stdin.write("\n")
        holder.stdin.flush()
        assert holder.wait(timeout=30) == 0
    finally:
        if holder.poll() is None:
            holder.kill()
            holder.wait()
    with claims.take_claim(str(out)) as claim:
        assert claim.took_over is None


def test_a_claim_is_judged_by_the_longer_of_its_own_and_the_readers_stale_time(tmp_path):
    """A run started with BEAM_TFRECORD_CLAIM_STALE_S=3600 (a laptop that sleeps) is not taken
    over by a shell without it on the shell's shorter time: the claim says its own stale time."""
    out = tmp_path / "out"
    out.mkdir()
    quiet = time.time() - 600
    patient = claims.ClaimRecord(
        "patient", "another-host", 7, quiet, quiet, stale_after_s=8.0, heartbeat_s=0.5
    )
    (out / names.CLAIM_FILE).write_bytes(patient.to_bytes())
    os.utime(out / names.CLAIM_FILE, (quiet, quiet))
    started = time.monotonic()
    with claims.take_claim(str(out), claims.ClaimTiming(stale_after_s=1)) as claim:
        # Its own 8 s is the longer: watched for 4 s and its heartbeat of 0.5 s, not the reader's 1 s.
        assert claim.took_over.run_id == "patient" and "watched for 4.5 s" in claim.took_over_why
    assert time.monotonic() - started >= 4.5
    hasty = dataclasses.replace(patient, run_id="hasty", stale_after_s=0.5)
    (out / names.CLAIM_FILE).write_bytes(hasty.to_bytes())
    os.utime(out / names.CLAIM_FILE, (quiet, quiet))
    with claims.take_claim(str(out), claims.ClaimTiming(stale_after_s=2)) as claim:
        # The reader's own 2 s is the longer: watched for 1 s and a heartbeat of 0.5 s.
        assert claim.took_over.run_id == "hasty" and "watched for 1.5 s" in claim.took_over_why
        assert claim.record.stale_after_s == 2.0 and claim.record.heartbeat_s == 0.5


def test_a_half_written_claim_is_dated_by_its_file_not_taken_at_once(tmp_path):
    out = tmp_path / "out"
    out.mkdir()
    path = out / names.CLAIM_FILE
    path.write_bytes(b'{"version": 1, "run_id": "half')
    with pytest.raises(claims.ClaimHeld, match="run unknown"):
        claims.take_claim(str(out))
    old = time.time() - 600
    os.utime(path, (old, old))
    with claims.take_claim(str(out), claims.ClaimTiming(stale_after_s=1)) as claim:
        assert claim.took_over.run_id == claims.UNREADABLE and "not renewed while" in claim.took_over_why


def _race(out: str, start, looked, results) -> None:
    start.wait()
    try:
        claim = claims.take_claim(out)
    except claims.ClaimHeld:
        results.put("refused")
        looked.wait(timeout=30)
        return
    results.put("won")
    looked.wait(timeout=30)  # hold it until the other one has looked
    claim.release()


def test_two_processes_racing_for_one_output_fifty_times_one_wins_each_time(tmp_path):
    import multiprocessing

    context = multiprocessing.get_context("fork")
    for round_ in range(50):
        out = str(tmp_path / f"out{round_}")
        start, looked, results = context.Barrier(2), context.Barrier(2), context.Queue()
        racers = [context.Process(target=_race, args=(out, start, looked, results)) for _ in range(2)]
        for racer in racers:
            racer.start()
        for racer in racers:
            racer.join(timeout=60)
        outcomes = sorted(results.get(timeout=10) for _ in racers)
        assert outcomes == ["refused", "won"], (round_, outcomes)
        assert claims.read_claim(out) is None


def test_a_renewal_that_landed_although_its_call_failed_is_the_runs_own(storage, bucket):
    """A renewal's upload lands but its answer is lost (a timeout): the claim's generation moved
    under this run's own id, so the next renewal's precondition fails; that is not a takeover."""
    out = f"gs://{bucket}/out"
    with claims.take_claim(out, claims.ClaimTiming(60)) as claim:
        landed = dataclasses.replace(claim.record, renewed_at=time.time())
        with FileSystems.create(claims.claim_path(out)) as handle:  # as the lost renewal wrote it
            handle.write(landed.to_bytes())
        assert claim.renew() and claim.held and claim.lost_to is None
        assert claims.read_claim(out) == claim.record
        thief = claims.ClaimRecord("thief", "another-host", 1, time.time(), time.time())
        with FileSystems.create(claims.claim_path(out)) as handle:  # another run's: lost
            handle.write(thief.to_bytes())
        assert not claim.renew() and claim.lost_to == thief


def test_a_renewal_against_storage_that_never_answers_gives_up_within_half_a_heartbeat(storage, bucket):
    """Storage that accepts connections and never answers (an outage, a hung proxy): the renewal
    fails within half a heartbeat, not the reads' two minutes, and the release does not hang."""
    import socket as sockets

    out = f"gs://{bucket}/out"
    silent = sockets.socket()
    silent.bind(("127.0.0.1", 0))
    silent.listen(16)
    claim = claims.take_claim(out, claims.ClaimTiming(stale_after_s=8))  # heartbeat 2 s: give up at 1 s
    try:
        with pytest.MonkeyPatch.context() as patch:
            patch.setenv(EMULATOR_ENV, f"http://127.0.0.1:{silent.getsockname()[1]}")
            started = time.monotonic()
            with pytest.raises(Exception):  # noqa: B017 - any failure; what counts is how soon
                claim.renew()
            assert time.monotonic() - started < 6
            started = time.monotonic()
            claim.release()
            assert time.monotonic() - started < 6
    finally:
        silent.close()


# Held while a shard is written (the next commit step: the shards' final names), or once the
# finalize has begun, past its check (the next: the side files and summary.json).
@pytest.mark.parametrize(
    ("point", "step"),
    [("writing", "the shards' final names"), ("finalizing", "the side files and summary.json")],
)
def test_a_run_whose_claim_was_taken_writes_nothing_more(tree, tmp_path, point, step):
    """Fenced: the claim replaced while the run was held (it stalled, another run took it over,
    before its heartbeat noticed): the run's next commit step (the shards' final names, or the
    side files and summary.json) checks the claim first, and stops with one line, writing nothing."""
    out = tmp_path / "out"
    held = Held(command(tree, out), point, tmp_path, {claims.STALE_ENV: "3600"})  # heartbeat: 15 min
    try:
        thief = claims.ClaimRecord("thief0run0id", "another-host", 1, time.time(), time.time())
        (out / names.CLAIM_FILE).write_bytes(thief.to_bytes())
        before = sorted(p.name for p in out.iterdir())
        code, stderr = held.finish()
    finally:
        held.kill()
    assert code == 1, stderr[-3000:]
    (line,) = [x for x in stderr.splitlines() if x.startswith("error")]
    assert line.startswith(
        f"error: beam-tfrecord no longer holds {out}: its claim was taken over by run thief0run0id"
    )
    assert line.endswith(
        f"stopped before writing {step} (one run writes an output; run again once the other has ended)"
    )
    assert "Traceback" not in stderr
    assert not (out / names.SUMMARY_FILE).exists() and not (out / names.LABELS_FILE).exists()
    if point == "writing":
        assert sorted(p.name for p in out.iterdir()) == before  # no final shard name either
    assert claims.read_claim(str(out)) == thief  # the other run's claim is left alone


def test_what_killed_runs_left_beside_the_claim_is_swept_by_the_next_holder(tmp_path):
    out = tmp_path / "out"
    out.mkdir()
    gone = subprocess.Popen([sys.executable, "-c", "pass"])
    gone.wait()
    left = [f"{names.CLAIM_FILE}.abc123.{gone.pid}", f"{names.CLAIM_FILE}.dead-def456"]
    live = f"{names.CLAIM_FILE}.fed789.{os.getpid()}"  # a live process's, about to be linked
    for name in [*left, live]:
        (out / name).write_text("{}")
    with claims.take_claim(str(out)):
        assert sorted(p.name for p in out.iterdir()) == sorted([names.CLAIM_FILE, live])


# --- the lease: the kernel's lock, storage's clock, self-fencing ----------------------------------


def _kill(process: subprocess.Popen) -> None:
    if process.poll() is None:
        process.kill()
    process.wait()


def test_on_one_kernel_the_output_folders_lock_decides_whatever_the_pid_namespace(tmp_path, monkeypatch):
    """Two containers on one machine share a host name and the output, not their pids (a pid
    namespace this reader cannot see): the holder's flock on the output folder says it lives, at
    once, without waiting on a clock; and once it is killed, the kernel has dropped the lock, so
    the claim is a dead run's at once."""
    from beam_tfrecord.output import claim_record

    out = tmp_path / "out"
    holder, run_id = _holder(out, "wait")
    assert claims.read_claim(str(out)).locked
    boot = claim_record.pid_space().split(":")[0]
    monkeypatch.setattr(claim_record, "pid_space", lambda: f"{boot}:another-pid-namespace")
    try:
        started = time.monotonic()
        with pytest.raises(claims.ClaimHeld, match=f"run {run_id}"):
            claims.take_claim(str(out), claims.ClaimTiming(stale_after_s=1))
        assert time.monotonic() - started < 1  # no watching: the lock said so
    finally:
        _kill(holder)
    started = time.monotonic()
    with claims.take_claim(str(out), claims.ClaimTiming(stale_after_s=60)) as claim:
        assert claim.took_over.run_id == run_id
        assert claim.took_over_why == f"process {holder.pid} no longer holds the output folder's lock"
    assert time.monotonic() - started < 5


@pytest.mark.parametrize("skew_s", [3 * 3600, -3 * 3600])
def test_a_reader_whose_clock_is_hours_off_takes_no_live_claim_and_frees_a_dead_one(tmp_path, skew_s):
    """A holder on another host (no lock shared), renewing every half second; a reader whose
    `time.time` is hours ahead or behind. It judges by storage's clock against its own, finds
    them hours apart, and watches: the live holder renews, so it is refused; once the holder is
    killed, the claim goes unchanged for the watch (1.5 s) and is taken over."""
    out = tmp_path / "out"
    holder, run_id = _holder(out, "wait", FAKE_HOST="another-host", **{claims.STALE_ENV: "2"})
    timing = claims.ClaimTiming(stale_after_s=2)
    real_time = time.time
    try:
        with pytest.MonkeyPatch.context() as patch:
            patch.setattr(time, "time", lambda: real_time() + skew_s)
            with pytest.raises(claims.ClaimHeld, match=f"run {run_id} on host another-host"):
                claims.take_claim(str(out), timing)
            _kill(holder)
            started = time.monotonic()
            with claims.take_claim(str(out), timing) as claim:
                assert claim.took_over.run_id == run_id
                assert "not renewed while watched for 1.5 s" in claim.took_over_why
            assert 1.5 <= time.monotonic() - started < 10
    finally:
        _kill(holder)


def test_a_holder_that_cannot_renew_for_half_its_stale_time_fences_itself(storage, bucket):
    """Storage stops answering the holder (an outage, a partition): after half its stale time
    without a renewal it stops itself: its remote job is cancelled, `on_lost` is told, and every
    later commit step refuses, although the claim still names it (storage could not be told)."""
    import socket as sockets

    out = f"gs://{bucket}/out"
    silent = sockets.socket()
    silent.bind(("127.0.0.1", 0))
    silent.listen(16)
    lost, cancelled = [], []
    claim = claims.take_claim(out, claims.ClaimTiming(stale_after_s=2))  # heartbeat 0.5 s, gives up at 1 s
    claim.set_job(None, cancel=lambda: cancelled.append(True))
    claim.fence("the shards' final names")  # held: passes
    try:
        with pytest.MonkeyPatch.context() as patch:
            patch.setenv(EMULATOR_ENV, f"http://127.0.0.1:{silent.getsockname()[1]}")
            claim.start_heartbeat(on_lost=lost.append)  # its thread's client: the silent one
            deadline = time.monotonic() + 20
            while not lost and time.monotonic() < deadline:
                time.sleep(0.05)
        assert lost == [claim] and cancelled == [True] and not claim.held
        assert claim.lost_to is None and claim.fenced_why.startswith("could not be renewed for ")
        assert claims.read_claim(out).run_id == claim.record.run_id  # storage still names it
        with pytest.raises(claims.ClaimLost, match=r"could not be renewed for .* stopped before writing"):
            claim.fence("summary.json")
    finally:
        silent.close()
        claim.release()
    assert claims.read_claim(out) is None  # the release, once storage answers, frees it


def test_a_takeover_racing_a_renewal_leaves_exactly_one_holder(storage, bucket):
    """A renewal every 250 ms and a takeover at the generation read 0 to 0.66 s before, 8 times,
    on gs:// (GCS's preconditions, kept by the proxy): either the takeover lands and the holder
    learns it lost, or a renewal landed first and the takeover is refused; never both hold."""
    from beam_tfrecord.output import claim_store

    outcomes = []
    for round_ in range(8):
        out = f"gs://{bucket}/race{round_}"
        holder = claims.take_claim(out, claims.ClaimTiming(stale_after_s=60, heartbeat_s=0.25))
        lost = []
        holder.start_heartbeat(on_lost=lost.append)
        store = claim_store.store_for(out)
        first = store.read().generation
        deadline = time.monotonic() + 30
        while (found := store.read()).generation == first:  # its heartbeat renews: read that ...
            assert time.monotonic() < deadline, "the holder never renewed"
            time.sleep(0.01)
        time.sleep(0.75 * round_ / 8)  # ... and take it over at that up to three heartbeats later
        taker = claims.ClaimRecord.mine(time.time())
        taken, _ = store.take_over(taker, found)
        outcomes.append(taken)
        deadline = time.monotonic() + 10
        while taken and not lost and time.monotonic() < deadline:
            time.sleep(0.01)
        now_held = claims.read_claim(out)
        if taken:
            assert lost == [holder] and holder.lost_to is not None and not holder.held, (
                round_,
                lost,
                holder.held,
                holder.fenced_why,
                now_held,
                taker.run_id,
                holder.record.run_id,
                holder._thread.is_alive(),
            )
            assert now_held.run_id == taker.run_id
        else:
            assert holder.held and now_held.run_id == holder.record.run_id, round_
        holder.release()
        if taken:
            assert claims.read_claim(out).run_id == taker.run_id  # the loser deletes nothing
    assert True in outcomes and False in outcomes  # both sides of the race were run


def test_a_release_does_not_wait_for_a_renewal_stuck_in_storage(storage, bucket):
    """Ctrl-C while a renewal hangs on storage that stopped answering (up to half a heartbeat,
    3.75 s here): the release holds no lock the renewal holds, deletes the claim in well under a
    second, and the renewal, when it gives up or lands, puts nothing back."""
    import socket as sockets
    import threading

    out = f"gs://{bucket}/out"
    silent = sockets.socket()
    silent.bind(("127.0.0.1", 0))
    silent.listen(16)
    claim = claims.take_claim(out, claims.ClaimTiming(stale_after_s=30))
    outcome = []
    try:
        with pytest.MonkeyPatch.context() as patch:
            patch.setenv(EMULATOR_ENV, f"http://127.0.0.1:{silent.getsockname()[1]}")
            renewal = threading.Thread(target=lambda: outcome.append(_renew_or_error(claim)))
            renewal.start()
            time.sleep(0.5)  # its request is out, unanswered
        started = time.monotonic()
        claim.release()  # this thread's client reaches the real storage again
        assert time.monotonic() - started < 2
        assert claims.read_claim(out) is None
        renewal.join(timeout=30)
        assert outcome and outcome[0] is not True
        assert claims.read_claim(out) is None
    finally:
        silent.close()


def _renew_or_error(claim) -> object:
    try:
        return claim.renew()
    except Exception as error:
        return error


def test_a_launcher_still_renewing_keeps_its_claim_after_its_job_wrote_its_summary(storage, bucket):
    """The job wrote summary.json and the launcher is on its way to its last step (an append's
    merge): the claim is still the launcher's, which renews it, not the finished job's."""
    out = f"gs://{bucket}/out"
    with claims.take_claim(out, claims.ClaimTiming(stale_after_s=4)) as claim:
        claim.set_job("job-1")
        claim.start_heartbeat()
        with FileSystems.create(f"{out}/{names.SUMMARY_FILE}") as handle:
            handle.write(b"{}")
        with pytest.raises(claims.ClaimHeld, match="job job-1"):
            claims.take_claim(out, claims.ClaimTiming(stale_after_s=4))
        assert claims.read_claim(out).stored_at is not None  # storage's time of it, for a later reader


def test_a_hand_over_is_never_undone_by_a_renewal_under_way(storage, bucket):
    """Ctrl-C while submitting hands the claim to the job while the heartbeat renews every
    200 ms: whichever write lands last, the claim stays detached and names the job."""
    for round_ in range(6):
        out = f"gs://{bucket}/hand{round_}"
        claim = claims.take_claim(out, claims.ClaimTiming(stale_after_s=60, heartbeat_s=0.2))
        claim.start_heartbeat()
        time.sleep(0.2 + 0.05 * round_)
        claim.hand_over(job_name="beam-tfrecord-out", runner="DataflowRunner")
        time.sleep(0.3)  # a renewal that was under way has landed or failed by now
        held = claims.read_claim(out)
        assert held.detached and held.job_name == "beam-tfrecord-out", round_


def test_a_claim_whose_release_failed_is_no_live_runs_in_its_own_process(tmp_path, monkeypatch):
    """A notebook's run whose release could not delete its claim (a passing storage error): the
    process lives on, but the claim is no live run's, so its next run takes it over."""
    from beam_tfrecord.output import claim_store

    out = str(tmp_path / "out")
    first = claims.take_claim(out)
    with monkeypatch.context() as patch:
        patch.setattr(claim_store.LocalStore, "delete", lambda *args: (_ for _ in ()).throw(OSError("busy")))
        first.release()
    assert claims.read_claim(out).run_id == first.record.run_id
    with claims.take_claim(out) as second:
        assert second.took_over.run_id == first.record.run_id
