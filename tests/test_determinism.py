"""Reruns are deterministic: the same input and options give the same labels, splits and
records whatever the parallel mode (one in-process worker, Beam's worker processes or threads),
shard count, thread count or sink, and summary.json says so with one content digest per split,
which an independent reader recomputes from the shard bytes."""

from __future__ import annotations

import imagegen
import pytest
from conftest import convert
from outputcheck import digest_from_shards, read_records, summary

LAYOUTS = {
    "in_process": ("--num_shards", "1", "--read_threads", "1", "--direct_num_workers=1"),
    "threads": (
        "--num_shards",
        "3",
        "--read_threads",
        "4",
        "--direct_running_mode=multi_threading",
        "--direct_num_workers=2",
    ),
    "processes": (
        "--num_shards",
        "2",
        "--direct_running_mode=multi_processing",
        "--direct_num_workers=2",
    ),
    "beam_sink": ("--num_shards", "2", "--sink", "beam", "--direct_num_workers=1"),
}


@pytest.fixture(scope="module")
def outputs(tmp_path_factory):
    """One run of the same tree per layout."""
    root = tmp_path_factory.mktemp("determinism")
    tree = root / "pets"
    files = {
        f"{label}/{label}.{i}.jpg": imagegen.jpeg(40 + i % 5, 30, seed=i + 100 * (label == "dog"))
        for label in ("cat", "dog")
        for i in range(30)
    }
    files["cat/broken.jpg"] = b"\xff\xd8\xff"
    imagegen.write_tree(tree, files)
    done = {}
    for name, layout in LAYOUTS.items():
        out = root / name
        assert convert(tree, out, "--splits", "a=0.5,b=0.5", *layout) == 0, name
        done[name] = out
    return done


def content(out) -> tuple:
    result = summary(out)
    records = {
        split: sorted(
            (r["image/filename"], r["image/class/label"], r["image/encoded"])
            for r in read_records(out, split)
        )
        for split in ("a", "b")
    }
    digests = {split: result["splits"][split]["digest"] for split in ("a", "b")}
    return records, digests, (out / "labels.txt").read_text(), (out / "rejects.jsonl").read_text()


def test_every_parallel_mode_writes_the_same_records_and_digests(outputs):
    seen = {name: content(out) for name, out in outputs.items()}
    reference = seen["in_process"]
    for name, got in seen.items():
        assert got == reference, name
    records, digests, _, rejects = reference
    assert all(len(digest) == 64 for digest in digests.values()) and digests["a"] != digests["b"]
    assert len(records["a"]) + len(records["b"]) == 60 and rejects.count("\n") == 1


def test_the_runs_used_the_modes_they_claim(outputs):
    modes = {
        name: (summary(out)["direct_running_mode"], summary(out)["workers"]) for name, out in outputs.items()
    }
    assert modes["in_process"] == ("in_memory", 1)
    assert modes["processes"] == ("multi_processing", 2)
    assert modes["threads"] == ("multi_threading", 2)
    assert summary(outputs["beam_sink"])["sink"] == "beam"


@pytest.mark.parametrize("name", list(LAYOUTS))
def test_summary_digest_matches_the_shard_bytes(outputs, name):
    result = summary(outputs[name])
    for split in ("a", "b"):
        assert digest_from_shards(outputs[name], split) == result["splits"][split]["digest"], split
