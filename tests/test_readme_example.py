"""Every ```python block of the README and the docs/ pages runs as written, in a fresh interpreter
(`.venv/bin/python -`), in a folder holding what it reads: an output a string of the block names is
made by its page's own command that writes it (the last one before the block, then the page's later
commands that name it: a recipe's step over it), else by the command FIXTURES names for it; their
inputs are generated as tests/test_docs.py generates them for the shell blocks. A block that uses
names it does not bind continues the page's earlier blocks that bind them: they run before it, in
its interpreter. A ```text block that is the next block after one is what it prints. Not run:
- a signature (api.md): parameters annotated as in a `def`, so no Python; its parameters' names,
  order, kinds and defaults are compared with the code's;
- a block under `<!-- not run: WHY -->` (a real bucket, Dataflow, a GPU, a download);
- a block that imports an optional extra that is not installed (OPTIONAL; `make test-torch` runs
  the pages marked `torch`).
A block under `<!-- example: NAME -->` runs with CHECKS[NAME] after it, in its interpreter."""

from __future__ import annotations

import ast
import builtins
import importlib.util
import re
import shlex
import subprocess
import symtable
from dataclasses import dataclass
from pathlib import Path

import pytest
from test_docs import (
    ALL_BLOCKS,
    PAGES,
    REWRITES,
    ROOT,
    efficientnet_weights,  # noqa: F401  (a fixture the feature page's blocks need)
    environment,
    kind,
    make_inputs,
    run_script,
)

NOT_RUN = re.compile(r"<!-- not run: (\S.*) -->")
EXAMPLE = re.compile(r"<!-- example: ([\w-]+) -->")

# What a block reads that its page's commands do not make as the block needs it, and the command
# that makes it here; None: the block writes it itself.
FIXTURES = {
    ("docs/reading.md", "output"): "make demo",  # the README's: the bundled sample, converted
    ("docs/features.md", "pets-features"): (  # the page's quick start, with the option the block names
        ".venv/bin/python -m pipelines.convert --input PetImages --output pets-features "
        "--feature_model efficientnet_b0 --model_weights /models/efficientnetb0_notop.h5 "
        "--feature_pooling avg --features_only"
    ),
    ("docs/runners.md", "out"): None,  # the library example converts into it
}

# Modules of an optional extra (make test installs none of them; make test-torch does).
OPTIONAL = {
    "torch": "PyTorch: the [torch] extra",
    "torchvision": "torchvision: the [torch] extra",
    "timm": "timm: the [torch] extra",
}

# What a reader would look at after an example block, run after it in its interpreter.
CHECKS = {
    "reading": """
images, _ = next(iter(train))
assert tuple(images.shape[1:]) == (96, 96, 3) and isinstance(encoded, bytes) and label >= 0
""",
    "keras": """
assert len(history.history["loss"]) == 1
assert model.output_shape == (None, len(beam_tfrecord.class_names(OUTPUT)))
""",
    "features": 'assert len(history.history["loss"]) == 1',
    "iter-examples": """
assert pixels.shape == (64, 64, 3) and 0 <= label < len(beam_tfrecord.class_names(OUTPUT))
""",
    "torch": """
import sys

assert "tensorflow" not in sys.modules  # a PyTorch job loads no TensorFlow
assert tuple(images.shape[1:]) == (3, 64, 64) and loss.item() > 0
""",
    "library": """
import pathlib

images, labels = next(iter(train))
assert tuple(images.shape[1:]) == (64, 64, 3) and labels.shape[0] == images.shape[0]
assert sorted(p.name for p in pathlib.Path(OUTPUT).glob("*.tfrecord.gz"))[0].startswith("train-00000-of-")
""",
    "multi-label": """
assert len(history.history["loss"]) == 1 and model.output_shape == (None, classes)
assert captions.shape[0] == scores.shape[0] == tags.shape[0] > 0
""",
    "detection": """
assert tuple(images.shape[1:]) == (128, 192, 3) and tuple(targets["boxes"].shape[1:]) == (16, 4)
assert boxes.shape[1] == 4 and labels.min() >= 0
""",
    "frozen-head": """
assert len(history.history["loss"]) == 1 and head.input_shape == (None, 1280)
""",
}


@dataclass(frozen=True)
class PythonBlock:
    """One ```python block of a page: where it is, its text, the line above its fence, and the
    ```text block after it (what it prints), if that is the next block."""

    page: str
    line: int
    text: str
    note: str
    prints: str | None

    @property
    def where(self) -> str:
        return f"{self.page}:{self.line}"


def fenced(page: Path) -> list[tuple[str, int, int, str]]:
    """(language, first line, closing line, text) of every fenced block of the page."""
    found, lines, fence, start = [], page.read_text(encoding="utf-8").split("\n"), None, 0
    for number, line in enumerate(lines, 1):
        opening = re.match(r"^```(\w*)\s*$", line)
        if fence is None and opening:
            fence, start = opening.group(1), number
        elif fence is not None and line.startswith("```"):
            found.append((fence, start, number, "\n".join(lines[start : number - 1]) + "\n"))
            fence = None
    return found


def python_blocks(page: Path) -> list[PythonBlock]:
    lines, found = page.read_text(encoding="utf-8").split("\n"), fenced(page)
    blocks = []
    for index, (language, start, _, text) in enumerate(found):
        if language == "python":
            following = found[index + 1] if index + 1 < len(found) else None
            prints = following[3] if following and following[0] == "text" else None
            note = lines[start - 2] if start > 1 else ""
            blocks.append(PythonBlock(str(page.relative_to(ROOT)), start, text, note, prints))
    return blocks


def signature_of(text: str) -> str | None:
    """The public name whose signature the block shows: no Python (its parameters are annotated as
    in a `def`), and it starts with `beam_tfrecord.NAME(`, `class beam_tfrecord.NAME(` or
    `with beam_tfrecord.NAME(`."""
    try:
        ast.parse(text)
    except SyntaxError:
        shown = re.match(r"(?:class |with )?beam_tfrecord\.(\w+)\(", text)
        return shown.group(1) if shown else None
    return None


class _Public(dict):
    """beam_tfrecord's public names, each imported when a shown default names it."""

    def __missing__(self, name: str) -> object:
        import beam_tfrecord

        return getattr(beam_tfrecord, name)


def signature_mismatch(name: str, text: str) -> str | None:
    """What the shown signature gets wrong about the code's (parameters: names, order, kinds and
    defaults; a class: its base), or None."""
    import inspect

    import beam_tfrecord

    code = getattr(beam_tfrecord, name)
    if text.startswith("class "):
        base = re.fullmatch(r"class beam_tfrecord\.\w+\((\w+)\)\s*", text).group(1)
        return None if issubclass(code, getattr(builtins, base)) else f"{name} is no {base}"
    as_def = re.sub(r"^(?:with )?beam_tfrecord\.\w+\(", "def shown(", text.strip())
    as_def = re.sub(r"\s+as \w+:\s*\.\.\.$", "", as_def)  # a context manager: `with ... as claim: ...`
    arguments = ast.parse(as_def + ": ...").body[0].args
    namespace = _Public()
    positional = arguments.posonlyargs + arguments.args
    defaults = [None] * (len(positional) - len(arguments.defaults)) + arguments.defaults
    shown = [(a.arg, "POSITIONAL_OR_KEYWORD", d) for a, d in zip(positional, defaults, strict=True)]
    if arguments.vararg:
        shown.append((arguments.vararg.arg, "VAR_POSITIONAL", None))
    shown += [
        (a.arg, "KEYWORD_ONLY", d) for a, d in zip(arguments.kwonlyargs, arguments.kw_defaults, strict=True)
    ]
    if arguments.kwarg:
        shown.append((arguments.kwarg.arg, "VAR_KEYWORD", None))
    empty = inspect.Parameter.empty
    shown_values = [(n, k, empty if d is None else eval(ast.unparse(d), {}, namespace)) for n, k, d in shown]
    actual = [(p.name, p.kind.name, p.default) for p in inspect.signature(code).parameters.values()]
    return None if shown_values == actual else f"shown {shown_values}\nthe code's {actual}"


def bindings(text: str) -> tuple[set[str], set[str]]:
    """(the names a block binds at its top level, the names it uses without binding them)."""
    top = symtable.symtable(text, "block", "exec")
    bound = {
        s.get_name() for s in top.get_symbols() if s.is_assigned() or s.is_imported() or s.is_namespace()
    }
    used: set[str] = set()

    def walk(table: symtable.SymbolTable) -> None:
        used.update(
            s.get_name() for s in table.get_symbols() if s.is_referenced() and (table is top or s.is_global())
        )
        for child in table.get_children():
            walk(child)

    walk(top)
    return bound, used - bound - set(dir(builtins))


def continued(blocks: list[PythonBlock], index: int) -> list[PythonBlock]:
    """The page's earlier blocks a block continues: those that bind what it uses, nearest first
    (as a reader typing them into one interpreter), each with what it continues in turn."""
    _, needed = bindings(blocks[index].text)
    chosen: list[PythonBlock] = []
    for earlier in reversed(blocks[:index]):
        bound, uses = bindings(earlier.text) if signature_of(earlier.text) is None else (set(), set())
        if needed & bound:
            chosen.insert(0, earlier)
            needed = (needed - bound) | uses
    assert not needed, (
        f"{blocks[index].where} uses {sorted(needed)}, which no earlier block of its page binds"
    )
    return chosen


def written(command: str) -> str | None:
    """The output a command writes: its --output, or (make demo) its Makefile recipe's."""
    if re.sub(r"\s+#.*$", "", command) == "make demo":
        command = re.search(r"^demo:.*\n\t(.*)", (ROOT / "Makefile").read_text(encoding="utf-8"), re.M).group(
            1
        )
    found = re.search(r"--output[= ](\S+)", command)
    return found.group(1).rstrip("/") if found else None


SHOWN_OUTPUTS = {written(c) for block in ALL_BLOCKS for c in block.commands} - {None}


def outputs_read(text: str, known: set[str]) -> set[str]:
    """The outputs the block's strings name: the output itself or a path inside it."""
    found = set()
    for node in ast.walk(ast.parse(text)):
        if isinstance(node, ast.Constant) and isinstance(node.value, str):
            inside = [o for o in known if node.value == o or node.value.startswith(o + "/")]
            found.update(sorted(inside, key=len)[-1:])
    return found


def mentions(command: str, path: str) -> bool:
    return re.search(rf"(?<![\w./-]){re.escape(path)}(?![\w.-])", command) is not None


def commands_for(page: str, blocks: list[PythonBlock]) -> list[str]:
    """What makes the outputs the page's blocks read, in the page's order (see above)."""
    shown = [(b.line, c) for b in ALL_BLOCKS if b.page == page for c in b.commands]
    known = SHOWN_OUTPUTS | {path for where, path in FIXTURES if where == page}
    fixtures, chosen = [], set()
    for path in sorted({p for block in blocks for p in outputs_read(block.text, known)}):
        readers = [block.line for block in blocks if path in outputs_read(block.text, known)]
        if (page, path) in FIXTURES:
            fixtures += [FIXTURES[page, path]] if FIXTURES[page, path] else []
            continue
        writers = [i for i, (_, command) in enumerate(shown) if written(command) == path]
        assert writers, f"{page}:{readers[0]} reads {path}, which no command of the page makes"
        first = ([i for i in writers if shown[i][0] < readers[0]] or writers)[-1]
        chosen.add(first)
        chosen.update(
            i
            for i in range(first + 1, len(shown))
            if shown[i][0] < max(readers) and mentions(shown[i][1], path) and kind(shown[i][1]) == "run"
        )
    last = max(chosen, default=-1)
    exports = {i for i, (_, c) in enumerate(shown[:last]) if c.startswith("export ") and kind(c) == "shell"}
    return fixtures + [shown[i][1] for i in sorted(chosen | exports)]


def extras(text: str) -> list[str]:
    """The optional extras' modules the block imports."""
    found = []
    for node in ast.walk(ast.parse(text)):
        names = [a.name for a in node.names] if isinstance(node, ast.Import) else []
        names += [node.module] if isinstance(node, ast.ImportFrom) and node.module else []
        found += [name.split(".")[0] for name in names if name.split(".")[0] in OPTIONAL]
    return found


def missing_extra(text: str) -> str | None:
    """Why a block cannot run here: it imports an optional extra's module that is not installed."""
    missing = [name for name in extras(text) if importlib.util.find_spec(name) is None]
    return f"{OPTIONAL[missing[0]]} is not installed" if missing else None


def run_python(text: str, folder: Path) -> subprocess.CompletedProcess:
    return subprocess.run(
        [str(folder / ".venv" / "bin" / "python"), "-"],
        input=text,
        cwd=folder,
        env=environment(),
        capture_output=True,
        text=True,
        timeout=300,
    )


def test_every_marker_sits_on_a_python_block_and_every_example_names_its_checks():
    notes = {(b.page, b.line - 1) for page in PAGES for b in python_blocks(page)}
    for page in PAGES:
        rel = str(page.relative_to(ROOT))
        for number, line in enumerate(page.read_text(encoding="utf-8").split("\n"), 1):
            if re.match(r"<!-- (example|not run):", line):
                assert (rel, number) in notes, (
                    f"{rel}:{number}: {line} is not the line above a ```python block"
                )
    named = [
        EXAMPLE.fullmatch(b.note).group(1)
        for p in PAGES
        for b in python_blocks(p)
        if EXAMPLE.fullmatch(b.note)
    ]
    assert sorted(named) == sorted(set(named)) == sorted(CHECKS), (named, sorted(CHECKS))


@pytest.mark.parametrize(
    "shown",
    [
        'beam_tfrecord.iter_examples(output: str, split: str = "validation") -> Iterator[dict]',
        "beam_tfrecord.class_names(output: str) -> list[str] | None",
        "beam_tfrecord.complete_shards(output: str, split: str) -> dict[str, list[str]]",
        "beam_tfrecord.decode_image(encoded: bytes, *, channels: int = 3, image_size=None)",
        "class beam_tfrecord.IncompleteOutput(KeyError)",
    ],
)
def test_the_signature_check_catches_a_planted_mismatch(shown):
    assert signature_mismatch(signature_of(shown), shown)


def python_pages() -> list:
    """The pages with a ```python block, those that import an optional extra marked with it
    (`make test-torch` runs them: `make test` installs no extra)."""
    found = []
    for page in PAGES:
        blocks = python_blocks(page)
        if blocks:
            needs = {name for b in blocks if signature_of(b.text) is None for name in extras(b.text)}
            marks = [pytest.mark.torch] if needs & {"torch", "torchvision", "timm"} else []
            found.append(pytest.param(page, marks=marks, id=str(page.relative_to(ROOT))))
    return found


@pytest.mark.parametrize("page", python_pages())
def test_every_python_block_runs_as_written(page, tmp_path, request):
    blocks = python_blocks(page)
    failed, skipped, runnable = [], [], []
    for block in blocks:
        name = signature_of(block.text)
        if name is not None:
            mismatch = signature_mismatch(name, block.text)
            if mismatch:
                failed.append(f"{block.where}: the signature of {name} is not the code's:\n{mismatch}")
        elif NOT_RUN.fullmatch(block.note):
            skipped.append(f"{block.where}: {NOT_RUN.fullmatch(block.note).group(1)}")
        elif missing_extra(block.text):
            skipped.append(f"{block.where}: {missing_extra(block.text)}")
        else:
            ast.parse(block.text)  # a block that does not parse and shows no signature fails here
            runnable.append(block)
    code = [b for b in blocks if signature_of(b.text) is None]
    sessions = [(block, continued(code, code.index(block))) for block in runnable]
    for block, earlier in sessions:
        if not set(earlier) <= set(runnable):
            skipped.append(f"{block.where}: it continues a block that does not run here")
    sessions = [(block, earlier) for block, earlier in sessions if set(earlier) <= set(runnable)]
    rel = str(page.relative_to(ROOT))
    commands = commands_for(rel, [block for block, _ in sessions])
    text = "\n".join([*commands, *(block.text for block, _ in sessions)])
    weights = request.getfixturevalue("efficientnet_weights") if any(p in text for p in REWRITES) else None
    make_inputs(text, tmp_path, weights or tmp_path)
    script = []
    for command in commands:
        for old, new in REWRITES.items():
            command = command.replace(old, new)
        if re.sub(r"\s+#.*$", "", command) == "make demo":  # its recipe, with this folder's .venv
            command = f"make -s -f {shlex.quote(str(ROOT / 'Makefile'))} demo VENV=.venv"
        script.append(command)
    if script:
        run_script(script, tmp_path)
    separator = "-- the block's own output --"
    for block, earlier in sessions:
        marker = EXAMPLE.fullmatch(block.note)
        prefix = "".join(b.text for b in earlier) + (f"print({separator!r})\n" if earlier else "")
        done = run_python(prefix + block.text + (CHECKS[marker.group(1)] if marker else ""), tmp_path)
        if done.returncode != 0:
            failed.append(f"{block.where}\n{done.stdout[-2000:]}\n{done.stderr[-3000:]}")
        elif block.prints is not None and done.stdout.split(separator + "\n")[-1] != block.prints:
            failed.append(f"{block.where} printed\n{done.stdout}\nnot what its page shows\n{block.prints}")
    assert not failed, "\n\n".join(failed)
    if skipped and not sessions:
        pytest.skip("; ".join(skipped))
