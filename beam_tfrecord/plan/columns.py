"""Manifest columns stored in each record (`extra_columns`, `NAME[:TYPE],...`): how a manifest value
parses as its type (the types, `keys.COLUMN_TYPES`, and the key each one gets, `keys.extra_key`,
are the record keys').

A value is parsed on the launcher, while planning, so a bad one is a `bad_manifest_value` reject
before any image is read, and the workers only copy typed values into records.
"""

from __future__ import annotations

import json
import math
import re
from dataclasses import dataclass
from typing import TypeGuard

from beam_tfrecord.config_base import ConfigError
from beam_tfrecord.edges import Json
from beam_tfrecord.elements import ColumnValue
from beam_tfrecord.keys import COLUMN_TYPES, ColumnType, reserved_names

__all__ = [
    "COLUMN_TYPES",
    "RESERVED_NAMES",
    "BadValue",
    "ExtraColumn",
    "parse_extra_columns",
    "parse_value",
]

NAME = re.compile(r"^[a-z][a-z0-9_]*$")
# Names a stored column may not take: the records' own fields and keys (either schema, feature
# runs included), and the manifest's group column, which says how files split.
RESERVED_NAMES = reserved_names() | {"group"}
LIST_SEPARATOR = "|"
FLOAT32_MAX = 3.4028234663852886e38  # records store floats as float32 (FloatList)


class BadValue(ValueError):
    """A manifest value that does not parse as its column's type: a `bad_manifest_value` reject."""


@dataclass(frozen=True)
class ExtraColumn:
    """One manifest column stored in every record: its name (also its key) and its type."""

    name: str
    type: ColumnType = "str"

    @property
    def is_list(self) -> bool:
        return self.type.endswith("_list")

    @property
    def scalar_type(self) -> str:
        """`int` for `int` and `int_list`: the type of each value."""
        return self.type.removesuffix("_list")

    def __str__(self) -> str:
        return f"{self.name}:{self.type}"


def parse_extra_columns(text: str) -> tuple[ExtraColumn, ...]:
    """`caption,score:float,tags:str_list` -> ExtraColumns; ValueError naming what is wrong."""
    columns: list[ExtraColumn] = []
    for part in text.split(","):
        name, _, column_type = part.strip().partition(":")
        name, column_type = name.strip(), column_type.strip() or "str"
        if not NAME.match(name):
            raise ConfigError("extra_columns", f"{name!r} is not a lower-case name (a-z, 0-9, _)")
        if name in RESERVED_NAMES:
            raise ConfigError("extra_columns", f"{name!r} is a key the records already use")
        if not _is_column_type(column_type):
            raise ValueError(
                "extra_columns", f"{name}:{column_type}: the type must be one of {', '.join(COLUMN_TYPES)}"
            )
        if any(c.name == name for c in columns):
            raise ConfigError("extra_columns", f"names {name} twice")
        columns.append(ExtraColumn(name, column_type))
    return tuple(columns)


def _is_column_type(text: str) -> TypeGuard[ColumnType]:
    return text in COLUMN_TYPES


def parse_value(column: ExtraColumn, raw: Json) -> ColumnValue:
    """A manifest value as its column's type. CSV gives strings (a list is `|`-separated);
    JSONL gives JSON values (a list is an array, or a `|`-separated string). Missing values are
    "" for `str` and empty lists; a missing number is a BadValue (a record must hold one)."""
    if column.is_list:
        if raw is None or raw == "":
            items: list[Json] = []
        elif isinstance(raw, list):
            items = raw
        elif isinstance(raw, str):
            items = [item.strip() for item in raw.split(LIST_SEPARATOR)]
        else:
            items = [raw]
        return tuple(_scalar(column, item) for item in items)
    if isinstance(raw, list):
        raise BadValue(f"column {column.name}: {_show(raw)} is a list, not one {column.type}")
    if raw is None:
        raw = ""
    return _scalar(column, raw)


def _scalar(column: ExtraColumn, raw: Json) -> str | int | float:
    scalar_type = column.scalar_type
    if scalar_type == "str":
        if isinstance(raw, dict | list):
            raise BadValue(f"column {column.name}: {_show(raw)} is not a string")
        return raw if isinstance(raw, str) else json.dumps(raw)
    if isinstance(raw, bool | dict | list):
        raise BadValue(f"column {column.name}: {_show(raw)} is not an {scalar_type}")
    text = raw.strip() if isinstance(raw, str) else raw
    try:
        if scalar_type == "int":
            if isinstance(text, float) and not text.is_integer():
                raise ValueError
            value: int | float = int(text)
            if not -(2**63) <= value < 2**63:
                raise ValueError
            return value
        value = float(text)
    except (TypeError, ValueError, OverflowError):
        article = "an" if scalar_type == "int" else "a"
        raise BadValue(f"column {column.name}: {_show(raw)} is not {article} {scalar_type}") from None
    if not math.isfinite(value) or abs(value) > FLOAT32_MAX:
        raise BadValue(f"column {column.name}: {_show(raw)} is not a finite 32-bit float")
    return value


def _show(raw: Json) -> str:
    return repr(raw) if isinstance(raw, str) else json.dumps(raw)
