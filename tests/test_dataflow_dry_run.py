"""`pipelines.convert --dry_run` through Beam's own DataflowRunner translation, offline.

Each case in PIPELINES is one job shape: the extra CLI options and the steps its graph must hold.
The feature-model job is one more entry: a gs:// --model_path and its RunInference step.
"""

from __future__ import annotations

import json

import pytest

from pipelines.convert import run
from pipelines.dataflow_checks import JOB_NAME, output_job_name

DATAFLOW = [
    "--runner=DataflowRunner",
    "--project=my-project",
    "--region=europe-west4",
    "--temp_location=gs://my-bucket/tmp",
    "--output=gs://my-bucket/out",
]
# Leaf steps of the one flow: shard tasks spread by a Reshuffle, read, build, the sink, metadata.
FLOW_STEPS = [
    "ImagesToTFRecords/ListShardTasks",
    "ImagesToTFRecords/SpreadShards/ReshufflePerKey/GroupByKey",
    "ImagesToTFRecords/ReadValidate/ParDo(ReadShardFn)",
    "ImagesToTFRecords/BuildRecords/ParDo(BuildRecordFn)",
    "ImagesToTFRecords/WriteMetadata",
]
PATHS_SINK = [
    "ImagesToTFRecords/Write/WriteShardFiles/ParDo(WriteShardFilesFn)",
    "ImagesToTFRecords/Write/Finalize",
]
BEAM_SINK = [
    "ImagesToTFRecords/Write/Write[train]/Write/WriteImpl/WriteBundles",
    "ImagesToTFRecords/Write/Write[train]/Write/WriteImpl/FinalizeWrite",
    "ImagesToTFRecords/Write/Write[validation]/Write/WriteImpl/WriteBundles",
]
FEATURE_STEPS = [
    "ImagesToTFRecords/Features/RunInference/BatchElements/ParDo(_GlobalWindowsBatchingDoFn)",
    "ImagesToTFRecords/Features/RunInference/BeamML_RunInference/ParDo(_RunInferenceDoFn)/ParDo(_RunInferenceDoFn)",
    "ImagesToTFRecords/Features/FailedBatches",
]
FEATURES = ["--model_path=gs://my-bucket/models/effnet", "--feature_pooling=avg"]
PIPELINES = {
    "plain": ([], [*FLOW_STEPS, *PATHS_SINK]),
    "features": (FEATURES, [*FLOW_STEPS, *FEATURE_STEPS, *PATHS_SINK]),
    "beam_sink": (["--sink=beam"], [*FLOW_STEPS, *BEAM_SINK]),
    "features_beam_sink": ([*FEATURES, "--sink=beam"], [*FLOW_STEPS, *FEATURE_STEPS, *BEAM_SINK]),
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
            "--dry_run=true",
            f"--dry_run_output={job_file}",
            *extra,
        ]
    )
    if code != 0:
        return code, {}, ""
    return code, json.loads(job_file.read_text()), (tmp_path / "job.pipeline.textproto").read_text()


def parse(pipeline_text: str):
    from apache_beam.portability.api import beam_runner_api_pb2
    from google.protobuf import text_format

    return text_format.Parse(pipeline_text, beam_runner_api_pb2.Pipeline())


def leaf_names(pipeline_text: str) -> set[str]:
    proto = parse(pipeline_text)
    return {t.unique_name for t in proto.components.transforms.values() if not t.subtransforms}


@pytest.mark.parametrize(
    ("name", "delivery"),
    [
        ("plain", "setup_file"),
        ("plain", "container"),
        ("features", "setup_file"),
        ("features", "container"),
        ("beam_sink", "setup_file"),
        ("features_beam_sink", "container"),
    ],
)
def test_dry_run_translates_the_whole_job(pets_tree, tmp_path, monkeypatch, capfd, name, delivery):
    monkeypatch.chdir(__file__.rsplit("/tests/", 1)[0])  # --setup_file ./setup.py as in docs/dataflow.md
    extra, steps = PIPELINES[name]
    code, job, pipeline_text = dry_run(pets_tree, tmp_path, *extra, *CODE_DELIVERY[delivery])
    assert code == 0
    # Beam's stager tries `python -m build` before `setup.py sdist`: its child's complaint that no
    # such module is installed is not the command's to say.
    assert "No module named build" not in capfd.readouterr().err
    assert set(steps) <= leaf_names(pipeline_text)

    environment = job["environment"]
    options = environment["sdkPipelineOptions"]["options"]
    assert options["region"] == "europe-west4"
    assert options["project"] == "my-project"
    assert options["temp_location"].startswith("gs://my-bucket/tmp/")
    assert job["type"] == "JOB_TYPE_BATCH"
    # Named after its output: Dataflow refuses a second active job of one name, so one job per output.
    assert (
        job["name"]
        == output_job_name("gs://my-bucket/out")
        == "beam-tfrecord-my-bucket-out-" + job["name"][-8:]
    )
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


def test_dry_run_over_gcs_input_is_refused_before_any_listing(tmp_path, capsys):
    code, _, _ = dry_run("gs://my-bucket/images", tmp_path, "--setup_file=./setup.py")
    assert code == 2
    assert "cannot be listed offline" in capsys.readouterr().err


def test_graph_size_does_not_grow_with_the_inputs(tmp_path, monkeypatch):
    """8,000 planned inputs: the plan is staged as files, so the graph holds none of them
    (pickled in, the same job was 603 KB at 32,000 inputs; about 190 MB at 10 million), and it
    is the same size within a few bytes as for 32. The shard tasks are spread by a Reshuffle
    and the dry run's graph says how many there are."""
    monkeypatch.chdir(__file__.rsplit("/tests/", 1)[0])
    sizes = {}
    for count in (32, 8_000):
        tree = tmp_path / f"tree{count}"
        for folder in ("cat", "dog"):
            (tree / folder).mkdir(parents=True)
        for i in range(count):
            (tree / ("cat", "dog")[i % 2] / f"{i:06d}-{'x' * 40}.jpg").write_bytes(b"")
        code, _, pipeline_text = dry_run(
            tree, tmp_path / f"job{count}", "--setup_file=./setup.py", "--num_shards=3"
        )
        assert code == 0
        proto = parse(pipeline_text)
        sizes[count] = proto.ByteSize()
        assert f"/tree{count}/cat/000000-" not in pipeline_text  # no input path anywhere in the graph
        assert "train 3, validation 3" in pipeline_text  # ListShardTasks' display data
    assert sizes[8_000] < 100_000
    assert abs(sizes[8_000] - sizes[32]) < 1_000  # run ids and paths differ by a few bytes


def test_our_options_and_beams_job_labels_reach_the_job(pets_tree, tmp_path, monkeypatch):
    monkeypatch.chdir(__file__.rsplit("/tests/", 1)[0])
    code, job, _ = dry_run(
        pets_tree, tmp_path, "--setup_file=./setup.py", "--labels=team=ml", "--schema=simple"
    )
    assert code == 0
    assert job["labels"] == {"team": "ml"}
    options = job["environment"]["sdkPipelineOptions"]["options"]
    assert options["splits"] == "train=0.8,validation=0.2" and options["schema"] == "simple"
    assert options["label_source"] == "folder" and options["labels"] == ["team=ml"]


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
    assert run(["--input", str(pets_tree), "--output", str(tmp_path / "o"), "--dry_run=true"]) == 2
    assert "--runner=DataflowRunner" in capsys.readouterr().err


def test_a_job_is_named_after_its_output_unless_job_name_says_otherwise(pets_tree, tmp_path, monkeypatch):
    monkeypatch.chdir(__file__.rsplit("/tests/", 1)[0])
    names = {output_job_name(f"gs://my-bucket/{o}") for o in ("out", "out/", "other", "x" * 300)}
    assert len(names) == 3 and all(JOB_NAME.match(n) and len(n) <= 63 for n in names)
    code, job, _ = dry_run(pets_tree, tmp_path, "--setup_file=./setup.py", "--job_name=pets-2026")
    assert code == 0 and job["name"] == "pets-2026"
