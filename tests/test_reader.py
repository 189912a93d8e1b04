"""load_dataset on real conversions: records and labels come back byte for byte, in every schema,
compressed or not, without the caller knowing any feature key."""

from __future__ import annotations

import os
import re
from pathlib import Path

import conftest
import imagegen
import numpy as np
import pytest
import tensorflow as tf
from outputcheck import all_inputs
from PIL import Image

import beam_tfrecord


def convert(input_dir, output_dir, *extra: str) -> None:
    assert conftest.convert(input_dir, output_dir, *extra) == 0


@pytest.fixture(scope="module")
def pets_output(tmp_path_factory) -> Path:
    """pets_tree's pictures converted once into three shards, every record in train, for the
    tests that only read it (the cache test moves it away and back)."""
    root = tmp_path_factory.mktemp("pets-output")
    convert(conftest.write_pets(root / "pets"), root / "out", "--num_shards", "3")
    return root / "out"


def test_passthrough_records_round_trip_byte_for_byte(pets_tree, tmp_path):
    out = tmp_path / "out"
    convert(pets_tree, out, "--splits", "train=0.7,validation=0.3", "--num_shards", "2")
    seen = {}
    for split in ("train", "validation"):
        dataset = beam_tfrecord.load_dataset(
            str(out), split, batch_size=None, features=True, decode_images=True
        )
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


def test_batches_are_resized_shuffled_repeatably_and_complete(pets_output):
    out = pets_output

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


def test_autotuning_changes_the_speed_of_a_pass_and_nothing_it_gives(pets_output):
    out = pets_output

    def batches(**options) -> list[tuple[bytes, list[int]]]:
        dataset = beam_tfrecord.load_dataset(str(out), batch_size=8, image_size=(16, 20), seed=5, **options)
        return [(images.numpy().tobytes(), labels.numpy().tolist()) for images, labels in dataset]

    assert batches() == batches(autotune=True)


def test_a_cached_split_is_read_from_memory_after_its_first_pass(pets_output, tmp_path):
    """cache=True: once a pass is done, later passes need no file (the folder moved away, they
    still read), each pass gives every record once and the same pictures, in a new order each
    pass, and a seed repeats the sequence of orders."""
    out, moved = pets_output, tmp_path / "moved"

    def read(cache: bool, seed: int | None = 7) -> tf.data.Dataset:
        return beam_tfrecord.load_dataset(
            str(out), batch_size=None, image_size=(16, 20), features=True, seed=seed, cache=cache
        )

    def one_pass(dataset: tf.data.Dataset) -> list[tuple[str, bytes]]:
        return [(r["image/filename"].numpy().decode(), r["image"].numpy().tobytes()) for r in dataset]

    plain = sorted(one_pass(read(cache=False)))
    cached = read(cache=True)
    first = one_pass(cached)
    out.rename(moved)
    try:
        later = [one_pass(cached), one_pass(cached)]
    finally:
        moved.rename(out)
    passes = [first, *later]
    assert all(sorted(each) == plain for each in passes)  # every record once, the same pictures
    assert len({tuple(name for name, _ in each) for each in passes}) == 3  # a new order each pass
    again = read(cache=True)
    assert [one_pass(again) for _ in range(3)] == passes

    uncached = read(cache=False)
    one_pass(uncached)
    out.rename(moved)
    try:
        with pytest.raises(tf.errors.NotFoundError):  # without the cache, a pass reads the files
            one_pass(uncached)
    finally:
        moved.rename(out)


def test_cache_refuses_a_split_larger_than_the_machines_memory(pets_output, monkeypatch):
    from beam_tfrecord.read import tf_data

    out = pets_output
    size = tf_data.split_files(str(out), "train").shard_bytes
    assert size > 0
    physical = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    assert 0 < tf_data._machine_memory() <= physical  # what the refusal below compares with
    monkeypatch.setattr(tf_data, "_machine_memory", lambda: size - 1)
    with pytest.raises(ValueError, match=r"cache=True would hold split 'train'.* leave cache off"):
        beam_tfrecord.load_dataset(str(out), cache=True)
    monkeypatch.setattr(tf_data, "_machine_memory", lambda: size)
    assert int(beam_tfrecord.load_dataset(str(out), batch_size=None, cache=True).cardinality()) > 0


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


def test_unknown_split_names_the_ones_there(pets_output):
    out = pets_output
    with pytest.raises(ValueError, match=r"no split 'test'.*\['train'\]"):
        beam_tfrecord.load_dataset(str(out), "test")


def test_defaults_iterate_mixed_sizes_and_explicit_batches_are_refused_at_call_time(pets_output):
    out = pets_output  # widths 40 to 44: the images differ in size
    images = [image for image, _ in beam_tfrecord.load_dataset(str(out), "train")]
    assert len(images) == 60 and len({tuple(image.shape) for image in images}) > 1
    with pytest.raises(ValueError, match=r"range from 40x30 to 44x30.*image_size=\(height, width\)"):
        beam_tfrecord.load_dataset(str(out), "train", batch_size=8)  # raised here, not when iterating
    batches = beam_tfrecord.load_dataset(str(out), "train", image_size=(24, 32))
    assert [tuple(images.shape) for images, _ in batches] == [(32, 24, 32, 3), (28, 24, 32, 3)]
    # features=True decodes nothing unless asked, so it batches any output
    record = next(iter(beam_tfrecord.load_dataset(str(out), "train", features=True, batch_size=8)))
    assert "image" not in record and record["image/encoded"].shape == (8,)


def test_an_unfinished_folder_gets_the_same_message_from_every_reader(pets_tree, tmp_path):
    from pipelines import inspect

    out = tmp_path / "out"
    convert(pets_tree, out)
    (out / "summary.json").unlink()  # as while a run is still going, or after it was stopped
    foreign = tmp_path / "photos"
    foreign.mkdir()
    (foreign / "cat.jpg").write_bytes(imagegen.jpeg())
    for folder in (out, foreign):
        expected = f"{folder} holds no finished conversion: summary.json is missing"
        for read in (beam_tfrecord.load_dataset, beam_tfrecord.iter_examples, beam_tfrecord.class_names):
            with pytest.raises(beam_tfrecord.IncompleteOutput, match=re.escape(expected)):
                read(str(folder))
        assert inspect.run([str(folder), "--pictures", str(tmp_path)]) == 1
    assert not (tmp_path / "contact_sheet.png").exists()


def test_keras_like_resizes_stretch_crop_and_pad(tmp_path):
    """An 80x40 picture: red, green, green, blue quarters from left to right."""
    pixels = np.zeros((40, 80, 3), np.uint8)
    pixels[:, :20, 0] = pixels[:, 20:60, 1] = pixels[:, 60:, 2] = 255
    root = tmp_path / "in"
    imagegen.write_tree(root, {"a/quarters.png": imagegen.encode(Image.fromarray(pixels), "PNG")})
    out = tmp_path / "out"
    convert(root, out)

    def image(**resize) -> np.ndarray:
        dataset = beam_tfrecord.load_dataset(str(out), image_size=(20, 20), batch_size=None, **resize)
        return next(iter(dataset))[0].numpy()

    stretched, cropped, padded = image(), image(crop_to_aspect_ratio=True), image(pad_to_aspect_ratio=True)
    assert tuple(stretched[10, 1]) == (255, 0, 0) and tuple(stretched[10, 18]) == (0, 0, 255)
    assert (cropped[:, :, 1] == 255).all() and (cropped[:, :, [0, 2]] == 0).all()  # the centre 40x40
    assert (padded[:5] == 0).all() and (padded[15:] == 0).all()  # 20x10 letterboxed
    assert tuple(padded[10, 1]) == (255, 0, 0) and tuple(padded[10, 18]) == (0, 0, 255)
    with pytest.raises(ValueError, match="cannot both"):
        beam_tfrecord.load_dataset(
            str(out), image_size=(20, 20), crop_to_aspect_ratio=True, pad_to_aspect_ratio=True
        )


def test_dct_scale_is_chosen_per_record_from_the_stored_size():
    from beam_tfrecord.read.tf_data import dct_ratio

    def ratio(height, width, size, pad=False):
        return int(dct_ratio(tf.constant(height), tf.constant(width), size, pad))

    assert ratio(1200, 1600, (224, 224)) == 2  # 1/4: 300x400 still covers 224x224
    assert ratio(300, 400, (224, 224)) == 0  # less than twice the target: full scale
    assert ratio(448, 4000, (224, 224)) == 1  # the shorter side decides for stretch and crop
    assert ratio(448, 4000, (224, 224), pad=True) == 3  # the fit needs only 224 of the 4000
    assert ratio(1800, 1800, (224, 224)) == 3  # never below 1/8


def test_reduced_dct_decode_is_close_to_a_full_decode(tmp_path):
    root = tmp_path / "in"
    imagegen.write_tree(root, {"a/big.jpg": imagegen.jpeg(256, 192, seed=3)})
    out = tmp_path / "out"
    convert(root, out)
    image = next(iter(beam_tfrecord.load_dataset(str(out), image_size=(24, 32), batch_size=None)))[0]
    encoded = (root / "a/big.jpg").read_bytes()
    full = tf.image.resize(tf.io.decode_jpeg(encoded, channels=3), (24, 32))
    assert image.shape == (24, 32, 3)
    assert float(tf.reduce_mean(tf.abs(tf.cast(image, tf.float32) - full))) < 6.0
    # dct_scaling=False: the full decode, resized and rounded, to the last bit
    unscaled = beam_tfrecord.load_dataset(str(out), image_size=(24, 32), batch_size=None, dct_scaling=False)
    expected = tf.cast(tf.round(full), tf.uint8)
    assert tf.reduce_all(next(iter(unscaled))[0] == expected)
    assert not tf.reduce_all(image == expected)  # the default did decode at a reduced scale
