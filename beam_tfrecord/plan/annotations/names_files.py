"""Class names as a dataset's own files declare them, read once for every format that finds one:
a YAML file's `names` (a list, or a mapping of index to name: Ultralytics' data.yaml) or
`classes` (a mapping: the dataset YAML of semantic mask sets such as COCO128's), or a text file
of one name a line (YOLO's classes.txt). Each format says where it looks and how its errors are
worded (`what`: "YOLO class names"); the reading and its checks are here.
"""

from __future__ import annotations

from typing import Literal, overload

import yaml

from beam_tfrecord.edges import Json
from beam_tfrecord.plan.annotations.catalog import describe_error, read_one
from beam_tfrecord.plan.sources.base import SourceError

__all__ = ["MAX_NAMES_BYTES", "NAMES_KEYS", "YAML_EXTENSIONS", "names_from", "read_names"]

YAML_EXTENSIONS = (".yaml", ".yml")
# A names file of 100,000 classes is about 2 MB; a larger file is a mistake or hostile.
MAX_NAMES_BYTES = 4 * 2**20
# The keys a YAML file names its classes under, in the order they are looked for.
NAMES_KEYS = ("names",)


def read_names(path: str, display: str, what: str) -> bytes:
    """A names file's bytes, refused past MAX_NAMES_BYTES (untrusted YAML is slow to parse)."""
    try:
        data = read_one(path)
    except Exception as error:
        raise SourceError(
            f"{what}: {display} cannot be read: {describe_error(error)}", file=display
        ) from None
    if len(data) > MAX_NAMES_BYTES:
        size = f"{len(data) / 2**20:.0f} MiB"
        raise SourceError(f"{what}: {display} is {size}, too large for a names file", file=display)
    return data


@overload
def names_from(
    data: bytes,
    display: str,
    what: str,
    optional: Literal[False] = False,
    keys: tuple[str, ...] = NAMES_KEYS,
) -> dict[int, str]: ...
@overload
def names_from(
    data: bytes, display: str, what: str, optional: bool, keys: tuple[str, ...] = NAMES_KEYS
) -> dict[int, str] | None: ...
def names_from(
    data: bytes, display: str, what: str, optional: bool = False, keys: tuple[str, ...] = NAMES_KEYS
) -> dict[int, str] | None:
    """A names file's bytes -> class index -> name: a text file's lines, or a YAML file's first
    key of `keys` it holds (None for a YAML without any when `optional`)."""
    try:
        text = data.decode("utf-8-sig")
    except UnicodeDecodeError:
        raise SourceError(f"{what}: {display} is not UTF-8 text", file=display) from None
    if not display.lower().endswith(YAML_EXTENSIONS):
        lines = text.splitlines()
        while lines and not lines[-1].strip():
            lines.pop()
        for number, line in enumerate(lines, start=1):
            if not line.strip():
                raise SourceError(f"{what}: {display} line {number} is blank", file=display)
        return _checked({index: line.strip() for index, line in enumerate(lines)}, display, what)
    try:
        document = yaml.safe_load(text)
    except yaml.YAMLError as error:
        mark = getattr(error, "problem_mark", None)
        where = f" at line {mark.line + 1} column {mark.column + 1}" if mark is not None else ""
        problem = getattr(error, "problem", None) or str(error).splitlines()[0]
        raise SourceError(f"{what}: {display} is not valid YAML: {problem}{where}", file=display) from None
    key = next((k for k in keys if isinstance(document, dict) and k in document), None)
    if key is None:
        if optional:
            return None
        raise SourceError(f"{what}: {display} has no {' or '.join(map(repr, keys))}", file=display)
    checked = _checked(_indexed(document[key], display, what, key), display, what)
    count = document.get("nc")
    if count is not None and count != len(checked):
        raise SourceError(
            f"{what}: {display} says nc: {count} but names {len(checked)} classes", file=display
        )
    return checked


def _indexed(raw: Json, display: str, what: str, key: str) -> dict[int, Json]:
    """A list (index = position) or a mapping of index to name, as class index -> value."""
    if isinstance(raw, list):
        return dict(enumerate(raw))
    if not isinstance(raw, dict):
        raise SourceError(f"{what}: {display}'s {key!r} is neither a list nor a mapping", file=display)
    names: dict[int, Json] = {}
    for index_key, value in raw.items():
        try:
            index = int(index_key)
        except (TypeError, ValueError):
            raise SourceError(
                f"{what}: {display} names class {index_key!r}, not an index", file=display
            ) from None
        if index < 0 or isinstance(index_key, bool | float):
            raise SourceError(f"{what}: {display} names class {index_key!r}, not an index", file=display)
        names[index] = value
    return names


def _checked(names: dict[int, Json], display: str, what: str) -> dict[int, str]:
    """Names as stripped strings, none blank, none twice, in index order."""
    checked: dict[int, str] = {}
    for index in sorted(names):
        value = names[index]
        if not isinstance(value, str | int | float) or isinstance(value, bool):
            # Never str() a list or mapping: YAML aliases can nest one into billions of items.
            kind = type(value).__name__
            raise SourceError(f"{what}: {display} gives class {index} a {kind}, not a name", file=display)
        name = str(value).strip()
        if not name:
            raise SourceError(f"{what}: {display} gives class {index} no name", file=display)
        if name in checked.values():
            raise SourceError(f"{what}: {display} names {name!r} twice", file=display)
        checked[index] = name
    if not checked:
        raise SourceError(f"{what}: {display} names no class", file=display)
    return checked
