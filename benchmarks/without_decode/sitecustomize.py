"""Benchmark only, never the product: every Python process started with this folder first on
PYTHONPATH (`benchmarks/peers.py --ours_without_decode`, worker processes included) skips the
validating decode, so a run shows what everything but the check costs. Its bytes are kept as
they are; an image the decode would reject is written as a record.

The decode is `normalize._load` (Pillow's `load` of the first frame); tests/test_benchmark_without_decode.py
checks that a file only the decode rejects is kept here, so a rename cannot leave this measuring
the decode after all.
"""

from beam_tfrecord.images import normalize


def _no_decode(image: object, source_format: str) -> None:
    """Stands in for `normalize._load`: the header was read, no pixel is."""


normalize._load = _no_decode  # this project's own function, replaced on purpose
