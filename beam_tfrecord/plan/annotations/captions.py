"""A captions run's sources: every caption of every picture, found where the dataset keeps them,
read by its format (plan.sources.coco's captions files, plan.sources.pairs' image, caption
pairs), found as the format's files under `--input` or beside it, or named with
`annotations_path`.

Captions are kept in their file's order, surrounding whitespace trimmed, UTF-8. A caption that
names no listed picture, or several, is a line of annotations_without_image.jsonl; a line that
cannot be read is one too, naming its file and line number. A picture no caption names is
unannotated (kept with no caption and counted, or dropped by `--unannotated drop`). Flickr8k's
split lists beside a captions file (`Flickr_8k.trainImages.txt`, `dev`, `test`) declare splits.

A file named with `annotations_path` is read by the format whose content it holds (`holds`: a
COCO JSON document, or lines of image, caption pairs), whatever its name says, so a run needs no
`--annotations` to read a `.csv` of pairs.
"""

from __future__ import annotations

import os
import posixpath
from collections import defaultdict
from collections.abc import Iterator, Sequence
from dataclasses import dataclass

from beam_tfrecord import reasons, storage
from beam_tfrecord.elements import ImageAnnotations
from beam_tfrecord.labels.captions import captions_of, captions_value
from beam_tfrecord.plan.annotations.catalog import Catalog, describe_error, partition, read_one, stem
from beam_tfrecord.plan.annotations.declared import DeclaredSplits
from beam_tfrecord.plan.annotations.locate import input_base, join
from beam_tfrecord.plan.annotations.paths import AnnotationPath
from beam_tfrecord.plan.annotations.results import AnnotationSet, UnmatchedEntry
from beam_tfrecord.plan.listing import InputFile, list_inputs
from beam_tfrecord.plan.sources.base import CERTAIN, Listing, LoadRequest, SourceError, SourceFormat

__all__ = [
    "Caption",
    "CaptionFiles",
    "bad_line",
    "find_files",
    "load_captions",
    "read_text",
    "score_files",
]

# Flickr8k's split lists, beside its token file: the pictures of each split, a name a line.
FLICKR_SPLITS = {"train": "train", "dev": "validation", "test": "test"}
# A captions file read whole on the launcher: COCO 2017's train captions are 91 MB.
MAX_CAPTIONS_BYTES = 2 * 2**30


@dataclass(frozen=True)
class Caption:
    """One caption as its file gives it: the picture it names, where it is, and its text."""

    name: str
    where: str
    text: str


# How much of a given captions file is read to tell what it holds (a line of pairs is short; a
# COCO document's first line may be all of it).
HEAD_BYTES = 64 * 1024

# Text files a captions dataset keeps beside its pictures: never pictures in a captions run.
TEXT_EXTENSIONS = (".csv", ".tsv", ".jsonl")


class CaptionFiles:
    """One captions format's files: which are its, how one is read, and what they declare.

    Attributes:
      what: a file of the format read, in a `skipped` line's words.
      title: the format's captions, in the run's first line (`COCO captions in ...`).
    """

    what: str = "a captions file"
    title: str = "Captions"

    def wanted(self, relpath: str) -> bool:
        """Whether a file's name is one of the format's captions files."""
        raise NotImplementedError

    def read(self, source: InputFile, shown: str) -> Iterator[Caption | UnmatchedEntry]:
        """A file's captions, in its order, and the entries that cannot be read."""
        raise NotImplementedError

    def split_of(self, shown: str) -> str | None:
        """The split a captions file's name declares (None: none)."""
        return None

    def holds(self, head: str) -> bool:
        """Whether a file named with annotations_path, by its first characters (`head`), holds
        the format's captions."""
        return True


def score_files(captions: CaptionFiles, listing: Listing) -> float:
    """A captions format's score in the layout search: the files named with annotations_path
    are its when their content is its (`holds`); else any of its files under the input or
    beside it makes it certain."""
    found = find_files(captions, listing.files, listing.paths)
    if listing.paths:
        return CERTAIN if all(captions.holds(_head(f.path)) for f in found) else 0.0
    return CERTAIN if found else 0.0


def _head(path: str) -> str:
    """A file's first characters as text ("" for one that cannot be read: the load names it)."""
    try:
        return storage.read_head(path, HEAD_BYTES).decode("utf-8-sig", "replace")
    except Exception:  # any storage error: the format's load reads it again and says why
        return ""


def _partition(files: Sequence[InputFile]) -> Catalog:
    """The listing as the captions reader sees it: `catalog.partition`'s, CSV, TSV and JSONL files
    counted with the annotation files."""
    listed = partition(files)
    text = {r: f for r, f in listed.images.items() if r.lower().endswith(TEXT_EXTENSIONS)}
    images = {r: f for r, f in listed.images.items() if r not in text}
    return Catalog(images, {**listed.annotation_files, **text})


def find_files(
    captions: CaptionFiles, files: Sequence[InputFile], paths: Sequence[AnnotationPath], beside: bool = True
) -> list[InputFile]:
    """The captions files to read: given, else under the input, else (`beside`) in the input's
    parent or grandparent (and their `annotations/`), those named after the input's folder when
    any is; never a folder as high as the filesystem's or a bucket's root."""
    if paths:
        found = []
        for path in paths:
            if not storage.exists(path.path, if_remote=True):
                raise SourceError(f"{path.path} does not exist", field="annotations_path", file=path.path)
            found.append(InputFile(posixpath.basename(path.path), path.path, 0))
        return found
    wanted = captions.wanted
    under = [f for f in _partition(files).annotation_files.values() if wanted(f.relpath)]
    if under or not beside:
        return sorted(under, key=lambda f: f.relpath)
    base = input_base(files)
    for folder in _parents(base)[:2]:
        found = []
        for where in (folder, join(folder, "annotations")):
            found += [f for f in _listed(where) if wanted(f.relpath)]
        if found:
            named = [f for f in found if posixpath.basename(base) in f.relpath]
            return sorted(named or found, key=lambda f: f.path)
    return []


def _parents(path: str) -> list[str]:
    """`path`'s ancestors, nearest first, above neither `/` nor a bucket (nor the root itself)."""
    return storage.parents(path)[:-1]


def _listed(folder: str) -> list[InputFile]:
    """The files directly in a folder, never walking below it; on gs://, where a folder is a
    prefix whose listing would walk every object under it, only the captions files' own names."""
    if storage.is_remote(folder):
        names = ["captions.txt", "captions.csv", "captions.tsv", "captions.jsonl", "Flickr8k.token.txt"]
        return [f for name in names for f in _one(join(folder, name))]
    try:
        with os.scandir(folder) as entries:
            return [
                InputFile(entry.name, entry.path, entry.stat().st_size)
                for entry in entries
                if entry.is_file()
            ]
    except OSError:  # not a folder, or not readable: no captions there
        return []


def _one(path: str) -> list[InputFile]:
    """The one file at `path`, or none."""
    try:
        return [InputFile(posixpath.basename(path), path, f.size) for f in list_inputs(path)]
    except (ValueError, OSError):  # not there
        return []


def load_captions(fmt: SourceFormat, captions: CaptionFiles, request: LoadRequest) -> AnnotationSet:
    """Every listed picture's captions, in their files' order (see the module docstring)."""
    files = request.files
    listed = _partition(files)
    sources = find_files(captions, files, request.paths)
    found: dict[str, list[str]] = defaultdict(list)
    unmatched: list[UnmatchedEntry] = []
    declared: dict[str, list[tuple[str, str]]] = defaultdict(list)
    for source in sources:
        shown = source.relpath if source.relpath in listed.annotation_files else source.path
        split = captions.split_of(shown)
        for relpath, (flickr_split, where) in _flickr_splits(source, listed).items():
            declared[relpath].append((flickr_split, where))
        for caption in captions.read(source, shown):
            if isinstance(caption, UnmatchedEntry):
                unmatched.append(caption)
                continue
            matches = listed.matches(caption.name)
            if len(matches) == 1:
                found[matches[0]].append(caption.text)
                if split is not None:
                    declared[matches[0]].append((split, shown))
            elif not matches:
                detail = "names a picture that is not listed"
                unmatched.append(
                    UnmatchedEntry(caption.where, caption.name, reasons.MISSING_IMAGE.code, detail)
                )
            else:
                detail = f"its file name matches {len(matches)} listed pictures ({', '.join(matches[:3])})"
                unmatched.append(
                    UnmatchedEntry(caption.where, caption.name, reasons.AMBIGUOUS_IMAGE.code, detail)
                )
    images = {
        relpath: ImageAnnotations((), stem(relpath), values=captions_value(found.get(relpath, ())))
        for relpath in listed.images
    }
    read = {f.relpath: f"{captions.what}, read" for f in sources if f.relpath in listed.annotation_files}
    others = {r: f"a {posixpath.splitext(r)[1]} file, not an image" for r in listed.annotation_files}
    where = ", ".join(f.relpath if f.relpath in listed.annotation_files else f.path for f in sources[:3])
    count = sum(len(texts) for texts in found.values())
    return AnnotationSet(
        fmt.name,
        (),
        images,
        unannotated=frozenset(r for r in images if not captions_of(images[r])),
        sources=others | read,
        unmatched=tuple(unmatched),
        found_at=f"{captions.title} in {where or 'nothing'}: {count} captions",
        declared=_declared(declared),
        looked_for=fmt.looked_for[request.task],
        task="captions",
    )


def _flickr_splits(source: InputFile, listed: Catalog) -> dict[str, tuple[str, str]]:
    """Flickr8k's split lists beside its captions file (`Flickr_8k.trainImages.txt`, `dev`,
    `test`): listed picture -> (split, list)."""
    folder = posixpath.dirname(source.path)
    found: dict[str, tuple[str, str]] = {}
    for word, split in FLICKR_SPLITS.items():
        name = f"Flickr_8k.{word}Images.txt"
        for file in _one(join(folder, name)):
            for line in read_one(file.path).decode("utf-8", "replace").split():
                matches = listed.matches(line)
                if len(matches) == 1:
                    found[matches[0]] = (split, name)
    return found


def _declared(claims: dict[str, list[tuple[str, str]]]) -> DeclaredSplits | None:
    if not claims:
        return None
    split_of, conflicts = {}, {}
    for relpath, found in claims.items():
        splits = sorted({split for split, _ in found})
        if len(splits) > 1:
            conflicts[relpath] = " and ".join(sorted({where for _, where in found}))
        else:
            split_of[relpath] = splits[0]
    names = tuple(n for n in ("train", "validation", "test") if n in split_of.values())
    sources = sorted({where for found in claims.values() for _, where in found})
    what = "COCO captions files named by split" if sources[0].endswith(".json") else "Flickr8k's split lists"
    return DeclaredSplits(f"{what} ({', '.join(sources[:3])})", names, split_of, conflicts)


def read_text(source: InputFile, shown: str) -> str:
    if source.size > MAX_CAPTIONS_BYTES:
        raise SourceError(
            f"{shown} is over {MAX_CAPTIONS_BYTES // 2**30} GB", field="annotations_path", file=shown
        )
    try:
        return read_one(source.path).decode("utf-8-sig")
    except UnicodeDecodeError as error:
        raise SourceError(
            f"{shown} is not UTF-8 text: {error}", field="annotations_path", file=shown
        ) from None
    except Exception as error:  # an unreadable file fails the run, naming it
        detail = f"{shown} cannot be read: {describe_error(error)}"
        raise SourceError(detail, field="annotations_path", file=shown) from None


def bad_line(shown: str, number: int, why: str) -> UnmatchedEntry:
    return UnmatchedEntry(
        f"{shown}:{number}", "", reasons.BAD_ENTRY.code, f"line {number} cannot be read: {why}"
    )
