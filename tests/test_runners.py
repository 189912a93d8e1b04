"""`--runner` as Beam names runners: a listed name or any runner class's module path, whose own
options parse because its module is imported first; a name that loads nothing is one line before
any work, and Beam's DaskRunner is refused in one line naming the Beam bug that breaks this
pipeline on it (the last test checks that the bug is still there)."""

from __future__ import annotations

import json
import pathlib
import sys
import uuid

import pytest
from conftest import convert

from beam_tfrecord import runners

DASK = "apache_beam.runners.dask.dask_runner.DaskRunner"


def test_a_runner_given_by_module_path_brings_its_own_options(pets_tree, tmp_path, capsys):
    assert "runner_plugin" not in sys.modules  # only the command imports it, from --runner
    note = tmp_path / "note"
    out = tmp_path / "out"
    assert convert(pets_tree, out, "--runner=runner_plugin.NotingRunner", f"--plugin_note={note}") == 0
    assert note.read_text() == "NotingRunner"
    summary = json.loads((out / "summary.json").read_text())
    assert (
        summary["consistent"]
        and summary["records"] == 60
        and summary["runner"] == "runner_plugin.NotingRunner"
    )
    assert "inputs = records + rejects  yes" in capsys.readouterr().out


@pytest.mark.parametrize("name", ["DaskRunner", "dask", DASK])
def test_dask_runner_is_refused_in_one_line_naming_the_beam_bug(pets_tree, tmp_path, capsys, name):
    out = tmp_path / "out"
    assert convert(pets_tree, out, f"--runner={name}", "--dask_client_address=tcp://127.0.0.1:8786") == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("error: --runner DaskRunner cannot run this pipeline") and "\n" not in err
    assert "apply_dofn_to_bundle" in err
    assert not out.exists()


@pytest.mark.parametrize(
    ("name", "message"),
    [
        ("Sparkle", "--runner Sparkle is not a runner Beam knows: name one of DataflowRunner,"),
        ("no_such_package.module.Runner", "its module no_such_package.module cannot be imported"),
        ("apache_beam.runners.render.NoSuchRunner", "apache_beam.runners.render has no runner class"),
    ],
)
def test_a_runner_that_cannot_be_loaded_is_one_line_before_any_work(
    pets_tree, tmp_path, capsys, name, message
):
    assert convert(pets_tree, tmp_path / "out", f"--runner={name}") == 2
    err = capsys.readouterr().err.strip()
    assert message in err and "\n" not in err and "Traceback" not in err
    assert not (tmp_path / "out").exists()


def test_the_library_refuses_dask_runner_when_its_pipeline_is_built(pets_tree, tmp_path):
    """A user's own pipeline gets the same line, before a worker meets the bug."""
    pytest.importorskip("dask")
    import apache_beam as beam
    from apache_beam.runners.dask.dask_runner import DaskRunner

    from beam_tfrecord.config import ConfigError, ConvertConfig, SourceConfig
    from beam_tfrecord.pipeline import ImagesToTFRecords, prepare

    config = ConvertConfig(output=str(tmp_path / "out"))
    staged = prepare(SourceConfig(input=str(pets_tree)), config)
    with pytest.raises(ConfigError, match="runner DaskRunner cannot run this pipeline"):
        _ = beam.Pipeline(runner=DaskRunner()) | ImagesToTFRecords(staged, config)


def test_runner_names_resolve_as_beams_own_lookup_does():
    assert runners.runner_path("DirectRunner") == "apache_beam.runners.direct.direct_runner.DirectRunner"
    assert runners.runner_path("dataflow") == "apache_beam.runners.dataflow.dataflow_runner.DataflowRunner"
    assert runners.runner_path("daskrunner") == DASK  # shipped by Beam, not in its list
    assert runners.runner_path("my.own.Runner") == "my.own.Runner"
    assert runners.runner_path("Unknown") is None


def _note(element: object, folder: str) -> None:
    pathlib.Path(folder, uuid.uuid4().hex).write_text(json.dumps(element))


def test_beams_dask_runner_still_mixes_a_steps_outputs(tmp_path):
    """Why DaskRunner is refused: on a 2-worker dask.distributed cluster on 127.0.0.1, each
    consumer of one output of a multi-output ParDo gets the elements of all its outputs. When a
    Beam upgrade fixes it, this fails: run the conversion there (comparing digests with the local
    runner's) and lift the refusal in runners.REFUSED_RUNNERS."""
    pytest.importorskip("dask.distributed")
    import apache_beam as beam
    from apache_beam.options.pipeline_options import PipelineOptions
    from apache_beam.runners.dask.dask_runner import DaskRunner
    from dask.distributed import LocalCluster

    class Split(beam.DoFn):
        def process(self, number: int):
            yield beam.pvalue.TaggedOutput("odd", number) if number % 2 else number

    folder = tmp_path / "seen"
    folder.mkdir()
    with LocalCluster(
        n_workers=2, threads_per_worker=1, host="127.0.0.1", dashboard_address=None, processes=True
    ) as cluster:
        options = PipelineOptions([f"--dask_client_address={cluster.scheduler_address}"])
        pipeline = beam.Pipeline(runner=DaskRunner(), options=options)
        split = pipeline | beam.Create([1, 2, 3, 4]) | beam.ParDo(Split()).with_outputs("odd", main="even")
        even = split.even | "Even" >> beam.Map(lambda n: ["even", n])
        odd = split.odd | "Odd" >> beam.Map(lambda n: ["odd", n])
        # One last step that reads both: Beam's DaskRunner computes only the last step's inputs.
        _ = (even, odd) | beam.Flatten() | "Note" >> beam.Map(_note, str(folder))
        result = pipeline.run()
        result.wait_until_finish()
        result.client.close()
    seen = sorted(json.loads(path.read_text()) for path in folder.iterdir())
    correct = [["even", 2], ["even", 4], ["odd", 1], ["odd", 3]]
    assert seen != correct, "Beam's DaskRunner keeps a ParDo's outputs apart now: see the docstring"
    assert seen == sorted([[tag, n] for tag in ("even", "odd") for n in (1, 2, 3, 4)])


@pytest.mark.parametrize(
    ("input_mb", "cores", "given", "expected"),
    [
        (100, 16, [], ("in_memory", 1)),  # a small run: starting processes costs more than they save
        (2000, 16, [], ("multi_processing", 16)),  # one interpreter cannot keep 16 cores busy
        (2000, 4, [], ("multi_processing", 4)),
        (2000, 2, [], ("in_memory", 1)),  # 2 cores: one worker with read threads is cheaper (issue 28)
        (2000, 1, [], ("in_memory", 1)),
        (2000, 2, ["--direct_num_workers=2"], ("multi_processing", 2)),  # the user's choice is kept
        (100, 16, ["--direct_running_mode=multi_processing"], ("multi_processing", 16)),
        (2000, 2, ["features"], ("multi_processing", 2)),  # a model's work favours processes
        (100, 2, ["features"], ("in_memory", 1)),
    ],
)
def test_local_workers_follow_size_and_cores_unless_the_user_says(input_mb, cores, given, expected):
    from apache_beam.options.pipeline_options import PipelineOptions

    features = "features" in given
    flags = [flag for flag in given if flag != "features"]
    names = {flag.lstrip("-").split("=")[0] for flag in flags}
    local = runners.use_local_runner(
        PipelineOptions(flags), input_mb * 1024 * 1024, names, cores=cores, features=features
    )
    assert (local.mode, local.workers) == expected
