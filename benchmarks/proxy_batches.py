"""What a batch costs to send to a shared model: Beam's `MultiProcessShared` (what RunInference
uses for `model_copies`) holds a stand-in model in another process, and this process calls it with
the batch as this project's handler sends it (uint8, NHWC, as decoded) and as Beam's own ONNX and
PyTorch handlers would (float32, normalised, NCHW: their shared object is the session or module,
so every caller prepares its batch first). The stand-in does almost nothing, so the time is the
proxy's: pickling, the local socket, unpickling. Medians of `--calls` calls after a warm-up.

    .venv/bin/python benchmarks/proxy_batches.py --batch_sizes 32,128 --calls 30
    .venv/bin/python benchmarks/proxy_batches.py --batch_sizes 8 --calls 5    # a quick check
"""

from __future__ import annotations

import argparse
import statistics
import time
import uuid

import numpy as np
from apache_beam.utils.multi_process_shared import MultiProcessShared


class StandIn:
    """A model that reads its input and returns a pooled feature per image, as a backbone's
    pooled output is small beside its input."""

    def __call__(self, batch: np.ndarray) -> np.ndarray:
        return np.zeros((batch.shape[0], 1280), np.float32) + float(batch.flat[0])


def timed_calls(model, batch: np.ndarray, calls: int) -> float:
    """The median seconds of one call."""
    model(batch)  # warm-up: the connection and the first allocation
    times = []
    for _ in range(calls):
        start = time.perf_counter()
        model(batch)
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--batch_sizes", default="32,128")
    parser.add_argument("--size", type=int, default=224)
    parser.add_argument("--calls", type=int, default=30)
    args = parser.parse_args()
    shared = MultiProcessShared(StandIn, tag=f"proxy-batches-{uuid.uuid4().hex}", always_proxy=True)
    model = shared.acquire()
    rng = np.random.default_rng(0)
    print("| batch | sent as | MB per batch | ms per call | us per image |")
    print("|---|---|---|---|---|")
    try:
        for batch_size in (int(b) for b in args.batch_sizes.split(",")):
            decoded = rng.integers(0, 256, (batch_size, args.size, args.size, 3), dtype=np.uint8)
            prepared = np.ascontiguousarray(
                ((decoded / 255.0 - 0.45) / 0.226).astype(np.float32).transpose(0, 3, 1, 2)
            )
            for label, batch in (
                ("uint8 NHWC (ours)", decoded),
                ("float32 NCHW (Beam's handlers)", prepared),
            ):
                seconds = timed_calls(model, batch, args.calls)
                print(
                    f"| {batch_size} | {label} | {batch.nbytes / 1e6:.1f} | {seconds * 1e3:.1f} "
                    f"| {seconds / batch_size * 1e6:.0f} |"
                )
    finally:
        shared.release(model)


if __name__ == "__main__":
    main()
