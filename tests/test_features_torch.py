"""The PyTorch feature models' tests (tests/torch_feature_cases.py), in a fresh process where
torch is installed (`make test-torch`; skipped elsewhere): in a pytest process that has loaded
TensorFlow, importing torchvision (torch._dynamo, triton) ends the process with a segmentation
fault, which would take the whole suite with it."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest
from conftest import REPO

pytest.importorskip("torch")


def test_pytorch_feature_models_in_a_process_without_tensorflow():
    done = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "tests/torch_feature_cases.py"],
        cwd=REPO,
        env=os.environ.copy(),
        capture_output=True,
        text=True,
        timeout=1800,
    )
    assert done.returncode == 0, (done.stdout + done.stderr)[-6000:]
    assert " passed" in done.stdout.strip().splitlines()[-1]
