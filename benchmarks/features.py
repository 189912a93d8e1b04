"""The feature pipeline against the bare model, on the same machine and batch size, in one run.

    .venv/bin/python benchmarks/features.py --images 256 --batch_size 32
    .venv/bin/python benchmarks/features.py --images 10000 --batch_size 256 --precision mixed \
        --feature_pooling avg --direct_num_workers=16 --direct_running_mode=multi_processing
    python3 benchmarks/features.py --model torchvision:efficientnet_b0 --images 20000 --batch_size 256 \
        --precision mixed --direct_num_workers=16 --direct_running_mode=multi_processing

1. Bare model: the compiled call this project runs (`features.models.load_model`: a Keras
   application plus its preprocess_input in one tf.function, or a torchvision:/timm: backbone
   with its normalisation on the device, at `--precision`) on random uint8
   batches as a run feeds them (`LoadedModel.predict`), after one warm-up batch: the best the
   pipeline could do. benchmarks/gpu_model.py measures it across batch sizes.
2. Pipeline: `python -m pipelines.convert --feature_model ... --model_weights none` as a whole
   process (listing, decode, RunInference, records, WriteToTFRecord, metadata), on N and on 2N
   synthetic 400x300 JPEGs, with the peak RSS of the process tree. The whole-process rate
   includes start-up (TensorFlow import, model build, trace); the marginal rate
   N / (t(2N) - t(N)) is the steady state, and the ratio to the bare model uses it. On a machine
   with `nvidia-smi`, the peak GPU memory used during each run (every process on the device).

Arguments this script does not know go to the pipeline (e.g. `--feature_pooling avg`,
`--model_copies 1`, Beam's `--direct_num_workers`).
"""

from __future__ import annotations

import argparse
import os
import platform
import shutil
import subprocess
import sys
import tempfile
import threading
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
sys.path.insert(0, HERE)
sys.path.insert(0, ROOT)
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

from run import measure  # noqa: E402
from synthetic import ensure_dataset  # noqa: E402


def bare_model_rate(model: str, batch_size: int, batches: int, precision: str) -> float:
    """Images per second of the compiled model call alone, on random inputs."""
    import numpy as np

    from beam_tfrecord.features.models import load_model
    from beam_tfrecord.features.options import FeatureConfig

    loaded = load_model(FeatureConfig(model, model_weights="none", precision=precision))
    height, width = loaded.input_size()
    batch = np.random.default_rng(0).integers(0, 256, (batch_size, height, width, 3), dtype=np.uint8)
    loaded.predict(batch)  # trace and warm up
    started = time.perf_counter()
    for _ in range(batches):
        loaded.predict(batch)
    return batches * batch_size / (time.perf_counter() - started)


class GpuMemoryPoll:
    """The peak of `nvidia-smi`'s memory.used on GPU 0 while the block runs; None without it."""

    def __init__(self) -> None:
        self.peak_mib: int | None = None
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._poll, daemon=True)

    def _poll(self) -> None:
        query = ["nvidia-smi", "--query-gpu=memory.used", "--format=csv,noheader,nounits", "--id=0"]
        while not self._stop.wait(0.5):
            try:
                answer = subprocess.run(query, capture_output=True, text=True, check=True)
                used = int(answer.stdout.split()[0])
            except (OSError, subprocess.CalledProcessError, ValueError, IndexError):
                return
            self.peak_mib = max(self.peak_mib or 0, used)

    def __enter__(self) -> GpuMemoryPoll:
        if shutil.which("nvidia-smi"):
            self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        if self._thread.is_alive():
            self._thread.join()

    def __str__(self) -> str:
        return f", GPU memory peak {self.peak_mib:,} MiB" if self.peak_mib is not None else ""


def pipeline_run(data: str, model: str, batch_size: int, extra: list[str]) -> tuple[float, int, str]:
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
        with GpuMemoryPoll() as gpu:
            wall, peak, code = measure(cmd)
        if code != 0:
            raise SystemExit(f"pipeline exited {code}")
        return wall, peak, str(gpu)
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
    parser.add_argument("--precision", default="float32", help="the bare model's and the pipeline's")
    args, extra = parser.parse_known_args()
    extra = ["--feature_precision", args.precision, *extra]
    small = ensure_dataset(os.path.join(HERE, "data", f"synthetic-{args.images}-0"), args.images)
    large = ensure_dataset(os.path.join(HERE, "data", f"synthetic-{2 * args.images}-0"), 2 * args.images)
    print(
        f"{args.model}, batch {args.batch_size}, {os.cpu_count()} cores, {platform.machine()}, "
        f"Python {platform.python_version()}, extra pipeline args: {extra or 'none'}",
        flush=True,
    )
    bare = bare_model_rate(args.model, args.batch_size, args.bare_batches, args.precision)
    print(f"bare model (compiled call, random input): {bare:.1f} images/s", flush=True)
    wall_small, peak_small, gpu_small = pipeline_run(small, args.model, args.batch_size, extra)
    print(
        f"pipeline, {args.images} images: {wall_small:.1f} s, peak {peak_small / 1e6:.0f} MB{gpu_small}",
        flush=True,
    )
    wall_large, peak_large, gpu_large = pipeline_run(large, args.model, args.batch_size, extra)
    print(
        f"pipeline, {2 * args.images} images: {wall_large:.1f} s, peak {peak_large / 1e6:.0f} MB{gpu_large}",
        flush=True,
    )
    marginal = args.images / (wall_large - wall_small)
    whole = 2 * args.images / wall_large
    print(
        f"pipeline whole process ({2 * args.images} images): {whole:.1f} img/s ({whole / bare:.0%} of bare)",
    )
    print(f"pipeline steady state (marginal): {marginal:.1f} images/s ({marginal / bare:.0%} of bare)")


if __name__ == "__main__":
    main()
