"""A captions run's sources: every caption of every picture, found where the dataset keeps them.

- `coco`: `captions_*.json` (COCO 2017's `annotations/captions_train2017.json`, usually five a
  picture), under `--input` or beside it, those named after the input's folder (`captions_val2017`
  for `val2017/`) when any is; each entry's `image_id` names an `images` entry's `file_name`;
- `pairs`: one `image, caption` pair a line, a picture named on as many lines as it has captions:
  Flickr8k's `captions.txt` (`image,caption`, a header, captions with unquoted commas), its
  `Flickr8k.token.txt` (`name.jpg#0<TAB>caption`), a CSV or TSV with or without a header (the
  columns found by name: `image`/`file_name`/`filename`/`path`, `caption`/`text`/`sentence`), or
  JSONL objects with those keys; found as `captions.{txt,csv,tsv,jsonl}` or `*.token.txt` under
  `--input` or beside it, or named with `annotations_path`.

Captions are kept in their file's order, surrounding whitespace trimmed, UTF-8. A caption that
names no listed picture, or several, is a line of annotations_without_image.jsonl; a line that
cannot be read is one too, naming its file and line number. A picture no caption names is
unannotated (kept with no caption and counted, or dropped by `--unannotated drop`).
"""

from __future__ import annotations

import csv
import json
import os
import posixpath
import re
from collections import defaultdict
from collections.abc import Iterator, Sequence
from dataclasses import dataclass

from beam_tfrecord import reasons, storage, tasks
from beam_tfrecord.elements import AnnotationKind, ImageAnnotations
from beam_tfrecord.plan.annotations.catalog import Catalog, describe_error, partition, read_one, stem
from beam_tfrecord.plan.annotations.declared import DeclaredSplits, split_name
from beam_tfrecord.plan.annotations.locate import input_base, join
from beam_tfrecord.plan.annotations.paths import AnnotationPath
from beam_tfrecord.plan.annotations.results import AnnotationSet, UnmatchedEntry
from beam_tfrecord.plan.listing import InputFile, list_inputs

__all__ = ["KINDS", "LOOKED_FOR", "find_files", "is_captions_file", "load_captions"]

KINDS = tasks.CAPTION_FORMATS
LOOKED_FOR = {
    "coco": "captions_*.json under --input or beside it (or its annotations/ folder)",
    "pairs": "captions.txt, captions.csv, captions.tsv, captions.jsonl or *.token.txt under --input or "
    "beside it",
}
_COCO = re.compile(r"^captions_.*\.json$", re.IGNORECASE)
# Flickr8k's text zip holds Flickr8k.token.txt and Flickr8k.lemma.token.txt, the same captions
# lemmatized: only the first is the captions (the lemma file would double every picture's).
_PAIRS = re.compile(
    r"^(captions\.(txt|csv|tsv|jsonl)|(?!.*\.lemma\.token\.txt$).*\.token\.txt)$", re.IGNORECASE
)
# Flickr8k's split lists, beside its token file: the pictures of each split, a name a line.
FLICKR_SPLITS = {"train": "train", "dev": "validation", "test": "test"}
_TOKEN = re.compile(r"^(?P<image>[^\t#]+)#\d+\t(?P<caption>.*)$")
IMAGE_COLUMNS = ("image", "image_name", "file_name", "filename", "file", "path", "image_path", "img")
CAPTION_COLUMNS = ("caption", "captions", "text", "sentence", "comment", "description")
_IMAGE_EXTENSIONS = (".jpg", ".jpeg", ".png", ".bmp", ".gif", ".webp", ".tif", ".tiff")
# A captions file read whole on the launcher: COCO 2017's train captions are 91 MB.
MAX_CAPTIONS_BYTES = 2 * 2**30


@dataclass(frozen=True)
class _Caption:
    """One caption as its file gives it: the picture it names, where it is, and its text."""

    name: str
    where: str
    text: str


# Text files a captions dataset keeps beside its pictures: never pictures in a captions run.
TEXT_EXTENSIONS = (".csv", ".tsv", ".jsonl")


def _partition(files: Sequence[InputFile]) -> Catalog:
    """The listing as the captions reader sees it: `catalog.partition`'s, CSV, TSV and JSONL files
    counted with the annotation files."""
    listed = partition(files)
    text = {r: f for r, f in listed.images.items() if r.lower().endswith(TEXT_EXTENSIONS)}
    images = {r: f for r, f in listed.images.items() if r not in text}
    return Catalog(images, {**listed.annotation_files, **text})


def is_captions_file(relpath: str) -> bool:
    """Whether a file's name is a captions file's, of either format."""
    return _is_coco(relpath) or _is_pairs(relpath)


def _is_coco(relpath: str) -> bool:
    return bool(_COCO.match(posixpath.basename(relpath)))


def _is_pairs(relpath: str) -> bool:
    return bool(_PAIRS.match(posixpath.basename(relpath)))


def find_files(
    kind: str, files: Sequence[InputFile], paths: Sequence[AnnotationPath], beside: bool = True
) -> list[InputFile]:
    """The captions files to read: given, else under the input, else (`beside`) in the input's
    parent or grandparent (and their `annotations/`), those named after the input's folder when
    any is; never a folder as high as the filesystem's or a bucket's root."""
    if paths:
        found = []
        for path in paths:
            if not storage.exists(path.path, if_remote=True):
                raise ValueError(f"annotations_path {path.path} does not exist")
            found.append(InputFile(posixpath.basename(path.path), path.path, 0))
        return found
    wanted = _is_coco if kind == "coco" else _is_pairs
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


def load_captions(
    kind: AnnotationKind, files: Sequence[InputFile], paths: Sequence[AnnotationPath]
) -> AnnotationSet:
    """Every listed picture's captions, in their files' order (see the module docstring)."""
    if kind not in KINDS:
        raise ValueError(f"annotations must be one of {', '.join(KINDS)} for captions, not {kind!r}")
    listed = _partition(files)
    sources = find_files(kind, files, paths)
    found: dict[str, list[str]] = defaultdict(list)
    unmatched: list[UnmatchedEntry] = []
    declared: dict[str, list[tuple[str, str]]] = defaultdict(list)
    for source in sources:
        shown = source.relpath if source.relpath in listed.annotation_files else source.path
        captions = _coco(source, shown) if kind == "coco" else _pairs(source, shown)
        split = _split_of(shown) if kind == "coco" else None
        for relpath, (flickr_split, where) in _flickr_splits(source, listed).items():
            declared[relpath].append((flickr_split, where))
        for caption in captions:
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
        relpath: ImageAnnotations((), stem(relpath), captions=tuple(found.get(relpath, ())))
        for relpath in listed.images
    }
    what = "a captions file" if kind == "coco" else "a captions file (image, caption pairs)"
    read = {f.relpath: f"{what}, read" for f in sources if f.relpath in listed.annotation_files}
    others = {r: f"a {posixpath.splitext(r)[1]} file, not an image" for r in listed.annotation_files}
    where = ", ".join(f.relpath if f.relpath in listed.annotation_files else f.path for f in sources[:3])
    count = sum(len(texts) for texts in found.values())
    title = "COCO captions" if kind == "coco" else "Captions"
    return AnnotationSet(
        kind,
        (),
        images,
        unannotated=frozenset(r for r in images if not images[r].captions),
        sources=others | read,
        unmatched=tuple(unmatched),
        found_at=f"{title} in {where or 'nothing'}: {count} captions",
        declared=_declared(declared),
        looked_for=LOOKED_FOR[kind],
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


def _split_of(shown: str) -> str | None:
    """`captions_val2017.json` -> validation."""
    match = re.match(r"^captions_([a-z]+)", posixpath.basename(shown), re.IGNORECASE)
    return split_name(match.group(1)) if match else None


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


def _read_text(source: InputFile, shown: str) -> str:
    if source.size > MAX_CAPTIONS_BYTES:
        raise ValueError(f"annotations_path {shown} is over {MAX_CAPTIONS_BYTES // 2**30} GB")
    try:
        return read_one(source.path).decode("utf-8-sig")
    except UnicodeDecodeError as error:
        raise ValueError(f"annotations_path {shown} is not UTF-8 text: {error}") from None
    except Exception as error:  # an unreadable file fails the run, naming it
        raise ValueError(f"annotations_path {shown} cannot be read: {describe_error(error)}") from None


def _coco(source: InputFile, shown: str) -> Iterator[_Caption | UnmatchedEntry]:
    """A COCO captions file's captions, each naming its picture's `file_name`."""
    try:
        document = json.loads(_read_text(source, shown))
    except json.JSONDecodeError as error:
        raise ValueError(f"annotations_path {shown} is not JSON: {error}") from None
    if not isinstance(document, dict) or not isinstance(document.get("annotations"), list):
        raise ValueError(f"annotations_path {shown} is not a COCO captions file (no annotations list)")
    annotations = document["annotations"]
    if "categories" in document and not any(isinstance(a, dict) and "caption" in a for a in annotations):
        raise ValueError(
            f"annotations_path {shown} is a COCO instances file (categories, no captions): pass its "
            "captions_*.json, or --task detection"
        )
    names = {}
    for image in document.get("images") or []:
        if isinstance(image, dict) and "id" in image and isinstance(image.get("file_name"), str):
            names[image["id"]] = image["file_name"]
    for index, entry in enumerate(document["annotations"]):
        where = f"{shown}#annotation {entry.get('id', index) if isinstance(entry, dict) else index}"
        if not isinstance(entry, dict) or not isinstance(entry.get("caption"), str):
            if isinstance(entry, dict) and "bbox" in entry:
                raise ValueError(
                    f"annotations_path {shown} is a COCO instances file (boxes, no captions): "
                    "pass its captions_*.json, or --task detection"
                )
            yield UnmatchedEntry(where, "", reasons.BAD_ENTRY.code, "an annotation without a caption")
            continue
        name = names.get(entry.get("image_id"))
        if name is None:
            detail = f"image_id {entry.get('image_id')!r} is not among the file's images"
            yield UnmatchedEntry(where, "", reasons.UNKNOWN_IMAGE.code, detail)
            continue
        yield _Caption(name, where, entry["caption"].strip())


def _pairs(source: InputFile, shown: str) -> Iterator[_Caption | UnmatchedEntry]:
    """A file of `image, caption` lines (see the module docstring), in its order."""
    text = _read_text(source, shown)
    lines = text.splitlines()
    if shown.lower().endswith(".jsonl") or (lines and lines[0].lstrip().startswith("{")):
        yield from _jsonl(lines, shown)
        return
    if lines and _TOKEN.match(lines[0]):
        for number, line in enumerate(lines, 1):
            if not line.strip():
                continue
            match = _TOKEN.match(line)
            if match is None:
                yield _bad_line(shown, number, "not `name.jpg#N<TAB>caption`")
                continue
            yield _Caption(match["image"].strip(), f"{shown}:{number}", match["caption"].strip())
        return
    delimiter = "\t" if lines and "\t" in lines[0] else "|" if lines and lines[0].count("|") >= 2 else ","
    header: list[str] | None = None
    image_at, caption_at = 0, 1
    # A line at a time: a caption that opens a quote and never closes it stays one line's.
    rows = (next(csv.reader([line], delimiter=delimiter), []) for line in lines)
    for number, row in enumerate(rows, 1):
        if not row or not any(cell.strip() for cell in row):
            continue
        if number == 1 and not _names_picture(row[0]):
            header = [cell.strip().lower() for cell in row]
            image_at = next((header.index(c) for c in IMAGE_COLUMNS if c in header), -1)
            caption_at = next((header.index(c) for c in CAPTION_COLUMNS if c in header), -1)
            if image_at < 0 or caption_at < 0:
                raise ValueError(
                    f"annotations_path {shown}: its header {row!r} names no image column "
                    f"({', '.join(IMAGE_COLUMNS)}) or no caption column ({', '.join(CAPTION_COLUMNS)})"
                )
            continue
        if len(row) <= max(image_at, caption_at):
            yield _bad_line(shown, number, f"no caption after {row[0].strip()!r}" if row else "empty")
            continue
        # A caption with unquoted delimiters (Flickr8k's captions.txt) is the rest of the line.
        if caption_at == len(header or row) - 1 or header is None:
            caption = delimiter.join(row[caption_at:])
        else:
            caption = row[caption_at]
        yield _Caption(row[image_at].strip(), f"{shown}:{number}", caption.strip())


def _jsonl(lines: Sequence[str], shown: str) -> Iterator[_Caption | UnmatchedEntry]:
    for number, line in enumerate(lines, 1):
        if not line.strip():
            continue
        try:
            entry = json.loads(line)
        except json.JSONDecodeError as error:
            yield _bad_line(shown, number, f"not JSON: {error.msg}")
            continue
        if not isinstance(entry, dict):
            yield _bad_line(shown, number, "not a JSON object")
            continue
        image = next((entry[c] for c in IMAGE_COLUMNS if isinstance(entry.get(c), str)), None)
        caption = next((entry[c] for c in CAPTION_COLUMNS if c in entry), None)
        if image is None or caption is None:
            yield _bad_line(shown, number, "no image or no caption key")
            continue
        for text in caption if isinstance(caption, list) else [caption]:
            if isinstance(text, str):
                yield _Caption(image.strip(), f"{shown}:{number}", text.strip())
            else:
                yield _bad_line(shown, number, f"a caption that is not text: {text!r}")


def _bad_line(shown: str, number: int, why: str) -> UnmatchedEntry:
    return UnmatchedEntry(
        f"{shown}:{number}", "", reasons.BAD_ENTRY.code, f"line {number} cannot be read: {why}"
    )


def _names_picture(cell: str) -> bool:
    return posixpath.splitext(cell.strip().lower())[1] in _IMAGE_EXTENSIONS
