"""This project against the tool its users would otherwise run, whole process against whole
process, on the same files, in interleaved rounds (issue 28):

- `--task detection`: the TensorFlow Object Detection API's COCO converter (benchmarks/
  od_api_coco.py) against `python -m pipelines.convert --annotations coco`, on N real photographs
  with boxes and polygons (benchmarks/photos.py); `--masks` stores masks in both;
  `--peer_validates` has the peer decode every image too (the check this project makes).
- `--task classification`: the tutorials' loop (benchmarks/tf_loop.py) against
  `python -m pipelines.convert`, on N synthetic JPEGs in two class folders (benchmarks/synthetic.py,
  the set benchmarks/run.py uses).
- either task, `--ours_without_decode`: a third tool, this project's command with the validating
  decode skipped (benchmarks/without_decode: a measurement, never an option of the product), so
  the table shows what everything but the check costs against the peer, and the check itself.
- detection, `--least_work`: two more tools, benchmarks/least_work.py: the least work that
  writes this project's records (the same bytes, checked), and the same loop through this
  project's own steps without Beam (`--library`), so the table shows what the output needs, what
  the checks and the plan add, and what the runner and the output's bookkeeping add.
- either task, `--baseline ROOT`: one more tool, this project's same command from another checkout
  (an earlier commit: `git worktree add --detach /tmp/base COMMIT`), run with ROOT first on
  PYTHONPATH and ROOT as its folder, so that ROOT's `pipelines` and `beam_tfrecord` are the ones
  imported (checked before the first round: each command's own interpreter says where they come
  from; both checkouts' packages are compiled to bytecode first). It is named `convert @ COMMIT`,
  printed beside this checkout's, run in the same rounds on the same files and writes to a folder
  of its own. Its records are counted as the others' are, and in the first round both checkouts'
  records are compared as a multiset of bytes (the planned shards' order aside); the table ends
  with this checkout against it, paired by round.

    .venv/bin/python benchmarks/peers.py --task detection --images 12000 --rounds 3
    .venv/bin/python benchmarks/peers.py --task detection --images 12000 --rounds 3 --masks
    .venv/bin/python benchmarks/peers.py --task detection --images 12000 --rounds 3 --peer_validates
    .venv/bin/python benchmarks/peers.py --task classification --images 32000 --rounds 3
    .venv/bin/python benchmarks/peers.py --task detection --images 12000 --rounds 3 --ours_without_decode
    .venv/bin/python benchmarks/peers.py --task detection --images 12000 --rounds 3 --least_work
    .venv/bin/python benchmarks/peers.py --task detection --images 12000 --rounds 5 --baseline /tmp/base
    .venv/bin/python benchmarks/peers.py --task detection --images 300 --rounds 2   # a check, < 1 min

Arguments it does not know go to this project's command (say `--direct_num_workers=2`).

For each run: wall time; CPU time, user + system of the whole process tree (this process is the
tree's subreaper, so a worker its parent leaves behind is reaped here and counted: getrusage
(RUSAGE_CHILDREN) after every descendant has exited); peak memory, the sum of the tree's RSS
polled every 50 ms (shared pages counted in each process, as benchmarks/run.py counts them), and
of their PSS (shared pages split: fairer to a pool forked after `import tensorflow`);
start-up, the time from the command to the first read of an input image (inotify on the image
folders: the first IN_ACCESS of a file in them, by whatever process). The medians of the rounds
are printed side by side with each other tool's ratio to the peer (below 1.0: that tool spends
less). The records each wrote are counted from the files.
"""

from __future__ import annotations

import argparse
import contextlib
import ctypes
import ctypes.util
import errno
import hashlib
import json
import os
import platform
import resource
import select
import shutil
import statistics
import struct
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Iterable
from dataclasses import asdict, dataclass, field

import psutil

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
sys.path[:0] = [HERE, ROOT]

from checkouts import checkout_name, compile_packages, imported_from, pythonpath_first, under  # noqa: E402
from photos import IMAGE_FOLDER, SPLIT_FILE, ensure_photos  # noqa: E402
from synthetic import CLASSES, ensure_dataset  # noqa: E402

from beam_tfrecord.write.tfrecord_files import iter_records  # noqa: E402

_PR_SET_CHILD_SUBREAPER = 36
_IN_ACCESS = 0x00000001
_IN_ISDIR = 0x40000000
_IN_NONBLOCK = 0o4000
_IN_CLOEXEC = 0o2000000
_EVENT = struct.Struct("iIII")  # wd, mask, cookie, len (then len bytes of name)


@dataclass
class Run:
    """One whole-process run's figures."""

    wall_s: float
    cpu_s: float  # user + system of the process and every descendant
    user_s: float
    sys_s: float
    peak_mb: float  # the tree's summed RSS at its highest
    peak_pss_mb: float  # the tree's summed PSS at its highest (shared pages split)
    first_read_s: float | None  # from the command to the first read of an input image
    records: int
    load: float  # the 1-minute load average when it ended


@dataclass
class Tool:
    name: str
    command: list[str]
    output: str
    runs: list[Run] = field(default_factory=list)
    env: dict[str, str] = field(default_factory=dict)  # over this process's environment
    cwd: str = ROOT  # the folder it runs in: `python -m` imports from there first


class FirstRead:
    """Times the first read of any file in `folders` (inotify IN_ACCESS; reads of the folders
    themselves, a listing, do not count), from a thread that blocks on the inotify descriptor."""

    def __init__(self, folders: Iterable[str]) -> None:
        libc = ctypes.CDLL(ctypes.util.find_library("c"), use_errno=True)
        self._fd = libc.inotify_init1(_IN_NONBLOCK | _IN_CLOEXEC)
        if self._fd < 0:
            raise OSError(ctypes.get_errno(), "inotify_init1")
        for folder in folders:
            if libc.inotify_add_watch(self._fd, folder.encode(), _IN_ACCESS) < 0:
                raise OSError(ctypes.get_errno(), f"inotify_add_watch {folder}")
        self.at: float | None = None
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._watch, daemon=True)
        self._thread.start()

    def _watch(self) -> None:
        while not self._stop.is_set():
            ready, _, _ = select.select([self._fd], [], [], 0.1)
            if not ready:
                continue
            now = time.perf_counter()
            try:
                data = os.read(self._fd, 65536)
            except BlockingIOError:
                continue
            offset = 0
            while offset < len(data):
                _, mask, _, length = _EVENT.unpack_from(data, offset)
                offset += _EVENT.size + length
                if length and not mask & _IN_ISDIR:
                    self.at = now
                    return

    def close(self) -> None:
        self._stop.set()
        self._thread.join()
        os.close(self._fd)


def _tree_memory() -> tuple[int, int]:
    """(summed RSS, summed PSS) of every descendant of this process (orphans are ours:
    subreaper). RSS counts a page shared by forked workers in each; PSS splits it among them."""
    rss = pss = 0
    for process in psutil.Process().children(recursive=True):
        with contextlib.suppress(psutil.Error):
            memory = process.memory_full_info()
            rss, pss = rss + memory.rss, pss + memory.pss
    return rss, pss


def _reap_descendants(timeout: float = 60.0) -> None:
    """Wait for whatever the command left running (reparented here), so its CPU time counts."""
    deadline = time.monotonic() + timeout
    while True:
        try:
            pid, _ = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            return
        if pid == 0:
            if time.monotonic() > deadline:
                for process in psutil.Process().children(recursive=True):
                    with contextlib.suppress(psutil.Error):
                        process.kill()
                deadline = float("inf")
            time.sleep(0.02)


def measure(
    command: list[str], watched: Iterable[str], env: dict[str, str] | None = None, cwd: str = ROOT
) -> tuple[float, float, float, tuple[int, int], float | None]:
    """(wall, user, sys, (peak RSS, peak PSS) in bytes, first read) of `command` and all its
    descendants, run in `cwd` with `env` over this process's environment."""
    _reap_descendants(0)
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    first = FirstRead(watched)
    started = time.perf_counter()
    environment = {**os.environ, **(env or {})}
    child = subprocess.Popen(
        command, cwd=cwd, env=environment, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE
    )
    stderr: list[bytes] = []
    reader = threading.Thread(target=lambda: stderr.append(child.stderr.read()), daemon=True)
    reader.start()
    peak_rss = peak_pss = 0
    while child.poll() is None:
        rss, pss = _tree_memory()
        peak_rss, peak_pss = max(peak_rss, rss), max(peak_pss, pss)
        time.sleep(0.05)
    wall = time.perf_counter() - started
    _reap_descendants()
    reader.join()
    first.close()
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    said = b"".join(stderr).decode(errors="replace")
    if child.returncode != 0:
        sys.exit(f"{' '.join(command)} failed ({child.returncode}):\n{said[-3000:]}")
    if "Error in sitecustomize" in said:  # Python goes on without it: the run measured the wrong thing
        sys.exit(f"{' '.join(command)}: its sitecustomize failed to load:\n{said[-3000:]}")
    read_at = None if first.at is None else first.at - started
    user, system = after.ru_utime - before.ru_utime, after.ru_stime - before.ru_stime
    return wall, user, system, (peak_rss, peak_pss), read_at


def _record_files(output: str) -> Iterable[str]:
    for folder, _, names in os.walk(output):
        for name in names:
            if name.endswith(".tfrecord") or ".tfrecord-" in name:
                yield os.path.join(folder, name)


def count_records(output: str) -> int:
    """Records in every TFRecord file under `output` (this project's read-side framing, no TF)."""
    total = 0
    for path in _record_files(output):
        with open(path, "rb") as handle:
            total += sum(1 for _ in iter_records(handle, check_crc=False))
    return total


def records_digest(output: str) -> str:
    """A digest of the multiset of records under `output`: equal for two outputs that hold the
    same records byte for byte, whatever shard or order each landed in."""
    digests = []
    for path in _record_files(output):
        with open(path, "rb") as handle:
            digests += [hashlib.sha256(record).digest() for record in iter_records(handle, check_crc=False)]
    return hashlib.sha256(b"".join(sorted(digests))).hexdigest()


def detection_tools(
    data: str, out: str, masks: bool, extra: list[str], peer_validates: bool = False
) -> tuple[list[Tool], list[str]]:
    images = os.path.join(data, IMAGE_FOLDER)
    instances = os.path.join(data, SPLIT_FILE)
    peer_out = os.path.join(out, "peer")
    peer = [sys.executable, os.path.join(HERE, "od_api_coco.py"), "--image_dir", images]
    peer += ["--object_annotations_file", instances, "--output_file_prefix", os.path.join(peer_out, "train")]
    peer += ["--num_shards", "10", *(["--include_masks"] if masks else [])]
    peer += ["--validate"] if peer_validates else []
    ours_out = os.path.join(out, "ours")
    ours = [sys.executable, "-m", "pipelines.convert", "--input", images, "--output", ours_out]
    ours += ["--annotations", "coco", f"--annotations_path=train={instances}", "--runner=DirectRunner"]
    ours += ["--no_progress", *(["--masks"] if masks else []), *extra]
    name = "od_api_coco+decode" if peer_validates else "od_api_coco"
    tools = [Tool(name, peer, peer_out), Tool("pipelines.convert", ours, ours_out)]
    return tools, [images]


LEAST_WORK_TOOLS = ("least_work", "checked_steps", "library_steps")


def least_work_tools(data: str, out: str) -> list[Tool]:
    """benchmarks/least_work.py on the detection set: this project's records and nothing else
    (`least_work`), with the project's checks and plan on the least work's record path
    (`checked_steps`), and with the library's own steps, without Beam (`library_steps`)."""
    command = [sys.executable, os.path.join(HERE, "least_work.py"), "--image_dir"]
    command += [os.path.join(data, IMAGE_FOLDER), "--instances", os.path.join(data, SPLIT_FILE)]
    tools = []
    for name, flags in zip(LEAST_WORK_TOOLS, ([], ["--checked"], ["--library"]), strict=True):
        output = os.path.join(out, name)
        tools.append(Tool(name, [*command, "--output", output, *flags], output))
    return tools


def classification_tools(data: str, out: str, extra: list[str]) -> tuple[list[Tool], list[str]]:
    loop_out = os.path.join(out, "loop")
    loop = [sys.executable, os.path.join(HERE, "tf_loop.py"), data, os.path.join(loop_out, "loop.tfrecord")]
    ours_out = os.path.join(out, "ours")
    ours = [sys.executable, "-m", "pipelines.convert", "--input", data, "--output", ours_out]
    ours += ["--runner=DirectRunner", "--no_progress", *extra]
    tools = [Tool("tf_loop", loop, loop_out), Tool("pipelines.convert", ours, ours_out)]
    return tools, [os.path.join(data, label) for label in CLASSES]


def without_decode(ours: Tool, out: str) -> Tool:
    """This project's command again, every process of it skipping the validating decode
    (benchmarks/without_decode/sitecustomize.py), writing beside the others under `out`."""
    skip = os.path.join(HERE, "without_decode")
    path = os.pathsep.join(p for p in (skip, ROOT, os.environ.get("PYTHONPATH")) if p)
    output = os.path.join(out, "ours-without-decode")
    if ours.command.count(ours.output) != 1:
        raise ValueError(f"{ours.command}: not one --output {ours.output} to write elsewhere")
    command = [output if arg == ours.output else arg for arg in ours.command]
    return Tool("convert, no decode", command, output, env={"PYTHONPATH": path})


def baseline(ours: Tool, root: str, out: str) -> Tool:
    """This project's command again, from the checkout at `root`: run in `root` (`python -m`
    imports from its folder first) with `root` first on PYTHONPATH (this checkout left off it), so
    that it and every process it starts import `root`'s `pipelines` and `beam_tfrecord`; writing
    beside the others under `out`."""
    if ours.command.count(ours.output) != 1:
        raise ValueError(f"{ours.command}: not one --output {ours.output} to write elsewhere")
    output = os.path.join(out, "ours-baseline")
    command = [output if arg == ours.output else arg for arg in ours.command]
    name = f"convert @ {checkout_name(root)}"
    return Tool(name, command, output, env=pythonpath_first(root, ROOT), cwd=os.path.abspath(root))


def check_checkout(tool: Tool, root: str) -> None:
    """Stop unless `tool` imports this project's packages from the checkout at `root`; compile
    them there first, so that the first round of neither checkout pays for writing bytecode."""
    compile_packages(tool.command[0], root)
    try:
        files = imported_from(tool.command[0], tool.cwd, tool.env)
    except RuntimeError as error:
        sys.exit(f"{tool.name}: {error}")
    print(f"  {tool.name} imports {', '.join(files)}", flush=True)
    outside = [path for path in files if not under(path, root)]
    if outside:
        sys.exit(f"{tool.name}: {', '.join(outside)} is not under {root}")


DEFAULT_IMAGES = {"detection": 12_000, "classification": 32_000}


def add_task_arguments(parser: argparse.ArgumentParser) -> None:
    """--task, --images and --seed, as every benchmark of the two tasks takes them."""
    parser.add_argument("--task", choices=tuple(DEFAULT_IMAGES), default="detection")
    parser.add_argument(
        "--images", type=int, help="default: 12000 photos (detection), 32000 (classification)"
    )
    parser.add_argument("--seed", type=int, default=0)


def task_tools(
    task: str,
    images: int,
    seed: int,
    out: str,
    extra: list[str],
    masks: bool = False,
    least_work: bool = False,
) -> tuple[list[Tool], list[str]]:
    """The task's set of `images` under benchmarks/data (made on first use) and its two tools
    writing under `out` (the peer, then this project), with the folders of images they read;
    `least_work` adds benchmarks/least_work.py's two (detection)."""
    kind = "photos" if task == "detection" else "synthetic"
    data = os.path.join(HERE, "data", f"{kind}-{images}-{seed}")
    if task == "detection":
        ensure_photos(data, images, seed)
        tools, watched = detection_tools(data, out, masks, extra)
        if least_work:
            tools += least_work_tools(data, out)
        return tools, watched
    ensure_dataset(data, images, seed)
    return classification_tools(data, out, extra)


def _median(runs: list[Run], name: str) -> float | None:
    values = [getattr(run, name) for run in runs if getattr(run, name) is not None]
    return statistics.median(values) if values else None


def report(tools: list[Tool], images: int) -> list[str]:
    """The side-by-side table: medians of the rounds, and each other tool's ratio to the peer
    (the first)."""
    peer, others = tools[0], tools[1:]
    rows = [
        ("wall s", "wall_s", 1.0, "{:.2f}"),
        ("CPU s (user+sys)", "cpu_s", 1.0, "{:.2f}"),
        ("CPU ms per image", "cpu_s", 1000.0 / images, "{:.3f}"),
        ("peak MB (tree RSS)", "peak_mb", 1.0, "{:.0f}"),
        ("peak MB (tree PSS)", "peak_pss_mb", 1.0, "{:.0f}"),
        ("start-up s (to 1st read)", "first_read_s", 1.0, "{:.2f}"),
        ("records", "records", 1.0, "{:.0f}"),
    ]
    header = f"{'median of ' + str(len(peer.runs)) + ' rounds':<26}{peer.name:>19}"
    header += "".join(f"{tool.name:>20}{'ratio':>8}" for tool in others)
    lines = [header]
    for label, name, scale, form in rows:
        base = _median(peer.runs, name)
        line = f"{label:<26}{form.format(base * scale) if base is not None else '-':>19}"
        for tool in others:
            value = _median(tool.runs, name)
            shown = form.format(value * scale) if value is not None else "-"
            ratio = f"{value / base:.2f}" if base and value is not None and name != "records" else ""
            line += f"{shown:>20}{ratio:>8}"
        lines.append(line)
    return lines


def paired(tool: Tool, base: Tool) -> str:
    """`tool` against `base`, each round's ratio (the two ran in the same round), then the median
    of those ratios, which a machine whose speed drifts over the run moves less."""
    parts = []
    for label, name in (("wall", "wall_s"), ("CPU", "cpu_s")):
        ratios = [getattr(a, name) / getattr(b, name) for a, b in zip(tool.runs, base.runs, strict=True)]
        shown = ", ".join(f"{r:.2f}" for r in ratios)
        parts.append(f"{label} {statistics.median(ratios):.3f}x (rounds: {shown})")
    return f"{tool.name} / {base.name}, paired by round: " + "; ".join(parts)


def become_subreaper() -> None:
    """Orphaned descendants are reparented here, so measure() reaps them and counts their CPU."""
    libc = ctypes.CDLL(ctypes.util.find_library("c"), use_errno=True)
    if libc.prctl(_PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) != 0:
        sys.exit(f"prctl(PR_SET_CHILD_SUBREAPER): {os.strerror(ctypes.get_errno() or errno.EPERM)}")


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    add_task_arguments(parser)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--masks", action="store_true", help="detection: store instance masks in both")
    parser.add_argument(
        "--data", help="the set's folder (default: benchmarks/data/photos-N-SEED or synthetic-N-SEED)"
    )
    parser.add_argument(
        "--peer_validates",
        action="store_true",
        help="detection: the peer also decodes every image (tf.io.decode_image) and skips one that fails",
    )
    parser.add_argument(
        "--ours_without_decode",
        action="store_true",
        help="also run this project with the validating decode skipped (benchmarks/without_decode)",
    )
    parser.add_argument(
        "--least_work",
        action="store_true",
        help="detection: also run benchmarks/least_work.py, plain and --library",
    )
    parser.add_argument(
        "--baseline",
        metavar="ROOT",
        help="another checkout of this project (an earlier commit): also run its command, in the same rounds",
    )
    parser.add_argument("--json", help="also write every run's figures here")
    args, extra = parser.parse_known_args()
    if args.masks and args.task != "detection":
        parser.error("--masks is for --task detection")
    if args.least_work and (args.task != "detection" or args.masks):
        parser.error("--least_work is for --task detection, without --masks")
    become_subreaper()
    images = args.images or DEFAULT_IMAGES[args.task]
    kind = "photos" if args.task == "detection" else "synthetic"
    data = args.data or os.path.join(HERE, "data", f"{kind}-{images}-{args.seed}")
    if args.task == "detection":
        ensure_photos(data, images, args.seed)
    else:
        ensure_dataset(data, images, args.seed)
    with tempfile.TemporaryDirectory(prefix="bench-peers-") as out:
        if args.task == "detection":
            tools, watched = detection_tools(data, out, args.masks, extra, args.peer_validates)
        else:
            tools, watched = classification_tools(data, out, extra)
        ours = tools[1]
        if args.ours_without_decode:
            tools.append(without_decode(ours, out))
        if args.least_work:
            tools += least_work_tools(data, out)
        base = None
        if args.baseline:
            base = baseline(ours, args.baseline, out)
            tools.insert(2, base)  # its column beside this checkout's
        for tool in tools:
            os.makedirs(tool.output, exist_ok=True)
        size = sum(
            entry.stat().st_size for folder in watched for entry in os.scandir(folder) if entry.is_file()
        )
        print(
            f"{args.task}{' with masks' if args.masks else ''}: {images} images, {size / 1e6:.0f} MB, "
            f"{os.cpu_count()} cores, Python {platform.python_version()}, load {os.getloadavg()}, "
            f"extra args for pipelines.convert: {extra or 'none'}",
            flush=True,
        )
        if base is not None:
            check_checkout(ours, ROOT)
            check_checkout(base, args.baseline)
        digests: dict[str, str] = {}
        for round_index in range(args.rounds):
            order = tools if round_index % 2 == 0 else tools[::-1]  # ABBA: drift hits all alike
            for tool in order:
                wall, user, system, peaks, first = measure(tool.command, watched, tool.env, tool.cwd)
                records = count_records(tool.output)
                if base is not None and round_index == 0 and (tool is ours or tool is base):
                    digests[tool.name] = records_digest(tool.output)
                shutil.rmtree(tool.output)
                os.makedirs(tool.output)
                peak, pss = peaks[0] / 1e6, peaks[1] / 1e6
                run = Run(wall, user + system, user, system, peak, pss, first, records, os.getloadavg()[0])
                tool.runs.append(run)
                start = f"{first:.2f} s" if first is not None else "-"
                print(
                    f"  round {round_index + 1} {tool.name:<18} wall {wall:6.2f} s  "
                    f"CPU {user + system:6.2f} s "
                    f"(user {user:.2f}, sys {system:.2f})  peak {peak:5.0f} MB (PSS {pss:.0f})  "
                    f"first read {start}  "
                    f"records {records}  load {run.load:.2f}",
                    flush=True,
                )
    print()
    print("\n".join(report(tools, images)))
    if base is not None:
        print(paired(ours, base))
        counts = {tool.name: [run.records for run in tool.runs] for tool in (ours, base)}
        same = digests[ours.name] == digests[base.name] and counts[ours.name] == counts[base.name]
        print(
            f"records of {ours.name} and {base.name}: "
            + (
                "the same count each round, the same bytes (a multiset, first round)"
                if same
                else f"DIFFERENT: counts by round {counts}, digests of the first round {digests}"
            )
        )
    if args.json:
        with open(args.json, "w") as handle:
            json.dump(
                {
                    "task": args.task,
                    "masks": args.masks,
                    "peer_validates": args.peer_validates,
                    "ours_without_decode": args.ours_without_decode,
                    "least_work": args.least_work,
                    "baseline": args.baseline and {"root": os.path.abspath(args.baseline), "tool": base.name},
                    "records_digests": digests,
                    "images": images,
                    "extra": extra,
                    "tools": {tool.name: [asdict(run) for run in tool.runs] for tool in tools},
                },
                handle,
                indent=2,
            )


if __name__ == "__main__":
    main()
