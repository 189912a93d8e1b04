"""Proven off one process: the same command on Beam's portable job service with its SDK worker
pool (the protocol of Dataflow Runner v2, Flink and Spark), both started here on 127.0.0.1,
writes the same records, rejects and labels as the in-process run, for a plain run, feature runs
(Keras and ONNX) and a detection run (boxes and masks), and waits for the job to print the same
summary table."""

from __future__ import annotations

import json
import subprocess
import sys

import annotationgen as ag
import imagegen
import pytest
from conftest import REPO, convert
from outputcheck import digest_from_shards
from portable_services import portable_services


@pytest.fixture(scope="module")
def portable(tmp_path_factory):
    """Beam's local job service and an SDK worker pool, as separate processes; the options that
    point a run at them."""
    with portable_services(str(tmp_path_factory.mktemp("portable"))) as (_, options):
        yield options


def run_cli(*args: str) -> subprocess.CompletedProcess:
    """The command line as a user runs it; a hung job fails the test instead of the suite."""
    return subprocess.run(
        [sys.executable, "-m", "pipelines.convert", "--no_progress", *args],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=300,
    )


def outcome(out) -> dict:
    summary = json.loads((out / "summary.json").read_text())
    return {
        "digests": {name: split["digest"] for name, split in summary["splits"].items()},
        "recomputed": {name: digest_from_shards(out, name) for name in summary["splits"]},
        "records": summary["records"],
        "rejects": (out / "rejects.jsonl").read_text(),
        "labels": (out / "labels.txt").read_text(),
    }


@pytest.fixture(scope="module")
def tree(tmp_path_factory):
    root = tmp_path_factory.mktemp("tree") / "in"
    files = {
        f"{c}/{c}.{i}.jpg": imagegen.jpeg(40 + i, 30, seed=i + 50 * (c == "b"))
        for c in "ab"
        for i in range(10)
    }
    imagegen.write_tree(root, files | {"a/broken.jpg": b"\xff\xd8\xff", "b/empty.png": b""})
    return root


def test_a_plain_run_off_one_process_equals_the_in_process_run(portable, tree, tmp_path):
    args = ("--splits=train=0.6,validation=0.4", "--num_shards=2")
    assert convert(tree, tmp_path / "local", *args) == 0
    done = run_cli("--input", str(tree), "--output", str(tmp_path / "remote"), *args, *portable)
    assert done.returncode == 0, done.stderr[-3000:]
    assert "inputs = records + rejects  yes" in done.stdout  # it waited for the job: the table
    summary = json.loads((tmp_path / "remote" / "summary.json").read_text())
    assert summary["runner"] == "PortableRunner" and summary["sink"] == "paths"
    local, remote = outcome(tmp_path / "local"), outcome(tmp_path / "remote")
    assert remote == local
    assert remote["digests"] == remote["recomputed"] and remote["records"] == 20


def test_a_feature_run_off_one_process_equals_the_in_process_run(portable, tree, tmp_path):
    import keras

    keras.utils.set_random_seed(0)
    model = keras.Sequential(
        [keras.Input(shape=(8, 8, 3)), keras.layers.Conv2D(2, 3), keras.layers.GlobalMaxPooling2D()]
    )
    model_path = tmp_path / "tiny.keras"
    model.save(model_path)
    args = (f"--model_path={model_path}", "--inference_batch_size=4", "--num_shards=2")
    assert convert(tree, tmp_path / "local", *args) == 0
    done = run_cli("--input", str(tree), "--output", str(tmp_path / "remote"), *args, *portable)
    assert done.returncode == 0, done.stderr[-3000:]
    local, remote = outcome(tmp_path / "local"), outcome(tmp_path / "remote")
    assert remote == local
    assert json.loads((tmp_path / "remote" / "summary.json").read_text())["features"]["shape"] == [2]


def test_an_onnx_feature_run_off_one_process_equals_the_in_process_run(portable, tree, tmp_path):
    """The ONNX path on the portable runner's SDK workers: same records (so same digests), rejects
    and labels as in-process, features pooled and stored as float16."""
    import onnxgen

    model_path = onnxgen.conv_pool(tmp_path / "tiny.onnx")
    args = (
        f"--model_path={model_path}",
        "--model_input_normalization=imagenet",
        "--feature_pooling=avg",
        "--feature_dtype=float16",
        "--inference_batch_size=4",
        "--num_shards=2",
    )
    assert convert(tree, tmp_path / "local", *args) == 0
    done = run_cli("--input", str(tree), "--output", str(tmp_path / "remote"), *args, *portable)
    assert done.returncode == 0, done.stderr[-3000:]
    local, remote = outcome(tmp_path / "local"), outcome(tmp_path / "remote")
    assert remote == local and remote["records"] == 20
    assert remote["digests"] == remote["recomputed"]
    features = json.loads((tmp_path / "remote" / "summary.json").read_text())["features"]
    assert features["shape"] == [5] and features["framework"] == "onnx"


def test_a_detection_run_off_one_process_equals_the_in_process_run(portable, tmp_path):
    """Objects travel in the staged shard tasks, not in the graph: the workers of another
    process read them and store the same boxes and masks (polygons and a crowd's run lengths),
    and the objects dropped on the workers (a box wholly outside) and while planning (an
    unknown category) are named alike."""
    root = tmp_path / "coco"
    ag.shapes_coco(root, count=4)
    instances = root / "annotations" / "instances_shapes.json"
    document = json.loads(instances.read_text())
    runs = [10 * 64 + 8] + [12, 64 - 12] * 9 + [12]  # a 10x12 block at x=10, y=8 (column-major)
    rle = {"size": [64, 96], "counts": [*runs, 96 * 64 - sum(runs)]}
    document["annotations"] += [
        ag.box(9001, 0, 3, [10, 8, 10, 12], iscrowd=1, segmentation=rle),
        ag.box(9002, 1, 7, [200, 200, 5, 5]),  # wholly outside: dropped by the worker
        ag.box(9003, 2, 99, [1, 1, 5, 5]),  # category 99 is unknown: dropped while planning
    ]
    instances.write_text(json.dumps(document))
    args = ("--annotations=coco", "--masks", "--splits=train=0.5,validation=0.5", "--num_shards=2")
    assert convert(root, tmp_path / "local", *args) == 0
    done = run_cli("--input", str(root), "--output", str(tmp_path / "remote"), *args, *portable)
    assert done.returncode == 0, done.stderr[-3000:]
    local, remote = tmp_path / "local", tmp_path / "remote"
    assert outcome(remote) == outcome(local)
    for name in ("dropped_objects.jsonl", "label_map.pbtxt", "changes.jsonl"):
        assert (remote / name).read_text() == (local / name).read_text(), name
    objects = json.loads((remote / "summary.json").read_text())["objects"]
    assert objects == json.loads((local / "summary.json").read_text())["objects"]
    assert objects["consistent"] and objects["annotated"] == 1 + 2 + 3 + 1 + 3
    assert objects["dropped_per_reason"] == {"outside_image": 1, "unknown_category": 1}
    from beam_tfrecord import iter_examples

    stored = [r for split in ("train", "validation") for r in iter_examples(str(remote), split)]
    assert sum(len(r["masks"]) for r in stored) == sum(len(r["boxes"]) for r in stored) == 8
    crowd = next(r for r in stored if r["source_id"] == "0")
    assert crowd["masks"][-1].sum() == 10 * 12  # the run lengths' block, as the worker drew it


def test_no_wait_returns_once_submitted(portable, tree, tmp_path):
    out = tmp_path / "out"
    done = run_cli("--input", str(tree), "--output", str(out), "--no_wait", *portable)
    assert done.returncode == 0, done.stderr[-3000:]
    assert "submitted" in done.stdout and "inputs = records + rejects" not in done.stdout


def test_a_failed_remote_job_is_one_line_and_exit_1(portable, tree, tmp_path):
    """The launcher only checks that a model file exists; a worker that cannot load it fails the
    job. The waiting command ends with one line of its own and exit code 1, after the runner's
    own report of the workers' error (that traceback is the cause, not noise)."""
    model = tmp_path / "broken.keras"
    model.write_bytes(b"not a keras file")
    done = run_cli(
        "--input", str(tree), "--output", str(tmp_path / "out"), f"--model_path={model}", *portable
    )
    assert done.returncode == 1, done.stderr[-3000:]
    errors = [line for line in done.stderr.splitlines() if line.startswith("error: ")]
    assert len(errors) == 1 and "the job failed, and wrote no summary.json" in errors[0]
    assert done.stderr.rstrip().splitlines()[-1] == errors[0]
    assert "broken.keras" in done.stderr  # the workers' error, as the runner reported it
    assert not (tmp_path / "out" / "summary.json").exists()


def test_a_launcher_that_loses_sight_of_its_job_leaves_the_claim_with_it(tree, tmp_path, monkeypatch):
    """The job service goes away while the launcher waits (a dropped connection, an expired
    credential): the job may still run, so the claim is not released for another run to clear
    the output under it; it stays with the job, and the line says how to check and clear it."""
    import os
    import time

    from beam_tfrecord import names
    from beam_tfrecord.output import claim as claims

    marker = tmp_path / "paused-writing"
    monkeypatch.setenv("BEAM_TFRECORD_PAUSE_AT", "writing")  # the pool's workers inherit it
    monkeypatch.setenv("BEAM_TFRECORD_PAUSE_FILE", str(marker))
    with portable_services(str(tmp_path)) as (processes, options):
        monkeypatch.delenv("BEAM_TFRECORD_PAUSE_AT")  # the launcher itself never pauses
        out = tmp_path / "out"
        command = [sys.executable, "-m", "pipelines.convert", "--no_progress", "--input", str(tree)]
        launcher = subprocess.Popen(
            [*command, "--output", str(out), *options],
            cwd=REPO,
            env=dict(os.environ),
            stderr=subprocess.PIPE,
            text=True,
        )
        try:
            deadline = time.monotonic() + 180
            while not marker.exists():  # a worker is writing a shard: the job runs
                assert launcher.poll() is None, launcher.stderr.read()[-3000:]
                assert time.monotonic() < deadline, "the job never started writing"
                time.sleep(0.1)
            processes[0].kill()  # the job service: the launcher loses sight of the job
            _, stderr = launcher.communicate(timeout=120)
        finally:
            if launcher.poll() is None:
                launcher.kill()
                launcher.wait()
    assert launcher.returncode == 1, stderr[-3000:]
    (line,) = [x for x in stderr.splitlines() if x.startswith("error: ")]
    assert line.startswith("error: lost sight of the job (") and "stays with it" in line, line
    held = claims.read_claim(str(out))
    assert held is not None and held.detached, "the claim was released under a job that may run"
    assert not (out / names.SUMMARY_FILE).exists()


def test_a_detached_jobs_claim_is_judged_by_its_job_service(tree, tmp_path, monkeypatch):
    """`--no_wait`: the launcher leaves, its claim handed to the job. While the job runs (a worker
    held mid-shard by the pause hook), a second run asks the job service and is refused, told the
    job is RUNNING; once the job is cancelled (no launcher waiting, no summary.json written), the
    next run asks again, hears CANCELLED, takes the claim over at once and converts."""
    import time

    import grpc
    from apache_beam.portability.api import beam_job_api_pb2, beam_job_api_pb2_grpc

    from beam_tfrecord import names
    from beam_tfrecord.output import claim as claims

    marker = tmp_path / "paused-writing"
    monkeypatch.setenv("BEAM_TFRECORD_PAUSE_AT", "writing")  # the pool's workers inherit it
    monkeypatch.setenv("BEAM_TFRECORD_PAUSE_FILE", str(marker))
    out = tmp_path / "out"
    with portable_services(str(tmp_path)) as (_, options):
        monkeypatch.delenv("BEAM_TFRECORD_PAUSE_AT")  # the launchers themselves never pause
        submitted = run_cli("--input", str(tree), "--output", str(out), "--no_wait", *options)
        assert submitted.returncode == 0, submitted.stderr[-3000:]
        held = claims.read_claim(str(out))
        endpoint = options[1].split("=", 1)[1]
        assert held.detached and held.job_id and held.job_endpoint == endpoint
        deadline = time.monotonic() + 180
        while not marker.exists():  # a worker is writing a shard: the job runs
            assert time.monotonic() < deadline, "the job never started writing"
            time.sleep(0.1)
        refused = run_cli("--input", str(tree), "--output", str(out))
        assert refused.returncode == 75, refused.stderr[-3000:]
        (line,) = [x for x in refused.stderr.splitlines() if x.startswith("error: ")]
        assert (
            f"job {held.job_id}, submitted without waiting; the job service at {endpoint} says it is RUNNING"
            in line
        )
        with grpc.insecure_channel(endpoint) as channel:
            beam_job_api_pb2_grpc.JobServiceStub(channel).Cancel(
                beam_job_api_pb2.CancelJobRequest(job_id=held.job_id), timeout=30
            )
        done = run_cli("--input", str(tree), "--output", str(out))
    assert done.returncode == 0, done.stderr[-3000:]
    assert f"its job {held.job_id} ended (CANCELLED, says the job service at {endpoint})" in done.stderr
    assert (out / names.SUMMARY_FILE).exists() and not (out / names.CLAIM_FILE).exists()
