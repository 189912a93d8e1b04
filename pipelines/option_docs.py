"""The views of the option declarations that are files: the Flex Template's parameters
(`deploy/metadata.json`) and the options table of `docs/options.md`. Both are generated, never
edited by hand; tests/test_option_docs.py fails when a file differs from what this writes.

    python -m pipelines.option_docs --write     # rewrite both after changing a declaration
"""

from __future__ import annotations

import json
import os
import sys
from collections.abc import Sequence

from beam_tfrecord.config_base import GROUPS
from beam_tfrecord.edges import JsonObject
from pipelines.options import REPO_ROOT, OptionField, option_fields

__all__ = [
    "OPTIONS_DOC",
    "TEMPLATE_METADATA",
    "options_markdown",
    "template_metadata",
    "template_pattern",
    "updated_options_doc",
]

TEMPLATE_METADATA = os.path.join(REPO_ROOT, "deploy", "metadata.json")
OPTIONS_DOC = os.path.join(REPO_ROOT, "docs", "options.md")
BEGIN, END = "<!-- options:begin -->", "<!-- options:end -->"
TEMPLATE_DESCRIPTION = (
    "Converts a tree of images on Cloud Storage into sharded TFRecord files of tf.train.Example, "
    "with labels, deterministic splits, a reject list and a summary."
)


def template_pattern(found: OptionField) -> str:
    """The regular expression a template parameter's value must match: declared, or from the
    option's choices or type."""
    spec = found.field.spec
    if spec.pattern:
        return spec.pattern
    if spec.choices is not None:
        return "^(" + "|".join(str(choice) for choice in spec.choices) + ")$"
    if spec.value_type is bool:
        return "^(true|false)$"
    if spec.value_type is int:
        return {None: "^-?[0-9]+$", 0: "^[0-9]+$", 1: "^[1-9][0-9]*$"}[spec.minimum]
    if spec.value_type is float:
        return "^[0-9]*[.]?[0-9]+$"
    return "^.+$"


def template_metadata() -> JsonObject:
    """deploy/metadata.json: every option a template launch can take, required where the field
    has no default."""
    parameters = []
    for found in option_fields():
        spec = found.field.spec
        if not spec.template:
            continue
        parameter: JsonObject = {
            "name": found.name,
            "label": spec.label,
            "helpText": spec.help,
            "regexes": [template_pattern(found)],
        }
        if found.path not in ("source.input", "config.output"):
            parameter["isOptional"] = True
        parameters.append(parameter)
    return {
        "name": "beam-tfrecord",
        "description": TEMPLATE_DESCRIPTION,
        "streaming": False,
        "parameters": parameters,
    }


def _default_cell(found: OptionField) -> str:
    spec = found.field.spec
    if spec.default_doc:
        return spec.default_doc
    if found.path == "source.input":
        return "the bundled sample"
    value = found.default_text
    if value is None or value in ("", ()) or spec.value_type is bool:
        return ""  # a flag is off unless given, as the page says once
    return f"`{value}`"


def _cell(text: str) -> str:
    return text.replace("|", "\\|")


def options_markdown() -> str:
    """The options table, one section per group, from the declarations."""
    lines: list[str] = []
    by_group: dict[str, list[OptionField]] = {}
    for found in option_fields():
        by_group.setdefault(found.field.spec.group, []).append(found)
    for group in GROUPS:
        lines += [f"### {group.capitalize()}", "", "| option | default | meaning |", "|---|---|---|"]
        for found in by_group.get(group, []):
            spec = found.field.spec
            meaning = spec.details or spec.help
            lines.append(f"| `--{found.name}` | {_cell(_default_cell(found))} | {_cell(meaning)} |")
        lines.append("")
    return "\n".join(lines)


def updated_options_doc(text: str) -> str:
    """docs/options.md's text with the table between its markers regenerated."""
    head, found, rest = text.partition(BEGIN)
    if not found or END not in rest:
        raise ValueError(f"{OPTIONS_DOC} has no {BEGIN} ... {END} markers")
    tail = rest.split(END, 1)[1]
    return f"{head}{BEGIN}\n{options_markdown()}{END}{tail}"


def template_text() -> str:
    return json.dumps(template_metadata(), indent=2, ensure_ascii=False) + "\n"


def main(argv: Sequence[str]) -> int:
    if list(argv) == ["--write"]:
        with open(TEMPLATE_METADATA, "w", encoding="utf-8") as handle:
            handle.write(template_text())
        with open(OPTIONS_DOC, encoding="utf-8") as handle:
            text = handle.read()
        with open(OPTIONS_DOC, "w", encoding="utf-8") as handle:
            handle.write(updated_options_doc(text))
        return 0
    if list(argv) == ["--template"]:
        sys.stdout.write(template_text())
        return 0
    if list(argv) == ["--markdown"]:
        sys.stdout.write(options_markdown())
        return 0
    print("usage: python -m pipelines.option_docs --write | --template | --markdown", file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
