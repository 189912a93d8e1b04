"""Splits that cannot leak (groups, copies across splits, --dedupe) and manifests that carry
more than a label (named columns, typed extra columns, multi-labels), end to end: through the
command and through the reusable transform, read back with load_dataset and TFDS."""

from __future__ import annotations

import dataclasses
import hashlib
import json

import imagegen
import numpy as np
from conftest import convert, local_pipeline
from outputcheck import rejects, summary

import beam_tfrecord
from beam_tfrecord.config import ConvertConfig, SourceConfig
from beam_tfrecord.elements import DuplicateGroup
from beam_tfrecord.pipeline import ImagesToTFRecords, prepare
from beam_tfrecord.plan.splits import split_of
from beam_tfrecord.plan.staging import PlanFacts
from beam_tfrecord.summary import OptionsSummary
from beam_tfrecord.write.summary import build_summary, duplicate_counts
from beam_tfrecord.write.tally import Tally
from pipelines import inspect
from pipelines.report import format_table

SPLITS = {"train": 0.5, "validation": 0.5}


def related_pictures(root, groups: int = 8) -> dict[str, bytes]:
    """`p000_0.jpg`, `p000_1.jpg`, ... (three pictures per group) plus two copies of `p000_0.jpg`
    named so that a hash of their own path puts one in each split."""
    files = {
        f"p{p:03d}_{k}.jpg": imagegen.jpeg(12, 10, seed=10 * p + k) for p in range(groups) for k in range(3)
    }
    names = [f"copy{i}.jpg" for i in range(40)]
    for split in SPLITS:
        files[next(n for n in names if split_of(n, SPLITS) == split)] = files["p000_0.jpg"]
    imagegen.write_tree(root, files)
    return files


def test_groups_copies_and_manifest_columns_through_the_command(tmp_path):
    root = tmp_path / "in"
    files = related_pictures(root)
    rows = ["id,breed,caption,score,tags"]
    for i, name in enumerate(sorted(files)):
        breed = "cat|outdoor" if i % 2 else "dog"
        rows.append(
            f"{name[:-4]},{breed},photo {i},"
            f"{'n/a' if name == 'p007_2.jpg' else i / 2},{'a|b' if i % 3 else ''}"
        )
    rows.append("ghost,cat,x,1,")
    (root / "labels.csv").write_text("\n".join(rows) + "\n")  # the manifest lies among the images
    out = tmp_path / "out"
    code = convert(
        root,
        out,
        "--label_source=manifest",
        f"--manifest={root / 'labels.csv'}",
        "--manifest_path_column=id",
        "--manifest_label_column=breed",
        "--extra_columns=caption,score:float,tags:str_list",
        "--multi_label",
        r"--group_pattern=^(p\d+)_",
        "--splits=train=0.5,validation=0.5",
    )
    assert code == 0
    result = summary(out)
    assert result["consistent"] and result["records"] == len(files) - 1
    assert {(r["path"], r["reason"]) for r in rejects(out)} == {
        ("labels.csv", "skipped"),
        ("p007_2.jpg", "bad_manifest_value"),
    }
    assert result["groups"] == {
        "source": "group_pattern",
        "groups": 8,
        "grouped_files": 23,
        "without_group": 2,
    }

    assert result["cross_split_duplicates"] == 3 and result["duplicate_groups"] == 1
    assert any("another split" in w for w in result["warnings"])
    (group,) = [json.loads(line) for line in (out / "duplicates.jsonl").read_text().splitlines()]
    assert group["splits"] == ["train", "validation"] and len(group["copies"]) == 3
    assert (out / "manifest_rows_without_file.txt").read_text() == "ghost\n"

    assert result["class_names"] == ["cat", "dog", "outdoor"]
    assert (out / "labels.txt").read_text() == "cat\ndog\noutdoor\n"
    assert [c["key"] for c in result["extra_columns"]] == [
        "image/meta/caption",
        "image/meta/score",
        "image/meta/tags",
    ]
    expected = {}
    for i, name in enumerate(sorted(files)):
        expected[name] = (
            [1.0, 0.0, 1.0] if i % 2 else [0.0, 1.0, 0.0],
            f"photo {i}",
            i / 2,
            ["a", "b"] if i % 3 else [],
        )
    seen, split_of_path = 0, {}
    for split in SPLITS:
        dataset = beam_tfrecord.load_dataset(str(out), split, features=True, batch_size=4, image_size=(8, 8))
        for batch in dataset:
            for j, name in enumerate(batch["image/filename"].numpy()):
                split_of_path[name.decode()] = split
                hot, caption, score, tags = expected[name.decode()]
                assert batch["image/class/label"][j].numpy().tolist() == hot
                assert batch["image/meta/caption"][j].numpy().decode() == caption
                assert batch["image/meta/score"][j].numpy() == np.float32(score)
                assert [t.decode() for t in batch["image/meta/tags"][j].numpy()] == tags
                seen += 1
    assert seen == result["records"]
    # The TensorFlow-free reader gives the same values as plain Python.
    for split in SPLITS:
        for record in beam_tfrecord.iter_examples(str(out), split):
            hot, caption, score, tags = expected[record["filename"]]
            assert record["label"] == [i for i, v in enumerate(hot) if v]
            assert record["label_text"] == [result["class_names"][i] for i, v in enumerate(hot) if v]
            assert (record["caption"], record["tags"]) == (caption, tags)
            assert record["score"] == np.float32(score) and len(record["sha256"]) == 64
    for p in range(8):  # a group never straddles two splits
        assert len({split_of_path.get(f"p{p:03d}_{k}.jpg") for k in range(3)} - {None}) == 1
    _, hot = next(iter(beam_tfrecord.load_dataset(str(out), "train", batch_size=2, image_size=(8, 8))))
    assert hot.dtype.name == "float32" and hot.shape == (2, 3)  # what binary cross-entropy takes
    assert (
        inspect.run([str(out), "--sample", "4", "--pictures", str(tmp_path)]) == 0
    )  # counts per class agree, texts match ids


def test_dedupe_keeps_one_copy_and_accounts_for_every_input(tmp_path):
    root = tmp_path / "in"
    files = related_pictures(root, groups=3)
    copies = sorted(name for name, data in files.items() if data == files["p000_0.jpg"])
    out = tmp_path / "out"
    code = convert(
        root,
        out,
        "--label_source=none",
        "--dedupe",
        r"--group_pattern=^(p\d+)_",
        "--splits=train=0.5,validation=0.5",
    )
    assert code == 0
    result = summary(out)
    assert result["consistent"] and result["inputs"] == 11 and result["records"] == 9
    kept, *others = copies  # the smallest relative path
    assert {r["path"]: r["detail"] for r in rejects(out) if r["reason"] == "duplicate"} == {
        name: f"same bytes as {kept}, which is kept" for name in others
    }
    assert result["cross_split_duplicates"] == 0 and result["duplicate_records"] == 0
    assert (out / "duplicates.jsonl").read_text() == ""


def test_columns_multi_labels_and_groups_through_the_reusable_transform(tmp_path):
    """The simple schema in a user's own pipeline: a JSONL manifest with a `group` column, list
    columns as JSON arrays, multi-labels; read back with load_dataset and TFDS."""
    import tensorflow_datasets as tfds

    root = tmp_path / "in"
    files = {f"{i}.png": imagegen.png(8, 6, seed=i) for i in range(12)}
    imagegen.write_tree(root, files)
    lines = [
        {
            "image": str(i),
            "tags": ["cat", "dog"][: 1 + i % 2],
            "group": f"g{i // 4}",
            "boxes": list(range(i % 3)),
            "w": i / 4,
        }
        for i in range(12)
    ]
    manifest = tmp_path / "m.jsonl"
    manifest.write_text("".join(json.dumps(line) + "\n" for line in lines))
    source = SourceConfig(
        input=str(root),
        label_source="manifest",
        manifest=str(manifest),
        manifest_label_column="tags",
        extra_columns="boxes:int_list,w:float",
        multi_label=True,
        splits={"train": 0.5, "test": 0.5},
    )
    config = ConvertConfig(output=str(tmp_path / "out"), schema="simple")
    staged = prepare(source, config)
    with local_pipeline() as p:
        _ = p | ImagesToTFRecords(staged, config)
    result = summary(tmp_path / "out")
    assert result["consistent"] and result["records"] == 12 and result["groups"]["groups"] == 3
    by_group: dict[str, set[str]] = {}
    for split in ("train", "test"):
        for record in beam_tfrecord.load_dataset(
            str(tmp_path / "out"), split, features=True, batch_size=None
        ):
            i = int(record["id"].numpy().decode()[:-4])
            by_group.setdefault(f"g{i // 4}", set()).add(split)
            assert record["label"].numpy().tolist() == ([1.0, 1.0] if i % 2 else [1.0, 0.0])
            assert record["boxes"].numpy().tolist() == list(range(i % 3))
            assert record["w"].numpy() == i / 4
            assert record["sha256"].numpy().decode() == hashlib.sha256(files[f"{i}.png"]).hexdigest()
    assert all(len(splits) == 1 for splits in by_group.values())

    builder = tfds.builder_from_directory(str(tmp_path / "out"))
    assert builder.info.features["label"].feature.names == ["cat", "dog"]
    example = next(iter(builder.as_dataset(split=next(iter(builder.info.splits)))))
    assert example["boxes"].dtype.name == "int64" and example["w"].dtype.name == "float32"


def test_the_summary_shows_each_splits_share_against_the_asked_fraction():
    """The new user's run: 150 files at 80/20, validation got 28. The table says how far that is
    from 20% and what hash splits promise at this size; the warning names stratify."""
    facts = PlanFacts(
        listed=150,
        class_names=["cat", "dog"],
        splits={"train": 0.8, "validation": 0.2},
        shard_counts={"train": 1, "validation": 1},
    )
    tally = Tally()
    tally.records.update({"train": 122, "validation": 28})
    source = SourceConfig(input="/in", splits=facts.splits)
    summary_ = build_summary(facts, [], tally, [], OptionsSummary.of(source, None))
    assert summary_.splits["validation"].share == 0.1867
    table = format_table(summary_)
    assert "28 records in 0 shards, 0.0 MB; 18.7% of records (asked 20.0%, hash: ±6.5%)" in table
    assert any("stratify gives exact shares" in w for w in summary_.warnings)
    tally.records.update({"train": -2, "validation": 2})  # 120/30: what --stratify gives
    stratified = dataclasses.replace(source, stratify=True)
    exact = build_summary(facts, [], tally, [], OptionsSummary.of(stratified, None))
    assert "20.0% of records (asked 20.0%, stratified)" in format_table(exact)
    assert not any("stratify" in w for w in exact.warnings)


def test_duplicate_figures_count_every_copy_of_a_group_that_spans_splits():
    groups = [
        DuplicateGroup("a" * 64, (("x/1.jpg", "train"), ("y/1.jpg", "validation"), ("z/1.jpg", "train"))),
        DuplicateGroup("b" * 64, (("x/2.jpg", "train"), ("y/2.jpg", "train"))),
    ]
    assert duplicate_counts(groups) == {
        "duplicate_records": 3,
        "duplicate_groups": 2,
        "cross_split_duplicates": 3,
    }
