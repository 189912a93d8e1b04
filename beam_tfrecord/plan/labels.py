"""Where a file's class comes from (folder, file name, manifest) and how classes become ids."""

from __future__ import annotations

import csv
import io
import json
import posixpath
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import NamedTuple

from apache_beam.io.filesystems import FileSystems

from beam_tfrecord.config_base import ConfigError
from beam_tfrecord.edges import Json

__all__ = [
    "LABEL_COLUMNS",
    "LABEL_MODES",
    "PATH_COLUMNS",
    "Manifest",
    "ManifestColumns",
    "ManifestRow",
    "Unlabeled",
    "class_names_from",
    "compile_label_pattern",
    "label_from_filename",
    "label_from_folder",
]

LABEL_MODES = ("folder", "filename", "manifest", "none")
PATH_COLUMNS = ("path", "filename", "file", "image", "id", "image_id", "name")
LABEL_COLUMNS = ("label", "class", "category", "class_name", "target")
GROUP_COLUMN = "group"  # a manifest column that keeps related files in one split


class Unlabeled(Exception):
    """An input whose label cannot be found; becomes an `unlabeled` reject."""


def label_from_folder(relpath: str) -> str:
    """The parent directory's name: `Cat/1.jpg` -> `Cat`."""
    parent = posixpath.basename(posixpath.dirname(relpath))
    if not parent:
        raise Unlabeled("file sits at the top of the input folder, outside any class folder")
    return parent


def label_from_filename(relpath: str, pattern: re.Pattern[str]) -> str:
    """The first group of `pattern` searched in the file name: `^(cat|dog)\\.` on `cat.1.jpg`."""
    name = posixpath.basename(relpath)
    match = pattern.search(name)
    if not match or not match.group(1):
        raise Unlabeled(f"file name does not match label_pattern {pattern.pattern!r}")
    return match.group(1)


def compile_label_pattern(
    text: str, option: str = "label_pattern", what: str = "the class"
) -> re.Pattern[str]:
    """A regular expression whose first group captures `what`; ConfigError naming `option`."""
    try:
        pattern = re.compile(text)
    except re.error as error:
        raise ConfigError(option, f"{text!r} is not a regular expression: {error}") from None
    if pattern.groups < 1:
        raise ConfigError(option, f"{text!r} needs a group that captures {what}")
    return pattern


@dataclass(frozen=True)
class ManifestColumns:
    """Which manifest columns mean what. `path` and `label` name them (manifest_path_column,
    manifest_label_column; default: the first of PATH_COLUMNS / LABEL_COLUMNS present); `extra`
    are kept raw for extra_columns; `multi_label` reads a label as several classes."""

    path: str | None = None
    label: str | None = None
    extra: tuple[str, ...] = ()
    multi_label: bool = False


class ManifestRow(NamedTuple):
    """What a manifest says about one file: its class (or classes), its group, raw extra values."""

    class_name: str | tuple[str, ...]
    group: str | None = None
    values: Mapping[str, Json] = {}


class Manifest:
    """A CSV or JSONL table of (path or id, label, optional `group`, optional extra columns);
    ids may omit the extension."""

    def __init__(self, rows: Mapping[str, ManifestRow | str], path: str | None = None) -> None:
        self.rows = {k: v if isinstance(v, ManifestRow) else ManifestRow(v) for k, v in rows.items()}
        self.path = path  # the manifest file itself: a listing that holds it skips it
        self.has_groups = any(row.group is not None for row in self.rows.values())
        self._used: set[str] = set()

    @classmethod
    def load(cls, path: str, columns: ManifestColumns | None = None) -> Manifest:
        columns = columns or ManifestColumns()
        with FileSystems.open(path) as handle:
            text = handle.read().decode("utf-8-sig")
        records = _jsonl_records(text) if path.endswith((".jsonl", ".json")) else _csv_records(text)
        if not records:
            raise ConfigError("manifest", f"{path} has no rows")
        keys = list(records[0])
        key_column = _pick(keys, columns.path, PATH_COLUMNS, path, "path or id", "manifest_path_column")
        label_column = _pick(keys, columns.label, LABEL_COLUMNS, path, "label", "manifest_label_column")
        group_column = next((k for k in keys if k.strip().lower() == GROUP_COLUMN), None)
        missing = [name for name in columns.extra if name not in keys]
        if missing:
            raise ConfigError(
                "extra_columns",
                f"names {', '.join(missing)}, which the manifest {path} lacks "
                f"(its columns: {', '.join(keys)})",
            )
        rows: dict[str, ManifestRow] = {}
        for record in records:
            key = _normalize_key(str(record.get(key_column, "")))
            label = _labels(record.get(label_column), columns.multi_label)
            if not key or not label:
                continue
            group = record.get(group_column) if group_column else None
            group_text = str(group).strip() if group not in (None, "") else None
            rows[key] = ManifestRow(label, group_text, {name: record.get(name) for name in columns.extra})
        return cls(rows, path)

    def row_of(self, relpath: str) -> ManifestRow:
        """Look `relpath` up as written, without its extension, then by base name."""
        stem = posixpath.splitext(relpath)[0]
        name = posixpath.basename(relpath)
        for key in (relpath, stem, name, posixpath.splitext(name)[0]):
            if key in self.rows:
                self._used.add(key)
                return self.rows[key]
        raise Unlabeled("not listed in the manifest")

    def class_name_of(self, relpath: str) -> str | tuple[str, ...]:
        return self.row_of(relpath).class_name

    def unmatched(self) -> list[str]:
        """Manifest rows that named no listed file (call after every input was looked up)."""
        return sorted(set(self.rows) - self._used)


def _labels(raw: Json, multi_label: bool) -> str | tuple[str, ...]:
    """A label cell: one class, or with `multi_label` the sorted distinct classes of a
    `|`-separated string or a JSON array ("" or () when there is none)."""
    if not multi_label:
        return "" if raw is None else str(raw).strip()
    items = raw if isinstance(raw, list) else str(raw if raw is not None else "").split("|")
    return tuple(sorted({str(item).strip() for item in items} - {""}))


def _normalize_key(key: str) -> str:
    key = key.strip().replace("\\", "/")
    while key.startswith("./"):
        key = key[2:]
    return key


def _csv_records(text: str) -> list[dict[str, str]]:
    return list(csv.DictReader(io.StringIO(text)))


def _jsonl_records(text: str) -> list[dict[str, object]]:
    return [json.loads(line) for line in text.splitlines() if line.strip()]


def _pick(
    columns: Sequence[str], named: str | None, candidates: Sequence[str], path: str, what: str, option: str
) -> str:
    """The column `named` (as written, else ignoring case and spaces), or the first candidate."""
    lowered = {c.strip().lower(): c for c in columns}
    if named:
        found = named if named in columns else lowered.get(named.strip().lower())
        if found is None:
            raise ConfigError(
                option, f"{named}: the manifest {path} has no such column; found {', '.join(columns)}"
            )
        return found
    for candidate in candidates:
        if candidate in lowered:
            return lowered[candidate]
    raise ConfigError(
        "manifest",
        f"{path}: no {what} column; expected one of {', '.join(candidates)} "
        f"(or name it with {option}), found {', '.join(columns)}",
    )


def class_names_from(labels: Iterable[str], fixed: Sequence[str] | None = None) -> list[str]:
    """Sorted distinct class names (ids never depend on listing order) or the fixed order."""
    if fixed:
        if len(set(fixed)) != len(fixed):
            raise ConfigError("class_names", "lists a class twice")
        return list(fixed)
    return sorted(set(labels))
