"""The local progress line: worker counts add up across processes and the line says so."""

from __future__ import annotations

import io

from beam_tfrecord.progress import ProgressCounter, ProgressPrinter, total_done


def test_counts_from_several_workers_add_up(tmp_path):
    first, second = (
        ProgressCounter(str(tmp_path), interval=3600),
        ProgressCounter(str(tmp_path), interval=3600),
    )
    for _ in range(7):
        first.add()
    second.add(5)
    assert total_done(str(tmp_path)) == 0  # nothing flushed yet: the interval has not passed
    first.flush()
    second.flush()
    assert total_done(str(tmp_path)) == 12


def test_progress_line_reports_done_of_total(tmp_path):
    counter = ProgressCounter(str(tmp_path))
    counter.add(25)
    counter.flush()
    printer = ProgressPrinter(str(tmp_path), total=100, stream=io.StringIO())
    assert printer.line().startswith("converted 25/100 inputs (25%)")
