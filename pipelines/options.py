"""Command-line options of `python -m pipelines.convert`: a `PipelineOptions` subclass, so one
parser holds ours and Beam's, `--help` shows both, and a Dataflow job records ours with its own.

Beam's parser takes no abbreviations; on top of it, an option no one declares is a usage error
that names the closest valid one (Beam would only log "Discarding unparseable args" and run
something else). None of ours shadows a Beam option (tests/test_options.py checks): Beam's
`--labels` (Dataflow job labels) and `--dry_run` (its dry-run switch, which ours uses) are Beam's.
"""

from __future__ import annotations

import argparse
import dataclasses
import difflib
import os
import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from apache_beam.options.pipeline_options import PipelineOptions, TestOptions

from beam_tfrecord import gcs, runners
from beam_tfrecord.config import COMPRESSIONS, LABEL_SOURCES, SCHEMAS, SINKS, ConvertConfig, SourceConfig
from beam_tfrecord.config_base import ConfigError
from beam_tfrecord.features import options as feature_options
from beam_tfrecord.features.options import FeatureOptions
from beam_tfrecord.images.options import IMAGE_FORMATS, RESIZE_MODES, ImageOptions, parse_size
from beam_tfrecord.plan.annotations.options import ANNOTATION_KINDS, UNANNOTATED, AnnotationOptions
from beam_tfrecord.plan.columns import parse_extra_columns
from beam_tfrecord.plan.planner import LabelSource, label_source_for
from beam_tfrecord.plan.splits import parse_splits
from beam_tfrecord.runners import read_threads
from beam_tfrecord.write.outputs import OutputInUse

__all__ = [
    "SAMPLE_INPUT",
    "ConvertOptions",
    "RunSettings",
    "UsageError",
    "check_conflicts",
    "check_options",
    "dry_run_requested",
    "given_option_names",
    "our_option_names",
    "parse_options",
]

REPO_ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SAMPLE_INPUT = os.path.join(REPO_ROOT, "sample", "shapes")
PROG = "python -m pipelines.convert"


class UsageError(ValueError):
    """A bad option or input, reported as one clear line before any work starts."""


# The library's fields whose option has another name; the others are spelled alike (the
# library speaks of its fields, the command of its options: `usage_text` maps one to the other).
FIELD_OPTIONS = {
    "pooling": "feature_pooling",
    "dtype": "feature_dtype",
    "precision": "feature_precision",
    "batch_size": "inference_batch_size",
    "input_normalization": "model_input_normalization",
    "input_size": "model_input_size",
    "read_threads": "decode_threads",
    "gcs.timeout_s": "gcs_timeout_s",
    "gcs.retry_deadline_s": "gcs_retry_deadline_s",
}


def option_of(field: str) -> str:
    """`--feature_pooling` for the field `pooling`, `--input` for `input`."""
    return "--" + FIELD_OPTIONS.get(field, field)


def usage_text(error: Exception) -> str:
    """An error as the command says it: the setting's option, not the library's field name. The
    field an error is about leads; other fields it names (`model_weights`, `class_names`: the
    ones with an underscore, which read as nothing but a field) become options too."""
    known = set(our_option_names()) | set(FIELD_OPTIONS)
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


_FIELD_WORD = re.compile(r"(?<![\w/.-])([a-z][a-z0-9]*(?:_[a-z0-9]+)+)\b")


def default_of(settings: type, field: str) -> Any:
    """A setting's default, read from the dataclass that declares it: each default is declared
    once, in the library, and the command's options show it."""
    for item in dataclasses.fields(settings):
        if item.name == field:
            if item.default is not dataclasses.MISSING:
                return item.default
            return item.default_factory()  # type: ignore[misc]
    raise KeyError(f"{settings.__name__} has no field {field!r}")


def parse_bool(value: str) -> bool:
    """`true`/`false` (any case), also `1`/`0` and `yes`/`no`, as a Flex Template passes them."""
    lowered = value.strip().lower()
    if lowered in ("true", "1", "yes"):
        return True
    if lowered in ("false", "0", "no"):
        return False
    raise argparse.ArgumentTypeError(f"expected true or false, not {value!r}")


def _add_flag(group: Any, name: str, help_text: str) -> None:
    """A boolean option that works both as `--name` and as `--name=true|false`: a Flex Template
    launcher passes every parameter as `--name=value`, which a store_true flag would reject."""
    group.add_argument(name, nargs="?", const=True, default=False, type=parse_bool, help=help_text)


def _splits_text(splits: dict[str, float]) -> str:
    """{"train": 1.0} -> `train=1`, as --splits is written."""
    return ",".join(f"{name}={fraction:g}" for name, fraction in splits.items())


class ConvertOptions(PipelineOptions):
    """This project's options, declared the way Beam's own are."""

    @classmethod
    def _add_argparse_args(cls, parser: argparse.ArgumentParser) -> None:
        group = parser.add_argument_group("beam-tfrecord (python -m pipelines.convert)")
        add = group.add_argument
        add("--input", default=SAMPLE_INPUT, help="directory (recursive), glob or gs:// prefix of images")
        add("--output", default="output", help="folder for shards, labels.txt, rejects.jsonl, summary.json")
        add(
            "--label_source",
            default=default_of(SourceConfig, "label_source"),
            choices=LABEL_SOURCES,
            help="where each file's class comes from (Beam's --labels are Dataflow job labels)",
        )
        add(
            "--label_pattern",
            help=r"regex for --label_source filename; group 1 is the class, e.g. '^(cat|dog)\.'",
        )
        add(
            "--manifest",
            help="CSV or JSONL with a path-or-id and a label column, for --label_source manifest",
        )
        add(
            "--manifest_path_column",
            help="the --manifest column holding the path or id "
            "(default: path, filename, file, image, id, ...)",
        )
        add(
            "--manifest_label_column",
            help="the --manifest column holding the class (default: label, class, category, ...)",
        )
        add(
            "--extra_columns",
            help="NAME[:TYPE],... manifest columns stored in every record; TYPE str (default), int, "
            "float, str_list, int_list or float_list (a list is |-separated in CSV, an array in JSONL)",
        )
        _add_flag(
            group,
            "--multi_label",
            "a manifest label holds several classes (cat|outdoor, or a JSON array): stored as an int64 list",
        )
        add("--class_names", help="comma-separated class names fixing the label ids (default: sorted names)")
        add(
            "--splits",
            default=_splits_text(default_of(SourceConfig, "splits")),
            help="NAME=FRACTION,... e.g. train=0.8,validation=0.2",
        )
        add(
            "--split_seed",
            type=int,
            default=default_of(SourceConfig, "split_seed"),
            help="seed of the path hash that assigns splits",
        )
        _add_flag(group, "--stratify", "give every class each split's exact share")
        add(
            "--group_pattern",
            help=r"regex whose group 1, searched in the path relative to --input, is the file's group; "
            r"a group is never split, e.g. '^(p\d+)_'",
        )
        _add_flag(
            group,
            "--dedupe",
            "keep one copy of identical files (smallest path; the others are rejected as duplicate)",
        )
        add(
            "--annotations",
            choices=ANNOTATION_KINDS,
            help="boxes (and masks) per image from coco (instances JSON), voc (Annotations/*.xml) or "
            "yolo (labels/*.txt) annotations: detection records (the Object Detection API's keys)",
        )
        add(
            "--annotations_path",
            help="where the annotations are when not in the format's standard place: COCO instances "
            "files (a.json,b.json or train=a.json,validation=b.json), VOC's XML folder, YOLO's data.yaml "
            "or labels folder",
        )
        _add_flag(group, "--masks", "store a PNG mask per object (COCO polygons and RLE, YOLO segmentation)")
        _add_flag(
            group,
            "--allow_unmatched_annotations",
            "go on when most pictures have no annotation or most annotations name no picture (a warning)",
        )
        add(
            "--unannotated",
            default=default_of(AnnotationOptions, "unannotated"),
            choices=UNANNOTATED,
            help="an image no annotation names: keep it as a negative, or drop it (an unannotated reject)",
        )
        add(
            "--num_shards",
            type=int,
            help="shards per split (default: from --shard_size_mb, at least one per worker)",
        )
        add(
            "--shard_size_mb",
            type=float,
            default=default_of(ConvertConfig, "shard_size_mb"),
            help="target shard size when --num_shards is not given",
        )
        add("--compression", default=default_of(ConvertConfig, "compression"), choices=COMPRESSIONS)
        add("--image_format", default=default_of(ImageOptions, "image_format"), choices=IMAGE_FORMATS)
        add("--jpeg_quality", type=int, default=default_of(ImageOptions, "jpeg_quality"))
        add("--resize", help="WIDTHxHEIGHT, e.g. 224x224")
        add("--resize_mode", default=default_of(ImageOptions, "resize_mode"), choices=RESIZE_MODES)
        add("--channels", type=int, choices=(1, 3), help="force grayscale (1) or RGB (3)")
        add(
            "--max_pixels",
            type=int,
            default=default_of(ImageOptions, "max_pixels"),
            help="reject images with more pixels",
        )
        add(
            "--max_file_mb",
            type=float,
            default=default_of(ImageOptions, "max_file_mb"),
            help="reject larger files as too_large from their listed size, before reading them",
        )
        add("--schema", default=default_of(ConvertConfig, "schema"), choices=SCHEMAS)
        _add_flag(group, "--overwrite", "replace the shards and metadata of an earlier run")
        _add_flag(
            group,
            "--no_resume",
            "start clean even when the output holds an interrupted run of the same command "
            "(by default its finished shards are kept, once proven complete)",
        )
        add(
            "--sink",
            default=default_of(ConvertConfig, "sink"),
            choices=SINKS,
            help="paths: shards planned on paths, each written whole by one worker (no image bytes "
            "shuffled); beam: Beam's WriteToTFRecord (shuffles every record once)",
        )
        add(
            "--decode_threads",
            type=int,
            help="threads that read and decode inside one shard task (default: 8 for gs:// input; "
            "locally 2 for one in-process worker, 1 per worker process)",
        )
        add(
            "--gcs_timeout_s",
            type=float,
            default=gcs.DEFAULT_TIMEOUT_S,
            help="seconds a gs:// request may wait for a connection or for the next part of its "
            "answer before it is abandoned and retried with backoff (reads, listing, writes)",
        )
        add(
            "--feature_model",
            help="store this backbone's features (no classifier) in every record: a Keras application ("
            + ", ".join(feature_options.KERAS_NAMES)
            + "), or torchvision:NAME or timm:NAME (PyTorch, pip install .[torch])",
        )
        add(
            "--model_weights",
            default=default_of(FeatureOptions, "model_weights"),
            help="--feature_model weights: imagenet (Keras's or torch's cache on local runs), none (random), "
            "or a weights file (local or gs://; a state_dict for PyTorch)",
        )
        add(
            "--model_path",
            help="a model file (local or gs://) whose output is stored: .keras/.h5 or a SavedModel folder "
            "(Keras), .onnx (ONNX Runtime), .pt/.pth TorchScript or .pt2 torch.export (PyTorch)",
        )
        add(
            "--model_input_normalization",
            default=default_of(FeatureOptions, "input_normalization"),
            choices=feature_options.NORMALIZATIONS,
            help="what a --model_path model is fed: none (RGB 0..255), unit (0..1) or imagenet "
            "(0..1 less ImageNet's mean, over its std, per channel: torchvision's and timm's)",
        )
        add(
            "--model_input_size",
            help="WIDTHxHEIGHT a --model_path model is fed when its file fixes none (TorchScript, an ONNX "
            "model with free spatial axes)",
        )
        add(
            "--inference_batch_size",
            type=int,
            default=default_of(FeatureOptions, "batch_size"),
            help="images per model call",
        )
        add(
            "--feature_pooling",
            default=default_of(FeatureOptions, "pooling"),
            choices=feature_options.POOLINGS,
            help="pool the spatial axes",
        )
        add(
            "--feature_dtype",
            default=default_of(FeatureOptions, "dtype"),
            choices=feature_options.DTYPES,
            help="float16 is stored as bytes",
        )
        add(
            "--feature_precision",
            default=default_of(FeatureOptions, "precision"),
            choices=feature_options.PRECISIONS,
            help="mixed: --feature_model runs under Keras's mixed_float16 policy (GPU tensor cores); "
            "features are stored as --feature_dtype either way",
        )
        add(
            "--model_copies",
            type=int,
            help="feature models per machine, shared by all its worker processes (RunInference's "
            "model_copies); 0: one in every worker process (default: 1 on a machine with a GPU, else 0)",
        )
        _add_flag(group, "--features_only", "drop the encoded image from feature records")
        _add_flag(group, "--no_progress", "no progress line on local runs")
        _add_flag(
            group,
            "--no_wait",
            "remote runners: return once the job is submitted instead of waiting to print the summary",
        )
        add(
            "--dry_run_output",
            default="dataflow_job.json",
            help="with Beam's --dry_run and --runner=DataflowRunner: where the translated job goes",
        )


def our_option_names() -> list[str]:
    """The dests ConvertOptions declares (the Flex Template's parameters, among others)."""
    return sorted(ConvertOptions().get_all_options(current_only=True))


def _refuse(message: str) -> None:
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
        parser.error = _refuse  # type: ignore[method-assign]
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
    `--help` prints every option (Beam's, then ours) and exits 0, as argparse does."""
    argv = list(argv)
    try:
        runner = runners.load_runner(_runner_named(argv))
    except ConfigError as error:
        raise UsageError(f"--{error}") from None
    if "--help" in argv or "-h" in argv:  # before Beam's base parser prints an empty help
        _beam_parser([]).print_help()
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


def check_conflicts(settings: RunSettings, given: set[str], local: bool) -> None:
    """Refuse settings that contradict each other, instead of quietly letting one win."""
    if "num_shards" in given and "shard_size_mb" in given:
        raise UsageError(
            "--num_shards and --shard_size_mb exclude each other: the shard count is either given "
            "or derived from the target size"
        )
    if local and not settings.wait:
        raise UsageError("--no_wait is for remote runners: a local run ends before the command returns")


@dataclass(frozen=True)
class RunSettings:
    """The checked options: the library's configs, and how this command runs them."""

    source: SourceConfig
    config: ConvertConfig
    label_source: LabelSource  # the pattern compiled and the manifest loaded, once
    overwrite: bool
    resume: bool
    progress: bool
    wait: bool
    dry_run: bool
    dry_run_output: str


def dry_run_requested(options: PipelineOptions) -> bool:
    """Beam's `--dry_run` takes a value (`--dry_run=true`); read it as the boolean it means."""
    value = options.view_as(TestOptions).dry_run
    return parse_bool(value) if isinstance(value, str) else bool(value)


def _absolute(path: str) -> str:
    return path if "://" in path else os.path.abspath(path)


def check_options(options: PipelineOptions) -> RunSettings:
    """Turn parsed options into RunSettings, or raise UsageError naming the option."""
    try:
        return _check(options.view_as(ConvertOptions), dry_run_requested(options))
    except UsageError:
        raise
    except ConfigError as error:
        raise UsageError(usage_text(error)) from None
    except ValueError as error:
        raise UsageError(str(error)) from None


def _check(ns: ConvertOptions, dry_run: bool) -> RunSettings:
    source_input, output = _absolute(ns.input), _absolute(ns.output)
    if "://" not in source_input and not os.path.exists(source_input.split("*")[0].rstrip("/") or "/"):
        raise UsageError(f"--input {ns.input} does not exist")
    if output.rstrip("/") == source_input.rstrip("/") or output.startswith(source_input.rstrip("/") + "/"):
        raise UsageError(
            f"--output {ns.output} is inside --input {ns.input}: the input tree is never written to"
        )
    manifest = _absolute(ns.manifest) if ns.manifest else None
    annotations = _annotation_options(ns)
    source = SourceConfig(
        input=source_input,
        label_source=ns.label_source,
        label_pattern=ns.label_pattern,
        manifest=manifest,
        class_names=tuple(c.strip() for c in ns.class_names.split(",") if c.strip())
        if ns.class_names
        else None,
        splits=_splits(ns, annotations),
        split_seed=ns.split_seed,
        stratify=ns.stratify,
        group_pattern=ns.group_pattern,
        manifest_path_column=ns.manifest_path_column,
        manifest_label_column=ns.manifest_label_column,
        extra_columns=parse_extra_columns(ns.extra_columns) if ns.extra_columns else (),
        multi_label=ns.multi_label,
        dedupe=ns.dedupe,
        annotations=annotations,
    )
    image = ImageOptions(
        image_format=ns.image_format,
        jpeg_quality=ns.jpeg_quality,
        resize=parse_size(ns.resize) if ns.resize else None,
        resize_mode=ns.resize_mode,
        max_pixels=ns.max_pixels,
        channels=ns.channels,
        max_file_mb=ns.max_file_mb,
    )
    config = ConvertConfig(
        output=output,
        schema=ns.schema,
        compression=ns.compression,
        image=image,
        features=_feature_options(ns),
        sink=ns.sink,
        num_shards=ns.num_shards,
        shard_size_mb=ns.shard_size_mb,
        # Without --decode_threads, pipelines.convert sets it once the workers are chosen.
        read_threads=ns.decode_threads if ns.decode_threads is not None else read_threads(source_input, None),
        gcs=gcs.GcsSettings(timeout_s=ns.gcs_timeout_s),
    )
    return RunSettings(
        source=source,
        config=config,
        label_source=_label_source(source, dry_run),
        overwrite=ns.overwrite,
        resume=not ns.no_resume,
        progress=not ns.no_progress,
        wait=not ns.no_wait,
        dry_run=dry_run,
        dry_run_output=ns.dry_run_output,
    )


def _splits(ns: ConvertOptions, annotations: AnnotationOptions | None) -> dict[str, float]:
    """--splits; left at its default in a run whose COCO files are given per split, those
    splits (each holds its file's images; the fractions only share out images no file names)."""
    named = annotations.split_names if annotations is not None else ()
    if named and ns.splits == _splits_text(default_of(SourceConfig, "splits")):
        return {name: 1 / len(named) for name in named}
    return parse_splits(ns.splits)


def _annotation_options(ns: ConvertOptions) -> AnnotationOptions | None:
    """A detection run's settings, or None (and then none of its options may be given)."""
    if ns.annotations is None:
        given = {
            "annotations_path": ns.annotations_path is not None,
            "masks": ns.masks,
            "unannotated": ns.unannotated != default_of(AnnotationOptions, "unannotated"),
            "allow_unmatched_annotations": ns.allow_unmatched_annotations,
        }
        for name, is_given in given.items():
            if is_given:
                raise UsageError(f"--{name} needs --annotations coco, voc or yolo")
        return None
    splits_given = ns.splits != _splits_text(default_of(SourceConfig, "splits"))
    return AnnotationOptions(
        ns.annotations,
        ns.annotations_path,
        ns.masks,
        ns.unannotated,
        ns.allow_unmatched_annotations,
        declared_splits=not splits_given,
    )


def _label_source(source: SourceConfig, dry_run: bool) -> LabelSource:
    """Compile the pattern and load the manifest now, so a bad one fails before any work."""
    path = source.manifest or ""
    if dry_run and "://" in path:
        raise UsageError(f"--manifest {path}: a dry run reads the manifest offline; pass a local copy")
    try:
        return label_source_for(source)
    except OSError as error:
        raise UsageError(f"--manifest {path} cannot be read: {error}") from None
    except Exception as error:
        if not path.startswith("gs://") or isinstance(error, ValueError):
            raise
        raise UsageError(gcs.describe("--manifest", path, error)) from None


# The options that only a feature model reads: each option's dest -> FeatureOptions' field.
FEATURE_FIELDS = {
    "model_weights": "model_weights",
    "feature_pooling": "pooling",
    "feature_dtype": "dtype",
    "features_only": "features_only",
    "inference_batch_size": "batch_size",
    "feature_precision": "precision",
    "model_copies": "model_copies",
    "model_input_normalization": "input_normalization",
    "model_input_size": "input_size",
}


def _height_width(text: str | None) -> tuple[int, int] | None:
    """--model_input_size WIDTHxHEIGHT (as --resize is written) -> (height, width), the library's order."""
    if text is None:
        return None
    try:
        width, height = parse_size(text)
    except ValueError as error:
        raise UsageError(f"--model_input_size {error}") from None
    return height, width


def _feature_options(ns: ConvertOptions) -> feature_options.FeatureOptions | None:
    """The feature model's options, or None when no model is asked for (and none of its options)."""
    if not ns.feature_model and not ns.model_path:
        given = [
            name
            for name, field in FEATURE_FIELDS.items()
            if getattr(ns, name) != default_of(feature_options.FeatureOptions, field)
        ]
        if given:
            raise UsageError(f"--{given[0]} needs --feature_model or --model_path")
        return None
    options = feature_options.FeatureOptions(  # checks itself: a contradiction comes first
        feature_model=ns.feature_model,
        model_weights=ns.model_weights,
        model_path=ns.model_path,
        pooling=ns.feature_pooling,
        dtype=ns.feature_dtype,
        features_only=ns.features_only,
        batch_size=ns.inference_batch_size,
        precision=ns.feature_precision,
        model_copies=ns.model_copies,
        input_normalization=ns.model_input_normalization,
        input_size=_height_width(ns.model_input_size),
    )
    model_path = ns.model_path
    if model_path and "://" not in model_path:
        if not os.path.exists(model_path):
            raise UsageError(f"--model_path {model_path} does not exist")
        model_path = os.path.abspath(model_path)
    weights = ns.model_weights
    if weights not in ("imagenet", "none") and "://" not in weights:
        weights = os.path.abspath(weights)
    return dataclasses.replace(options, model_path=model_path, model_weights=weights)
