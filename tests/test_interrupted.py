"""Runs killed (SIGKILL) at every stage: the output never looks complete unless it is, leftovers
are clearly named and removed by the next run, and a rerun writes the identical record set.

Each killed run is a real `python -m pipelines.convert` process on the DirectRunner, stopped at a
named point by the BEAM_TFRECORD_PAUSE_AT hook (beam_tfrecord/fault_injection.py)."""

from __future__ import annotations

import json
import os
import time

import imagegen
import pausing
import pytest
from outputcheck import read_records, summary

from beam_tfrecord import names
from beam_tfrecord.output import outputs
from pipelines.convert import run

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
ARGS = ("--splits", "train=0.7,test=0.3", "--num_shards", "2", "--no_progress")


@pytest.fixture(scope="module")
def tree(tmp_path_factory):
    root = tmp_path_factory.mktemp("interrupted") / "in"
    files = {f"{c}/{i}.jpg": imagegen.jpeg(seed=i + 50 * (c == "b")) for c in "ab" for i in range(12)}
    imagegen.write_tree(root, files | {"a/broken.jpg": b"\xff\xd8\xff"})
    return root


@pytest.fixture(scope="module")
def reference(tree, tmp_path_factory):
    """The records and summary of an uninterrupted run."""
    out = tmp_path_factory.mktemp("reference") / "out"
    assert run(["--input", str(tree), "--output", str(out), *ARGS]) == 0
    return record_set(out), summary(out)


def record_set(out) -> dict[str, list[bytes]]:
    return {
        split: sorted(
            r["image/encoded"] + r["image/filename"] + bytes([r["image/class/label"]])
            for r in read_records(out, split)
        )
        for split in ("train", "test")
    }


def killed_at(point: str, tree, out, *extra: str) -> None:
    """Start a conversion with this module's settings, SIGKILL it at `point` (tests/pausing.py)."""
    pausing.killed_at(point, tree, out, *ARGS, *extra)


def expected_rejects(tree, tmp_path) -> str:
    """rejects.jsonl of an uninterrupted run."""
    out = tmp_path / "uninterrupted"
    assert run(["--input", str(tree), "--output", str(out), *ARGS]) == 0
    return (out / "rejects.jsonl").read_text()


def shard_names(out) -> list[str]:
    return sorted(n for n in os.listdir(out) if ".tfrecord" in n and not n.startswith(".temp"))


@pytest.mark.parametrize(
    ("point", "left"),
    [
        ("listed", "earlier"),  # killed before the output was touched: the earlier run is intact
        ("cleared", "nothing"),  # earlier output removed, nothing new yet
        ("writing", "temp"),  # a shard half written, under .temp-beam-tfrecord-*
        ("finalizing", "partial"),  # one shard renamed into place, no summary.json
        ("metadata", "partial"),  # every shard in place, labels and rejects, no summary.json
    ],
)
def test_killed_run_never_looks_complete_and_a_rerun_restores_it(
    tree, reference, tmp_path, caplog, point, left
):
    out = tmp_path / "out"
    # An earlier complete run with another shard count: its shards must never mix with the new run's.
    assert (
        run(["--input", str(tree), "--output", str(out), *ARGS[:2], "--num_shards", "3", "--no_progress"])
        == 0
    )
    earlier = shard_names(out)
    assert [n for n in earlier if "-of-00003" in n] == earlier

    killed_at(point, tree, out, "--overwrite")
    # A SIGKILL releases nothing: the killed run's claim stays, and the rerun takes it over.
    killed_claim = (out / names.CLAIM_FILE).read_text()

    if left == "earlier":
        assert shard_names(out) == earlier
        assert sorted(outputs.complete_shards(str(out))) == [
            "test",
            "train",
        ]  # still the complete earlier run
    else:
        assert not (out / "summary.json").exists()
        with pytest.raises(outputs.IncompleteOutput):
            outputs.complete_shards(str(out))
        assert not [n for n in shard_names(out) if "-of-00003" in n], "stale shards of the earlier run"
        if left in ("nothing", "temp"):
            assert shard_names(out) == []
        else:
            assert shard_names(out)
    if left == "temp":
        (temp,) = outputs.leftover_temp(str(out))
        assert os.path.basename(temp).startswith(".temp-beam-tfrecord-") and os.listdir(temp)

    # The same command again resumes: it keeps every shard the killed run finished (proven by
    # its framing and count) and ends with the records, digests and rejects of an uninterrupted run.
    with caplog.at_level("INFO", logger="beam_tfrecord"):
        code = run(["--input", str(tree), "--output", str(out), *ARGS])
    pid = json.loads(killed_claim)["pid"]
    assert f"(pid {pid})" in caplog.text and f"which is dead: process {pid} is gone" in caplog.text
    if point == "listed":  # the earlier run is complete and still there: replacing it is asked
        assert code == 2
        code = run(["--input", str(tree), "--output", str(out), *ARGS, "--overwrite"])
    assert code == 0
    resumed = summary(out).get("resumed")
    if point in ("finalizing", "metadata"):  # every task had finished: nothing is read again
        assert resumed == {"shards": 4, "records": 24}
    elif point in ("listed", "cleared"):
        assert resumed is None
    assert outputs.leftover_temp(str(out)) == [] and not (out / names.CLAIM_FILE).exists()
    assert sorted(n for n in os.listdir(out) if n.endswith(".tfrecord")) == [
        f"{s}-0000{i}-of-00002.tfrecord" for s in ("test", "train") for i in range(2)
    ]
    assert outputs.complete_shards(str(out))
    records, expected = reference
    assert record_set(out) == records
    result = summary(out)
    for split in ("train", "test"):
        assert result["splits"][split]["digest"] == expected["splits"][split]["digest"]
    assert result["rejects_per_reason"] == expected["rejects_per_reason"]
    assert (out / "rejects.jsonl").read_text() == expected_rejects(tree, tmp_path)


@pytest.mark.parametrize(
    ("change", "why"),
    [
        (("--resize", "16x16"), "other options"),
        ("touch", "the inputs changed"),
        (("--no_resume",), None),
    ],
)
def test_a_rerun_that_differs_from_the_killed_run_starts_clean_and_says_why(
    tree, tmp_path, caplog, change, why
):
    out = tmp_path / "out"
    killed_at("writing", tree, out)  # a shard half written, its plan staged beside it
    extra: tuple[str, ...] = ()
    if change == "touch":  # one input rewritten since: its record could differ
        path = tree / "a" / "3.jpg"
        os.utime(path, (time.time() + 5, time.time() + 5))
    else:
        extra = change
    with caplog.at_level("INFO", logger="beam_tfrecord"):
        assert run(["--input", str(tree), "--output", str(out), *ARGS, *extra]) == 0
    assert "resumed" not in summary(out)  # every shard written anew
    if why is not None:
        assert "not resuming an interrupted run" in caplog.text and why in caplog.text
    assert outputs.leftover_temp(str(out)) == []


def test_a_detection_rerun_resumes_only_while_its_objects_are_the_same(tmp_path, caplog):
    """The plan's fingerprint covers each shard task's objects, hashed one task at a time: a
    rerun keeps an interrupted detection run while the annotations are unchanged, and starts
    clean, saying why, once an annotation file outside the input says otherwise (the listing and
    the options are the same, so only the objects tell)."""
    import json

    import annotationgen as ag

    from beam_tfrecord.config import ConvertConfig, SourceConfig
    from beam_tfrecord.output import resume as resume_lib
    from beam_tfrecord.pipeline import prepare
    from beam_tfrecord.plan.annotations.options import AnnotationConfig

    root, annotations = tmp_path / "images", tmp_path / "instances_x.json"
    imagegen.write_tree(root, {f"{i}.jpg": imagegen.jpeg(seed=i) for i in range(4)})
    images = [ag.image(i, f"{i}.jpg") for i in range(4)]

    def annotate(width: float) -> None:
        boxes = [ag.box(10 + i, i, 18, [1, 1, width, 5], segmentation=[[1, 1, 6, 1, 6, 6]]) for i in range(4)]
        annotations.write_bytes(ag.instances(images, boxes))

    annotate(5)
    options = AnnotationConfig("coco", str(annotations), masks=True)
    source = SourceConfig(input=str(root), splits={"train": 0.5, "test": 0.5}, annotations=options)
    config = ConvertConfig(output=str(tmp_path / "out"))
    first = prepare(source, config)  # staged, then "killed" before any task finished
    again = prepare(source, config)
    assert again.temp_dir == first.temp_dir  # the same plan: the interrupted run is kept
    annotate(6)
    with caplog.at_level("INFO", logger="beam_tfrecord"):
        changed = prepare(source, config)
    assert changed.temp_dir != first.temp_dir
    assert "its shard tasks differ" in caplog.text
    assert outputs.leftover_temp(str(tmp_path / "out")) == [changed.temp_dir]
    with open(resume_lib.fingerprint_path(changed.temp_dir)) as handle:
        assert json.load(handle)["version"] == resume_lib.FINGERPRINT_VERSION == 3
