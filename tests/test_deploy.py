"""deploy/: the Flex Template metadata matches the CLI, and the scripts check their inputs, print
what they run, take versions from requirements.txt, and submit a job Dataflow's translation accepts.

No docker engine or gcloud runs here; the scripts' PRINT_ONLY=1 shows the exact commands instead.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys

import pytest

from pipelines.options import ConvertOptions

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
DEPLOY = os.path.join(ROOT, "deploy")
# A template launch always submits and never waits (pipelines/flex_template.py), so these are
# not template parameters.
NOT_TEMPLATE_PARAMETERS = {"dry_run_output", "no_wait"}
# A value each option accepts, for options with no default or choices to check the regex against.
EXAMPLES = {
    "input": "gs://my-bucket/PetImages",
    "output": "gs://my-bucket/tfrecords/pets",
    "label_pattern": r"^(cat|dog)\.",
    "manifest": "gs://my-bucket/labels.csv",
    "class_names": "cat,dog",
    "splits": "train=0.8,validation=0.2",
    "num_shards": "8",
    "resize": "224x224",
    "model_path": "gs://my-bucket/models/effnet",
    "read_threads": "1",
    "model_copies": "1",
    "model_input_size": "224x224",
    "feature_model": "torchvision:resnet50",
    "group_pattern": r"^(p\d+)_",
    "manifest_path_column": "id",
    "manifest_label_column": "breed",
    "extra_columns": "caption,score:float,tags:str_list",
    "annotations_path": "gs://my-bucket/coco/annotations/instances_train2017.json",
}


def metadata() -> dict:
    with open(os.path.join(DEPLOY, "metadata.json")) as handle:
        return json.load(handle)


def pinned(package: str) -> str:
    with open(os.path.join(ROOT, "requirements.txt")) as handle:
        for line in handle:
            match = re.match(rf"^{re.escape(package)}(\[[a-z,]*\])?==(\S+)", line)
            if match:
                return match.group(2)
    raise AssertionError(f"{package} is not pinned")


def script(name: str, *args: str, **env: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        ["bash", os.path.join(DEPLOY, name), *args],
        env={"PATH": os.environ["PATH"], "HOME": os.environ.get("HOME", "/tmp"), **env},
        capture_output=True,
        text=True,
        timeout=240,
    )


class Declared:
    """Records what ConvertOptions declares, through the same calls Beam's parser receives."""

    def __init__(self) -> None:
        self.options: dict[str, dict] = {}

    def add_argument_group(self, *args: object, **kwargs: object) -> Declared:
        return self

    def add_argument(self, name: str, **kwargs: object) -> None:
        self.options[name.removeprefix("--")] = kwargs


def declared_options() -> dict[str, dict]:
    declared = Declared()
    ConvertOptions._add_argparse_args(declared)  # type: ignore[arg-type]
    return declared.options


def test_template_lists_every_option_with_label_help_and_regex():
    options = {k: v for k, v in declared_options().items() if k not in NOT_TEMPLATE_PARAMETERS}
    parameters = {p["name"]: p for p in metadata()["parameters"]}
    assert set(parameters) == set(options)
    for name, parameter in parameters.items():
        assert parameter["label"] and parameter["helpText"], name
        regexes = [re.compile(r) for r in parameter["regexes"]]
        spec = options[name]
        if spec.get("choices"):
            good = [str(c) for c in spec["choices"]]
        elif spec.get("const") is True:  # a flag: the launcher passes --name=true|false
            good = ["true", "false"]
        else:
            good = [EXAMPLES.get(name, str(spec.get("default")))]
        for value in good:
            assert all(r.match(value) for r in regexes), (name, value)
            if name not in ("input", "output", "manifest"):  # the CLI also accepts local paths
                parsed = ConvertOptions([f"--{name}={value}"]).get_all_options(current_only=True)
                assert str(parsed[name]).lower() == value.lower(), (name, value)
        assert not all(r.match("") for r in regexes), name  # an empty value is never passed on
    assert not parameters["input"].get("isOptional") and not parameters["output"].get("isOptional")


def test_template_launcher_submits_without_waiting():
    with open(os.path.join(DEPLOY, "Dockerfile")) as handle:
        entry = re.search(r"FLEX_TEMPLATE_PYTHON_PY_FILE=/template/(\S+)", handle.read()).group(1)
    with open(os.path.join(ROOT, entry)) as handle:
        assert '"--no_wait=true"' in handle.read()


def test_image_takes_beam_and_tensorflow_versions_from_requirements():
    done = script("build_image.sh", "--gpu", PRINT_ONLY="1", IMAGE="us-docker.pkg.dev/p/r/img:1")
    assert done.returncode == 0, done.stderr
    assert f"--build-arg BEAM_VERSION={pinned('apache-beam')}" in done.stdout
    assert "--build-arg TENSORFLOW_EXTRAS=and-cuda" in done.stdout
    assert f"tensorflow[and-cuda]=={pinned('tensorflow')}" in done.stdout
    with open(os.path.join(DEPLOY, "Dockerfile")) as handle:
        dockerfile = handle.read()
    assert "FROM apache/beam_python3.11_sdk:${BEAM_VERSION}" in dockerfile
    assert not re.search(r"\b2\.\d+\.\d+\b", dockerfile)  # no version is stated a second time


@pytest.mark.parametrize("name", ["build_image.sh", "build_template.sh", "run_job.sh", "run_template.sh"])
def test_scripts_refuse_missing_inputs(name):
    done = script(name)
    assert done.returncode == 2
    assert done.stderr.startswith("error: set ")


def test_template_script_prints_the_gcloud_command():
    done = script(
        "build_template.sh", PRINT_ONLY="1", IMAGE="img", TEMPLATE="gs://my-bucket/templates/t.json"
    )
    assert done.returncode == 0, done.stderr
    assert "gcloud dataflow flex-template build gs://my-bucket/templates/t.json" in done.stdout
    assert "--metadata-file deploy/metadata.json" in done.stdout


def test_gpu_job_script_submits_a_job_dataflow_translation_accepts(pets_tree, tmp_path):
    """run_job.sh --gpu, with --dry_run appended: the checks pass and the job asks for an L4."""
    job_file = tmp_path / "job.json"
    done = script(
        "run_job.sh",
        "--gpu",
        "--",
        "--dry_run=true",
        f"--dry_run_output={job_file}",
        PYTHON=sys.executable,
        PROJECT="my-project",
        REGION="us-central1",
        BUCKET="gs://my-bucket",
        INPUT=str(pets_tree),
        OUTPUT="gs://my-bucket/out",
        IMAGE="us-docker.pkg.dev/my-project/beam/beam-tfrecord-gpu:1",
    )
    assert done.returncode == 0, done.stderr[-3000:]
    environment = json.loads(job_file.read_text())["environment"]
    assert environment["serviceOptions"] == [
        "worker_accelerator=type:nvidia-l4;count:1;install-nvidia-driver"
    ]
    pool = environment["workerPools"][0]
    assert pool["machineType"] == "g2-standard-4"
    assert pool["workerHarnessContainerImage"].endswith("beam-tfrecord-gpu:1")
    assert pool["autoscalingSettings"]["maxNumWorkers"] == 10
