"""The listing as the annotation parsers see it: which listed files are images and which are
annotation files, lookups by path, and reads of annotation files (local or gs://)."""

from __future__ import annotations

import posixpath
from collections import defaultdict
from collections.abc import Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field

from beam_tfrecord import storage
from beam_tfrecord.plan.listing import InputFile, skip_reason

__all__ = [
    "ANNOTATION_EXTENSIONS",
    "MAX_IMAGE_ANNOTATION_BYTES",
    "Catalog",
    "describe_error",
    "line_of",
    "partition",
    "read_many",
    "read_one",
    "stem",
]

# A listed file with one of these extensions is never an input in an annotation run: it is an
# annotation source (read or not), and becomes a `skipped` line naming what it is.
ANNOTATION_EXTENSIONS = frozenset({".json", ".xml", ".txt", ".yaml", ".yml", ".pbtxt"})
# A per-image annotation file (a VOC XML, a YOLO .txt) larger than this rejects its image unread:
# VOC's largest XML is under 10 KB and a YOLO file of 500 polygons of 100 points about 1 MB, so
# only a hostile or mistaken file reaches it, and the launcher never holds one whole.
MAX_IMAGE_ANNOTATION_BYTES = 64 * 2**20
# Reads of many small annotation files from gs:// in parallel: each is one round trip.
REMOTE_READ_THREADS = 16


def stem(relpath: str) -> str:
    """`a/b/x.jpg` -> `a/b/x`: an image's identity for per-image annotation files."""
    return posixpath.splitext(relpath)[0]


def _parts(name: str) -> list[str]:
    """A file name as written in an annotation (`./train/x.jpg`, `C:\\data\\x.jpg`) -> its path
    components, without empty, `.` and drive parts."""
    parts = [p for p in name.replace("\\", "/").split("/") if p not in ("", ".")]
    if parts and parts[0].endswith(":"):
        parts = parts[1:]
    return parts


@dataclass
class Catalog:
    """A listing split into candidate images and annotation files (hidden and clutter files are
    in neither: the planner skips them). Both keep the listing's order (sorted by relpath)."""

    images: dict[str, InputFile]
    annotation_files: dict[str, InputFile]
    _by_name: dict[str, list[str]] | None = field(default=None, repr=False)

    def matches(self, name: str) -> list[str]:
        """Catalog images that a file name written in an annotation may mean: the relpath itself,
        else every image whose path ends with the name's components (`x.jpg` matches
        `train/x.jpg`), or whose relpath the name ends with (`/data/coco/train/x.jpg` matches
        `train/x.jpg`), at component boundaries."""
        parts = _parts(name)
        if not parts:
            return []
        joined = "/".join(parts)
        if joined in self.images:
            return [joined]
        if self._by_name is None:
            self._by_name = defaultdict(list)
            for relpath in self.images:
                self._by_name[posixpath.basename(relpath)].append(relpath)
        found = []
        for relpath in self._by_name.get(parts[-1], ()):
            listed = relpath.split("/")
            shorter, longer = (parts, listed) if len(parts) <= len(listed) else (listed, parts)
            if longer[len(longer) - len(shorter) :] == shorter:
                found.append(relpath)
        return found


def partition(files: Sequence[InputFile]) -> Catalog:
    """Catalog files -> candidate images and annotation files (by extension)."""
    images: dict[str, InputFile] = {}
    annotation_files: dict[str, InputFile] = {}
    for file in files:
        if skip_reason(file.relpath) is not None:
            continue
        if posixpath.splitext(file.relpath)[1].lower() in ANNOTATION_EXTENSIONS:
            annotation_files[file.relpath] = file
        else:
            images[file.relpath] = file
    return Catalog(images, annotation_files)


def describe_error(error: BaseException) -> str:
    """An I/O error as one line, without the path the caller names anyway."""
    if isinstance(error, OSError) and error.strerror:
        return error.strerror
    return str(error).splitlines()[0] if str(error) else type(error).__name__


def read_one(path: str) -> bytes:
    """A file's bytes, local or gs://, as stored."""
    return storage.read_bytes(path)


def read_many(paths: Sequence[str]) -> Iterator[tuple[str, bytes | None, str | None]]:
    """(path, bytes, None) or (path, None, why it cannot be read) for each path, in order; gs://
    paths are read on REMOTE_READ_THREADS threads (each read is one round trip)."""

    def attempt(path: str) -> tuple[str, bytes | None, str | None]:
        try:
            return path, read_one(path), None
        except Exception as error:  # any storage error: the caller names the file
            return path, None, f"cannot be read: {describe_error(error)}"

    if not any(storage.is_gcs(path) for path in paths):
        yield from map(attempt, paths)
        return
    window = REMOTE_READ_THREADS * 8  # reads ahead of the caller, so memory stays bounded
    with ThreadPoolExecutor(REMOTE_READ_THREADS) as pool:
        for start in range(0, len(paths), window):
            yield from pool.map(attempt, paths[start : start + window])


def line_of(text: str, index: int) -> tuple[int, int]:
    """(line, column), counting from 1, of a character index in a text."""
    line_start = text.rfind("\n", 0, index) + 1
    return text.count("\n", 0, index) + 1, index - line_start + 1
