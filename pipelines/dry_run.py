"""`--dry_run`: Beam's own Dataflow translation of the whole job, offline, written to files.

Beam's DataflowRunner honours TestOptions.dry_run: it applies its overrides, builds the portable
pipeline proto and the Dataflow `Job`, and returns before it creates an API client (credentials)
or stages anything (GCS). The `Job` it returns then holds only a name and a type, because the
job's `environment` (worker pool, container image, pipeline options, staged packages) is filled in
by the client on submission. `describe` builds that environment with the same Beam class, from the
options alone, so the file shows what a submission would send, less the staged files' contents.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass

import apache_beam as beam
from apache_beam.options.pipeline_options import GoogleCloudOptions, PipelineOptions, TestOptions
from apache_beam.portability import common_urns
from apache_beam.portability.api import beam_runner_api_pb2
from google.protobuf import json_format, text_format

from beam_tfrecord import compat
from beam_tfrecord.edges import JsonObject, ProtoMessage
from beam_tfrecord.plan.staging import StagedPlan, describe

__all__ = ["DryRun", "enable", "format_report", "job_description", "leaf_transforms", "translate"]

# Where Beam stages the pipeline proto on a real submission (runners/internal/names.py).
STAGED_PIPELINE_FILENAME = "pipeline.pb"


@dataclass(frozen=True)
class DryRun:
    """What a dry run wrote: the job JSON and the portable pipeline proto as text."""

    job_file: str
    pipeline_file: str
    job: JsonObject
    transforms: list[str]
    pipeline_bytes: int


def enable(options: PipelineOptions) -> None:
    """Set Beam's own dry-run switch; DataflowRunner.run_pipeline then stops before submitting."""
    options.view_as(TestOptions).dry_run = True


def pipeline_file_for(job_file: str) -> str:
    base = job_file[: -len(".json")] if job_file.endswith(".json") else job_file
    return base + ".pipeline.textproto"


def staged_names(proto: beam_runner_api_pb2.Pipeline) -> list[str]:
    """The file names a submission would stage for the workers (setup.py's sdist, the session)."""
    names = []
    for env in proto.components.environments.values():
        for dep in env.dependencies:
            if dep.role_urn == common_urns.artifact_roles.STAGING_TO.urn:
                payload = beam_runner_api_pb2.ArtifactStagingToRolePayload.FromString(dep.role_payload)
                names.append(payload.staged_name)
    return sorted(set(names))


def job_description(job: ProtoMessage) -> JsonObject:
    """The Dataflow Job message with the environment a submission would add, as a dict.

    `job.options` are the runner's copy, completed by it (job name, staging under the job name).
    """
    staging = job.options.view_as(GoogleCloudOptions).staging_location
    job.proto.environment = compat.dataflow_environment(
        job,
        staged_names(job.proto_pipeline),
        f"{staging.rstrip('/')}/{STAGED_PIPELINE_FILENAME}",
    )
    return json.loads(json_format.MessageToJson(type(job.proto).pb(job.proto)))


def leaf_transforms(proto: beam_runner_api_pb2.Pipeline) -> list[str]:
    """Unique names of the transforms that run (not the composites around them), sorted."""
    return sorted(t.unique_name for t in proto.components.transforms.values() if not t.subtransforms)


def translate(pipeline: beam.Pipeline, job_file: str) -> DryRun:
    """Run the Dataflow translation (no submission) and write the job JSON and pipeline proto."""
    result = pipeline.run()
    job = getattr(result, "job", None)
    if job is None:
        raise RuntimeError("the runner returned no translated job; is --runner=DataflowRunner set?")
    description = job_description(job)
    pipeline_file = pipeline_file_for(job_file)
    os.makedirs(os.path.dirname(os.path.abspath(job_file)), exist_ok=True)
    with open(job_file, "w") as handle:
        json.dump(description, handle, indent=2, sort_keys=True)
    with open(pipeline_file, "w") as handle:
        handle.write(text_format.MessageToString(job.proto_pipeline))
    return DryRun(
        job_file=job_file,
        pipeline_file=pipeline_file,
        job=description,
        transforms=leaf_transforms(job.proto_pipeline),
        pipeline_bytes=job.proto_pipeline.ByteSize(),
    )


def format_report(dry_run: DryRun, staged: StagedPlan) -> str:
    """A few lines for the terminal: what was translated and where the full description is."""
    pool = dry_run.job.get("environment", {}).get("workerPools", [{}])[0]
    return "\n".join(
        [
            f"dry run: job {dry_run.job.get('name')} translated for Dataflow, not submitted",
            f"  transforms         {len(dry_run.transforms)}",
            f"  pipeline proto     {dry_run.pipeline_bytes / 1e3:.1f} KB (the plan is staged as files)",
            f"  shard tasks        {describe(staged.shard_counts)}, spread over the workers by a Reshuffle",
            f"  container image    {pool.get('workerHarnessContainerImage', '?')}",
            f"  staged packages    {', '.join(p['name'] for p in pool.get('packages', [])) or 'none'}",
            f"  job JSON           {dry_run.job_file}",
            f"  pipeline (text)    {dry_run.pipeline_file}",
        ]
    )
