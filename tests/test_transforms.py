"""The Beam side on TestPipeline (pinned to the local runner): outcomes are routed and tallied,
and the whole conversion is a transform a user applies in their own pipeline, configured by
typed objects, whose output the reader and TFDS load from its own metadata."""

from __future__ import annotations

import json

import apache_beam as beam
import imagegen
import numpy as np
from apache_beam.testing.util import assert_that, equal_to
from conftest import local_pipeline

import beam_tfrecord
from beam_tfrecord.config import ConvertConfig, SourceConfig
from beam_tfrecord.elements import DuplicateGroup, PlannedInput, RejectLine, ShardTask
from beam_tfrecord.images.options import ImageConfig
from beam_tfrecord.pipeline import ImagesToTFRecords, prepare
from beam_tfrecord.plan.staging import PlanFacts, StagedPlan
from beam_tfrecord.summary import OptionsSummary
from beam_tfrecord.transforms import REJECTS, BuildRecordFn, ReadShardFn, duplicate_groups
from beam_tfrecord.write.sinks import TallyFn
from beam_tfrecord.write.summary import build_summary
from beam_tfrecord.write.tally import Tally
from pipelines.report import format_table


def task_of(tmp_path, files: dict[str, bytes]) -> ShardTask:
    imagegen.write_tree(tmp_path, files)
    inputs = [
        PlannedInput(relpath=r, path=str(tmp_path / r), size=len(d), split="train", label=0, label_text="a")
        for r, d in files.items()
    ]
    inputs.append(PlannedInput("a/gone.jpg", str(tmp_path / "a/gone.jpg"), 10, "train", 0, "a"))
    return ShardTask("train", 1, 2, tuple(inputs))


def test_read_and_build_route_records_and_rejects(tmp_path):
    task = task_of(
        tmp_path,
        {"a/1.jpg": imagegen.jpeg(), "a/2.png": imagegen.rgba_png(), "a/3.jpg": b"", "a/4.jpg": b"x"},
    )
    config = ConvertConfig(output=str(tmp_path / "out"), read_threads=2)
    staged = StagedPlan(temp_dir=str(tmp_path / "out" / ".temp"), shard_counts={"train": 2}, inputs=5)
    with local_pipeline() as p:
        read = (
            p
            | beam.Create([task])
            | "Read" >> beam.ParDo(ReadShardFn(config, staged)).with_outputs(REJECTS, main="pending")
        )
        built = read.pending | "Build" >> beam.ParDo(BuildRecordFn(config)).with_outputs(
            REJECTS, main="records"
        )
        assert_that(
            built.records
            | "Facts" >> beam.Map(lambda r: (r.relpath, r.shard, r.reencoded, len(r.example) > 100)),
            equal_to([("a/1.jpg", ("train", 1, 2), False, True), ("a/2.png", ("train", 1, 2), True, True)]),
            label="Records",
        )
        assert_that(
            read[REJECTS] | "Reasons" >> beam.Map(lambda r: (r.path, r.reason)),
            equal_to([("a/3.jpg", "empty"), ("a/4.jpg", "not_an_image"), ("a/gone.jpg", "unreadable")]),
            label="Rejects",
        )
        tally = (built.records, read[REJECTS]) | beam.Flatten() | beam.CombineGlobally(TallyFn())
        assert_that(
            tally | beam.Map(lambda t: (dict(t.records), dict(t.rejects), t.reencoded)),
            equal_to([({"train": 2}, {"empty": 1, "not_an_image": 1, "unreadable": 1}, 1)]),
            label="Tally",
        )


def test_summary_flags_an_inconsistent_count_and_empty_classes():
    facts = PlanFacts(listed=4, class_names=["a", "b"], splits={"train": 1.0}, shard_counts={"train": 1})
    tally = Tally()
    tally.records["train"] = 2
    tally.by_split_label[("train", "a")] = 2
    summary = build_summary(facts, [], tally, [("/o/train-00000-of-00001.tfrecord", 99)], OptionsSummary())
    assert summary.consistent is False  # two inputs are neither records nor rejects
    assert "class 'b' has no valid image" in summary.warnings
    table = format_table(summary)
    assert "inputs = records + rejects  NO" in table
    assert "warning: class 'b' has no valid image" in table


def test_the_transform_in_a_users_own_pipeline(pets_tree, tmp_path):
    """Two conversions of one tree in one pipeline of the user's: gzip with the simple schema
    (read back with load_dataset), and the simple schema uncompressed (read back with TFDS).
    Nothing about either comes from a command line."""
    import tensorflow_datasets as tfds

    source = SourceConfig(input=str(pets_tree), splits={"train": 0.75, "validation": 0.25})
    gzip = ConvertConfig(output=str(tmp_path / "gzip"), schema="simple", compression="gzip", num_shards=2)
    plain = ConvertConfig(output=str(tmp_path / "plain"), schema="simple")
    staged = {name: prepare(source, config) for name, config in (("gzip", gzip), ("plain", plain))}
    assert not any(p.name.endswith(".tfrecord") for p in (tmp_path / "gzip").iterdir())  # staged, not run
    with local_pipeline() as p:
        summaries = [
            p | f"Convert[{name}]" >> ImagesToTFRecords(staged[name], config)
            for name, config in (("gzip", gzip), ("plain", plain))
        ]
        assert_that(
            summaries[0] | beam.Map(lambda s: (s.records, s.consistent)),
            equal_to([(60, True)]),
            label="Done",
        )

    summary = json.loads((tmp_path / "gzip" / "summary.json").read_text())
    assert summary["options"]["compression"] == "gzip" and summary["options"]["schema"] == "simple"
    assert summary["options"]["splits"] == {"train": 0.75, "validation": 0.25}
    assert sorted(p.name for p in (tmp_path / "gzip").glob("train-*")) == [
        "train-00000-of-00002.tfrecord.gz",
        "train-00001-of-00002.tfrecord.gz",
    ]
    seen = 0
    for split in ("train", "validation"):
        for record in beam_tfrecord.load_dataset(
            str(tmp_path / "gzip"), split, batch_size=None, features=True
        ):
            relpath = record["id"].numpy().decode()
            assert record["image_raw"].numpy() == (pets_tree / relpath).read_bytes()
            assert record["label"].numpy() == ["cat", "dog"].index(relpath.split("/")[0])
            seen += 1
    assert seen == 60

    builder = tfds.builder_from_directory(str(tmp_path / "plain"))
    assert builder.info.features["label"].names == ["cat", "dog"]
    counts = {split: info.num_examples for split, info in builder.info.splits.items()}
    assert sum(counts.values()) == 60
    images = [example["image_raw"] for example in builder.as_dataset(split="train").take(3)]
    assert all(np.asarray(image).shape[2] == 3 for image in images)
    assert not [p for p in tmp_path.rglob(".temp-beam-tfrecord-*")]  # staged plans removed at the end


def test_rejects_keep_their_reason_through_the_metadata(bad_tree, tmp_path):
    source = SourceConfig(input=str(bad_tree))
    config = ConvertConfig(
        output=str(tmp_path / "out"), image=ImageConfig(max_pixels=imagegen.BAD_INPUT_MAX_PIXELS)
    )
    staged = prepare(source, config)
    with local_pipeline() as p:
        _ = p | ImagesToTFRecords(staged, config)
    lines = [
        RejectLine.from_json(line) for line in (tmp_path / "out" / "rejects.jsonl").read_text().splitlines()
    ]
    assert {line.reason for line in lines} == {"empty", "not_an_image", "too_large", "truncated", "skipped"}


def test_duplicate_groups_are_the_same_whatever_order_the_keys_come_in():
    """Content keys as workers hand them over, in any order: one group per content that more than
    one record holds, copies sorted by path, groups by content; a content held once is no group."""
    keys = [
        ("bb", ("dog/2.jpg", "train")),
        ("aa", ("cat/9.jpg", "validation")),
        ("cc", ("cat/3.jpg", "train")),
        ("aa", ("cat/1.jpg", "train")),
        ("bb", ("dog/1.jpg", "train")),
        ("aa", ("dog/5.jpg", "train")),
    ]
    expected = [
        DuplicateGroup("aa", (("cat/1.jpg", "train"), ("cat/9.jpg", "validation"), ("dog/5.jpg", "train"))),
        DuplicateGroup("bb", (("dog/1.jpg", "train"), ("dog/2.jpg", "train"))),
    ]
    assert duplicate_groups(keys) == expected
    assert duplicate_groups(reversed(keys)) == expected
    assert duplicate_groups([]) == []
