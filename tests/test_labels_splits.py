"""Labels, splits and the plan, without Beam."""

from __future__ import annotations

import re
from collections import Counter

import pytest

from beam_tfrecord import labels, splits
from beam_tfrecord.listing import InputFile
from beam_tfrecord.plan import LabelSource, make_plan


def files(*relpaths: str, size: int = 1000) -> list[InputFile]:
    return [InputFile(relpath=r, path=f"/data/{r}", size=size) for r in relpaths]


def test_folder_label_is_the_parent_directory():
    assert labels.label_from_folder("PetImages/Cat/1.jpg") == "Cat"
    with pytest.raises(labels.Unlabeled):
        labels.label_from_folder("loose.jpg")


def test_filename_label_is_the_first_group():
    pattern = labels.compile_label_pattern(r"^(cat|dog)\.")
    assert labels.label_from_filename("train/cat.1999.jpg", pattern) == "cat"
    with pytest.raises(labels.Unlabeled):
        labels.label_from_filename("train/bird.1.jpg", pattern)


def test_label_pattern_needs_a_group():
    with pytest.raises(ValueError, match="group"):
        labels.compile_label_pattern(r"^cat")
    with pytest.raises(ValueError, match="not a regular expression"):
        labels.compile_label_pattern(r"(")


@pytest.mark.parametrize("suffix", ["csv", "jsonl"])
def test_manifest_matches_paths_ids_without_extension_and_reports_unused_rows(tmp_path, suffix):
    rows = [("cat/1.jpg", "cat"), ("2", "dog"), ("ghost.jpg", "cat")]
    path = tmp_path / f"labels.{suffix}"
    if suffix == "csv":
        path.write_text("image_id,label\n" + "".join(f"{k},{v}\n" for k, v in rows))
    else:
        path.write_text("".join(f'{{"id": "{k}", "class": "{v}"}}\n' for k, v in rows))
    manifest = labels.Manifest.load(str(path))
    assert manifest.label_of("cat/1.jpg") == "cat"
    assert manifest.label_of("2.png") == "dog"
    with pytest.raises(labels.Unlabeled):
        manifest.label_of("cat/3.jpg")
    assert manifest.unmatched() == ["ghost.jpg"]


def test_manifest_without_label_column_names_the_columns(tmp_path):
    path = tmp_path / "m.csv"
    path.write_text("file,animal\na.jpg,cat\n")
    with pytest.raises(ValueError, match=r"no label column.*found file, animal"):
        labels.Manifest.load(str(path))


def test_class_ids_are_sorted_names_whatever_the_order_seen():
    assert labels.class_names_from(["dog", "cat", "dog", "ant"]) == ["ant", "cat", "dog"]
    assert labels.class_names_from(["dog", "cat"], fixed=["dog", "cat"]) == ["dog", "cat"]


def test_parse_splits():
    assert splits.parse_splits("train=0.8,validation=0.2") == {"train": 0.8, "validation": 0.2}
    for bad in ("train=0.8", "train", "Train=1", "train=0.5,train=0.5", "train=x"):
        with pytest.raises(ValueError):
            splits.parse_splits(bad)


def test_split_of_a_path_is_fixed_and_fractions_hold_roughly():
    chosen = {"train": 0.8, "validation": 0.2}
    paths = [f"c/{i}.jpg" for i in range(5000)]
    first = [splits.split_of(p, chosen, seed=1) for p in paths]
    assert first == [splits.split_of(p, chosen, seed=1) for p in paths]
    share = Counter(first)["validation"] / len(paths)
    assert 0.18 < share < 0.22
    assert first != [splits.split_of(p, chosen, seed=2) for p in paths]


def test_stratified_splits_give_each_class_its_exact_share():
    labeled = [(f"a/{i}.jpg", "a") for i in range(10)] + [(f"b/{i}.jpg", "b") for i in range(50)]
    assignment = splits.stratified_splits(labeled, {"train": 0.8, "validation": 0.2}, seed=0)
    per = Counter((path[0], split) for path, split in assignment.items())
    assert per[("a", "validation")] == 2 and per[("b", "validation")] == 10
    assert len(assignment) == 60


def test_plan_rejects_from_the_listing_and_counts_shards():
    listing = files(
        "cat/1.jpg", "cat/2.jpg", "dog/1.jpg", "loose.jpg", ".DS_Store", "dog/.x.jpg", size=3 << 20
    )
    plan = make_plan(listing, LabelSource("folder"), {"train": 1.0}, shard_size_mb=4)
    assert [i.relpath for i in plan.inputs] == ["cat/1.jpg", "cat/2.jpg", "dog/1.jpg"]
    assert [(r.path, r.reason) for r in plan.rejects] == [
        (".DS_Store", "skipped"),
        ("dog/.x.jpg", "skipped"),
        ("loose.jpg", "unlabeled"),
    ]
    assert plan.class_names == ["cat", "dog"]
    assert [i.label for i in plan.inputs] == [0, 0, 1]
    assert plan.shard_counts == {"train": 3}  # 9 MiB at 4 MiB per shard
    assert plan.skipped == 2 and plan.listed == 6


def test_plan_with_fixed_classes_rejects_unknown_ones():
    plan = make_plan(
        files("cat/1.jpg", "dog/1.jpg", "fox/1.jpg"),
        LabelSource("folder"),
        {"train": 1.0},
        fixed_class_names=["dog", "cat"],
    )
    assert {i.relpath: i.label for i in plan.inputs} == {"cat/1.jpg": 1, "dog/1.jpg": 0}
    assert [(r.path, r.reason) for r in plan.rejects] == [("fox/1.jpg", "unknown_class")]


def test_unlabeled_plan_has_no_classes_and_fixed_shards():
    plan = make_plan(
        files("a.jpg", "b/c.jpg"), LabelSource("none"), {"train": 0.5, "test": 0.5}, num_shards=3
    )
    assert plan.class_names is None
    assert all(i.label is None for i in plan.inputs)
    assert plan.shard_counts == {"train": 3, "test": 3}


def test_filename_labels_in_a_plan():
    source = LabelSource("filename", pattern=re.compile(r"^(cat|dog)\."))
    plan = make_plan(files("cat.1.jpg", "dog.2.jpg", "x.jpg"), source, {"train": 1.0})
    assert [(i.relpath, i.label_text) for i in plan.inputs] == [("cat.1.jpg", "cat"), ("dog.2.jpg", "dog")]
    assert plan.rejects[0].reason == "unlabeled"


def test_shard_counts_follow_size_then_parallelism_without_tiny_shards():
    from beam_tfrecord.sharding import shard_count

    mb = 1024 * 1024
    assert shard_count(862 * mb, 128, 32_000) == 7  # by size alone
    assert shard_count(862 * mb, 128, 32_000, parallelism=2, round_robin=True) == 8  # a multiple of 2 workers
    assert shard_count(215 * mb, 128, 8_000, parallelism=16) == 7  # more tasks, none under 32 MB
    # A big Dataflow pool (500 workers x 16 vCPUs) does not turn 14 GB into 8,000 tiny shards.
    assert shard_count(14 * 1024 * mb, 128, 100_000, parallelism=8_000) == 448
    assert shard_count(100 * 1024, 128, 40, parallelism=8) == 1  # a tiny input stays one shard
    assert shard_count(10 * mb, 1, 3, parallelism=8) == 3  # never more shards than inputs
    assert shard_count(0, 128, 0) == 1  # an empty split still has its one (empty) shard
