"""What every config class shares: the one declaration of each setting, and the one error a setting
that cannot work raises.

A setting is declared once, on its config dataclass's field, with `setting(...)`: its default, its
help, its group and, where they differ from the field's, its option name and how its value is
written as text. Every view comes from that declaration: the command's options and `--help`
(`pipelines/options.py`), the Flex Template's parameters (`deploy/metadata.json`), the options
table of `docs/options.md`, the option names in error messages, and summary.json's `options`
(`Config.to_json` / `from_json`). Adding a setting is one field.

Errors name the field in the library's own terms (`image.jpeg_quality`, `features.pooling`), so a
user of the library reads about the fields they set, and the command maps each onto its option.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Collection, Iterator, Mapping
from dataclasses import dataclass
from typing import Any, TypeAlias, TypeVar, overload

from beam_tfrecord.edges import Json, JsonObject

__all__ = [
    "GCS_OBJECT",
    "GCS_PATH",
    "GROUPS",
    "Config",
    "ConfigError",
    "Declared",
    "Setting",
    "SettingValue",
    "check_choice",
    "declared",
    "documented",
    "setting",
    "unrecorded_defaults",
    "unshaping_keys",
]

# A gs:// object or folder, as a Flex Template parameter that names one must be written.
GCS_OBJECT = "^gs://[a-z0-9][-_.a-z0-9]{1,220}[a-z0-9]/.+$"
GCS_PATH = "^gs://[a-z0-9][-_.a-z0-9]{1,220}[a-z0-9](/.*)?$"
# The groups options are shown in (`--help`, docs/options.md), in this order.
GROUPS = (
    "input and labels",
    "annotations",
    "images",
    "features",
    "splits and shards",
    "output",
    "storage",
    "running",
)


class ConfigError(ValueError):
    """A setting that cannot work. `name` is its field, dotted inside a nested setting
    (`image.jpeg_quality`); `problem` says what is wrong, to be read after the name."""

    def __init__(self, name: str, problem: str) -> None:
        super().__init__(f"{name} {problem}")
        self.name = name
        self.problem = problem

    def within(self, owner: str) -> ConfigError:
        """The same error named from the setting that holds this one (`image` + `jpeg_quality`)."""
        return ConfigError(f"{owner}.{self.name}", self.problem)


def check_choice(name: str, value: object, choices: Collection[object]) -> None:
    if value not in choices:
        raise ConfigError(name, f"must be one of {', '.join(map(str, choices))}, not {value!r}")


# A setting's value: each field's own type (a str, an int, a size tuple, a nested config, None).
# The declarations of every setting meet in `Setting` and `Declared`, as dataclass fields meet in
# `dataclasses.Field`: a declaration's functions take and give its own field's type.
SettingValue: TypeAlias = Any


class _Unset:
    """No option default declared: the option defaults to the field's default."""

    def __repr__(self) -> str:
        return "UNSET"


_UNSET = _Unset()


@dataclass(frozen=True)
class Setting:
    """One setting's declaration, beside its default on the config field (see `setting`).

    Args:
      help: one line for `--help` and the Flex Template's parameter.
      group: one of GROUPS.
      label: a few words naming it (the Flex Template parameter's label).
      option: the command's option when it is not the field's name (`feature_pooling` for
        FeatureConfig.pooling); None: no option sets it (the library's alone).
      details: more for docs/options.md, when one line is not enough.
      choices: the values it takes.
      option_default: the option's default where it is not the field's (None: the command
        works it out, e.g. read_threads from the input and the workers).
      default_doc: the default as docs/options.md says it, where the value alone says too little.
      value_type: the option's value's type: str, int, float or bool (a flag: `--name` or
        `--name=true|false`).
      minimum: an int option's least value (for the template's pattern).
      parse: the option's text -> the field's value (`"224x224"` -> (224, 224)); None: as parsed.
      text: the field's value -> the option's text (the default shown, the inverse of `parse`).
      negated: a flag `--no_NAME` that sets the field to False (resume, progress, wait).
      pattern: the template's regular expression, where choices and value_type give none.
      template: whether the Flex Template offers it.
      record: summary.json's key for it (default: the field's name); None: not recorded.
      record_text: the field's value -> what summary.json holds, where that is not the value.
      record_value: what summary.json holds -> the field's value, the inverse of `record_text`.
      nested: the config class the field holds (its settings are options of their own).
      needs: a nested optional config's fields, one of which makes it (the others need it).
      needs_text: what the others' message asks for (`--annotations coco, voc or yolo`).
      record_default: summary.json records the value when it is the default too; False for a
        setting added after outputs were made, so theirs and a new run's read the same.
      shapes_records: whether another value changes what the records are; False for where files
        come from and go, how shards are cut and read, what decides only which files are kept:
        an --append may differ there from the dataset's first run, and a resume's fingerprint
        leaves it out (`unshaping_keys`).
    """

    help: str = ""
    group: str = ""
    label: str = ""
    option: str | None = ""
    details: str = ""
    choices: tuple[SettingValue, ...] | None = None
    option_default: SettingValue = _UNSET
    default_doc: str = ""
    value_type: type = str
    minimum: int | None = None
    parse: Callable[[str], SettingValue] | None = None
    text: Callable[[SettingValue], str] | None = None
    negated: bool = False
    pattern: str | None = None
    template: bool = True
    record: str | None = ""
    record_text: Callable[[SettingValue], Json] | None = None
    record_value: Callable[[Json], SettingValue] | None = None
    nested: type[Config] | None = None
    needs: tuple[str, ...] = ()
    needs_text: str = ""
    record_default: bool = True
    shapes_records: bool = True


_KEY = "beam_tfrecord.setting"
_T = TypeVar("_T")


@overload
def setting(default: _T, *, factory: None = None, **spec: Any) -> _T: ...
@overload
def setting(*, factory: Callable[[], _T], **spec: Any) -> _T: ...
@overload
def setting(**spec: Any) -> Any: ...
def setting(
    default: object = dataclasses.MISSING, *, factory: Callable[[], object] | None = None, **spec: Any
) -> Any:
    """A config field declared with everything the command, the docs, the template and
    summary.json need to know of it (the keywords are `Setting`'s, checked by `Setting(**spec)` as
    the config's module loads). Typed as `dataclasses.field` is: the default's type, or Any for a
    field without one (the field's annotation says its type)."""
    metadata = {_KEY: Setting(**spec)}
    if factory is not None:
        return dataclasses.field(default_factory=factory, metadata=metadata)
    return dataclasses.field(default=default, metadata=metadata)


@dataclass(frozen=True)
class Declared:
    """A declared field of a config class: its name, its declaration and its default."""

    name: str
    spec: Setting
    field: dataclasses.Field[SettingValue]

    @property
    def option(self) -> str | None:
        """The command's option (without `--`), or None when only the library sets it."""
        if self.spec.option is None or self.spec.nested is not None:
            return None
        return self.spec.option or (f"no_{self.name}" if self.spec.negated else self.name)

    @property
    def default(self) -> SettingValue:
        if self.field.default is not dataclasses.MISSING:
            return self.field.default
        if self.field.default_factory is not dataclasses.MISSING:
            return self.field.default_factory()
        return None

    @property
    def option_default(self) -> SettingValue:
        """What the option defaults to: the field's default unless the declaration says otherwise."""
        if self.spec.option_default is not _UNSET:
            return self.spec.option_default
        return self.default

    @property
    def record_key(self) -> str | None:
        return None if self.spec.record is None else self.spec.record or self.name

    def as_text(self, value: SettingValue) -> SettingValue:
        """A value as the option writes it (the default `--help` shows)."""
        if value is None or self.spec.text is None:
            return value
        return self.spec.text(value)


def documented(cls: type[_T]) -> type[_T]:
    """A config class whose docstring ends in an `Args:` section made from its declarations
    (each field's `details`, else its `help`), so a field's meaning is written once, on the
    field, and `help(ConvertConfig)` still lists every field. Apply above `@dataclass`."""
    lines = ["", "", "    Args:"]
    for item in declared(cls):
        nested = item.spec.nested
        text = item.spec.details or item.spec.help or (f"the {nested.__name__} settings" if nested else "")
        if not text:
            raise TypeError(f"{cls.__name__}.{item.name} is declared with no help or details")
        lines.append(f"      {item.name}: {text}")
    cls.__doc__ = (cls.__doc__ or cls.__name__).rstrip() + "\n".join(lines) + "\n"
    return cls


def declared(cls: type) -> Iterator[Declared]:
    """The fields of a config class declared with `setting`, in their order."""
    for item in dataclasses.fields(cls):
        spec = item.metadata.get(_KEY)
        if spec is not None:
            yield Declared(item.name, spec, item)


def unshaping_keys(*classes: type) -> frozenset[str]:
    """summary.json's keys (a nested config's own, and the nested field's name) of the settings
    of `classes` declared not to shape the records (`Setting.shapes_records`)."""
    found: set[str] = set()
    for cls in classes:
        for item in declared(cls):
            nested = item.spec.nested
            if nested is not None:
                found |= (
                    {item.name} | {d.record_key or d.name for d in declared(nested)}
                    if not item.spec.shapes_records
                    else unshaping_keys(nested)
                )
            elif not item.spec.shapes_records and item.record_key is not None:
                found.add(item.record_key)
    return frozenset(found)


def unrecorded_defaults(*classes: type) -> JsonObject:
    """summary.json's keys of the settings of `classes` that a record leaves out at their default
    (`Setting.record_default` False), each with what it records for another value: what a
    record without the key stands for, so a message can name it."""
    found: JsonObject = {}
    for cls in classes:
        for item in declared(cls):
            if item.spec.nested is not None:
                found |= unrecorded_defaults(item.spec.nested)
            elif item.record_key is not None and not item.spec.record_default:
                value = item.default
                record_text = item.spec.record_text
                found[item.record_key] = record_text(value) if value is not None and record_text else value
    return found


class Config:
    """What every config dataclass has: summary.json's record of it, from its declarations.

    `to_json` gives each recorded field under its key (a nested config's fields in its place);
    `from_json` makes the config back from that record, taking each field's default where a
    record of an earlier version lacks it."""

    def to_json(self) -> JsonObject:
        data: JsonObject = {}
        for item in declared(type(self)):
            value = getattr(self, item.name)
            if item.spec.nested is not None:
                data.update(_nested_json(item, value))
            elif item.record_key is not None:
                if not item.spec.record_default and value == item.default:
                    continue
                data[item.record_key] = (
                    item.spec.record_text(value) if value is not None and item.spec.record_text else value
                )
        return data

    @classmethod
    def from_json(cls: type[_T], data: Mapping[str, Json]) -> _T:
        values: JsonObject = {}
        for item in declared(cls):
            if item.spec.nested is not None:
                nested = item.spec.nested
                keys = {d.record_key for d in declared(nested) if d.record_key is not None}
                if item.spec.needs and not any(data.get(k) for k in keys & _need_keys(item)):
                    values[item.name] = None
                else:
                    values[item.name] = nested.from_json(data)
            elif item.record_key is not None and item.record_key in data:
                value = data[item.record_key]
                if value is not None and item.spec.record_value is not None:
                    value = item.spec.record_value(value)
                values[item.name] = value
        return cls(**values)


def _need_keys(item: Declared) -> set[str | None]:
    assert item.spec.nested is not None
    return {d.record_key for d in declared(item.spec.nested) if d.name in item.spec.needs}


def _nested_json(item: Declared, value: Config | None) -> JsonObject:
    """A nested config's record: its own fields in place; an absent optional one records nothing
    but what its `record_text` says (features: only whether the image was dropped)."""
    if item.spec.record_text is not None:
        return item.spec.record_text(value)
    return value.to_json() if value is not None else {}
