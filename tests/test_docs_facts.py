"""One truth per fact: what the README and the docs/ pages say of a record's fields, an output's
files, the options, the public API and the extras is compared here with the declarations it comes
from (keys.py and the readers, names.py and a real run, the option declarations, `__all__`,
setup.py), so a page that drifts from them fails by name. Each test guards one kind of
contradiction the pages once held: a field named for bytes the reader decodes, a file list that
leaves files out, a setting with two names, an API table short of `__all__`, an example that
imports a private module, pictures written into the dataset, a claim to delete by hand that the
next run judges by asking the runner, two pages one letter apart, an extra the install page omits.
"""

from __future__ import annotations

import ast
import io
import re
import shlex
from pathlib import Path

import numpy as np
import pytest
from conftest import convert
from PIL import Image

import beam_tfrecord
from beam_tfrecord import names
from beam_tfrecord.keys import TABLES, RecordKey, RecordLayout
from beam_tfrecord.labels import KINDS
from beam_tfrecord.labels.objects.reading import DETECTION_KEYS
from beam_tfrecord.read.examples import KEYS, PIXEL_KEYS, SEGMENTATION_KEYS
from pipelines.options import option_fields

ROOT = Path(__file__).resolve().parent.parent
DOCS = ROOT / "docs"
PAGES = [ROOT / "README.md", *sorted(DOCS.glob("*.md"))]
TICKED = re.compile(r"`([^`]+)`")


def _rel(page: Path) -> str:
    return str(page.relative_to(ROOT))


def blocks(page: Path) -> list[tuple[str, int, str]]:
    """The page's fenced blocks: (language, first line, text)."""
    found, lines, fence, start = [], page.read_text(encoding="utf-8").split("\n"), None, 0
    for number, line in enumerate(lines, 1):
        opening = re.match(r"^```(\w*)\s*$", line)
        if fence is None and opening:
            fence, start = opening.group(1), number
        elif fence is not None and line.startswith("```"):
            found.append((fence, start + 1, "\n".join(lines[start : number - 1])))
            fence = None
    return found


def prose(page: Path) -> list[str]:
    """The page's paragraphs and list items outside fenced blocks, each joined on one line."""
    text = re.sub(r"^```.*?^```", "", page.read_text(encoding="utf-8"), flags=re.DOTALL | re.MULTILINE)
    parts = re.split(r"\n\s*\n|\n(?=\s*[-*] |\s*\d+\. )", text)
    return [" ".join(part.split()) for part in parts if part.strip()]


def file_lists(page: Path) -> list[str]:
    """The page's bulleted lists of files (every item starts with a name in backticks), outside
    fenced blocks, each list joined on one line."""
    text = re.sub(r"^```.*?^```", "", page.read_text(encoding="utf-8"), flags=re.DOTALL | re.MULTILINE)
    found, current, items = [], [], []
    for line in [*text.split("\n"), ""]:
        if re.match(r"^[-*] ", line):
            current.append(line)
            items.append(line[2:])
        elif current and line.startswith("  ") and line.strip():
            current.append(line)
        elif current:
            if all(item.startswith("`") for item in items):
                found.append(" ".join(" ".join(current).split()))
            current, items = [], []
    return found


def tables(page: Path, under: str | None = None) -> list[tuple[list[str], list[list[str]]]]:
    """The page's Markdown tables (header cells, rows of cells), those after heading `under` only."""
    text = page.read_text(encoding="utf-8")
    if under is not None:
        text = text[text.index(under) :]
    found: list[tuple[list[str], list[list[str]]]] = []
    rows: list[list[str]] = []
    for line in [*text.split("\n"), ""]:
        if line.startswith("|"):
            rows.append([cell.strip() for cell in line.strip().strip("|").split("|")])
        elif rows:
            if len(rows) > 2:
                found.append((rows[0], rows[2:]))
            rows = []
    return found


# ---- record fields: output-files.md's key tables and reading.md's reader fields -------------------


def _declared_keys(schema: str) -> dict[str, RecordKey]:
    table = TABLES[schema]
    found = [*table.image, *(k for group in table.groups.values() for k in group)]
    found += [
        k for k in (table.label, table.label_text, table.pixel_dtype, table.pixel_additional) if k is not None
    ]
    found += table.pixel_array
    return {key.key: key for key in found}


def _sample(key: RecordKey) -> object:
    if key.dtype == "bytes" and not key.text:
        png = io.BytesIO()
        Image.fromarray(np.zeros((2, 3), dtype=np.uint8)).save(png, format="PNG")
        value: object = png.getvalue()
    else:
        value = "x" if key.text else 0
    return [value] if key.ragged else value


def reader_names() -> dict[str, set[str]]:
    """Stored key -> the names `iter_examples` gives its stored value under, one per key group
    that stores it: the declared name, unless a kind's reader puts a decoded value there and moves
    the stored bytes (a class mask's `mask` decoded, `mask_png` its PNG)."""
    result: dict[str, set[str]] = {}
    for key in _declared_keys("tfds").values():
        result.setdefault(key.key, set()).add(key.name)
    for group, keys in TABLES["tfds"].groups.items():
        for key in keys:
            result[key.key].discard(key.name)
            record = {k.name: _sample(k) for k in keys}
            stored = record[key.name]
            layout = RecordLayout("tfds", labeled=False, groups=(group,))
            # The kind whose records hold the group; a group a run's setting picks (16-bit class
            # masks), which no kind names without one, is tried with each.
            holders = [kind for kind in KINDS.values() if group in kind.key_groups(None)]
            for kind in holders or KINDS.values():
                try:
                    kind.numpy_fields(record, layout)  # type: ignore[arg-type]
                except (KeyError, TypeError, ValueError, IndexError, AttributeError):
                    continue  # a kind that needs other keys than this group's
            moved = [name for name, value in record.items() if value is stored and name != key.name]
            result[key.key].add(moved[0] if record.get(key.name) is not stored and moved else key.name)
    return result


def test_the_class_mask_reader_moves_the_png_to_mask_png():
    """The rule reader_names() finds, stated once by hand so that a change to it is seen."""
    assert "mask_png" in reader_names()["image/segmentation/class/encoded"]
    assert "mask" not in reader_names()["image/segmentation/class/encoded"]
    assert "object_mask" in reader_names()["image/object/mask"]


def test_output_files_key_tables_are_the_declared_keys_and_the_readers_names():
    page = DOCS / "output-files.md"
    tfds, simple, names_by_key = _declared_keys("tfds"), _declared_keys("simple"), reader_names()
    checked = 0
    for header, rows in tables(page, under="## Record keys"):
        columns = [re.sub(r"`", "", cell) for cell in header]
        if "type" not in columns or "name" not in columns:
            continue
        stored = columns.index("tfds key") if "tfds key" in columns else columns.index("key")
        for row in rows:
            keys = [k for k in TICKED.findall(row[stored]) if "/" in k and "NAME" not in k]
            for key in keys:
                assert key in tfds, f"{_rel(page)}: {key} is no declared tfds key (beam_tfrecord/keys.py)"
            if "simple key" in columns:
                for key in TICKED.findall(row[columns.index("simple key")]):
                    if "NAME" not in key:
                        assert key in simple, f"{_rel(page)}: {key} is no declared simple key"
            name = TICKED.findall(row[columns.index("name")])
            if not keys or not name or name[0] in ("NAME",):
                continue
            expected = names_by_key[keys[0]]
            assert name[0] in expected, (
                f"{_rel(page)}: {keys[0]} is read back as {sorted(expected)} (iter_examples), the page "
                f"says `{name[0]}`"
            )
            checked += 1
    assert checked >= 20, checked


def test_reading_md_names_only_the_readers_fields():
    fields = {
        *KEYS,
        *PIXEL_KEYS,
        *SEGMENTATION_KEYS,
        *DETECTION_KEYS,
        *(k.name for k in _declared_keys("tfds").values()),
    }
    for header, rows in tables(DOCS / "reading.md"):
        if not any("iter_examples" in cell for cell in header):
            continue
        column = next(i for i, cell in enumerate(header) if "iter_examples" in cell)
        for row in rows:
            for name in TICKED.findall(row[column]):
                if re.fullmatch(r"[a-z_]+", name) and name not in ("xyxy",):
                    assert name in fields, f"docs/reading.md: iter_examples gives no field `{name}`"


# ---- output files: every list of an output's files names every file a run writes ----------------


@pytest.fixture(scope="module")
def written(tmp_path_factory) -> set[str]:
    """Every file a plain labeled run writes beside its shards (the bundled sample converted)."""
    out = tmp_path_factory.mktemp("facts") / "out"
    assert convert(ROOT / "sample" / "shapes", out) == 0
    found = {p.relative_to(out).as_posix() for p in out.rglob("*") if p.is_file()}
    return {f for f in found if not names.is_shard_name(f) and not names.is_index_name(f)}


def test_a_runs_files_are_declared_in_names(written):
    declared = {*names.METADATA_FILES, names.INDEX_FILE}
    assert written <= declared, written - declared


def test_every_list_of_an_outputs_files_names_them_all(written):
    """A folder drawn in a plain block, or a sentence naming rejects.jsonl, changes.jsonl and
    summary.json together, is a list of what an output holds: it names every file a run writes."""
    lists = []
    for page in PAGES:
        for language, line, text in blocks(page):
            if not language and re.match(r"^\S+/\s*$", text.split("\n")[0]) and names.SUMMARY_FILE in text:
                lists.append((f"{_rel(page)}:{line}", text))
        for paragraph in [*prose(page), *file_lists(page)]:
            if paragraph.startswith("|"):
                continue  # a table names files row by row, each with what it holds
            if all(
                f"`{n}`" in paragraph for n in (names.REJECTS_FILE, names.CHANGES_FILE, names.SUMMARY_FILE)
            ):
                lists.append((f"{_rel(page)}: '{paragraph[:60]}...'", paragraph))
    assert lists
    for where, text in lists:
        missing = sorted(f for f in written if f not in text)
        assert not missing, f"{where} lists an output's files without {missing}"


# ---- options: one name per setting ------------------------------------------------------------------


def test_each_option_is_named_after_its_field():
    """A setting has one name: the option is the field's name, or the field's name after its
    nested config's (`feature_pooling` for features.pooling), or the nested config's own name for
    its main field (`--annotations` for annotations.format); `no_` for a negated flag."""
    for found in option_fields():
        option, field = found.field.option, found.field.name
        parent = found.path.split(".")[-2]
        assert option is not None
        allowed = option in (field, f"no_{field}", parent) or option.endswith(f"_{field}")
        assert allowed, f"--{option} sets {found.path}: one setting, two names"


# ---- the public API ---------------------------------------------------------------------------------


def test_api_md_lists_every_public_name():
    header, rows = tables(DOCS / "api.md")[0]
    assert header[0] == "name"
    listed = [TICKED.findall(row[0])[0] for row in rows]
    assert sorted(listed) == sorted(beam_tfrecord.__all__)


def _python_blocks() -> list[tuple[str, str]]:
    return [
        (f"{_rel(page)}:{line}", text)
        for page in PAGES
        for language, line, text in blocks(page)
        if language in ("python", "py")
    ]


def test_examples_import_public_names_only():
    """Every Python block imports `beam_tfrecord` itself (or names from its `__all__`) and uses
    only those names: no module inside the package, which api.md calls private."""
    public = set(beam_tfrecord.__all__)
    for where, text in _python_blocks():
        try:
            tree = ast.parse(text)
        except SyntaxError:  # api.md's signatures: no statements, so nothing imported
            assert "import" not in text, f"{where}: a block that imports does not parse"
            continue
        for node in ast.walk(tree):
            if isinstance(node, ast.ImportFrom) and (node.module or "").startswith("beam_tfrecord"):
                assert node.module == "beam_tfrecord", f"{where}: imports from {node.module}"
                for alias in node.names:
                    assert alias.name in public, f"{where}: {alias.name} is not in beam_tfrecord.__all__"
            elif isinstance(node, ast.Import):
                for alias in node.names:
                    assert not alias.name.startswith("beam_tfrecord."), f"{where}: imports {alias.name}"
            elif (
                isinstance(node, ast.Attribute)
                and isinstance(node.value, ast.Name)
                and node.value.id == "beam_tfrecord"
            ):
                assert node.attr in public, f"{where}: beam_tfrecord.{node.attr} is not a public name"


# ---- commands: pictures beside the output, never in it ---------------------------------------------


def test_inspect_never_draws_into_the_output():
    commands = [
        (f"{_rel(page)}:{line}", command)
        for page in PAGES
        for language, line, text in blocks(page)
        if language in ("sh", "bash", "console")
        for command in re.sub(r"\\\n\s*", " ", text).split("\n")
        if "pipelines.inspect" in command
    ]
    assert commands
    for where, command in commands:
        argv = shlex.split(command.split("#")[0])
        tail = argv[argv.index("pipelines.inspect") + 1 :]
        positional = [
            a for i, a in enumerate(tail) if not a.startswith("-") and not tail[i - 1].startswith("--")
        ]
        pictures = next(
            (tail[i + 1] for i, a in enumerate(tail) if a in ("--pictures", "--pictures_dir")), None
        )
        if pictures is None or not positional:
            continue
        output = positional[0].rstrip("/")
        assert pictures.rstrip("/") != output and not pictures.startswith(output + "/"), (
            f"{where}: pictures into the output {output}, which inspect only reads"
        )


# ---- claims: a detached job's claim is judged by asking its runner ---------------------------------


def test_no_page_has_a_detached_claim_deleted_where_the_runner_can_be_asked():
    for page in PAGES:
        for paragraph in prose(page):
            if re.search(r"\bdelete\b", paragraph, re.IGNORECASE) and "claim" in paragraph:
                assert "cannot be asked" in paragraph, (
                    f"{_rel(page)}: '{paragraph[:80]}...' deletes a claim by hand; the next run asks "
                    "the job's runner (beam_tfrecord/output/job_state.py) and does that only where it "
                    "cannot be asked"
                )


# ---- pages: no two names one letter apart ----------------------------------------------------------


def _one_edit_apart(a: str, b: str) -> bool:
    if abs(len(a) - len(b)) > 1 or a == b:
        return False
    if len(a) == len(b):
        return sum(x != y for x, y in zip(a, b, strict=True)) == 1
    short, long = sorted((a, b), key=len)
    return any(long[:i] + long[i + 1 :] == short for i in range(len(long)))


def test_no_two_pages_are_named_one_letter_apart():
    stems = sorted(p.stem for p in DOCS.glob("*.md"))
    close = [(a, b) for i, a in enumerate(stems) for b in stems[i + 1 :] if _one_edit_apart(a, b)]
    assert not close, f"pages easily confused: {close}"


# ---- installs: every extra on the install page -----------------------------------------------------


def test_install_md_lists_every_extra_with_its_pins():
    tree = ast.parse((ROOT / "setup.py").read_text(encoding="utf-8"))
    extras = next(
        kw.value
        for node in ast.walk(tree)
        if isinstance(node, ast.Call)
        for kw in node.keywords
        if kw.arg == "extras_require"
    )
    assert isinstance(extras, ast.Dict)
    page = (DOCS / "install.md").read_text(encoding="utf-8")
    for key, value in zip(extras.keys, extras.values, strict=True):
        assert isinstance(key, ast.Constant) and isinstance(value, ast.Call)
        pins = value.args[0]
        assert isinstance(pins, ast.Constant)
        assert f"| `{key.value}` |" in page, f"docs/install.md's extras table has no `{key.value}`"
        assert f"'.[{key.value}]'" in page, f"docs/install.md does not show pip install '.[{key.value}]'"
        assert f"`{pins.value}`" in page
        assert (ROOT / pins.value).exists()
