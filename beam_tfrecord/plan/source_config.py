"""What goes in: the plan stage's settings (`SourceConfig`), which check themselves when made and
say how summary.json records them."""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Literal

from beam_tfrecord.config_base import ConfigError, check_choice
from beam_tfrecord.plan.annotations.options import AnnotationOptions
from beam_tfrecord.plan.columns import ExtraColumn, parse_extra_columns
from beam_tfrecord.plan.labels import LABEL_MODES, compile_label_pattern

__all__ = ["LABEL_SOURCES", "LabelSourceName", "SourceConfig"]

LabelSourceName = Literal["folder", "filename", "manifest", "none"]
LABEL_SOURCES: tuple[str, ...] = LABEL_MODES


@dataclass(frozen=True)
class SourceConfig:
    """What goes in: where the images are, where their classes come from, how they split.

    Args:
      input: a directory (recursive), a glob or one file, local or gs://.
      label_source: folder (parent folder), filename (with `label_pattern`), manifest (with
        `manifest`) or none.
      label_pattern: a regular expression whose first group is the class, for `filename`.
      manifest: a CSV or JSONL file of path-or-id and label, for `manifest`.
      class_names: fixes the label ids (else the sorted names found).
      splits: split name -> fraction, summing to 1.
      split_seed: seed of the path hash that assigns splits.
      stratify: give every class each split's exact share.
      group_pattern: a regular expression whose first group, searched in the path relative to
        `input`, is the file's group: a group is split as one (never in two splits).
      manifest_path_column, manifest_label_column: the manifest's path-or-id and label columns
        (default: the first of the usual names present, see labels.PATH_COLUMNS).
      extra_columns: manifest columns stored in every record (`ExtraColumn`s, or their text,
        `caption,score:float`).
      multi_label: a label cell holds several classes (`cat|outdoor`, or a JSON array).
      dedupe: keep one copy of inputs with identical bytes (the smallest relative path).
      annotations: boxes and masks per image from COCO, VOC or YOLO annotations (a detection or
        segmentation run); the classes are the annotations', and `class_names` fixes their order.
    """

    input: str
    label_source: LabelSourceName = "folder"
    label_pattern: str | None = None
    manifest: str | None = None
    class_names: tuple[str, ...] | None = None
    splits: Mapping[str, float] = field(default_factory=lambda: {"train": 1.0})
    split_seed: int = 0
    stratify: bool = False
    group_pattern: str | None = None
    manifest_path_column: str | None = None
    manifest_label_column: str | None = None
    extra_columns: tuple[ExtraColumn, ...] = ()
    multi_label: bool = False
    dedupe: bool = False
    annotations: AnnotationOptions | None = None

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
        if not self.splits:
            raise ConfigError("splits", "must name at least one split")
        if not math.isclose(sum(self.splits.values()), 1.0, abs_tol=1e-6):
            raise ConfigError("splits", f"fractions must sum to 1, not {sum(self.splits.values()):g}")
        object.__setattr__(self, "splits", dict(self.splits))
        if self.class_names is not None:
            object.__setattr__(self, "class_names", tuple(self.class_names))
        if self.annotations is not None:
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

    def summary_fields(self) -> dict[str, Any]:
        """How summary.json's `options` record these settings, field by field (a column as
        `name:type`, as extra_columns is written)."""
        return {
            "input": self.input,
            "label_source": self.label_source,
            "label_pattern": self.label_pattern,
            "manifest": self.manifest,
            "class_names": list(self.class_names) if self.class_names is not None else None,
            "splits": dict(self.splits),
            "split_seed": self.split_seed,
            "stratify": self.stratify,
            "group_pattern": self.group_pattern,
            "manifest_path_column": self.manifest_path_column,
            "manifest_label_column": self.manifest_label_column,
            "extra_columns": [str(column) for column in self.extra_columns],
            "multi_label": self.multi_label,
            "dedupe": self.dedupe,
            **(self.annotations.summary_fields() if self.annotations is not None else {}),
        }
