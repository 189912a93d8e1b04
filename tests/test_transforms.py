"""The Beam transforms on TestPipeline: outcomes are routed, tallied, and carry no pixels."""

from __future__ import annotations

import apache_beam as beam
import imagegen
from apache_beam.testing.test_pipeline import TestPipeline
from apache_beam.testing.util import assert_that, equal_to

from beam_tfrecord.images import ImageOptions
from beam_tfrecord.listing import InputFile
from beam_tfrecord.metadata import Tally, build_summary, format_table
from beam_tfrecord.plan import LabelSource, PlannedInput, make_plan
from beam_tfrecord.transforms import ConvertImages, tally_outcomes


def planned(tmp_path, files: dict[str, bytes]) -> list[PlannedInput]:
    imagegen.write_tree(tmp_path, files)
    return [
        PlannedInput(relpath=r, path=str(tmp_path / r), size=len(d), split="train", label=0, label_text="a")
        for r, d in files.items()
    ]


def test_convert_images_routes_records_and_rejects(tmp_path):
    inputs = planned(
        tmp_path,
        {"a/1.jpg": imagegen.jpeg(), "a/2.png": imagegen.rgba_png(), "a/3.jpg": b"", "a/4.jpg": b"x"},
    )
    inputs.append(PlannedInput("a/gone.jpg", str(tmp_path / "a/gone.jpg"), 10, "train", 0, "a"))
    with TestPipeline() as p:
        out = p | beam.Create(inputs) | ConvertImages("tfds", ImageOptions())
        assert_that(
            out.records | "Facts" >> beam.Map(lambda r: (r.relpath, r.reencoded, len(r.example) > 100)),
            equal_to([("a/1.jpg", False, True), ("a/2.png", True, True)]),
            label="Records",
        )
        assert_that(
            out.rejects | "Reasons" >> beam.Map(lambda r: (r.path, r.reason)),
            equal_to([("a/3.jpg", "empty"), ("a/4.jpg", "not_an_image"), ("a/gone.jpg", "unreadable")]),
            label="Rejects",
        )
        tally = tally_outcomes(out.records, out.rejects)
        assert_that(
            tally | beam.Map(lambda t: (dict(t.records), dict(t.rejects), t.reencoded)),
            equal_to([({"train": 2}, {"empty": 1, "not_an_image": 1, "unreadable": 1}, 1)]),
            label="Tally",
        )


def test_summary_flags_an_inconsistent_count_and_empty_classes():
    listing = [InputFile(f"{c}/{i}.jpg", f"/x/{c}/{i}.jpg", 10) for c in ("a", "b") for i in range(2)]
    plan = make_plan(listing, LabelSource("folder"), {"train": 1.0})
    tally = Tally()
    tally.records["train"] = 2
    tally.by_split_label[("train", "a")] = 2
    summary = build_summary(plan, tally, [("/o/train-00000-of-00001.tfrecord", 99)], {})
    assert summary["consistent"] is False  # two inputs are neither records nor rejects
    assert "class 'b' has no valid image" in summary["warnings"]
    table = format_table(summary)
    assert "inputs = records + rejects  NO" in table
    assert "warning: class 'b' has no valid image" in table
