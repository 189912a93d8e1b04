"""Shared fixtures: trees of generated images, and quiet, offline defaults for every test."""

from __future__ import annotations

import os
import sys

import pytest

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
sys.path.insert(0, os.path.dirname(__file__))

from imagegen import bad_input_tree, jpeg, write_tree


@pytest.fixture
def bad_tree(tmp_path):
    root = tmp_path / "bad"
    write_tree(root, bad_input_tree())
    return root


@pytest.fixture
def pets_tree(tmp_path):
    """30 cats and 30 dogs in class folders, plus one broken file in each."""
    files = {}
    for label in ("cat", "dog"):
        for i in range(30):
            files[f"{label}/{label}.{i}.jpg"] = jpeg(40 + i % 5, 30, seed=i + (100 if label == "dog" else 0))
        files[f"{label}/broken.jpg"] = b"\xff\xd8\xff"
    root = tmp_path / "pets"
    write_tree(root, files)
    return root
