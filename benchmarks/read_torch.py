"""PyTorch read speed: `beam_tfrecord.TorchImages` (an IterableDataset over the shards) and
`TorchImageArray` (map-style, through the `.idx` files) against torchvision's `ImageFolder` on
the folder the conversion came from, each in a `DataLoader` with the same worker processes,
224x224 uint8 tensors in batches of 32.

    .venv/bin/python benchmarks/read_torch.py --images 8000 --size 400x300 --workers 2 --repeats 3

Needs PyTorch and torchvision (`make test-torch` installs them). ImageFolder's items are made as
TorchImages makes its own: Pillow decodes, resizes to 224x224 (bilinear) and gives a uint8
tensor [3, 224, 224] (`Resize`, `PILToTensor`); ImageFolder and TorchImageArray are shuffled by
the DataLoader, TorchImages reads its shards in order (it does not shuffle). Each measurement is a
fresh process: one pass to start the workers (kept across passes), then `--passes` passes, every
one counted. The readers alternate, `--repeats` times; the median of every pass (an epoch) and
the ratios to ImageFolder are printed. The pictures are those of benchmarks/read.py, made once
under --work.
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

READERS = ("imagefolder", "TorchImages", "TorchImageArray")
SIZE = (224, 224)
BATCH = 32


def measure(reader: str, folder: str, output: str, workers: int, passes: int) -> None:
    """In a fresh process: pictures/s of each pass after the first, as one JSON line."""
    import torch
    from torch.utils.data import DataLoader

    if reader == "imagefolder":
        from torchvision import datasets, transforms

        resize = transforms.Resize(SIZE, interpolation=transforms.InterpolationMode.BILINEAR)
        dataset = datasets.ImageFolder(
            folder, transform=transforms.Compose([resize, transforms.PILToTensor()])
        )
        shuffle = True
    elif reader == "TorchImages":
        import beam_tfrecord

        dataset, shuffle = beam_tfrecord.TorchImages(output, "train", image_size=SIZE), False
    else:
        import beam_tfrecord

        dataset, shuffle = beam_tfrecord.TorchImageArray(output, "train", image_size=SIZE), True
    loader = DataLoader(
        dataset,
        batch_size=BATCH,
        shuffle=shuffle,
        num_workers=workers,
        persistent_workers=workers > 0,
        generator=torch.Generator().manual_seed(0) if shuffle else None,
    )
    rates, pictures = [], 0
    for index in range(passes + 1):
        start, pictures = time.perf_counter(), 0
        for images, _labels in loader:
            assert images.dtype == torch.uint8 and tuple(images.shape[1:]) == (3, *SIZE)
            pictures += int(images.shape[0])
        if index:  # the first pass starts the workers
            rates.append(pictures / (time.perf_counter() - start))
    print(json.dumps({"reader": reader, "pictures": pictures, "rates": rates}))


def main() -> None:
    from read import prepare

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--images", type=int, default=8000)
    parser.add_argument("--size", default="400x300", help="WIDTHxHEIGHT of the synthetic JPEGs")
    parser.add_argument(
        "--workers", type=int, default=2, help="DataLoader worker processes, for every reader"
    )
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--passes", type=int, default=2, help="measured passes per process")
    parser.add_argument("--work", default="/tmp/beam-tfrecord-bench")
    parser.add_argument("--measure", nargs=3, metavar=("READER", "FOLDER", "OUTPUT"), help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.measure:
        measure(*args.measure, workers=args.workers, passes=args.passes)
        return
    width, height = (int(n) for n in args.size.split("x"))
    folder, output = prepare(args.work, args.images, (width, height), photos=False)
    every: dict[str, list[float]] = {reader: [] for reader in READERS}
    for repeat in range(args.repeats):
        for reader in READERS:
            command = [sys.executable, __file__, "--workers", str(args.workers), "--passes", str(args.passes)]
            command += ["--measure", reader, folder, output]
            line = subprocess.run(command, check=True, capture_output=True, text=True, cwd=ROOT).stdout
            result = json.loads(line.strip().splitlines()[-1])
            every[reader].extend(result["rates"])
            rates = ", ".join(f"{r:.0f}" for r in result["rates"])
            print(f"repeat {repeat + 1} {reader:15} {result['pictures']} pictures, passes {rates}")
    epochs = {reader: statistics.median(rates) for reader, rates in every.items()}
    machine = platform.processor() or ""
    print(f"\n{args.images} JPEGs of {width}x{height}, 224x224 uint8 batches of 32, {machine}")
    print(f"cpus {os.cpu_count()}, {args.workers} DataLoader workers each, median of every pass (an epoch)")
    for reader in READERS:
        every_pass = ", ".join(f"{r:.0f}" for r in every[reader])
        print(f"  {reader:15} {epochs[reader]:6.0f} pictures/s   (every pass: {every_pass})")
    for reader in READERS[1:]:
        print(f"  ratio {reader} / ImageFolder: {epochs[reader] / epochs['imagefolder']:.2f}x")


if __name__ == "__main__":
    main()
