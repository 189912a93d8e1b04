"""The plan of a run, made from the listing alone: each input's label and split, the rejects
known before any byte is read, the class names and the shard count of each split.

It is small (paths and sizes) and deterministic, so the workers only read, decode and write.
"""

from __future__ import annotations

import dataclasses
import heapq
import logging
import posixpath
import re
from collections import Counter, defaultdict
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from beam_tfrecord import reasons, storage, tasks
from beam_tfrecord.config_base import ConfigError
from beam_tfrecord.elements import (
    DroppedObjectLine,
    Extras,
    ImageAnnotations,
    PlannedInput,
    RejectLine,
    ShardTask,
)
from beam_tfrecord.labels import Annotated, of_task
from beam_tfrecord.plan import bulk
from beam_tfrecord.plan import columns as columns_lib
from beam_tfrecord.plan import dedupe as dedupe_lib
from beam_tfrecord.plan import labels as labels_lib
from beam_tfrecord.plan import splits as splits_lib
from beam_tfrecord.plan.annotations import growing as growing_lib
from beam_tfrecord.plan.annotations.declared import SPLIT_ORDER, DeclaredSplits, split_name
from beam_tfrecord.plan.annotations.matching import (
    MatchCounts,
    MostlyUnmatched,
    NothingMatched,
    check_matches,
)
from beam_tfrecord.plan.annotations.results import AnnotationSet
from beam_tfrecord.plan.columns import ExtraColumn
from beam_tfrecord.plan.listing import InputFile, list_inputs, skip_reason
from beam_tfrecord.plan.sharding import ShardSettings
from beam_tfrecord.plan.source_config import SourceConfig
from beam_tfrecord.plan.sources import registry
from beam_tfrecord.plan.sources.base import LoadRequest, SourceError, SourceFormat

__all__ = [
    "AnnotationFacts",
    "GroupFacts",
    "KnownRecords",
    "LabelSource",
    "Plan",
    "label_source_for",
    "make_plan",
    "plan_inputs",
    "shard_tasks",
    "undeclared_split_warning",
]

_LOGGER = logging.getLogger(__name__)


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


@dataclass(frozen=True)
class GroupFacts:
    """How files were grouped for splitting: by group_pattern, by a manifest's `group` column,
    or not at all; `without_group` files kept their own path hash."""

    source: str | None = None  # "group_pattern" | "manifest" | None
    groups: int = 0
    grouped_files: int = 0
    without_group: int = 0


@dataclass(frozen=True)
class AnnotationFacts:
    """What planning learnt of an annotated run's annotations (whatever its kinds of label), for
    the summary and the side files; each kind's own facts are `Plan.kinds`'.

    Args:
      format: the annotations' format.
      unmatched: entries that name no listed picture, as JSON lines (annotations_without_image.jsonl).
      found_at: where the annotations were found, and how many pictures they matched.
      warnings: for the summary's warnings.
      split_source: where the splits came from, when the dataset declares its own.
    """

    format: str
    unmatched: tuple[str, ...] = ()
    found_at: str = ""
    warnings: tuple[str, ...] = ()
    split_source: str = ""


@dataclass
class Plan:
    inputs: list[PlannedInput]
    rejects: list[RejectLine]  # known from the listing: skipped, unlabeled, unknown_class
    class_names: list[str] | None  # None for an unlabeled run
    splits: dict[str, float]
    shard_counts: dict[str, int]
    listed: int
    manifest_unmatched: list[str] = field(default_factory=list)
    grouping: GroupFacts = field(default_factory=GroupFacts)
    groups: dict[str, str] = field(default_factory=dict)  # relpath -> group, for files that have one
    # An append's old pictures whose annotations changed since converted: (relpath, split).
    annotations_changed: list[tuple[str, str | None]] = field(default_factory=list)
    # Where a classification run's splits came from, when its tree declares them (split folders).
    split_source: str = ""
    task: str = tasks.DEFAULT  # the run's task (`tasks.TASKS`): its kinds of label
    annotations: AnnotationFacts | None = None  # an annotated run's
    # Each of the run's kinds of label's plan facts (`labels.LabelKind.plan_facts`), by kind name.
    kinds: dict[str, Any] = field(default_factory=dict)
    # Parts of labels left out while planning, one line each (dropped_objects.jsonl's).
    dropped: tuple[DroppedObjectLine, ...] = ()

    @property
    def unmatched_lines(self) -> tuple[str, ...]:
        """annotations_without_image.jsonl's lines (an annotated run's)."""
        return self.annotations.unmatched if self.annotations is not None else ()

    @property
    def skipped(self) -> int:
        return sum(1 for r in self.rejects if r.reason == reasons.SKIPPED.code)

    @property
    def input_count(self) -> int:
        """Inputs as the summary counts them: every listed file that is not skipped clutter."""
        return self.listed - self.skipped

    def bytes_per_split(self) -> dict[str, int]:
        totals = dict.fromkeys(self.splits, 0)
        for item in self.inputs:
            totals[item.split] += item.size
        return totals


Labeled = list[tuple[InputFile, labels_lib.ManifestRow | None]]  # a file and its label entry
DEFAULT_SHARDS = ShardSettings()


@dataclass(frozen=True)
class KnownRecords:
    """What an `--append` run's plan takes from the dataset it grows (output.append): its class
    names in id order (a class seen first now gets the next id), and the sha256 of every record
    it holds -> that record's relpath (with `dedupe`, a new file with those bytes is a
    `duplicate` reject naming it).

    A detection dataset's append also gives the whole listing (`listing`: its annotations are
    matched against every picture, old and new, as a run over all of them matches them), the
    relpaths the dataset's index holds (`indexed`: an entry naming one is an old picture's, never
    `unmatched`), the entries it already lists as naming no picture (`unmatched`: their
    growing.entry_key), how it was split (`split_method`, summary.json's: its declared
    splits stay declared), and, for the listed pictures it holds a record of, the digest of the
    objects each was made from and its split (`converted`: relpath -> (digest, split); those
    whose annotations now differ are the plan's `annotations_changed`; None: not compared)."""

    class_names: tuple[str, ...] | None = None
    hashes: Mapping[str, str] = field(default_factory=dict)
    listing: Sequence[InputFile] = ()
    indexed: frozenset[str] = frozenset()
    unmatched: frozenset[str] = frozenset()
    split_method: str | None = None
    converted: Mapping[str, tuple[str, str | None]] | None = None


def make_plan(
    files: Sequence[InputFile],
    source: SourceConfig,
    shards: ShardSettings = DEFAULT_SHARDS,
    label_source: LabelSource | None = None,
    known: KnownRecords | None = None,
) -> Plan:
    """Labels, groups, splits and shard counts from the listing (and, with `source.dedupe`, one
    hash of every candidate's bytes): the launcher's whole share of the work, in the steps below.

    `shards` says how many shards there will be (see sharding.shard_count). A file in a group
    (the first group of `source.group_pattern` in its path, else the manifest's `group` column)
    is split with its group. `label_source` passes one already loaded (the command loads the
    manifest early, to fail fast); by default it is made from `source`. `known`: the dataset an
    append grows (its label ids kept, its records' bytes known to dedupe).
    """
    with bulk.cycles_paused():  # a detection run makes an object per box: see plan.bulk
        return _make_plan(files, source, shards, label_source or label_source_for(source), known)


def _make_plan(
    files: Sequence[InputFile],
    source: SourceConfig,
    shards: ShardSettings,
    label_source: LabelSource,
    known: KnownRecords | None = None,
) -> Plan:
    rejects: list[RejectLine] = []
    annotated, match_counts, annotations_changed = _annotations(files, source, known)
    declared = _used_declared_splits(annotated, source)
    if annotated is not None and known is not None:
        _check_split_method(known, declared, source)
    if annotated is None:
        _refuse_other_layouts(files, source, label_source)
        labeled = _labeled_files(files, label_source, rejects)
        fixed = source.class_names
        if known is not None and known.class_names is not None and not fixed:
            found = {name for _, entry in labeled if entry is not None for name in _names(entry.class_name)}
            fixed = (*known.class_names, *sorted(found - set(known.class_names)))
        class_names, labeled = _known_classes(labeled, label_source, fixed, rejects)
        if label_source.mode == "folder":
            declared = _split_folders(labeled, source)
        if known is not None:  # a grown class-folder tree splits as it was split
            _check_split_method(known, declared, source)
    else:
        labeled = _annotated_files(files, annotated, source, rejects)
        named = any(kind.names_classes for kind in of_task(_task_of(source)))
        class_names = list(annotated.class_names) if named else None
        if known is not None and known.class_names is not None:
            class_names = list(_grown_classes(known.class_names, annotated, source))
        if declared is not None:
            labeled = _in_declared_splits(labeled, annotated, declared, rejects)
    extras, labeled = _typed_columns(labeled, source.extra_columns, rejects)
    if source.dedupe:
        objects = _objects_of(annotated) if annotated is not None else None
        labeled = _without_copies(labeled, rejects, known.hashes if known is not None else {}, objects)
    group_pattern = (
        labels_lib.compile_label_pattern(source.group_pattern, "group_pattern", "the group")
        if source.group_pattern
        else None
    )
    groups, grouping = _groups(labeled, group_pattern, label_source)
    strata = _object_strata(annotated) if annotated is not None else None
    splits = dict(source.splits)
    if declared is not None:  # the dataset's own splits, each holding its share of the pictures
        split_by_path = {f.relpath: declared.split_of[f.relpath] for f, _ in labeled}
        counts = Counter(split_by_path.values())
        splits = {name: counts[name] / max(1, len(labeled)) for name in declared.names}
    else:
        split_by_path = splits_lib.assign_splits(
            ((f.relpath, strata(f.relpath) if strata else _stratum(entry)) for f, entry in labeled),
            splits,
            source.split_seed,
            source.stratify,
            groups,
        )
    # A COCO file given per split (annotations are read only where the source has their options).
    if annotated is not None and source.annotations is not None and source.annotations.split_names:
        split_by_path.update({f.relpath: s for f, _ in labeled if (s := annotated.split_of(f.relpath))})
    ids = {name: i for i, name in enumerate(class_names or [])}
    notes = _notes_by_image(annotated) if annotated is not None else {}
    inputs = [
        PlannedInput(
            relpath=f.relpath,
            path=f.path,
            size=f.size,
            split=split_by_path[f.relpath],
            label=_ids(entry.class_name, ids) if entry is not None else None,
            label_text=_texts(entry.class_name, ids) if entry is not None else None,
            extras=extras.get(f.relpath, ()),
            annotations=_image_annotations(annotated, f.relpath, notes) if annotated is not None else None,
        )
        for f, entry in labeled
    ]
    plan = Plan(
        inputs=inputs,
        rejects=sorted(rejects),
        class_names=class_names,
        splits=splits,
        shard_counts=_shard_counts(inputs, splits, shards),
        listed=len(files),
        manifest_unmatched=label_source.manifest.unmatched() if label_source.manifest else [],
        grouping=grouping,
        groups=groups,
        annotations_changed=annotations_changed,
        split_source=f"declared by {declared.source}" if declared is not None and annotated is None else "",
    )
    if annotated is None:
        return plan
    return _with_annotation_facts(plan, annotated, source, declared, match_counts)


def _annotations(
    files: Sequence[InputFile], source: SourceConfig, known: KnownRecords | None = None
) -> tuple[AnnotationSet | None, MatchCounts | None, list[tuple[str, str | None]]]:
    """The annotation source's say on every listed file (None: not a detection run), how well
    it matched them, and an append's old pictures whose annotations changed (growing
    .changed_annotations); a source that matches none of the pictures, or (unless allowed) few
    of them, fails here, before any work (plan.annotations.matching).

    An append (`known` with its listing) reads the source against the whole listing and keeps the
    new files' share (plan.annotations.growing): the check is on the new pictures, the counts
    (for the summary) are a run's over all of them."""
    options = source.annotations
    if options is None:
        return None, None, []
    whole = known.listing if known is not None else ()
    changed: list[tuple[str, str | None]] = []
    task = options.task or "detection"
    try:
        fmt = (
            registry.named(options.format)
            if options.format
            else registry.find(task, whole or files, options.paths())
        )
    except SourceError as error:
        raise ConfigError(error.field, error.detail) from None
    request = LoadRequest(
        task,
        whole or files,
        options.paths(),
        class_names=source.class_names,
        masks=options.masks,
        label_map=options.label_map,
        ignore_value=options.ignore_value,
        train_ids=options.train_ids,
        declared_splits=options.declared_splits,
    )
    try:
        found = registry.load(fmt, request)
        counts = MatchCounts.of(found)
        # Pictures without a mask left out on purpose (`--unannotated drop`) are no poor match.
        allow = options.allow_unmatched_annotations or (
            not tasks.task(found.task).negatives and options.unannotated == "drop"
        )
        if known is not None and whole:
            new = {f.relpath for f in files}
            if known.converted is not None:
                changed = growing_lib.changed_annotations(found, known.converted)
            found = growing_lib.for_new_pictures(found, new, known.indexed, known.unmatched)
            warning = growing_lib.check_new_matches(found, counts, allow)
        else:
            warning = check_matches(found, allow)
    except (NothingMatched, MostlyUnmatched) as error:
        raise ConfigError("annotations", f"{fmt.name}: {error}") from None
    except ConfigError:
        raise
    except ValueError as error:  # SourceError names its setting; any other is the format's own
        raise _load_error(fmt, error) from None
    _LOGGER.info("%s; %s", found.found_at, counts.describe())
    if warning:
        _LOGGER.warning("%s", warning)
        found = dataclasses.replace(found, warnings=(*found.warnings, warning))
    return found, counts, changed


def _load_error(fmt: SourceFormat, error: ValueError) -> ConfigError:
    """A format's refusal as the setting it concerns says it; where its own files are at fault
    (`annotations`), the format is named: `--annotations (yolo): YOLO class names: ...`."""
    if isinstance(error, SourceError) and error.field != "annotations":
        return ConfigError(error.field, error.detail)
    detail = error.detail if isinstance(error, SourceError) else str(error)
    return ConfigError("annotations", f"({fmt.name}): {detail}")


SPLIT_FOLDERS = "the split folders (train/, val/, test/ above the class folders)"


def _split_folders(labeled: Labeled, source: SourceConfig) -> DeclaredSplits | None:
    """A class-folder tree whose every picture sits in a class folder under a split folder
    (`train/cat/x.jpg`, `val/cat/y.jpg`: TFDS ImageFolder's, Kaggle's and ImageNet's layout)
    declares its splits; `val` and `valid` are `validation`, as in the detection layouts. None
    for any other tree, or when `--splits` overrides them (said in the log)."""
    claims = {}
    for file, _ in labeled:
        parts = file.relpath.split("/")
        split = split_name(parts[0]) if len(parts) >= 3 else None
        if split is None:
            return None
        claims[file.relpath] = split
    if not claims:
        return None
    if not source.split_folders:
        _LOGGER.info("splits %s override %s", dict(source.splits), SPLIT_FOLDERS)
        return None
    names = tuple(n for n in SPLIT_ORDER if n in claims.values())
    declared = DeclaredSplits(SPLIT_FOLDERS, names, claims)
    _refuse_hashing(declared, source)
    _LOGGER.info(
        "splits %s, as declared by %s (given splits would override them)", ", ".join(names), SPLIT_FOLDERS
    )
    return declared


def _refuse_hashing(declared: DeclaredSplits, source: SourceConfig) -> None:
    """Options that shape hash splits have nothing to shape where the dataset declares its own."""
    hashing = {
        "stratify": source.stratify,
        "group_pattern": source.group_pattern,
        "split_seed": source.split_seed,
    }
    for name, value in hashing.items():
        if value:
            raise ConfigError(
                name,
                f"shapes hash splits, but the dataset declares its own ({declared.source}); "
                "give splits too to hash every picture instead",
            )


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


def _grown_classes(old: Sequence[str], annotated: AnnotationSet, source: SourceConfig) -> tuple[str, ...]:
    """An append's class names: the dataset's, then the classes its annotations add (refused
    in one line where an old id would name another class)."""
    options = source.annotations
    numbered_by = f"the label map {options.label_map}" if options and options.label_map else None
    try:
        return growing_lib.grown_class_names(old, annotated, numbered_by)
    except growing_lib.ClassIdConflict as error:
        raise ConfigError("annotations", f"{annotated.format}: {error}") from None


def _check_split_method(known: KnownRecords, declared: DeclaredSplits | None, source: SourceConfig) -> None:
    """An append to a dataset split as its source declares keeps declared splits, and one split
    by hash keeps hashing: each new picture lands where a run over all of them puts it only if
    both runs split alike (the source may have gained or lost its declarations since)."""
    if known.split_method is None:
        return
    was = known.split_method.startswith("declared")
    if was == (declared is not None):
        return
    options = source.annotations
    keeps_declared = options.declared_splits if options is not None else source.split_folders
    if declared is not None:
        now = f"declared by {declared.source}"
    else:
        now = "hashed (--splits given)" if not keeps_declared else "hashed (none declared)"
    name, named = ("annotations", f"{options.format}: ") if options is not None else ("splits", "")
    raise ConfigError(
        name,
        f"{named}--append refused: the dataset's splits are {known.split_method}, this run's would be "
        f"{now}: a full run with --overwrite splits every picture alike",
    )


def _annotated_files(
    files: Sequence[InputFile], annotated: AnnotationSet, source: SourceConfig, rejects: list[RejectLine]
) -> Labeled:
    """Every listed file that may become a detection record: annotation files are `skipped`
    (they are sources, not inputs), images the annotations cannot describe truthfully are rejects
    (with their objects counted), and images no annotation names are negatives, or `unannotated`
    rejects when the run drops them."""
    problems = {p.relpath: p for p in annotated.problems}
    drop_unannotated = source.annotations is not None and source.annotations.unannotated == "drop"
    labeled: Labeled = []
    for file in files:
        reason = skip_reason(file.relpath)
        if reason is None and file.relpath in annotated.sources:
            reason = annotated.sources[file.relpath]
        if reason is not None:
            rejects.append(RejectLine(file.relpath, reasons.SKIPPED.code, reason))
        elif file.problem is not None:
            objects = len(annotated.images[file.relpath].objects) if file.relpath in annotated.images else 0
            rejects.append(RejectLine(file.relpath, *file.problem, objects=objects))
        elif file.relpath in problems:
            problem = problems[file.relpath]
            rejects.append(RejectLine(file.relpath, problem.reason, problem.detail, objects=problem.objects))
        elif drop_unannotated and file.relpath in annotated.unannotated:
            detail = "no annotation names this image, and unannotated images are dropped"
            rejects.append(RejectLine(file.relpath, reasons.UNANNOTATED.code, detail))
        else:
            labeled.append((file, None))
    return labeled


def _notes_by_image(annotated: AnnotationSet) -> dict[str, tuple[str, ...]]:
    """relpath -> the sorted reasons of the changes planning made to its objects, gathered in one
    pass: looked up per image, every change was walked once per image, a cost that grows with
    changes times images (docs/performance.md#the-coco-launchers-choices-measured)."""
    found: dict[str, set[str]] = defaultdict(set)
    for note in annotated.changed:
        found[note.relpath].add(note.reason)
    return {relpath: tuple(sorted(reasons)) for relpath, reasons in found.items()}


def _image_annotations(
    annotated: AnnotationSet, relpath: str, notes: Mapping[str, tuple[str, ...]]
) -> ImageAnnotations:
    """The image's annotations as staged: a negative when the source says nothing of it, with the
    notes planning made on its objects."""
    found = annotated.images.get(relpath) or ImageAnnotations((), posixpath.splitext(relpath)[0])
    return dataclasses.replace(found, notes=notes[relpath]) if relpath in notes else found


def _object_strata(annotated: AnnotationSet) -> Callable[[str], str]:
    """What stratify balances in a detection run: each image's rarest class (the one in the fewest
    images), so every class, rare ones first, gets each split's share of the images that hold
    it; images without objects are a stratum of their own."""
    images_with: Counter[str] = Counter()
    for found in annotated.images.values():
        images_with.update({o.class_name for o in found.objects})

    def stratum(relpath: str) -> str:
        found = annotated.images.get(relpath)
        labels = {o.class_name for o in found.objects} if found is not None else set()
        return min(labels, key=lambda name: (images_with[name], name)) if labels else ""

    return stratum


def _used_declared_splits(annotated: AnnotationSet | None, source: SourceConfig) -> DeclaredSplits | None:
    """The dataset's own splits when this run keeps them (no `splits` given, none per COCO file);
    the log says which it is, and when `splits` overrides them."""
    if annotated is None or annotated.declared is None or source.annotations is None:
        return None
    declared = annotated.declared
    if source.annotations.split_names:
        return None
    if not source.annotations.declared_splits:
        _LOGGER.info("splits %s override the splits declared by %s", dict(source.splits), declared.source)
        return None
    _refuse_hashing(declared, source)
    _LOGGER.info(
        "splits %s, as declared by %s (given splits would override them)",
        ", ".join(declared.names),
        declared.source,
    )
    return declared


def _in_declared_splits(
    labeled: Labeled, annotated: AnnotationSet, declared: DeclaredSplits, rejects: list[RejectLine]
) -> Labeled:
    """The pictures one declared split holds; one that two claim is a `conflicting_split` reject,
    one that none names an `undeclared_split` reject (never guessed into a split)."""
    kept: Labeled = []
    for file, entry in labeled:
        found = annotated.images.get(file.relpath)
        objects = len(found.objects) if found is not None else 0
        if file.relpath in declared.conflicts:
            detail = f"claimed by {declared.conflicts[file.relpath]}"
            rejects.append(RejectLine(file.relpath, reasons.CONFLICTING_SPLIT.code, detail, objects=objects))
        elif file.relpath not in declared.split_of:
            detail = f"no split of {declared.source} names it"
            rejects.append(RejectLine(file.relpath, reasons.UNDECLARED_SPLIT.code, detail, objects=objects))
        else:
            kept.append((file, entry))
    return kept


def _task_of(source: SourceConfig) -> str:
    """The run's task: its annotations' (given or found from their format), else classification."""
    options = source.annotations
    return options.task if options is not None and options.task else tasks.DEFAULT


def _with_annotation_facts(
    plan: Plan,
    annotated: AnnotationSet,
    source: SourceConfig,
    declared: DeclaredSplits | None,
    counts: MatchCounts | None = None,
) -> Plan:
    """The plan of an annotated run with what planning learnt of its annotations, and each of
    its kinds of label's own facts (`labels.LabelKind.plan_facts`)."""
    options = source.annotations
    assert options is not None
    warnings = list(annotated.warnings)
    left_out = sorted(r.path for r in plan.rejects if r.reason == reasons.UNDECLARED_SPLIT.code)
    if left_out:
        warnings.append(undeclared_split_warning(left_out))
    if declared is not None:
        split_source = f"declared by {declared.source}"
    elif annotated.declared is not None and not options.split_names:
        split_source = f"hash (--splits overrides the splits declared by {annotated.declared.source})"
    else:
        split_source = ""
    facts = AnnotationFacts(
        format=annotated.format,
        unmatched=tuple(u.to_json() for u in annotated.unmatched),
        found_at=f"{annotated.found_at}; {(counts or MatchCounts.of(annotated)).describe()}",
        warnings=tuple(warnings),
        split_source=split_source,
    )
    dropped = tuple(DroppedObjectLine(n.relpath, n.reason, n.detail) for n in annotated.dropped)
    found = Annotated(
        format=annotated.format,
        class_names=tuple(plan.class_names or ()),
        masks=options.masks,
        annotated_objects=annotated.annotated_objects,
        dropped=dropped,
        unmatched_objects=sum(u.objects for u in annotated.unmatched),
        keypoint_names=dict(annotated.keypoint_names),
        skeletons=dict(annotated.skeletons),
        mask_rule=annotated.mask_rule,
        palette=annotated.palette,
    )
    task = _task_of(source)
    kinds = {kind.name: kind.plan_facts(found) for kind in of_task(task)}
    kinds = {name: value for name, value in kinds.items() if value is not None}
    return dataclasses.replace(plan, task=task, annotations=facts, kinds=kinds, dropped=dropped)


def undeclared_split_warning(left_out: Sequence[str]) -> str:
    """The summary's warning on the pictures (sorted relpaths) no declared split names."""
    return (
        f"{len(left_out)} pictures are in none of the declared splits (undeclared_split rejects, "
        f"e.g. {left_out[0]}); --splits hashes every picture instead"
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
        try:
            labeled.append((file, label_source.entry_of(file.relpath)))
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


def _objects_of(annotated: AnnotationSet) -> Callable[[str], int]:
    """relpath -> how many objects its annotations hold (a reject line counts them)."""

    def count(relpath: str) -> int:
        found = annotated.images.get(relpath)
        return len(found.objects) if found is not None else 0

    return count


def _without_copies(
    labeled: Labeled,
    rejects: list[RejectLine],
    known: Mapping[str, str],
    objects: Callable[[str], int] | None = None,
) -> Labeled:
    """One file of each content (the smallest relative path); the others are `duplicate` rejects.
    A file whose bytes a record of the dataset already holds (`known`: sha256 -> its relpath, an
    append's) is a copy of that record. `objects`: a detection run's objects per picture, which
    a copy's reject line counts (its objects are `image_rejected`, so every object is accounted
    for)."""
    count = objects or (lambda relpath: 0)
    hashes = dedupe_lib.content_hashes([f.path for f, _ in labeled])
    old = {
        f.relpath: known[h] for (f, _), h in zip(labeled, hashes, strict=True) if h is not None and h in known
    }
    for relpath, kept_path in sorted(old.items()):
        detail = f"same bytes as {kept_path}, already in the dataset"
        rejects.append(RejectLine(relpath, reasons.DUPLICATE.code, detail, objects=count(relpath)))
    rest = [(item, h) for item, h in zip(labeled, hashes, strict=True) if item[0].relpath not in old]
    dropped = dedupe_lib.kept_copies((f.relpath, h) for (f, _), h in rest)
    for relpath, kept_path in dropped.items():
        detail = f"same bytes as {kept_path}, which is kept"
        rejects.append(RejectLine(relpath, reasons.DUPLICATE.code, detail, objects=count(relpath)))
    return [(f, entry) for f, entry in labeled if f.relpath not in dropped and f.relpath not in old]


def _shard_counts(
    inputs: Sequence[PlannedInput], splits: Mapping[str, float], shards: ShardSettings
) -> dict[str, int]:
    """Each split's shard count: the fixed one, else derived from its bytes (sharding.shard_count)."""
    totals: dict[str, int] = defaultdict(int)
    counts: dict[str, int] = defaultdict(int)
    for item in inputs:
        totals[item.split] += item.size
        counts[item.split] += 1
    return {name: shards.count_for(totals[name], counts[name]) for name in splits}


def _names(label: str | tuple[str, ...] | None) -> tuple[str, ...]:
    if label is None:
        return ()
    return label if isinstance(label, tuple) else (label,)


def _ids(label: str | tuple[str, ...], ids: dict[str, int]) -> int | tuple[int, ...]:
    """A class id, or a multi-label's sorted ids."""
    if isinstance(label, tuple):
        return tuple(sorted(ids[name] for name in label))
    return ids[label]


def _texts(label: str | tuple[str, ...], ids: dict[str, int]) -> str | tuple[str, ...]:
    """A class name, or a multi-label's names in the order of its ids (`_ids`), so that
    `label[i]` and `text[i]` name the same class whatever class_names' order."""
    if isinstance(label, tuple):
        return tuple(sorted(label, key=ids.__getitem__))
    return label


def _stratum(entry: labels_lib.ManifestRow | None) -> str:
    """What stratify balances: the class, or a multi-label's sorted classes as one stratum."""
    if entry is None:
        return ""
    return "|".join(entry.class_name) if isinstance(entry.class_name, tuple) else entry.class_name


def _groups(
    labeled: Sequence[tuple[InputFile, labels_lib.ManifestRow | None]],
    pattern: re.Pattern[str] | None,
    label_source: LabelSource,
) -> tuple[dict[str, str], GroupFacts]:
    """relpath -> group for the files that have one: group_pattern wins over a manifest's
    `group` column (an option given on the command line is the more deliberate choice)."""
    if pattern is not None:
        source = "group_pattern"
        found = {f.relpath: splits_lib.group_of(f.relpath, pattern) for f, _ in labeled}
    elif label_source.manifest is not None and label_source.manifest.has_groups:
        source = "manifest"
        found = {f.relpath: entry.group if entry is not None else None for f, entry in labeled}
    else:
        return {}, GroupFacts()
    groups = {relpath: group for relpath, group in found.items() if group is not None}
    facts = GroupFacts(source, len(set(groups.values())), len(groups), len(found) - len(groups))
    return groups, facts


def plan_inputs(
    source: SourceConfig, shards: ShardSettings = DEFAULT_SHARDS, label_source: LabelSource | None = None
) -> Plan:
    """List `source.input` and plan it (`make_plan`)."""
    return make_plan(list_inputs(source.input), source, shards, label_source)


def shard_tasks(plan: Plan, split_seed: int = 0) -> list[ShardTask]:
    """Every planned shard with its inputs, balanced by bytes and independent of listing order.

    Inputs are taken in path-hash order and each goes to the shard with the fewest bytes so far,
    so shards of one split differ in size by at most about one image.
    """
    by_split: dict[str, list[PlannedInput]] = defaultdict(list)
    for item in plan.inputs:
        by_split[item.split].append(item)
    found: list[ShardTask] = []
    kinds, settings = tuple(k.name for k in of_task(plan.task)), worker_settings(plan)
    for split, count in plan.shard_counts.items():
        items = sorted(
            by_split[split], key=lambda i: (splits_lib.path_hash(i.relpath, split_seed + 1), i.relpath)
        )
        heap = [(0, index) for index in range(count)]
        members: list[list[PlannedInput]] = [[] for _ in range(count)]
        for item in items:
            size, index = heapq.heappop(heap)
            members[index].append(item)
            heapq.heappush(heap, (size + item.size, index))
        found += [
            ShardTask(split, index, count, tuple(members[index]), kinds, settings) for index in range(count)
        ]
    return found


def worker_settings(plan: Plan) -> dict[str, Any]:
    """What each of the run's kinds of label needs on the workers, staged with every task."""
    names = tuple(plan.class_names or ())
    settings = {k.name: k.worker_setting(plan.kinds.get(k.name), names) for k in of_task(plan.task)}
    return {name: setting for name, setting in settings.items() if setting is not None}
