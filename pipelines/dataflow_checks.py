"""Checks of a remote run's options before anything is built or submitted.

Dataflow reports a local path, a mistyped bucket or a missing region late and far away: after
staging, in a worker log, or (for a bad temp and staging location) after Beam has spent two minutes
trying to create a default bucket. These checks read the options only, touch no network, and name
the option to fix, one line per problem.
"""

from __future__ import annotations

import hashlib
import logging
import os
import re

from apache_beam.options.pipeline_options import (
    GoogleCloudOptions,
    PipelineOptions,
    SetupOptions,
    WorkerOptions,
)

from beam_tfrecord import storage
from beam_tfrecord.runners import is_dataflow, runner_name
from pipelines.options import CommandSettings, UsageError

_LOGGER = logging.getLogger(__name__)

__all__ = [
    "check_accelerator",
    "check_dataflow",
    "check_dry_run_input",
    "check_model_path",
    "check_remote_run",
]

# The same rules as Beam's PipelineOptionsValidator and Google Cloud's naming rules; checking them
# here keeps Beam from falling back to a default bucket over the network.
GCS_PATH = re.compile(r"^gs://(?P<bucket>[a-z0-9][-_.a-z0-9]{1,220}[a-z0-9])(?P<object>/[^\r\n]*)?$")
PROJECT_ID = re.compile(r"^[a-z][-a-z0-9:.]{4,61}[a-z0-9]$")
REGION = re.compile(r"^[a-z]+-[a-z]+[0-9]+$")
JOB_NAME = re.compile(r"^[a-z]([-a-z0-9]*[a-z0-9])?$")
# Machine families that carry each GPU type on Compute Engine.
GPU_MACHINE_FAMILIES = {
    "nvidia-l4": "g2-",
    "nvidia-tesla-a100": "a2-",
    "nvidia-a100-80gb": "a2-",
    "nvidia-h100-80gb": "a3-",
}
GPU_EXAMPLE = "--dataflow_service_options='worker_accelerator=type:nvidia-l4;count:1;install-nvidia-driver'"


def check_gcs_path(option: str, value: str | None, required: bool = True) -> list[str]:
    """One message when `value` is not a gs://bucket/path a Dataflow job can use, else none."""
    if not value:
        return [f"{option} is required on Dataflow, e.g. {option}=gs://my-bucket/tmp"] if required else []
    match = GCS_PATH.match(value)
    if not match:
        return [f"{option} {value} is not a gs://bucket/path (Dataflow workers read and write only gs://)"]
    if not match.group("object") or match.group("object") == "/":
        return [f"{option} {value} names a bucket only; add a folder, e.g. {value.rstrip('/')}/tmp"]
    return []


def check_model_path(path: str | None, option: str = "--model_path") -> list[str]:
    """A model must be where every worker can read it: gs:// or https://, not this machine's disk.

    Applied to --model_path; a bare name (e.g. a Keras application) is resolved on
    the worker and passes.
    """
    if not path:
        return []
    scheme = storage.split_scheme(path)[0]
    if scheme == "gs":
        return check_gcs_path(option, path)
    if scheme in ("https", "http"):
        return []
    if scheme:
        return [f"{option} {path}: Dataflow workers read models from gs:// or https://, not {scheme}"]
    if os.sep in path or os.path.exists(path):
        return [
            f"{option} {path} is on this machine, which Dataflow workers cannot read; copy it first "
            f"(gcloud storage cp -r {path} gs://my-bucket/models/) and pass the gs:// path"
        ]
    return []


def check_accelerator(options: PipelineOptions) -> list[str]:
    """GPU workers need a matching machine family, the NVIDIA driver and the GPU image."""
    service_options = options.view_as(GoogleCloudOptions).dataflow_service_options or []
    accelerators = [o for o in service_options if o.startswith("worker_accelerator=")]
    if not accelerators:
        return []
    settings = dict(
        part.split(":", 1) if ":" in part else (part, "")
        for part in accelerators[0].split("=", 1)[1].split(";")
    )
    problems = []
    gpu = settings.get("type", "")
    if not gpu:
        problems.append(f"worker_accelerator needs a type, e.g. {GPU_EXAMPLE}")
    if "install-nvidia-driver" not in settings:
        problems.append(f"worker_accelerator needs install-nvidia-driver, e.g. {GPU_EXAMPLE}")
    machine_type = options.view_as(WorkerOptions).machine_type
    family = GPU_MACHINE_FAMILIES.get(gpu, "n1-")
    if not machine_type or not machine_type.startswith(family):
        problems.append(
            f"{gpu or 'a GPU'} runs on {family}* machine types; pass e.g. --machine_type={family}standard-4"
            + (f" (not {machine_type})" if machine_type else "")
        )
    if not options.view_as(WorkerOptions).sdk_container_image:
        problems.append(
            "GPU workers need CUDA-enabled TensorFlow: pass --sdk_container_image with the image "
            "that deploy/build_image.sh --gpu builds"
        )
    return problems


def check_dataflow(settings: CommandSettings, options: PipelineOptions) -> list[str]:
    """Every problem that would make a Dataflow job fail to start or fail on its workers."""
    cloud = options.view_as(GoogleCloudOptions)
    problems = []
    if not cloud.project:
        problems.append("--project is required on Dataflow (the Google Cloud project id)")
    elif not PROJECT_ID.match(cloud.project) or cloud.project.isdigit():
        problems.append(f"--project {cloud.project} is not a project id (lowercase, e.g. my-project-123)")
    if not cloud.region:
        problems.append("--region is required on Dataflow, e.g. --region=us-central1")
    elif not REGION.match(cloud.region):
        problems.append(f"--region {cloud.region} is not a region, e.g. us-central1")
    if cloud.job_name and not JOB_NAME.match(cloud.job_name):
        problems.append(f"--job_name {cloud.job_name}: use lowercase letters, digits and '-'")
    problems += check_gcs_path("--temp_location", cloud.temp_location)
    problems += check_gcs_path("--staging_location", cloud.staging_location, required=False)
    problems += check_gcs_path("--output", settings.config.output)
    source_input = settings.source.input
    if not settings.dry_run and not storage.is_gcs(source_input):
        problems.append(f"--input {source_input} is on this machine; Dataflow workers read only gs:// inputs")
    setup = options.view_as(SetupOptions)
    if not setup.setup_file and not options.view_as(WorkerOptions).sdk_container_image:
        problems.append(
            "workers need this project's code: pass --setup_file=./setup.py or --sdk_container_image "
            "with the image deploy/build_image.sh builds"
        )
    features = settings.config.features
    if features is not None:
        problems += check_model_path(features.model_path)
        if features.feature_model and features.model_weights not in ("imagenet", "none"):
            problems += check_model_path(features.model_weights, "--model_weights")
    problems += check_accelerator(options)
    return problems


def check_dry_run_input(input_spec: str) -> None:
    """A dry run plans from a listing (the shard counts shape the graph), so its input must be
    listable offline: a gs:// listing would need credentials and network, which a dry run must
    not (Beam's GCS client retries for minutes). The manifest is checked where it is loaded."""
    if storage.is_remote(input_spec):
        raise UsageError(
            f"--input {input_spec}: a dry run plans from a listing, and {input_spec} cannot be listed "
            "offline; pass a local --input with the same layout (a sample is enough)"
        )


def check_portable(settings: CommandSettings, options: PipelineOptions) -> list[str]:
    """Flink, Spark and other portable runners: local paths work only on a one-machine cluster."""
    return [
        f"{option} {path} is a local path; workers of --runner={runner_name(options)} must all see it "
        "(a shared filesystem or gs://)"
        for option, path in (("--input", settings.source.input), ("--output", settings.config.output))
        if not storage.is_remote(path)
    ]


def output_job_name(output: str) -> str:
    """The Dataflow job name a run into `output` gets unless --job_name says otherwise:
    `beam-tfrecord-<the output's last folders>-<8 hex of its whole path>`. Dataflow refuses to
    start a job while an active one of the same name runs in the project and region, so two
    jobs never write one output at once, whatever happens to the launchers' claim."""
    words = re.sub(r"[^a-z0-9]+", "-", storage.split_scheme(output)[1].lower()).strip("-")
    tail = words[-40:].lstrip("-") or "output"
    digest = hashlib.sha256(output.rstrip("/").encode()).hexdigest()[:8]
    return f"beam-tfrecord-{tail}-{digest}"


def name_the_job(options: PipelineOptions, output: str, given: set[str]) -> None:
    """A Dataflow run without --job_name is named after its output (`output_job_name`)."""
    if is_dataflow(options) and "job_name" not in given:
        options.view_as(GoogleCloudOptions).job_name = output_job_name(output)


def check_remote_run(settings: CommandSettings, options: PipelineOptions, local: bool) -> None:
    """Raise UsageError listing every problem of a Dataflow run; log warnings for other runners."""
    runner = runner_name(options)
    if local:
        if settings.dry_run:
            raise UsageError("--dry_run translates a Dataflow job: add --runner=DataflowRunner")
        return
    if is_dataflow(options):
        problems = check_dataflow(settings, options)
        if problems:
            raise UsageError("\n".join(["options not valid for Dataflow:", *(f"  {p}" for p in problems)]))
        return
    if settings.dry_run:
        raise UsageError(f"--dry_run translates a Dataflow job, not one for --runner={runner}")
    for warning in check_portable(settings, options):
        _LOGGER.warning(warning)
