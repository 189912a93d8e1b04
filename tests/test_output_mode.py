"""What a run does with its output is one value (output.mode.OutputMode) that the library's
`prepare` and the command both read: each kind does to an output that already holds something
what its name says, a dry run touches nothing, and the command's flags map onto it before the
output is touched."""

from __future__ import annotations

import os

import imagegen
import pytest
from conftest import convert

from beam_tfrecord import OutputKind, OutputMode, prepare
from beam_tfrecord.config import ConvertConfig, SourceConfig
from beam_tfrecord.names import APPEND_DIR
from beam_tfrecord.output.outputs import OutputInUse, leftover_temp
from beam_tfrecord.plan.planner import KnownRecords


@pytest.fixture
def images(tmp_path):
    root = tmp_path / "images"
    imagegen.write_tree(root, {f"{c}/{i}.jpg": imagegen.jpeg(seed=i) for c in ("a", "b") for i in range(2)})
    return SourceConfig(input=str(root), splits={"train": 1.0})


def _earlier_run(output) -> list:
    """An output holding an earlier run's shard and summary (their contents do not matter: the
    names alone make them a run's)."""
    output.mkdir()
    files = [output / "train-00000-of-00001.tfrecord", output / "summary.json"]
    for path in files:
        path.write_bytes(b"earlier")
    return files


def test_a_fresh_run_refuses_an_earlier_runs_files_and_an_overwrite_replaces_them(images, tmp_path):
    output = tmp_path / "out"
    earlier = _earlier_run(output)
    config = ConvertConfig(output=str(output))
    with pytest.raises(OutputInUse, match="already holds 2 files of an earlier run"):
        prepare(images, config)
    assert all(path.read_bytes() == b"earlier" for path in earlier)
    staged = prepare(images, config, mode=OutputMode(OutputKind.OVERWRITE))
    assert not any(path.exists() for path in earlier)
    assert staged.inputs == 4 and os.path.isdir(staged.plan_dir)


@pytest.mark.parametrize("kind", [OutputKind.FRESH, OutputKind.OVERWRITE])
def test_a_dry_run_plans_and_leaves_the_output_as_it_is(images, tmp_path, kind):
    output = tmp_path / "out"
    earlier = _earlier_run(output)
    staged = prepare(images, ConvertConfig(output=str(output)), mode=OutputMode(kind, dry_run=True))
    assert staged.inputs == 4
    assert staged.plan_dir.startswith(str(output))  # where a real run would stage it
    assert sorted(output.iterdir()) == sorted(earlier)
    assert all(path.read_bytes() == b"earlier" for path in earlier)


def test_resume_keeps_an_interrupted_run_of_the_same_plan_and_without_it_the_run_starts_clean(
    images, tmp_path
):
    config = ConvertConfig(output=str(tmp_path / "out"))
    first = prepare(images, config)  # staged, then "killed" before any shard task finished
    assert prepare(images, config).temp_dir == first.temp_dir
    clean = prepare(images, config, mode=OutputMode(resume=False))
    assert clean.temp_dir != first.temp_dir
    assert leftover_temp(config.output) == [clean.temp_dir]


def test_an_append_is_planned_against_its_dataset_into_the_work_folder():
    known = KnownRecords(class_names=("a", "b"))
    with pytest.raises(ValueError, match="needs the dataset it grows"):
        OutputMode(OutputKind.APPEND)
    with pytest.raises(ValueError, match="known is for an append"):
        OutputMode(OutputKind.OVERWRITE, known=known)
    append = OutputMode(OutputKind.APPEND, known=known)
    assert append.target("/data/out") == f"/data/out/{APPEND_DIR}" and append.clears and append.converts
    merge = OutputMode(OutputKind.MERGE, known=known)
    assert not merge.converts and not merge.clears
    assert OutputMode().target("/data/out") == "/data/out" and not OutputMode().clears
    assert not OutputMode(dry_run=True).writes


def test_append_with_overwrite_is_refused_before_the_output_is_touched(images, tmp_path, capsys):
    output = tmp_path / "out"
    assert convert(images.input, output, "--append", "--overwrite") == 2
    assert "--append and --overwrite exclude each other" in capsys.readouterr().err
    assert not output.exists()  # not even a claim was taken
