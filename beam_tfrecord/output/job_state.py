"""Ask a remote job's runner whether the job still runs, so a claim handed to a job is judged by
the job, not by time: a job that failed or was cancelled frees its output at once, and one that
runs keeps it however long no launcher renews the claim.

Two runners can be asked, through their public APIs: a portable job service (Flink, Spark, Beam's
local job service: `JobService.GetState` over gRPC, at the address the run was given), and
Dataflow (google-cloud-dataflow-client's `JobsV1Beta3Client`: `get_job` by id, or, for a job
whose id the launcher never learned, `list_jobs` of the project's active jobs by its name, which
Dataflow keeps unique among them). Every other runner, or one that does not answer in time, says
nothing (None), and the claim's other rules decide.
"""

from __future__ import annotations

import dataclasses
import logging

from apache_beam.options.pipeline_options import GoogleCloudOptions, PipelineOptions, PortableOptions

from beam_tfrecord.edges import CloudObject, ProtoMessage
from beam_tfrecord.output.claim_record import ClaimRecord
from beam_tfrecord.runners import is_dataflow, runner_name

__all__ = ["ENDED", "NOT_ACTIVE", "JobState", "ask", "job_facts"]

_LOGGER = logging.getLogger(__name__)

# The states after which a job writes nothing more, in both APIs' words (without Dataflow's
# `JOB_STATE_` prefix); STOPPED is not one (paused, or not yet started, in both). NOT_ACTIVE:
# Dataflow runs no active job of the claim's name (none was created, or it ended).
NOT_ACTIVE = "NOT_ACTIVE"
ENDED = frozenset({"DONE", "FAILED", "CANCELLED", "UPDATED", "DRAINED", NOT_ACTIVE})
_ASK_TIMEOUT_S = 15.0


@dataclasses.dataclass(frozen=True)
class JobState:
    """What a runner said of a job: its state and who said it (for the line a user reads)."""

    state: str
    source: str
    job_id: str | None = None

    @property
    def ended(self) -> bool:
        return self.state in ENDED


def job_facts(options: PipelineOptions) -> dict[str, str]:
    """What a claim records of a remote run's runner, so a later run can ask about its job."""
    facts = {"runner": runner_name(options) or ""}
    if is_dataflow(options):
        cloud = options.view_as(GoogleCloudOptions)
        facts.update(job_name=cloud.job_name or "", project=cloud.project or "", region=cloud.region or "")
    else:
        endpoint = options.view_as(PortableOptions).job_endpoint
        if endpoint and endpoint != "embed":
            facts["job_endpoint"] = endpoint
    return {key: value for key, value in facts.items() if value}


def ask(record: ClaimRecord, dataflow_transport: CloudObject = None) -> JobState | None:
    """The state of the job `record` names, from its runner; None when it cannot be asked."""
    try:
        if record.job_endpoint and record.job_id:
            return _portable(record.job_endpoint, record.job_id)
        if record.project and record.region and (record.job_id or record.job_name):
            return _dataflow(record, dataflow_transport)
    except Exception as error:  # unreachable, no credentials, no such job: the runner says nothing
        _LOGGER.info("could not ask the runner about job %s: %s", record.job_id or record.job_name, error)
    return None


def _portable(endpoint: str, job_id: str) -> JobState:
    import grpc
    from apache_beam.portability.api import beam_job_api_pb2, beam_job_api_pb2_grpc

    with grpc.insecure_channel(endpoint) as channel:
        stub = beam_job_api_pb2_grpc.JobServiceStub(channel)
        answer = stub.GetState(beam_job_api_pb2.GetJobStateRequest(job_id=job_id), timeout=_ASK_TIMEOUT_S)
    state = beam_job_api_pb2.JobState.Enum.Name(answer.state)
    return JobState(state, f"the job service at {endpoint}", job_id)


def _dataflow(record: ClaimRecord, transport: CloudObject) -> JobState | None:
    from google.cloud import dataflow_v1beta3

    client = dataflow_v1beta3.JobsV1Beta3Client(**({"transport": transport} if transport else {}))
    where = f"Dataflow (project {record.project}, region {record.region})"
    if record.job_id:
        job = client.get_job(
            request=dataflow_v1beta3.GetJobRequest(
                project_id=record.project, location=record.region, job_id=record.job_id
            ),
            timeout=_ASK_TIMEOUT_S,
        )
        return JobState(_dataflow_state(job.current_state), where, record.job_id)
    active = client.list_jobs(
        request=dataflow_v1beta3.ListJobsRequest(
            project_id=record.project,
            location=record.region,
            filter=dataflow_v1beta3.ListJobsRequest.Filter.ACTIVE,
        ),
        timeout=_ASK_TIMEOUT_S,
    )
    for job in active:
        if job.name == record.job_name:
            return JobState(_dataflow_state(job.current_state), where, job.id)
    return JobState(NOT_ACTIVE, f"{where}, which runs no active job named {record.job_name}")


def _dataflow_state(state: ProtoMessage) -> str:
    return state.name.removeprefix("JOB_STATE_")
