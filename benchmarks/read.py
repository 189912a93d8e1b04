"""Read speed: `beam_tfrecord.load_dataset` on a conversion against Keras's
`image_dataset_from_directory` on the folder it came from, the same pictures, 224x224 batches of
32, shuffled; load_dataset with tf.data's autotuning off (its default) and on. Each measurement
is a fresh process that makes `--passes` passes; the readers alternate, `--repeats` times. The
median of every pass is what an epoch gets; the median of each process's best pass is printed
beside it, with the ratios of both.

    .venv/bin/python benchmarks/read.py --images 8000 --size 400x300 --repeats 3
    .venv/bin/python benchmarks/read.py --images 800 --size 1600x1200 --repeats 3

The folders (no broken files: Keras stops at the first) and their conversions are made once
under --work and reused.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
sys.path.insert(0, HERE)

# load_dataset-autotune: the same with tf.data's autotuning on (load_dataset(..., autotune=True)).
READERS = ("keras-folder", "load_dataset", "load_dataset-autotune")


def measure(reader: str, folder: str, output: str, passes: int) -> None:
    """In a fresh process: images/s of each pass over the data, as one JSON line."""
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
    import tensorflow as tf

    if reader == "keras-folder":
        import keras

        dataset = keras.utils.image_dataset_from_directory(
            folder, image_size=(224, 224), batch_size=32, shuffle=True, seed=0, verbose=False
        ).prefetch(tf.data.AUTOTUNE)
    else:
        import beam_tfrecord

        dataset = beam_tfrecord.load_dataset(
            output,
            "train",
            image_size=(224, 224),
            batch_size=32,
            seed=0,
            autotune=reader.endswith("-autotune"),
        )
    rates = []
    for _ in range(passes):
        start, images = time.perf_counter(), 0
        for batch, _labels in dataset:
            images += int(batch.shape[0])
        rates.append(images / (time.perf_counter() - start))
    print(json.dumps({"reader": reader, "images": images, "rates": rates}))


def prepare(work: str, images: int, size: tuple[int, int]) -> tuple[str, str]:
    from synthetic import ensure_dataset

    name = f"{size[0]}x{size[1]}-{images}"
    folder = ensure_dataset(os.path.join(work, f"images-{name}"), images, size=size, broken=False)
    output = os.path.join(work, f"out-{name}")
    if not os.path.exists(os.path.join(output, "summary.json")):
        args = [
            "--input",
            folder,
            "--output",
            output,
            "--runner=DirectRunner",
            "--no_progress",
            "--overwrite",
        ]
        subprocess.run([sys.executable, "-m", "pipelines.convert", *args], check=True, cwd=ROOT)
    return folder, output


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--images", type=int, default=8000)
    parser.add_argument("--size", default="400x300", help="WIDTHxHEIGHT of the synthetic JPEGs")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--passes", type=int, default=2, help="passes per process")
    parser.add_argument("--work", default="/tmp/beam-tfrecord-bench")
    parser.add_argument("--measure", nargs=3, metavar=("READER", "FOLDER", "OUTPUT"), help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.measure:
        measure(*args.measure, passes=args.passes)
        return
    width, height = (int(n) for n in args.size.split("x"))
    folder, output = prepare(args.work, args.images, (width, height))
    best: dict[str, list[float]] = {reader: [] for reader in READERS}
    every: dict[str, list[float]] = {reader: [] for reader in READERS}  # each pass: what an epoch gets
    for repeat in range(args.repeats):
        for reader in READERS:
            command = [
                sys.executable,
                __file__,
                "--passes",
                str(args.passes),
                "--measure",
                reader,
                folder,
                output,
            ]
            line = subprocess.run(command, check=True, capture_output=True, text=True, cwd=ROOT).stdout
            result = json.loads(line.strip().splitlines()[-1])
            best[reader].append(max(result["rates"]))
            every[reader].extend(result["rates"])
            print(f"repeat {repeat + 1} {reader:13} {result['images']} images, passes {result['rates']}")
    medians = {reader: statistics.median(rates) for reader, rates in best.items()}
    epochs = {reader: statistics.median(rates) for reader, rates in every.items()}
    print(f"\n{args.images} JPEGs of {width}x{height}, 224x224 batches of 32, {platform.processor() or ''}")
    print(
        f"cpus {os.cpu_count()}, {args.passes} passes in each of {args.repeats} processes: the median "
        "of every pass (an epoch), and the median of each process's best pass"
    )
    for reader in READERS:
        print(
            f"  {reader:21} epoch {epochs[reader]:6.0f} images/s   best {medians[reader]:6.0f}   "
            f"(every pass: {', '.join(f'{r:.0f}' for r in every[reader])})"
        )
    for reader in READERS[1:]:
        print(
            f"  ratio {reader} / keras-folder: epoch {epochs[reader] / epochs['keras-folder']:.2f}x, "
            f"best {medians[reader] / medians['keras-folder']:.2f}x"
        )


if __name__ == "__main__":
    main()
