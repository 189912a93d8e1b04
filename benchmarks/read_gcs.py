"""Reading a dataset back from gs://: a converted output's shards against the same pictures as
separate objects, with a per-request latency like a bucket in another zone.

    .venv/bin/python benchmarks/read_gcs.py --images 2000 --size 400x300 --latency_ms 0,20,50

Both sides are read over HTTP on 127.0.0.1 through a proxy (tests/gcsemulator.py's) that delays
every request by `--latency_ms`, in front of the GCS emulator (gcp-storage-emulator). The
emulator answers one request at a time, about 30 a second here, where GCS answers thousands at
once; so the proxy answers object downloads itself, from memory, many at once (Range requests
included), and relays the rest (metadata, listings) to the emulator:
  - `shards`: `beam_tfrecord.load_dataset("gs://...")`, 224x224 batches of 32, no shuffle;
    `shards-autotune` the same with tf.data's autotuning on (`autotune=True`);
  - `objects`: what a PyTorch user writes for pictures in a bucket: a pool of `--threads`
    threads, each with its own google-cloud-storage client, downloading each object and decoding
    and resizing it to 224x224 with Pillow (the GIL released in both), in batches of 32.
Each is one pass over every picture, once to warm up (the emulator's and TensorFlow's start-up)
and `--repeats` times measured, alternating; the medians and their ratio are printed as JSON.

What it leaves out: TensorFlow's own GCS filesystem (what `load_dataset` uses on real GCS)
cannot reach the emulator, so the shards are read through Beam's filesystems here
(`read.tf_data`'s emulator path); and GCS's own time per request, which the latency stands for.
"""

from __future__ import annotations

import argparse
import base64
import contextlib
import hashlib
import io
import json
import multiprocessing
import os
import platform
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import urllib.parse
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from typing import Any

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path[:0] = [REPO, os.path.join(REPO, "tests"), os.path.join(REPO, "benchmarks")]

from gcsemulator import EMULATOR_ENV, Emulator, PermissionProxy, request_kind  # noqa: E402

BATCH = 32
SIZE = (224, 224)


def make_source(root: str, count: int, width: int, height: int) -> None:
    """`count` JPEGs in two class folders: benchmarks/synthetic.py's, as benchmarks/read.py uses."""
    from synthetic import ensure_dataset

    ensure_dataset(root, count, size=(width, height), broken=False)
    os.remove(os.path.join(root, ".complete"))  # its marker is no picture


class ServedDownloads(PermissionProxy):
    """Object downloads answered from memory, as many at once as asked (GCS's way); every other
    request relayed to the emulator. Each is delayed by the latency first."""

    def __init__(self, upstream: str, objects: dict[tuple[str, str], bytes], latency_s: float) -> None:
        super().__init__(upstream, {}, latency_s)
        self.objects = objects

    def intercept(self, handler: Any, method: str, path: str, body: bytes) -> bool:
        if request_kind(method, path) != "download":
            return False
        found = re.search(r"/b/([^/]+)/o/([^?]+)", path)
        data = found and self.objects.get((found.group(1), urllib.parse.unquote(found.group(2))))
        if data is None:
            return False
        headers = {"Content-Type": "application/octet-stream"}
        wanted = re.fullmatch(r"bytes=(\d+)-(\d*)", handler.headers.get("Range") or "")
        if wanted:
            start = int(wanted.group(1))
            end = min(int(wanted.group(2) or len(data) - 1), len(data) - 1)
            headers["Content-Range"] = f"bytes {start}-{end}/{len(data)}"
            handler._answer(206, headers, data[start : end + 1])
            return True
        headers["x-goog-hash"] = f"md5={base64.b64encode(hashlib.md5(data).digest()).decode()}"
        handler._answer(200, headers, data)
        return True


def _serve(upstream: str, served: dict[tuple[str, str], bytes], latency_s: float, reply: Any) -> None:
    with ServedDownloads(upstream, served, latency_s) as proxy:
        reply.send(proxy.url)
        reply.recv()  # until told to stop


@contextlib.contextmanager
def proxy_process(upstream: str, served: dict[tuple[str, str], bytes], latency_s: float) -> Iterator[str]:
    """ServedDownloads in a process of its own (its Python would otherwise share the readers'
    GIL, as GCS's servers share nothing with a client); yields its address."""
    context = multiprocessing.get_context("fork")
    mine, theirs = context.Pipe()
    process = context.Process(target=_serve, args=(upstream, served, latency_s, theirs), daemon=True)
    process.start()
    try:
        yield mine.recv()
    finally:
        mine.send("stop")
        process.join(timeout=30)
        if process.is_alive():
            process.kill()


def convert(source: str, output: str) -> None:
    subprocess.run(
        [
            sys.executable,
            "-m",
            "pipelines.convert",
            "--input",
            source,
            "--output",
            output,
            "--no_progress",
        ],
        cwd=REPO,
        check=True,
        capture_output=True,
        timeout=3600,
    )


def upload_folder(
    emulator: Emulator, bucket: str, prefix: str, folder: str, served: dict[tuple[str, str], bytes]
) -> list[str]:
    """Every file under `folder` as an object under gs://bucket/prefix (and in `served`, for the
    proxy); the pictures' paths."""
    files = {}
    for base, _, names in os.walk(folder):
        for name in names:
            path = os.path.join(base, name)
            with open(path, "rb") as handle:
                files[os.path.relpath(path, folder)] = handle.read()
    emulator.upload_tree(bucket, prefix, files)
    served.update({(bucket, f"{prefix}/{name}"): data for name, data in files.items()})
    return sorted(f"gs://{bucket}/{prefix}/{name}" for name in files if name.endswith(".jpg"))


def read_shards(output: str, autotune: bool = False) -> int:
    from beam_tfrecord import load_dataset

    seen = 0
    dataset = load_dataset(
        output, "train", batch_size=BATCH, image_size=SIZE, shuffle=False, autotune=autotune
    )
    for images, _ in dataset:
        seen += int(images.shape[0])
    return seen


_THREAD = threading.local()


def _object_picture(path: str) -> object:
    import numpy as np
    from google.cloud import storage
    from PIL import Image

    client = getattr(_THREAD, "client", None)
    if client is None:  # one client per thread: a client's requests session is not thread-safe
        client = _THREAD.client = storage.Client.create_anonymous_client()
    bucket, _, name = path[len("gs://") :].partition("/")
    data = client.bucket(bucket).blob(name).download_as_bytes()
    with Image.open(io.BytesIO(data)) as image:
        return np.asarray(image.convert("RGB").resize(SIZE, Image.BILINEAR))


def read_objects(paths: list[str], threads: int) -> int:
    import numpy as np

    seen = 0
    with ThreadPoolExecutor(threads) as pool:
        for start in range(0, len(paths), BATCH):
            batch = np.stack(list(pool.map(_object_picture, paths[start : start + BATCH])))
            seen += batch.shape[0]
    return seen


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--images", type=int, default=2000)
    parser.add_argument("--size", default="400x300", help="WIDTHxHEIGHT of the pictures")
    parser.add_argument("--latency_ms", default="0,20,50", help="per-request latencies to measure")
    parser.add_argument("--threads", type=int, default=16, help="the per-object reader's threads")
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()
    width, height = (int(v) for v in args.size.split("x"))
    work = tempfile.mkdtemp(prefix="read-gcs-")
    try:
        source, output = os.path.join(work, "in"), os.path.join(work, "out")
        make_source(source, args.images, width, height)
        convert(source, output)
        with open(os.path.join(output, "summary.json")) as handle:
            train = json.load(handle)["splits"]["train"]["records"]
        results: dict[str, object] = {
            "machine": f"{platform.node()} {os.cpu_count()} cores, Python {platform.python_version()}",
            "images": args.images,
            "train_records": train,
            "size": args.size,
            "threads": args.threads,
            "latencies": [],
        }
        with Emulator() as emulator:
            emulator.client().create_bucket("bench")
            served: dict[tuple[str, str], bytes] = {}
            pictures = upload_folder(emulator, "bench", "in", source, served)
            upload_folder(emulator, "bench", "out", output, served)
            # The same pictures the train split holds, for a like-for-like count.
            from beam_tfrecord import iter_examples

            names = {e["filename"] for e in iter_examples(output, "train")}
            train_paths = [p for p in pictures if p.split("/in/", 1)[1] in names]
            assert len(train_paths) == train, (len(train_paths), train)
            for latency_ms in (float(v) for v in args.latency_ms.split(",")):
                with proxy_process(emulator.url, served, latency_ms / 1000) as url:
                    os.environ[EMULATOR_ENV] = url
                    timings: dict[str, list[float]] = {"shards": [], "shards-autotune": [], "objects": []}
                    for round_ in range(args.repeats + 1):
                        for reader in timings:
                            started = time.perf_counter()
                            seen = (
                                read_objects(train_paths, args.threads)
                                if reader == "objects"
                                else read_shards("gs://bench/out", autotune=reader == "shards-autotune")
                            )
                            elapsed = time.perf_counter() - started
                            assert seen == train, (reader, seen, train)
                            if round_:  # the first round warms up
                                timings[reader].append(seen / elapsed)
                    shards, tuned, objects = (statistics.median(rates) for rates in timings.values())
                    results["latencies"].append(
                        {
                            "latency_ms": latency_ms,
                            "shards_pictures_per_s": round(shards, 1),
                            "shards_autotune_pictures_per_s": round(tuned, 1),
                            "objects_pictures_per_s": round(objects, 1),
                            "ratio": round(shards / objects, 2),
                            "rounds": {k: [round(v, 1) for v in vs] for k, vs in timings.items()},
                        }
                    )
        print(json.dumps(results, indent=1))
    finally:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
