"""Every reason code is declared once, in beam_tfrecord/reasons.py, and the code proves it: read
the library's and the command's source, and every `reasons.X` it uses must be declared, every
declared reason must be used by some code that emits it, and no reason is written as a string
where a reason goes (the argument of `Reject`, `RejectLine`, `ImageProblem`, ... or a
`(reason, detail)` pair). docs/reasons.md is the registry's rendering, byte for byte."""

from __future__ import annotations

import ast
import functools
import pathlib
import re
from dataclasses import dataclass, field

import pytest

import beam_tfrecord
from beam_tfrecord import reasons
from beam_tfrecord.reasons import Reason

PACKAGE = pathlib.Path(beam_tfrecord.__file__).parent
ROOT = PACKAGE.parent
REGISTRY = PACKAGE / "reasons.py"
SOURCES = sorted(p for p in [*PACKAGE.rglob("*.py"), *(ROOT / "pipelines").rglob("*.py")] if p != REGISTRY)
DECLARED = {name: value for name, value in vars(reasons).items() if isinstance(value, Reason)}
CODES = {reason.code for reason in DECLARED.values()}
# Whatever takes a reason code, and the position of that argument (or `reason=`).
SINKS = {
    "Reject": 0,
    "RejectLine": 1,
    "ImageProblem": 1,
    "ObjectNote": 1,
    "UnmatchedEntry": 2,
    "DroppedObject": 1,
    "DroppedObjectLine": 1,
    "_Rejected": 0,  # the annotation parsers' (reason, detail) exception
    "drop": 0,  # placement's DroppedObject maker
}
SNAKE_CASE = re.compile(r"[a-z]+(?:_[a-z]+)+")
# Strings that spell a reason's code but are something else: (file, string, what it is).
NOT_REASONS = {("beam_tfrecord/write/tally.py", "objects_dropped")}  # the Tally field of that name


@dataclass
class Found:
    """What one scan of source files found."""

    used: dict[str, list[str]] = field(default_factory=dict)  # constant name -> where
    literals: list[str] = field(default_factory=list)  # "file:line: what", one per string reason


def _registry_aliases(tree: ast.Module) -> tuple[set[str], set[str]]:
    """The names a file binds to the registry module, and the constants it imports by name."""
    modules, constants = set(), set()
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.module == "beam_tfrecord":
            modules |= {a.asname or a.name for a in node.names if a.name == "reasons"}
        elif isinstance(node, ast.ImportFrom) and node.module == "beam_tfrecord.reasons":
            constants |= {a.name for a in node.names}
        elif isinstance(node, ast.Import):
            modules |= {a.asname for a in node.names if a.name == "beam_tfrecord.reasons" and a.asname}
    return modules, constants


def _prose(tree: ast.Module) -> set[int]:
    """ids of the string constants that are not values: docstrings (they may name a code in
    prose) and `__all__`'s names."""
    found = set()
    for node in ast.walk(tree):
        body = getattr(node, "body", None)
        if isinstance(body, list) and body and isinstance(body[0], ast.Expr):
            found.add(id(body[0].value))
        if isinstance(node, ast.Assign) and any(getattr(t, "id", "") == "__all__" for t in node.targets):
            found |= {id(element) for element in ast.walk(node.value)}
    return found


def _callee(call: ast.Call) -> str | None:
    func = call.func
    return func.id if isinstance(func, ast.Name) else func.attr if isinstance(func, ast.Attribute) else None


def _reason_argument(call: ast.Call) -> ast.expr | None:
    position = SINKS.get(_callee(call) or "")
    if position is None:
        return None
    for keyword in call.keywords:
        if keyword.arg == "reason":
            return keyword.value
    return call.args[position] if len(call.args) > position else None


def _is_string(node: ast.expr | None) -> bool:
    return isinstance(node, ast.JoinedStr) or (isinstance(node, ast.Constant) and isinstance(node.value, str))


def _is_code(node: ast.expr) -> bool:
    """A string that reads as a reason code: a declared one, or any snake_case word."""
    if not (isinstance(node, ast.Constant) and isinstance(node.value, str)):
        return False
    return node.value in CODES or SNAKE_CASE.fullmatch(node.value) is not None


def _compares_a_reason_to_a_string(node: ast.Compare) -> bool:
    sides = [node.left, *node.comparators]
    reason = any(isinstance(side, ast.Attribute) and side.attr == "reason" for side in sides)
    return reason and any(_is_string(side) for side in sides)


def _spelled_out(text: str, file: str) -> bool:
    """A string that is a declared code, distinctive enough (snake_case) to be nothing else; plain
    words (`format`, `mode`, `empty`) are option names and keys too."""
    return "_" in text and text in CODES and (file, text) not in NOT_REASONS


def _is_detail(node: ast.expr) -> bool:
    """A value that reads as a `(reason, detail)` pair's detail: words, an f-string or a name."""
    if isinstance(node, ast.Constant):
        return isinstance(node.value, str) and " " in node.value
    return isinstance(node, (ast.JoinedStr, ast.Name))


def scan(paths: list[pathlib.Path]) -> Found:
    """Every use of the registry, and every reason written as a string, in these files."""
    found = Found()
    for path in paths:
        tree = ast.parse(path.read_text(encoding="utf-8"), str(path))
        modules, constants = _registry_aliases(tree)
        prose = _prose(tree)
        name = str(path.relative_to(ROOT) if path.is_relative_to(ROOT) else path.name)
        for node in ast.walk(tree):
            where = f"{name}:{getattr(node, 'lineno', 0)}"
            if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name):
                if node.value.id in modules and node.attr.isupper():
                    found.used.setdefault(node.attr, []).append(where)
            elif isinstance(node, ast.Name) and node.id in constants:
                found.used.setdefault(node.id, []).append(where)
            elif isinstance(node, ast.Call) and _is_string(_reason_argument(node)):
                found.literals.append(f"{where}: {_callee(node)}() given the reason as a string")
            elif isinstance(node, ast.Call) and _callee(node) in ("append", "add") and node.args:
                if _is_code(node.args[0]) and node.args[0].value in CODES:
                    found.literals.append(
                        f"{where}: {_callee(node)}({node.args[0].value!r}) adds a reason as a string"
                    )
            elif isinstance(node, ast.Compare) and _compares_a_reason_to_a_string(node):
                found.literals.append(f"{where}: a `.reason` compared with a string")
            elif isinstance(node, ast.Tuple) and len(node.elts) == 2 and _is_detail(node.elts[1]):
                first = node.elts[0]
                if _is_code(first):
                    found.literals.append(f"{where}: ({first.value!r}, detail) names a reason as a string")
            elif _is_code(node) and id(node) not in prose and _spelled_out(node.value, name):
                found.literals.append(f"{where}: {node.value!r} written out, not taken from reasons")
    return found


@functools.cache
def scanned() -> Found:
    """The library scanned once, by the first test that asks (not at collection, in every worker)."""
    return scan(SOURCES)


def test_every_reason_the_code_emits_is_declared_in_the_registry():
    unknown = {name: where for name, where in scanned().used.items() if name not in vars(reasons)}
    assert unknown == {}
    assert scanned().literals == []


def test_every_declared_reason_is_emitted_somewhere():
    """Used by name in the library, or, for a record-level change an object note makes, emitted
    through the notes' declarations (`reasons.record_changes`, which images.inputs applies)."""
    through_notes = {name for name, r in DECLARED.items() if r.code in reasons.record_changes().values()}
    assert sorted(set(DECLARED) - set(scanned().used) - through_notes) == []


def test_each_code_is_declared_once_with_its_kind_and_meaning():
    assert len(CODES) == len(DECLARED)
    assert {reason.kind for reason in DECLARED.values()} == set(reasons.KINDS)
    for reason in DECLARED.values():
        assert re.fullmatch(r"[a-z]+(_[a-z]+)*", reason.code), reason
        assert reason.meaning and "\n" not in reason.meaning and "|" not in reason.meaning, reason
    with pytest.raises(ValueError, match="declared twice"):
        reasons._reason("corrupt", "reject", "again")


def test_the_checks_catch_an_undeclared_reason_a_string_reason_and_an_unemitted_one(tmp_path):
    probe = tmp_path / "probe.py"
    probe.write_text(
        "from beam_tfrecord import reasons\n"
        "def f(detail):\n"
        "    yield reasons.NOT_DECLARED\n"
        '    raise Reject("corrupt", detail)\n'
        '    yield RejectLine("a.jpg", reason=f"{detail}_failed", detail=detail)\n'
        '    yield ("brand_new_reason", f"{detail}")\n'
        '    changes.append("boxes_clipped")\n'
        '    found.add("cmyk")\n'
        '    return [r for r in rejects if r.reason != "skipped"]\n'
    )
    found = scan([probe])
    assert set(found.used) == {"NOT_DECLARED"} and "NOT_DECLARED" not in vars(reasons)
    flagged = sorted({int(line.split(": ", 1)[0].split(":")[1]) for line in found.literals})
    assert flagged == [4, 5, 6, 7, 8, 9]
    # Without the modules that emit the decoders' rejects (Pillow's formats, TIFF and DICOM at full depth),
    # their reasons are emitted nowhere.
    without = scan([p for p in SOURCES if p.parent.name != "images"])
    assert {"EMPTY", "TRUNCATED", "NOT_AN_IMAGE"} <= set(DECLARED) - set(without.used)


def test_change_reasons_keep_the_order_the_output_files_list_them_in():
    """changes.jsonl's `reasons` and summary.json's `changes_per_reason` follow this order."""
    assert reasons.codes("change")[:4] == ("format", "format_forced", "wrong_extension", "cmyk")
    assert reasons.codes("change")[-1] == "objects_dropped"
    assert {reason.kind for reason in reasons.RUN_WIDE} == {"change"}


def test_each_object_note_names_the_record_change_it_makes():
    """One object's note (singular: `mask_malformed`) and its record's change (plural:
    `masks_dropped`) are different reasons, and the docs say which makes which."""
    changes = reasons.record_changes()
    assert set(changes) == set(reasons.codes("object_note"))
    for note, change in changes.items():
        assert reasons.get(change).kind == "change"
        assert reasons.get(note).meaning.endswith(f"`{change}`"), note


def test_counters_are_named_from_the_registry():
    assert reasons.counter_name("corrupt") == "rejected_corrupt"
    assert reasons.counter_name("skipped") == "rejected_skipped"
    assert reasons.counter_name("cmyk") == "changed_cmyk"
    with pytest.raises(KeyError):
        reasons.counter_name("not_a_reason")
    with pytest.raises(ValueError, match="drop reason"):
        reasons.counter_name("zero_area")


def test_the_docs_page_is_the_registry_rendered():
    """Regenerate with `python -m beam_tfrecord.reasons > docs/reasons.md`."""
    page = (ROOT / "docs" / "reasons.md").read_text(encoding="utf-8")
    assert page == reasons.markdown()
    for kind in reasons.KINDS:
        assert f'<a id="{kind}"></a>' in page
        for code in reasons.codes(kind):
            assert f"| `{code}` |" in page


def test_the_docs_point_at_the_reason_tables_instead_of_repeating_them():
    pages = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
    text = "\n".join(p.read_text(encoding="utf-8") for p in pages if p.name != "reasons.md")
    for kind in ("reject", "change", "drop", "unmatched"):
        assert f"reasons.md#{kind})" in text, kind
    for table in ("| `corrupt` |", "| `cmyk` |", "| `zero_area` |", "| `missing_image` |"):
        assert table not in text
