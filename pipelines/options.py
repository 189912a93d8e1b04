"""Command-line options of `python -m pipelines.convert`, checked before any work starts."""

from __future__ import annotations

import argparse
import os
from dataclasses import dataclass

from beam_tfrecord import features as features_lib
from beam_tfrecord import gcs
from beam_tfrecord import labels as labels_lib
from beam_tfrecord import schema as schema_lib
from beam_tfrecord.images import DEFAULT_MAX_PIXELS, ImageOptions, parse_size
from beam_tfrecord.plan import LabelSource
from beam_tfrecord.splits import parse_splits

REPO_ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SAMPLE_INPUT = os.path.join(REPO_ROOT, "sample", "shapes")


class UsageError(ValueError):
    """A bad option or input, reported as one clear line before any work starts."""


SMALL_RUN = 1000  # inputs; below this, starting worker processes costs more than they save


def default_decode_processes(input_path: str, inputs: int | None = None) -> int:
    """For local input, one worker process per core plus one (the launcher process writes the
    shard meanwhile): half of each image's work holds the GIL, so threads alone leave cores
    idle. On 2 cores, 8,000 images, one shard, medians of 3 interleaved runs: 4 threads
    1,377 images/s, 2 processes 1,646/s, 3 processes 1,733/s. Remote input waits on the
    network instead, which threads hide without extra processes; and a small run (the bundled
    sample) is over before the processes would have started."""
    if "://" in input_path or (inputs is not None and inputs < SMALL_RUN):
        return 1
    return (os.cpu_count() or 1) + 1


def default_decode_threads(input_path: str) -> int:
    """Threads per decode process: 1 for local files (processes do the work), 8 for gs://,
    where each read waits tens of milliseconds on the network."""
    return 8 if "://" in input_path else 1


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="python -m pipelines.convert",
        description="Convert a tree of images into sharded TFRecord files of tf.train.Example. "
        "Every standard Beam pipeline option (--runner, --direct_num_workers, ...) is accepted too.",
    )
    add = parser.add_argument
    add("--input", default=SAMPLE_INPUT, help="directory (recursive), glob or gs:// prefix of images")
    add("--output", default="output", help="directory for shards, labels.txt, rejects.jsonl, summary.json")
    add(
        "--labels",
        default="folder",
        choices=labels_lib.LABEL_MODES,
        help="where each file's class comes from",
    )
    add("--label_pattern", help=r"regex for --labels filename; group 1 is the class, e.g. '^(cat|dog)\.'")
    add("--manifest", help="CSV or JSONL with a path-or-id column and a label column, for --labels manifest")
    add("--class_names", help="comma-separated class names fixing the label ids (default: sorted names)")
    add("--splits", default="train=1", help="NAME=FRACTION,... e.g. train=0.8,validation=0.2")
    add("--split_seed", type=int, default=0, help="seed of the path hash that assigns splits")
    add_flag(parser, "--stratify", "give every class each split's exact share")
    add("--num_shards", type=int, help="shards per split (default: derived from --shard_size_mb)")
    add("--shard_size_mb", type=float, default=128.0, help="target shard size when --num_shards is not given")
    add("--compression", default="none", choices=("none", "gzip"))
    add("--image_format", default="original", choices=("original", "jpeg", "png"))
    add("--jpeg_quality", type=int, default=95)
    add("--resize", help="WIDTHxHEIGHT, e.g. 224x224")
    add("--resize_mode", default="stretch", choices=("stretch", "crop", "pad"))
    add("--channels", type=int, choices=(1, 3), help="force grayscale (1) or RGB (3)")
    add("--max_pixels", type=int, default=DEFAULT_MAX_PIXELS, help="reject images with more pixels")
    add("--schema", default="tfds", choices=schema_lib.SCHEMAS)
    add_flag(parser, "--overwrite", "replace the shards and metadata of an earlier run")
    add(
        "--sink",
        default="auto",
        choices=("auto", "paths", "beam"),
        help="auto: 'paths' (shards planned on paths, written whole by one worker) on local runners, "
        "'beam' (WriteToTFRecord) on remote runners",
    )
    add(
        "--decode_processes",
        type=int,
        help="worker processes that read and decode for each shard writer, 'paths' sink "
        "(default: one per core plus one for local input, 1 for gs:// input)",
    )
    add(
        "--decode_threads",
        type=int,
        help="read/decode threads in each of those processes, to hide read latency "
        "(default: 1 for local input, 8 for gs:// input)",
    )
    add(
        "--feature_model",
        choices=tuple(features_lib.BACKBONES),
        help="store this Keras application's features (no classifier) in every record",
    )
    add(
        "--model_weights",
        default="imagenet",
        help="--feature_model weights: imagenet (Keras's cache, ~/.keras/models), none (random), or a "
        "weights file (local or gs://)",
    )
    add("--model_path", help="a .keras file or SavedModel folder (local or gs://) whose output is stored")
    add("--inference_batch_size", type=int, default=32, help="images per model call")
    add("--feature_pooling", default="none", choices=features_lib.POOLINGS, help="pool the spatial axes")
    add("--feature_dtype", default="float32", choices=features_lib.DTYPES, help="float16 is stored as bytes")
    add_flag(parser, "--features_only", "drop the encoded image from feature records")
    add_flag(parser, "--no_progress", "no progress line on local runs")
    add_flag(
        parser,
        "--dry_run",
        "with --runner=DataflowRunner: build and translate the job offline, write its description "
        "to --dry_run_output, submit nothing",
    )
    add("--dry_run_output", default="dataflow_job.json", help="where --dry_run writes the job JSON")
    return parser


def parse_bool(value: str) -> bool:
    """`true`/`false` (any case), also `1`/`0` and `yes`/`no`, as a Flex Template passes them."""
    lowered = value.strip().lower()
    if lowered in ("true", "1", "yes"):
        return True
    if lowered in ("false", "0", "no"):
        return False
    raise argparse.ArgumentTypeError(f"expected true or false, not {value!r}")


def add_flag(parser: argparse.ArgumentParser, name: str, help_text: str) -> None:
    """A boolean option that works both as `--name` and as `--name=true|false`.

    A Flex Template launcher passes every parameter as `--name=value`; a store_true flag would
    reject that.
    """
    parser.add_argument(name, nargs="?", const=True, default=False, type=parse_bool, help=help_text)


@dataclass(frozen=True)
class ConvertArgs:
    """The parsed, checked options that are this project's (Beam's own stay in PipelineOptions)."""

    input: str
    output: str
    label_source: LabelSource
    class_names: list[str] | None
    splits: dict[str, float]
    split_seed: int
    stratify: bool
    num_shards: int | None
    shard_size_mb: float
    compression: str
    image_options: ImageOptions
    schema: str
    overwrite: bool
    progress: bool
    sink: str
    decode_threads: int
    decode_processes: int | None  # None: default_decode_processes, once the plan is known
    raw: dict[str, object]
    features: features_lib.FeatureOptions | None = None
    dry_run: bool = False
    dry_run_output: str = "dataflow_job.json"


def _absolute(path: str) -> str:
    return path if "://" in path else os.path.abspath(path)


def check_args(namespace: argparse.Namespace) -> ConvertArgs:
    """Turn parsed arguments into ConvertArgs, or raise UsageError naming the option."""
    try:
        return _check(namespace)
    except UsageError:
        raise
    except ValueError as error:
        raise UsageError(str(error)) from None


def _check(ns: argparse.Namespace) -> ConvertArgs:
    source_input, output = _absolute(ns.input), _absolute(ns.output)
    if "://" not in source_input and not os.path.exists(source_input.split("*")[0].rstrip("/") or "/"):
        raise UsageError(f"--input {ns.input} does not exist")
    if output.rstrip("/") == source_input.rstrip("/") or output.startswith(source_input.rstrip("/") + "/"):
        raise UsageError(
            f"--output {ns.output} is inside --input {ns.input}: the input tree is never written to"
        )
    pattern = manifest = None
    if ns.labels == "filename":
        if not ns.label_pattern:
            raise UsageError("--labels filename needs --label_pattern, e.g. '^(cat|dog)\\.'")
        pattern = labels_lib.compile_label_pattern(ns.label_pattern)
    if ns.labels == "manifest":
        if not ns.manifest:
            raise UsageError("--labels manifest needs --manifest PATH")
        try:
            manifest = labels_lib.Manifest.load(_absolute(ns.manifest))
        except OSError as error:
            raise UsageError(f"--manifest {ns.manifest} cannot be read: {error}") from None
        except Exception as error:
            if not ns.manifest.startswith("gs://") or isinstance(error, ValueError):
                raise
            raise UsageError(gcs.describe("--manifest", ns.manifest, error)) from None
    if ns.num_shards is not None and ns.num_shards < 1:
        raise UsageError("--num_shards must be at least 1")
    if ns.shard_size_mb <= 0:
        raise UsageError("--shard_size_mb must be positive")
    if not 1 <= ns.jpeg_quality <= 100:
        raise UsageError("--jpeg_quality must be in 1..100")
    if ns.decode_threads is not None and ns.decode_threads < 1:
        raise UsageError("--decode_threads must be at least 1")
    if ns.decode_processes is not None and ns.decode_processes < 1:
        raise UsageError("--decode_processes must be at least 1")
    if ns.max_pixels < 1:
        raise UsageError("--max_pixels must be positive")
    features = _feature_options(ns)
    class_names = [c.strip() for c in ns.class_names.split(",") if c.strip()] if ns.class_names else None
    image_options = ImageOptions(
        image_format=ns.image_format,
        jpeg_quality=ns.jpeg_quality,
        resize=parse_size(ns.resize) if ns.resize else None,
        resize_mode=ns.resize_mode,
        max_pixels=ns.max_pixels,
        channels=ns.channels,
    )
    return ConvertArgs(
        input=source_input,
        output=output,
        label_source=LabelSource(ns.labels, pattern, manifest),
        class_names=class_names,
        splits=parse_splits(ns.splits),
        split_seed=ns.split_seed,
        stratify=ns.stratify,
        num_shards=ns.num_shards,
        shard_size_mb=ns.shard_size_mb,
        compression=ns.compression,
        image_options=image_options,
        schema=ns.schema,
        overwrite=ns.overwrite,
        progress=not ns.no_progress,
        sink=ns.sink,
        decode_threads=ns.decode_threads or default_decode_threads(source_input),
        decode_processes=ns.decode_processes,
        raw=dict(vars(ns)),
        features=features,
        dry_run=ns.dry_run,
        dry_run_output=ns.dry_run_output,
    )


def _feature_options(ns: argparse.Namespace) -> features_lib.FeatureOptions | None:
    """The feature model's options, or None when no model is asked for (and none of its options)."""
    if ns.feature_model and ns.model_path:
        raise UsageError("--feature_model and --model_path exclude each other: pass one")
    if not ns.feature_model and not ns.model_path:
        given = [
            name
            for name, default in (
                ("model_weights", "imagenet"),
                ("feature_pooling", "none"),
                ("feature_dtype", "float32"),
                ("features_only", False),
                ("inference_batch_size", 32),
            )
            if getattr(ns, name) != default
        ]
        if given:
            raise UsageError(f"--{given[0]} needs --feature_model or --model_path")
        return None
    if ns.model_path and ns.model_weights != "imagenet":
        raise UsageError("--model_weights is for --feature_model; a --model_path model holds its weights")
    if ns.inference_batch_size < 1:
        raise UsageError("--inference_batch_size must be at least 1")
    model_path = ns.model_path
    if model_path and "://" not in model_path:
        if not os.path.exists(model_path):
            raise UsageError(f"--model_path {model_path} does not exist")
        model_path = os.path.abspath(model_path)
    weights = ns.model_weights
    if weights not in ("imagenet", "none") and "://" not in weights:
        weights = os.path.abspath(weights)
    return features_lib.FeatureOptions(
        feature_model=ns.feature_model,
        model_weights=weights,
        model_path=model_path,
        pooling=ns.feature_pooling,
        dtype=ns.feature_dtype,
        features_only=ns.features_only,
        batch_size=ns.inference_batch_size,
    )
