"""Options of a Dataflow run are refused on the client, one clear line per problem."""

from __future__ import annotations

import os

import pytest
from apache_beam.options.pipeline_options import PipelineOptions

from pipelines import dataflow_checks as checks
from pipelines.convert import run
from pipelines.options import ConvertOptions, check_options, parse_options

HERE = os.path.dirname(os.path.abspath(__file__))
GOOD = [
    "--runner=DataflowRunner",
    "--project=my-project",
    "--region=us-central1",
    "--temp_location=gs://my-bucket/tmp",
    "--setup_file=./setup.py",
]


def problems(*argv: str) -> list[str]:
    options = parse_options(argv)
    return checks.check_dataflow(check_options(options), options)


def test_a_complete_job_passes():
    assert problems("--input=gs://my-bucket/images", "--output=gs://my-bucket/out", *GOOD) == []


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ("--project=", "--project is required"),
        ("--project=123456", "is not a project id"),
        ("--region=", "--region is required"),
        ("--region=Europe", "is not a region"),
        ("--temp_location=/tmp/x", "--temp_location /tmp/x is not a gs://bucket/path"),
        ("--temp_location=gs://b/tmp", "is not a gs://bucket/path"),  # bucket names have 3+ chars
        ("--temp_location=gs://my-bucket", "names a bucket only"),
        ("--staging_location=stage", "--staging_location stage is not a gs://"),
        ("--output=out", "is not a gs://bucket/path"),
        (f"--input={HERE}", "Dataflow workers read only gs:// inputs"),
        ("--setup_file=", "workers need this project's code"),
        ("--job_name=My_Job", "--job_name My_Job"),
    ],
)
def test_each_problem_is_named(change, message):
    found = problems("--input=gs://my-bucket/images", "--output=gs://my-bucket/out", *GOOD, change)
    assert any(message in p for p in found), found


def test_gpu_workers_need_a_g2_machine_the_driver_and_the_gpu_image():
    base = ["--input=gs://my-bucket/i", "--output=gs://my-bucket/o", *GOOD]
    gpu = "--dataflow_service_options=worker_accelerator=type:nvidia-l4;count:1;install-nvidia-driver"
    found = problems(*base, gpu, "--machine_type=n1-standard-4")
    assert any("g2-* machine types" in p for p in found)
    assert any("deploy/build_image.sh --gpu" in p for p in found)
    image = "--sdk_container_image=us-docker.pkg.dev/p/r/beam-tfrecord-gpu:1"
    assert problems(*base, gpu, "--machine_type=g2-standard-4", image) == []
    no_driver = "--dataflow_service_options=worker_accelerator=type:nvidia-l4;count:1"
    found = problems(*base, no_driver, "--machine_type=g2-standard-4")
    assert any("install-nvidia-driver" in p for p in found)


@pytest.mark.parametrize(
    ("path", "ok"),
    [
        (None, True),
        ("gs://my-bucket/models/effnet", True),
        ("https://example.org/model.keras", True),
        ("EfficientNetB0", True),
        ("models/effnet.keras", False),
        ("/home/me/model", False),
        ("s3://bucket/model", False),
    ],
)
def test_model_path_must_be_reachable_from_workers(path, ok):
    assert (checks.check_model_path(path) == []) is ok


def test_cli_prints_every_problem_and_exits_2(capsys):
    code = run(["--input=gs://my-bucket/i", "--output=out", "--runner=DataflowRunner"])
    err = capsys.readouterr().err
    assert code == 2
    for option in ("--project", "--region", "--temp_location", "--output", "--setup_file"):
        assert option in err


def test_portable_runners_warn_about_local_paths():
    options = parse_options(["--output=/tmp/o", "--runner=FlinkRunner"])
    warnings = checks.check_portable(check_options(options), options)
    assert len(warnings) == 2 and "FlinkRunner" in warnings[0]


@pytest.mark.parametrize(
    ("value", "expected"), [(None, True), ("true", True), ("False", False), ("0", False)]
)
def test_flags_take_flex_template_values(value, expected):
    flag = "--stratify" if value is None else f"--stratify={value}"
    assert PipelineOptions([flag]).view_as(ConvertOptions).stratify is expected
    assert PipelineOptions([]).view_as(ConvertOptions).stratify is False
