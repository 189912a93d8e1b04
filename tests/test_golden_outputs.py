"""The same inputs and options give the same output files, byte for byte, as when these goldens were
taken: every shard, index, side file and summary.json (run times and temporary paths aside).

A refactoring must keep these green untouched; a change meant to alter what is written updates
them on purpose (`GOLDEN_UPDATE=1 pytest tests/test_golden_outputs.py`) in the same commit, so the
diff of tests/golden/outputs.json shows exactly which files changed.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil

import pytest
from conftest import REPO, convert
from imagegen import jpeg, png, write_tree

GOLDEN = os.path.join(os.path.dirname(__file__), "golden", "outputs.json")
# summary.json's facts of one run rather than of its output.
RUN_FIELDS = ("started_at", "wall_time_s", "workers", "direct_running_mode", "read_threads", "parallelism")


def _manifest_tree(root) -> None:
    """Twelve pictures, two with identical bytes, and a manifest with a multi-label, three typed
    columns and a group column."""
    files = {f"img/{i:02d}.jpg": jpeg(30 + i, 20 + i % 3, seed=i) for i in range(10)}
    files["img/10.png"] = png(24, 24, seed=3)
    files["img/11.jpg"] = files["img/03.jpg"]
    write_tree(root, files)
    rows = ["path,label,caption,score,tags,group"]
    for i in range(12):
        name = f"img/{i:02d}.png" if i == 10 else f"img/{i:02d}.jpg"
        label = "cat|dog" if i % 3 == 0 else ("dog" if i % 2 else "cat")
        rows.append(f"{name},{label},picture {i},{i / 4},a|b{i},g{i // 4}")
    (root / "manifest.csv").write_text("\n".join(rows) + "\n")


def _pets_tree(root) -> None:
    files = {
        f"{name}.{i}.jpg": jpeg(28 + i, 22, seed=i + 7 * k)
        for k, name in enumerate(("cat", "dog", "fox"))
        for i in range(6)
    }
    files["p01_cat.9.jpg"] = jpeg(20, 20, seed=99)
    files["notes.txt"] = b"not a picture"
    write_tree(root, files)


# case -> (input tree, command-line options as one string; `{input}` is the tree's path)
CASES: dict[str, tuple[str, str]] = {
    "sample_default": ("sample", ""),
    "sample_simple_pad_gray": (
        "sample",
        "--schema simple --splits train=0.6,validation=0.4 --resize 24x20 --resize_mode pad "
        "--channels 1 --num_shards 2",
    ),
    "sample_unlabeled_gzip_beam": (
        "sample",
        "--compression gzip --sink beam --label_source none --image_format jpeg --jpeg_quality 80",
    ),
    "sample_stratified_crop": (
        "sample",
        "--splits train=0.5,test=0.5 --stratify --resize 16x16 --resize_mode crop",
    ),
    "manifest_multilabel_dedupe": (
        "manifest",
        "--label_source manifest --manifest {input}/manifest.csv --multi_label "
        "--extra_columns caption,score:float,tags:str_list --dedupe --splits train=0.5,validation=0.5",
    ),
    "pets_filename_groups": (
        "pets",
        r"--label_source filename --label_pattern (?:^|_)([a-z]+)\. --class_names cat,dog "
        r"--group_pattern ^(p\d+)_ --splits train=0.5,validation=0.5 --schema simple",
    ),
}


def _file_digest(path: str, tmp: str) -> str:
    with open(path, "rb") as handle:
        data = handle.read()
    return hashlib.sha256(data.replace(tmp.encode(), b"<tmp>")).hexdigest()


def _snapshot(output: str, tmp: str) -> dict:
    """sha256 of every file under `output` (the temporary root replaced by `<tmp>` first) and the
    summary without the run's own facts."""
    files = {}
    for name in sorted(os.listdir(output)):
        # Folders aside: index/ (the file index --append reads) is checked by tests/test_append.py.
        if name != "summary.json" and os.path.isfile(os.path.join(output, name)):
            files[name] = _file_digest(os.path.join(output, name), tmp)
    with open(os.path.join(output, "summary.json"), encoding="utf-8") as handle:
        text = handle.read().replace(tmp, "<tmp>")
    summary = json.loads(text)
    for field in RUN_FIELDS:
        summary.pop(field, None)
    summary.pop("beam_version", None)
    # The top-level keys in their written order (the golden file itself is stored sorted).
    return {"files": files, "summary": summary, "summary_keys": list(summary)}


def _input(kind: str, tmp_path) -> str:
    root = tmp_path / "in"
    if kind == "sample":
        shutil.copytree(os.path.join(REPO, "sample", "shapes"), root)
    elif kind == "manifest":
        _manifest_tree(root)
    else:
        _pets_tree(root)
    return str(root)


@pytest.mark.parametrize("case", sorted(CASES))
def test_outputs_match_golden(case, tmp_path):
    kind, options = CASES[case]
    source = _input(kind, tmp_path)
    output = str(tmp_path / "out")
    argv = [option.replace("{input}", source) for option in options.split()]
    assert convert(source, output, *argv) == 0
    found = _snapshot(output, str(tmp_path))
    goldens = {}
    if os.path.exists(GOLDEN):
        with open(GOLDEN, encoding="utf-8") as handle:
            goldens = json.load(handle)
    if os.environ.get("GOLDEN_UPDATE"):
        goldens[case] = found
        os.makedirs(os.path.dirname(GOLDEN), exist_ok=True)
        with open(GOLDEN, "w", encoding="utf-8") as handle:
            json.dump(dict(sorted(goldens.items())), handle, indent=1, sort_keys=True)
            handle.write("\n")
        return
    expected = goldens[case]
    assert sorted(found["files"]) == sorted(expected["files"])
    changed = [name for name in expected["files"] if found["files"][name] != expected["files"][name]]
    assert not changed, f"{case}: these files differ from the golden: {changed}"
    assert found["summary"] == expected["summary"]
    assert found["summary_keys"] == expected["summary_keys"]
