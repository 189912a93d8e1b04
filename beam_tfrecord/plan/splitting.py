"""The splits step: each candidate's split, the dataset's own where it declares them (split
folders, or its annotations' declarations), else a hash of its path or its group (plan.splits),
balanced per class with `stratify`.

A picture no declared split names is an `undeclared_split` reject, never guessed into a split.
"""

from __future__ import annotations

import logging
import re
from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field

from beam_tfrecord import reasons
from beam_tfrecord.config_base import ConfigError
from beam_tfrecord.elements import RejectLine
from beam_tfrecord.plan import labels as labels_lib
from beam_tfrecord.plan import splits as splits_lib
from beam_tfrecord.plan.annotations.declared import SPLIT_ORDER, DeclaredSplits, split_name
from beam_tfrecord.plan.annotations.results import AnnotationSet
from beam_tfrecord.plan.known import KnownRecords
from beam_tfrecord.plan.labelling import Labeled, LabelSource
from beam_tfrecord.plan.source_config import SourceConfig

__all__ = [
    "PAGES",
    "SPLIT_FOLDERS",
    "GroupFacts",
    "SplitAssignment",
    "check_split_method",
    "in_declared_splits",
    "refuse_hashing",
    "split_files",
    "split_folders",
    "undeclared_split_warning",
]

_LOGGER = logging.getLogger(__name__)

SPLIT_FOLDERS = "the split folders (train/, val/, test/ above the class folders)"


PAGES = "pages"  # GroupFacts.source of a run whose groups are the pages of each file (--pages each)


@dataclass(frozen=True)
class GroupFacts:
    """How files were grouped for splitting: by group_pattern, by a manifest's `group` column,
    the pages of each file (`--pages each`: a group a file of several pages), or not at all;
    `without_group` files kept their own path hash."""

    source: str | None = None  # "group_pattern" | "manifest" | "pages" | None
    groups: int = 0
    grouped_files: int = 0
    without_group: int = 0


@dataclass(frozen=True)
class SplitAssignment:
    """What the splits step gives: each candidate's split (relpath -> split), each split's share
    (declared splits: the share of the pictures each holds), and the groups files were split by
    (relpath -> group, for the files that have one)."""

    split_of: dict[str, str]
    splits: dict[str, float]
    groups: dict[str, str]
    grouping: GroupFacts
    also: Mapping[str, tuple[str, ...]] = field(default_factory=dict)


def split_files(
    labeled: Labeled,
    source: SourceConfig,
    label_source: LabelSource,
    declared: DeclaredSplits | None,
    annotated: AnnotationSet | None,
) -> SplitAssignment:
    """Each candidate's split: the one `declared` gives it, else its group's or its path's hash
    (a file in a group, the first group of `source.group_pattern` in its path, else the
    manifest's `group` column, is split with its group); a COCO file given per split puts its
    pictures in that split."""
    group_pattern = (
        labels_lib.compile_label_pattern(source.group_pattern, "group_pattern", "the group")
        if source.group_pattern
        else None
    )
    groups, grouping = _groups(labeled, group_pattern, label_source)
    splits = dict(source.splits)
    if declared is not None:  # the dataset's own splits, each holding its share of the pictures
        split_of = {f.relpath: declared.split_of[f.relpath] for f, _ in labeled}
        counts = Counter(split_of.values())
        splits = {name: counts[name] / max(1, len(labeled)) for name in declared.names}
    else:
        strata = _object_strata(annotated) if annotated is not None else None
        split_of = splits_lib.assign_splits(
            ((f.relpath, strata(f.relpath) if strata else _stratum(entry)) for f, entry in labeled),
            splits,
            source.split_seed,
            source.stratify,
            {**_files_of_pages(labeled), **groups},
        )
    # A COCO file given per split (annotations are read only where the source has their options).
    if annotated is not None and source.annotations is not None and source.annotations.split_names:
        split_of.update({f.relpath: s for f, _ in labeled if (s := annotated.split_of(f.relpath))})
    also = declared.also if declared is not None else {}
    if also:
        counts = Counter([*split_of.values(), *(s for f, _ in labeled for s in also.get(f.relpath, ()))])
        total = sum(counts.values())
        names = (*declared.names, *sorted(set(counts) - set(declared.names))) if declared else tuple(counts)
        splits = {name: counts[name] / max(1, total) for name in names}
    return SplitAssignment(split_of, splits, groups, grouping, also)


def split_folders(
    labeled: Labeled, source: SourceConfig, label_source: LabelSource, known: KnownRecords | None
) -> DeclaredSplits | None:
    """The splits a run without annotations keeps: a class-folder tree's split folders
    (`_split_folders`), None for any other; an append's are checked against its dataset's (a
    grown class-folder tree splits as it was split)."""
    declared = _split_folders(labeled, source) if label_source.mode == "folder" else None
    if known is not None:
        check_split_method(known, declared, source)
    return declared


def _split_folders(labeled: Labeled, source: SourceConfig) -> DeclaredSplits | None:
    """A class-folder tree whose every picture sits in a class folder under a split folder
    (`train/cat/x.jpg`, `val/cat/y.jpg`: TFDS ImageFolder's, Kaggle's and ImageNet's layout)
    declares its splits; `val` and `valid` are `validation`, as in the detection layouts, unless
    `keep_split_names` keeps the folder's own name. None for any other tree, or when `--splits`
    overrides them (said in the log)."""
    claims = {}
    for file, _ in labeled:
        parts = file.relpath.split("/")
        split = split_name(parts[0]) if len(parts) >= 3 else None
        if split is None:
            return None
        claims[file.relpath] = parts[0] if source.keep_split_names else split
    if not claims:
        return None
    if not source.split_folders:
        _LOGGER.info("splits %s override %s", dict(source.splits), SPLIT_FOLDERS)
        return None
    names = tuple(n for n in SPLIT_ORDER if n in claims.values())
    names += tuple(sorted(set(claims.values()) - set(names)))
    declared = DeclaredSplits(SPLIT_FOLDERS, names, claims, kept_names=source.keep_split_names)
    refuse_hashing(declared, source)
    _LOGGER.info(
        "splits %s, as declared by %s (given splits would override them)", ", ".join(names), SPLIT_FOLDERS
    )
    return declared


def refuse_hashing(declared: DeclaredSplits, source: SourceConfig) -> None:
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


def check_split_method(known: KnownRecords, declared: DeclaredSplits | None, source: SourceConfig) -> None:
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


def in_declared_splits(
    labeled: Labeled, declared: DeclaredSplits, objects: Callable[[str], int], rejects: list[RejectLine]
) -> Labeled:
    """The pictures one declared split holds; one that two claim is a `conflicting_split` reject,
    one that none names an `undeclared_split` reject (never guessed into a split). `objects`:
    relpath -> the objects its reject line counts."""
    kept: Labeled = []
    for file, entry in labeled:
        if file.relpath in declared.conflicts:
            detail = f"claimed by {declared.conflicts[file.relpath]}"
            reason = reasons.CONFLICTING_SPLIT.code
        elif file.relpath not in declared.split_of:
            detail = f"no split of {declared.source} names it"
            reason = reasons.UNDECLARED_SPLIT.code
        else:
            kept.append((file, entry))
            continue
        rejects.append(RejectLine(file.relpath, reason, detail, objects=objects(file.relpath)))
    return kept


def undeclared_split_warning(left_out: Sequence[str]) -> str:
    """The summary's warning on the pictures (sorted relpaths) no declared split names."""
    return (
        f"{len(left_out)} pictures are in none of the declared splits (undeclared_split rejects, "
        f"e.g. {left_out[0]}); --splits hashes every picture instead"
    )


def _stratum(entry: labels_lib.ManifestRow | None) -> str:
    """What stratify balances: the class, or a multi-label's sorted classes as one stratum."""
    if entry is None:
        return ""
    return "|".join(entry.class_name) if isinstance(entry.class_name, tuple) else entry.class_name


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


def _files_of_pages(labeled: Labeled) -> dict[str, str]:
    """relpath -> its file's, for each page of a multi-page file (`--pages each`): the pages of a
    file are split as one group, by their file's path, so each lands where the file's stack would,
    and neighbouring slices are never on both sides of a split. A group of the run's own
    (group_pattern, a manifest's column) wins: it holds the whole file."""
    return {f.relpath: f.file_relpath for f, _ in labeled if f.relpath != f.file_relpath}


def _groups(
    labeled: Labeled, pattern: re.Pattern[str] | None, label_source: LabelSource
) -> tuple[dict[str, str], GroupFacts]:
    """relpath -> group for the files that have one: group_pattern wins over a manifest's
    `group` column (an option given on the command line is the more deliberate choice). A page
    (`--pages each`) is in its file's group: the pattern is searched in its file's path."""
    if pattern is not None:
        source = "group_pattern"
        found = {f.relpath: splits_lib.group_of(f.file_relpath, pattern) for f, _ in labeled}
    elif label_source.manifest is not None and label_source.manifest.has_groups:
        source = "manifest"
        found = {f.relpath: entry.group if entry is not None else None for f, entry in labeled}
    else:  # the pages of a file, where a run makes a record of each (--pages each)
        pages = _files_of_pages(labeled)
        if not pages:
            return {}, GroupFacts()
        return pages, GroupFacts(PAGES, len(set(pages.values())), len(pages), len(labeled) - len(pages))
    groups = {relpath: group for relpath, group in found.items() if group is not None}
    facts = GroupFacts(source, len(set(groups.values())), len(groups), len(found) - len(groups))
    return groups, facts
