"""The annotations' say in the plan of an annotated run: the source loaded through the formats'
registry (plan.sources) and matched against the listing, the splits it declares when the run
keeps them, which listed files it makes candidates (its labels, its classes) or rejects, each
picture's annotations as staged, and what planning learnt of them for the summary.

A source that matches none of the pictures, or (unless allowed) few of them, fails here, before
any work (plan.annotations.matching).
"""

from __future__ import annotations

import dataclasses
import logging
import posixpath
from collections import defaultdict
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from beam_tfrecord import reasons, tasks
from beam_tfrecord.config_base import ConfigError
from beam_tfrecord.edges import JsonObject
from beam_tfrecord.elements import DroppedObjectLine, ImageAnnotations, RejectLine
from beam_tfrecord.labels import Annotated, of_task
from beam_tfrecord.plan import labels as labels_lib
from beam_tfrecord.plan import splitting
from beam_tfrecord.plan.annotations import growing as growing_lib
from beam_tfrecord.plan.annotations.declared import DeclaredSplits
from beam_tfrecord.plan.annotations.matching import (
    MatchCounts,
    MostlyUnmatched,
    NothingMatched,
    check_matches,
)
from beam_tfrecord.plan.annotations.results import AnnotationSet
from beam_tfrecord.plan.known import KnownRecords
from beam_tfrecord.plan.labelling import Candidates, Labeled
from beam_tfrecord.plan.listing import InputFile, skip_reason
from beam_tfrecord.plan.source_config import SourceConfig
from beam_tfrecord.plan.sources import registry
from beam_tfrecord.plan.sources.base import LoadRequest, SourceError, SourceFormat

__all__ = [
    "AnnotatedRun",
    "AnnotationFacts",
    "LoadedAnnotations",
    "annotated_files",
    "annotated_run",
    "load_annotations",
    "objects_of",
    "staged_annotations",
    "task_of",
]

_LOGGER = logging.getLogger(__name__)


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


@dataclass(frozen=True)
class LoadedAnnotations:
    """The annotation source's say on every listed file (`found`), how well it matched them
    (`counts`), the splits it declares when this run keeps them (`declared`), and an append's old
    pictures whose annotations changed since converted (`changed`: (relpath, split))."""

    found: AnnotationSet
    counts: MatchCounts
    declared: DeclaredSplits | None
    changed: list[tuple[str, str | None]]


def load_annotations(
    files: Sequence[InputFile], source: SourceConfig, known: KnownRecords | None = None
) -> LoadedAnnotations | None:
    """The annotations of a run that has them (`source.annotations`), else None; an append's
    declared or hashed splits are checked against its dataset's (splitting.check_split_method)."""
    if source.annotations is None:
        return None
    found, counts, changed = _load(files, source, known)
    declared = _used_declared_splits(found, source)
    if known is not None:
        splitting.check_split_method(known, declared, source)
    return LoadedAnnotations(found, counts, declared, changed)


def _load(
    files: Sequence[InputFile], source: SourceConfig, known: KnownRecords | None
) -> tuple[AnnotationSet, MatchCounts, list[tuple[str, str | None]]]:
    """The source loaded and its matches checked; a source that matches none of the pictures,
    or (unless allowed) few of them, fails here, before any work (plan.annotations.matching).

    An append (`known` with its listing) reads the source against the whole listing and keeps the
    new files' share (plan.annotations.growing): the check is on the new pictures, the counts
    (for the summary) are a run's over all of them."""
    options = source.annotations
    assert options is not None
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
        keep_split_names=source.keep_split_names,
        overlapping_splits=source.overlapping_splits,
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


def _used_declared_splits(annotated: AnnotationSet, source: SourceConfig) -> DeclaredSplits | None:
    """The dataset's own splits when this run keeps them (no `splits` given, none per COCO file);
    the log says which it is, and when `splits` overrides them."""
    if annotated.declared is None or source.annotations is None:
        return None
    declared = annotated.declared
    if source.annotations.split_names:
        return None
    if not source.annotations.declared_splits:
        _LOGGER.info("splits %s override the splits declared by %s", dict(source.splits), declared.source)
        return None
    splitting.refuse_hashing(declared, source)
    if source.keep_split_names and not declared.kept_names:
        raise ConfigError(
            "keep_split_names",
            f"the splits declared by {declared.source} are named {', '.join(declared.names)} only, "
            "for now: leave keep_split_names out",
        )
    _LOGGER.info(
        "splits %s, as declared by %s (given splits would override them)",
        ", ".join(declared.names),
        declared.source,
    )
    return declared


def annotated_files(
    files: Sequence[InputFile],
    loaded: LoadedAnnotations,
    source: SourceConfig,
    known_class_names: Sequence[str] | None,
    rejects: list[RejectLine],
) -> Candidates:
    """The labels of an annotated run: its candidates (`_annotated_files`), kept to the declared
    splits when the run keeps them, and its class names when its kinds of label name classes
    (an append's: the dataset's, then the classes its annotations add)."""
    annotated = loaded.found
    labeled = _annotated_files(files, annotated, source, rejects)
    labeled = _picture_labels(labeled, annotated, source, rejects)
    named = any(kind.names_classes for kind in of_task(task_of(source)))
    class_names = list(annotated.class_names) if named else None
    if known_class_names is not None:
        class_names = list(_grown_classes(known_class_names, annotated, source))
    if loaded.declared is not None:
        labeled = splitting.in_declared_splits(labeled, loaded.declared, objects_of(annotated), rejects)
    return Candidates(labeled, class_names)


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


def _picture_labels(
    labeled: Labeled, annotated: AnnotationSet, source: SourceConfig, rejects: list[RejectLine]
) -> Labeled:
    """A run whose kind of label is the picture's own (a class from CVAT's tags): each candidate
    with its class, or an `unlabeled` reject where its annotations give none; one class a
    picture (a picture given several is a `bad_annotation` reject naming them)."""
    kinds = [kind for kind in of_task(task_of(source)) if kind.labels_picture]
    if not kinds:
        return labeled
    kept: Labeled = []
    for file, _ in labeled:
        found = kinds[0].picture_label(annotated.images.get(file.relpath))
        if not found:
            detail = f"no {annotated.format} annotation gives this picture a class"
            rejects.append(RejectLine(file.relpath, reasons.UNLABELED.code, detail))
        elif len(set(found)) > 1:
            named = ", ".join(dict.fromkeys(found))
            detail = f"its annotations give it {len(set(found))} classes ({named}): a record holds one"
            rejects.append(RejectLine(file.relpath, reasons.BAD_ANNOTATION.code, detail))
        else:
            kept.append((file, labels_lib.ManifestRow(found[0])))
    return kept


def _grown_classes(old: Sequence[str], annotated: AnnotationSet, source: SourceConfig) -> tuple[str, ...]:
    """An append's class names: the dataset's, then the classes its annotations add (refused
    in one line where an old id would name another class)."""
    options = source.annotations
    numbered_by = f"the label map {options.label_map}" if options and options.label_map else None
    try:
        return growing_lib.grown_class_names(old, annotated, numbered_by)
    except growing_lib.ClassIdConflict as error:
        raise ConfigError("annotations", f"{annotated.format}: {error}") from None


def objects_of(annotated: AnnotationSet) -> Callable[[str], int]:
    """relpath -> how many objects its annotations hold (a reject line counts them)."""

    def count(relpath: str) -> int:
        found = annotated.images.get(relpath)
        return len(found.objects) if found is not None else 0

    return count


def staged_annotations(annotated: AnnotationSet) -> Callable[[str], ImageAnnotations]:
    """relpath -> the picture's annotations as staged: a negative when the source says nothing of
    it, with the notes planning made on its objects."""
    notes = _notes_by_image(annotated)

    def of(relpath: str) -> ImageAnnotations:
        found = annotated.images.get(relpath) or ImageAnnotations((), posixpath.splitext(relpath)[0])
        return dataclasses.replace(found, notes=notes[relpath]) if relpath in notes else found

    return of


def _notes_by_image(annotated: AnnotationSet) -> dict[str, tuple[str, ...]]:
    """relpath -> the sorted reasons of the changes planning made to its objects, gathered in one
    pass: looked up per image, every change was walked once per image, a cost that grows with
    changes times images (benchmarks/NOTES.md#the-coco-launchers-choices-measured)."""
    found: dict[str, set[str]] = defaultdict(set)
    for note in annotated.changed:
        found[note.relpath].add(note.reason)
    return {relpath: tuple(sorted(reasons)) for relpath, reasons in found.items()}


def task_of(source: SourceConfig) -> str:
    """The run's task: its annotations' (given or found from their format), else classification."""
    options = source.annotations
    return options.task if options is not None and options.task else tasks.DEFAULT


@dataclass(frozen=True)
class AnnotatedRun:
    """What an annotated run's plan holds beside its inputs: its task, what planning learnt of its
    annotations, each of its kinds of label's plan facts (`labels.LabelKind.plan_facts`, by kind
    name) and the parts of labels left out while planning."""

    task: str
    annotations: AnnotationFacts
    kinds: JsonObject
    dropped: tuple[DroppedObjectLine, ...]


def annotated_run(
    loaded: LoadedAnnotations,
    source: SourceConfig,
    rejects: Sequence[RejectLine],
    class_names: Sequence[str] | None,
) -> AnnotatedRun:
    """What planning learnt of an annotated run's annotations, given the plan's rejects and class
    names, and each of its kinds of label's own facts."""
    annotated, declared = loaded.found, loaded.declared
    options = source.annotations
    assert options is not None
    warnings = list(annotated.warnings)
    left_out = sorted(r.path for r in rejects if r.reason == reasons.UNDECLARED_SPLIT.code)
    if left_out:
        warnings.append(splitting.undeclared_split_warning(left_out))
    if declared is not None:
        split_source = f"declared by {declared.source}"
    elif annotated.declared is not None and not options.split_names:
        split_source = f"hash (--splits overrides the splits declared by {annotated.declared.source})"
    else:
        split_source = ""
    facts = AnnotationFacts(
        format=annotated.format,
        unmatched=tuple(u.to_json() for u in annotated.unmatched),
        found_at=f"{annotated.found_at}; {loaded.counts.describe()}",
        warnings=tuple(warnings),
        split_source=split_source,
    )
    dropped = tuple(DroppedObjectLine(n.relpath, n.reason, n.detail) for n in annotated.dropped)
    found = Annotated(
        format=annotated.format,
        class_names=tuple(class_names or ()),
        masks=options.masks,
        annotated_objects=annotated.annotated_objects,
        dropped=dropped,
        unmatched_objects=sum(u.objects for u in annotated.unmatched),
        keypoint_names=dict(annotated.keypoint_names),
        skeletons=dict(annotated.skeletons),
        mask_rule=annotated.mask_rule,
        palette=annotated.palette,
    )
    task = task_of(source)
    kinds = {kind.name: kind.plan_facts(found) for kind in of_task(task)}
    kinds = {name: value for name, value in kinds.items() if value is not None}
    return AnnotatedRun(task, facts, kinds, dropped)
