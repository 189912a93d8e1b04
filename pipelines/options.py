"""Command-line options of `python -m pipelines.convert`: a `PipelineOptions` subclass, so one
parser holds ours and Beam's and a Dataflow job records ours with its own.

Every option is declared once, on the library's config field it sets (`config_base.setting`:
SourceConfig, AnnotationConfig, ConvertConfig, ImageConfig, FeatureConfig, GcsConfig), or on
`CommandSettings` for what only this command does; this module turns those declarations into argparse
options, builds the configs back from the parsed values, and names options in messages.

Beam's parser takes no abbreviations; on top of it, an option no one declares is a usage error
that names the closest valid one (Beam would only log "Discarding unparseable args" and run
something else). None of ours shadows a Beam option (tests/test_options.py checks): Beam's
`--labels` (Dataflow job labels) and `--dry_run` (its dry-run switch, which ours uses) are Beam's.
"""

from __future__ import annotations

import argparse
import dataclasses
import difflib
import functools
import os
import re
import sys
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import NoReturn

from apache_beam.options.pipeline_options import PipelineOptions, TestOptions

from beam_tfrecord import gcs, runners, storage
from beam_tfrecord.config import ConvertConfig, FeatureConfig, SourceConfig
from beam_tfrecord.config_base import GROUPS, ConfigError, Declared, SettingValue, declared, setting
from beam_tfrecord.output.mode import OutputKind, OutputMode
from beam_tfrecord.output.outputs import OutputInUse
from beam_tfrecord.plan.listing import shown_path
from beam_tfrecord.plan.planner import LabelSource, label_source_for
from beam_tfrecord.runners import read_threads

__all__ = [
    "SAMPLE_INPUT",
    "CommandSettings",
    "ConvertOptions",
    "OptionField",
    "UsageError",
    "check_conflicts",
    "check_options",
    "dry_run_requested",
    "given_option_names",
    "option_fields",
    "our_option_names",
    "parse_options",
    "usage_text",
]

REPO_ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SAMPLE_INPUT = os.path.join(REPO_ROOT, "sample", "shapes")
PROG = "python -m pipelines.convert"
# What --help says of Beam's own options, which --help_beam lists.
BEAM_OPTIONS_LINE = (
    "Beam's pipeline options work too: --runner (DirectRunner, DataflowRunner, PortableRunner, ...), "
    "--direct_num_workers and --direct_running_mode for local runs, and Dataflow's --project, --region, "
    "--temp_location, --setup_file, --dry_run=true. --help_beam lists every one of them."
)


class UsageError(ValueError):
    """A bad option or input, reported as one clear line before any work starts."""


@dataclass(frozen=True)
class CommandSettings:
    """The checked options: the library's configs, and how this command runs them (the fields
    declared with `setting` are this command's own options)."""

    source: SourceConfig
    config: ConvertConfig
    label_source: LabelSource  # the pattern compiled and the manifest loaded, once
    dry_run: bool  # Beam's --dry_run
    overwrite: bool = setting(
        False,
        group="output",
        label="Overwrite",
        value_type=bool,
        help="replace the shards and metadata of an earlier run in --output",
    )
    append: bool = setting(
        False,
        details="add files not yet in `--output`'s finished dataset as new shards, keeping its label ids "
        "and splits; refused if a record-shaping option differs ([append](append.md))",
        group="output",
        label="Append",
        value_type=bool,
        help="add the files --output's finished dataset does not hold yet as new shards beside the old ones",
    )
    resume: bool = setting(
        True,
        negated=True,
        details="start clean instead of resuming an interrupted run of the same command",
        group="output",
        label="Start clean",
        value_type=bool,
        help="start clean even when --output holds an interrupted run of the same command "
        "(by default its finished shards are kept)",
    )
    progress: bool = setting(
        True,
        negated=True,
        group="running",
        label="No progress line",
        value_type=bool,
        help="no progress line on local runs",
    )
    wait: bool = setting(
        True,
        details="remote runners: return once the job is submitted, without the summary (refused locally)",
        negated=True,
        group="running",
        label="Do not wait",
        value_type=bool,
        template=False,
        help="remote runners: return once the job is submitted instead of waiting to print the summary",
    )
    dry_run_output: str = setting(
        "dataflow_job.json",
        details="with Beam's `--dry_run=true` and `--runner=DataflowRunner`: where the offline "
        "translation goes ([dataflow](dataflow.md))",
        group="running",
        label="Dry run output",
        template=False,
        help="with Beam's --dry_run and --runner=DataflowRunner: where the translated job goes",
    )

    @property
    def output_mode(self) -> OutputMode:
        """What the run does with --output, as far as the flags say; an append's dataset is read
        once the output is claimed (pipelines.append.AppendJob.mode)."""
        kind = OutputKind.OVERWRITE if self.overwrite else OutputKind.FRESH
        return OutputMode(kind, dry_run=self.dry_run, resume=self.resume)


@dataclass(frozen=True)
class OptionField:
    """One option: where its field sits (`config.image.resize`) and its declaration."""

    path: str
    field: Declared

    @property
    def name(self) -> str:
        assert self.field.option is not None
        return self.field.option

    @property
    def default_text(self) -> SettingValue:
        """The default as the option is written (argparse's default, `--help`, the docs)."""
        if self.path in _COMMAND_DEFAULTS:
            return _COMMAND_DEFAULTS[self.path]
        if self.field.spec.value_type is bool:
            return False
        return self.field.as_text(self.field.option_default)


# The command's defaults where the library has none: the bundled sample into ./output.
_COMMAND_DEFAULTS = {"source.input": SAMPLE_INPUT, "config.output": "output"}
# The configs a command line fills, by where each sits in CommandSettings.
_ROOTS = (("source", SourceConfig), ("config", ConvertConfig), ("run", CommandSettings))


def _walk(cls: type, path: str) -> Iterator[OptionField]:
    for item in declared(cls):
        if item.spec.nested is not None:
            yield from _walk(item.spec.nested, f"{path}.{item.name}")
        elif item.option is not None:
            yield OptionField(f"{path}.{item.name}", item)


def option_fields() -> list[OptionField]:
    """Every option of the command, in declaration order (the configs' field order)."""
    return [found for path, cls in _ROOTS for found in _walk(cls, path)]


def _field_options() -> dict[str, str]:
    """A field's names, as an error may give them, -> its option: the dotted path below the
    run's configs (`image.jpeg_quality`, `gcs.timeout_s`), the bare field name where no other
    field shares it (`pooling`), and the option's own name."""
    names: dict[str, str] = {}
    bare: dict[str, list[str]] = {}
    for found in option_fields():
        dotted = found.path.split(".", 1)[1]
        names[dotted] = found.name
        names[found.name] = found.name
        bare.setdefault(dotted.rsplit(".", 1)[-1], []).append(found.name)
    for field_name, options in bare.items():
        if len(options) == 1:
            names.setdefault(field_name, options[0])
    return names


def option_of(field_name: str) -> str:
    """`--feature_pooling` for the field `pooling` (or `features.pooling`), `--input` for `input`."""
    return "--" + _field_options().get(field_name, field_name)


def usage_text(error: Exception) -> str:
    """An error as the command says it: the setting's option, not the library's field name. The
    field an error is about leads; other fields it names (`model_weights`, `class_names`: the
    ones with an underscore, which read as nothing but a field) become options too."""
    known = _field_options()
    if isinstance(error, ConfigError):
        first, rest = error.name, error.problem
    else:
        first, _, rest = str(error).partition(" ")
        if first not in known:
            first, rest = "", str(error)
    rest = _FIELD_WORD.sub(lambda m: option_of(m[1]) if m[1] in known else m[1], rest)
    text = f"{option_of(first)} {rest}" if first else rest
    if isinstance(error, OutputInUse):
        text += "; pass --overwrite to replace them"
    return text


_FIELD_WORD = re.compile(r"(?<![\w/.-])([a-z][a-z0-9]*(?:_[a-z0-9]+)+)\b(?!\.\w)")  # not a file's name


def parse_bool(value: str) -> bool:
    """`true`/`false` (any case), also `1`/`0` and `yes`/`no`, as a Flex Template passes them."""
    lowered = value.strip().lower()
    if lowered in ("true", "1", "yes"):
        return True
    if lowered in ("false", "0", "no"):
        return False
    raise argparse.ArgumentTypeError(f"expected true or false, not {value!r}")


_METAVARS = {int: "N", float: "X"}


def add_options(parser: argparse.ArgumentParser, title: str = "{}") -> None:
    """Our options onto `parser`, one argument group per GROUPS entry, from the declarations.

    A flag works both as `--name` and as `--name=true|false`: a Flex Template launcher passes
    every parameter as `--name=value`, which a store_true flag would reject."""
    by_group: dict[str, list[OptionField]] = {}
    for found in option_fields():
        by_group.setdefault(found.field.spec.group, []).append(found)
    unknown = set(by_group) - set(GROUPS)
    assert not unknown, f"options in no group of GROUPS: {unknown}"
    for group_name in GROUPS:
        group = parser.add_argument_group(title.format(group_name))
        for found in by_group.get(group_name, []):
            spec = found.field.spec
            if spec.value_type is bool:
                group.add_argument(
                    f"--{found.name}",
                    nargs="?",
                    const=True,
                    default=False,
                    type=parse_bool,
                    metavar="true|false",  # shown as [true|false]: a bare --name means true
                    help=spec.help,
                )
                continue
            # None is argparse's own default for choices and metavar (none, and its own).
            add = functools.partial(
                group.add_argument,
                f"--{found.name}",
                default=found.default_text,
                help=spec.help,
                choices=spec.choices,
                metavar=_METAVARS.get(spec.value_type, "TEXT") if spec.choices is None else None,
            )
            if spec.parse is None and spec.value_type is not str:
                add(type=spec.value_type)
            else:
                add()


class ConvertOptions(PipelineOptions):
    """This project's options, declared the way Beam's own are (from the config declarations)."""

    @classmethod
    def _add_argparse_args(cls, parser: argparse.ArgumentParser) -> None:
        add_options(parser, "beam-tfrecord: {}")


def help_text() -> str:
    """`--help`: the converter's options by group, then one line on Beam's."""
    parser = argparse.ArgumentParser(
        prog=PROG,
        usage=f"{PROG} --input PATH --output PATH [options] [Beam pipeline options]",
        description="Convert a tree of images (local or gs://) into sharded TFRecord files of "
        "tf.train.Example, with labels, splits, a reject list and a summary.",
        epilog=BEAM_OPTIONS_LINE,
        add_help=False,
        allow_abbrev=False,
        formatter_class=lambda prog: argparse.HelpFormatter(prog, max_help_position=34, width=110),
    )
    add_options(parser)
    parser.add_argument_group("help").add_argument(
        "--help", action="store_true", help="this list; --help_beam lists Beam's options too"
    )
    return parser.format_help()


def our_option_names() -> list[str]:
    """The dests ConvertOptions declares (the Flex Template's parameters, among others)."""
    return sorted(ConvertOptions().get_all_options(current_only=True))


def _refuse(message: str) -> NoReturn:
    """argparse's error handler, as one line instead of 60 lines of usage and an exit."""
    raise UsageError(message.replace("argument ", "", 1))


def _check_unknown(parser: argparse.ArgumentParser, argv: Sequence[str]) -> None:
    _, unknown = parser.parse_known_args(argv)
    if not unknown:
        return
    first = unknown[0]
    if first.startswith("--"):
        name = first.split("=", 1)[0]
        known = [f"--{dest}" for dest in vars(parser.parse_known_args([])[0])]
        raise UsageError(f"unknown option {name}{_suggestion(name, known)} (see --help)")
    raise UsageError(f"unexpected argument {first!r}: options are --name=value (see --help)")


def _beam_parser(argv: Sequence[str]) -> argparse.ArgumentParser:
    """The parser Beam builds over every PipelineOptions subclass (ours included), reached
    through its public `add_extra_args_fn` hook, checked against `argv` before Beam would log
    "Discarding unparseable args" and run without them."""
    captured: list[argparse.ArgumentParser] = []

    def check(parser: argparse.ArgumentParser) -> None:
        parser.error = _refuse  # type: ignore[method-assign]  # Beam makes the parser: no subclass of ours
        parser.prog = PROG
        parser.description = (
            "Convert a tree of images into sharded TFRecord files of tf.train.Example. Our options "
            "are listed last; every Beam pipeline option (--runner, --direct_num_workers, ...) works too."
        )
        captured.append(parser)
        _check_unknown(parser, argv)

    PipelineOptions(list(argv)).get_all_options(add_extra_args_fn=check)
    return captured[0]


def _suggestion(name: str, known: Sequence[str]) -> str:
    close = difflib.get_close_matches(name, known, n=1, cutoff=0.6)
    return f"; did you mean {close[0]}?" if close else ""


def _runner_named(argv: Sequence[str]) -> str | None:
    """The `--runner` argv names, read before the whole command line can be parsed."""
    parser = argparse.ArgumentParser(add_help=False, allow_abbrev=False)
    parser.add_argument("--runner")
    return parser.parse_known_args(list(argv))[0].runner


def parse_options(argv: Sequence[str]) -> PipelineOptions:
    """PipelineOptions from the command line; UsageError for anything no option declares.

    The `--runner`'s module is imported first, so that the options it declares are known
    (runners.load_runner); a runner this pipeline cannot run on is refused once they are parsed.
    `--help` prints the converter's options (and a line on Beam's) and exits 0; `--help_beam`
    prints every option, Beam's then ours."""
    argv = list(argv)
    for arg in argv:  # Python hands over the bytes of one that is not UTF-8 as lone surrogates
        if shown_path(arg) != arg:
            raise UsageError(
                f"{shown_path(arg)} is not valid UTF-8 (shown with \\xNN): every option is written "
                "to summary.json; rename the path"
            )
    try:
        runner = runners.load_runner(_runner_named(argv))
    except ConfigError as error:
        raise UsageError(f"--{error}") from None
    if "--help_beam" in argv:
        _beam_parser([]).print_help()
        raise SystemExit(0)
    if "--help" in argv or "-h" in argv:  # before Beam's base parser prints an empty help
        sys.stdout.write(help_text())
        raise SystemExit(0)
    _beam_parser(argv)
    try:
        runners.check_runner(runner)
    except ConfigError as error:
        raise UsageError(f"--{error}") from None
    return PipelineOptions(argv)


def given_option_names(argv: Sequence[str]) -> set[str]:
    """The options a command line names (`--name` or `--name=value`), to keep the user's choice
    where a default would otherwise be picked for them (the local workers)."""
    return {arg[2:].split("=", 1)[0] for arg in argv if arg.startswith("--")}


def check_conflicts(settings: CommandSettings, given: set[str], local: bool) -> None:
    """Refuse settings that contradict each other, instead of quietly letting one win."""
    if "num_shards" in given and "shard_size_mb" in given:
        raise UsageError(
            "--num_shards and --shard_size_mb exclude each other: the shard count is either given "
            "or derived from the target size"
        )
    if settings.append and settings.overwrite:
        raise UsageError(
            "--append and --overwrite exclude each other: one grows the dataset, one replaces it"
        )
    if settings.append and settings.source.overlapping_splits:
        raise UsageError(
            "--append and --overlapping_splits exclude each other for now: an append finds the "
            "converted pictures by path, and a picture in two splits has one path for two records"
        )
    if local and not settings.wait:
        raise UsageError("--no_wait is for remote runners: a local run ends before the command returns")


def dry_run_requested(options: PipelineOptions) -> bool:
    """Beam's `--dry_run` takes a value (`--dry_run=true`); read it as the boolean it means."""
    value = options.view_as(TestOptions).dry_run
    return parse_bool(value) if isinstance(value, str) else bool(value)


def check_options(options: PipelineOptions) -> CommandSettings:
    """Turn parsed options into CommandSettings, or raise UsageError naming the option."""
    try:
        return _check(options.view_as(ConvertOptions), dry_run_requested(options))
    except UsageError:
        raise
    except ConfigError as error:
        raise UsageError(usage_text(error)) from None
    except ValueError as error:
        raise UsageError(str(error)) from None


def _given(ns: ConvertOptions, found: OptionField) -> bool:
    """Whether the command line set this option to other than its default."""
    return getattr(ns, found.name) != found.default_text


def _value(ns: ConvertOptions, found: OptionField) -> SettingValue:
    """The field's value from its option: parsed from its text, a negated flag inverted."""
    value = getattr(ns, found.name)
    spec = found.field.spec
    if spec.negated:
        return not value
    if spec.parse is not None and isinstance(value, str):
        try:
            return spec.parse(value)
        except ConfigError:
            raise
        except ValueError as error:
            raise UsageError(f"--{found.name} {error}") from None
    return value


def _fields(cls: type, path: str, ns: ConvertOptions) -> dict[str, SettingValue]:
    """The keyword arguments of a config from its options, nested configs made in turn: an
    optional one (annotations, features) only when one of the fields that make it is given,
    and then none of its other options may be given without it."""
    values: dict[str, SettingValue] = {}
    by_path = {found.path: found for found in option_fields()}
    for item in declared(cls):
        here = f"{path}.{item.name}"
        nested = item.spec.nested
        if nested is not None:
            inner = [by_path[f"{here}.{d.name}"] for d in declared(nested) if f"{here}.{d.name}" in by_path]
            makers = [found for found in inner if found.path.rsplit(".", 1)[1] in item.spec.needs]
            if makers and not any(_given(ns, found) for found in makers):
                stray = next((found for found in inner if _given(ns, found)), None)
                if stray is not None:
                    raise UsageError(f"--{stray.name} needs {item.spec.needs_text}")
                values[item.name] = None
                continue
            values[item.name] = nested(**_fields(nested, here, ns))
        elif here in by_path and _given(ns, by_path[here]):  # else the field's own default
            values[item.name] = _value(ns, by_path[here])
    return values


def _check(ns: ConvertOptions, dry_run: bool) -> CommandSettings:
    source_fields = _fields(SourceConfig, "source", ns)
    config_fields = _fields(ConvertConfig, "config", ns)
    run_fields = _fields(CommandSettings, "run", ns)
    source_input, output = storage.absolute(ns.input), storage.absolute(ns.output)
    if not storage.exists(source_input.split("*")[0].rstrip("/") or "/", if_remote=True):
        raise UsageError(f"--input {ns.input} does not exist")
    if output.rstrip("/") == source_input.rstrip("/") or output.startswith(source_input.rstrip("/") + "/"):
        raise UsageError(
            f"--output {ns.output} is inside --input {ns.input}: the input tree is never written to"
        )
    source_fields["input"], config_fields["output"] = source_input, output
    if source_fields.get("manifest"):
        source_fields["manifest"] = storage.absolute(source_fields["manifest"])
    annotations = source_fields["annotations"]
    if annotations is not None and annotations.label_map:
        annotations = dataclasses.replace(annotations, label_map=storage.absolute(annotations.label_map))
        source_fields["annotations"] = annotations
    if annotations is not None and annotations.split_names and not _given(ns, _option("splits")):
        # COCO files given per split: each holds its file's images; the fractions only share
        # out the images no file names.
        named = annotations.split_names
        source_fields["splits"] = {name: 1 / len(named) for name in named}
    if annotations is not None and _given(ns, _option("splits")):  # --splits overrides the dataset's own
        source_fields["annotations"] = dataclasses.replace(annotations, declared_splits=False)
    if _given(ns, _option("splits")):  # and a class-folder tree's split folders
        source_fields["split_folders"] = False
    source = SourceConfig(**source_fields)
    if ns.read_threads is None:  # pipelines.convert sets it again once the workers are chosen
        config_fields["read_threads"] = read_threads(source_input, None)
    features = config_fields["features"]
    if features is not None:
        config_fields["features"] = _feature_paths(features)
    config = ConvertConfig(**config_fields)
    return CommandSettings(
        source=source,
        config=config,
        label_source=_label_source(source, dry_run),
        dry_run=dry_run,
        **run_fields,
    )


def _option(name: str) -> OptionField:
    return next(found for found in option_fields() if found.name == name)


def _feature_paths(features: FeatureConfig) -> FeatureConfig:
    """A feature model's files as absolute paths, a local model file checked to exist."""
    model_path = features.model_path
    if model_path:
        if not storage.exists(model_path, if_remote=True):  # a worker reads a remote one
            raise UsageError(f"--model_path {model_path} does not exist")
        model_path = storage.absolute(model_path)
    weights = features.model_weights
    if weights not in ("imagenet", "none"):
        weights = storage.absolute(weights)
    return dataclasses.replace(features, model_path=model_path, model_weights=weights)


def _label_source(source: SourceConfig, dry_run: bool) -> LabelSource:
    """Compile the pattern and load the manifest now, so a bad one fails before any work."""
    path = source.manifest or ""
    if dry_run and storage.is_remote(path):
        raise UsageError(f"--manifest {path}: a dry run reads the manifest offline; pass a local copy")
    try:
        return label_source_for(source)
    except OSError as error:
        raise UsageError(f"--manifest {path} cannot be read: {error}") from None
    except Exception as error:
        if not storage.is_gcs(path) or isinstance(error, ValueError):
            raise
        raise UsageError(gcs.describe("--manifest", path, error)) from None
