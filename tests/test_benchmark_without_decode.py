"""The benchmark switch that skips the validating decode (benchmarks/without_decode) must really
skip it: otherwise `peers.py --ours_without_decode` would report the decode's cost as the rest's."""

from __future__ import annotations

import io
import os
import subprocess
import sys

from PIL import Image

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SKIP_DECODE = os.path.join(ROOT, "benchmarks", "without_decode")

# Prints what the product makes of a JPEG that only its decode finds broken.
_CHECK = """
import sys
from beam_tfrecord.images.normalize import Reject, encode_for_tensorflow
try:
    kept = encode_for_tensorflow(sys.stdin.buffer.read())
    print("kept", kept.reencoded)
except Reject as reject:
    print("rejected", reject.reason)
"""


def _scan_names_a_missing_component() -> bytes:
    """A JPEG whose header and segments are sound but whose scan names a component the frame
    lacks: Pillow opens it, libjpeg refuses it only when decoding."""
    buffer = io.BytesIO()
    Image.new("RGB", (64, 48), (200, 10, 10)).save(buffer, "JPEG")
    data = bytearray(buffer.getvalue())
    data[data.find(b"\xff\xda") + 5] = 0x09  # SOS: length (2), count (1), then the first selector
    return bytes(data)


def _truncated() -> bytes:
    buffer = io.BytesIO()
    Image.effect_noise((64, 48), 64).convert("RGB").save(buffer, "JPEG")
    return buffer.getvalue()[:-300]


def _verdict(python_path: str, data: bytes) -> str:
    env = {**os.environ, "PYTHONPATH": python_path}
    done = subprocess.run(
        [sys.executable, "-c", _CHECK],
        input=data,
        capture_output=True,
        env=env,
        cwd=ROOT,
    )
    assert done.returncode == 0, done.stderr.decode(errors="replace")
    return done.stdout.decode().strip()


def test_the_product_rejects_what_only_the_decode_finds() -> None:
    assert _verdict(ROOT, _scan_names_a_missing_component()) == "rejected corrupt"


def test_without_decode_keeps_it_as_it_is() -> None:
    assert _verdict(os.pathsep.join([SKIP_DECODE, ROOT]), _scan_names_a_missing_component()) == "kept False"


def test_without_decode_still_decodes_what_it_re_encodes() -> None:
    """A truncated JPEG is re-encoded, so decoded: still a reject, never a crash of the run."""
    assert _verdict(os.pathsep.join([SKIP_DECODE, ROOT]), _truncated()) == "rejected truncated"
