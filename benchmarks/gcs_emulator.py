"""GCS through Beam's filesystems against the local emulator: credential start-up, listing, reads.

    .venv/bin/python benchmarks/gcs_emulator.py --objects 5000 --reads 500 --threads 1,4,8

Prints one JSON object. Every figure is measured through the code the pipeline runs
(`listing.list_inputs`, `records.read_bytes`), over HTTP to gcp-storage-emulator on 127.0.0.1.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path[:0] = [REPO, os.path.join(REPO, "tests")]

from gcsemulator import EMULATOR_ENV, Emulator, PermissionProxy  # noqa: E402

FIRST_CALL = """
import sys, time
if sys.argv[1] == "switch":
    import beam_tfrecord.gcs
from apache_beam.io.filesystems import FileSystems
started = time.monotonic()
FileSystems.exists(sys.argv[2])
print(time.monotonic() - started)
"""


def first_call_s(url: str, path: str, switch: bool) -> float:
    """Seconds of a fresh process's first gs:// call: Beam's credential lookup is paid there."""
    env = {**os.environ, EMULATOR_ENV: url, "PYTHONPATH": REPO}
    out = subprocess.run(
        [sys.executable, "-c", FIRST_CALL, "switch" if switch else "plain", path],
        env=env,
        capture_output=True,
        text=True,
        check=True,
        timeout=300,
    )
    return round(float(out.stdout.strip().splitlines()[-1]), 2)


def upload(emulator: Emulator, bucket: str, prefix: str, count: int, size: int) -> list[str]:
    """`count` objects of `size` bytes in ten class folders; their gs:// paths."""
    client = emulator.client()
    target = client.lookup_bucket(bucket) or client.create_bucket(bucket)
    payload = os.urandom(size)
    names = [f"{prefix}/c{i % 10}/{i:07d}.jpg" for i in range(count)]
    with ThreadPoolExecutor(8) as pool:
        list(pool.map(lambda name: target.blob(name).upload_from_string(payload), names))
    return [f"gs://{bucket}/{name}" for name in names]


def read_rate(paths: list[str], threads: int) -> float:
    from beam_tfrecord.records import read_bytes

    started = time.monotonic()
    with ThreadPoolExecutor(threads) as pool:
        total = sum(len(data) for data in pool.map(read_bytes, paths))
    assert total > 0
    return round(len(paths) / (time.monotonic() - started), 1)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--objects", type=int, default=5000, help="objects to list (100 bytes each)")
    parser.add_argument("--size", type=int, default=30_000, help="bytes per object")
    parser.add_argument("--reads", type=int, default=500, help="objects to read")
    parser.add_argument("--threads", default="1,4,8")
    parser.add_argument("--skip_credentials", action="store_true")
    parser.add_argument("--latency_ms", type=float, default=0.0, help="added to every request, like GCS's")
    args = parser.parse_args()
    with Emulator() as emulator:
        os.environ[EMULATOR_ENV] = emulator.url
        from beam_tfrecord.listing import list_inputs  # imports beam_tfrecord.gcs: the switch is on

        upload(emulator, "bench", "listing", args.objects, 100)
        paths = upload(emulator, "bench", "images", args.reads, args.size)
        results: dict[str, object] = {"listed_objects": args.objects, "read_objects": args.reads}
        results["read_object_bytes"] = args.size
        if not args.skip_credentials:
            results["first_call_s_beam_default"] = first_call_s(emulator.url, paths[0], switch=False)
            results["first_call_s_with_switch"] = first_call_s(emulator.url, paths[0], switch=True)
        started = time.monotonic()
        files = list_inputs("gs://bench/listing")
        elapsed = time.monotonic() - started
        assert len(files) == args.objects
        results["list_s"] = round(elapsed, 2)
        results["listed_per_s"] = round(len(files) / elapsed, 1)
        with PermissionProxy(emulator.url, {}, latency_s=args.latency_ms / 1000) as proxy:
            if args.latency_ms:
                os.environ[EMULATOR_ENV] = proxy.url
                results["added_latency_ms"] = args.latency_ms
            for threads in (int(t) for t in args.threads.split(",")):
                results[f"reads_per_s_{threads}_threads"] = read_rate(paths, threads)
    print(json.dumps(results, indent=2))


if __name__ == "__main__":
    main()
