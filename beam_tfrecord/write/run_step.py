"""The DoFn every step of a run derives from: it holds the run's config and its staged plan, and
prepares the worker process it runs in once. The write stage's sinks and the assembly's steps
(transforms, pipeline) share it.
"""

from __future__ import annotations

import gc
import logging

import apache_beam as beam

from beam_tfrecord import compat, gcs, write_failures
from beam_tfrecord.plan.staging import StagedPlan
from beam_tfrecord.write.output_config import ConvertConfig

__all__ = ["RunStepFn", "freeze_imported_heap"]


class RunStepFn(beam.DoFn):
    """A step of a run, holding the run's config and its staged plan (not loose values).

    `setup` prepares the worker process that runs it, once: the run's storage settings for the
    requests Beam's own filesystem makes there (it takes no per-call limit, so the limit is the
    process's: gcs.use_settings), a write failure's traceback, which Beam logs where the DoFn
    failed, kept quiet (the command says it in one line), and Beam's known noise (compat) kept
    off the terminal; and the process's heap frozen once (`freeze_imported_heap`). Nothing happens
    on import."""

    def __init__(self, config: ConvertConfig, staged: StagedPlan) -> None:
        self.config = config
        self.staged = staged

    def setup(self) -> None:
        gcs.use_settings(self.config.gcs)
        write_failures.quiet_write_failures()
        compat.quiet_known_beam_noise(logging.getLogger())
        freeze_imported_heap()


_HEAP_FROZEN = False


def freeze_imported_heap() -> None:
    """Move every object the process holds now to the collector's permanent generation, once.

    Why: a worker's heap at its first step is its imports (Beam, its gRPC and protobuf modules,
    our modules) and Beam's worker state: hundreds of thousands of long-lived objects that each
    full collection during the run scanned again, and that the interpreter's exit searched once
    more; the records' elements make full collections frequent. Frozen, they are skipped (about
    0.7 s of CPU per local worker process).

    Why it is safe: freezing frees nothing and moves nothing; it only stops the collector looking
    for cycles among these objects. What the steps make afterwards (every element, every
    buffer) is collected as before. Garbage made before the call (an import's leftover cycle)
    would stay until the process ends: a bounded, one-time amount, as in any process that calls
    `gc.freeze` before forking. Reference counting frees what it always freed. Once per process,
    so a process that runs many pipelines (tests) freezes only what it held at the first."""
    global _HEAP_FROZEN
    if not _HEAP_FROZEN:
        _HEAP_FROZEN = True
        gc.freeze()
