"""The shape of the library, guarded: the stages run plan -> images -> features -> write -> output ->
read, and a stage imports only the stages before it (read may use write's schema; write may never
use read; the output room, the output folder's lifecycle, may use write but write never uses it).
Below every stage sits summary.json's types (`summary`, which every stage reads or writes and
which imports only the kinds of label and the shared modules, never a stage's config); below it
the kinds of label (`labels/`, which any stage may import and which imports only the shared
modules), and below those the shared contracts (elements, names, keys, config_base, reasons) and
the cross-cutting helpers, which import neither a kind nor a stage; nothing in the library
imports the command (`pipelines`). Imports inside functions and
under TYPE_CHECKING count too: they are dependencies all the same."""

from __future__ import annotations

import ast
import pathlib

import beam_tfrecord

PACKAGE = pathlib.Path(beam_tfrecord.__file__).parent
STAGES = ("plan", "images", "features", "write", "output", "read")
# Importable from anywhere in the library; they import only each other (and other libraries).
SHARED = (
    "edges",
    "elements",
    "names",
    "keys",
    "config_base",
    "write_failures",
    "gcs",
    "storage",
    "compat",
    "fault_injection",
    "progress",
    "runners",
    "reasons",
    "tasks",
)
# The kinds of label: below every stage, above the shared modules.
LABELS = "labels"
# summary.json's types: below every stage, above the kinds of label (whose sections it holds).
SUMMARY = "summary"
# The assembly on top: the typed settings of a whole run, the composite transform, the DoFns.
ASSEMBLY = ("config", "pipeline", "transforms")


def _imports(path: pathlib.Path) -> set[str]:
    """Every `beam_tfrecord...` or `pipelines...` module a file imports, at any depth."""
    found = set()
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            found |= {alias.name for alias in node.names}
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            found.add(node.module)
            found |= {f"{node.module}.{alias.name}" for alias in node.names}
    return {name for name in found if name.split(".")[0] in ("beam_tfrecord", "pipelines")}


def _part(module: str) -> str | None:
    """The stage, shared module or assembly module a dotted name belongs to (None: the package)."""
    parts = module.split(".")
    if parts[0] == "pipelines":
        return "pipelines"
    return parts[1] if len(parts) > 1 else None


def _allowed(owner: str, target: str) -> bool:
    if target == "pipelines":
        return False
    if owner in ASSEMBLY or target in SHARED:
        return True
    if owner in SHARED:
        return False  # a shared module imports only shared ones (above)
    if target == SUMMARY:
        return owner in STAGES
    if owner == SUMMARY:
        return target == LABELS  # and the shared modules (above), never a stage
    if target == LABELS:
        return owner in STAGES  # (a kind imports other kinds: the same part)
    if owner == LABELS:
        return False  # a kind imports only the shared modules and other kinds
    if owner in STAGES and target in STAGES:
        return STAGES.index(target) <= STAGES.index(owner)
    return False  # a stage importing the assembly


def test_every_part_of_the_library_is_a_stage_a_shared_module_or_the_assembly():
    parts = {p.stem for p in PACKAGE.glob("*.py") if p.stem != "__init__"}
    parts |= {p.parent.name for p in PACKAGE.glob("*/__init__.py")}
    assert parts == set(STAGES) | set(SHARED) | set(ASSEMBLY) | {LABELS, SUMMARY}


def test_no_stage_imports_a_later_one_and_no_contract_imports_a_stage():
    wrong = []
    for path in sorted(PACKAGE.rglob("*.py")):
        relative = path.relative_to(PACKAGE.parent).with_suffix("")
        if relative.parts == ("beam_tfrecord", "__init__"):
            continue  # the package's own lazy front door names every public module
        owner = _part(".".join(relative.parts))
        for module in sorted(_imports(path)):
            target = _part(module)
            if target is not None and target != owner and not _allowed(owner, target):
                wrong.append(f"{relative}: imports {module} ({owner} -> {target})")
    assert not wrong, "\n".join(wrong)


def test_the_guard_would_catch_a_write_module_that_reads(tmp_path):
    """The check itself can fail: a write-stage file importing the reader is named."""
    probe = tmp_path / "probe.py"
    probe.write_text("def f():\n    from beam_tfrecord.read.files import split_files\n")
    (target,) = {_part(m) for m in _imports(probe)} - {None}
    assert target == "read" and not _allowed("write", target)
    assert _allowed("read", "write") and not _allowed("keys", "write") and not _allowed("plan", "config")
    assert _allowed("plan", "labels") and not _allowed("labels", "images") and not _allowed("keys", "labels")


def test_the_guard_would_catch_a_summary_that_reads_a_stage(tmp_path):
    """The check itself can fail: summary.json's types reading a stage's config (the configs are
    the stages', read back from the record by the stage that needs them) are named, as is a kind
    of label or a shared module reading the summary."""
    probe = tmp_path / "probe.py"
    probe.write_text("from beam_tfrecord.write.output_config import ConvertConfig\n")
    (target,) = {_part(m) for m in _imports(probe)} - {None}
    assert target == "write" and not _allowed(SUMMARY, target)
    assert not any(_allowed(SUMMARY, part) for part in ("plan", "read", "output", "pipeline"))
    assert not _allowed(LABELS, SUMMARY) and not _allowed("keys", SUMMARY) and not _allowed("names", SUMMARY)
    assert all(_allowed(stage, SUMMARY) for stage in STAGES) and _allowed("pipeline", SUMMARY)
    assert _allowed(SUMMARY, LABELS) and _allowed(SUMMARY, "keys") and _allowed(SUMMARY, "config_base")


# Local and gs:// paths meet in storage (and gcs, under it): no other module reads a path's text
# for a scheme. A string that only names one (help text, a bucket name's regex) is no test.
PATH_MODULES = ("storage.py", "gcs.py")
_STRING_TESTS = frozenset(
    {
        "startswith",
        "endswith",
        "partition",
        "rpartition",
        "split",
        "rsplit",
        "find",
        "rfind",
        "index",
        "rindex",
    }
)
_COMPARISONS = (ast.In, ast.NotIn, ast.Eq, ast.NotEq)


def _names_a_scheme(node: ast.AST) -> bool:
    """A str constant holding `://`, alone, in a tuple (or list, set) of them, or in an f-string."""
    if isinstance(node, ast.Constant):
        return isinstance(node.value, str) and "://" in node.value
    if isinstance(node, (ast.Tuple, ast.List, ast.Set, ast.JoinedStr)):
        parts = node.elts if not isinstance(node, ast.JoinedStr) else node.values
        return any(_names_a_scheme(part) for part in parts)
    return False


def _scheme_tests(path: pathlib.Path) -> list[str]:
    """`file:line` of each comparison or string-method call in `path` that tests a path for a scheme."""
    found = []
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        compared = isinstance(node, ast.Compare) and any(isinstance(op, _COMPARISONS) for op in node.ops)
        if compared and any(_names_a_scheme(side) for side in (node.left, *node.comparators)):
            found.append(f"{path.name}:{node.lineno}: compares with a scheme")
        called = isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)
        if called and node.func.attr in _STRING_TESTS and any(_names_a_scheme(arg) for arg in node.args):
            found.append(f"{path.name}:{node.lineno}: .{node.func.attr}() with a scheme")
    return found


def test_only_storage_tells_a_local_path_from_a_remote_one():
    """`"://" in path`, `path.startswith("gs://")`, `path.partition("://")`: each is storage's
    question (is_remote, is_gcs, split_scheme), asked there once, never again in another module."""
    found = [
        f"{path.relative_to(PACKAGE.parent)}: {test}"
        for root in (PACKAGE, PACKAGE.parent / "pipelines")
        for path in sorted(root.rglob("*.py"))
        if not (path.parent == PACKAGE and path.name in PATH_MODULES)
        for test in _scheme_tests(path)
    ]
    assert found == [], "\n".join(found)


def test_the_scheme_guard_would_catch_each_way_of_asking(tmp_path):
    """The check itself can fail: every form of the question is named, and a string that only
    names a gs:// path (help text, a regex) is not."""
    probe = tmp_path / "probe.py"
    probe.write_text(
        "def f(path, bucket):\n"
        "    a = '://' in path\n"
        "    b = '://' not in path\n"
        "    c = path[:5] == 'gs://'\n"
        "    d = path.startswith('gs://')\n"
        "    e = path.startswith(('https://', 'http://'))\n"
        "    g = path.partition('://')\n"
        "    h = path.split('://', 1)\n"
        "    i = path.find('://')\n"
        "    j = path.startswith(f'gs://{bucket}/')\n"
        "    return 'local or gs://', r'^gs://[a-z0-9]+$', path.startswith('/')\n"
    )
    lines = [int(found.split(":")[1]) for found in _scheme_tests(probe)]
    assert sorted(lines) == list(range(2, 11))


def test_the_benchmarks_use_only_the_librarys_public_names():
    """A benchmark measures what a user can call: no name with a leading underscore imported from
    beam_tfrecord (a private helper would tie a benchmark to the code's inside, and break it
    silently when that moves)."""
    private = []
    for path in sorted((PACKAGE.parent / "benchmarks").glob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if isinstance(node, ast.ImportFrom) and (node.module or "").startswith("beam_tfrecord"):
                private += [
                    f"{path.name}: {node.module}.{a.name}" for a in node.names if a.name.startswith("_")
                ]
            if (
                isinstance(node, ast.Attribute)
                and node.attr.startswith("_")
                and not node.attr.startswith("__")
            ):
                base = node.value
                if isinstance(base, ast.Name) and base.id in ("beam_tfrecord",):
                    private.append(f"{path.name}: beam_tfrecord.{node.attr}")
    assert private == []


def test_the_library_states_reasons_and_leaves_measurements_to_the_docs():
    """A comment or docstring gives the reason for a choice and points to benchmarks/NOTES.md;
    the figures (X s against Y s, medians of rounds) and issue numbers live there, where they
    are kept current, not in the code, where they go stale."""
    import re

    measurement = re.compile(
        r"medians? of \d|interleaved (rounds|runs)|\d+(\.\d+)? s against \d|\bissue \d+", re.IGNORECASE
    )
    found = [
        f"{path.relative_to(PACKAGE.parent)}:{number}: {line.strip()}"
        for path in sorted(PACKAGE.rglob("*.py"))
        for number, line in enumerate(path.read_text().splitlines(), 1)
        if measurement.search(line)
    ]
    assert found == []


# Where a kind of label, a task or an annotation format may be named: the kinds' own modules, the
# annotation sources (the formats and what they share) and the tasks' declarations. Every other
# module loops over a run's kinds (`labels.of_task`) and asks their declarations.
NAMING_ALLOWED = ("beam_tfrecord/labels/", "beam_tfrecord/plan/sources/", "beam_tfrecord/plan/annotations/")
NAMING_FILES = ("beam_tfrecord/tasks.py",)
# The fields that hold one kind of label's values: a branch on one of them is a branch on a kind.
LABEL_FIELDS = frozenset({
    "captions", "class_mask", "keypoints", "keypoint_names", "skeletons", "pixels", "mask_rule",
    "segmentation", "max_objects",
})  # fmt: skip
# An object's staged row keeps its points column only where it has points: the objects digest
# the file index keeps is made from that text, so older datasets' digests stay comparable.
LABEL_FIELD_BRANCHES_ALLOWED = {("beam_tfrecord/elements.py", "object_row")}


def _library_files() -> list[tuple[str, ast.Module]]:
    root = PACKAGE.parent
    found = []
    for folder in ("beam_tfrecord", "pipelines"):
        for path in sorted((root / folder).rglob("*.py")):
            relative = path.relative_to(root).as_posix()
            found.append((relative, ast.parse(path.read_text(), relative)))
    return found


def _may_name_kinds(relative: str) -> bool:
    return relative.startswith(NAMING_ALLOWED) or relative in NAMING_FILES


def _strings(node: ast.AST) -> set[str]:
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return {node.value}
    if isinstance(node, ast.Tuple | ast.List | ast.Set):
        return set().union(*(_strings(e) for e in node.elts)) if node.elts else set()
    return set()


def task_comparisons(relative: str, tree: ast.Module) -> list[str]:
    """Every comparison with a task's name (`task == "segmentation"`, `in ("detection", ...)`)."""
    from beam_tfrecord.tasks import TASK_NAMES

    return [
        f"{relative}:{node.lineno}"
        for node in ast.walk(tree)
        if isinstance(node, ast.Compare)
        and any(_strings(side) & set(TASK_NAMES) for side in (node.left, *node.comparators))
    ]


def label_field_branches(relative: str, tree: ast.Module) -> list[str]:
    """Every condition (if, a conditional expression, while, and/or, a comprehension's if) that
    reads one kind of label's field (`if fields.captions is not None`)."""
    found = set()

    def visit(node: ast.AST, function: str) -> None:
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
            function = node.name
        tests: list[ast.AST] = []
        if isinstance(node, ast.If | ast.IfExp | ast.While):
            tests = [node.test]
        elif isinstance(node, ast.comprehension):
            tests = list(node.ifs)
        elif isinstance(node, ast.BoolOp):
            tests = list(node.values)
        if (relative, function) not in LABEL_FIELD_BRANCHES_ALLOWED:
            for test in tests:
                fields = {n.attr for n in ast.walk(test) if isinstance(n, ast.Attribute)} & LABEL_FIELDS
                if fields:
                    found.add(f"{relative}:{getattr(test, 'lineno', 0)} {sorted(fields)}")
        for child in ast.iter_child_nodes(node):
            visit(child, function)

    visit(tree, "")
    return sorted(found)


def test_only_the_kinds_the_sources_and_the_tasks_name_a_task_or_branch_on_a_kind_of_label():
    """A new kind of label is a module of labels/ and a line of tasks.py, a new format a module of
    plan/sources/ and a line of its registry: no stage compares a task's name or branches on one
    kind's field, they loop over the run's kinds and ask their declarations."""
    named, branched = [], []
    for relative, tree in _library_files():
        if _may_name_kinds(relative):
            continue
        named += task_comparisons(relative, tree)
        branched += label_field_branches(relative, tree)
    assert named == [] and branched == []


def test_the_kind_guards_would_catch_a_stage_that_names_a_task_or_a_kinds_field():
    probe = ast.parse(
        "def f(plan, fields):\n"
        "    if plan.task == 'captions':\n"
        "        return 1\n"
        "    return 2 if fields.class_mask is not None else 3\n"
    )
    assert task_comparisons("beam_tfrecord/write/probe.py", probe) == ["beam_tfrecord/write/probe.py:2"]
    assert label_field_branches("beam_tfrecord/write/probe.py", probe) == [
        "beam_tfrecord/write/probe.py:4 ['class_mask']"
    ]
    assert _may_name_kinds("beam_tfrecord/labels/objects/placement.py")
    assert not _may_name_kinds("beam_tfrecord/write/summary.py")


def _module_graph() -> dict[str, set[str]]:
    """Every library module -> the library modules it imports (inside functions and under
    TYPE_CHECKING too; `from a import b` is module `a.b` where there is one). The package's own
    lazy front door (`beam_tfrecord/__init__.py`, which names every public module) is left out."""
    root = PACKAGE.parent
    files = {}
    for folder in ("beam_tfrecord", "pipelines"):
        for path in (root / folder).rglob("*.py"):
            name = ".".join(path.relative_to(root).with_suffix("").parts).removesuffix(".__init__")
            files[name] = path
    graph: dict[str, set[str]] = {name: set() for name in files}
    for name, path in files.items():
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            found = []
            if isinstance(node, ast.Import):
                found = [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
                subs = [f"{node.module}.{alias.name}" for alias in node.names]
                found = [s for s in subs if s in files] + ([node.module] if set(subs) - set(files) else [])
            graph[name] |= {f for f in found if f in files and f not in (name, "beam_tfrecord")}
    return graph


def import_circles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The groups of modules that import each other round a circle (Tarjan's strongly connected
    components of more than one module)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    circles: list[list[str]] = []

    def visit(module: str) -> None:
        index[module] = low[module] = len(index)
        stack.append(module)
        for other in sorted(graph[module]):
            if other not in index:
                visit(other)
                low[module] = min(low[module], low[other])
            elif other in stack:
                low[module] = min(low[module], index[other])
        if low[module] == index[module]:
            group = []
            while True:
                other = stack.pop()
                group.append(other)
                if other == module:
                    break
            if len(group) > 1:
                circles.append(sorted(group))

    for module in sorted(graph):
        if module not in index:
            visit(module)
    return circles


def test_no_modules_import_each_other_round_a_circle():
    assert import_circles(_module_graph()) == []


def test_the_circle_guard_would_catch_one():
    graph = {"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}
    assert import_circles(graph) == [["a", "b", "c"]]


# The size one reader can hold: a module past it is two concerns, a function past it two steps
# (docstrings included).
MODULE_LINES = 750
FUNCTION_LINES = 100


def oversized(relative: str, text: str, tree: ast.Module) -> list[str]:
    """The module if it is longer than MODULE_LINES, and each function longer than FUNCTION_LINES."""
    found = []
    if len(text.splitlines()) > MODULE_LINES:
        found.append(f"{relative}: {len(text.splitlines())} lines")
    for node in ast.walk(tree):
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
            length = (node.end_lineno or node.lineno) - node.lineno + 1
            if length > FUNCTION_LINES:
                found.append(f"{relative}:{node.lineno} {node.name}: {length} lines")
    return found


def test_no_module_and_no_function_is_too_long_to_read_whole():
    root = PACKAGE.parent
    found = []
    for relative, tree in _library_files():
        found += oversized(relative, (root / relative).read_text(), tree)
    assert found == []


def test_the_length_guard_would_catch_a_long_function():
    text = "def f():\n" + "    x = 1\n" * FUNCTION_LINES
    assert oversized("beam_tfrecord/probe.py", text, ast.parse(text)) == [
        f"beam_tfrecord/probe.py:1 f: {FUNCTION_LINES + 1} lines"
    ]
