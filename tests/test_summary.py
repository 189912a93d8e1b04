"""summary.json is a typed contract: what the pipeline writes reads back as the same object, a
summary written before later fields existed still loads, and a file that is no summary says so."""

from __future__ import annotations

import json

import pytest
from conftest import convert

from beam_tfrecord import IncompleteOutput, iter_examples
from beam_tfrecord.config import ConvertConfig, ImageConfig
from beam_tfrecord.plan.source_config import SourceConfig
from beam_tfrecord.summary import OptionsSummary, Summary, SummaryError, read_summary
from beam_tfrecord.write.summary import recorded_again

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


def _read_settings(options: OptionsSummary) -> tuple:
    summary = Summary(0, 0, 0, 0, 0, True, {}, options=options)
    return summary.schema, summary.compression, summary.shard_format, summary.forced_channels


def test_the_readers_settings_are_the_recorded_ones_or_the_output_configs_defaults():
    """The summary reads its readers' settings by their keys, without the output's config: a
    record without them (a pipeline of the user's own, an earlier version's) reads as the
    config's defaults, a run's record as the run's config."""
    default = ConvertConfig(output="/out")
    expected = (default.schema, default.compression, default.shard_format, default.image.channels)
    for options in (OptionsSummary(), OptionsSummary({"output": "/out"}), OptionsSummary.of(None, default)):
        assert _read_settings(options) == expected
    asked = ConvertConfig(
        output="/out", schema="simple", file_format="array_record", image=ImageConfig(channels=1)
    )
    read = _read_settings(OptionsSummary.from_json(OptionsSummary.of(None, asked).to_json()))
    assert read == (asked.schema, asked.compression, asked.shard_format, 1)
    gzip = ConvertConfig(output="/out", compression="gzip")
    assert _read_settings(OptionsSummary.of(None, gzip))[1:3] == ("gzip", gzip.shard_format)


def test_a_stage_reads_its_config_back_and_an_earlier_record_as_this_version_writes_it():
    source, output = SourceConfig(input="/in", stratify=True), ConvertConfig(output="/out", schema="simple")
    record = OptionsSummary.of(source, output).to_json()
    options = OptionsSummary.from_json(record)
    assert options.config(SourceConfig) == source and options.config(ConvertConfig) == output
    assert OptionsSummary({"output": "/out"}).config(SourceConfig) is None
    # An earlier version's record: a setting added since is missing, one removed since is there,
    # and a feature run kept only its images' absence (features_only) among the output's settings.
    earlier = {key: value for key, value in record.items() if key != "jpeg_quality"}
    earlier |= {"retired_setting": 1, "features_only": True}
    again = recorded_again(OptionsSummary(earlier)).to_json()
    assert list(again) == list(record) and again == {**record, "features_only": True}
    with pytest.raises(SummaryError, match="options cannot be read"):
        OptionsSummary({**record, "schema": "nope"}).config(ConvertConfig)
