"""Where a file's class comes from (folder, file name, manifest) and how classes become ids."""

from __future__ import annotations

import csv
import io
import json
import posixpath
import re
from collections.abc import Iterable, Sequence

from apache_beam.io.filesystems import FileSystems

__all__ = [
    "LABEL_MODES",
    "Manifest",
    "Unlabeled",
    "class_names_from",
    "compile_label_pattern",
    "label_from_filename",
    "label_from_folder",
]

LABEL_MODES = ("folder", "filename", "manifest", "none")
PATH_COLUMNS = ("path", "filename", "file", "image", "id", "image_id", "name")
LABEL_COLUMNS = ("label", "class", "category", "class_name", "target")


class Unlabeled(Exception):
    """An input whose label cannot be found; becomes an `unlabeled` reject."""


def label_from_folder(relpath: str) -> str:
    """The parent directory's name: `Cat/1.jpg` -> `Cat`."""
    parent = posixpath.basename(posixpath.dirname(relpath))
    if not parent:
        raise Unlabeled("file sits at the top of --input, outside any class folder")
    return parent


def label_from_filename(relpath: str, pattern: re.Pattern[str]) -> str:
    """The first group of `pattern` searched in the file name: `^(cat|dog)\\.` on `cat.1.jpg`."""
    name = posixpath.basename(relpath)
    match = pattern.search(name)
    if not match or not match.group(1):
        raise Unlabeled(f"file name does not match --label_pattern {pattern.pattern!r}")
    return match.group(1)


def compile_label_pattern(text: str) -> re.Pattern[str]:
    try:
        pattern = re.compile(text)
    except re.error as error:
        raise ValueError(f"--label_pattern {text!r} is not a regular expression: {error}") from None
    if pattern.groups < 1:
        raise ValueError(f"--label_pattern {text!r} needs a group that captures the class")
    return pattern


class Manifest:
    """A CSV or JSONL table of (path or id, label); ids may omit the extension."""

    def __init__(self, rows: dict[str, str]) -> None:
        self.rows = rows
        self._used: set[str] = set()

    @classmethod
    def load(cls, path: str) -> Manifest:
        with FileSystems.open(path) as handle:
            text = handle.read().decode("utf-8-sig")
        records = _jsonl_records(text) if path.endswith((".jsonl", ".json")) else _csv_records(text)
        if not records:
            raise ValueError(f"--manifest {path} has no rows")
        keys = list(records[0])
        key_column = _pick(keys, PATH_COLUMNS, path, "path or id")
        label_column = _pick(keys, LABEL_COLUMNS, path, "label")
        rows: dict[str, str] = {}
        for record in records:
            key = _normalize_key(str(record.get(key_column, "")))
            label = str(record.get(label_column, "")).strip()
            if key and label:
                rows[key] = label
        return cls(rows)

    def label_of(self, relpath: str) -> str:
        """Look `relpath` up as written, without its extension, then by base name."""
        stem = posixpath.splitext(relpath)[0]
        name = posixpath.basename(relpath)
        for key in (relpath, stem, name, posixpath.splitext(name)[0]):
            if key in self.rows:
                self._used.add(key)
                return self.rows[key]
        raise Unlabeled("not listed in --manifest")

    def unmatched(self) -> list[str]:
        """Manifest rows that named no listed file (call after every input was looked up)."""
        return sorted(set(self.rows) - self._used)


def _normalize_key(key: str) -> str:
    key = key.strip().replace("\\", "/")
    while key.startswith("./"):
        key = key[2:]
    return key


def _csv_records(text: str) -> list[dict[str, str]]:
    return list(csv.DictReader(io.StringIO(text)))


def _jsonl_records(text: str) -> list[dict[str, object]]:
    return [json.loads(line) for line in text.splitlines() if line.strip()]


def _pick(columns: Sequence[str], candidates: Sequence[str], path: str, what: str) -> str:
    lowered = {c.strip().lower(): c for c in columns}
    for candidate in candidates:
        if candidate in lowered:
            return lowered[candidate]
    raise ValueError(
        f"--manifest {path}: no {what} column; expected one of {', '.join(candidates)}, "
        f"found {', '.join(columns)}"
    )


def class_names_from(labels: Iterable[str], fixed: Sequence[str] | None = None) -> list[str]:
    """Sorted distinct class names (ids never depend on listing order) or the fixed order."""
    if fixed:
        if len(set(fixed)) != len(fixed):
            raise ValueError("--class_names lists a class twice")
        return list(fixed)
    return sorted(set(labels))
