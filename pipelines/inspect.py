"""`python -m pipelines.inspect OUTPUT`: read every record back, compare with the metadata, and draw
a contact sheet and a label histogram. Exits 1 on any mismatch, naming it."""

from __future__ import annotations

import argparse
import gc
import logging
import os
import sys
from collections import defaultdict
from collections.abc import Sequence

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")  # before TensorFlow loads: no C++ info chatter

from typing import TYPE_CHECKING

from beam_tfrecord import storage
from pipelines.quiet import TENSORFLOW_START_UP, held_back

if TYPE_CHECKING:
    from beam_tfrecord.read.verify import OutputReport

__all__ = ["build_parser", "draw", "main", "run"]


def _load_tensorflow() -> None:
    """TensorFlow, TFDS and the checks (Beam's filesystems), loaded once the arguments are checked
    (a usage error or `--help` answers at once, not after seconds of TensorFlow's start-up), their
    C++ start-up lines held back. The cycle collector is paused while they load: its passes over
    the objects they build find nothing, and were about a sixth of these imports' CPU."""
    collecting = gc.isenabled()
    gc.disable()
    try:
        with held_back(TENSORFLOW_START_UP):
            import tensorflow as tf

            tf.config.list_physical_devices()  # CUDA's probe says its lines now, not at the first record
            # TFDS's import (verify's check loads an output through it) loads TensorFlow's C++ again.
            import tensorflow_datasets  # noqa: F401

            # The checks' own import (Beam's with it): 0.2 s more of the collector's passes.
            import beam_tfrecord.read.verify  # noqa: F401
    finally:
        if collecting:
            gc.enable()


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="python -m pipelines.inspect",
        description="Check a conversion's output (every shard, record and image; counts against "
        "summary.json and the shard names) and draw a contact sheet and a label histogram.",
    )
    parser.add_argument("output", help="the --output of a pipelines.convert run (local or gs://)")
    parser.add_argument("--sample", type=int, default=36, help="records on the contact sheet")
    parser.add_argument("--seed", type=int, default=0, help="seed of the sample")
    parser.add_argument(
        "--pictures",
        "--pictures_dir",
        dest="pictures",
        default=".",
        help="folder for the contact sheet and label histogram (default: the current directory; "
        "never into the dataset, which inspect only reads)",
    )
    return parser


def draw(report: OutputReport, output: str, pictures_dir: str) -> list[str]:
    """Write the contact sheet and (for a labeled run) the histogram; returns their paths."""
    from apache_beam.io.filesystems import FileSystems

    from beam_tfrecord.names import CONTACT_SHEET_FILE, HISTOGRAM_FILE
    from beam_tfrecord.read import pictures
    from beam_tfrecord.read.verify import preview_note

    name = os.path.basename(output.rstrip("/")) or output
    title = f"{name}: {len(report.samples)} sampled records"
    note = preview_note(report.summary) if report.summary is not None else None
    if note is not None:  # pictures past 8 bits: how their previews are drawn
        title += f", {note}"
    sections = report.summary.sections if report.summary is not None else {}
    sheet = pictures.contact_sheet(report.samples, title, sections=sections)
    paths = [FileSystems.join(pictures_dir, CONTACT_SHEET_FILE)]
    pictures.save_png(sheet, paths[0])
    counts: dict[str, dict[str, int]] = defaultdict(dict)
    for (split, label), n in report.by_split_label.items():
        if label is not None:
            counts[label][split] = n
    if counts:
        splits = list(report.summary.splits) if report.summary is not None else []
        title = f"{name}: records per label ({sum(report.records.values())} in all)"
        paths.append(FileSystems.join(pictures_dir, HISTOGRAM_FILE))
        pictures.save_png(pictures.label_histogram(counts, splits, title), paths[1])
    return paths


def run(argv: Sequence[str] | None = None) -> int:
    """Inspect one output directory; returns the exit code (0 sound, 1 a mismatch, 2 a usage error)."""
    args = build_parser().parse_args(argv)
    if args.sample < 0:
        print("error: --sample must be 0 or more", file=sys.stderr)
        return 2
    if not storage.is_folder(args.output, if_remote=True):  # a remote one: verify_output says
        print(f"error: {args.output} is not a directory", file=sys.stderr)
        return 2
    _load_tensorflow()
    from beam_tfrecord.read.verify import format_report, verify_output

    report = verify_output(args.output, sample=args.sample, seed=args.seed)
    if report.summary is None:
        print(f"error: {report.errors[0]}", file=sys.stderr)
        return 1
    print(format_report(report))
    for path in draw(report, args.output, args.pictures):
        print(f"wrote {path}")
    if report.errors:
        for error in report.errors:
            print(f"error: {error}", file=sys.stderr)
        print(
            f"error: {args.output} does not match its metadata ({len(report.errors)} problems)",
            file=sys.stderr,
        )
        return 1
    print("ok: every shard framed and CRC-checked, every record parsed, every image decoded, counts agree")
    return 0


def main() -> None:
    """The command: logging for a terminal, then `run`'s exit code."""
    logging.basicConfig(level=logging.WARNING, format="%(levelname)s %(name)s: %(message)s")
    code = run()
    # Every file is written and closed: the interpreter's exit need not search the heap
    # TensorFlow, TFDS and Beam built for cycles. Frozen, that search is skipped (about a fifth
    # of a small output's inspection: benchmarks/NOTES.md); exit handlers still run.
    gc.freeze()
    sys.exit(code)


if __name__ == "__main__":
    main()
