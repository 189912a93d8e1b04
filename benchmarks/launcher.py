"""What the launcher costs before any worker starts, for a large synthetic listing: planning,
staging the plan as files, and building the job graph, with the graph's size and peak memory.

    .venv/bin/python benchmarks/launcher.py --inputs 1000000
    .venv/bin/python benchmarks/launcher.py --inputs 32000 --inputs 1000000

Each size runs in a fresh process (so peak RSS is that run's): a listing of N files in 1,000
class folders (paths of about 60 bytes, 110 KB each, as ImageNet's), planned with splits
train=0.8,validation=0.2 for a Dataflow-like parallelism of 40, staged to a local temporary
folder, then `ImagesToTFRecords` applied to a pipeline and translated to its portable proto,
which is what a runner receives. Listing a real bucket is not included (see docs/gcs.md).
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
sys.path.insert(0, ROOT)


def measure_one(inputs: int, parallelism: int) -> dict[str, float]:
    """Runs in its own process: every phase's seconds, the graph's bytes, the peak RSS."""
    import apache_beam as beam

    from beam_tfrecord.config import ConvertConfig, SourceConfig
    from beam_tfrecord.pipeline import ImagesToTFRecords
    from beam_tfrecord.plan.listing import InputFile
    from beam_tfrecord.plan.planner import make_plan
    from beam_tfrecord.plan.sharding import ShardSettings
    from beam_tfrecord.plan.staging import stage_plan

    started = time.perf_counter()
    files = [
        InputFile(
            f"n{i % 1000:08d}/img_{i:09d}.JPEG",
            f"gs://bucket/train/n{i % 1000:08d}/img_{i:09d}.JPEG",
            110_000,
        )
        for i in range(inputs)
    ]
    files.sort()
    listed = time.perf_counter()
    source = SourceConfig(input="gs://bucket/train", splits={"train": 0.8, "validation": 0.2})
    plan = make_plan(files, source, ShardSettings(parallelism=parallelism))
    planned = time.perf_counter()
    with tempfile.TemporaryDirectory(prefix="bench-launcher-") as output:
        staged = stage_plan(plan, output, source)
        staged_at = time.perf_counter()
        pipeline = beam.Pipeline(runner="FnApiRunner")
        _ = pipeline | ImagesToTFRecords(staged, ConvertConfig(output=output))
        proto = pipeline.to_runner_api()
        graph = proto.SerializeToString()
        built = time.perf_counter()
        # What a runner executes: the transforms with no parts of their own.
        steps = sum(1 for t in proto.components.transforms.values() if not t.subtransforms)
        plan_bytes = sum(
            os.path.getsize(os.path.join(d, f)) for d, _, names in os.walk(staged.plan_dir) for f in names
        )
    return {
        "inputs": inputs,
        "shards": sum(plan.shard_counts.values()),
        "synthetic_listing_s": listed - started,
        "plan_s": planned - listed,
        "stage_s": staged_at - planned,
        "graph_s": built - staged_at,
        "graph_kb": len(graph) / 1e3,
        "transforms": steps,
        "staged_mb": plan_bytes / 1e6,
        "peak_rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
    }


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--inputs", type=int, action="append", help="listing sizes (repeatable)")
    parser.add_argument("--parallelism", type=int, default=40, help="e.g. 10 workers x 4 vCPUs")
    parser.add_argument("--one", type=int, help=argparse.SUPPRESS)  # the child process's size
    args = parser.parse_args()
    if args.one:
        print(json.dumps(measure_one(args.one, args.parallelism)))
        return
    print(
        f"{'inputs':>9} {'shards':>7} {'listing s':>10} {'plan s':>7} {'stage s':>8} {'graph s':>8} "
        f"{'graph KB':>9} {'transforms':>10} {'staged MB':>10} {'peak MB':>8}"
    )
    for inputs in args.inputs or [1_000_000]:
        done = subprocess.run(
            [sys.executable, __file__, "--one", str(inputs), "--parallelism", str(args.parallelism)],
            capture_output=True,
            text=True,
            check=True,
        )
        row = json.loads(done.stdout.strip().splitlines()[-1])
        timings = f"{row['synthetic_listing_s']:>10.1f} {row['plan_s']:>7.1f} {row['stage_s']:>8.1f}"
        graph = f"{row['graph_s']:>8.1f} {row['graph_kb']:>9.1f} {row['transforms']:>10}"
        sizes = f"{graph} {row['staged_mb']:>10.1f}"
        print(f"{row['inputs']:>9,} {row['shards']:>7} {timings} {sizes} {row['peak_rss_mb']:>8.0f}")


if __name__ == "__main__":
    main()
