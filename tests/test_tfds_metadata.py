"""TFDS loads our output with its own reader, in both schemas, from the metadata the run wrote."""

from __future__ import annotations

import json

import conftest
import imagegen
import pytest
import tensorflow_datasets as tfds

from beam_tfrecord.write.tfds_metadata import dataset_name


def convert(input_dir, output_dir, *extra: str) -> None:
    assert conftest.convert(input_dir, output_dir, *extra) == 0


@pytest.mark.parametrize(
    ("schema", "label", "name"),
    [
        ("tfds", ("image", "class", "label"), ("image", "filename")),
        ("simple", ("label",), ("id",)),
    ],
)
def test_tfds_loads_both_schemas(pets_tree, tmp_path, schema, label, name):
    out = tmp_path / "out"
    convert(pets_tree, out, "--schema", schema, "--splits", "train=0.7,validation=0.3", "--num_shards", "2")
    summary = json.loads((out / "summary.json").read_text())
    assert summary["tfds_metadata"]["written"] is True
    builder = tfds.builder_from_directory(str(out))
    label_feature = builder.info.features
    for key in label:
        label_feature = label_feature[key]
    assert label_feature.names == (out / "labels.txt").read_text().split()
    for split in ("train", "validation"):
        assert builder.info.splits[split].num_examples == summary["splits"][split]["records"]
        count = 0
        for example in builder.as_dataset(split=split):
            value = example
            for key in name:
                value = value[key]
            relpath = value.numpy().decode()
            image = example["image"]["encoded"] if schema == "tfds" else example["image_raw"]
            assert image.shape == (30, 40 + int(relpath.split(".")[1]) % 5, 3)
            target = example
            for key in label:
                target = target[key]
            assert label_feature.int2str(int(target)) == relpath.split("/")[0]
            count += 1
        assert count == summary["splits"][split]["records"]


def test_simple_schema_is_supervised(pets_tree, tmp_path):
    out = tmp_path / "out"
    convert(pets_tree, out, "--schema", "simple")
    dataset = tfds.builder_from_directory(str(out)).as_dataset(split="train[:4]", as_supervised=True)
    assert [tuple(image.shape)[2] for image, _ in dataset] == [3, 3, 3, 3]


def test_unlabeled_output_loads(pets_tree, tmp_path):
    out = tmp_path / "out"
    convert(pets_tree, out, "--label_source", "none")
    builder = tfds.builder_from_directory(str(out))
    assert "class" not in builder.info.features["image"]
    assert sum(1 for _ in builder.as_dataset(split="train")) == 60


def test_gzip_output_gets_no_tfds_metadata_and_overwrite_clears_an_earlier_one(pets_tree, tmp_path):
    out = tmp_path / "out"
    convert(pets_tree, out)
    assert (out / "dataset_info.json").exists() and (out / "image-class-label.labels.txt").exists()
    convert(pets_tree, out, "--compression", "gzip", "--overwrite")
    summary = json.loads((out / "summary.json").read_text())
    assert summary["tfds_metadata"] == {
        "written": False,
        "reason": "TFDS reads uncompressed TFRecord files only",
    }
    assert not (out / "dataset_info.json").exists() and not (out / "features.json").exists()
    assert not (out / "image-class-label.labels.txt").exists()


def test_a_machine_without_tfds_writes_the_records_and_says_why_no_metadata(pets_tree, tmp_path, monkeypatch):
    """A machine with PyTorch and no TensorFlow (where tensorflow-datasets does not import) still
    converts; the summary says why TFDS's files are missing, instead of the run failing at the end."""
    import sys

    monkeypatch.setitem(sys.modules, "tensorflow_datasets", None)
    out = tmp_path / "out"
    convert(pets_tree, out)
    summary = json.loads((out / "summary.json").read_text())
    assert summary["records"] == 60 and summary["tfds_metadata"]["written"] is False
    assert summary["tfds_metadata"]["reason"].startswith("tensorflow-datasets does not import here")
    assert not (out / "dataset_info.json").exists()


def test_one_gray_image_in_a_forced_grayscale_run(tmp_path):
    root = tmp_path / "in"
    imagegen.write_tree(root, {"a/1.jpg": imagegen.jpeg(seed=1), "b/2.png": imagegen.png(seed=2)})
    out = tmp_path / "out"
    convert(root, out, "--channels", "1")
    (example,) = tfds.builder_from_directory(str(out)).as_dataset(split="train[:1]")
    assert example["image"]["encoded"].shape == (32, 48, 1)


@pytest.mark.parametrize(
    ("output", "name"),
    [
        ("/data/out", "out"),
        ("gs://b/My Pets-2024/", "my_pets_2024"),
        ("/x/2024", "images_2024"),
        ("/", "images"),
    ],
)
def test_dataset_name_is_snake_case(output, name):
    assert dataset_name(output) == name
