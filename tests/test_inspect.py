"""pipelines.inspect on real conversions: a sound output passes and is drawn; a flipped byte, a
missing shard, a shard-count mismatch and an undecodable image each fail with a clear message."""

from __future__ import annotations

import json
import struct

import imagegen
import pytest
import tensorflow as tf
from PIL import Image

from beam_tfrecord.keys import key_of
from beam_tfrecord.write.tfrecord_files import FramingError, count_records
from pipelines import inspect
from pipelines.convert import run


@pytest.fixture(autouse=True)
def pictures_in_tmp(tmp_path, monkeypatch):
    """inspect draws into the current directory by default: never the checkout."""
    monkeypatch.chdir(tmp_path)


@pytest.fixture
def output(pets_tree, tmp_path):
    """60 records in train (2 shards) and validation (2 shards), TFDS metadata beside them."""
    out = tmp_path / "out"
    args = ["--input", str(pets_tree), "--output", str(out), "--no_progress", "--num_shards", "2"]
    assert run([*args, "--splits", "train=0.7,validation=0.3"]) == 0
    return out


def inspect_output(out, capsys, *extra: str) -> tuple[int, str, str]:
    code = inspect.run([str(out), *extra])
    captured = capsys.readouterr()
    return code, captured.out, captured.err


def test_sound_output_passes_and_is_drawn_outside_it(output, capsys, tmp_path):
    before = {p.name: p.stat().st_mtime_ns for p in output.iterdir()}
    code, out, err = inspect_output(output, capsys, "--sample", "10", "--seed", "1")
    assert code == 0, err
    assert "ok: every shard" in out
    assert "records                  60 (summary.json: 60)" in out
    assert "most common sizes (WxH)" in out and "TFDS metadata" in out
    assert {p.name: p.stat().st_mtime_ns for p in output.iterdir()} == before  # the dataset is only read
    with Image.open(tmp_path / "contact_sheet.png") as sheet:  # the current directory by default
        assert sheet.width > 500 and sheet.height > 300
    with Image.open(tmp_path / "label_histogram.png") as histogram:
        assert histogram.height >= 64 + 2 * 26


def test_sample_is_repeatable_for_a_seed(output):
    from beam_tfrecord.read.verify import verify_output

    names = [
        [s.filename for s in verify_output(str(output), sample=5, seed=seed).samples] for seed in (1, 1, 2)
    ]
    assert names[0] == names[1] != names[2]
    assert len(names[0]) == 5


def record_offsets(path) -> list[tuple[int, int]]:
    """(start of data, length) of every record, from the framing."""
    data, offsets, position = path.read_bytes(), [], 0
    while position < len(data):
        (length,) = struct.unpack("<Q", data[position : position + 8])
        offsets.append((position + 12, length))
        position += 12 + length + 4
    return offsets


def test_flipped_byte_in_a_record_is_caught(output, capsys):
    shard = output / "train-00001-of-00002.tfrecord"
    offsets = record_offsets(shard)
    start, length = offsets[len(offsets) // 2]
    data = bytearray(shard.read_bytes())
    data[start + length // 2] ^= 0x01
    shard.write_bytes(bytes(data))
    code, _, err = inspect_output(output, capsys)
    assert code == 1
    assert f"train-00001-of-00002.tfrecord: record {len(offsets) // 2} is corrupt (bad CRC" in err


def test_missing_shard_is_caught(output, capsys):
    (output / "validation-00001-of-00002.tfrecord").unlink()
    code, _, err = inspect_output(output, capsys)
    assert code == 1
    assert "missing shard validation-00001-of-00002.tfrecord" in err
    assert "summary.json says 2 shards, 1 files found" in err


def test_shard_names_counting_more_shards_than_files_are_caught(output, capsys):
    for index in (0, 1):
        (output / f"train-0000{index}-of-00002.tfrecord").rename(
            output / f"train-0000{index}-of-00003.tfrecord"
        )
    code, _, err = inspect_output(output, capsys)
    assert code == 1
    assert "split train: names say 3 shards (-of-00003), 2 files found" in err
    assert "missing shard train-00002-of-00003.tfrecord" in err


def test_summary_shard_count_mismatch_is_caught(output, capsys):
    summary = json.loads((output / "summary.json").read_text())
    summary["splits"]["train"]["shards"] = 3
    summary["splits"]["validation"]["records"] += 1
    (output / "summary.json").write_text(json.dumps(summary))
    code, _, err = inspect_output(output, capsys)
    assert code == 1
    assert "split train: summary.json says 3 shards, 2 files found" in err
    count = summary["splits"]["validation"]["records"]
    assert f"split validation: {count - 1} records read, summary.json says {count}" in err


def test_record_whose_image_does_not_decode_is_caught(output, capsys):
    shard = output / "validation-00000-of-00002.tfrecord"
    records = [tf.train.Example.FromString(r.numpy()) for r in tf.data.TFRecordDataset(str(shard))]
    records[1].features.feature["image/encoded"].bytes_list.value[0] = b"not an image"
    with tf.io.TFRecordWriter(str(shard)) as writer:
        for record in records:
            writer.write(record.SerializeToString())
    code, _, err = inspect_output(output, capsys)
    assert code == 1
    assert "validation-00000-of-00002.tfrecord: record 1 its image does not decode" in err


def test_record_missing_a_key_is_caught(output, capsys):
    shard = output / "train-00000-of-00002.tfrecord"
    records = [tf.train.Example.FromString(r.numpy()) for r in tf.data.TFRecordDataset(str(shard))]
    del records[0].features.feature[key_of("tfds", "label")]
    with tf.io.TFRecordWriter(str(shard)) as writer:
        for record in records:
            writer.write(record.SerializeToString())
    code, _, err = inspect_output(output, capsys)
    assert code == 1
    assert "train-00000-of-00002.tfrecord: record 0 does not parse with the tfds schema's spec" in err


def test_gzip_unlabeled_output_passes(tmp_path, capsys):
    root = tmp_path / "in"
    imagegen.write_tree(root, {f"{i}.png": imagegen.png(seed=i) for i in range(5)})
    out = tmp_path / "out"
    args = ["--input", str(root), "--output", str(out), "--no_progress", "--label_source", "none"]
    assert run([*args, "--compression", "gzip", "--schema", "simple"]) == 0
    code, stdout, err = inspect_output(out, capsys, "--pictures", str(tmp_path / "pics"))
    assert code == 0, err
    assert (tmp_path / "pics" / "contact_sheet.png").exists()
    assert not (tmp_path / "pics" / "label_histogram.png").exists()  # nothing to count per label
    assert "TFDS metadata            none" in stdout


def test_an_index_that_does_not_match_its_shard_is_named(output, capsys, tmp_path):
    index = output / "train-00001-of-00002.tfrecord.idx"
    lines = index.read_text().splitlines()
    index.write_text("\n".join(lines[:-1]) + "\n")  # one record short
    code, _, err = inspect_output(output, capsys, "--pictures", str(tmp_path))
    assert code == 1
    assert f"train-00001-of-00002.tfrecord.idx does not match the shard ({len(lines) - 1} entries" in err


def test_not_an_output_directory(tmp_path, capsys):
    code, _, err = inspect_output(tmp_path, capsys)
    assert code == 1 and "summary.json is missing" in err
    code, _, err = inspect_output(tmp_path / "nowhere", capsys)
    assert code == 2 and "is not a directory" in err


def test_count_records_reads_the_framing(output):
    shard = output / "train-00000-of-00002.tfrecord"
    assert count_records(str(shard)) == sum(1 for _ in tf.data.TFRecordDataset(str(shard)))
    shard.write_bytes(shard.read_bytes()[:-3])
    with pytest.raises(FramingError, match="past the end"):
        count_records(str(shard))


@pytest.mark.parametrize("level", [None, "3"])
def test_the_command_prints_only_its_own_lines(output, tmp_path, level):
    """TensorFlow's C++ start-up (absl's notice, the CUDA stubs' lines) never reaches the user,
    whatever TF_CPP_MIN_LOG_LEVEL says; the command's own errors still do."""
    import os
    import subprocess
    import sys

    env = {k: v for k, v in os.environ.items() if k != "TF_CPP_MIN_LOG_LEVEL"}
    if level is not None:
        env["TF_CPP_MIN_LOG_LEVEL"] = level
    command = [sys.executable, "-m", "pipelines.inspect", str(output), "--pictures", str(tmp_path)]
    done = subprocess.run(
        command, capture_output=True, text=True, env=env, cwd=inspect.__file__.rsplit("/", 2)[0]
    )
    assert done.returncode == 0 and done.stderr == "", done.stderr
    assert done.stdout.startswith("split ")
    missing = subprocess.run(
        [*command[:3], str(tmp_path / "nothing")], capture_output=True, text=True, env=env
    )
    assert missing.returncode == 2 and missing.stderr == f"error: {tmp_path / 'nothing'} is not a directory\n"


def test_a_usage_error_answers_before_tensorflow_loads():
    """`inspect` on a folder that is not there (or `--help`) answers at once: TensorFlow's
    seconds of start-up come only once there is an output to read."""
    import subprocess
    import sys

    probe = (
        "import sys; from pipelines.inspect import run; code = run(['/nowhere/out']); "
        "sys.exit(9 if 'tensorflow' in sys.modules else code)"
    )
    done = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True)
    assert done.returncode == 2, done.stderr  # 9: TensorFlow was loaded first
    assert done.stderr == "error: /nowhere/out is not a directory\n"
