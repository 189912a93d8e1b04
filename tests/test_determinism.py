"""Reruns are deterministic: the same input and options give the same labels, splits and
records, whatever the shard count, thread count or sink, and summary.json says so with one
content digest per split."""

from __future__ import annotations

from outputcheck import read_records, summary

from pipelines.convert import run


def test_same_input_same_records_and_digests_whatever_the_layout(pets_tree, tmp_path):
    layouts = {
        "one": ("--num_shards", "1", "--decode_processes", "1", "--decode_threads", "1"),
        "three": ("--num_shards", "3", "--decode_processes", "1", "--decode_threads", "4"),
        "processes": ("--num_shards", "2", "--decode_processes", "3", "--decode_threads", "2"),
        "beam": ("--num_shards", "2", "--sink", "beam"),
    }
    seen = {}
    for name, layout in layouts.items():
        out = tmp_path / name
        args = ["--input", str(pets_tree), "--output", str(out), "--no_progress", "--splits", "a=0.5,b=0.5"]
        assert run([*args, *layout]) == 0
        result = summary(out)
        records = {
            split: sorted(
                (r["image/filename"], r["image/class/label"], r["image/encoded"])
                for r in read_records(out, split)
            )
            for split in ("a", "b")
        }
        digests = {split: result["splits"][split]["digest"] for split in ("a", "b")}
        seen[name] = (records, digests, (out / "labels.txt").read_text(), result["duplicate_records"])
    assert seen["one"] == seen["three"] == seen["beam"]
    records, digests, _, duplicates = seen["one"]
    assert all(len(digest) == 64 for digest in digests.values()) and digests["a"] != digests["b"]
    assert len(records["a"]) + len(records["b"]) == 60 and duplicates == 0
