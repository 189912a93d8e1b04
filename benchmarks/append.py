"""What `--append` saves: convert `--old` synthetic images, add `--new` more (`--new_class` of them
in a new class, `bird`) and `--copies` byte copies of old ones, then time the append against a
from-scratch run over the union, each a whole process (median of `--repeats`).

    .venv/bin/python benchmarks/append.py                          # 8,000 + 2,000 + 100 copies + 1 class
    .venv/bin/python benchmarks/append.py --old 800 --new 200 --copies 10 --new_class 20   # quick check
    .venv/bin/python benchmarks/append.py --index_check 1000000    # the new-file check alone
    .venv/bin/python benchmarks/append.py --gcs_renumber 100,1000  # renumbering old shards on gs://

`--index_check N` times only what an append does before converting, at N existing records: load
a file index of N entries (output.file_index), compare a listing of N + 1% files against it
(output.append.compare_listing) and build the plan's known hashes, with the process's peak RSS.

`--gcs_renumber N,...` times what a split that grows costs on gs:// against the GCS emulator
(tests/gcsemulator.py) behind a proxy that counts the requests: N old shards (and their `.idx`)
given their new names by the merge's own step (output.append.renumber, one server-side copy
each), then the old names removed as the merge's last step does; the requests by kind and the
seconds of each step.

It also checks what the issue asks of the result: each file in the split and with the class a
from-scratch run gives it, the same split digests as a from-scratch run given the append's class
order (`--class_names`, so the ids agree), every old label id unchanged, the new class given the
next id, and every copy reported in duplicates.jsonl. Prints one JSON object.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
sys.path.insert(0, HERE)
sys.path.insert(0, ROOT)

from run import measure  # noqa: E402
from synthetic import CLASSES, ensure_dataset  # noqa: E402

SPLITS = ["--splits", "train=0.8,validation=0.2"]


def command(data: str, out: str, *extra: str) -> list[str]:
    args = ["--input", data, "--output", out, "--runner=DirectRunner", "--no_progress", *SPLITS, *extra]
    return [sys.executable, "-m", "pipelines.convert", *args]


def grow(tree: str, extra_root: str, new: int, copies: int, new_class: int) -> None:
    """Add `new` pictures to the classes already there, `new_class` in `bird`, and `copies`
    byte copies of old pictures (hard links would share an inode, not be copies)."""
    ensure_dataset(extra_root, new, seed=1, broken=False)
    made = sorted(
        os.path.join(label, name) for label in CLASSES for name in os.listdir(os.path.join(extra_root, label))
    )
    os.makedirs(os.path.join(tree, "bird"), exist_ok=True)
    for i, relpath in enumerate(made):
        label, name = relpath.split(os.sep)
        target = (
            os.path.join("bird", f"bird.{i:06d}.jpg") if i < new_class else os.path.join(label, f"new.{name}")
        )
        shutil.copy(os.path.join(extra_root, relpath), os.path.join(tree, target))
    old = sorted(n for n in os.listdir(os.path.join(tree, "cat")) if n.startswith("cat."))
    for name in old[:copies]:
        shutil.copy(os.path.join(tree, "cat", name), os.path.join(tree, "cat", f"copy.{name}"))


def _records(out: str) -> dict[str, tuple[str, str, int]]:
    from beam_tfrecord.output.outputs import complete_summary
    from beam_tfrecord.read.examples import iter_examples

    found = {}
    for split in complete_summary(out).splits:
        for example in iter_examples(out, split):
            found[example["filename"]] = (split, example["label_text"], int(example["label"]))
    return found


def index_check(count: int) -> dict:
    """The new-file check at `count` existing records: seconds per step and peak RSS."""
    import resource
    import time

    from beam_tfrecord.output.append import compare_listing
    from beam_tfrecord.output.file_index import IndexEntry, load_index, write_index
    from beam_tfrecord.plan.listing import InputFile
    from beam_tfrecord.plan.planner import KnownRecords

    work = tempfile.mkdtemp(prefix="append-index-")
    try:
        entries = (
            IndexEntry(
                f"class{i % 1000:03d}/img{i:08d}.jpg", 110_000 + i % 5000, 1.7e9 + i, f"{i:064x}", "train"
            )
            for i in range(count)
        )
        write_index(work, entries)
        index_mb = os.path.getsize(os.path.join(work, "index", "files.jsonl")) / 1e6
        started = time.perf_counter()
        index = load_index(work)
        loaded = time.perf_counter()
        listing = [
            InputFile(
                f"class{i % 1000:03d}/img{i:08d}.jpg", f"/data/{i}", 110_000 + i % 5000, mtime=1.7e9 + i
            )
            for i in range(count + count // 100)
        ]
        listed = time.perf_counter()
        delta = compare_listing(listing, index, 0)
        compared = time.perf_counter()
        known = KnownRecords(("cat",), {e.sha256: e.relpath for e in index if e.sha256})
        hashed = time.perf_counter()
        assert len(delta.new) == count // 100 and len(known.hashes) == count
        return {
            "records": count,
            "index_mb": round(index_mb, 1),
            "load_index_s": round(loaded - started, 2),
            "compare_listing_s": round(compared - listed, 2),
            "known_hashes_s": round(hashed - compared, 2),
            "check_s": round(loaded - started + hashed - listed, 2),
            "peak_rss_mb": round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024),
            "new_found": len(delta.new),
        }
    finally:
        shutil.rmtree(work, ignore_errors=True)


def gcs_renumber(counts: list[int], ways: tuple[str, ...] = ("per_object", "batched")) -> list[dict]:
    """Renumbering N old shards of one split on gs:// (the emulator): requests and seconds."""
    import time
    import uuid

    sys.path.insert(0, os.path.join(ROOT, "tests"))
    from apache_beam.io.filesystems import FileSystems
    from gcsemulator import EMULATOR_ENV, Emulator, PermissionProxy

    from beam_tfrecord import gcs, names
    from beam_tfrecord.output.append import renumber

    class CountingProxy(PermissionProxy):
        """Relays every request, counting them: copies (copyTo/rewriteTo), and all the others."""

        def __init__(self, upstream: str) -> None:
            super().__init__(upstream, {})
            self.seen: list[tuple[str, str]] = []

        def intercept(self, handler, method, path, body) -> bool:
            self.seen.append((method, path))
            return False

    def kinds(seen: list[tuple[str, str]]) -> dict[str, int]:
        found: dict[str, int] = {}
        for method, path in seen:
            route = path.split("?")[0]
            kind = (
                "copy"
                if "/copyTo/" in route or "/rewriteTo/" in route
                else "batch"
                if route.startswith("/batch/")
                else f"{method} other"
            )
            found[kind] = found.get(kind, 0) + 1
        return found

    def per_object(out: str, keep: dict[str, str]) -> int:
        """What the merge did before it batched: an exists check and a copy per name."""
        given = 0
        for name, target in keep.items():
            for source, new_name in ((name, target), (names.index_path(name), names.index_path(target))):
                if FileSystems.exists(f"{out}/{source}") and not FileSystems.exists(f"{out}/{new_name}"):
                    FileSystems.copy([f"{out}/{source}"], [f"{out}/{new_name}"])
                    given += 1
        return given

    results = []
    with Emulator() as emulator, CountingProxy(emulator.url) as proxy:
        os.environ[EMULATOR_ENV] = proxy.url
        for count in counts:
            for way in ways:
                bucket = f"renumber-{uuid.uuid4().hex[:10]}"
                out = f"gs://{bucket}/out"
                files = {}
                for i in range(count):
                    name = names.shard_name("train", i, count)
                    files[name] = b"x" * 64
                    files[names.index_path(name)] = b"0\n"
                emulator.upload_tree(bucket, "out", files)  # straight to the emulator: not counted
                keep = {
                    names.shard_name("train", i, count): names.shard_name("train", i, count + 1)
                    for i in range(count)
                }
                proxy.seen.clear()
                started = time.perf_counter()
                given = per_object(out, keep) if way == "per_object" else renumber(out, keep)
                renamed = time.perf_counter()
                copies = kinds(proxy.seen)
                proxy.seen.clear()
                old = [f"{out}/{n}" for name in keep for n in (name, names.index_path(name))]
                if way == "per_object":
                    FileSystems.delete(old)
                else:
                    gcs.delete_files(old)
                removed = time.perf_counter()
                (left,) = FileSystems.match([f"{out}/*"])
                assert sorted(os.path.basename(m.path) for m in left.metadata_list) == sorted(
                    n for target in keep.values() for n in (target, names.index_path(target))
                ), "the renumbered names are not all there"
                results.append(
                    {
                        "way": way,
                        "old_shards": count,
                        "names_given": given,
                        "renumber_requests": copies,
                        "renumber_s": round(renamed - started, 2),
                        "remove_old_requests": kinds(proxy.seen),
                        "remove_old_s": round(removed - renamed, 2),
                    }
                )
    return results


def summary(out: str) -> dict:
    with open(os.path.join(out, "summary.json"), encoding="utf-8") as handle:
        return json.load(handle)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--old", type=int, default=8000)
    parser.add_argument("--new", type=int, default=2000)
    parser.add_argument("--copies", type=int, default=100)
    parser.add_argument("--new_class", type=int, default=200)
    parser.add_argument("--repeats", type=int, default=1)
    parser.add_argument("--work", default=None, help="a folder to work in (default: a temporary one)")
    parser.add_argument(
        "--index_check", type=int, default=0, help="time the new-file check alone at N records"
    )
    parser.add_argument(
        "--gcs_renumber", default="", help="time renumbering N,... old shards on gs:// (the emulator)"
    )
    parser.add_argument(
        "--gcs_ways", default="per_object,batched", help="per_object (a request per copy), batched, or both"
    )
    args = parser.parse_args()
    if args.index_check:
        print(json.dumps(index_check(args.index_check), indent=2))
        return
    if args.gcs_renumber:
        counts = [int(n) for n in args.gcs_renumber.split(",")]
        print(json.dumps(gcs_renumber(counts, tuple(args.gcs_ways.split(","))), indent=2))
        return
    work = args.work or tempfile.mkdtemp(prefix="append-bench-")
    base = ensure_dataset(os.path.join(work, "base"), args.old, broken=False)
    appends, scratches, firsts = [], [], []
    for _ in range(args.repeats):
        tree, out, scratch = (os.path.join(work, n) for n in ("tree", "out", "scratch"))
        for path in (tree, out, scratch):
            shutil.rmtree(path, ignore_errors=True)
        shutil.copytree(base, tree, ignore=shutil.ignore_patterns(".complete"))
        wall, _, code = measure(command(tree, out))
        assert code == 0, "the first conversion failed"
        firsts.append(wall)
        old = _records(out)
        grow(tree, os.path.join(work, "extra"), args.new, args.copies, args.new_class)
        wall, _, code = measure(command(tree, out, "--append"))
        assert code == 0, "the append failed"
        appends.append(wall)
        class_names = ",".join(summary(out)["class_names"])
        wall, _, code = measure(command(tree, scratch, "--class_names", class_names))
        assert code == 0, "the from-scratch run failed"
        scratches.append(wall)
    grown, whole = _records(out), _records(scratch)
    grown_summary, whole_summary = summary(out), summary(scratch)
    duplicates = 0
    with open(os.path.join(out, "duplicates.jsonl"), encoding="utf-8") as handle:
        for line in handle:
            paths = {c["path"] for c in json.loads(line)["copies"]}
            duplicates += sum(1 for p in paths if p.startswith("cat/copy."))
    append_s, scratch_s = statistics.median(appends), statistics.median(scratches)
    result = {
        "old": args.old,
        "new": args.new,
        "copies": args.copies,
        "new_class_images": args.new_class,  # among the new ones
        "records": grown_summary["records"],
        "first_run_s": round(statistics.median(firsts), 2),
        "append_s": round(append_s, 2),
        "from_scratch_s": round(scratch_s, 2),
        "append_over_scratch": round(append_s / scratch_s, 3),
        "goal": 0.3,
        "same_split_and_class_per_file": grown == whole,
        "same_split_digests": {n: s["digest"] for n, s in grown_summary["splits"].items()}
        == {n: s["digest"] for n, s in whole_summary["splits"].items()},
        "old_label_ids_kept": all(grown[p] == v for p, v in old.items()),
        "class_names": grown_summary["class_names"],
        "copies_reported_as_duplicates": duplicates,
        "cpus": os.cpu_count(),
    }
    print(json.dumps(result, indent=2))
    if not args.work:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
