"""The bundled detection sample (sample/detection/) is what its generator writes, and the commands
docs/detection.md gives for it run as they stand: each tree's records, rejects and objects are what its known
problems should give."""

from __future__ import annotations

import filecmp
import os
import shlex
import sys

import pytest
from conftest import convert
from outputcheck import rejects, summary

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SAMPLE = os.path.join(ROOT, "sample", "detection")
PREFIX = ".venv/bin/python -m pipelines.convert --input sample/detection/"


def readme_commands() -> dict[str, list[str]]:
    """format -> docs/detection.md's command line for its sample tree, without the interpreter."""
    with open(os.path.join(ROOT, "docs", "detection.md"), encoding="utf-8") as handle:
        lines = [line.strip() for line in handle if line.strip().startswith(PREFIX)]
    commands = {}
    for line in lines:
        argv = shlex.split(line)[3:]  # from --input on
        commands[argv[1].split("/")[2]] = argv
    return commands


def test_the_checked_in_sample_is_what_its_generator_writes(tmp_path):
    sys.path.insert(0, os.path.join(ROOT, "sample"))
    try:
        import make_detection
    finally:
        sys.path.pop(0)
    make_detection.main(str(tmp_path))
    ours = sorted(os.path.relpath(os.path.join(d, f), tmp_path) for d, _, fs in os.walk(tmp_path) for f in fs)
    checked_in = sorted(
        os.path.relpath(os.path.join(d, f), SAMPLE) for d, _, fs in os.walk(SAMPLE) for f in fs
    )
    assert ours == checked_in
    _, mismatch, errors = filecmp.cmpfiles(tmp_path, SAMPLE, ours, shallow=False)
    assert mismatch == errors == []


# format -> records, rejects by reason, objects stored, objects dropped by reason
EXPECTED = {
    "coco": (8, {}, 13, {"no_image": 1, "unknown_category": 1}),
    "voc": (7, {"bad_annotation": 1}, 11, {}),
    "yolo": (8, {}, 13, {"unknown_category": 1}),
}


@pytest.mark.parametrize("kind", sorted(EXPECTED))
def test_the_docs_command_converts_each_sample_tree(kind, tmp_path, monkeypatch):
    argv = readme_commands()[kind]
    assert argv[:2] == ["--input", f"sample/detection/{kind}"]
    output = tmp_path / "out"
    argv[argv.index("--output") + 1] = str(output)
    monkeypatch.chdir(ROOT)
    assert convert(argv[1], output, *argv[2:]) == 0
    records, reject_reasons, stored, dropped = EXPECTED[kind]
    result = summary(output)
    assert result["records"] == records
    found = {}
    for line in rejects(output):
        if line["reason"] != "skipped":
            found[line["reason"]] = found.get(line["reason"], 0) + 1
    assert found == reject_reasons
    objects = result["objects"]
    assert (objects["stored"], objects["dropped_per_reason"]) == (stored, dropped)
    assert objects["negatives"] == 1  # the picture with no shape
    if kind == "voc":
        (bad,) = [line for line in rejects(output) if line["reason"] == "bad_annotation"]
        assert "shapes_5.xml" in bad["detail"] and "line" in bad["detail"]
