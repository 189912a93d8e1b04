"""Reading, validating and building records in worker processes, for local runs.

Threads alone leave much of two cores idle: about half of each image's work is Python that holds
the GIL (Pillow's header parsing, record building), and every read or decode that releases it
waits to take it back. On 2 cores, 8,000 images: 4 threads in one process 1,550 images/s,
2 processes 2,590/s. The processes fork from one server that has already imported this module's
dependencies (multiprocessing's "forkserver" with a preload), so starting them costs no imports
and forks no Beam threads; they get paths and return serialized records, never share state.
"""

from __future__ import annotations

import functools
import multiprocessing
from collections.abc import Iterator, Sequence
from concurrent.futures import ProcessPoolExecutor
from multiprocessing import forkserver

from beam_tfrecord.images import ImageOptions
from beam_tfrecord.plan import PlannedInput, RejectLine
from beam_tfrecord.records import ConvertedRecord, convert_input
from beam_tfrecord.shardwriter import ordered_map, ordered_submit

PRELOAD = ["beam_tfrecord.decodepool"]
CHUNK = 32  # inputs per task sent to a process: amortizes the pickling round trip


def _context() -> multiprocessing.context.BaseContext:
    context = multiprocessing.get_context("forkserver")
    context.set_forkserver_preload(PRELOAD)
    return context


def start_server() -> None:
    """Start the fork server now (it imports Beam, Pillow and NumPy, about 1.5 s), so that runs
    overlap it with listing and planning instead of waiting for it at the first shard."""
    _context()
    forkserver.ensure_running()


def convert_chunk(
    chunk: Sequence[PlannedInput], schema: str, image_options: ImageOptions, threads: int
) -> list[ConvertedRecord | RejectLine]:
    """Runs in a worker process: a few threads there still hide file-read latency."""
    convert = functools.partial(convert_input, schema=schema, image_options=image_options)
    return list(ordered_map(convert, chunk, threads))


class DecodePool:
    """A pool of worker processes converting inputs in order; one per shard-writing DoFn."""

    def __init__(self, processes: int, schema: str, image_options: ImageOptions, threads: int) -> None:
        self.processes = processes
        self._convert = functools.partial(
            convert_chunk, schema=schema, image_options=image_options, threads=threads
        )
        self._pool = ProcessPoolExecutor(processes, mp_context=_context())

    def map(self, inputs: Sequence[PlannedInput]) -> Iterator[ConvertedRecord | RejectLine]:
        chunks = [inputs[start : start + CHUNK] for start in range(0, len(inputs), CHUNK)]
        for converted in ordered_submit(self._pool, self._convert, chunks, window=4 * self.processes):
            yield from converted

    def close(self) -> None:
        self._pool.shutdown(wait=True, cancel_futures=True)
