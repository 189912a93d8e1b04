"""The type check's one rule mypy cannot enforce: an ignore in the library or the commands names
its error code (mypy checks that: ignore-without-code) and says why, in a comment after it on
the same line, so the next reader can tell whether it is still needed."""

from __future__ import annotations

import pathlib
import re

ROOT = pathlib.Path(__file__).resolve().parent.parent
IGNORE = re.compile(r"#\s*type:\s*ignore")
WITH_REASON = re.compile(r"#\s*type:\s*ignore\[[a-z, -]+\]  # \S")


def test_every_type_ignore_says_why():
    bare = [
        f"{path.relative_to(ROOT)}:{number}: {line.strip()}"
        for folder in ("beam_tfrecord", "pipelines")
        for path in sorted((ROOT / folder).rglob("*.py"))
        for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1)
        if IGNORE.search(line) and not WITH_REASON.search(line)
    ]
    assert not bare, "\n".join(bare)


def test_the_rule_would_catch_a_bare_ignore():
    assert IGNORE.search("x = f()  # type: ignore[arg-type]")
    assert not WITH_REASON.search("x = f()  # type: ignore[arg-type]")
    assert WITH_REASON.search("x = f()  # type: ignore[arg-type]  # Beam's hint omits callables")
