"""How well an annotation source matched the listed pictures, checked at plan time so that a run
pointed at the wrong folder (or the wrong format, or another dataset's file) never exits 0 with
pictures that have no objects.

- No picture matches any annotation: `NothingMatched`, one line: where it looked, a picture and
  an annotation that found no partner, and the likely fix.
- Most pictures have no annotation, or most annotation entries name no picture: `MostlyUnmatched`
  with the counts and the option that goes on on purpose (`allow_unmatched_annotations`); given
  it, the same counts are a warning of the run.
"""

from __future__ import annotations

from dataclasses import dataclass

from beam_tfrecord import reasons, tasks
from beam_tfrecord.plan.annotations.results import AnnotationSet

__all__ = [
    "ALLOW_OPTION",
    "MatchCounts",
    "MostlyUnmatched",
    "NothingMatched",
    "check_matches",
]

ALLOW_OPTION = "allow_unmatched_annotations"


class NothingMatched(ValueError):
    """No listed picture matches any annotation."""


class MostlyUnmatched(ValueError):
    """Most pictures have no annotation, or most annotation entries name no listed picture."""


@dataclass(frozen=True)
class MatchCounts:
    """pictures: candidate images listed; matched: those an annotation names (rejected ones
    included: their reject names the annotation); entries: annotation entries (one per matched
    picture, plus those that name none); unmatched_entries: those that name no listed picture."""

    pictures: int
    matched: int
    entries: int
    unmatched_entries: int

    @classmethod
    def of(cls, result: AnnotationSet) -> MatchCounts:
        rejected = {p.relpath for p in result.problems} - set(result.images)
        pictures = len(result.images) + len(rejected)
        matched = pictures - len(result.unannotated)
        unmatched = sum(
            1
            for u in result.unmatched
            if u.reason in (reasons.MISSING_IMAGE.code, reasons.AMBIGUOUS_IMAGE.code)
        )
        return cls(pictures, matched, matched + unmatched, unmatched)

    def describe(self) -> str:
        """`38 of 40 pictures have an annotation; 2 of 40 annotation entries name no picture`."""
        return (
            f"{self.matched} of {self.pictures} pictures have an annotation; "
            f"{self.unmatched_entries} of {self.entries} annotation entries name no picture"
        )


def check_matches(result: AnnotationSet, allow_unmatched: bool) -> str | None:
    """Raises NothingMatched, or MostlyUnmatched unless `allow_unmatched`; returns the warning a
    run allowed to go on carries (None when most of both sides matched)."""
    counts = MatchCounts.of(result)
    if counts.pictures == 0:
        return None
    picture = min(result.unannotated, default="")
    entry = next((u for u in result.unmatched if u.reason == reasons.MISSING_IMAGE.code), None)
    if counts.matched == 0:
        examples = [f"picture {picture} has no annotation"] if picture else []
        if entry is not None:
            examples.append(f"annotation {entry.annotation} names {entry.name or 'no file'}, not listed")
        if entry is None:
            fix = (
                result.found_instead.lstrip("; ")
                or "name the folder (or file) that holds them with annotations_path"
            )
            looked = f"found no annotation file; looked for {result.looked_for}"
        else:
            fix = (
                "point --input at the folder that holds the pictures the annotations name, "
                "or annotations_path at these pictures' annotations"
            )
            looked = result.found_at
        raise NothingMatched(
            f"none of the {counts.pictures} pictures matches an annotation: {looked}; "
            f"{'; '.join(examples)}. To fix: {fix}"
        )
    most_pictures = 2 * (counts.pictures - counts.matched) > counts.pictures
    most_entries = 2 * counts.unmatched_entries > counts.entries
    if not (most_pictures or most_entries):
        return None
    examples = []
    if most_pictures and picture:
        examples.append(f"e.g. picture {picture} has none")
    if most_entries and entry is not None:
        examples.append(f"e.g. {entry.annotation} names {entry.name or 'no file'}")
    line = f"{counts.describe()} ({result.found_at}; {', '.join(examples)})"
    if allow_unmatched:
        return f"annotations matched poorly: {line}; kept on purpose ({ALLOW_OPTION})"
    drop = (
        ""
        if tasks.task(result.task).negatives
        else " (or --unannotated drop to leave the pictures without one out)"
    )
    raise MostlyUnmatched(f"match poorly: {line}. If that is meant, pass {ALLOW_OPTION}{drop}")
