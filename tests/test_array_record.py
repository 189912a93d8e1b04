"""`--file_format array_record`: the same records as TFRecord in ArrayRecord shards, written on
local disk and to gs://, kept whole through a kill and an append, and read at random by the
real array_record package, TFDS's data source, Grain, and the project's own readers."""

from __future__ import annotations

import json
import logging
import os
import random
import shutil

import captiongen
import imagegen
import keypointgen
import pausing
import pytest
import segmentationgen
from conftest import REPO, convert
from outputcheck import serialized_records, shard_files, summary

import beam_tfrecord
from beam_tfrecord.read.examples import iter_examples
from beam_tfrecord.read.random_access import RecordArray, record_parser
from beam_tfrecord.write.array_record_files import RemoteArrayRecord

ARGS = ("--splits", "train=0.7,test=0.3", "--num_shards", "2", "--no_progress")
AR = ("--file_format", "array_record")


@pytest.fixture(scope="module")
def tree(tmp_path_factory):
    root = tmp_path_factory.mktemp("ar") / "in"
    files = {f"{c}/{i}.jpg": imagegen.jpeg(40, 30, seed=i + 50 * (c == "b")) for c in "ab" for i in range(12)}
    imagegen.write_tree(root, files | {"a/broken.jpg": b"\xff\xd8\xff"})
    return root


@pytest.fixture(scope="module")
def pair(tree, tmp_path_factory):
    """One input converted twice: TFRecord shards, and ArrayRecord shards."""
    base = tmp_path_factory.mktemp("pair")
    tfrecord, array = base / "tfrecord", base / "array_record"
    assert convert(tree, tfrecord, *ARGS) == 0
    assert convert(tree, array, *ARGS, *AR) == 0
    return tfrecord, array


def _by_shard(output) -> dict[str, list[bytes]]:
    return {
        os.path.basename(path).split(".")[0]: serialized_records(output, os.path.basename(path).split("-")[0])
        for path in shard_files(output, "train") + shard_files(output, "test")
    }


def test_the_records_are_the_tfrecord_runs_in_the_same_shards_and_order(pair):
    tfrecord, array = pair
    for split in ("train", "test"):
        assert serialized_records(array, split) == serialized_records(tfrecord, split)
        assert [os.path.basename(p) for p in shard_files(array, split)] == [
            f"{split}-0000{i}-of-00002.array_record" for i in range(2)
        ]
    assert not [name for name in os.listdir(array) if name.endswith(".idx")]  # its own index
    ours, theirs = summary(array), summary(tfrecord)
    assert ours["consistent"] and ours["records"] == theirs["records"] == 24 and ours["rejects"] == 1
    assert {s: v["digest"] for s, v in ours["splits"].items()} == {
        s: v["digest"] for s, v in theirs["splits"].items()
    }
    assert ours["options"]["file_format"] == "array_record" and "file_format" not in theirs["options"]
    assert json.loads((array / "dataset_info.json").read_text())["fileFormat"] == "array_record"


def test_every_reader_reads_every_record_and_at_random(pair, tmp_path):
    tfrecord, array = pair
    out = str(array)
    in_order = [r["filename"] for r in iter_examples(out, "train")]
    records = RecordArray(out, "train")
    assert len(records) == len(in_order) == summary(array)["splits"]["train"]["records"]
    positions = list(range(len(records)))
    random.Random(3).shuffle(positions)
    assert [records[i]["filename"] for i in positions] == [in_order[i] for i in positions]
    # Over TFRecord with its .idx files, position i is the same record.
    assert [RecordArray(str(tfrecord), "train").serialized(i) for i in positions] == [
        records.serialized(i) for i in positions
    ]
    halves = [[r["filename"] for r in iter_examples(out, "train", shard=(i, 2))] for i in range(2)]
    assert halves[0] + halves[1] == in_order and abs(len(halves[0]) - len(halves[1])) <= 1
    images, labels = next(iter(beam_tfrecord.load_dataset(out, "train", image_size=(16, 16), batch_size=64)))
    assert images.shape == (len(in_order), 16, 16, 3) and len(labels) == len(in_order)

    import tensorflow_datasets as tfds

    source = tfds.builder_from_directory(out).as_data_source("train")
    assert len(source) == len(in_order)
    assert [source[i]["image"]["filename"].decode() for i in range(len(source))] == in_order

    import grain

    paths = beam_tfrecord.read.files.split_files(out, "train").paths
    dataset = grain.MapDataset.source(grain.sources.ArrayRecordDataSource(paths)).shuffle(seed=7)
    dataset = dataset.map(record_parser(out, "train"))
    shuffled = [dataset[i]["filename"] for i in range(len(dataset))]
    assert sorted(shuffled) == sorted(in_order) and shuffled != in_order  # every record once, shuffled

    from pipelines import inspect

    assert inspect.run([out, "--pictures", str(tmp_path)]) == 0
    assert (tmp_path / "contact_sheet.png").stat().st_size > 0


def test_a_killed_run_resumes_its_finished_array_record_shards(tree, pair, tmp_path, caplog):
    _, array = pair
    out = tmp_path / "out"
    pausing.killed_at("finalizing", tree, out, *ARGS, *AR)
    assert not (out / "summary.json").exists()
    caplog.set_level(logging.INFO, logger="beam_tfrecord")
    assert convert(tree, out, *ARGS, *AR) == 0
    assert "resuming the interrupted run" in caplog.text
    assert _by_shard(out) == _by_shard(array)
    assert not [n for n in os.listdir(out) if n.startswith(".temp")]


def test_an_append_grows_array_record_shards_as_a_run_over_every_picture(tree, pair, tmp_path):
    _, array = pair
    first = tmp_path / "first"
    shutil.copytree(tree, first)
    later = sorted((first / "b").iterdir())[6:]
    for path in later:
        path.unlink()
    grown = tmp_path / "grown"
    assert convert(first, grown, *ARGS, *AR) == 0
    assert convert(tree, grown, *ARGS, *AR, "--append") == 0
    for split in ("train", "test"):
        grown_names = sorted(r["filename"] for r in iter_examples(str(grown), split))
        assert grown_names == sorted(r["filename"] for r in iter_examples(str(array), split))
        assert all(name.endswith(".array_record") for name in summary(grown)["splits"][split]["files"])
    assert len(RecordArray(str(grown), "train")) == summary(grown)["splits"]["train"]["records"]


def test_an_append_in_another_file_format_is_refused_in_one_line(pair, tree, capsys):
    tfrecord, _ = pair
    assert convert(tree, tfrecord, *ARGS, *AR, "--append") == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "--file_format is 'array_record'" in err[0]


@pytest.mark.parametrize(
    ("extra", "message"),
    [
        (("--compression", "gzip"), "ArrayRecord compresses inside"),
        (("--sink", "beam"), "beam writes TFRecord only"),
        (("--array_record_options", "group_size:8,bogus"), "Unknown option bogus"),
    ],
)
def test_settings_that_cannot_apply_are_refused_in_one_line(tree, tmp_path, capsys, extra, message):
    assert convert(tree, tmp_path / "out", *ARGS, *AR, *extra) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and message in err[0], err
    assert not (tmp_path / "out").exists()


def test_writer_options_reach_the_files(tree, pair, tmp_path):
    _, array = pair
    out = tmp_path / "zstd"
    assert convert(tree, out, *ARGS, *AR, "--array_record_options", "group_size:16,zstd") == 0
    assert serialized_records(out, "train") == serialized_records(array, "train")
    from array_record.python.array_record_module import ArrayRecordReader

    reader = ArrayRecordReader(str(shard_files(out, "train")[0]))
    assert "group_size:16" in reader.writer_options_string() and "zstd" in reader.writer_options_string()
    assert RecordArray(str(out), "train")[3]["filename"] == RecordArray(str(array), "train")[3]["filename"]


def test_gzip_tfrecord_output_is_refused_for_random_access(tree, tmp_path):
    out = tmp_path / "gz"
    assert convert(tree, out, *ARGS, "--compression", "gzip") == 0
    with pytest.raises(ValueError, match="gzip shards cannot be read at random"):
        RecordArray(str(out), "train")


def _task_tree(task: str, root):
    if task == "detection":
        return os.path.join(REPO, "sample", "detection", "coco"), ("--annotations", "coco")
    if task == "segmentation":
        return segmentationgen.kaggle_binary(root, count=4).root, ("--task", "segmentation")
    if task == "captions":
        captiongen.flickr8k(root, pictures=4)
        return root, ("--task", "captions")
    keypointgen.ultralytics_pose(root)
    return root, ("--task", "keypoints", "--annotations", "yolo")


@pytest.mark.parametrize("task", ["detection", "segmentation", "captions", "keypoints"])
def test_every_task_writes_the_same_records_in_array_record(tmp_path, task):
    source, args = _task_tree(task, tmp_path / "data")
    tfrecord, array = tmp_path / "tfrecord", tmp_path / "array_record"
    assert convert(source, tfrecord, *args, "--no_progress") == 0
    assert convert(source, array, *args, *AR, "--no_progress") == 0
    for split in summary(tfrecord)["splits"]:
        assert serialized_records(array, split) == serialized_records(tfrecord, split)
        assert len(RecordArray(str(array), split)) == summary(array)["splits"][split]["records"]
    split = next(iter(summary(array)["splits"]))
    assert next(iter(beam_tfrecord.load_dataset(str(array), split, image_size=(32, 32), batch_size=2)))


def test_gs_output_is_written_whole_and_refused_for_reading_in_one_line(tree, pair, tmp_path, monkeypatch):
    from apache_beam.io.filesystems import FileSystems
    from gcsemulator import EMULATOR_ENV, Emulator

    _, array = pair
    with Emulator() as emulator:
        monkeypatch.setenv(EMULATOR_ENV, emulator.url)
        emulator.client().create_bucket("ar")
        output = "gs://ar/out"
        assert convert(tree, output, *ARGS, *AR) == 0
        found = sorted(m.path for m in FileSystems.match([f"{output}/*"])[0].metadata_list)
        shards = [p for p in found if p.endswith(".array_record")]
        assert [os.path.basename(p) for p in shards] == sorted(
            f"{s}-0000{i}-of-00002.array_record" for s in ("test", "train") for i in range(2)
        )
        assert not [p for p in found if ".idx" in p or ".temp" in p]
        local = tmp_path / "copy"
        local.mkdir()
        for path in found:
            with FileSystems.open(path) as source:
                (local / os.path.basename(path)).write_bytes(source.read())
        assert _by_shard(local) == _by_shard(array)
        assert len(RecordArray(str(local), "train")) == len(RecordArray(str(array), "train"))
        with pytest.raises(RemoteArrayRecord, match="copy the output to a local disk"):
            RecordArray(output, "train")
        with pytest.raises(RemoteArrayRecord, match="reads local files only"):
            beam_tfrecord.load_dataset(output, "train")
