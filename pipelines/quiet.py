"""Lines other programs write to the command's stderr that are not the command's to say: held back
while a noisy step runs, every other line passed on when it ends. Applied at the file descriptor,
since they are written there by C++ (TensorFlow's start-up) or by child processes (Beam's stager),
never through `sys.stderr`."""

from __future__ import annotations

import contextlib
import os
import re
import sys
import tempfile
from collections.abc import Iterator

__all__ = ["BEAM_STAGER", "TENSORFLOW_START_UP", "held_back"]

# TensorFlow's C++ start-up before absl's logging is set up, whatever TF_CPP_MIN_LOG_LEVEL says (it
# loads twice: its framework, then TFDS's import of it): absl's notice, the CUDA stubs' lines on a
# machine without a GPU, the CPU feature line.
TENSORFLOW_START_UP = re.compile(
    r"^(WARNING: All log messages before absl::InitializeLog\(\) is called are written to STDERR"
    r"|[IWE]\d{4} [\d:. ]+\d+ (cudart_stub|cuda_platform|cuda_executor|cpu_feature_guard|port)\.cc:\d+\] .*)$"
)
# Beam's stager first tries `python -m build` for a --setup_file's sdist, and where the `build`
# package is not installed its interpreter says so before the stager falls back to
# `setup.py sdist` (apache_beam/runners/portability/stager.py, `_build_setup_package`).
BEAM_STAGER = re.compile(r"^\S*python[\d.]*: No module named build$")


@contextlib.contextmanager
def held_back(unsaid: re.Pattern[str]) -> Iterator[None]:
    """The process's stderr held while the block runs; then every line of it but those `unsaid`
    matches is written, in order."""
    sys.stderr.flush()
    saved = os.dup(2)
    with tempfile.TemporaryFile() as held:
        os.dup2(held.fileno(), 2)
        try:
            yield
        finally:
            sys.stderr.flush()
            os.dup2(saved, 2)
            os.close(saved)
            held.seek(0)
            for line in held.read().decode("utf-8", "replace").splitlines():
                if not unsaid.match(line):
                    print(line, file=sys.stderr)
