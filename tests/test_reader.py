"""load_dataset on real conversions: records and labels come back byte for byte, in every schema,
compressed or not, without the caller knowing any feature key."""

from __future__ import annotations

import subprocess
import sys

import conftest
import imagegen
import numpy as np
import pytest
import tensorflow as tf
from outputcheck import all_inputs

import beam_tfrecord


def convert(input_dir, output_dir, *extra: str) -> None:
    assert conftest.convert(input_dir, output_dir, *extra) == 0


def test_passthrough_records_round_trip_byte_for_byte(pets_tree, tmp_path):
    out = tmp_path / "out"
    convert(pets_tree, out, "--splits", "train=0.7,validation=0.3", "--num_shards", "2")
    seen = {}
    for split in ("train", "validation"):
        dataset = beam_tfrecord.load_dataset(str(out), split, batch_size=None, features=True)
        for record in dataset:
            relpath = record["image/filename"].numpy().decode()
            source = (pets_tree / relpath).read_bytes()
            assert record["image/encoded"].numpy() == source, relpath
            assert record["image/class/label"].numpy() == ["cat", "dog"].index(relpath.split("/")[0])
            expected = tf.io.decode_image(source, channels=3, expand_animations=False)
            np.testing.assert_array_equal(record["image"].numpy(), expected.numpy())
            seen[relpath] = split
    assert set(seen) == {p for p in all_inputs(pets_tree) if not p.endswith("broken.jpg")}
    assert beam_tfrecord.class_names(str(out)) == ["cat", "dog"]


def test_batches_are_resized_shuffled_repeatably_and_complete(pets_tree, tmp_path):
    out = tmp_path / "out"
    convert(pets_tree, out, "--num_shards", "3")

    def labels(seed: int) -> list[int]:
        dataset = beam_tfrecord.load_dataset(str(out), batch_size=8, image_size=(16, 20), seed=seed)
        assert dataset.element_spec[0].shape.as_list() == [None, 16, 20, 3]
        assert dataset.element_spec[0].dtype == tf.uint8
        return [int(y) for _, batch in dataset for y in batch.numpy()]

    first = labels(seed=3)
    assert sorted(first) == [0] * 30 + [1] * 30
    assert labels(seed=3) == first
    unshuffled = beam_tfrecord.load_dataset(str(out), batch_size=None, shuffle=False)
    assert [int(y) for _, y in unshuffled] != first  # the seed did shuffle
    assert int(unshuffled.cardinality()) == 60


def test_gzip_simple_schema_loads(tmp_path):
    root = tmp_path / "flat"
    files = {f"{k}.{i}.jpg": imagegen.jpeg(seed=i) for k in ("cat", "dog") for i in range(4)}
    imagegen.write_tree(root, files)
    out = tmp_path / "out"
    pattern = ("--label_source", "filename", "--label_pattern", r"^(cat|dog)\.")
    convert(root, out, *pattern, "--schema", "simple", "--compression", "gzip", "--num_shards", "2")
    assert sorted(p.name for p in out.glob("*.gz")) == [
        "train-00000-of-00002.tfrecord.gz",
        "train-00001-of-00002.tfrecord.gz",
    ]
    records = list(beam_tfrecord.load_dataset(str(out), batch_size=None, features=True))
    assert len(records) == 8
    for record in records:
        name = record["id"].numpy().decode()
        assert record["image_raw"].numpy() == files[name]
        assert record["label"].numpy() == (0 if name.startswith("cat") else 1)
    images, labels = next(iter(beam_tfrecord.load_dataset(str(out), batch_size=8)))
    assert images.shape == (8, 32, 48, 3) and sorted(labels.numpy()) == [0, 0, 0, 0, 1, 1, 1, 1]


def test_grayscale_channels_follow_the_run_or_the_caller(tmp_path):
    root = tmp_path / "gray"
    imagegen.write_tree(root, {f"a/{i}.jpg": imagegen.jpeg(seed=i) for i in range(3)})
    out = tmp_path / "out"
    convert(root, out, "--channels", "1")
    image, _ = next(iter(beam_tfrecord.load_dataset(str(out), batch_size=None)))
    assert image.shape == (32, 48, 1)
    image, _ = next(iter(beam_tfrecord.load_dataset(str(out), batch_size=None, channels=3)))
    assert image.shape == (32, 48, 3)


def test_unlabeled_run_yields_images_alone(pets_tree, tmp_path):
    out = tmp_path / "out"
    convert(pets_tree, out, "--label_source", "none")
    dataset = beam_tfrecord.load_dataset(str(out), batch_size=None)
    assert isinstance(dataset.element_spec, tf.TensorSpec)
    assert sum(1 for _ in dataset) == 60
    assert beam_tfrecord.class_names(str(out)) is None


def test_unknown_split_names_the_ones_there(pets_tree, tmp_path):
    out = tmp_path / "out"
    convert(pets_tree, out)
    with pytest.raises(ValueError, match=r"no split 'test'.*\['train'\]"):
        beam_tfrecord.load_dataset(str(out), "test")


def test_import_stays_free_of_tensorflow():
    code = "import sys, beam_tfrecord; assert 'tensorflow' not in sys.modules; beam_tfrecord.load_dataset"
    subprocess.run([sys.executable, "-c", code], check=True)
