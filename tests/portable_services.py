"""Beam's local job service and SDK worker pool, each in its own process on 127.0.0.1: the
portable protocol of Dataflow Runner v2, Flink and Spark, for tests/test_portable.py and
benchmarks/detection_run.py."""

from __future__ import annotations

import contextlib
import os
import socket
import subprocess
import sys
import time
from collections.abc import Iterator

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def _wait_for_port(port: int, process: subprocess.Popen, what: str, logs: str) -> None:
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise RuntimeError(f"{what} exited with {process.returncode} (its log is in {logs})")
        with socket.socket() as probe:
            if probe.connect_ex(("127.0.0.1", port)) == 0:
                return
        time.sleep(0.2)
    raise RuntimeError(f"{what} never listened on {port} (its log is in {logs})")


@contextlib.contextmanager
def portable_services(logs: str) -> Iterator[tuple[list[subprocess.Popen], list[str]]]:
    """Start both, logging into the folder `logs`; yields (their processes, the options that point
    a run at them). The pool starts workers with `python` from PATH, so PATH leads with this
    interpreter's folder."""
    job_port, pool_port = free_port(), free_port()
    path = f"{os.path.dirname(sys.executable)}{os.pathsep}{os.environ.get('PATH', '')}"
    env = {**os.environ, "PATH": path}
    job_service = "apache_beam.runners.portability.local_job_service_main"
    pool = "apache_beam.runners.worker.worker_pool_main"
    services = [
        ([sys.executable, "-m", job_service, "-p", str(job_port)], job_port, "job service"),
        ([sys.executable, "-m", pool, "--service_port", str(pool_port)], pool_port, "worker pool"),
    ]
    started: list[tuple[subprocess.Popen, object]] = []
    try:
        for command, port, what in services:
            log = open(os.path.join(logs, f"{port}.log"), "wb")  # noqa: SIM115  (closed with the process)
            process = subprocess.Popen(command, cwd=REPO, env=env, stdout=log, stderr=subprocess.STDOUT)
            started.append((process, log))
            _wait_for_port(port, process, what, logs)
        yield (
            [process for process, _ in started],
            [
                "--runner=PortableRunner",
                f"--job_endpoint=127.0.0.1:{job_port}",
                "--environment_type=EXTERNAL",
                f"--environment_config=127.0.0.1:{pool_port}",
            ],
        )
    finally:
        for process, log in started:
            process.kill()
            process.wait()
            log.close()  # type: ignore[attr-defined]
