"""Shared fixtures and helpers: trees of generated images, a quiet `convert`, a TestPipeline on
the local runner the CLI uses, and offline defaults for every test."""

from __future__ import annotations

import gc
import os
import sys

import pytest

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
sys.path.insert(0, os.path.dirname(__file__))

from imagegen import bad_input_tree, jpeg, write_tree

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

# The test files that take longest, most of it waiting on other processes (leases and their
# heartbeats, a stalled store, a job service, the docs' commands run as shown), longest first.
# `make test` deals whole files to the workers in this order (--dist loadfile
# --no-loadscope-reorder): a long file dealt last would leave one worker running alone at the end.
# Order only: a file not named here runs after these, in the usual order.
LONGEST_FILES = (
    "test_docs.py",
    "test_readme_example.py",
    "test_claim.py",
    "test_append.py",
    "test_portable.py",
    "test_inspect.py",
    "test_storage_faults.py",
    "test_append_detection.py",
    "test_interrupted.py",
    "test_cli_process.py",
    "test_gpu_settings.py",
    "test_segmentation.py",
    "test_features.py",
    "test_benchmark_least_work.py",
    "test_array_record.py",
    "test_append_gcs.py",
    "test_gcs.py",
    "test_write_errors.py",
    "test_dataflow_dry_run.py",
)


# What `make test-fast` (`pytest --fast`) leaves out: the files whose time goes mostly to other
# processes (the docs' commands and Python, racing and killed runs, job services, stalled storage,
# TensorFlow loaded again by `pipelines.inspect`, Keras models in worker processes, torch).
# About 85% of the tests in half the time of `make test`, which runs them all, as CI does.
PROCESS_FILES = (
    "test_docs.py",
    "test_readme_example.py",
    "test_claim.py",
    "test_portable.py",
    "test_cli_process.py",
    "test_storage_faults.py",
    "test_interrupted.py",
    "test_inspect.py",
    "test_gpu_settings.py",
    "test_features_torch.py",
    "test_torch.py",
)


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption(
        "--fast",
        action="store_true",
        help="leave out the files whose tests mostly wait on other processes (make test-fast)",
    )


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    if config.getoption("--fast"):
        left_out = [item for item in items if item.path.name in PROCESS_FILES]
        items[:] = [item for item in items if item.path.name not in PROCESS_FILES]
        config.hook.pytest_deselected(items=left_out)
    rank = {name: index for index, name in enumerate(LONGEST_FILES)}
    items.sort(key=lambda item: rank.get(item.path.name, len(rank)))  # stable: each file's order kept


@pytest.hookimpl(wrapper=True)
def pytest_collection(session: pytest.Session):
    """Collection imports TensorFlow, Beam and Keras into every worker: the cycle collector paused
    while they load (its passes over their objects find nothing), and what they built frozen
    after, so that the full passes during the tests skip it."""
    gc.disable()
    try:
        return (yield)
    finally:
        gc.freeze()
        gc.enable()


def pytest_xdist_auto_num_workers(config: pytest.Config) -> int:
    """`-n auto`: one worker more than the cores, since about a third of the suite's time is spent
    waiting on other processes, which another worker's tests fill."""
    return len(os.sched_getaffinity(0)) + 1


def convert(input_dir, output_dir, *extra: str) -> int:
    """`python -m pipelines.convert` in this process, without the progress line; the exit code."""
    from pipelines.convert import run

    return run(["--input", str(input_dir), "--output", str(output_dir), "--no_progress", *extra])


def local_pipeline(**options: object):
    """A TestPipeline pinned to the runner local CLI runs use (Beam's FnApiRunner, named so
    Beam 2.77's DirectRunner does not first try to download Prism), in this process."""
    from apache_beam.options.pipeline_options import PipelineOptions
    from apache_beam.testing.test_pipeline import TestPipeline

    from beam_tfrecord.runners import LOCAL_RUNNER

    return TestPipeline(runner=LOCAL_RUNNER, options=PipelineOptions(**options))


@pytest.fixture
def bad_tree(tmp_path):
    root = tmp_path / "bad"
    write_tree(root, bad_input_tree())
    return root


def write_pets(root):
    """30 cats and 30 dogs in class folders under `root`, plus one broken file in each."""
    files = {}
    for label in ("cat", "dog"):
        for i in range(30):
            files[f"{label}/{label}.{i}.jpg"] = jpeg(40 + i % 5, 30, seed=i + (100 if label == "dog" else 0))
        files[f"{label}/broken.jpg"] = b"\xff\xd8\xff"
    write_tree(root, files)
    return root


@pytest.fixture
def pets_tree(tmp_path):
    """30 cats and 30 dogs in class folders, plus one broken file in each."""
    return write_pets(tmp_path / "pets")


def plan_listing(listing, label_source, splits, *, num_shards=None, shard_size_mb=128.0, **source):
    """`make_plan` over a listing with a LabelSource already made (a compiled pattern, a loaded
    manifest), the rest of the SourceConfig from keyword arguments (`class_names`,
    `group_pattern`, `extra_columns`, `stratify`, `dedupe`, ...)."""
    from beam_tfrecord.plan.planner import make_plan
    from beam_tfrecord.plan.sharding import ShardSettings
    from beam_tfrecord.plan.source_config import SourceConfig

    needs = {"filename": {"label_pattern": "(.*)"}, "manifest": {"manifest": "manifest.csv"}}
    config = SourceConfig(
        input="in",
        label_source=label_source.mode,
        splits=splits,
        **{**needs.get(label_source.mode, {}), **source},
    )
    return make_plan(listing, config, ShardSettings(num_shards, shard_size_mb), label_source)


@pytest.fixture(scope="session")
def shapes_output(tmp_path_factory):
    """(output folder, truth): six pictures of squares and triangles with COCO boxes and polygons
    (tests/annotationgen.py's shapes_coco), converted once with masks, every record in train;
    truth maps each picture's file name to its source objects."""
    import annotationgen

    root = tmp_path_factory.mktemp("shapes")
    truth = annotationgen.shapes_coco(root / "in")
    out = root / "out"
    assert convert(root / "in", out, "--annotations", "coco", "--masks", "--splits", "train=1") == 0
    return out, truth
