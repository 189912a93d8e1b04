"""The bare feature model: the compiled call the pipeline runs, at several batch sizes and
precisions, on this machine's GPU (or its CPU when it has none). This is the limit the pipeline's
feature runs are measured against (benchmarks/features.py).

    .venv/bin/python benchmarks/gpu_model.py                          # 32,128,256 x float32,mixed
    .venv/bin/python benchmarks/gpu_model.py --batch_sizes 4 --batches 2 --repeats 3   # CPU check
    python3 benchmarks/gpu_model.py --model torchvision:efficientnet_b0   # PyTorch (no TensorFlow)
    python3 benchmarks/gpu_model.py --model torchvision:resnet50

The model is built as a run builds it (`features.models.load_model`: random weights, the
framework's preprocessing, `--feature_precision`: Keras's mixed_float16 policy, or
torch.autocast for a torchvision:/timm: name), and fed what a run feeds it: a uint8
[n, h, w, 3] batch from host memory through `LoadedModel.predict`, which casts on the device and
returns float32 features to the host. Each figure is the median of `--repeats` timings of
`--batches` calls, after one warm-up call (the trace). GPU memory is the framework's allocator
peak for that batch size (TensorFlow's `get_memory_info`, torch's `max_memory_allocated`, reset
before each), weights included.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
sys.path.insert(0, ROOT)
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")


def is_torch(model: str) -> bool:
    return model.partition(":")[0] in ("torchvision", "timm")


def device_name(model: str) -> str:
    if is_torch(model):
        import torch

        if not torch.cuda.is_available():
            return f"CPU ({os.cpu_count()} cores, {platform.machine()}; no GPU)"
        count = torch.cuda.device_count()
        return f"{torch.cuda.get_device_name(0)} (cuda:0 of {count}, torch {torch.__version__})"
    import tensorflow as tf

    gpus = tf.config.list_physical_devices("GPU")
    if not gpus:
        return f"CPU ({os.cpu_count()} cores, {platform.machine()}; no GPU)"
    details = tf.config.experimental.get_device_details(gpus[0])
    return f"{details.get('device_name', 'GPU')} (GPU:0 of {len(gpus)})"


class GpuPeak:
    """The framework's allocator peak on the first GPU: reset, then read; None without a GPU."""

    def __init__(self, model: str) -> None:
        self.torch = is_torch(model)
        if self.torch:
            import torch

            self.gpu = torch.cuda.is_available()
        else:
            import tensorflow as tf

            self.gpu = bool(tf.config.list_physical_devices("GPU"))

    def reset(self) -> None:
        if not self.gpu:
            return
        if self.torch:
            import torch

            torch.cuda.reset_peak_memory_stats(0)
        else:
            import tensorflow as tf

            tf.config.experimental.reset_memory_stats("GPU:0")

    def peak(self) -> int | None:
        if not self.gpu:
            return None
        if self.torch:
            import torch

            return torch.cuda.max_memory_allocated(0)
        import tensorflow as tf

        return tf.config.experimental.get_memory_info("GPU:0")["peak"]


def measure(model: str, precision: str, batch_sizes: list[int], batches: int, repeats: int) -> list[dict]:
    import numpy as np

    from beam_tfrecord.features.models import load_model
    from beam_tfrecord.features.options import FeatureConfig

    if is_torch(model):
        import torch

        torch.manual_seed(0)
    else:
        import keras

        keras.utils.set_random_seed(0)
    loaded = load_model(FeatureConfig(model, model_weights="none", precision=precision))
    height, width = loaded.input_size()
    memory = GpuPeak(model)
    rng = np.random.default_rng(0)
    rows = []
    for batch_size in batch_sizes:
        batch = rng.integers(0, 256, (batch_size, height, width, 3), dtype=np.uint8)
        memory.reset()
        loaded.predict(batch)  # trace (first size only) and warm up
        rates = []
        for _ in range(repeats):
            started = time.perf_counter()
            for _ in range(batches):
                loaded.predict(batch)
            rates.append(batches * batch_size / (time.perf_counter() - started))
        rows.append(
            {
                "precision": precision,
                "batch_size": batch_size,
                "images_per_s": statistics.median(rates),
                "min": min(rates),
                "max": max(rates),
                "gpu_peak_bytes": memory.peak(),
            }
        )
        print(format_row(rows[-1]), flush=True)
    return rows


def format_row(row: dict) -> str:
    memory = f"{row['gpu_peak_bytes'] / 2**30:.2f} GiB" if row["gpu_peak_bytes"] is not None else "CPU"
    return (
        f"| {row['precision']} | {row['batch_size']} | {row['images_per_s']:,.0f} "
        f"({row['min']:,.0f} to {row['max']:,.0f}) | {memory} |"
    )


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument(
        "--model",
        default="efficientnet_b0",
        help="a --feature_model name: Keras's or torchvision:NAME / timm:NAME",
    )
    parser.add_argument("--batch_sizes", default="32,128,256", help="comma-separated")
    parser.add_argument("--precisions", default="float32,mixed", help="comma-separated")
    parser.add_argument("--batches", type=int, default=20, help="model calls per timing")
    parser.add_argument("--repeats", type=int, default=5, help="timings per figure (the median is shown)")
    parser.add_argument("--json", help="also write the rows here")
    args = parser.parse_args()
    batch_sizes = [int(b) for b in args.batch_sizes.split(",")]
    device = device_name(args.model)
    print(
        f"{args.model}, random weights, uint8 batches from the host, {device}, "
        f"median of {args.repeats} x {args.batches} calls, Python {platform.python_version()}",
        flush=True,
    )
    print("| precision | batch | images/s (min to max) | GPU memory, peak |\n|---|---|---|---|", flush=True)
    rows = []
    for precision in args.precisions.split(","):
        rows += measure(args.model, precision, batch_sizes, args.batches, args.repeats)
    best = max(rows, key=lambda r: r["images_per_s"])
    print(f"best: {best['precision']}, batch {best['batch_size']}: {best['images_per_s']:,.0f} images/s")
    if args.json:
        with open(args.json, "w") as handle:
            json.dump({"device": device, "model": args.model, "rows": rows}, handle, indent=2)


if __name__ == "__main__":
    main()
