"""Where annotations are, as a user writes it in `annotations_path`: one path, several
(`a.json,b.json`), or one per split (`train=a.json,validation=b.json`, COCO only)."""

from __future__ import annotations

from dataclasses import dataclass

from beam_tfrecord import storage
from beam_tfrecord.plan.annotations.results import SourceError
from beam_tfrecord.plan.splits import SPLIT_NAME_CHARS

__all__ = ["AnnotationPath", "parse_annotation_paths"]


@dataclass(frozen=True, slots=True)
class AnnotationPath:
    """One annotation file or folder; `split` is the split its images keep (None: hashed)."""

    path: str
    split: str | None = None


def parse_annotation_paths(text: str | None) -> tuple[AnnotationPath, ...]:
    """`a.json`, `a.json,b.json` or `train=a.json,validation=b.json` -> the paths, local ones made
    absolute (as `manifest` is); SourceError naming `annotations_path` for an empty item or a split
    named twice. An item is `SPLIT=PATH` only when SPLIT is a split name (lower-case letters,
    digits, `_`), so a path holding `=` still reads as a path."""
    if text is None or not text.strip():
        return ()
    found: list[AnnotationPath] = []
    for item in text.split(","):
        item = item.strip()
        name, sep, rest = item.partition("=")
        split = None
        if sep and name.strip() and not set(name.strip()) - SPLIT_NAME_CHARS:
            split, item = name.strip(), rest.strip()
        if not item:
            raise SourceError(f"{text!r} has an empty path", field="annotations_path")
        if split is not None and any(p.split == split for p in found):
            raise SourceError(f"gives split {split} twice", field="annotations_path")
        found.append(AnnotationPath(storage.absolute(item), split))
    return tuple(found)
