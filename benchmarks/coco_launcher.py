"""What reading a large COCO instances file costs the launcher: the time and peak memory of
`load_annotations("coco", ...)` for a synthetic file of 1,000,000 annotations over 200,000 images
(the issue's scale floor), against a plain `json.load` of the same file for reference.

    .venv/bin/python benchmarks/coco_launcher.py
    .venv/bin/python benchmarks/coco_launcher.py --images 20000 --annotations 100000 --points 8

The file is shaped like COCO's train2017 (448 MB for 860,001 annotations over 118,287 images):
80 categories with COCO's ids (1..90, with gaps), five objects per image, each with a box, an
area and a polygon of `--points` vertices (COCO's average is about 24), and one in a hundred a
crowd with a compressed run-length mask. Its images are a synthetic listing of paths (the COCO
source reads no image). Each measurement runs in a fresh process, so its peak RSS is its own;
`rss_before_mb` is that process's RSS before the read (the interpreter, Beam and the listing).
"""

from __future__ import annotations

import argparse
import json
import os
import random
import resource
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
sys.path.insert(0, ROOT)

COCO_IDS = [i for i in range(1, 91) if i not in {12, 26, 29, 30, 45, 66, 68, 69, 71, 83}]


def write_instances(path: str, images: int, annotations: int, points: int, seed: int = 0) -> int:
    """A synthetic instances file, written piece by piece (never one dict in memory); its bytes."""
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
                entry["segmentation"] = [ring]
            out.write(("," if ann_id > 1 else "") + json.dumps(entry))
        categories = [{"id": i, "name": f"class_{i:02d}", "supercategory": "thing"} for i in COCO_IDS]
        out.write('], "categories": ' + json.dumps(categories) + "}")
    return os.path.getsize(path)


def measure(path: str, images: int, mode: str) -> dict[str, float]:
    """Runs in its own process: seconds and peak RSS of one read of `path`."""
    from beam_tfrecord.plan.annotations.sources import load_annotations
    from beam_tfrecord.plan.listing import InputFile

    files = [
        InputFile(f"train2017/{i:012d}.jpg", f"gs://bucket/coco/train2017/{i:012d}.jpg", 160_000)
        for i in range(1, images + 1)
    ]
    before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    started = time.perf_counter()
    if mode == "json.load":
        with open(path, "rb") as handle:
            document = json.load(handle)
        result = {"objects": len(document["annotations"])}
    else:
        found = load_annotations("coco", files, path, masks=mode == "masks")
        result = {
            "objects": found.object_count,
            "unmatched": len(found.unmatched),
            "dropped": len(found.dropped),
        }
    elapsed = time.perf_counter() - started
    return {
        "mode": mode,
        "seconds": round(elapsed, 2),
        "rss_before_mb": round(before),
        "peak_rss_mb": round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024),
        **result,
    }


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--images", type=int, default=200_000)
    parser.add_argument("--annotations", type=int, default=1_000_000)
    parser.add_argument("--points", type=int, default=24, help="polygon vertices per object")
    parser.add_argument(
        "--modes", default="masks,boxes,json.load", help="masks: polygons kept; boxes: masks=False"
    )
    parser.add_argument("--measure", nargs=3, metavar=("PATH", "IMAGES", "MODE"), help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.measure:
        path, images, mode = args.measure
        print(json.dumps(measure(path, int(images), mode)))
        return
    with tempfile.TemporaryDirectory(prefix="bench-coco-") as folder:
        path = os.path.join(folder, "instances_train2017.json")
        started = time.perf_counter()
        size = write_instances(path, args.images, args.annotations, args.points)
        print(
            json.dumps(
                {
                    "images": args.images,
                    "annotations": args.annotations,
                    "points": args.points,
                    "file_mb": round(size / 1e6),
                    "generate_s": round(time.perf_counter() - started, 1),
                }
            ),
            flush=True,
        )
        for mode in args.modes.split(","):
            command = [sys.executable, __file__, "--measure", path, str(args.images), mode]
            print(
                subprocess.run(command, check=True, capture_output=True, text=True).stdout.strip(), flush=True
            )


if __name__ == "__main__":
    main()
