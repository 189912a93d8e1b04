"""A claim handed to a remote job is judged by asking the job's runner
(beam_tfrecord/output/job_state.py). The portable job service is asked for real in
tests/test_portable.py; Dataflow cannot run here, so its API is served on 127.0.0.1 by a gRPC
server of the same service name and messages (google-cloud-dataflow-client's own types), and the
real client asks it over gRPC."""

from __future__ import annotations

import dataclasses
import socket
import time
from concurrent import futures

import grpc
import pytest
from google.cloud import dataflow_v1beta3
from google.cloud.dataflow_v1beta3.services.jobs_v1_beta3.transports import JobsV1Beta3GrpcTransport

from beam_tfrecord.output import job_state
from beam_tfrecord.output.claim_record import ClaimRecord

State = dataflow_v1beta3.JobState


@pytest.fixture
def dataflow():
    """Jobs as Dataflow keeps them, served as JobsV1Beta3's GetJob and ListJobs; yields (the
    jobs by id, the requests seen, a transport that reaches it)."""
    jobs: dict[str, dataflow_v1beta3.Job] = {}
    seen: list[object] = []

    def get_job(request, context):
        seen.append(request)
        if request.job_id not in jobs:
            context.abort(grpc.StatusCode.NOT_FOUND, "no such job")
        return jobs[request.job_id]

    def list_jobs(request, context):
        seen.append(request)
        active = [j for j in jobs.values() if j.current_state == State.JOB_STATE_RUNNING]
        return dataflow_v1beta3.ListJobsResponse(jobs=active)

    def unary(method, request_type, response_type):
        return grpc.unary_unary_rpc_method_handler(
            method, request_deserializer=request_type.deserialize, response_serializer=response_type.serialize
        )

    handler = grpc.method_handlers_generic_handler(
        "google.dataflow.v1beta3.JobsV1Beta3",
        {
            "GetJob": unary(get_job, dataflow_v1beta3.GetJobRequest, dataflow_v1beta3.Job),
            "ListJobs": unary(list_jobs, dataflow_v1beta3.ListJobsRequest, dataflow_v1beta3.ListJobsResponse),
        },
    )
    server = grpc.server(futures.ThreadPoolExecutor(max_workers=2))
    server.add_generic_rpc_handlers([handler])
    port = server.add_insecure_port("127.0.0.1:0")
    server.start()
    channel = grpc.insecure_channel(f"127.0.0.1:{port}")
    try:
        yield jobs, seen, JobsV1Beta3GrpcTransport(channel=channel)
    finally:
        channel.close()
        server.stop(None)


def dataflow_claim(**fields) -> ClaimRecord:
    now = time.time()
    record = ClaimRecord("r1", "a-launcher", 7, now, now, detached=True, runner="DataflowRunner")
    return dataclasses.replace(record, **{"project": "proj", "region": "europe-west1", **fields})


def test_a_dataflow_job_is_asked_by_its_id_in_its_project_and_region(dataflow):
    jobs, seen, transport = dataflow
    jobs["2026-11-28_01"] = dataflow_v1beta3.Job(id="2026-11-28_01", current_state=State.JOB_STATE_RUNNING)
    state = job_state.ask(dataflow_claim(job_id="2026-11-28_01"), transport)
    assert (state.state, state.ended) == ("RUNNING", False)
    assert state.source == "Dataflow (project proj, region europe-west1)"
    (request,) = seen
    assert (request.project_id, request.location, request.job_id) == ("proj", "europe-west1", "2026-11-28_01")
    jobs["2026-11-28_01"].current_state = State.JOB_STATE_CANCELLED
    assert job_state.ask(dataflow_claim(job_id="2026-11-28_01"), transport).ended


def test_a_job_whose_id_was_never_learned_is_found_by_its_name_among_the_active_ones(dataflow):
    """Ctrl-C while submitting: the claim knows the job's name (one per output), not its id.
    Dataflow keeps names unique among active jobs, so an active one of that name holds it, and
    none means no job of it runs."""
    jobs, seen, transport = dataflow
    jobs["j1"] = dataflow_v1beta3.Job(
        id="j1", name="beam-tfrecord-out-1a2b3c4d", current_state=State.JOB_STATE_RUNNING
    )
    claim = dataflow_claim(job_name="beam-tfrecord-out-1a2b3c4d")
    state = job_state.ask(claim, transport)
    assert (state.state, state.job_id, state.ended) == ("RUNNING", "j1", False)
    assert seen[0].filter == dataflow_v1beta3.ListJobsRequest.Filter.ACTIVE
    jobs["j1"].current_state = State.JOB_STATE_FAILED
    state = job_state.ask(claim, transport)
    assert state.ended and "runs no active job named beam-tfrecord-out-1a2b3c4d" in state.source


def test_a_runner_that_cannot_be_asked_says_nothing(dataflow):
    """No such job (a wrong project), or no job service listening: None, and the claim's other
    rules decide (a job's summary.json)."""
    _, _, transport = dataflow
    assert job_state.ask(dataflow_claim(job_id="missing"), transport) is None
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        closed = f"127.0.0.1:{probe.getsockname()[1]}"
    started = time.monotonic()
    assert job_state.ask(dataflow_claim(project=None, job_id="j", job_endpoint=closed)) is None
    assert time.monotonic() - started < 20
    assert job_state.ask(ClaimRecord("r", "h", 1, 0.0, 0.0, job_id="j")) is None  # no runner named
