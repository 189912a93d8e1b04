"""The feature pipeline against the bare model, on the same machine and batch size, in one run.

    .venv/bin/python benchmarks/features.py --images 256 --batch_size 32

1. Bare model: the compiled call this project runs (`features.load_backbone`: the Keras
   application plus its preprocess_input in one tf.function) on random float32 batches, after
   one warm-up batch: the best the pipeline could do.
2. Pipeline: `python -m pipelines.convert --feature_model ... --model_weights none` as a whole
   process (listing, decode, RunInference, records, WriteToTFRecord, metadata), on N and on 2N
   synthetic 400x300 JPEGs, with the peak RSS of the process tree. The whole-process rate
   includes start-up (TensorFlow import, model build, trace); the marginal rate
   N / (t(2N) - t(N)) is the steady state, and the ratio to the bare model uses it.
"""

from __future__ import annotations

import argparse
import os
import platform
import shutil
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
sys.path.insert(0, HERE)
sys.path.insert(0, ROOT)
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

from run import measure  # noqa: E402
from synthetic import ensure_dataset  # noqa: E402


def bare_model_rate(model: str, batch_size: int, batches: int) -> float:
    """Images per second of the compiled model call alone, on random inputs."""
    import numpy as np

    from beam_tfrecord.features import FeatureOptions, load_backbone

    loaded = load_backbone(FeatureOptions(model, model_weights="none"))
    rng = np.random.default_rng(0)
    batch = rng.uniform(0, 255, (batch_size, loaded.height, loaded.width, 3)).astype(np.float32)
    loaded.call(batch)  # trace and warm up
    started = time.perf_counter()
    for _ in range(batches):
        loaded.call(batch)
    return batches * batch_size / (time.perf_counter() - started)


def pipeline_run(data: str, model: str, batch_size: int, extra: list[str]) -> tuple[float, int]:
    out = tempfile.mkdtemp(prefix="bench-features-")
    try:
        cmd = [
            sys.executable,
            "-m",
            "pipelines.convert",
            "--input",
            data,
            "--output",
            out,
            "--overwrite",
            "--no_progress",
            "--runner=DirectRunner",
            "--feature_model",
            model,
            "--model_weights",
            "none",
            "--inference_batch_size",
            str(batch_size),
            *extra,
        ]
        wall, peak, code = measure(cmd)
        if code != 0:
            raise SystemExit(f"pipeline exited {code}")
        return wall, peak
    finally:
        shutil.rmtree(out, ignore_errors=True)


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--images", type=int, default=256, help="N; the second pipeline run takes 2N")
    parser.add_argument("--batch_size", type=int, default=32)
    parser.add_argument("--model", default="efficientnet_b0")
    parser.add_argument("--bare_batches", type=int, default=8)
    args, extra = parser.parse_known_args()
    small = ensure_dataset(os.path.join(HERE, "data", f"synthetic-{args.images}-0"), args.images)
    large = ensure_dataset(os.path.join(HERE, "data", f"synthetic-{2 * args.images}-0"), 2 * args.images)
    print(
        f"{args.model}, batch {args.batch_size}, {os.cpu_count()} cores, {platform.machine()}, "
        f"Python {platform.python_version()}, extra pipeline args: {extra or 'none'}",
        flush=True,
    )
    bare = bare_model_rate(args.model, args.batch_size, args.bare_batches)
    print(f"bare model (compiled call, random input): {bare:.1f} images/s", flush=True)
    wall_small, peak_small = pipeline_run(small, args.model, args.batch_size, extra)
    print(f"pipeline, {args.images} images: {wall_small:.1f} s, peak {peak_small / 1e6:.0f} MB", flush=True)
    wall_large, peak_large = pipeline_run(large, args.model, args.batch_size, extra)
    print(
        f"pipeline, {2 * args.images} images: {wall_large:.1f} s, peak {peak_large / 1e6:.0f} MB", flush=True
    )
    marginal = args.images / (wall_large - wall_small)
    whole = 2 * args.images / wall_large
    print(
        f"pipeline whole process ({2 * args.images} images): {whole:.1f} img/s ({whole / bare:.0%} of bare)",
    )
    print(f"pipeline steady state (marginal): {marginal:.1f} images/s ({marginal / bare:.0%} of bare)")


if __name__ == "__main__":
    main()
