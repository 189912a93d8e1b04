"""The README and the docs/ pages: every shell command they show runs as written (or is proved
where it cannot run here), every relative link and `#anchor` resolves, the README and the index
reach every page, and no page tells the project's history instead of the user's task.

Each ```sh / ```bash / ```console block runs in a fresh folder holding what its commands name: the
bundled sample, `setup.py`, `deploy/`, and small trees generated under the names the text uses
(PetImages, flowers, catsdogs, photos, coco2017, VOC2012, ...), with `.venv/bin/python` this
interpreter. The `export`s of
a page's earlier blocks come first, as in the one shell a reader types them into. What cannot run
here is proved another way:
- a benchmark (minutes of machine time): every option the command passes is the script's own
  (`--help`) or a pipeline option;
- a deploy/ script: run with PRINT_ONLY=1 (its checks run, docker and gcloud do not), and the
  Dataflow command a page says it prints is the one it prints;
- a conversion of sample/detection/: tests/test_sample_detection.py runs that very command and
  checks what it writes (it runs here too when a later command of the block reads its output);
- `make demo` runs the Makefile's recipe and prints the README's demo output (timings aside);
  `make test` is the suite this test belongs to: its recipe runs ruff and pytest;
- a command that needs a Google Cloud project, Java or the network, or installs packages:
  SKIPPED, each named with why.
Two stand-ins (REWRITES, EMULATOR_PORT): the feature example's weights file (an absolute path
outside the project) is a generated EfficientNetB0 file, and the GCS emulator's port is a free one.
"""

from __future__ import annotations

import functools
import glob
import os
import re
import shlex
import socket
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import annotationgen
import captiongen
import cvatgen
import imagegen
import keypointgen
import labelmegen
import labelstudiogen
import panopticgen
import pytest
import scientificgen
import segmentationgen
import yoloseggen
from test_sample_detection import PREFIX as SAMPLE_PREFIX
from test_sample_detection import readme_commands as sample_commands

ROOT = Path(__file__).resolve().parent.parent
PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
SHELLS = {"sh", "bash", "console"}
# What a block's folder links from the project: what its commands name, and what a Dataflow dry
# run's --setup_file=./setup.py packs.
LINKED = ("sample", "setup.py", "deploy", "beam_tfrecord", "pipelines", "pyproject.toml")
LINKED += (
    "requirements.txt",
    "requirements-dev.txt",
    "requirements-dev-nodeps.txt",
    "requirements-torch.txt",
    "requirements-grain.txt",
    "requirements-dicom.txt",
)

# Commands that need what this machine lacks, each named by how it starts, with why.
SKIPPED = {
    "gcloud auth login": "signs in to Google Cloud: needs an account and a browser",
    "gcloud config set project": "sets the reader's Google Cloud project",
    "gcloud services enable": "enables APIs in a Google Cloud project",
    "gcloud storage ": "creates, fills, reads or empties a real bucket",
    "gcloud dataflow ": "lists, watches or cancels a Google Cloud project's Dataflow jobs",
    ".venv/bin/python -m pipelines.convert --input gs://BUCKET/images": (
        "BUCKET is the reader's bucket; the emulator block on the same page runs this command on "
        "gs://my-bucket"
    ),
    ".venv/bin/python -m pipelines.convert --runner=FlinkRunner": (
        "Beam's FlinkRunner downloads a job server jar at run time (Java and the network); "
        "tests/test_portable.py runs the portable protocol it speaks"
    ),
    ".venv/bin/python -m pipelines.convert --runner=SparkRunner": "as FlinkRunner: a jar, Java, the network",
    "python3.11 -m venv": (
        "makes a virtual environment for the install that follows; `make demo`, checked here, makes "
        "the project's"
    ),
    ".venv/bin/python -m pip install": "installs from a package index: the network, minutes and gigabytes",
}
MAX_SKIPPED = 15

# Text of a block replaced before it runs: a path outside the project, a fixed port.
REWRITES = {"/models/efficientnetb0_notop.h5": "models/efficientnetb0_notop.h5"}
EMULATOR_PORT = "9023"


@dataclass(frozen=True)
class Block:
    """One shell code block of a page: where it is, and its text."""

    page: str
    line: int
    text: str

    @property
    def commands(self) -> list[str]:
        return split_commands(self.text)


def shell_blocks(page: Path) -> list[Block]:
    """The page's ```sh, ```bash and ```console blocks, in order."""
    blocks, lines, fence, start = [], page.read_text(encoding="utf-8").split("\n"), None, 0
    for number, line in enumerate(lines, 1):
        opening = re.match(r"^```(\w*)\s*$", line)
        if fence is None and opening:
            fence, start = opening.group(1), number
        elif fence is not None and line.startswith("```"):
            if fence in SHELLS:
                text = "\n".join(lines[start : number - 1])
                blocks.append(Block(str(page.relative_to(ROOT)), start, text))
            fence = None
    return blocks


def split_commands(text: str) -> list[str]:
    """The block's commands: continuation lines joined, a here-document kept with its command,
    comment lines and a console's `$ ` prompt dropped."""
    commands, lines, index = [], text.split("\n"), 0
    while index < len(lines):
        command = re.sub(r"^\$ ", "", lines[index].strip())
        index += 1
        if not command or command.startswith("#"):
            continue
        while command.endswith("\\") and index < len(lines):
            command = command[:-1].rstrip() + " " + lines[index].strip()
            index += 1
        heredoc = re.search(r"<<-?'?(\w+)'?", command)
        if heredoc:
            body = []
            while index < len(lines) and lines[index].strip() != heredoc.group(1):
                body.append(lines[index])
                index += 1
            index += 1
            command = "\n".join([command, *body, heredoc.group(1)])
        commands.append(command)
    return commands


def skip_reason(command: str) -> str | None:
    return next((why for start, why in SKIPPED.items() if command.startswith(start)), None)


def kind(command: str) -> str:
    """How a command is run or proved here (see the module's docstring)."""
    bare = re.sub(r"\s+#.*$", "", command.split("\n")[0])
    if skip_reason(command):
        return "skip"
    if re.fullmatch(r"make (demo|test)", bare):
        return "make"
    if re.match(r"(\.venv/bin/python|python3) benchmarks/\w+\.py(\s|$)", bare):
        return "benchmark"
    if re.fullmatch(r"(export )?(\w+=\S*\s*)+|for \w+ in [^;]*; do|done", bare):
        return "shell"
    if re.search(r"(^|\s)deploy/\w+\.sh\b", bare):
        return "deploy"
    if bare.startswith(SAMPLE_PREFIX):
        return "sample"  # tests/test_sample_detection.py runs it and checks what it writes
    if (
        bare.startswith(".venv/bin/python -m pipelines.convert --runner=DataflowRunner ")
        and "--dry_run" not in bare
    ):
        return "printed"  # the job a deploy script submits: it must print this command
    if re.match(
        r"\.venv/bin/python (-m (pipelines\.convert|pipelines\.inspect|gcp_storage_emulator)\b|- <<)", bare
    ):
        return "run"
    return "unknown"


ALL_BLOCKS = [block for page in PAGES for block in shell_blocks(page)]


def prelude(block: Block) -> list[str]:
    """The `export`s of the page's earlier blocks: the same shell session as the reader's."""
    earlier = [b for b in ALL_BLOCKS if b.page == block.page and b.line < block.line]
    return [c for b in earlier for c in b.commands if c.startswith("export ") and kind(c) == "shell"]


def distinct_blocks() -> list[tuple[Block, list[str]]]:
    """Each block once, with every place it is shown (the README repeats a few of the pages')."""
    seen: dict[tuple[str, tuple[str, ...]], tuple[Block, list[str]]] = {}
    for block in ALL_BLOCKS:
        key = (block.text, tuple(prelude(block)))
        seen.setdefault(key, (block, []))[1].append(f"{block.page}:{block.line}")
    return list(seen.values())


DISTINCT = distinct_blocks()
RAN: set[tuple[str, ...]] = set()  # the command lists that ran and passed in this session


# ---- what the commands name, generated small ---------------------------------------------


def make_inputs(text: str, folder: Path, weights: Path) -> None:
    """The trees and files a block's commands name, built as those datasets are laid out."""
    for name in LINKED:
        (folder / name).symlink_to(ROOT / name)
    python = folder / ".venv" / "bin" / "python"
    python.parent.mkdir(parents=True)
    python.write_text(f'#!/bin/sh\nexec {shlex.quote(sys.executable)} "$@"\n')
    python.chmod(0o755)
    for stamp in (".installed", ".installed-run"):  # the Makefile's stamps: the venv is there
        (folder / ".venv" / stamp).touch()
    if "PetImages" in text:
        files = {
            f"{c}/{c.lower()}.{i}.jpg": imagegen.jpeg(40, 30, seed=i + 7 * len(c))
            for c in ("Cat", "Dog")
            for i in range(5)
        }
        imagegen.write_tree(folder / "PetImages", files)
    if "--input flowers" in text:  # class folders under split folders
        files = {
            f"{split}/{c}/{c}_{split}_{i}.jpg": imagegen.jpeg(40, 30, seed=100 * n + 10 * j + i)
            for n, split in enumerate(("train", "val"))
            for j, c in enumerate(("daisy", "tulip"))
            for i in range((4, 2)[n])
        }
        imagegen.write_tree(folder / "flowers", files)
    if "--input catsdogs" in text:  # the class in the file name
        files = {
            f"{c}.{i}.jpg": imagegen.jpeg(40, 30, seed=10 * j + i)
            for j, c in enumerate(("cat", "dog"))
            for i in range(5)
        }
        imagegen.write_tree(folder / "catsdogs", files)
    if "--input photos" in text and "--label_source manifest" in text:
        ids = range(10)
        imagegen.write_tree(
            folder / "photos", {f"p{i:03d}_0.jpg": imagegen.jpeg(16, 12, seed=i) for i in ids}
        )
        rows = [
            f"p{i:03d}_0,{'cat|outdoor' if i % 2 else 'cat'},photo {i},0.{i},{'wall|sun' if i % 3 else ''}"
            for i in ids
        ]
        (folder / "photos" / "labels.csv").write_text(
            "id,breed,caption,score,tags\n" + "\n".join(rows) + "\n"
        )
    elif "--input photos" in text:
        files = {
            f"{'cat' if i % 2 else 'dog'}/p{i:03d}_{j}.jpg": imagegen.jpeg(16, 12, seed=10 * i + j)
            for i in range(8)
            for j in range(3)
        }
        files["dog/duplicate.jpg"] = files["cat/p001_0.jpg"]  # for --dedupe
        imagegen.write_tree(folder / "photos", files)
    if "--input coco2017" in text and "--task keypoints" in text:
        keypointgen.coco2017_keypoints(folder / "coco2017")
    if "--input pose" in text:
        keypointgen.ultralytics_pose(folder / "pose")
    if "--input label-studio" in text:
        labelstudiogen.project(folder / "label-studio")
    if "--input flickr8k" in text:
        expected = captiongen.flickr8k(folder / "flickr8k")
        if "my_captions.csv" in text:  # a file of pairs without a header, named with annotations_path
            captiongen.pairs_file(folder / "my_captions.csv", expected, "csv")
    if "--input coco2017" in text and "--task captions" in text:
        captiongen.coco2017(folder / "coco2017")
    elif "--input coco2017" in text and "--task panoptic" in text:
        panopticgen.coco_panoptic(folder / "coco2017", crowded=False)
    elif "--input coco2017" in text and "--task keypoints" not in text:
        files, per_split = {}, {}
        for split, folder_name in (("train", "train2017"), ("val", "val2017")):
            images, boxes = [], []
            for i in range(4):
                image_id = len(files) + 1
                files[f"{folder_name}/{image_id:012d}.jpg"] = imagegen.jpeg(48, 32, seed=image_id)
                images.append(annotationgen.image(image_id, f"{image_id:012d}.jpg"))
                boxes.append(annotationgen.box(image_id, image_id, (17, 18)[i % 2], [4, 4, 20, 16]))
            per_split[f"annotations/instances_{split}2017.json"] = annotationgen.instances(images, boxes)
        imagegen.write_tree(folder / "coco2017", {**files, **per_split})
    if "--input VOC2012" in text:
        files = {}
        for i in range(6):
            files[f"JPEGImages/2012_{i:06d}.jpg"] = imagegen.jpeg(48, 32, seed=i)
            objects = [(("cat", "dog")[i % 2], (4, 4, 30, 20), "")]
            files[f"Annotations/2012_{i:06d}.xml"] = annotationgen.voc_xml(f"2012_{i:06d}.jpg", objects)
        imagegen.write_tree(folder / "VOC2012", files)
    # Segmentation datasets as their tools lay them out (segmentationgen).
    if "VOCdevkit/VOC2012" in text and ("train_aug" in text or "--keep_split_names" in text):
        segmentationgen.voc2012_aug(folder)  # with SBD's train_aug, as DeepLab's scripts lay it out
    elif "--input VOCdevkit/VOC2012" in text:
        segmentationgen.voc2012(folder)
    if "--input cityscapes" in text:
        segmentationgen.cityscapes(folder / "cityscapes")
    if "--input ADEChallengeData2016" in text:
        segmentationgen.ade20k(folder)
    if "--input ADE20K_full" in text:  # ADE20K's layout, its 3,688 classes in 16-bit masks
        segmentationgen.ade20k_full(folder)
    if "--input ADE20K_2021_17_01" in text:  # Mask2Former's ADE20K-full: 16-bit TIFF masks
        segmentationgen.mask2former_ade20k_full(folder)
    if "--input cells" in text:  # microscopy label images: 16-bit nucleus ids beside 16-bit pictures
        segmentationgen.microscopy_nuclei(folder / "cells")
    if "--input CamVid" in text:
        segmentationgen.camvid(folder)
    if "--input kaggle" in text:
        segmentationgen.kaggle_binary(folder / "kaggle")
    if "--input coco8-seg" in text:
        yoloseggen.ultralytics_tree(folder / "coco8-seg")
    if "--input task" in text:  # CVAT's task export: annotations.xml beside images/
        cvatgen.doc_task(folder / "task")
    if "--input project" in text:  # CVAT's project export: images/<subset>/
        cvatgen.doc_project(folder / "project")
    if "--input shots" in text:  # LabelMe's JSON files in annotations/ beside images/
        labelmegen.sibling(folder / "shots")
    if "--input nuclei" in text:  # 16-bit microscopy in class folders
        scientificgen.nuclei(folder / "nuclei")
    if "--input zstacks" in text:  # 16-bit ImageJ z-stacks in class folders
        scientificgen.zstacks(folder / "zstacks")
    if "--input EuroSAT_MS" in text:  # 13-band tiles in class folders
        scientificgen.eurosat(folder / "EuroSAT_MS")
    if "--input orchards" in text:  # RGB + near-infrared tiles with COCO boxes
        scientificgen.orchards(folder / "orchards")
    if "--input 38-Cloud_training" in text:  # a folder and a file a band, 384x384 as the dataset's
        scientificgen.cloud38(folder, size=(384, 384))
    if "--input S2A_MSIL2A_products" in text:  # SAFE products: a JPEG 2000 a band
        scientificgen.sentinel2_safe(folder / "S2A_MSIL2A_products")
    if any(path in text for path in REWRITES):
        (folder / "models").mkdir()
        (folder / "models" / weights.name).symlink_to(weights)


@pytest.fixture(scope="module")
def efficientnet_weights(tmp_path_factory) -> Path:
    """A file in the format of Keras's efficientnetb0_notop.h5 (random weights: no download)."""
    import keras  # loaded already: collection imports TensorFlow, which loads Keras

    path = tmp_path_factory.mktemp("models") / "efficientnetb0_notop.h5"
    keras.applications.EfficientNetB0(include_top=False, weights=None).save(path)
    return path


def environment() -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in ("STORAGE_EMULATOR_HOST", "PYTHON")}
    env.update(PYTHONPATH=str(ROOT), PRINT_ONLY="1")  # deploy/ scripts print, never submit
    return env


def free_port() -> str:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return str(probe.getsockname()[1])


def script(commands: list[str]) -> str:
    """A bash script of the commands; a started emulator is waited for (as a person typing the
    next line would) and stopped at the end."""
    lines = ["set -e", "trap 'kill $(jobs -p) 2>/dev/null || true' EXIT"]
    for command in commands:
        lines.append(command)
        if "gcp_storage_emulator start" in command:
            port = re.search(r"--port=(\d+)", command).group(1)
            wait = (
                "import socket, time\nfor _ in range(300):\n"
                f"  try: socket.create_connection(('127.0.0.1', {port}), 1); break\n"
                "  except OSError: time.sleep(0.1)"
            )
            lines.append(f".venv/bin/python -c {shlex.quote(wait)}")
    return "\n".join(lines) + "\n"


def run_script(commands: list[str], folder: Path) -> subprocess.CompletedProcess:
    done = subprocess.run(
        ["bash", "-c", script(commands)],
        cwd=folder,
        env=environment(),
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, f"exit {done.returncode}\n{done.stdout[-3000:]}\n{done.stderr[-3000:]}"
    return done


# ---- the proofs ----------------------------------------------------------------------------


def check_benchmark(command: str) -> None:
    """Every option the command passes is the script's own or a pipeline option."""
    from apache_beam.options.pipeline_options import PipelineOptions

    import pipelines.options  # noqa: F401  (registers our options beside Beam's)

    argv = shlex.split(re.sub(r"\s+#.*$", "", command))
    path = ROOT / argv[1]
    assert path.is_file(), argv[1]
    shown_help = script_help(str(path))
    pipeline_options = set(PipelineOptions([]).get_all_options())
    for token in argv[2:]:
        if token.startswith("--"):
            name = token[2:].split("=", 1)[0]
            assert f"--{name}" in shown_help or name in pipeline_options, f"{argv[1]} takes no --{name}"


def test_the_benchmark_notes_show_commands_their_scripts_take():
    """The measurements behind docs/performance.md live in benchmarks/NOTES.md's first section, each
    beside its command: those commands are checked as a page's are (the later sections are history,
    with the options of their day)."""
    notes = ROOT / "benchmarks" / "NOTES.md"
    lines = notes.read_text(encoding="utf-8").split("\n")
    start = next(n for n, line in enumerate(lines, 1) if line.startswith("## The measurements behind"))
    end = next(n for n, line in enumerate(lines, 1) if n > start and line.startswith("## "))
    shown = [c for b in shell_blocks(notes) if start < b.line < end for c in b.commands]
    assert shown and all(kind(c) == "benchmark" for c in shown), shown
    for command in shown:
        check_benchmark(command)


@functools.cache
def script_help(path: str) -> str:
    """A benchmark's `--help`, run once per script (the pages show some scripts a dozen times)."""
    done = subprocess.run([sys.executable, path, "--help"], capture_output=True, text=True, cwd=ROOT)
    assert done.returncode == 0, done.stderr[-2000:]
    return done.stdout


def demo_block() -> str:
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    section = readme.split("## What the demo shows", 1)[1]
    return re.search(r"\n```\n(.*?)```", section, re.DOTALL).group(1)


def without_timings(text: str) -> str:
    return re.sub(r"wall time +[\d.]+ s \(\d+ inputs/s\)", "wall time", text).strip()


def check_make(command: str, folder: Path) -> None:
    target = command.split()[1]
    make = ["make", "-s", "-f", str(ROOT / "Makefile"), target, "VENV=.venv"]
    if target == "test":  # the suite this test is part of: its recipe, not a second run
        recipe = subprocess.run([*make, "-n"], cwd=folder, capture_output=True, text=True, env=environment())
        assert recipe.returncode == 0 and "-m ruff check ." in recipe.stdout and "-m pytest" in recipe.stdout
        return
    bare = f"make {target}"  # the pages show it with their own comments after it
    if (bare,) in RAN:  # shown on several pages
        return
    done = subprocess.run(make, cwd=folder, capture_output=True, text=True, env=environment(), timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    assert without_timings(done.stderr + done.stdout) == without_timings(demo_block())
    RAN.add((bare,))


def check_printed(command: str, block: Block, folder: Path) -> None:
    """The page's deploy/run_job.sh block before this one prints exactly this command."""
    earlier = [b for b in ALL_BLOCKS if b.page == block.page and b.line < block.line]
    (submit,) = [b for b in earlier if "deploy/run_job.sh" in b.text][-1:]
    done = run_script([*prelude(submit), *submit.commands], folder)
    printed = [shlex.split(line[2:]) for line in done.stdout.splitlines() if line.startswith("+ ")]
    assert shlex.split(command) in printed, done.stdout


def check_outcome(text: str, folder: Path, output: str) -> None:
    """What a reader of the block would look at, beyond exit 0."""
    import json

    def summary(path: str) -> dict:
        return json.loads((folder / path / "summary.json").read_text())

    if "--group_pattern" in text:
        groups = summary("out")["groups"]
        assert (groups["groups"], groups["grouped_files"], groups["without_group"]) == (8, 24, 0)
        rejects = (folder / "out" / "rejects.jsonl").read_text()
        assert '"path": "dog/duplicate.jpg", "reason": "duplicate"' in rejects
    if "--extra_columns" in text:
        assert [c["name"] for c in summary("out")["extra_columns"]] == ["caption", "score", "tags"]
    if "--output out/coco2017" in text:
        assert set(summary("out/coco2017")["splits"]) == {"train", "validation"}
    if "--output flowers-records" in text:  # split folders keep their splits, val as validation
        found = summary("flowers-records")
        assert set(found["splits"]) == {"train", "validation"} and found["class_names"] == ["daisy", "tulip"]
    if "--input catsdogs" in text:
        assert summary("out")["class_names"] == ["cat", "dog"]
    if "--input sample/shapes --output shapes \\" in text:  # classification.md's walk-through
        found = summary("shapes")
        assert (found["records"], found["rejects"], set(found["splits"])) == (39, 3, {"train", "validation"})
    if "--feature_model" in text:
        assert summary("pets-features")["features"]["shape"] == [1280]
    if "--output out/voc-deeplab" in text:  # DeepLab's data_generator finds every split it is given
        for split in ("train", "val", "train_aug", "trainval"):
            found = glob.glob(os.path.join(folder / "out/voc-deeplab", "%s-*" % split))  # noqa: UP031 (DeepLab's own expression)
            assert found and all(f.endswith(".tfrecord") for f in found), (split, found)
    if "--dry_run=true" in text:
        assert (folder / "dataflow_job.json").is_file()
    if "--input=voc-sample/" in text:  # the sample's lists plan the bucket's splits
        assert re.search(r"shard tasks +train \d+, train_aug \d+, trainval \d+, val \d+", output), output
    if "--dry_run=true" in text and "--input=sample/shapes" in text:
        # The job's size as docs/dataflow.md shows it is the size it prints (the proto holds this
        # folder's paths, so its size moves by a few bytes).
        page = (ROOT / "docs" / "dataflow.md").read_text(encoding="utf-8")
        shown, printed = (
            [float(n) for n in re.findall(r"^  (?:transforms|pipeline proto) +([\d.]+)", t, re.M)]
            for t in (page, output)
        )
        assert len(shown) == len(printed) == 2, printed
        assert shown[0] == printed[0] and abs(shown[1] - printed[1]) < 1, (
            f"dataflow.md shows {shown}, {printed} printed"
        )
    if "gcp_storage_emulator" in text:  # "prints the same table as make demo"
        table = [line for line in demo_block().splitlines() if not line.startswith(("INFO", "wall time"))]
        assert all(line in output for line in table), output


@pytest.mark.parametrize("block, shown", DISTINCT, ids=[f"{b.page}:{b.line}" for b, _ in DISTINCT])
def test_every_command_runs_as_shown(block, shown, tmp_path, request):
    commands = [*prelude(block), *block.commands]
    kinds = {command: kind(command) for command in commands}
    unknown = [command for command, found in kinds.items() if found == "unknown"]
    assert not unknown, f"{shown}: no way to run or prove {unknown}: add one to tests/test_docs.py"
    if all(kinds[c] in ("skip", "shell") for c in block.commands):
        pytest.skip(
            "; ".join(f"{c.split(chr(10))[0]}: {skip_reason(c)}" for c in block.commands if skip_reason(c))
        )
    text = block.text
    weights = request.getfixturevalue("efficientnet_weights") if any(p in text for p in REWRITES) else None
    make_inputs(text, tmp_path, weights or tmp_path)
    for command, found in kinds.items():
        if found == "benchmark":
            check_benchmark(command)
        elif found == "make":
            check_make(command, tmp_path)
        elif found == "printed":
            check_printed(command, block, tmp_path)
        elif found == "sample":
            argv = shlex.split(command)[3:]
            assert sample_commands()[argv[1].split("/")[2]] == argv, (
                "not the command test_sample_detection runs"
            )
    # A sample conversion runs here too only when a later command reads its output (inspect).
    outputs = {
        c: shlex.split(c)[shlex.split(c).index("--output") + 1] for c in commands if kinds[c] == "sample"
    }
    later = {c: " ".join(commands[i + 1 :]) for i, c in enumerate(commands)}
    runnable = [
        c
        for c in commands
        if kinds[c] in ("run", "deploy", "shell") or (kinds[c] == "sample" and f" {outputs[c]} " in later[c])
    ]
    if tuple(runnable) in RAN:  # the README repeats a page's block: it ran once
        return
    if any(kinds[c] in ("run", "deploy", "sample") for c in runnable):
        port = free_port()
        rewritten = []
        for command in runnable:
            for old, new in REWRITES.items():
                command = command.replace(old, new)
            rewritten.append(
                command.replace(f":{EMULATOR_PORT}", f":{port}").replace(f"={EMULATOR_PORT}", f"={port}")
            )
        done = run_script(rewritten, tmp_path)
        check_outcome(text, tmp_path, done.stdout + done.stderr)
        RAN.add(tuple(runnable))


def test_the_skip_list_is_small_and_names_only_commands_shown():
    shown = [command for block in ALL_BLOCKS for command in block.commands]
    assert len(SKIPPED) <= MAX_SKIPPED
    for start in SKIPPED:
        assert any(command.startswith(start) for command in shown), f"no page shows {start!r} any more"


# ---- links ---------------------------------------------------------------------------------


def slug(heading: str) -> str:
    """GitHub's anchor for a heading: lower case, punctuation dropped, spaces to hyphens."""
    text = re.sub(r"`", "", heading.strip().lstrip("#").strip().lower())
    return re.sub(r"[^\w\- ]", "", text).replace(" ", "-")


def anchors(page: Path) -> set[str]:
    """Its headings' anchors, and those an HTML `<a id=...>` or `<a name=...>` sets."""
    text = page.read_text(encoding="utf-8")
    found, counts, fence = set(re.findall(r'<a (?:id|name)="([^"]+)"', text)), {}, False
    for line in text.split("\n"):
        if line.startswith("```"):
            fence = not fence
        elif not fence and re.match(r"#{1,6} ", line):
            base = slug(line)
            count = counts.get(base, 0)
            counts[base] = count + 1
            found.add(base if count == 0 else f"{base}-{count}")
    return found


def links(page: Path) -> list[tuple[int, str]]:
    """(line, target) of every markdown link and image outside code."""
    found, fence = [], False
    for number, line in enumerate(page.read_text(encoding="utf-8").split("\n"), 1):
        if line.startswith("```"):
            fence = not fence
            continue
        if fence:
            continue
        prose = re.sub(r"`[^`]*`", "", line)
        found += [(number, target) for target in re.findall(r"\]\(([^)\s]+)\)", prose)]
    return found


@pytest.mark.parametrize("page", PAGES, ids=[str(p.relative_to(ROOT)) for p in PAGES])
def test_every_relative_link_and_anchor_resolves(page):
    broken = []
    for number, target in links(page):
        if re.match(r"[a-z]+:", target):  # https:, mailto:
            continue
        path, _, anchor = target.partition("#")
        file = (page.parent / path).resolve() if path else page
        if not file.exists():
            broken.append(f"{page.name}:{number}: {target} (no such file)")
        elif anchor and (file.suffix != ".md" or anchor not in anchors(file)):
            broken.append(f"{page.name}:{number}: {target} (no such heading)")
    assert not broken, "\n".join(broken)


def test_the_readme_is_a_front_door_and_every_page_says_what_it_covers():
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    assert len(readme.splitlines()) < 150
    shown = [command for block in shell_blocks(ROOT / "README.md") for command in block.commands]
    assert [c.split("#")[0].strip() for c in shown[:2]] == ["make demo", "make test"], shown[:2]
    readme_links = {target.partition("#")[0] for _, target in links(ROOT / "README.md")}
    for page in PAGES[1:]:
        assert f"docs/{page.name}" in readme_links, f"the README does not link {page.name}"
        title, *rest = page.read_text(encoding="utf-8").split("\n")
        summary = next(line for line in rest if line.strip() and not line.startswith("<!--"))
        assert title.startswith("# ") and not summary.startswith(("#", "|", "```", "<")), page.name


def test_the_index_routes_to_every_page():
    index = ROOT / "docs" / "index.md"
    routed = {target.partition("#")[0] for _, target in links(index)}
    for page in PAGES[1:]:
        if page != index:
            assert page.name in routed, f"docs/index.md does not route to {page.name}"


# ---- no lab notebook -----------------------------------------------------------------------

# Pages generated from the code's declarations (make docs): what they say is the code's.
GENERATED = ("options.md", "reasons.md")
# What a user does not need and a page must not carry: the project's history and its workplace.
# That lives in CHANGELOG.md and benchmarks/NOTES.md, which are not user pages.
INTERNAL = {
    "an issue number": re.compile(
        r"\bissues?\s+#?\d+(?:(?:\s*,\s*|\s+and\s+|\s*&\s*)#?\d+)*\b"  # issue 28, issues 15 and 22
        r"|(?<![\w/#&])#\d{1,5}(?![\w-])",  # a bare #28 (never owner/repo#28, &#38; or a heading)
        re.IGNORECASE,
    ),
    "a commit named in prose": re.compile(
        r"\b(?:commit|commits|at|against|before|since|revert|reverted|checkout|cherry-pick)\s+\(?"
        r"(?=[0-9a-f]*[a-f])(?=[0-9a-f]*\d)[0-9a-f]{7,40}\b"
    ),
    "a worktree of an old commit": re.compile(r"\bgit\s+worktree\b"),
    # An hour a measurement was taken (02:13-02:25 UTC); a log line a program prints keeps its
    # seconds (15:52:08 UTC) and is a quoted output, not a note.
    "the hour of a measurement": re.compile(
        r"(?<![\d:])\d{1,2}:\d{2}(?!:\d)(?:\s*(?:-|–|to|and)\s*\d{1,2}:\d{2}(?!:\d))?\s*UTC\b"
    ),
    "who ran what on which machine": re.compile(
        r"\b(?:lent|load average|used to|on this day|the seed's|this project's machine"
        r"|other (?:sessions|agents)|shared with (?:other|two|another)\b)",
        re.IGNORECASE,
    ),
}
# A hexadecimal word that could be an abbreviated commit id (a digit and a letter, 7 to 40 long:
# never a SHA-256, which is 64, nor a colour, which is 3 or 6).
HEX_WORD = re.compile(r"\b(?=[0-9a-f]*[a-f])(?=[0-9a-f]*\d)[0-9a-f]{7,40}\b")


def commits_of_this_repository(words: set[str]) -> set[str]:
    """The words that name a commit of this repository (git's own lookup; none without git)."""
    if not words or not (ROOT / ".git").exists():
        return set()
    ordered = sorted(words)
    try:
        done = subprocess.run(
            ["git", "-C", str(ROOT), "cat-file", "--batch-check=%(objecttype)"],
            input="\n".join(ordered) + "\n",
            capture_output=True,
            text=True,
            timeout=60,
        )
    except (OSError, subprocess.SubprocessError):
        return set()
    kinds = done.stdout.splitlines()
    if done.returncode != 0 or len(kinds) != len(ordered):
        return set()
    return {word for word, found in zip(ordered, kinds, strict=True) if found == "commit"}


def internal_references(text: str) -> list[tuple[int, str, str]]:
    """(line, what, the words) of every internal reference in a page's text."""
    found = []
    lines = text.split("\n")
    for number, line in enumerate(lines, 1):
        for what, pattern in INTERNAL.items():
            found += [(number, what, match.group(0)) for match in pattern.finditer(line)]
    words = {word for line in lines for word in HEX_WORD.findall(line)}
    commits = commits_of_this_repository(words)
    for number, line in enumerate(lines, 1):
        found += [(number, "a commit of this repository", w) for w in HEX_WORD.findall(line) if w in commits]
    return found


@pytest.mark.parametrize(
    "planted",
    [
        "no GPU machine was lent to the work on this (issues 15 and 22)",
        "Issue 28's goals of 500 us",
        "see #28 for the plan",
        "measured at 8f57aaf",
        "Against 103a0c5 (the commit before them)",
        "git worktree add /tmp/old cd09707   # the last commit with our own decode pool",
        "02:13-02:25 UTC on 2026-11-26",
        "(00:22 UTC, before the cuts)",
        "shared with two other sessions running tests (load average 1.1 to 1.8)",
        "the header pass that used to count records",
        "the flattened output, float32 (the seed's layout)",
    ],
)
def test_the_internal_reference_check_catches_a_planted_one(planted):
    assert internal_references(f"Some text.\n{planted}\nMore text."), planted


@pytest.mark.parametrize(
    "innocent",
    [
        "`image/key/sha256`: 4811f76f6b9e633ded867c76977612d0eef06a575a4eaaff3dc661256a9c946d",
        "a palette colour #1f77b4, an anchor [reading](reading.md#read-speed), apache/beam#24578",
        "error: out is being written by run 5f0c2a17d3e9 on host laptop (pid 14853), started "
        "2026-11-28 15:52:08 UTC",
        "ImageNet on Dataflow, prices as of 2026-11-28; 1,280 objects at 200 MB/s",
        "an ONNX Runtime session, and the split seed (--split_seed)",
    ],
)
def test_the_internal_reference_check_passes_what_users_need(innocent):
    assert internal_references(innocent) == []


def test_user_pages_carry_no_internal_references():
    """Issue numbers, commits, worktrees of old commits, hours of measurement rounds and notes on
    who ran what on which machine belong in CHANGELOG.md and benchmarks/NOTES.md."""
    found = [
        f"{page.relative_to(ROOT)}:{number}: {what}: {words!r}"
        for page in PAGES
        if page.name not in GENERATED
        for number, what, words in internal_references(page.read_text(encoding="utf-8"))
    ]
    assert not found, "\n".join(found)
