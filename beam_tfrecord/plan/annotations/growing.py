"""An `--append`'s annotations (output.append): the source is read against the whole listing, as a
run over old and new pictures together reads it, so each new picture gets the match, the objects
and the declared split that run would give it; then only the new pictures' share is kept.

- The old pictures' entries are theirs, not `unmatched`: the append neither counts them against
  the match check (plan.annotations.matching) nor lists them again. An entry that names a file
  the dataset holds but the listing lacks (a gone file, another folder's) is an old one too, as
  is one the dataset already lists as naming no picture (a re-exported file repeats it).
- Class ids: every class of the dataset keeps its id; a class the annotations add gets the next
  (or, with a label map, the id the map gives it where the dataset's map left that id free).
  Where the source numbers its classes (COCO's category ids, YOLO's class indices, a label map),
  a number that now names another class than the dataset's is refused (`ClassIdConflict`): the
  new pictures' objects would be stored under the other class's id.
- Old pictures whose annotations changed since they were converted (a re-export that edits
  their boxes, a label file written for a picture that had none) keep their records as they
  are; `changed_annotations` finds them, by the digest the file index keeps of each record's
  objects (`objects_digest_of`), so the append lists them rather than staying silent.
"""

from __future__ import annotations

import dataclasses
import hashlib
from collections.abc import Callable, Collection, Iterable, Mapping, Sequence

from beam_tfrecord import reasons
from beam_tfrecord.elements import ImageAnnotations, object_text
from beam_tfrecord.plan.annotations.catalog import Catalog, stem
from beam_tfrecord.plan.annotations.label_map import is_unused
from beam_tfrecord.plan.annotations.matching import ALLOW_OPTION, MatchCounts, NothingMatched, check_matches
from beam_tfrecord.plan.annotations.results import AnnotationSet, UnmatchedEntry
from beam_tfrecord.plan.listing import InputFile

__all__ = [
    "ClassIdConflict",
    "changed_annotations",
    "check_new_matches",
    "entry_key",
    "for_new_pictures",
    "grown_class_names",
    "names_one_of",
    "objects_digest",
    "objects_digest_of",
]


class ClassIdConflict(ValueError):
    """The annotations give an old class id to another class than the dataset's."""


def objects_digest_of(annotations: ImageAnnotations | None) -> str:
    """A picture's objects digest: 16 hex digits of the SHA-256 of its objects as the plan stages
    them (None or none: a picture without objects), the same in every run and process: each object's
    JSON text (`object_text`: its box, class, flags and mask; not where the source keeps it, since
    a re-export renumbers COCO's annotation ids), sorted (a re-export that only reorders them
    changes nothing), one per line."""
    objects = annotations.objects if annotations is not None else ()
    return objects_digest([object_text(o) for o in objects])


def objects_digest(texts: Iterable[str]) -> str:
    """`objects_digest_of` from the objects' texts, where staging has made them already."""
    return hashlib.sha256("\n".join(sorted(texts)).encode("utf-8")).hexdigest()[:16]


def changed_annotations(
    found: AnnotationSet, converted: Mapping[str, tuple[str, str | None]]
) -> list[tuple[str, str | None]]:
    """The old pictures whose annotations in `found` (read against the whole listing) have
    another digest than the one their record was made from (`converted`: relpath -> (digest,
    split), for the listed pictures the dataset holds a record of); (relpath, split), sorted. A
    picture that had no object and now has some counts, and the reverse."""
    return sorted(
        (relpath, split)
        for relpath, (digest, split) in converted.items()
        if objects_digest_of(found.images.get(relpath)) != digest
    )


def for_new_pictures(
    found: AnnotationSet, new: Collection[str], indexed: Collection[str], reported: Collection[str] = ()
) -> AnnotationSet:
    """`found` (read against the whole listing) cut to the pictures in `new` (relpaths): their
    annotations, problems and objects dropped or changed; the entries that name no listed
    picture, less those of a file the dataset's index holds (`indexed`: an old picture's) and
    those the dataset already lists (`reported`: their `entry_key`s)."""
    keep = set(new)
    return dataclasses.replace(
        found,
        images={r: a for r, a in found.images.items() if r in keep},
        unannotated=frozenset(r for r in found.unannotated if r in keep),
        problems=tuple(p for p in found.problems if p.relpath in keep),
        dropped=tuple(n for n in found.dropped if n.relpath in keep),
        changed=tuple(n for n in found.changed if n.relpath in keep),
        unmatched=tuple(u for u in _not_old(found.unmatched, keep, indexed) if entry_key(u) not in reported),
    )


def check_new_matches(found: AnnotationSet, whole: MatchCounts, allow_unmatched: bool) -> str | None:
    """plan.annotations.matching.check_matches on the new pictures' share (`found`). Where none
    matches although the source annotates the dataset's pictures (`whole`: the counts over every
    picture), the new ones may be pictures without objects (background images) as well as
    pictures whose annotations were left behind: refused in one line that says so, and, with
    `allow_unmatched`, kept as a run over every picture keeps them (a warning)."""
    try:
        return check_matches(found, allow_unmatched)
    except NothingMatched:
        if whole.matched == 0:
            raise
        new = MatchCounts.of(found)
        example = min(found.unannotated, default="")
        line = (
            f"none of the {new.pictures} pictures matches an annotation (the append's new ones"
            + (f", e.g. {example}" if example else "")
            + f"; over every picture {whole.describe()})"
        )
        if allow_unmatched:
            return f"annotations matched poorly: {line}; kept on purpose ({ALLOW_OPTION})"
        raise NothingMatched(
            f"{line}. Put their annotations where the dataset's are, or, if they are meant to hold no "
            f"object (background pictures), pass {ALLOW_OPTION}"
        ) from None


def entry_key(entry: UnmatchedEntry | Mapping[str, object]) -> str:
    """What tells an entry that names no picture from another across runs (an entry or its
    annotations_without_image.jsonl line): its reason and the file it names, else where it is (a
    re-export may renumber COCO's image ids, not file names)."""
    if isinstance(entry, UnmatchedEntry):
        return f"{entry.reason}:{entry.name or entry.annotation}"
    return f"{entry.get('reason')}:{entry.get('name') or entry.get('annotation')}"


def _not_old(
    unmatched: Sequence[UnmatchedEntry], new: Collection[str], indexed: Collection[str]
) -> tuple[UnmatchedEntry, ...]:
    """The entries that name no picture of the dataset either: an annotation file the index
    holds (a YOLO label or VOC XML converted before) or a file name that names an indexed path
    (`names_one_of`) belongs to an old picture."""
    if not unmatched:
        return ()
    old = {r for r in indexed if r not in new}
    names_old = names_one_of(old)

    def is_old(entry: UnmatchedEntry) -> bool:
        if entry.reason != reasons.MISSING_IMAGE.code:
            return False
        return entry.annotation in old or names_old(entry.name)

    return tuple(u for u in unmatched if not is_old(u))


def names_one_of(relpaths: Iterable[str]) -> Callable[[str], bool]:
    """Whether a file name as an annotation entry writes it (COCO's `file_name`, VOC's
    `filename`, or `images/x.*`, the picture a YOLO label's place implies) names one of
    `relpaths`, as the parsers match names (`x.jpg` is `train/x.jpg`: catalog.Catalog.matches)."""
    listed = list(relpaths)
    by_name: Catalog | None = None
    by_stem: Catalog | None = None

    def names(name: str) -> bool:
        nonlocal by_name, by_stem
        if not name:
            return False
        if name.endswith(".*"):
            if by_stem is None:
                by_stem = Catalog({stem(r): InputFile(stem(r), r, 0) for r in listed}, {})
            return bool(by_stem.matches(name[:-2]))
        if by_name is None:
            by_name = Catalog({r: InputFile(r, r, 0) for r in listed}, {})
        return bool(by_name.matches(name))

    return names


def grown_class_names(
    old: Sequence[str], found: AnnotationSet, numbered_by: str | None = None
) -> tuple[str, ...]:
    """The dataset's class names (`old`, in id order), then the classes `found` adds, in its
    order. `numbered_by`: where the classes' numbers come from when not the format's own (a label
    map); None for the format's (`AnnotationSet.numbered_by`: COCO and YOLO number theirs; VOC
    names classes without ids, sorted, so a class it adds only ever gets the next id).
    ClassIdConflict, in one line, when a number names another class than the dataset's."""
    numbering = numbered_by or found.numbered_by
    if numbering:
        old = _free_ids_taken(old, found.class_names)
        for index, (was, now) in enumerate(zip(old, found.class_names, strict=False), 1):
            if was != now:
                raise ClassIdConflict(
                    f"class id {index} is {now!r} in the annotations ({numbering}), {was!r} in the "
                    "dataset: --append keeps every old id's class (a full run with --overwrite "
                    "numbers them afresh)"
                )
    known = set(old)
    return (*old, *(name for name in found.class_names if name not in known))


def _free_ids_taken(old: Sequence[str], now: Sequence[str]) -> list[str]:
    """`old` with each id a label map left free (its placeholder: no record holds that id) given
    to the class the annotations' map now names there, as a run over every picture numbers it."""
    taken = [name if is_unused(was) else was for was, name in zip(old, now, strict=False)]
    return [*taken, *old[len(taken) :]]
