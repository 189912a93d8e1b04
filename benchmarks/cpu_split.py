"""Where a conversion's CPU goes per image, by the library that spends it (issue 28): `perf
record` over the whole process tree, on N images and on N/10, and the difference in samples per
library over the extra images. A sampler that reads the instruction pointer tells C apart
exactly: libjpeg's samples are the validating decode (and any re-encode), libcrypto's the two
sha256, the kernel's the reads, writes and thread hand-offs, libpython's every line of Python
(the regular expression engine and the json module's pure parts included). py-spy
(benchmarks/profile_run.py) says which Python step; this says how much is C and how much Python,
without its counting of threads that wait for the GIL.

    .venv/bin/python benchmarks/cpu_split.py --task detection --images 12000
    .venv/bin/python benchmarks/cpu_split.py --task classification --images 32000
    .venv/bin/python benchmarks/cpu_split.py --task detection --images 12000 --tool od_api_coco
    .venv/bin/python benchmarks/cpu_split.py --task detection --images 12000 --tool least_work
    .venv/bin/python benchmarks/cpu_split.py --task detection --images 12000 --tool checked_steps
    .venv/bin/python benchmarks/cpu_split.py --task detection --images 12000 --tool library_steps

Needs Linux `perf` (Debian's linux-perf) allowed to sample the processes it starts
(kernel.perf_event_paranoid <= 2; the kernel's own share needs root or <= 1). The same data and
commands as benchmarks/peers.py; arguments it does not know go to this project's command. One
run per size: read the figures as one run's, on a quiet machine.
"""

from __future__ import annotations

import argparse
import collections
import os
import re
import shutil
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path[:0] = [HERE]

import peers  # noqa: E402

RATE = 999  # samples per second per CPU
# Library file name (perf's "dso") -> the part of the work it does, first match wins.
PARTS = (
    ("JPEG codec (the validating decode)", re.compile(r"^libjpeg")),
    (
        "other codecs (PNG, zlib, Pillow's C)",
        re.compile(r"^(libpng|libz|_imaging|libwebp|libtiff|libopenjp2)"),
    ),
    ("sha256 (libcrypto)", re.compile(r"^(libcrypto|_hashlib)")),
    ("kernel (reads, writes, page faults, thread hand-offs)", re.compile(r"^\[kernel")),
    ("Python interpreter (every Python line, re, pickle)", re.compile(r"^(libpython|python3)")),
    ("libc (memcpy, malloc)", re.compile(r"^libc[.-]")),
    ("protobuf (upb)", re.compile(r"^_message")),
    ("json's C scanner", re.compile(r"^_json")),
    ("CRC32C", re.compile(r"^libcrc32c")),
    ("other compiled modules (Beam's operations, pickle, struct)", re.compile(r"\.(cpython-.*|abi3)\.so$")),
)
OTHER = "other libraries"
_LINE = re.compile(r"^\s*(\d+)\s+(\S.*?)\s*$")


def samples_by_library(data: str) -> collections.Counter:
    """perf.data -> samples per library file name."""
    report = subprocess.run(
        ["perf", "report", "-i", data, "--sort", "dso", "-F", "sample,dso", "--stdio", "-g", "none"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    counts: collections.Counter = collections.Counter()
    for line in report.splitlines():
        match = _LINE.match(line)
        if match and not line.lstrip().startswith("#"):
            counts[match[2]] += int(match[1])
    return counts


def part_of(library: str) -> str:
    return next((name for name, pattern in PARTS if pattern.search(library)), OTHER)


def profile(command: list[str], output: str, data: str) -> collections.Counter:
    """Samples per part of one run of `command` (and every process it starts)."""
    shutil.rmtree(output, ignore_errors=True)
    os.makedirs(output)
    recorded = ["perf", "record", "-F", str(RATE), "-q", "-o", data, "--", *command]
    subprocess.run(recorded, cwd=peers.ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=True)
    parts: collections.Counter = collections.Counter()
    for library, count in samples_by_library(data).items():
        parts[part_of(library)] += count
    return parts


def table(small: collections.Counter, large: collections.Counter, extra_images: int) -> list[str]:
    """Markdown: per part, its CPU per extra image (us) and at each size (s)."""
    names = [name for name, _ in PARTS] + [OTHER]
    lines = ["| part | CPU per image (us) | small run (s) | large run (s) |", "|---|---:|---:|---:|"]
    for name in names:
        a, b = small.get(name, 0) / RATE, large.get(name, 0) / RATE
        if a or b:
            lines.append(f"| {name} | {1e6 * (b - a) / extra_images:.0f} | {a:.2f} | {b:.2f} |")
    a, b = sum(small.values()) / RATE, sum(large.values()) / RATE
    lines.append(f"| **all** | **{1e6 * (b - a) / extra_images:.0f}** | {a:.2f} | {b:.2f} |")
    return lines


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    peers.add_task_arguments(parser)
    parser.add_argument("--small", type=int, help="the small run's images (default: a tenth)")
    parser.add_argument(
        "--tool",
        default="pipelines.convert",
        help="pipelines.convert (default), the peer (od_api_coco, tf_loop), or least_work.py's "
        "least_work, checked_steps or library_steps",
    )
    args, extra = parser.parse_known_args()
    if shutil.which("perf") is None:
        sys.exit("cpu_split.py needs Linux perf (apt install linux-perf)")
    images = args.images or peers.DEFAULT_IMAGES[args.task]
    sizes = (args.small or images // 10, images)
    counts = []
    with tempfile.TemporaryDirectory(prefix="bench-split-") as out:
        for size in sizes:
            least = args.tool in peers.LEAST_WORK_TOOLS
            where = os.path.join(out, str(size))
            tools, _ = peers.task_tools(args.task, size, args.seed, where, extra, least_work=least)
            tool = next((t for t in tools if t.name == args.tool), None)
            if tool is None:
                sys.exit(f"--tool {args.tool}: this task runs {', '.join(t.name for t in tools)}")
            counts.append(profile(tool.command, tool.output, os.path.join(out, f"perf-{size}.data")))
            print(
                f"{tool.name}, {size} images: {sum(counts[-1].values()) / RATE:.2f} s of CPU sampled",
                flush=True,
            )
    print(
        f"\n{args.task}, {args.tool}: CPU per image over the extra {sizes[1] - sizes[0]} images, by library"
    )
    print("\n".join(table(counts[0], counts[1], sizes[1] - sizes[0])))


if __name__ == "__main__":
    main()
