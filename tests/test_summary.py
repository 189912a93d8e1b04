"""summary.json is a typed contract: what the pipeline writes reads back as the same object, a
summary written before later fields existed still loads, and a file that is no summary says so."""

from __future__ import annotations

import json

import pytest
from conftest import convert

from beam_tfrecord import IncompleteOutput, iter_examples
from beam_tfrecord.write.summary import Summary, SummaryError, read_summary

# Fields later versions added; an older summary.json has none of them.
LATER_FIELDS = (
    "changes_per_reason",
    "frames_dropped",
    "duplicate_records",
    "duplicate_groups",
    "cross_split_duplicates",
    "duplicates_file",
    "split_method",
    "groups",
    "multi_label",
    "extra_columns",
    "digest_method",
    "manifest_rows_without_file",
    "manifest_rows_without_file_sample",
    "manifest_rows_without_file_list",
)


@pytest.fixture
def output(pets_tree, tmp_path):
    out = tmp_path / "out"
    assert convert(pets_tree, out, "--splits", "train=0.5,validation=0.5") == 0
    return out


def test_the_written_file_reads_back_as_the_same_object(output):
    data = json.loads((output / "summary.json").read_text())
    summary = read_summary(str(output))
    assert summary.to_json() == data
    assert list(summary.to_json()) == list(data)  # and in the written order
    assert summary.records == 60 and summary.rejects == 2 and summary.consistent
    assert summary.splits["train"].records + summary.splits["validation"].records == 60
    assert summary.run is not None and summary.run.runner == "FnApiRunner"


def test_an_older_summary_without_later_fields_still_loads_and_reads(output):
    path = output / "summary.json"
    data = json.loads(path.read_text())
    for name in LATER_FIELDS:
        data.pop(name)
    for split in data["splits"].values():
        for name in ("share", "expected_deviation", "planned_shards", "digest"):
            split.pop(name)
    path.write_text(json.dumps(data))
    summary = read_summary(str(output))
    assert summary.split_method == "hash" and summary.extra_columns == []
    assert sum(1 for _ in iter_examples(str(output), "train")) == summary.splits["train"].records


def test_a_json_file_that_is_no_summary_gets_a_clear_message(output):
    (output / "summary.json").write_text(json.dumps({"accuracy": 0.9}))
    with pytest.raises(IncompleteOutput, match="is not a beam-tfrecord summary"):
        list(iter_examples(str(output), "train"))
    (output / "summary.json").write_text("{not json")
    with pytest.raises(SummaryError, match="is not JSON"):
        read_summary(str(output))
    with pytest.raises(SummaryError, match="cannot be read as a summary"):
        Summary.from_json({"splits": {"train": {"records": 1}}, "records": 1, "inputs": 1})
