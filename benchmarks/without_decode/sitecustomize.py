"""Benchmark only, never the product: every Python process started with this folder first on
PYTHONPATH (`benchmarks/peers.py --ours_without_decode`, worker processes included) skips the
validating decode of a JPEG kept as it is, so a run shows what everything but the check costs.
Such a file is written as a record even where the decode would reject it. A picture to be
re-encoded is decoded as always: its pixels are needed (a truncated file is still rejected).

The decode is `normalize._load` (Pillow's `load` of the first frame) after `draft`, which a kept
JPEG gets; tests/test_benchmark_without_decode.py checks that a file only the decode rejects is
kept here, so a rename cannot leave this measuring the decode after all.
"""

from PIL import ImageFile

from beam_tfrecord.images import normalize

_decode = normalize._load


def _load_unless_kept(image: ImageFile.ImageFile, source_format: str) -> None:
    """Stands in for `normalize._load`: a JPEG put in draft mode (its bytes kept, so its pixels
    are only checked) is left undecoded; anything else is decoded."""
    if source_format == "JPEG" and image.decoderconfig:  # what `draft` sets
        return
    _decode(image, source_format)


normalize._load = _load_unless_kept  # this project's own function, replaced on purpose
