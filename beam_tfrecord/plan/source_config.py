"""What goes in: the plan stage's settings (`SourceConfig`), which check themselves when made and
say how summary.json records them."""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Literal

from beam_tfrecord import tasks
from beam_tfrecord.config_base import (
    GCS_OBJECT,
    GCS_PATH,
    Config,
    ConfigError,
    check_choice,
    documented,
    setting,
)
from beam_tfrecord.plan.annotations.options import AnnotationConfig
from beam_tfrecord.plan.columns import COLUMN_TYPES, ExtraColumn, parse_extra_columns
from beam_tfrecord.plan.labels import LABEL_COLUMNS, LABEL_MODES, PATH_COLUMNS, compile_label_pattern
from beam_tfrecord.plan.splits import format_splits, parse_splits

__all__ = ["LABEL_SOURCES", "LabelSourceName", "SourceConfig"]

LabelSourceName = Literal["folder", "filename", "manifest", "none"]
LABEL_SOURCES: tuple[str, ...] = LABEL_MODES
_COLUMN = "[a-z][a-z0-9_]*(:(" + "|".join(COLUMN_TYPES) + "))?"


def _names(text: str) -> tuple[str, ...]:
    """`cat, dog` -> ("cat", "dog"): --class_names as written."""
    return tuple(name.strip() for name in text.split(",") if name.strip())


def _checked_bands(bands: tuple[str, ...]) -> tuple[str, ...]:
    """--bands as given, each a word a path can hold (no separator), none twice (case ignored)."""
    if not bands:
        raise ConfigError("bands", "must name at least one band")
    for band in bands:
        if any(mark in band for mark in "_-./ ") or not band:
            raise ConfigError(
                "bands", f"{band!r} is no word of a path: a band's name holds no _ - . / or space"
            )
    seen: dict[str, str] = {}
    for band in bands:
        if band.lower() in seen:
            raise ConfigError(
                "bands", f"names {seen[band.lower()]!r} and {band!r}: one band twice (case is ignored)"
            )
        seen[band.lower()] = band
    return bands


@documented
@dataclass(frozen=True)
class SourceConfig(Config):
    """What goes in: where the images are, where their classes come from, how they split."""

    input: str = setting(
        shapes_records=False,
        details="a directory (recursive), a glob (`'data/*/*.jpg'`) or one file",
        group="input and labels",
        label="Input images",
        pattern=GCS_PATH,
        help="a directory (recursive), a glob ('data/*/*.jpg') or one file; local or gs://",
    )
    bands: tuple[str, ...] | None = setting(
        None,
        details="`NAME,...`: bands kept as files of their own (`train_red/red_patch_1.TIF`), "
        "matched by a word of the path, in this order "
        "([scientific](scientific.md#bands-kept-in-separate-files))",
        default_doc="one file, one picture",
        group="input and labels",
        label="Bands in separate files",
        parse=_names,
        text=",".join,
        record_text=list,
        record_value=tuple,
        record_default=False,
        pattern="^[^,_./ -]+(,[^,_./ -]+)*$",
        help="NAME,... each band is a file of its own, matched by a word of its path (train_red/"
        "red_patch_1.TIF), stacked in this order",
    )
    label_source: LabelSourceName = setting(
        "folder",
        details="`folder` (the parent folder is the class), `filename` (`--label_pattern`), `manifest` "
        "(`--manifest`) or `none` (Beam's `--labels` are Dataflow job labels)",
        group="input and labels",
        label="Label source",
        choices=LABEL_SOURCES,
        help="folder (the parent folder is the class), filename (--label_pattern), manifest "
        "(--manifest) or none (Beam's --labels are Dataflow job labels)",
    )
    label_pattern: str | None = setting(
        None,
        details="regex whose first group is the class, e.g. `'^(cat|dog)\\.'` for `cat.1999.jpg`",
        group="input and labels",
        label="File-name label pattern",
        help=r"regex whose group 1 is the class, for --label_source filename, e.g. '^(cat|dog)\.'",
    )
    manifest: str | None = setting(
        None,
        details="CSV (with a header) or JSONL of paths or ids (extension optional) and labels, "
        "relative to `--input`",
        group="input and labels",
        label="Label manifest",
        pattern=GCS_OBJECT,
        help="CSV (with a header) or JSONL of path-or-id and label, for --label_source manifest; "
        "paths relative to --input",
    )
    class_names: tuple[str, ...] | None = setting(
        None,
        details="`a,b,c` fixes label ids; other classes are rejected as `unknown_class`",
        default_doc="sorted names",
        group="input and labels",
        label="Class names",
        parse=_names,
        text=",".join,
        record_text=list,
        record_value=tuple,
        pattern="^[^,]+(,[^,]+)*$",
        help="comma-separated class names fixing the label ids (default: the sorted names found)",
    )
    splits: Mapping[str, float] = setting(
        details="`NAME=FRACTION,...` instead of the dataset's own splits; a file's split hashes its "
        "path ([usage](usage.md#how-splits-are-made))",
        factory=lambda: {"train": 1.0},
        option_default=None,  # unset: told apart from an explicit `--splits train=1`
        default_doc="`train=1`",
        group="splits and shards",
        label="Splits",
        parse=parse_splits,
        text=format_splits,
        record_text=dict,
        pattern="^[A-Za-z0-9_-]+=[0-9]*[.]?[0-9]+(,[A-Za-z0-9_-]+=[0-9]*[.]?[0-9]+)*$",
        help="NAME=FRACTION,... e.g. train=0.8,validation=0.2",
    )
    split_seed: int = setting(
        0,
        group="splits and shards",
        label="Split seed",
        value_type=int,
        help="seed of the path hash that assigns splits",
    )
    stratify: bool = setting(
        False,
        details="every class gets each split's exact share (adding files may then move others)",
        group="splits and shards",
        label="Stratify splits",
        value_type=bool,
        help="give every class each split's exact share",
    )
    group_pattern: str | None = setting(
        None,
        details="regex whose first group in the relative path is the file's group, split as one:"
        " `'(p\\d+)_'` ([usage](usage.md#splits-that-cannot-leak))",
        default_doc="none",
        group="splits and shards",
        label="Group pattern",
        help=r"regex whose group 1, searched in the path, is the file's group; a group is never "
        r"split, e.g. '(p\d+)_'",
    )
    manifest_path_column: str | None = setting(
        None,
        details="the `--manifest` column of paths or ids, e.g. `id`",
        default_doc="the first there of " + ", ".join(f"`{name}`" for name in PATH_COLUMNS),
        group="input and labels",
        label="Manifest path column",
        pattern="^[^,]+$",
        help="the --manifest column of paths or ids (default: path, filename, file, image, id, ...)",
    )
    manifest_label_column: str | None = setting(
        None,
        details="the `--manifest` column of classes, e.g. `breed`",
        default_doc="the first there of " + ", ".join(f"`{name}`" for name in LABEL_COLUMNS),
        group="input and labels",
        label="Manifest label column",
        pattern="^[^,]+$",
        help="the --manifest column of classes (default: label, class, category, ...)",
    )
    extra_columns: tuple[ExtraColumn, ...] = setting(
        (),
        details="`NAME[:TYPE],...`: manifest columns stored in every record, TYPE `str`, `int`, `float` "
        "or a `_list` of one ([usage](usage.md#manifests-that-carry-more-than-a-label))",
        default_doc="none",
        group="input and labels",
        label="Extra manifest columns",
        parse=parse_extra_columns,
        text=lambda columns: ",".join(map(str, columns)),
        record_text=lambda columns: [str(column) for column in columns],
        record_value=lambda texts: parse_extra_columns(",".join(texts)) if texts else (),
        pattern=f"^{_COLUMN}(,{_COLUMN})*$",
        help="NAME[:TYPE],... manifest columns stored in every record; TYPE str (default), int, "
        "float, str_list, int_list or float_list",
    )
    multi_label: bool = setting(
        False,
        details="a manifest label holds several classes (`cat|outdoor` or a JSON array), stored as ids",
        group="input and labels",
        label="Multi-label",
        value_type=bool,
        help="a manifest label holds several classes (cat|outdoor, or a JSON array)",
    )
    keep_split_names: bool = setting(
        False,
        details="the dataset's split names (VOC's `val`, `train_aug`, `trainval`; a `val/` folder), for "
        "DeepLab's and the Object Detection API's scripts; VOC, YOLO's `data.yaml` and split folders "
        "only ([recipe](recipe-voc-deeplab.md))",
        group="splits and shards",
        label="Dataset's split names",
        record_default=False,
        value_type=bool,
        help="keep the split names the dataset declares (val, train_aug, trainval) instead of "
        "train, validation, test",
    )
    overlapping_splits: bool = setting(
        False,
        details="with `--keep_split_names`: also keep lists repeating earlier ones' pictures, a picture "
        "then written in each of its splits",
        group="splits and shards",
        label="Overlapping splits",
        record_default=False,
        value_type=bool,
        help="with --keep_split_names: keep the lists that repeat pictures of others too (a picture "
        "is then in two splits)",
    )
    dedupe: bool = setting(
        False,
        shapes_records=False,
        details="keep one copy of identical files (the smallest path); the others are `duplicate` rejects",
        group="splits and shards",
        label="Drop exact duplicates",
        value_type=bool,
        help="keep one copy of identical files (the smallest path; the others are duplicate rejects)",
    )
    classification_asked: bool = setting(
        False,
        option=None,
        record=None,
        help="`--task classification` was given: a tree that holds another task's layout is converted "
        "all the same",
    )
    split_folders: bool = setting(
        True,
        option=None,
        record=None,
        help="a class-folder tree's split folders (train/, val/) are its splits; the command sets it "
        "off when --splits is given",
    )
    annotations: AnnotationConfig | None = setting(
        None,
        nested=AnnotationConfig,
        needs=("format", "task"),
        needs_text="--annotations (coco, voc, yolo, cityscapes, ade20k, folders) or --task",
    )

    def __post_init__(self) -> None:
        check_choice("label_source", self.label_source, LABEL_SOURCES)
        if isinstance(self.extra_columns, str):
            object.__setattr__(self, "extra_columns", parse_extra_columns(self.extra_columns))
        object.__setattr__(self, "extra_columns", tuple(self.extra_columns))
        manifest_only = {
            "extra_columns": bool(self.extra_columns),
            "multi_label": self.multi_label,
            "manifest_path_column": bool(self.manifest_path_column),
            "manifest_label_column": bool(self.manifest_label_column),
        }
        for name, given in manifest_only.items():
            if given and self.label_source != "manifest":
                raise ConfigError(name, "reads the manifest: it needs label_source manifest")
        if self.group_pattern is not None:
            compile_label_pattern(self.group_pattern, "group_pattern", "the group")
        if self.label_source == "filename" and not self.label_pattern:
            raise ConfigError("label_pattern", "is needed with label_source filename, e.g. '^(cat|dog)\\.'")
        if self.label_source == "manifest" and not self.manifest:
            raise ConfigError("manifest", "is needed with label_source manifest (a CSV or JSONL file)")
        if self.overlapping_splits and not self.keep_split_names:
            raise ConfigError("overlapping_splits", "keeps the dataset's lists: it needs keep_split_names")
        if self.bands is not None:
            object.__setattr__(self, "bands", _checked_bands(tuple(self.bands)))
        if not self.splits:
            raise ConfigError("splits", "must name at least one split")
        if not math.isclose(sum(self.splits.values()), 1.0, abs_tol=1e-6):
            raise ConfigError("splits", f"fractions must sum to 1, not {sum(self.splits.values()):g}")
        object.__setattr__(self, "splits", dict(self.splits))
        if self.class_names is not None:
            object.__setattr__(self, "class_names", tuple(self.class_names))
        asked = self.annotations
        if (
            asked is not None
            and asked.format is None
            and tasks.task(asked.task or tasks.DEFAULT).listed_labels
        ):
            object.__setattr__(self, "annotations", None)  # `--task classification`: the default
            object.__setattr__(self, "classification_asked", True)
        if self.annotations is not None:
            if self.bands is not None:
                raise ConfigError(
                    "bands",
                    "stacks pictures of one label each: annotations of banded pictures are not read yet",
                )
            if self.label_source not in ("folder", "none"):
                raise ConfigError(
                    "label_source",
                    f"{self.label_source} gives one label per image; with annotations the objects' "
                    "classes are the labels (leave label_source out)",
                )
            if self.annotations.label_map and self.class_names is not None:
                raise ConfigError("label_map", "fixes the class names and their ids: leave class_names out")
            missing = [s for s in self.annotations.split_names if s not in self.splits]
            if missing:
                raise ConfigError(
                    "splits", f"must name the annotation files' splits ({', '.join(missing)}) too"
                )

    @property
    def image_labels(self) -> bool:
        """Whether each image gets one label (or several): not in a detection run."""
        return self.annotations is None and self.label_source != "none"
