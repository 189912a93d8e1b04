"""The labels step of a run without annotations: which listed file may become a record, and with
which label (its folder, its file name, a manifest's row, or none), the run's class names, each
file's manifest values, and the rejects the listing already tells (`skipped`, `unlabeled`,
`unknown_class`, `bad_manifest_value`).

An annotated run's labels are its annotations' (plan.annotating); both give `Candidates`.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass, field

from beam_tfrecord import reasons, storage
from beam_tfrecord.config_base import ConfigError
from beam_tfrecord.elements import Extras, RejectLine
from beam_tfrecord.plan import columns as columns_lib
from beam_tfrecord.plan import labels as labels_lib
from beam_tfrecord.plan.columns import ExtraColumn
from beam_tfrecord.plan.listing import InputFile, skip_reason
from beam_tfrecord.plan.source_config import SourceConfig
from beam_tfrecord.plan.sources import registry

__all__ = [
    "Candidates",
    "LabelSource",
    "Labeled",
    "label_files",
    "label_ids",
    "label_source_for",
    "label_texts",
]


@dataclass(frozen=True)
class LabelSource:
    """Where labels come from: `mode` is one of labels.LABEL_MODES."""

    mode: str = "folder"
    pattern: re.Pattern[str] | None = None
    manifest: labels_lib.Manifest | None = None

    def entry_of(self, relpath: str) -> labels_lib.ManifestRow | None:
        """The file's label (and, from a manifest, its group and extra values); None unlabeled."""
        if self.mode == "none":
            return None
        if self.mode == "folder":
            return labels_lib.ManifestRow(labels_lib.label_from_folder(relpath))
        if self.mode == "filename":
            assert self.pattern is not None
            return labels_lib.ManifestRow(labels_lib.label_from_filename(relpath, self.pattern))
        if self.mode == "manifest":
            assert self.manifest is not None
            return self.manifest.row_of(relpath)
        raise ValueError(f"label_source must be one of {labels_lib.LABEL_MODES}, not {self.mode!r}")

    def class_name_of(self, relpath: str) -> str | tuple[str, ...] | None:
        entry = self.entry_of(relpath)
        return entry.class_name if entry is not None else None

    def is_manifest(self, path: str) -> bool:
        """Whether a listed file is the manifest itself (a manifest kept beside the images)."""
        if self.manifest is None or self.manifest.path is None:
            return False
        return storage.same_file(path, self.manifest.path)  # symlinks either side


def label_source_for(source: SourceConfig) -> LabelSource:
    """The runtime label source of a config: the pattern compiled, the manifest loaded."""
    pattern = manifest = None
    if source.label_source == "filename":
        pattern = labels_lib.compile_label_pattern(source.label_pattern or "")
    if source.label_source == "manifest":
        path = source.manifest or ""
        columns = labels_lib.ManifestColumns(
            path=source.manifest_path_column,
            label=source.manifest_label_column,
            extra=tuple(c.name for c in source.extra_columns),
            multi_label=source.multi_label,
        )
        manifest = labels_lib.Manifest.load(storage.absolute(path), columns)
    return LabelSource(source.label_source, pattern, manifest)


Labeled = list[tuple[InputFile, labels_lib.ManifestRow | None]]  # a file and its label entry


@dataclass(frozen=True)
class Candidates:
    """What the labels step gives the splits: the files that may become records, each with its
    label entry (None: no label of its own, as an annotated run's pictures), the run's class
    names in id order (None for an unlabeled run), and each file's typed manifest values."""

    files: Labeled
    class_names: list[str] | None
    extras: dict[str, Extras] = field(default_factory=dict)


def label_files(
    files: Sequence[InputFile],
    source: SourceConfig,
    label_source: LabelSource,
    known_class_names: Sequence[str] | None,
    rejects: list[RejectLine],
) -> Candidates:
    """The labels of a run without annotations. `known_class_names`: the dataset an append grows
    (its ids kept, a class seen first now gets the next id); the rejects go to `rejects`."""
    _refuse_other_layouts(files, source, label_source)
    labeled = _labeled_files(files, label_source, rejects)
    fixed = source.class_names
    if known_class_names is not None and not fixed:
        found = {name for _, entry in labeled if entry is not None for name in _names(entry.class_name)}
        fixed = (*known_class_names, *sorted(found - set(known_class_names)))
    class_names, labeled = _known_classes(labeled, label_source, fixed, rejects)
    extras, labeled = _typed_columns(labeled, source.extra_columns, rejects)
    return Candidates(labeled, class_names, extras)


def _refuse_other_layouts(
    files: Sequence[InputFile], source: SourceConfig, label_source: LabelSource
) -> None:
    """A class-folder run over a tree of another task's labels (a VOC segmentation tree, COCO's
    folders) would make classes of its folders (`JPEGImages`, `SegmentationClass`) and exit 0:
    it fails in one line naming the option to pass, unless `--task classification` says so."""
    if label_source.mode != "folder" or source.classification_asked:
        return
    found = registry.annotated_layout(files)
    if found is not None:
        raise ConfigError(
            "task",
            f"is not given, and --input holds {found}; or --task classification to take its folders "
            "as classes all the same",
        )


def _labeled_files(
    files: Sequence[InputFile], label_source: LabelSource, rejects: list[RejectLine]
) -> Labeled:
    """Every listed file that may become a record, with its label entry; clutter is `skipped`,
    what the listing already found broken and files without a label are rejects."""
    labeled: Labeled = []
    for file in files:
        reason = skip_reason(file.relpath)
        if reason is None and label_source.is_manifest(file.path):
            reason = "the manifest file, not an image"
        if reason is not None:
            rejects.append(RejectLine(file.relpath, reasons.SKIPPED.code, reason))
            continue
        if file.problem is not None:  # known from the listing: a broken link, a loop, a FIFO
            rejects.append(RejectLine(file.relpath, *file.problem))
            continue
        try:  # a page (`--pages each`) is labelled as its file is
            labeled.append((file, label_source.entry_of(file.file_relpath)))
        except labels_lib.Unlabeled as error:
            rejects.append(RejectLine(file.relpath, reasons.UNLABELED.code, str(error)))
    return labeled


def _known_classes(
    labeled: Labeled,
    label_source: LabelSource,
    fixed_class_names: Sequence[str] | None,
    rejects: list[RejectLine],
) -> tuple[list[str] | None, Labeled]:
    """The class names (None for an unlabeled run) and the files whose every class is one of
    them; a class outside fixed names is an `unknown_class` reject."""
    if label_source.mode == "none":
        return None, labeled
    class_names = labels_lib.class_names_from(
        (name for _, entry in labeled if entry is not None for name in _names(entry.class_name)),
        fixed_class_names,
    )
    known = set(class_names)
    kept = []
    for file, entry in labeled:
        unknown = [name for name in _names(entry.class_name if entry else None) if name not in known]
        if not unknown:
            kept.append((file, entry))
        else:
            detail = f"class {unknown[0]!r} is not in class_names"
            rejects.append(RejectLine(file.relpath, reasons.UNKNOWN_CLASS.code, detail))
    return class_names, kept


def _typed_columns(
    labeled: Labeled, columns: Sequence[ExtraColumn], rejects: list[RejectLine]
) -> tuple[dict[str, Extras], Labeled]:
    """Each file's manifest column values, typed; a value of the wrong type is a
    `bad_manifest_value` reject, before any image is read."""
    if not columns:
        return {}, labeled
    extras: dict[str, Extras] = {}
    kept = []
    for file, entry in labeled:
        values = entry.values if entry is not None else {}
        try:
            extras[file.relpath] = tuple(
                (c.name, c.type, columns_lib.parse_value(c, values.get(c.name))) for c in columns
            )
            kept.append((file, entry))
        except columns_lib.BadValue as error:
            rejects.append(RejectLine(file.relpath, reasons.BAD_MANIFEST_VALUE.code, str(error)))
    return extras, kept


def _names(label: str | tuple[str, ...] | None) -> tuple[str, ...]:
    if label is None:
        return ()
    return label if isinstance(label, tuple) else (label,)


def label_ids(label: str | tuple[str, ...], ids: dict[str, int]) -> int | tuple[int, ...]:
    """A class id, or a multi-label's sorted ids."""
    if isinstance(label, tuple):
        return tuple(sorted(ids[name] for name in label))
    return ids[label]


def label_texts(label: str | tuple[str, ...], ids: dict[str, int]) -> str | tuple[str, ...]:
    """A class name, or a multi-label's names in the order of its ids (`label_ids`), so that
    `label[i]` and `text[i]` name the same class whatever class_names' order."""
    if isinstance(label, tuple):
        return tuple(sorted(label, key=ids.__getitem__))
    return label
