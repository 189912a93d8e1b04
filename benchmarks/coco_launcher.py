"""What a detection run costs the launcher before any worker starts, at COCO's scale: the whole
`prepare()` (list, read the instances file, match its file names to the listing, plan, make the
shard tasks with their objects, fingerprint them for resume, stage them) and building the job
graph, for a synthetic COCO tree, with the time of each step and the peak RSS.

    .venv/bin/python benchmarks/coco_launcher.py                  # 1,000,000 objects, 120,000 images
    .venv/bin/python benchmarks/coco_launcher.py --images 2000 --annotations 15000   # quick check, ~1 min

The tree is shaped like COCO's (`annotations/instances_train2017.json` beside `train2017/`):
the file like train2017's (448 MB for 860,001 annotations over 118,287 images): 80 categories
with COCO's ids (1..90, with gaps), each object with a box, an area and a polygon of `--points`
vertices (COCO's average is about 24), one in a hundred a crowd with a compressed run-length mask.
The images are real files, listed as a run lists them, but sparse (160 KB each by their size,
no bytes on disk): planning reads no image. The output is a local folder. Splits
train=0.8,validation=0.2, a parallelism of 40 (10 workers of 4 vCPUs), as benchmarks/launcher.py.

Each mode runs in a fresh process, so its peak RSS is its own: `boxes` (masks=False), `masks`
(polygons and run lengths kept and staged), and `json.load` of the same file for reference;
`boxes-gc` and `masks-gc` leave Python's cycle collector on while planning (beam_tfrecord.plan.bulk).
`rss_before_mb` is the process's RSS before `prepare()` (the interpreter and Beam). The steps
are timed by wrapping the functions `prepare()` calls, which otherwise runs as is.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import random
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from typing import Any

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
sys.path.insert(0, ROOT)

COCO_IDS = [i for i in range(1, 91) if i not in {12, 26, 29, 30, 45, 66, 68, 69, 71, 83}]


def write_instances(
    path: str, images: int, annotations: int, points: int, seed: int = 0, malformed_every: int = 0
) -> int:
    """A synthetic instances file, written piece by piece (never one dict in memory); its bytes.
    With `malformed_every`, one polygon in that many has two points (COCO's train2017 has a few):
    its mask is left out and the change is named."""
    from beam_tfrecord.plan.annotations.rle import encode_counts

    rng = random.Random(seed)
    with open(path, "w") as out:
        out.write('{"info": {"description": "synthetic", "year": 2026}, "licenses": [], "images": [')
        for image_id in range(1, images + 1):
            entry = {
                "id": image_id,
                "file_name": f"{image_id:012d}.jpg",
                "width": 640,
                "height": 480,
                "license": 1,
                "date_captured": "2026-01-01 00:00:00",
            }
            out.write(("," if image_id > 1 else "") + json.dumps(entry))
        out.write('], "annotations": [')
        for ann_id in range(1, annotations + 1):
            x, y = round(rng.uniform(0, 500), 2), round(rng.uniform(0, 380), 2)
            w, h = round(rng.uniform(4, 140), 2), round(rng.uniform(4, 100), 2)
            entry = {
                "id": ann_id,
                "image_id": (ann_id - 1) % images + 1,
                "category_id": rng.choice(COCO_IDS),
                "bbox": [x, y, w, h],
                "area": round(w * h * 0.7, 4),
                "iscrowd": 0,
            }
            if ann_id % 100 == 0:
                runs = [int(x) * 480 + int(y)] + [int(h), 480 - int(h)] * (int(w) - 1) + [int(h)]
                runs.append(640 * 480 - sum(runs))
                entry["iscrowd"] = 1
                entry["segmentation"] = {"size": [480, 640], "counts": encode_counts(runs)}
            else:
                ring = []
                for k in range(points):
                    ring += [round(x + w * rng.random(), 2), round(y + h * (k / points), 2)]
                if malformed_every and ann_id % malformed_every == 1:
                    ring = ring[:4]
                entry["segmentation"] = [ring]
            out.write(("," if ann_id > 1 else "") + json.dumps(entry))
        categories = [{"id": i, "name": f"class_{i:02d}", "supercategory": "thing"} for i in COCO_IDS]
        out.write('], "categories": ' + json.dumps(categories) + "}")
    return os.path.getsize(path)


def make_tree(root: str, images: int, annotations: int, points: int, malformed_every: int = 0) -> int:
    """`root/annotations/instances_train2017.json` and `root/train2017/<id>.jpg` (sparse files
    of 160 KB); the instances file's bytes."""
    os.makedirs(os.path.join(root, "annotations"))
    folder = os.path.join(root, "train2017")
    os.makedirs(folder)
    for image_id in range(1, images + 1):
        with open(os.path.join(folder, f"{image_id:012d}.jpg"), "wb") as handle:
            handle.truncate(160_000)
    file = os.path.join(root, "annotations", "instances_train2017.json")
    return write_instances(file, images, annotations, points, malformed_every=malformed_every)


def _rss_mb() -> float:
    with open("/proc/self/statm") as handle:
        return int(handle.read().split()[1]) * os.sysconf("SC_PAGE_SIZE") / 2**20


def _peak_mb() -> float:
    """VmHWM, not ru_maxrss: that one keeps the forking parent's peak across exec."""
    with open("/proc/self/status") as handle:
        return int(next(line for line in handle if line.startswith("VmHWM:")).split()[1]) / 1024


def _timed(steps: dict[str, Any], name: str, function: Callable[..., Any]) -> Callable[..., Any]:
    """`function`, timed into steps[name] (seconds, and the RSS when it returns)."""

    def timed(*args: Any, **kwargs: Any) -> Any:
        started = time.perf_counter()
        result = function(*args, **kwargs)
        steps[f"{name}_s"] = round(steps.get(f"{name}_s", 0) + time.perf_counter() - started, 2)
        steps[f"rss_after_{name}_mb"] = round(_rss_mb())
        return result

    return timed


def measure(root: str, output: str, mode: str) -> dict[str, Any]:
    """Runs in its own process: one `prepare()` of the tree (or json.load of its file)."""
    import apache_beam as beam

    from beam_tfrecord import pipeline as pipeline_lib
    from beam_tfrecord.config import ConvertConfig, SourceConfig
    from beam_tfrecord.plan import staging
    from beam_tfrecord.plan.annotations.options import AnnotationConfig
    from beam_tfrecord.plan.sources import coco

    before = _rss_mb()
    started = time.perf_counter()
    if mode == "json.load":
        with open(os.path.join(root, "annotations", "instances_train2017.json"), "rb") as handle:
            document = json.load(handle)
        return {
            "mode": mode,
            "objects": len(document["annotations"]),
            "prepare_s": round(time.perf_counter() - started, 2),
            "rss_before_mb": round(before),
            "peak_rss_mb": round(_peak_mb()),
        }
    steps: dict[str, Any] = {}
    if mode.endswith("-gc"):  # the cycle collector left on while planning (plan.bulk)
        from beam_tfrecord.plan import bulk

        bulk.cycles_paused = contextlib.nullcontext
    pipeline_lib.list_inputs = _timed(steps, "list", pipeline_lib.list_inputs)
    coco.FORMAT.load = _timed(steps, "annotations", coco.FORMAT.load)  # type: ignore[method-assign]
    pipeline_lib.make_plan = _timed(steps, "plan", pipeline_lib.make_plan)
    pipeline_lib.shard_tasks = _timed(steps, "tasks", pipeline_lib.shard_tasks)
    pipeline_lib._fingerprint = _timed(steps, "fingerprint", pipeline_lib._fingerprint)
    staging.stage_plan = _timed(steps, "stage", staging.stage_plan)
    splits = {"train": 0.8, "validation": 0.2}
    source = SourceConfig(
        input=root,
        label_source="none",
        splits=splits,
        annotations=AnnotationConfig("coco", masks=mode.startswith("masks")),
    )
    config = ConvertConfig(output=output)
    staged = pipeline_lib.prepare(source, config, parallelism=40)
    prepared = time.perf_counter()
    graph = beam.Pipeline(runner="FnApiRunner")
    _ = graph | pipeline_lib.ImagesToTFRecords(staged, config)
    graph_bytes = len(graph.to_runner_api().SerializeToString())
    staged_bytes = sum(
        os.path.getsize(os.path.join(d, f)) for d, _, names in os.walk(staged.plan_dir) for f in names
    )
    facts = staging.load_facts(staged.plan_dir)
    return {
        "mode": mode,
        "inputs": staged.inputs,
        "shards": sum(staged.shard_counts.values()),
        "objects": facts.kinds.get("objects", {}).get("annotated", 0),
        "prepare_s": round(prepared - started, 2),
        **steps,
        "graph_s": round(time.perf_counter() - prepared, 2),
        "graph_kb": round(graph_bytes / 1e3, 1),
        "staged_mb": round(staged_bytes / 1e6, 1),
        "rss_before_mb": round(before),
        "peak_rss_mb": round(_peak_mb()),
    }


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--images", type=int, default=120_000)
    parser.add_argument("--annotations", type=int, default=1_000_000)
    parser.add_argument("--points", type=int, default=24, help="polygon vertices per object")
    parser.add_argument(
        "--malformed_every", type=int, default=0, help="one polygon in N has two points (0: none)"
    )
    parser.add_argument("--modes", default="boxes,masks,json.load", help="boxes: masks=False; masks: kept")
    parser.add_argument(
        "--keep", help="make the tree here (reused when it is there), not in a temporary folder"
    )
    parser.add_argument("--measure", nargs=3, metavar=("ROOT", "OUTPUT", "MODE"), help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.measure:
        print(json.dumps(measure(*args.measure)))
        return
    with tempfile.TemporaryDirectory(prefix="bench-coco-") as folder:
        root = args.keep or os.path.join(folder, "coco")
        file = os.path.join(root, "annotations", "instances_train2017.json")
        started = time.perf_counter()
        if not os.path.exists(file):
            make_tree(root, args.images, args.annotations, args.points, args.malformed_every)
        print(
            json.dumps(
                {
                    "images": args.images,
                    "annotations": args.annotations,
                    "points": args.points,
                    "malformed_every": args.malformed_every,
                    "file_mb": round(os.path.getsize(file) / 1e6),
                    "generate_s": round(time.perf_counter() - started, 1),
                    "load": os.getloadavg()[0],
                }
            ),
            flush=True,
        )
        for mode in args.modes.split(","):
            output = os.path.join(folder, f"out-{mode}")
            command = [sys.executable, __file__, "--measure", root, output, mode]
            row = json.loads(subprocess.run(command, check=True, capture_output=True, text=True).stdout)
            print(json.dumps({**row, "load": os.getloadavg()[0]}), flush=True)


if __name__ == "__main__":
    main()
