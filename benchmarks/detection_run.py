"""A detection run end to end, and what its annotations cost per image: the same synthetic JPEGs
converted as a classification run (class folders) and as a COCO detection run (about 7 boxes an
image), on the DirectRunner in-process and on the portable runner (Beam's local job service and
SDK worker pool, started here as separate processes, as tests/test_portable.py does). Every
detection run must give the same split digests; images/s and boxes/s are per wall second of the
whole command.

    .venv/bin/python benchmarks/detection_run.py                       # 5,000 images, one round
    .venv/bin/python benchmarks/detection_run.py --images 300    # quick check, about a minute

The images are benchmarks/synthetic.py's (400x300 JPEGs of blurred shapes with noise, about
27 KB, one truncated file per thousand plus an empty and a text file, in `cat/` and `dog/`). The
instances file lies outside the input (`--annotations_path`), so both runs list the same files.
Each image has 4 to 10 objects (7 on average, COCO's train2017 has 7.3) of 10 categories, one box
in 50 partly outside the picture (clipped) and one in 200 wholly outside (dropped, named); with
`--variant detection-masks` each object also has an 8-point polygon. Splits
train=0.9,validation=0.1.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import math
import os
import random
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

import psutil

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
sys.path[:0] = [HERE, os.path.join(ROOT, "tests")]

from portable_services import portable_services  # noqa: E402
from synthetic import CLASSES, HEIGHT, WIDTH, ensure_dataset  # noqa: E402

SPLITS = "--splits=train=0.9,validation=0.1"
DETECTION = ["--annotations=coco"]
VARIANTS = {
    "classification": [],
    "detection": DETECTION,
    "detection-masks": [*DETECTION, "--masks"],
    "portable": DETECTION,  # the same command on the portable runner
}
CATEGORIES = [{"id": 1 + 3 * k, "name": f"shape_{k}", "supercategory": "shape"} for k in range(10)]


def write_instances(path: str, images: int, seed: int = 0) -> int:
    """A COCO instances file for synthetic.py's images (their relpaths as file names); its object
    count."""
    rng = random.Random(seed)
    entries, objects = [], []
    for index in range(images):
        label = CLASSES[index % len(CLASSES)]
        entries.append(
            {"id": index, "file_name": f"{label}/{label}.{index:06d}.jpg", "width": WIDTH, "height": HEIGHT}
        )
        for _ in range(rng.randint(4, 10)):
            w, h = rng.uniform(8, 160), rng.uniform(8, 120)
            x, y = rng.uniform(0, WIDTH - w), rng.uniform(0, HEIGHT - h)
            roll = rng.random()
            if roll < 0.005:
                x = WIDTH + 10  # wholly outside: dropped, named in dropped_objects.jsonl
            elif roll < 0.025:
                x = WIDTH - w / 2  # partly outside: clipped, named in changes.jsonl
            box = [round(v, 2) for v in (x, y, w, h)]
            ring = []
            for k in range(8):  # an octagon inside the box
                ring += [
                    round(box[0] + w * (0.5 + 0.5 * math.cos(math.pi * k / 4)), 2),
                    round(box[1] + h * (0.5 + 0.5 * math.sin(math.pi * k / 4)), 2),
                ]
            objects.append(
                {
                    "id": len(objects) + 1,
                    "image_id": index,
                    "category_id": rng.choice(CATEGORIES)["id"],
                    "bbox": box,
                    "area": round(w * h * 0.8, 2),
                    "iscrowd": 0,
                    "segmentation": [ring],
                }
            )
    with open(path, "w") as handle:
        json.dump({"images": entries, "annotations": objects, "categories": CATEGORIES}, handle)
    return len(objects)


def _tree_rss(processes: list[psutil.Process]) -> int:
    total = 0
    for root in processes:
        with contextlib.suppress(psutil.Error):
            for process in [root, *root.children(recursive=True)]:
                with contextlib.suppress(psutil.Error):
                    total += process.memory_info().rss
    return total


def measure(command: list[str], also: list[subprocess.Popen]) -> tuple[float, int]:
    """(wall seconds, peak RSS in bytes of the command's process tree and of `also`'s)."""
    started = time.perf_counter()
    child = subprocess.Popen(command, cwd=ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    watched = [psutil.Process(child.pid), *(psutil.Process(p.pid) for p in also)]
    peak = 0
    while child.poll() is None:
        peak = max(peak, _tree_rss(watched))
        time.sleep(0.05)
    wall = time.perf_counter() - started
    if child.returncode != 0:
        sys.exit(f"{' '.join(command)} failed:\n{child.stderr.read().decode(errors='replace')[-3000:]}")
    return wall, peak


def outcome(out: str) -> dict:
    with open(os.path.join(out, "summary.json")) as handle:
        summary = json.load(handle)
    objects = summary.get("objects") or {}
    return {
        "records": summary["records"],
        "rejects": summary["rejects"],
        "stored": objects.get("stored", 0),
        "annotated": objects.get("annotated", 0),
        "dropped": sum((objects.get("dropped_per_reason") or {}).values()),
        "digests": {name: split["digest"] for name, split in summary["splits"].items()},
    }


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--images", type=int, default=5000)
    parser.add_argument("--repeats", type=int, default=1)
    parser.add_argument("--variant", action="append", choices=sorted(VARIANTS), help="repeatable")
    parser.add_argument("--data", help="dataset folder (default: benchmarks/data/detection-N)")
    args = parser.parse_args()
    variants = args.variant or ["classification", "detection", "portable"]
    data = args.data or os.path.join(HERE, "data", f"detection-{args.images}")
    images = ensure_dataset(os.path.join(data, "images"), args.images)
    instances = os.path.join(data, "instances_synthetic.json")
    if not os.path.exists(instances):
        write_instances(instances, args.images)
    print(json.dumps({"images": args.images, "cores": os.cpu_count(), "load": os.getloadavg()}), flush=True)
    rows: dict[str, dict] = {}
    with tempfile.TemporaryDirectory(prefix="bench-detection-") as folder, contextlib.ExitStack() as stack:
        services, portable_args = [], []
        if "portable" in variants:
            services, portable_args = stack.enter_context(portable_services(folder))
        for repeat in range(args.repeats):
            for variant in variants:  # interleaved, so drift hits every variant alike
                out = os.path.join(folder, f"{variant}-{repeat}")
                command = [sys.executable, "-m", "pipelines.convert", "--input", images, "--output", out]
                command += ["--no_progress", SPLITS, *VARIANTS[variant]]
                if variant != "classification":
                    command.append(f"--annotations_path={instances}")
                command += portable_args if variant == "portable" else ["--runner=DirectRunner"]
                wall, peak = measure(command, services if variant == "portable" else [])
                found = outcome(out)
                shutil.rmtree(out)
                row = rows.setdefault(variant, {"wall": [], "peak": [], **found})
                if found["digests"] != row["digests"]:
                    sys.exit(f"{variant}: the digests differ between rounds")
                row["wall"].append(wall)
                row["peak"].append(peak)
                load = os.getloadavg()[0]
                said = f"{wall:.1f} s, peak {peak / 1e6:.0f} MB, load {load:.2f}"
                print(f"  round {repeat + 1} {variant}: {said}", flush=True)
    detection = [v for v in rows if v != "classification"]
    same = {v: rows[v]["digests"] == rows[detection[0]]["digests"] for v in detection if "masks" not in v}
    heads = f"{'median s':>9}{'records':>8}{'images/s':>9}{'boxes':>8}{'boxes/s':>8}{'peak MB':>8}"
    print(f"\n{'variant':<16}{heads}  digests")
    for variant, row in rows.items():
        wall = statistics.median(row["wall"])
        digests = " ".join(f"{name}:{value[:10]}" for name, value in row["digests"].items())
        print(
            f"{variant:<16}{wall:>9.1f}{row['records']:>8}{row['records'] / wall:>9.0f}{row['stored']:>8}"
            f"{row['stored'] / wall:>8.0f}{max(row['peak']) / 1e6:>8.0f}  {digests}"
        )
    if "classification" in rows and "detection" in rows:
        extra = statistics.median(rows["detection"]["wall"]) - statistics.median(
            rows["classification"]["wall"]
        )
        print(
            f"annotations cost {1000 * extra / rows['detection']['records']:.2f} ms per image (wall, 2 cores)"
        )
    for variant in detection:
        row = rows[variant]
        print(f"{variant}: annotated {row['annotated']} = stored {row['stored']} + dropped {row['dropped']}")
    print(f"same digests as the in-process detection run: {same}")
    if not all(same.values()):
        sys.exit(1)


if __name__ == "__main__":
    main()
