"""`pipelines.convert --dry_run` through Beam's own DataflowRunner translation, offline.

Each case in PIPELINES is one job shape: the extra CLI options and the steps its graph must hold.
The feature-model job is one more entry: a gs:// --model_path and its RunInference step.
"""

from __future__ import annotations

import json
import time

import pytest

from pipelines.convert import run

DATAFLOW = [
    "--runner=DataflowRunner",
    "--project=my-project",
    "--region=europe-west4",
    "--temp_location=gs://my-bucket/tmp",
    "--output=gs://my-bucket/out",
]
# Leaf steps every job has: one WriteToTFRecord per split, the metadata.
WRITE_STEPS = [
    "ImagesToTFRecords/Write/Write[train]/Write/WriteImpl/WriteBundles",
    "ImagesToTFRecords/Write/Write[train]/Write/WriteImpl/FinalizeWrite",
    "ImagesToTFRecords/Write/Write[validation]/Write/WriteImpl/WriteBundles",
    "ImagesToTFRecords/WriteMetadata",
]
FEATURE_STEPS = [
    "ImagesToTFRecords/Features/ReadDecode/ParDo(PrepareFn)",
    "ImagesToTFRecords/Features/RunInference/BatchElements/ParDo(_GlobalWindowsBatchingDoFn)",
    "ImagesToTFRecords/Features/RunInference/BeamML_RunInference/ParDo(_RunInferenceDoFn)/ParDo(_RunInferenceDoFn)",
    "ImagesToTFRecords/Features/BuildRecords/ParDo(BuildRecordFn)",
    "ImagesToTFRecords/Features/FailedBatches",
]
PIPELINES = {
    "plain": ([], ["ImagesToTFRecords/Convert/ReadDecodeBuild/ParDo(ConvertFn)", *WRITE_STEPS]),
    "features": (
        ["--model_path=gs://my-bucket/models/effnet", "--feature_pooling=avg"],
        [*FEATURE_STEPS, *WRITE_STEPS],
    ),
}
CODE_DELIVERY = {
    "setup_file": ["--setup_file=./setup.py"],
    "container": ["--sdk_container_image=europe-docker.pkg.dev/my-project/beam/beam-tfrecord:1"],
}


def dry_run(tree, tmp_path, *extra: str) -> tuple[int, dict, str]:
    job_file = tmp_path / "job.json"
    code = run(
        [
            "--input",
            str(tree),
            "--splits=train=0.8,validation=0.2",
            *DATAFLOW,
            "--dry_run",
            f"--dry_run_output={job_file}",
            *extra,
        ]
    )
    if code != 0:
        return code, {}, ""
    return code, json.loads(job_file.read_text()), (tmp_path / "job.pipeline.textproto").read_text()


def leaf_names(pipeline_text: str) -> set[str]:
    from apache_beam.portability.api import beam_runner_api_pb2
    from google.protobuf import text_format

    proto = text_format.Parse(pipeline_text, beam_runner_api_pb2.Pipeline())
    return {t.unique_name for t in proto.components.transforms.values() if not t.subtransforms}


@pytest.mark.parametrize("delivery", CODE_DELIVERY)
@pytest.mark.parametrize("name", PIPELINES)
def test_dry_run_translates_the_whole_job(pets_tree, tmp_path, monkeypatch, name, delivery):
    monkeypatch.chdir(__file__.rsplit("/tests/", 1)[0])  # --setup_file ./setup.py as in the README
    extra, steps = PIPELINES[name]
    started = time.time()
    code, job, pipeline_text = dry_run(pets_tree, tmp_path, *extra, *CODE_DELIVERY[delivery])
    # No credential lookup, bucket creation or listing retried over the network (those take minutes).
    assert time.time() - started < 90
    assert code == 0
    assert set(steps) <= leaf_names(pipeline_text)

    environment = job["environment"]
    options = environment["sdkPipelineOptions"]["options"]
    assert options["region"] == "europe-west4"
    assert options["project"] == "my-project"
    assert options["temp_location"].startswith("gs://my-bucket/tmp/")
    assert job["type"] == "JOB_TYPE_BATCH"
    pool = environment["workerPools"][0]
    packages = {p["name"] for p in pool.get("packages", [])}
    if delivery == "setup_file":
        assert options["setup_file"] == "./setup.py"
        assert "workflow.tar.gz" in packages  # setup.py's sdist, installed on every worker
    else:
        image = CODE_DELIVERY["container"][0].split("=", 1)[1]
        assert options["sdk_container_image"] == image
        assert pool["workerHarnessContainerImage"] == image
        assert "workflow.tar.gz" not in packages


def test_dry_run_over_gcs_input_is_refused_at_once(tmp_path, capsys):
    started = time.time()
    code, _, _ = dry_run("gs://my-bucket/images", tmp_path, "--setup_file=./setup.py")
    assert code == 2
    assert "cannot be listed offline" in capsys.readouterr().err
    assert time.time() - started < 10


def test_dry_run_refuses_a_model_on_this_machine(pets_tree, tmp_path, capsys):
    """dataflow_checks.check_model_path is wired to --model_path: workers cannot read local disk."""
    model = tmp_path / "model.keras"
    model.write_bytes(b"")
    code, _, _ = dry_run(pets_tree, tmp_path, "--setup_file=./setup.py", f"--model_path={model}")
    assert code == 2
    assert "Dataflow workers cannot read" in capsys.readouterr().err
    weights = ["--feature_model=efficientnet_b0", f"--model_weights={model}"]
    code, _, _ = dry_run(pets_tree, tmp_path, "--setup_file=./setup.py", *weights)
    assert code == 2
    assert "--model_weights" in capsys.readouterr().err


def test_dry_run_needs_dataflow(pets_tree, tmp_path, capsys):
    assert run(["--input", str(pets_tree), "--output", str(tmp_path / "o"), "--dry_run"]) == 2
    assert "--runner=DataflowRunner" in capsys.readouterr().err
