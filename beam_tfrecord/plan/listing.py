"""List the inputs of a run: paths and sizes only, never bytes.

Remote inputs (`gs://`) are listed through Beam's filesystems. Local ones are walked here:
Beam's LocalFileSystem does not follow symlinked directories and silently drops files whose
size cannot be read (a broken symlink), which would lose inputs without a word.
"""

from __future__ import annotations

import collections
import os
import posixpath
import re
import stat
from collections.abc import Iterator, Sequence
from dataclasses import dataclass

from apache_beam.io.filesystem import FileSystem
from apache_beam.io.filesystems import FileSystems

from beam_tfrecord import gcs, reasons, storage
from beam_tfrecord.config_base import ConfigError
from beam_tfrecord.elements import BandFile, Page

__all__ = ["InputFile", "list_inputs", "shown_path", "skip_reason", "split_input_spec", "walk_local"]

# Files that operating systems and photo tools leave beside images. They become `skipped`
# reject lines, counted apart from inputs that failed.
SKIPPED_NAMES = frozenset({"thumbs.db", ".ds_store", "desktop.ini", "icon\r"})
SKIPPED_DIRS = frozenset({"__macosx"})
GLOB_CHARS = "*?["


@dataclass(frozen=True, order=True, slots=True)
class InputFile:
    """One listed file; `relpath` (posix, relative to the input) is its identity everywhere.

    `problem` is (reason, detail) when the listing already knows the entry cannot be read
    (a broken symlink, a FIFO, an unreadable directory) or is not an input (a symlink loop):
    it becomes a reject line in the plan instead of vanishing. Slots keep 100k entries small.
    """

    relpath: str
    path: str
    size: int
    problem: tuple[str, str] | None = None
    mtime: float = 0.0  # when the file last changed (a rerun resumes only over an unchanged listing)
    # A picture whose bands are files of their own (`--bands`, plan.bands): those files in band
    # order; `relpath` is then the picture's key, `size` their sum and `mtime` the latest.
    bands: tuple[BandFile, ...] = ()
    # One page of a multi-page file (`--pages each`, plan.pages): `relpath` is then the page's
    # name (`stack.tif#03`), `path`, `size` and `mtime` the file's. Page(0, 1): a file of one page.
    page: Page | None = None

    @property
    def file_relpath(self) -> str:
        """The relative path of the file the input is read from: what labels, groups and splits
        see, so the pages of a file are labelled and split as the file is."""
        return self.page.file_of(self.relpath) if self.page is not None else self.relpath


def split_input_spec(input_spec: str) -> tuple[str, str]:
    """The input -> (base directory that relpaths are relative to, glob pattern to match)."""
    spec = storage.absolute(input_spec)
    spec = spec.rstrip("/") or "/"
    first_glob = min((spec.find(c) for c in GLOB_CHARS if c in spec), default=-1)
    if first_glob >= 0:
        prefix = spec[:first_glob]
        base = prefix.rstrip("/") if prefix.endswith("/") else posixpath.dirname(prefix)
        return base, spec
    return spec, FileSystems.join(spec, "**")


def skip_reason(relpath: str) -> str | None:
    """Why a listed file is not an input at all (hidden or OS clutter), or None."""
    parts = relpath.split("/")
    if parts[-1].lower() in SKIPPED_NAMES:
        return f"{parts[-1]} is operating-system clutter, not an image"
    for part in parts:
        if part.startswith("."):
            return f"{part} is hidden"
        if part.lower() in SKIPPED_DIRS:
            return f"{part}/ holds archive metadata, not images"
    return None


def list_inputs(input_spec: str) -> list[InputFile]:
    """Every file under a directory (recursive), matching a glob, or the one file named.

    Raises `ValueError` for a missing or empty input, so a run fails before any work starts.
    """
    base, pattern = split_input_spec(input_spec)
    if not _is_utf8(base):
        raise ConfigError("input", f"{shown_path(base)} is not valid UTF-8: rename it or a folder above it")
    match = _match if storage.is_remote(pattern) else _match_local
    try:
        found = match(pattern)
        if not found and pattern.endswith("/**") and storage.is_file(base):
            found = match(base)  # a single file given as the input: its name is its relpath
            base = posixpath.dirname(base)
    except Exception as error:
        if not storage.is_gcs(input_spec):
            raise
        raise gcs.StorageError.of("input", input_spec, error) from None
    if not found:
        if storage.is_gcs(base):
            # GCS has no directories: a prefix exists only while some object's name starts with it.
            raise ConfigError("input", f"{input_spec} holds no files (no object matches {pattern})")
        if not FileSystems.exists(base):
            raise ConfigError("input", f"{input_spec} does not exist")
        raise ConfigError("input", f"{input_spec} holds no files")
    prefix = base.rstrip("/") + "/"
    files = [
        _input_file(path[len(prefix) :] if path.startswith(prefix) else path, path, size, problem, mtime)
        for path, size, problem, mtime in found
    ]
    _refuse_shown_twice(files)
    return sorted(files)


def shown_path(path: str) -> str:
    """A local path as valid UTF-8 text: each byte of its name that is not (Python lists such
    bytes as lone surrogates) written `\\xNN`; any other path as it is."""
    return path if _is_utf8(path) else os.fsencode(path).decode("utf-8", "backslashreplace")


def _is_utf8(text: str) -> bool:
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def _input_file(
    relpath: str, path: str, size: int, problem: tuple[str, str] | None, mtime: float
) -> InputFile:
    """One listed file. A local name that is not valid UTF-8 can be neither a record's
    `image/filename` nor a line of any JSON output: the file is a reject (or keeps the problem
    the listing found), its relpath shown with `\\xNN` for each such byte."""
    if _is_utf8(relpath):
        return InputFile(relpath, path, size, problem, mtime)
    detail = "its path's bytes are not valid UTF-8: rename the file or its folder"
    return InputFile(
        shown_path(relpath), path, size, problem or (reasons.UNDECODABLE_NAME.code, detail), mtime
    )


def _refuse_shown_twice(files: Sequence[InputFile]) -> None:
    """A relpath is a file's identity in every output (the file index, rejects.jsonl): a name
    shown with `\\xNN` that equals another file's name fails the run in one line, never merges
    two files into one."""
    relpaths = [f.relpath for f in files]
    if len(set(relpaths)) == len(relpaths):
        return
    twice = sorted(r for r, n in collections.Counter(relpaths).items() if n > 1)
    raise ConfigError(
        "input",
        f"{twice[0]!r} names two files once a name that is not valid UTF-8 is shown with \\xNN: "
        "rename one of them",
    )


Entry = tuple[str, int, tuple[str, str] | None, float]  # (path, size, problem, mtime)
Found = list[Entry]


def _match(pattern: str) -> Found:
    (result,) = FileSystems.match([pattern])
    return [(m.path, m.size_in_bytes, None, m.last_updated_in_seconds or 0.0) for m in result.metadata_list]


def _match_local(pattern: str) -> Found:
    """Beam's glob semantics (`*` within a folder, `**` across folders) over `walk_local`."""
    prefix = re.split(r"[\[*?]", pattern, maxsplit=1)[0]
    if prefix == pattern:  # no glob: one file (a broken link or FIFO still counts as one)
        return list(_entry(pattern)) if os.path.lexists(pattern) else []
    root = prefix if prefix.endswith("/") else posixpath.dirname(prefix)
    if not os.path.isdir(root):
        return []
    matches = re.compile(FileSystem.translate_pattern(pattern)).match
    if "/" not in pattern[len(root) :].strip("/") and "**" not in pattern:
        # A glob within one folder (`data/*.json`): that folder's entries, never a walk below it
        # (a folder of a dataset's parent may hold a whole disk).
        return [found for found in _folder_entries(root) if matches(found[0])]
    return [found for found in walk_local(root) if matches(found[0])]


def _folder_entries(folder: str) -> Iterator[Entry]:
    """The entries of one folder that are not folders, in name order."""
    with os.scandir(folder) as entries:
        for entry in sorted(entries, key=lambda e: e.name):
            if not _is_dir(entry):
                yield from _entry(entry.path)


def walk_local(root: str) -> Iterator[Entry]:
    """Every entry under `root` that is not a directory, following symlinked directories.

    A symlinked directory is followed unless it leads back to a directory on its own path
    (a loop), which is reported once as `skipped` instead of being walked forever. Two links to
    one directory list its files twice, under both names (duplicates are kept, like copies).
    """
    stack: list[tuple[str, tuple[str, ...]]] = [(root, (os.path.realpath(root),))]  # (folder, its ancestors)
    while stack:
        directory, ancestors = stack.pop()
        try:
            entries = sorted(os.scandir(directory), key=lambda e: e.name)
        except OSError as error:
            if directory != root:
                yield (
                    directory,
                    0,
                    (reasons.UNREADABLE.code, f"directory cannot be listed: {_describe(error)}"),
                    0.0,
                )
                continue
            raise ConfigError("input", f"{root} cannot be listed: {error}") from None
        for entry in entries:
            if _is_dir(entry):
                real = os.path.realpath(entry.path)
                if real in ancestors:
                    yield (
                        entry.path,
                        0,
                        (
                            reasons.SKIPPED.code,
                            f"symlink loop: leads back to {shown_path(real)}, not followed",
                        ),
                        0.0,
                    )
                    continue
                stack.append((entry.path, (*ancestors, real)))
            else:
                yield from _entry(entry.path)


def _is_dir(entry: os.DirEntry[str]) -> bool:
    try:
        return entry.is_dir()  # follows symlinks
    except OSError:
        return False


def _entry(path: str) -> Iterator[Entry]:
    """(path, size, problem, mtime) of one non-directory entry; never raises, never drops it."""
    try:
        info = os.stat(path)  # follows symlinks
    except OSError as error:
        if os.path.islink(path):
            detail = f"broken symbolic link to {os.readlink(path)!r}"
        else:
            detail = _describe(error)
        yield path, 0, (reasons.UNREADABLE.code, detail), 0.0
        return
    if not stat.S_ISREG(info.st_mode):  # a FIFO would block the reader forever
        yield path, 0, (reasons.UNREADABLE.code, "not a regular file (FIFO, socket or device)"), 0.0
        return
    yield path, info.st_size, None, info.st_mtime


def _describe(error: OSError) -> str:
    return f"{type(error).__name__}: {error.strerror or error}"
