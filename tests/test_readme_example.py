"""The README's Keras examples, run as written on a few generated records, so they cannot rot."""

from __future__ import annotations

import os
import re

from pipelines.convert import run

README = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "README.md")


def readme_block(name: str) -> str:
    """The python block that follows `<!-- example: NAME -->` in the README."""
    with open(README, encoding="utf-8") as handle:
        text = handle.read()
    match = re.search(rf"<!-- example: {name} -->\n```python\n(.*?)```", text, re.DOTALL)
    assert match, f"README has no '{name}' example"
    return match.group(1)


def test_readme_keras_examples_train_one_epoch(pets_tree, tmp_path):
    out = tmp_path / "out"
    assert run(["--input", str(pets_tree), "--output", str(out), "--no_progress"]) == 0
    keras_block = readme_block("keras")
    assert 'OUTPUT = "output"' in keras_block
    namespace: dict = {}
    exec(keras_block.replace('OUTPUT = "output"', f"OUTPUT = {str(out)!r}"), namespace)
    assert len(namespace["history"].history["loss"]) == 1
    assert namespace["model"].output_shape == (None, 2)
    exec(readme_block("features"), namespace)
    assert len(namespace["history"].history["loss"]) == 1
