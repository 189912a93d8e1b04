"""Labels, splits and the plan, without Beam."""

from __future__ import annotations

import json
import re
from collections import Counter

import pytest
from conftest import plan_listing

from beam_tfrecord.elements import ImageAnnotations, ObjectBox, PlannedInput, Polygon, RunLengths, ShardTask
from beam_tfrecord.plan import columns as columns_lib
from beam_tfrecord.plan import labels, splits
from beam_tfrecord.plan.annotations.growing import objects_digest, objects_digest_of
from beam_tfrecord.plan.listing import InputFile
from beam_tfrecord.plan.planner import LabelSource


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
    assert manifest.class_name_of("cat/1.jpg") == "cat"
    assert manifest.class_name_of("2.png") == "dog"
    with pytest.raises(labels.Unlabeled):
        manifest.class_name_of("cat/3.jpg")
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
    plan = plan_listing(listing, LabelSource("folder"), {"train": 1.0}, shard_size_mb=4)
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
    plan = plan_listing(
        files("cat/1.jpg", "dog/1.jpg", "fox/1.jpg"),
        LabelSource("folder"),
        {"train": 1.0},
        class_names=["dog", "cat"],
    )
    assert {i.relpath: i.label for i in plan.inputs} == {"cat/1.jpg": 1, "dog/1.jpg": 0}
    assert [(r.path, r.reason) for r in plan.rejects] == [("fox/1.jpg", "unknown_class")]


def test_unlabeled_plan_has_no_classes_and_fixed_shards():
    plan = plan_listing(
        files("a.jpg", "b/c.jpg"), LabelSource("none"), {"train": 0.5, "test": 0.5}, num_shards=3
    )
    assert plan.class_names is None
    assert all(i.label is None for i in plan.inputs)
    assert plan.shard_counts == {"train": 3, "test": 3}


def test_filename_labels_in_a_plan():
    source = LabelSource("filename", pattern=re.compile(r"^(cat|dog)\."))
    plan = plan_listing(files("cat.1.jpg", "dog.2.jpg", "x.jpg"), source, {"train": 1.0})
    assert [(i.relpath, i.label_text) for i in plan.inputs] == [("cat.1.jpg", "cat"), ("dog.2.jpg", "dog")]
    assert plan.rejects[0].reason == "unlabeled"


def test_shard_counts_follow_size_then_parallelism_without_tiny_shards():
    from beam_tfrecord.plan.sharding import shard_count

    mb = 1024 * 1024
    assert shard_count(862 * mb, 128, 32_000) == 7  # by size alone
    assert shard_count(862 * mb, 128, 32_000, parallelism=2, round_robin=True) == 8  # a multiple of 2 workers
    assert shard_count(215 * mb, 128, 8_000, parallelism=16) == 7  # more tasks, none under 32 MB
    # A big Dataflow pool (500 workers x 16 vCPUs) does not turn 14 GB into 8,000 tiny shards.
    assert shard_count(14 * 1024 * mb, 128, 100_000, parallelism=8_000) == 448
    assert shard_count(100 * 1024, 128, 40, parallelism=8) == 1  # a tiny input stays one shard
    assert shard_count(10 * mb, 1, 3, parallelism=8) == 3  # never more shards than inputs
    assert shard_count(0, 128, 0) == 1  # an empty split still has its one (empty) shard


def test_a_group_never_straddles_two_splits_and_unmatched_files_are_counted():
    """36 groups of 3 related pictures (`p007_0.jpg`, ...) at 50/50: each group lands whole in
    one split; files the pattern does not match keep their own path hash and are counted."""
    names = [f"p{p:03d}_{k}.jpg" for p in range(36) for k in range(3)] + ["loose_1.jpg", "loose_2.jpg"]
    plan = plan_listing(
        files(*names),
        LabelSource("none"),
        {"train": 0.5, "validation": 0.5},
        group_pattern=r"^(p\d+)_",
    )
    split_of = {i.relpath: i.split for i in plan.inputs}
    for p in range(36):
        assert len({split_of[f"p{p:03d}_{k}.jpg"] for k in range(3)}) == 1
    assert len({split_of[f"p{p:03d}_0.jpg"] for p in range(36)}) == 2  # groups do spread
    assert plan.grouping.source == "group_pattern"
    assert (plan.grouping.groups, plan.grouping.grouped_files, plan.grouping.without_group) == (36, 108, 2)
    # Without the pattern, the same groups straddle the splits: this is the leak the option closes.
    loose = plan_listing(files(*names), LabelSource("none"), {"train": 0.5, "validation": 0.5})
    by_path = {i.relpath: i.split for i in loose.inputs}
    assert any(len({by_path[f"p{p:03d}_{k}.jpg"] for k in range(3)}) == 2 for p in range(36))


def test_stratified_groups_stay_whole_and_single_files_keep_exact_shares():
    labeled = [(f"a/g{g}_{k}.jpg", "a") for g in range(20) for k in range(3)]
    labeled += [(f"b/{i}.jpg", "b") for i in range(50)]
    groups = {path: path.split("_")[0] for path, _ in labeled if path.startswith("a/")}
    chosen = {"train": 0.8, "validation": 0.2}
    assignment = splits.assign_splits(labeled, chosen, seed=3, stratify=True, groups=groups)
    for g in range(20):
        assert len({assignment[f"a/g{g}_{k}.jpg"] for k in range(3)}) == 1
    per = Counter((path[0], split) for path, split in assignment.items())
    assert per[("a", "validation")] == 12  # 4 whole groups of 3: exactly 20% of 60
    assert per[("b", "validation")] == 10
    # No groups: the same cut as before groups existed (the order of paths by hash, cut by count).
    assert splits.assign_splits(labeled, chosen, 3, True) == splits.stratified_splits(labeled, chosen, 3)


def write_manifest(path, header: str, *rows: str) -> str:
    path.write_text("\n".join([header, *rows]) + "\n")
    return str(path)


def test_a_manifest_as_users_write_it_groups_and_a_manifest_inside_input(tmp_path):
    """`id,breed,group` with named columns; the manifest lies among the images and is skipped,
    not rejected; rows naming no file are kept for their own file."""
    path = write_manifest(
        tmp_path / "labels.csv", "id,breed,group", "1,cat,x", "2,dog,x", "3,cat,", "9,cat,y"
    )
    manifest = labels.Manifest.load(path, labels.ManifestColumns(path="ID", label="breed"))
    listing = [*files("1.jpg", "2.jpg", "3.jpg"), InputFile("labels.csv", path, 50)]
    plan = plan_listing(listing, LabelSource("manifest", manifest=manifest), {"train": 0.5, "test": 0.5})
    assert [(r.path, r.reason) for r in plan.rejects] == [("labels.csv", "skipped")]
    assert {i.relpath: i.label_text for i in plan.inputs} == {"1.jpg": "cat", "2.jpg": "dog", "3.jpg": "cat"}
    assert len({i.split for i in plan.inputs if i.relpath in ("1.jpg", "2.jpg")}) == 1  # group x
    assert (plan.grouping.source, plan.grouping.groups, plan.grouping.without_group) == ("manifest", 1, 1)
    assert plan.manifest_unmatched == ["9"]
    with pytest.raises(ValueError, match=r"manifest_label_column species: .* found id, breed, group"):
        labels.Manifest.load(path, labels.ManifestColumns(label="species"))


def test_extra_columns_are_typed_while_planning_and_bad_values_are_rejects(tmp_path):
    path = write_manifest(
        tmp_path / "m.csv",
        "path,label,caption,score,year,tags,boxes",
        'a.jpg,cat,"a, b",0.5,2019,x|y,1|2',
        "b.jpg,cat,,1e3,2020,,",
        "c.jpg,cat,c,high,2021,,",
        "d.jpg,cat,d,1,20.5,,",
    )
    columns = columns_lib.parse_extra_columns("caption,score:float,year:int,tags:str_list,boxes:int_list")
    manifest = labels.Manifest.load(path, labels.ManifestColumns(extra=tuple(c.name for c in columns)))
    plan = plan_listing(
        files("a.jpg", "b.jpg", "c.jpg", "d.jpg"),
        LabelSource("manifest", manifest=manifest),
        {"train": 1.0},
        extra_columns=columns,
    )
    extras = {i.relpath: {name: value for name, _, value in i.extras} for i in plan.inputs}
    assert extras["a.jpg"] == {
        "caption": "a, b",
        "score": 0.5,
        "year": 2019,
        "tags": ("x", "y"),
        "boxes": (1, 2),
    }
    assert extras["b.jpg"] == {"caption": "", "score": 1000.0, "year": 2020, "tags": (), "boxes": ()}
    assert {r.path: (r.reason, r.detail) for r in plan.rejects} == {
        "c.jpg": ("bad_manifest_value", "column score: 'high' is not a float"),
        "d.jpg": ("bad_manifest_value", "column year: '20.5' is not an int"),
    }
    with pytest.raises(ValueError, match="extra_columns names caption, which the manifest"):
        labels.Manifest.load(
            write_manifest(tmp_path / "n.csv", "path,label", "a.jpg,cat"),
            labels.ManifestColumns(extra=("caption",)),
        )
    for bad in ("Caption", "label", "x:date", "a,a"):
        with pytest.raises(ValueError, match="extra_columns"):
            columns_lib.parse_extra_columns(bad)


def test_json_values_parse_as_their_column_type():
    column = columns_lib.ExtraColumn
    assert columns_lib.parse_value(column("s", "float_list"), [1, 2.5]) == (1.0, 2.5)
    assert columns_lib.parse_value(column("s", "int"), 3.0) == 3
    assert columns_lib.parse_value(column("s", "str"), 7) == "7"
    for kind, value in (("int", True), ("int", [1]), ("float", "nan"), ("float", 1e39), ("int_list", ["x"])):
        with pytest.raises(columns_lib.BadValue):
            columns_lib.parse_value(column("s", kind), value)


@pytest.mark.parametrize("suffix", ["csv", "jsonl"])
def test_multi_labels_store_every_class_id(tmp_path, suffix):
    rows = [("a.jpg", ["cat", "outdoor"]), ("b.jpg", ["dog"]), ("c.jpg", ["fox", "cat"])]
    path = tmp_path / f"m.{suffix}"
    if suffix == "csv":
        path.write_text("path,label\n" + "".join(f"{k},{'|'.join(v)}\n" for k, v in rows))
    else:
        path.write_text("".join(json.dumps({"path": k, "label": v}) + "\n" for k, v in rows))
    manifest = labels.Manifest.load(str(path), labels.ManifestColumns(multi_label=True))
    plan = plan_listing(
        files("a.jpg", "b.jpg", "c.jpg"),
        LabelSource("manifest", manifest=manifest),
        {"train": 1.0},
        class_names=["cat", "dog", "outdoor"],
    )
    assert {i.relpath: (i.label, i.label_text) for i in plan.inputs} == {
        "a.jpg": ((0, 2), ("cat", "outdoor")),
        "b.jpg": ((1,), ("dog",)),
    }
    assert [(r.path, r.reason, r.detail) for r in plan.rejects] == [
        ("c.jpg", "unknown_class", "class 'fox' is not in class_names")
    ]
    # --class_names in another order: ids and names still pair up, position by position.
    reordered = plan_listing(
        files("a.jpg"),
        LabelSource("manifest", manifest=manifest),
        {"train": 1.0},
        class_names=["outdoor", "cat"],
    )
    (item,) = reordered.inputs
    assert (item.label, item.label_text) == ((0, 1), ("outdoor", "cat"))


def test_dedupe_keeps_the_smallest_path_whatever_the_listing_order(tmp_path):
    contents = {"b/1.jpg": b"same", "a/9.jpg": b"same", "c/1.jpg": b"same", "a/2.jpg": b"other"}
    listing = []
    for relpath, data in contents.items():
        (tmp_path / relpath).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / relpath).write_bytes(data)
        listing.append(InputFile(relpath, str(tmp_path / relpath), len(data)))
    listing.append(InputFile("a/gone.jpg", str(tmp_path / "a/gone.jpg"), 4))  # unreadable: never a copy
    plans = [
        plan_listing(order, LabelSource("folder"), {"train": 0.5, "test": 0.5}, dedupe=True)
        for order in (listing, listing[::-1])
    ]
    by_path = [sorted(plan.inputs, key=lambda i: i.relpath) for plan in plans]
    assert by_path[0] == by_path[1] and plans[0].rejects == plans[1].rejects
    assert sorted(i.relpath for i in plans[0].inputs) == ["a/2.jpg", "a/9.jpg", "a/gone.jpg"]
    assert [(r.path, r.reason, r.detail) for r in plans[0].rejects] == [
        ("b/1.jpg", "duplicate", "same bytes as a/9.jpg, which is kept"),
        ("c/1.jpg", "duplicate", "same bytes as a/9.jpg, which is kept"),
    ]


def test_planned_inputs_survive_the_staged_plan_file():
    item = PlannedInput(
        "a.jpg", "/d/a.jpg", 3, "train", (0, 2), ("cat", "outdoor"), (("tags", "str_list", ("x",)),)
    )
    task = ShardTask("train", 0, 1, (item, PlannedInput("b.jpg", "/d/b.jpg", 3, "train", 1, "dog")))
    assert ShardTask.from_json(task.to_json()) == task


def test_annotated_inputs_survive_the_staged_plan_file_and_are_digested_from_its_text():
    """The staged text is assembled from each object's text (issue 28): every shape of
    annotation a source gives reads back as it was, and the digest the file index keeps of a
    picture's objects is the one made from them directly."""
    polygon = (Polygon((1.0, 2.0, 3.0, 4.5)),)
    objects = (
        ObjectBox(1.5, 2.25, 30.1, 40.000000000000004, "café", 12.5, source_ref="a.json#annotation 7"),
        ObjectBox(0.1, 0.2, 0.3, 0.4, "dog", None, True, True, True, "Left", polygon, "a.xml#object 1"),
        ObjectBox(0, 0, 5, 5, 'quote"and\\back', 25.0, mask=RunLengths(5, 5, (0, 3, 22)), source_ref=7),
    )
    annotated = ImageAnnotations(objects, "7", False, 640, 480, "train", ("mask_malformed",))
    items = (
        PlannedInput("é/a.jpg", "/d/é/a.jpg", 3, "train", None, None, (), annotated),
        PlannedInput("b.jpg", "/d/b.jpg", 3, "train", annotations=ImageAnnotations((), "b", True)),
        PlannedInput("c.jpg", "/d/c.jpg", 3, "train", 1, "dog", (("tags", "str_list", ("x",)),)),
    )
    settings = {"objects": {"class_names": ["café", "dog"], "masks": False}}
    shard_task = ShardTask("train", 0, 1, items, ("objects",), settings)
    staged: dict[str, str] = {}
    text = shard_task.to_json(lambda item, texts: staged.setdefault(item.relpath, objects_digest(texts)))
    assert ShardTask.from_json(text) == shard_task
    assert json.loads(text) == json.loads(json.dumps({
        "split": "train", "index": 0, "count": 1, "kinds": ["objects"], "settings": settings,
        "inputs": [i.to_row() for i in items],
    }))  # fmt: skip
    assert staged == {i.relpath: objects_digest_of(i.annotations) for i in items[:2]}
    # The values the file index of a dataset made by earlier versions holds (an append compares
    # with them): taken with the code before the staged text was assembled from these texts.
    assert staged == {"é/a.jpg": "2b789e35c9b52619", "b.jpg": "e3b0c44298fc1c14"}


def test_expected_deviation_of_hash_splits():
    assert splits.expected_deviation(0.2, 150) == pytest.approx(0.0653, abs=1e-4)
    assert splits.expected_deviation(0.2, 0) == 0.0
