"""What keeping 16 bits costs beside 8: the same microscopy-like pictures (grayscale, values up
to 44,401, as a fluorescence camera writes them) converted

- `16-bit`: 16-bit TIFFs (Deflate, tifffile), the default (stored as 16-bit PNGs);
- `16-bit as 8`: the same files with `--bit_depth 8` (scaled, 8-bit PNGs);
- `8-bit`: the same pictures saved as 8-bit TIFFs (Deflate), the default;
- `16-bit PNG` and `8-bit PNG`: the pictures as PNGs (the 16-bit PNG's bytes are kept).

Two measures, each in interleaved rounds so every case sees the same load: what
`encode_for_tensorflow` costs per picture (microseconds, in this process), and a whole
`python -m pipelines.convert` run of every picture on the DirectRunner (seconds, a fresh process
each). Medians, and each case's ratio to `8-bit` (TIFF) and `8-bit PNG`:

    .venv/bin/python benchmarks/full_depth.py --images 200 --size 512 --rounds 3
"""

from __future__ import annotations

import argparse
import io
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import tifffile
from PIL import Image

ROOT = Path(__file__).resolve().parent.parent


def pictures(count: int, size: int) -> dict[str, list[bytes]]:
    """Each case's files, in memory: smooth nuclei-like blobs on noise, so they compress as
    real micrographs do (pure noise would not)."""
    rng = np.random.default_rng(58)
    yy, xx = np.mgrid[0:size, 0:size]
    cases: dict[str, list[bytes]] = {name: [] for name in ("16-bit", "8-bit", "16-bit PNG", "8-bit PNG")}
    for _ in range(count):
        field = rng.normal(1200, 150, (size, size))
        for cy, cx, r in rng.uniform((0, 0, 6), (size, size, size / 12), (12, 3)):
            field += 40_000 * np.exp(-((yy - cy) ** 2 + (xx - cx) ** 2) / (2 * r * r))
        deep = np.clip(field, 0, 44_401).astype(np.uint16)
        eight = np.rint(deep * (255.0 / 65535.0)).astype(np.uint8)
        for name, samples, png in (("16-bit", deep, "16-bit PNG"), ("8-bit", eight, "8-bit PNG")):
            out = io.BytesIO()
            tifffile.imwrite(out, samples, compression="zlib")
            cases[name].append(out.getvalue())
            out = io.BytesIO()
            Image.fromarray(samples).save(out, format="PNG")
            cases[png].append(out.getvalue())
    return cases


# case -> (the files it converts, extra command options)
RUNS = {
    "16-bit": ("16-bit", ()),
    "16-bit as 8": ("16-bit", ("--bit_depth", "8")),
    "8-bit": ("8-bit", ()),
    "16-bit PNG": ("16-bit PNG", ()),
    "8-bit PNG": ("8-bit PNG", ()),
}


def encode_costs(cases: dict[str, list[bytes]], rounds: int) -> dict[str, list[float]]:
    from beam_tfrecord.images.normalize import encode_for_tensorflow
    from beam_tfrecord.images.options import ImageConfig

    found: dict[str, list[float]] = {name: [] for name in RUNS}
    for _ in range(rounds):
        for name, (files, options) in RUNS.items():
            config = ImageConfig(bit_depth="8") if options else ImageConfig()
            start = time.perf_counter()
            for data in cases[files]:
                encode_for_tensorflow(data, config)
            found[name].append((time.perf_counter() - start) / len(cases[files]) * 1e6)
    return found


def run_costs(cases: dict[str, list[bytes]], rounds: int) -> dict[str, list[float]]:
    found: dict[str, list[float]] = {name: [] for name in RUNS}
    with tempfile.TemporaryDirectory(prefix="full-depth-") as tmp:
        for files in cases:
            folder = Path(tmp) / files.replace(" ", "_")
            (folder / "cells").mkdir(parents=True)
            suffix = ".png" if "PNG" in files else ".tif"
            for i, data in enumerate(cases[files]):
                (folder / "cells" / f"{i}{suffix}").write_bytes(data)
        for _ in range(rounds):
            for name, (files, options) in RUNS.items():
                out = Path(tmp) / "out"
                shutil.rmtree(out, ignore_errors=True)
                command = [sys.executable, "-m", "pipelines.convert", "--runner", "DirectRunner"]
                command += [
                    "--input",
                    str(Path(tmp) / files.replace(" ", "_")),
                    "--output",
                    str(out),
                    *options,
                ]
                start = time.perf_counter()
                subprocess.run(command, cwd=ROOT, check=True, capture_output=True)
                found[name].append(time.perf_counter() - start)
    return found


def report(title: str, unit: str, found: dict[str, list[float]]) -> None:
    medians = {name: statistics.median(values) for name, values in found.items()}
    print(f"\n{title} (median of {len(next(iter(found.values())))} rounds)")
    print(f"{'case':<14}{unit:>12}{'/ 8-bit':>10}{'/ 8-bit PNG':>13}")
    for name, value in medians.items():
        print(
            f"{name:<14}{value:>12.1f}{value / medians['8-bit']:>10.2f}{value / medians['8-bit PNG']:>13.2f}"
        )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--images", type=int, default=200)
    parser.add_argument("--size", type=int, default=512)
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    cases = pictures(args.images, args.size)
    sizes = {name: sum(map(len, files)) / len(files) / 1e3 for name, files in cases.items()}
    print(f"{args.images} pictures of {args.size}x{args.size}; KB per file: {sizes}")
    report("encode_for_tensorflow per picture", "us", encode_costs(cases, args.rounds))
    report("whole run, python -m pipelines.convert", "s", run_costs(cases, args.rounds))


if __name__ == "__main__":
    main()
