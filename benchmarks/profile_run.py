"""Where a conversion's CPU goes, per image, outside the validating decode (issue 28): py-spy
across the command and every worker process it starts, the samples sorted into the issue's
candidates, scaled to the CPU time the same command takes unprofiled.

    .venv/bin/python benchmarks/profile_run.py --task detection --images 600
    .venv/bin/python benchmarks/profile_run.py --task detection --images 600 --direct_num_workers=2 \\
        --direct_running_mode=multi_processing          # the mode a run over 256 MB gets
    .venv/bin/python benchmarks/profile_run.py --task classification --images 2000
    .venv/bin/python benchmarks/profile_run.py --raw out.txt --cpu 2.4 --images 600   # re-sort a profile

The command is benchmarks/peers.py's `pipelines.convert` for the task (same data, same options;
arguments not known here go to it). It runs `--rounds` times unprofiled (the median CPU, user +
system of the whole tree, is the total to share out) and `--repeats` times under
`py-spy record --subprocesses --format raw` (samples summed). A sample whose innermost frame is a
thread waiting (a pool thread on its queue, a future's result, an event) is not CPU and is left
out; the rest are sorted by the first rule below that matches its stack, and each bucket's share
of them times the CPU total is its CPU time. Start-up buckets (imports, the launcher's planning,
the job graph, the summary) are given per run; the rest per image, in microseconds. py-spy counts
a thread that is runnable but waiting for a core as busy, so on a loaded machine the shares are
of runnable time: read them as shares, and the absolute figures as provisional.

Requires py-spy (requirements-bench.txt); it ptraces the processes (root or CAP_SYS_PTRACE).
"""

from __future__ import annotations

import argparse
import collections
import linecache
import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
from collections.abc import Callable

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
sys.path[:0] = [HERE, ROOT]

import peers  # noqa: E402

Frame = tuple[str, str, int]  # (function, file as py-spy shortens it, line)
_FRAME = re.compile(r"^(?P<func>.*) \((?P<file>[^()]*):(?P<line>\d+)\)$")

# Innermost frames of a thread that waits, not computes.
WAITING = {
    ("_worker", "concurrent/futures/thread.py"),
    ("Condition.wait", "threading.py"),
    ("Event.wait", "threading.py"),
    ("Thread.run", "threading.py"),
    ("Thread._wait_for_tstate_lock", "threading.py"),
    ("sigwait", "signal.py"),
    ("select", "selectors.py"),
    ("EpollSelector.select", "selectors.py"),
    ("sleep", "time"),
    ("_recv", "multiprocessing/connection.py"),
    ("Connection._recv", "multiprocessing/connection.py"),
    ("_serve", "grpc/_server.py"),
    ("_run_channel_spin_thread.<locals>.channel_spin", "grpc/_channel.py"),
    ("_poll_connectivity", ""),
}


def _source(file: str, line: int) -> str:
    for base in (ROOT, *sys.path):
        path = os.path.join(base, file)
        if os.path.exists(path):
            return linecache.getline(path, line)
    return ""


def _any(stack: list[Frame], test: Callable[[str, str], bool]) -> bool:
    return any(test(func, file) for func, file, _ in stack)


def _in(*parts: str) -> Callable[[list[Frame]], bool]:
    """A stack with a frame in one of these files (path fragments)."""
    return lambda stack: _any(stack, lambda _, file: any(part in file for part in parts))


def _calls(*funcs: str) -> Callable[[list[Frame]], bool]:
    """A stack with one of these functions (py-spy's `Class.method` names)."""
    return lambda stack: _any(stack, lambda func, _: func in funcs)


def _near_leaf(*parts: str, depth: int = 3) -> Callable[[list[Frame]], bool]:
    """One of the `depth` innermost frames is in one of these files or functions: the code that
    runs, not the code that called it (every read-thread sample has the pool's frames outside)."""
    return lambda stack: any(
        part in file or part == func for func, file, _ in stack[-depth:] for part in parts
    )


def _leaf_line(func: str, text: str) -> Callable[[list[Frame]], bool]:
    """The innermost Python frame is `func` on a line that holds `text` (a C call such as
    hashlib's, which has no frame of its own)."""

    def test(stack: list[Frame]) -> bool:
        name, file, line = stack[-1]
        return name == func and text in _source(file, line)

    return test


# (bucket, per image or per run, test), first match wins. Per-run buckets are start-up and wrap-up.
RULES: list[tuple[str, str, Callable[[list[Frame]], bool]]] = [
    ("imports", "run", _calls("_find_and_load")),
    ("validating decode (Pillow load, DCT-scaled)", "image", _calls("ImageFile.load")),
    (
        "mask PNGs (rasterise, encode)",
        "image",
        _calls("_stored_mask", "rasterize_mask", "transform_mask", "encode_mask_png"),
    ),
    ("read each file", "image", _calls("read_bytes")),
    ("sha256 of the source bytes", "image", _leaf_line("prepare_input", "sha256")),
    ("sha256 of the serialized record", "image", _leaf_line("finish_record", "sha256")),
    ("validation besides the decode (open, header, segments)", "image", _in("images/normalize", "PIL/")),
    ("objects placed (boxes follow pixels)", "image", _in("labels/objects/placement", "labels/geometry")),
    ("Example built field by field + serialized", "image", _in("write/schema", "write/messages")),
    ("CRC32C", "image", _calls("masked_crc32c")),
    (".idx beside each shard", "image", _calls("write_index", "format_index")),
    ("shard file writes (framing, write calls)", "image", _in("write/tfrecord_files", "write/shardwriter")),
    (
        "duplicate table (content keys)",
        "image",
        _calls("content_key", "duplicate_groups", "LoadFinishedFn.process"),
    ),
    (
        "shard tasks loaded (staged annotations parsed)",
        "image",
        _calls("load_shard_task", "ShardTask.from_json"),
    ),
    (
        "read threads' hand-off (futures, ordered_submit)",
        "image",
        _near_leaf("concurrent/futures", "ordered_submit"),
    ),
    (
        "other per-image project code",
        "image",
        _calls("prepare_input", "finish_record", "ReadShardFn.process"),
    ),
    ("launcher: list, plan, parse annotations, stage", "run", _calls("prepare")),
    (
        "summary, metadata, finalize",
        "run",
        _in(
            "write/summary",
            "beam_tfrecord/summary.py",
            "write/tfds_metadata",
            "write/side_files",
            "tensorflow_datasets",
        ),
    ),
    (
        "Beam per element and bundle (coders, data plane, DoFn calls)",
        "image",
        _calls(
            "BundleProcessor.process_bundle", "_GrpcDataChannel._read_inputs", "DataChannel.output_stream"
        ),
    ),
    ("options, job graph, runner and workers started", "run", _in("apache_beam", "pipelines/")),
]
NO_FRAME = "no Python frame (native threads, interpreter start and exit)"
OTHER = "other"


def parse_raw(text: str) -> list[tuple[list[Frame], int]]:
    """py-spy's raw (collapsed) output: `process P:"cmd";frame;frame N` per line; a command line
    may span lines, so records are cut at a trailing count."""
    samples = []
    for record in re.findall(r"(.*?) (\d+)\n", text + "\n", flags=re.S):
        stack_text, count = record
        frames: list[Frame] = []
        for part in stack_text.split(";"):
            match = _FRAME.match(part.strip())
            if match:
                frames.append((match["func"], match["file"], int(match["line"])))
        samples.append((frames, int(count)))
    return samples


def sort_samples(
    samples: list[tuple[list[Frame], int]],
) -> tuple[collections.Counter, int, collections.Counter]:
    """(samples per bucket, waiting samples, innermost frames of the `other` bucket)."""
    buckets: collections.Counter = collections.Counter()
    others: collections.Counter = collections.Counter()
    waiting = 0
    for stack, count in samples:
        if not stack:
            buckets[NO_FRAME] += count
            continue
        func, file, _ = stack[-1]
        if any(func == name and file.endswith(where) for name, where in WAITING if where) or func in {
            name for name, where in WAITING if not where
        }:
            waiting += count
            continue
        for name, _, test in RULES:
            if test(stack):
                buckets[name] += count
                break
        else:
            buckets[OTHER] += count
            others[f"{func} ({file}:{stack[-1][2]})"] += count
    return buckets, waiting, others


def table(buckets: collections.Counter, per_image_s: float, per_run_s: float, images: int) -> list[str]:
    """Markdown. A per-image bucket's share of the per-image samples times the marginal CPU per
    image is its CPU per image (us). Per-run buckets get their share of the per-run samples only:
    the fixed CPU also holds native threads' time that py-spy cannot place (gRPC's pollers, the
    interpreter's exit), so it is given as one total (see PROFILE_28.md for the parts measured
    directly)."""
    kinds = {name: kind for name, kind, _ in RULES} | {NO_FRAME: "run", OTHER: "image"}
    names = [*(n for n, _, _ in RULES), OTHER, NO_FRAME]
    of_kind = {kind: sum(buckets.get(n, 0) for n in names if kinds[n] == kind) for kind in ("image", "run")}
    lines = ["| where | kind | samples | share of kind | CPU per image (us) |", "|---|---|---:|---:|---:|"]
    for name in names:
        count, kind = buckets.get(name, 0), kinds[name]
        share = count / of_kind[kind] if of_kind[kind] else 0.0
        per_image = f"{1e6 * per_image_s * share:.0f}" if kind == "image" else ""
        lines.append(f"| {name} | {kind} | {count} | {100 * share:.1f}% | {per_image} |")
    lines.append(f"| **per image: marginal CPU** | | {of_kind['image']} | | **{1e6 * per_image_s:.0f}** |")
    lines.append(f"| **per run: fixed CPU {1e3 * per_run_s:.0f} ms** | | {of_kind['run']} | | |")
    return lines


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--task", choices=("detection", "classification"), default="detection")
    parser.add_argument("--images", type=int, default=600)
    parser.add_argument("--masks", action="store_true")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--rounds", type=int, default=3, help="unprofiled runs for the CPU total")
    parser.add_argument("--repeats", type=int, default=2, help="profiled runs, samples summed")
    parser.add_argument("--rate", type=int, default=250, help="py-spy samples per second")
    parser.add_argument("--save", help="keep the summed raw profile here")
    parser.add_argument(
        "--small", type=int, help="the smaller set for the marginal CPU (default: images / 10)"
    )
    parser.add_argument("--raw", help="sort this raw profile instead of running it")
    parser.add_argument("--per_image_ms", type=float, default=0.0, help="with --raw: marginal CPU per image")
    parser.add_argument("--per_run_s", type=float, default=0.0, help="with --raw: fixed CPU per run")
    args, extra = parser.parse_known_args()
    if args.raw:
        with open(args.raw) as handle:
            text = handle.read()
        per_image, per_run = args.per_image_ms / 1e3, args.per_run_s
    else:
        text, per_image, per_run = profile(args, extra)
    buckets, waiting, others = sort_samples(parse_raw(text))
    print(f"{sum(buckets.values())} busy samples, {waiting} waiting samples left out")
    print("\n".join(table(buckets, per_image, per_run, args.images)))
    if others:
        print("\nlargest innermost frames in `other`:")
        for frame, count in others.most_common(8):
            print(f"  {count:5d}  {frame}")


def _cpu(
    args: argparse.Namespace, extra: list[str], images: int, out: str, spy: str | None
) -> tuple[float, str]:
    """(median unprofiled CPU seconds of the task's pipelines.convert on `images`, and with `spy`
    its summed raw profile)."""
    tools, watched = peers.task_tools(args.task, images, args.seed, out, extra, args.masks)
    ours = tools[1]
    cpus = []
    for _ in range(args.rounds):
        os.makedirs(ours.output, exist_ok=True)
        _, user, system, _, _ = peers.measure(ours.command, watched)
        shutil.rmtree(ours.output)
        cpus.append(user + system)
    said = ", ".join(f"{c:.2f}" for c in cpus)
    print(f"  {images} images, CPU (user+sys, tree) of {args.rounds} runs: {said} s")
    text = ""
    for repeat in range(args.repeats if spy else 0):
        raw = os.path.join(out, f"profile-{repeat}.txt")
        os.makedirs(ours.output, exist_ok=True)
        command = [spy, "record", "--subprocesses", "--format", "raw", "-r", str(args.rate), "-o", raw]
        subprocess.run([*command, "--", *ours.command], cwd=ROOT, check=True, capture_output=True)
        shutil.rmtree(ours.output)
        with open(raw) as handle:
            text += handle.read()
    return statistics.median(cpus), text


def profile(args: argparse.Namespace, extra: list[str]) -> tuple[str, float, float]:
    """(summed raw profile, marginal CPU seconds per image, fixed CPU seconds per run): the
    marginal from the CPU at `images` and at `small`, so start-up never counts per image."""
    spy = shutil.which("py-spy", path=os.path.dirname(sys.executable)) or shutil.which("py-spy")
    if spy is None:
        sys.exit("py-spy is not installed: pip install -r requirements-bench.txt")
    peers.become_subreaper()
    small = args.small or max(1, args.images // 10)
    print(f"{args.task}{' with masks' if args.masks else ''}, {args.images} images, extra {extra or 'none'}:")
    with tempfile.TemporaryDirectory(prefix="bench-profile-") as out:
        cpu_small, _ = _cpu(args, extra, small, out, None)
        cpu, text = _cpu(args, extra, args.images, out, spy)
    if args.save:
        with open(args.save, "w") as handle:
            handle.write(text)
    per_image = (cpu - cpu_small) / (args.images - small)
    per_run = cpu_small - small * per_image
    print(f"  marginal CPU per image {1e3 * per_image:.3f} ms, fixed CPU per run {per_run:.2f} s")
    return text, per_image, per_run


if __name__ == "__main__":
    main()
