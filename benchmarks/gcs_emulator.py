"""GCS through Beam's filesystems against the local emulator: credential start-up, listing, reads.

    .venv/bin/python benchmarks/gcs_emulator.py --objects 2000 --reads 500 --threads 1,2,4,8 --latency_ms 30

Prints one JSON object. Every figure is measured through the code the pipeline runs
(`listing.list_inputs`, `records.read_bytes`), over HTTP to gcp-storage-emulator on 127.0.0.1.
Reads are measured two ways at each thread count: `new_client_per_open` is Beam's
`FileSystems.open`, which builds a google-cloud-storage client per call, and `reused_per_thread`
is `records.read_bytes`, which keeps one per thread (`gcs.thread_client`). `--latency_ms` puts
tests/gcsemulator.py's PermissionProxy in front of the emulator for the reads only, delaying every
HTTP request: a `records.read_bytes` read is one request (it was two, the object's metadata then its
bytes, when docs/gcs.md's figures were taken), Beam's reader two, and each new client adds one more
in a background thread (google-cloud-storage 3.x fetches a bucket's metadata once per client).
The emulator serves one request at a time and neither it nor the proxy keeps connections alive, so
these figures leave out what a reused client saves on real GCS in TCP and TLS handshakes.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from collections.abc import Callable
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


def read_with_new_client(path: str) -> bytes:
    """Beam's way: `FileSystems.open` builds a new GcsIO, so a new storage client, per call."""
    from apache_beam.io.filesystem import CompressionTypes
    from apache_beam.io.filesystems import FileSystems

    with FileSystems.open(path, compression_type=CompressionTypes.UNCOMPRESSED) as handle:
        return handle.read()


def read_with_thread_client(path: str) -> bytes:
    """The pipeline's way: one client per thread, reused (`gcs.thread_client`)."""
    from beam_tfrecord.images.inputs import read_bytes

    return read_bytes(path)


READERS: dict[str, Callable[[str], bytes]] = {
    "new_client_per_open": read_with_new_client,
    "reused_per_thread": read_with_thread_client,
}


def read_rate(paths: list[str], threads: int, read: Callable[[str], bytes], size: int) -> float:
    """Reads per second over a fresh pool of `threads` threads (so reused clients are built inside)."""
    started = time.monotonic()
    with ThreadPoolExecutor(threads) as pool:
        sizes = list(pool.map(lambda path: len(read(path)), paths))
    elapsed = time.monotonic() - started
    assert sizes == [size] * len(paths)
    return round(len(paths) / elapsed, 1)


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
        from beam_tfrecord.plan.listing import list_inputs  # imports beam_tfrecord.gcs: the switch is on

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
            rates: dict[str, dict[int, float]] = {name: {} for name in READERS}
            for threads in (int(t) for t in args.threads.split(",")):
                for name, read in READERS.items():
                    rates[name][threads] = read_rate(paths, threads, read, args.size)
            results["reads_per_s_by_threads"] = rates
    print(json.dumps(results, indent=2))


if __name__ == "__main__":
    main()
