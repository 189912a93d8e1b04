"""Where local paths and remote ones (`gs://`) meet: the one module that tells them apart.

A run's input, output, manifest, annotations and models may each be a local path or an object of
a store (`scheme://...`). Most work goes through Beam's filesystems, which take both; what they
do not say the same way on both sides is here, once: whether a path is remote, what "exists" and
"a folder" mean where a store has no folders (GCS: a prefix some object's name starts with),
which paths name the same file, how a file is read as stored and written whole or not at all.
Reads of gs:// objects go through `gcs` (one reused client per thread), everything else through
`apache_beam.io.filesystems`; nothing here talks to a store by itself.

Beam (and with it `gcs`) is imported on first use, not with this module: a command answers a
usage error about a local path at once, not after the seconds Beam's import takes; `gcs` is
imported before Beam's filesystems are first used, so its hooks (the emulator switch, the time
limits) are in place before Beam builds a client.

Each question asked of a remote path costs a request. Callers that only want what a local check
gives for free (a local file that is not there) say what a remote path counts as instead
(`if_remote`): the read that follows says whether it is there.
"""

from __future__ import annotations

import contextlib
import errno
import json
import os
import posixpath
import stat
from collections.abc import Callable, Sequence
from types import ModuleType
from typing import TYPE_CHECKING, BinaryIO, TypeVar

from beam_tfrecord.edges import Json

if TYPE_CHECKING:
    from apache_beam.io.filesystem import FileMetadata
    from apache_beam.io.filesystems import FileSystems

    from beam_tfrecord.gcs import GcsConfig

__all__ = [
    "absolute",
    "delete",
    "exists",
    "is_absolute",
    "is_file",
    "is_folder",
    "is_gcs",
    "is_remote",
    "join",
    "lines",
    "make_folders",
    "match",
    "normalize",
    "open_binary",
    "parents",
    "read_bytes",
    "read_head",
    "read_json",
    "read_json_or_none",
    "read_text",
    "read_text_or_none",
    "real_path",
    "same_file",
    "split_scheme",
    "write_atomic",
]

_T = TypeVar("_T")

_SEPARATOR = "://"
_GCS = "gs://"


def _gcs() -> ModuleType:
    from beam_tfrecord import gcs

    return gcs


def _filesystems() -> type[FileSystems]:
    """Beam's filesystems, once `gcs` has set its hooks (see the module docstring)."""
    from apache_beam.io.filesystems import FileSystems

    _gcs()
    return FileSystems


def is_remote(path: str) -> bool:
    """Whether `path` names an object of a store (`scheme://...`) rather than a file on this
    machine: only a local path can be checked, walked or renamed with the `os` module."""
    return _SEPARATOR in path


def is_gcs(path: str) -> bool:
    """Whether `path` is a Cloud Storage object or prefix (`gs://bucket/...`): its errors are
    explained by `gcs.problem`, and its reads take `gcs`'s reused clients."""
    return path.startswith(_GCS)


def split_scheme(path: str) -> tuple[str, str]:
    """(`gs`, `bucket/a/b`) for `gs://bucket/a/b`; (``, `path`) for a local path."""
    scheme, separator, rest = path.partition(_SEPARATOR)
    return (scheme, rest) if separator else ("", path)


def is_absolute(path: str) -> bool:
    """Whether `path` names one place whatever the working folder: a remote path always does."""
    return is_remote(path) or os.path.isabs(path)


def absolute(path: str) -> str:
    """A local path made absolute (a run's workers and its later readers may start elsewhere);
    a remote path as it is."""
    return path if is_remote(path) else os.path.abspath(path)


def real_path(path: str) -> str:
    """The path a file is reached by once every symlink is followed (local); a remote path as it is,
    as a store has no links."""
    return path if is_remote(path) else os.path.realpath(path)


def same_file(a: str, b: str) -> bool:
    """Whether two paths name one file: a symlink on either side counts as what it points to."""
    return real_path(a) == real_path(b)


def normalize(path: str) -> str:
    """`path` with `.`, `..` and doubled slashes resolved, its scheme kept (a YAML file's `../x`
    and the listing's path then compare equal)."""
    scheme, rest = split_scheme(path)
    return f"{scheme}{_SEPARATOR}{posixpath.normpath(rest)}" if scheme else posixpath.normpath(path)


def parents(path: str) -> list[str]:
    """`path`'s folders, nearest first, down to its root and no further: `/` for a local path (a
    relative one stops at its first folder), the bucket (`gs://bucket`) for a remote one."""
    parts = path.rstrip("/").split("/")
    floor = 3 if is_remote(path) else 1  # gs://bucket is three parts: "gs:", "", "bucket"
    return ["/".join(parts[:end]) or "/" for end in range(len(parts) - 1, floor - 1, -1)]


def join(base: str, *parts: str) -> str:
    """`parts` under `base`, as its filesystem joins them (Beam's)."""
    return _filesystems().join(base, *parts)


def match(pattern: str, limit: int | None = None) -> list[FileMetadata]:
    """The files `pattern` matches (Beam's glob: `*` within a folder, `**` across folders), at
    most `limit` of them; Beam's listing reads no more pages than `limit` needs."""
    (found,) = _filesystems().match([pattern], None if limit is None else [limit])
    return found.metadata_list


def _holds_objects(folder: str) -> bool:
    """Some object's name starts with `folder/`: all a folder is on GCS (the first match ends
    the listing)."""
    return bool(match(folder.rstrip("/") + "/**", limit=1))


def _ask(
    path: str, local: Callable[[str], bool], remote: Callable[[str], bool], if_remote: bool | None
) -> bool:
    """`local(path)` for a local path; for a remote one `if_remote` where given, else the store's
    answer, `remote(path)` (a request or two)."""
    if not is_remote(path):
        return local(path)
    return if_remote if if_remote is not None else remote(path)


def exists(path: str, *, if_remote: bool | None = None) -> bool:
    """Whether there is a file or folder at `path`; a remote folder exists while some object is
    under it. `if_remote`: what a remote path counts as without asking (None: ask)."""
    return _ask(path, os.path.exists, lambda p: _filesystems().exists(p) or _holds_objects(p), if_remote)


def is_file(path: str, *, if_remote: bool | None = None) -> bool:
    """Whether `path` is a file (a remote one: an object of that very name). `if_remote`: what a
    remote path counts as without asking (None: ask)."""
    return _ask(path, os.path.isfile, lambda p: _filesystems().exists(p), if_remote)


def is_folder(path: str, *, if_remote: bool | None = None) -> bool:
    """Whether `path` is a folder (a remote one: some object is under it). `if_remote`: what a
    remote path counts as without asking (None: ask)."""
    return _ask(path, os.path.isdir, _holds_objects, if_remote)


def make_folders(folder: str) -> None:
    """`folder` and those above it, made where they are missing (a store's folders need no making)."""
    if not is_remote(folder):
        os.makedirs(folder, exist_ok=True)


def delete(paths: Sequence[str], *, missing_ok: bool = False) -> None:
    """`paths` gone (on gs:// a hundred to a request: `gcs.delete_files`); `missing_ok`: one that
    is not there is left out rather than an error (a marker that may or may not be left)."""
    if missing_ok:
        paths = [path for path in paths if _filesystems().exists(path)]
    _gcs().delete_files(paths)


def read_bytes(path: str, limit: int | None = None, settings: GcsConfig | None = None) -> bytes:
    """The file's bytes as stored: no decompression by extension (a `.gz` image stays bytes).

    A local path is opened directly (Beam's LocalFileSystem does the same after a lookup that
    costs about as much as the read itself); gs:// objects go through one reused client per
    thread (`gcs.read_bytes`); other schemes through Beam's filesystems.

    At most `limit` + 1 bytes are read from a local file, so one that grew past the limit since
    it was listed costs no more memory than the limit (remote sizes come from the listing).
    `settings` limits and retries a gs:// read (default: the process's settings).
    """
    if _SEPARATOR not in path:  # every image is read here: no call more than the test needs
        return _read_local(path, limit)
    return _gcs().read_bytes(path, settings)


def _read_local(path: str, limit: int | None) -> bytes:
    """A local file's bytes, at most `limit` + 1 of them, in four system calls (open, fstat, one
    read, close) where `open()`'s buffered file made seven (its own fstat, an isatty check, a
    read that finds the end): each lets another thread take the GIL, and on 2 cores every hand-off
    costs a wake-up. Sized from fstat, as read() sizes it (a read(limit) would
    allocate the whole limit each time), with a byte more to see whether the file grew."""
    descriptor = os.open(path, os.O_RDONLY | getattr(os, "O_CLOEXEC", 0) | getattr(os, "O_BINARY", 0))
    try:
        status = os.fstat(descriptor)
        if stat.S_ISDIR(status.st_mode):  # as open() says it, naming the path (read() would not)
            raise IsADirectoryError(errno.EISDIR, os.strerror(errno.EISDIR), path)
        size = status.st_size
        data = os.read(descriptor, (size if limit is None else min(size, limit)) + 1)
        if len(data) == size and (limit is None or size <= limit):
            return data  # all of it, and the end reached: what a local disk gives
        # A short read (a filesystem that reads in pieces) or a file that grew since it was
        # listed: read on to its end, or to a byte past the limit.
        chunks, total = [data], len(data)
        while limit is None or total <= limit:
            more = os.read(descriptor, 1 << 20 if limit is None else limit + 1 - total)
            if not more:
                break
            chunks.append(more)
            total += len(more)
        return b"".join(chunks)
    finally:
        os.close(descriptor)


def read_head(path: str, size: int) -> bytes:
    """The file's first `size` bytes as stored (fewer for a shorter file): what a file holds, told
    from its start, without reading a large one whole (a gs:// object is read by range)."""
    if _SEPARATOR not in path:
        return _read_local(path, size)[:size]
    from apache_beam.io.filesystem import CompressionTypes

    with _filesystems().open(path, compression_type=CompressionTypes.UNCOMPRESSED) as handle:
        return bytes(handle.read(size))


def open_binary(path: str) -> BinaryIO:
    """The file opened for reading as stored, seekable: a header read where it lies (a TIFF's
    page directories, a DICOM's elements before its pixels) without reading the file whole (a
    gs:// object is read by range as the reader seeks). The caller closes it."""
    if _SEPARATOR not in path:
        return open(path, "rb")  # the caller's to close
    from apache_beam.io.filesystem import CompressionTypes

    return _filesystems().open(path, compression_type=CompressionTypes.UNCOMPRESSED)


def read_text(path: str) -> str:
    """The file's text (UTF-8, as every file a run writes)."""
    return read_bytes(path).decode("utf-8")


def read_json(path: str) -> Json:
    """The file's JSON value (json.JSONDecodeError when it holds none)."""
    return json.loads(read_text(path))


def _or_none(path: str, read: Callable[[str], _T]) -> _T | None:
    """`read(path)`, or None when there is no file at `path`; a file that is there and cannot
    be read or parsed still raises, as a run must not take a broken file for an absent one."""
    try:
        return read(path)
    except Exception:
        if _filesystems().exists(path):
            raise
        return None


def read_text_or_none(path: str) -> str | None:
    """The file's text, or None where there is no such file (an optional side file)."""
    return _or_none(path, read_text)


def read_json_or_none(path: str) -> Json:
    """The file's JSON value, or None where there is no such file; malformed JSON raises."""
    return _or_none(path, read_json)


def lines(path: str) -> list[str]:
    """The file's lines that are not empty (a JSON Lines file's entries); none where there is no
    such file."""
    return [line for line in (read_text_or_none(path) or "").splitlines() if line]


def write_atomic(path: str, data: bytes | str, temp: str | None = None) -> None:
    """`path` holding `data` whole, or left as it was: a reader, or a rerun after a kill, never
    sees half of it. Locally the bytes go to `temp` (default: beside `path`, `.partial` added),
    which is then renamed over `path` (os.replace) or removed when the write fails; a remote
    object is one upload, which appears only once it is whole."""
    if isinstance(data, str):
        data = data.encode("utf-8")
    if is_remote(path):
        _create(path, data)
        return
    temp = temp or path + ".partial"
    try:
        _create(temp, data)
        os.replace(temp, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.remove(temp)
        raise


def _create(path: str, data: bytes) -> None:
    """One file written as `data` says, never compressed by its name (Beam makes a local file's
    folders)."""
    from apache_beam.io.filesystem import CompressionTypes

    with _filesystems().create(path, compression_type=CompressionTypes.UNCOMPRESSED) as handle:
        handle.write(data)
