"""Image, caption pairs: one `image, caption` pair a line, a picture named on as many lines as it
has captions: Flickr8k's `captions.txt` (`image,caption`, a header, captions with unquoted commas),
its `Flickr8k.token.txt` (`name.jpg#0<TAB>caption`), a CSV or TSV with or without a header (the
columns found by name: `image`/`file_name`/`filename`/`path`, `caption`/`text`/`sentence`), or
JSONL objects with those keys; found as `captions.{txt,csv,tsv,jsonl}` or `*.token.txt` under
`--input` or beside it, or named with `annotations_path` (plan.annotations.captions reads them).
"""

from __future__ import annotations

import csv
import json
import posixpath
import re
from collections.abc import Iterator, Mapping, Sequence
from typing import ClassVar

from beam_tfrecord.plan.annotations import captions
from beam_tfrecord.plan.annotations.captions import Caption, CaptionFiles, bad_line, load_captions, read_text
from beam_tfrecord.plan.annotations.results import AnnotationSet, UnmatchedEntry
from beam_tfrecord.plan.listing import InputFile
from beam_tfrecord.plan.sources.base import Listing, LoadRequest, SourceError, SourceFormat

__all__ = ["FORMAT", "Pairs"]

# Flickr8k's text zip holds Flickr8k.token.txt and Flickr8k.lemma.token.txt, the same captions
# lemmatized: only the first is the captions (the lemma file would double every picture's).
_PAIRS = re.compile(
    r"^(captions\.(txt|csv|tsv|jsonl)|(?!.*\.lemma\.token\.txt$).*\.token\.txt)$", re.IGNORECASE
)
_TOKEN = re.compile(r"^(?P<image>[^\t#]+)#\d+\t(?P<caption>.*)$")
IMAGE_COLUMNS = ("image", "image_name", "file_name", "filename", "file", "path", "image_path", "img")
CAPTION_COLUMNS = ("caption", "captions", "text", "sentence", "comment", "description")
_IMAGE_EXTENSIONS = (".jpg", ".jpeg", ".png", ".bmp", ".gif", ".webp", ".tif", ".tiff")


def _read(source: InputFile, shown: str) -> Iterator[Caption | UnmatchedEntry]:
    """A file of `image, caption` lines (see the module docstring), in its order."""
    text = read_text(source, shown)
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
                yield bad_line(shown, number, "not `name.jpg#N<TAB>caption`")
                continue
            yield Caption(match["image"].strip(), f"{shown}:{number}", match["caption"].strip())
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
                raise SourceError(
                    f"{shown}: its header {row!r} names no image column "
                    f"({', '.join(IMAGE_COLUMNS)}) or no caption column ({', '.join(CAPTION_COLUMNS)})",
                    field="annotations_path",
                    file=shown,
                )
            continue
        if len(row) <= max(image_at, caption_at):
            yield bad_line(shown, number, f"no caption after {row[0].strip()!r}" if row else "empty")
            continue
        # A caption with unquoted delimiters (Flickr8k's captions.txt) is the rest of the line.
        if caption_at == len(header or row) - 1 or header is None:
            caption = delimiter.join(row[caption_at:])
        else:
            caption = row[caption_at]
        yield Caption(row[image_at].strip(), f"{shown}:{number}", caption.strip())


def _jsonl(lines: Sequence[str], shown: str) -> Iterator[Caption | UnmatchedEntry]:
    for number, line in enumerate(lines, 1):
        if not line.strip():
            continue
        try:
            entry = json.loads(line)
        except json.JSONDecodeError as error:
            yield bad_line(shown, number, f"not JSON: {error.msg}")
            continue
        if not isinstance(entry, dict):
            yield bad_line(shown, number, "not a JSON object")
            continue
        image = next((entry[c] for c in IMAGE_COLUMNS if isinstance(entry.get(c), str)), None)
        caption = next((entry[c] for c in CAPTION_COLUMNS if c in entry), None)
        if image is None or caption is None:
            yield bad_line(shown, number, "no image or no caption key")
            continue
        for text in caption if isinstance(caption, list) else [caption]:
            if isinstance(text, str):
                yield Caption(image.strip(), f"{shown}:{number}", text.strip())
            else:
                yield bad_line(shown, number, f"a caption that is not text: {text!r}")


def _names_picture(cell: str) -> bool:
    return posixpath.splitext(cell.strip().lower())[1] in _IMAGE_EXTENSIONS


class _Files(CaptionFiles):
    what = "a captions file (image, caption pairs)"
    title = "Captions"

    def wanted(self, relpath: str) -> bool:
        return bool(_PAIRS.match(posixpath.basename(relpath)))

    def read(self, source: InputFile, shown: str) -> Iterator[Caption | UnmatchedEntry]:
        return _read(source, shown)

    def holds(self, head: str) -> bool:
        """Lines of text, or JSON lines (an object a line): whatever the file's extension."""
        text = head.lstrip()
        if not text.startswith(("{", "[")):
            return True
        try:
            return isinstance(json.loads(text.split("\n", 1)[0]), dict)
        except json.JSONDecodeError:
            return False


_FILES = _Files()


class Pairs(SourceFormat):
    name = "pairs"
    title = "image, caption pairs"
    tasks = ("captions",)
    help = "image, caption pairs: CSV, TSV, JSONL, Flickr8k's captions.txt or *.token.txt"
    looked_for: ClassVar[Mapping[str, str]] = {
        "captions": "captions.txt, captions.csv, captions.tsv, captions.jsonl or *.token.txt under --input "
        "or beside it",
    }
    options = ("path", "allow_unmatched_annotations", "declared_splits")
    suffixes = (".txt", ".csv", ".tsv", ".jsonl")

    def claims(self, relpath: str, task: str) -> bool:
        return task == "captions" and _FILES.wanted(relpath)

    def score(self, task: str, listing: Listing) -> float:
        return captions.score_files(_FILES, listing)

    def load(self, request: LoadRequest) -> AnnotationSet:
        return load_captions(self, _FILES, request)


FORMAT = Pairs()
