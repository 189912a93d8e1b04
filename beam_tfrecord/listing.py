"""List the inputs of a run: paths and sizes only, never bytes, through Beam's filesystems."""

from __future__ import annotations

import os
import posixpath
from dataclasses import dataclass

from apache_beam.io.filesystems import FileSystems

from beam_tfrecord import gcs

# Files that operating systems and photo tools leave beside images. They become `skipped`
# reject lines, counted apart from inputs that failed.
SKIPPED_NAMES = frozenset({"thumbs.db", ".ds_store", "desktop.ini", "icon\r"})
SKIPPED_DIRS = frozenset({"__macosx"})
GLOB_CHARS = "*?["


@dataclass(frozen=True, order=True)
class InputFile:
    """One listed file; `relpath` (posix, relative to `--input`) is its identity everywhere."""

    relpath: str
    path: str
    size: int


def split_input_spec(input_spec: str) -> tuple[str, str]:
    """`--input` -> (base directory that relpaths are relative to, glob pattern to match)."""
    spec = input_spec if "://" in input_spec else os.path.abspath(input_spec)
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
    try:
        metadata = _match(pattern)
        if not metadata and pattern.endswith("/**") and _is_file(base):
            metadata = _match(base)  # a single file given as --input: its name is its relpath
            base = posixpath.dirname(base)
    except Exception as error:
        if not input_spec.startswith("gs://"):
            raise
        raise gcs.StorageError(gcs.describe("--input", input_spec, error)) from None
    if not metadata:
        if base.startswith("gs://"):
            # GCS has no directories: a prefix exists only while some object's name starts with it.
            raise ValueError(f"--input {input_spec} holds no files (no object matches {pattern})")
        if not FileSystems.exists(base):
            raise ValueError(f"--input {input_spec} does not exist")
        raise ValueError(f"--input {input_spec} holds no files")
    prefix = base.rstrip("/") + "/"
    files = [
        InputFile(
            relpath=m.path[len(prefix) :] if m.path.startswith(prefix) else m.path,
            path=m.path,
            size=m.size_in_bytes,
        )
        for m in metadata
    ]
    return sorted(files)


def _is_file(path: str) -> bool:
    if "://" in path:
        return FileSystems.exists(path)
    return os.path.isfile(path)


def _match(pattern: str) -> list:
    (result,) = FileSystems.match([pattern])
    return list(result.metadata_list)
