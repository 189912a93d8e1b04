"""The Keras and iter_examples examples of the README and docs/ pages, run as written on a few
generated records (of several sizes), so they cannot rot; tests/test_torch.py runs the PyTorch one
where torch is installed."""

from __future__ import annotations

import re
from pathlib import Path

from conftest import convert

ROOT = Path(__file__).resolve().parent.parent
PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]


def readme_block(name: str) -> str:
    """The python block that follows `<!-- example: NAME -->` in the README or a docs/ page."""
    found = [
        match.group(1)
        for page in PAGES
        for match in re.finditer(
            rf"<!-- example: {name} -->\n```python\n(.*?)```", page.read_text(encoding="utf-8"), re.DOTALL
        )
    ]
    assert len(found) == 1, f"{len(found)} '{name}' examples in the README and docs/ (one expected)"
    return found[0]


def test_readme_keras_examples_train_one_epoch(pets_tree, tmp_path):
    out = tmp_path / "out"
    assert convert(pets_tree, out) == 0
    keras_block = readme_block("keras")
    assert 'OUTPUT = "output"' in keras_block
    namespace: dict = {}
    exec(keras_block.replace('OUTPUT = "output"', f"OUTPUT = {str(out)!r}"), namespace)
    assert len(namespace["history"].history["loss"]) == 1
    assert namespace["model"].output_shape == (None, 2)
    exec(readme_block("features"), namespace)
    assert len(namespace["history"].history["loss"]) == 1
    exec(readme_block("iter-examples"), namespace)  # the last record of worker 0 of 2
    assert namespace["pixels"].shape == (64, 64, 3) and namespace["label"] in (0, 1)
    front_door = readme_block("reading")  # the README's own, on the same records
    assert front_door.count('"output"') == 2
    exec(front_door.replace('"output"', repr(str(out))), namespace)
    images, _ = next(iter(namespace["train"]))
    assert images.shape[1:] == (96, 96, 3) and namespace["encoded"][:2] == b"\xff\xd8"


def test_readme_library_example_converts_in_a_users_pipeline(pets_tree, tmp_path):
    block = readme_block("library")
    out = tmp_path / "out"
    namespace: dict = {"IMAGES": str(pets_tree), "OUTPUT": str(out)}
    exec(block, namespace)
    images, labels = next(iter(namespace["train"]))
    assert images.shape[1:] == (64, 64, 3) and labels.shape[0] == images.shape[0]
    assert sorted(p.name for p in out.glob("*.tfrecord.gz"))[0].startswith("train-00000-of-")


def test_readme_multi_label_example_trains_with_binary_cross_entropy(tmp_path):
    """The README's manifest as written (named columns, several classes, typed columns), then its
    multi-label block: one epoch on multi-hot labels, and the columns read back."""
    import imagegen

    root = tmp_path / "photos"
    imagegen.write_tree(root, {f"p{i:03d}_0.jpg": imagegen.jpeg(16, 12, seed=i) for i in range(10)})
    rows = [
        f"p{i:03d}_0,{'cat|outdoor' if i % 2 else 'cat'},photo {i},0.{i},{'wall|sun' if i % 3 else ''}"
        for i in range(10)
    ]
    (root / "labels.csv").write_text("id,breed,caption,score,tags\n" + "\n".join(rows) + "\n")
    out = tmp_path / "out"
    code = convert(
        root,
        out,
        "--label_source=manifest",
        f"--manifest={root / 'labels.csv'}",
        "--manifest_path_column=id",
        "--manifest_label_column=breed",
        "--multi_label",
        "--extra_columns=caption,score:float,tags:str_list",
    )
    assert code == 0
    block = readme_block("multi-label")
    assert 'OUTPUT = "out"' in block
    namespace: dict = {}
    exec(block.replace('OUTPUT = "out"', f"OUTPUT = {str(out)!r}"), namespace)
    assert len(namespace["history"].history["loss"]) == 1
    assert namespace["model"].output_shape == (None, 2)
    assert namespace["captions"].shape == (8,) and namespace["tags"].shape[0] == 8
