"""Options are Beam's own kind: one parser holds ours and Beam's, no abbreviation is taken, an
unknown option stops the run naming the closest valid one, and none of ours shadows Beam's."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest
from apache_beam.options.pipeline_options import GoogleCloudOptions, PipelineOptions
from conftest import REPO, convert

from pipelines.options import ConvertOptions, our_option_names


@pytest.mark.parametrize(
    ("typo", "suggestion"),
    [
        (["--spilts", "train=0.8,validation=0.2"], "--splits"),
        (["--inptu", "somewhere"], "--input"),
        (["--ouput", "x"], "--output"),
        (["--compress", "gzip"], "--compression"),
        (["--inp=somewhere"], "--input"),  # an abbreviation is not taken for the option it starts
    ],
)
def test_an_unknown_option_is_a_usage_error_naming_the_closest(pets_tree, tmp_path, capsys, typo, suggestion):
    assert convert(pets_tree, tmp_path / "out", *typo) == 2
    err = capsys.readouterr().err
    assert f"unknown option {typo[0].split('=')[0]}; did you mean {suggestion}?" in err
    assert len(err.strip().splitlines()) == 1
    assert not (tmp_path / "out").exists()


def test_a_stray_argument_or_a_bad_value_is_one_line(pets_tree, tmp_path, capsys):
    assert convert(pets_tree, tmp_path / "out", "--compression=gzip", "gzip") == 2
    assert "unexpected argument 'gzip'" in capsys.readouterr().err
    assert convert(pets_tree, tmp_path / "out", "--compression=zip") == 2
    err = capsys.readouterr().err
    assert err.startswith("error: --compression: invalid choice: 'zip'") and len(err.splitlines()) == 1


def every_options_class(cls: type = PipelineOptions) -> set[type]:
    found = set()
    for sub in cls.__subclasses__():
        found |= {sub, *every_options_class(sub)}
    return found


def test_none_of_ours_shadows_a_beam_option():
    ours = set(our_option_names())
    assert {"input", "output", "label_source", "splits", "sink", "no_wait"} <= ours
    classes = every_options_class()
    assert len(classes) > 20  # Beam's own, imported with apache_beam
    for cls in classes:
        if cls is ConvertOptions:
            continue
        theirs = set(cls().get_all_options(current_only=True))
        assert not ours & theirs, (cls.__name__, ours & theirs)


def test_beams_job_labels_option_is_beams():
    options = PipelineOptions(["--labels=team=ml", "--label_source=filename"])
    assert options.view_as(GoogleCloudOptions).labels == ["team=ml"]
    assert options.view_as(ConvertOptions).label_source == "filename"


def _help(flag: str) -> str:
    done = subprocess.run(
        [sys.executable, "-m", "pipelines.convert", flag],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    return done.stdout


def test_help_is_the_converters_options_by_group_then_where_beams_are():
    text = _help("--help")
    lines = text.splitlines()
    assert len(lines) < 150
    headings = [line for line in lines if line.endswith(":") and not line.startswith(" ")]
    assert headings[0] == "input and labels:" and "storage:" in headings
    first_option = next(line for line in lines if line.startswith("  --"))
    assert first_option.split()[0] == "--input"
    for option in our_option_names():
        assert f"--{option}" in text, option
    assert "--runner" in lines[-3] + lines[-2] + lines[-1] and "--help_beam" in text
    assert "--direct_num_workers" in text and "--temp_location" in text
    assert "--dataflow_service_options" not in text  # Beam's long list is --help_beam's


def test_help_beam_lists_beams_options_and_ours():
    text = _help("--help_beam")
    for option in ("--label_source", "--splits", "--sink", "--runner", "--direct_num_workers", "--labels"):
        assert option in text, option
    assert "beam-tfrecord: input and labels" in text


@pytest.mark.parametrize(
    ("extra", "message"),
    [
        (("--num_shards=2", "--shard_size_mb=64"), "--num_shards and --shard_size_mb exclude each other"),
        (("--no_wait",), "--no_wait is for remote runners"),
        (("--feature_model=efficientnet_b0", "--model_path=x.keras"), "exclude each other"),
    ],
)
def test_settings_that_contradict_each_other_are_refused(pets_tree, tmp_path, capsys, extra, message):
    assert convert(pets_tree, tmp_path / "out", *extra) == 2
    assert message in capsys.readouterr().err
    assert not (tmp_path / "out").exists()


def test_an_argument_that_is_not_utf8_is_one_line(pets_tree, tmp_path, capsys):
    """Every option is written to summary.json: a path whose bytes are not UTF-8 (Python hands
    them over as lone surrogates) is refused before anything runs, shown with \\xNN."""
    output = os.fsdecode(os.fsencode(tmp_path) + b"/caf\xe9")
    assert convert(pets_tree, output) == 2
    err = capsys.readouterr().err
    assert "caf\\xe9 is not valid UTF-8" in err and len(err.strip().splitlines()) == 1
    assert not os.path.exists(output)


@pytest.mark.parametrize(
    ("given", "field", "says"),
    [
        (
            {"task": "detection", "ignore_value": 3},
            "ignore_value",
            "reads masks: it needs --task segmentation",
        ),
        ({"task": "keypoints", "train_ids": True}, "train_ids", "reads masks: it needs --task segmentation"),
        ({"task": "segmentation", "masks": True}, "masks", "stores a mask per object (detection)"),
        ({"task": "segmentation", "label_map": "m.pbtxt"}, "label_map", "numbers objects' classes"),
    ],
)
def test_an_option_of_one_kind_of_label_is_refused_where_the_task_has_no_use_for_it(given, field, says):
    """Each kind of label says which annotation options are its own and where they mean nothing."""
    from beam_tfrecord.config_base import ConfigError
    from beam_tfrecord.plan.annotations.options import AnnotationConfig

    with pytest.raises(ConfigError) as error:
        AnnotationConfig(**given)
    assert error.value.name == field and says in error.value.problem


def test_the_options_of_a_kind_of_label_are_taken_where_the_task_has_it():
    from beam_tfrecord.plan.annotations.options import AnnotationConfig

    assert AnnotationConfig(task="segmentation", ignore_value=3, train_ids=True).ignore_value == 3
    assert AnnotationConfig(task="keypoints", masks=True).masks
    assert AnnotationConfig(task="captions", masks=True).masks  # as before: nothing refuses it there
