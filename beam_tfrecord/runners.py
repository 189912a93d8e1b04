"""Which Beam runner runs a conversion, with how many workers, and how many shard tasks that
calls for: parallelism comes from the runner, never from a pool of our own.

Locally that is Beam's FnApiRunner (what the DirectRunner picks for a batch job, named directly
so Beam 2.77 does not first try to download and start Prism) with `multi_processing` workers,
one per core. Beam's workers are as fast as the process pool this project used to keep inside
one DoFn, with less memory (benchmarks/NOTES.md#local-workers).

Every other runner is named as Beam names it: one of `StandardOptions.ALL_KNOWN_RUNNERS` by its
class name, or any runner class by its module path. A runner's own options (DaskRunner's
`--dask_client_address`, RenderRunner's `--render_output`) exist only once its module is
imported, so `load_runner` imports it before the options are parsed.
"""

from __future__ import annotations

import importlib
import os
import re
from collections.abc import Collection
from dataclasses import dataclass

from apache_beam.options.pipeline_options import (
    DirectOptions,
    PipelineOptions,
    StandardOptions,
    WorkerOptions,
)

from beam_tfrecord import storage
from beam_tfrecord.config_base import ConfigError

__all__ = [
    "DATAFLOW_RUNNERS",
    "LOCAL_RUNNER",
    "LOCAL_RUNNERS",
    "ONE_WORKER_CORES",
    "REFUSED_RUNNERS",
    "SMALL_RUN_BYTES",
    "UNLISTED_RUNNERS",
    "LocalWorkers",
    "check_runner",
    "deals_round_robin",
    "is_dataflow",
    "is_local",
    "load_runner",
    "parallelism",
    "read_threads",
    "runner_name",
    "runner_path",
    "use_local_runner",
]

LOCAL_RUNNER = "FnApiRunner"  # one of Beam's public runner names (StandardOptions.KNOWN_RUNNER_NAMES)
LOCAL_RUNNERS = (None, "DirectRunner", "direct", "SwitchingDirectRunner", "FnApiRunner")
DATAFLOW_RUNNERS = ("DataflowRunner", "dataflow", "TestDataflowRunner")
# Below this much input, one in-process worker with two read threads (decoding releases the
# GIL, so they overlap); above it, one worker process per core with one thread each. Beam's
# worker processes add a fixed cost to every run (each imports Beam to start, and stopping them
# is slow), which pays off only on larger runs (benchmarks/NOTES.md#local-workers).
SMALL_RUN_BYTES = 256 * 1024 * 1024
# On this many cores or fewer, one in-process worker with two read threads at any size: once a
# worker process's heap is frozen and the read threads take inputs in batches, the processes'
# fixed cost (imports, gRPC, exit) outweighs the GIL the threads share. With more cores one
# interpreter caps what it can use (the work outside the decode holds the GIL), so bigger
# machines keep one worker process per core (benchmarks/NOTES.md#local-workers).
ONE_WORKER_CORES = 2
# Dataflow's workers when the options do not say (autoscaling starts small), and vCPUs of a
# machine type whose name does not say (n1-standard-1, Dataflow's batch default).
DEFAULT_DATAFLOW_WORKERS = 8
_VCPUS = re.compile(r"-(\d+)$")
# Runners Beam ships without listing them in StandardOptions.ALL_KNOWN_RUNNERS, so that Beam
# resolves them only by module path (apache/beam#24578 asks for Dask's to be listed).
UNLISTED_RUNNERS = ("apache_beam.runners.dask.dask_runner.DaskRunner",)
# Runners this pipeline cannot run on, by class path, and why (the one line a user gets).
REFUSED_RUNNERS = {
    "apache_beam.runners.dask.dask_runner.DaskRunner": (
        "cannot run this pipeline in Beam 2.77: its ParDo gives each consumer of one of a step's "
        "outputs the elements of all of them (apply_dofn_to_bundle in "
        "apache_beam/runners/dask/transform_evaluator.py), so records and rejects mix; use the "
        "DirectRunner, Dataflow, Flink or Spark"
    ),
}


def runner_path(name: str) -> str | None:
    """The module path of the runner class `name` names, resolved as Beam resolves it: a class
    name from `StandardOptions.ALL_KNOWN_RUNNERS` (any case, "Runner" optional) or a module path
    as it is; also the runners Beam ships unlisted (UNLISTED_RUNNERS). None for any other name."""
    listed = (*StandardOptions.ALL_KNOWN_RUNNERS, *UNLISTED_RUNNERS)
    known = {path.rsplit(".", 1)[-1].lower(): path for path in listed}
    lowered = name.lower()
    found = known.get(lowered) or known.get(lowered + "runner")
    if found is not None:
        return found
    return name if "." in name.strip(".") else None


def load_runner(name: str | None) -> str | None:
    """Import the module of the runner `name` names (None: Beam's default), so that the
    PipelineOptions it declares are known when the options are parsed; its class path.

    Raises ConfigError("runner", ...) when `name` names no runner that can be loaded. A runner
    in REFUSED_RUNNERS is not refused here but by `check_runner`, after its options are parsed;
    it passes even when its module cannot be imported, so that the refusal is what the user sees.
    """
    if name is None:
        return None
    path = runner_path(name)
    if path is None:
        names = ", ".join(StandardOptions.KNOWN_RUNNER_NAMES)
        raise ConfigError(
            "runner",
            f"{name} is not a runner Beam knows: name one of {names}, or give a runner "
            "class's module path (package.module.ClassName)",
        )
    module_name, _, class_name = path.rpartition(".")
    try:
        module = importlib.import_module(module_name)
    except ImportError as error:
        if path in REFUSED_RUNNERS:
            return path
        raise ConfigError("runner", f"{name}: its module {module_name} cannot be imported: {error}") from None
    if not isinstance(getattr(module, class_name, None), type):
        raise ConfigError("runner", f"{name}: {module_name} has no runner class {class_name}")
    return path


def check_runner(path: str | None) -> None:
    """Raise ConfigError("runner", why) for a runner this pipeline cannot run on."""
    if path in REFUSED_RUNNERS:
        raise ConfigError("runner", f"{path.rsplit('.', 1)[-1]} {REFUSED_RUNNERS[path]}")


def runner_name(options: PipelineOptions) -> str | None:
    runner = options.view_as(StandardOptions).runner
    return runner if runner is None or isinstance(runner, str) else type(runner).__name__


def is_local(options: PipelineOptions) -> bool:
    return runner_name(options) in LOCAL_RUNNERS


def is_dataflow(options: PipelineOptions) -> bool:
    return runner_name(options) in DATAFLOW_RUNNERS


@dataclass(frozen=True)
class LocalWorkers:
    """How a local run executes: Beam's running mode and worker count."""

    mode: str  # in_memory | multi_processing | multi_threading
    workers: int


def use_local_runner(
    options: PipelineOptions,
    input_bytes: int,
    given: Collection[str] = (),
    cores: int | None = None,
    features: bool = False,
) -> LocalWorkers:
    """Point `options` at the local runner and choose its workers, unless the user chose them.

    `given` holds the option names the user passed (`direct_num_workers`, `direct_running_mode`);
    those are kept. Otherwise: one worker process per core, or one in-process worker below
    SMALL_RUN_BYTES of input or on ONE_WORKER_CORES cores or fewer (see there), unless the run
    feeds a model (`features`): its model's work, not the processes' fixed cost, decides there,
    and two processes ran a CPU model faster than one (benchmarks/NOTES.md#feature-model).
    """
    options.view_as(StandardOptions).runner = LOCAL_RUNNER
    direct = options.view_as(DirectOptions)
    cores = cores or os.cpu_count() or 1
    if "direct_num_workers" not in given:
        if "direct_running_mode" in given:  # a mode asked for: in_memory has one worker, the others cores
            direct.direct_num_workers = 1 if direct.direct_running_mode == "in_memory" else cores
        else:
            few_cores = cores <= ONE_WORKER_CORES and not features
            small = input_bytes < SMALL_RUN_BYTES or few_cores
            direct.direct_num_workers = 1 if small else cores
    elif direct.direct_num_workers == 0:
        direct.direct_num_workers = cores  # Beam's own meaning of 0
    if "direct_running_mode" not in given:
        direct.direct_running_mode = "multi_processing" if direct.direct_num_workers > 1 else "in_memory"
    return LocalWorkers(direct.direct_running_mode, direct.direct_num_workers)


def read_threads(input_path: str, workers: int | None) -> int:
    """Threads that read and decode inside one shard task, when the user does not say.

    gs:// input: 8, as each read waits tens of milliseconds on the network. Local input: 2 for
    one in-process worker (the bundle's own thread and one more: one decodes, with the GIL
    released, while the other runs Python), 1 per worker process: the processes already keep
    every core busy, and a pool would only add a hand-off per image
    (benchmarks/NOTES.md#local-workers)."""
    if storage.is_remote(input_path):
        return 8
    return 2 if (workers or 1) == 1 else 1


def _machine_vcpus(machine_type: str | None) -> int:
    match = _VCPUS.search(machine_type or "")
    return int(match.group(1)) if match else 1


def deals_round_robin(options: PipelineOptions) -> bool:
    """Whether the runner hands shard tasks to its workers in turn, once (the local runner),
    rather than rebalancing work as it goes (Dataflow)."""
    return is_local(options)


def parallelism(options: PipelineOptions) -> int:
    """How many shard tasks the runner can run at once, for planning the shard count.

    Local: its workers. Dataflow: workers (num_workers, else max_num_workers, else 8) times the
    machine type's vCPUs (one SDK process per vCPU); shards never shrink below a quarter of the
    target size for it (sharding.shard_count). Other runners: 1 (the shard size decides; pass
    num_shards to spread a small dataset over a Flink or Spark cluster).
    """
    if is_local(options):
        direct = options.view_as(DirectOptions)
        return max(1, direct.direct_num_workers or 1)
    if is_dataflow(options):
        workers = options.view_as(WorkerOptions)
        count = workers.num_workers or workers.max_num_workers or DEFAULT_DATAFLOW_WORKERS
        return count * _machine_vcpus(workers.machine_type)
    return 1
