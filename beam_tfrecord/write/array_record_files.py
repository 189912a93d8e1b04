"""ArrayRecord files through the `array_record` package's public writer and reader, with what it
lacks for a pipeline: it opens local files only, so a shard bound for gs:// is written on the
worker's disk and then copied through Beam's filesystems; its failures (a full disk among them)
come back as errors a `writing` block names; and a gs:// path is refused in one line, since its
reader would otherwise make an empty reader of it without a word.

The records are the same serialized `tf.train.Example`s a TFRecord shard holds; only the
container differs: chunks with a footer index, so record `i` is one seek away.
"""

from __future__ import annotations

import contextlib
import errno
import functools
import os
import shutil
import tempfile
from collections.abc import Iterator, Sequence
from types import ModuleType
from typing import Protocol, overload

from apache_beam.io.filesystem import CompressionTypes
from apache_beam.io.filesystems import FileSystems

from beam_tfrecord import storage

__all__ = [
    "DEFAULT_OPTIONS",
    "LocalShardWriter",
    "RemoteArrayRecord",
    "ShardReader",
    "check_options",
    "count_records",
    "iter_range",
    "open_reader",
    "read_records",
]

# TFDS's writer option string: one record per chunk, the fastest random read.
DEFAULT_OPTIONS = "group_size:1"
_COPY_CHUNK = 8 << 20


class RemoteArrayRecord(ValueError):
    """An ArrayRecord shard on remote storage, which the `array_record` reader cannot open."""

    def __init__(self, path: str) -> None:
        super().__init__(
            f"{path}: the array_record package reads local files only; copy the output to a local "
            "disk (gcloud storage cp -r) or mount the bucket (gcsfuse) and read it there"
        )


class ShardReader(Protocol):
    """What the project uses of the package's ArrayRecordReader (a C extension, without types)."""

    def ok(self) -> bool: ...
    def num_records(self) -> int: ...
    @overload
    def read(self, indices: list[int], /) -> list[bytes]: ...
    @overload
    def read(self, start: int, stop: int, /) -> list[bytes]: ...
    def close(self) -> None: ...


def _module() -> ModuleType:  # imported on use: a TFRecord run never needs the C extension
    from array_record.python import array_record_module

    return array_record_module


def _os_error(error: Exception, path: str) -> Exception:
    """The writer's RuntimeError as the OSError it reports (a full disk keeps its errno)."""
    text = str(error)
    if "No space left on device" in text:
        return OSError(errno.ENOSPC, os.strerror(errno.ENOSPC), path)
    return error


@functools.lru_cache(maxsize=16)
def check_options(options: str) -> None:
    """Raise ValueError naming the bad option, before any shard is written: the writer checks
    its option string only when it opens a file. Once per string in a process (a config is made
    again by every `dataclasses.replace` and every summary.json read)."""
    with tempfile.TemporaryDirectory(prefix="beam-tfrecord-ar-") as folder:
        writer = _module().ArrayRecordWriter(os.path.join(folder, "probe"), options)
        writer.close()


class LocalShardWriter:
    """One ArrayRecord shard: written to `target` where that is a local path, else to a local
    temporary file that `close` copies to `target` and removes (a GCS object appears whole once
    its upload closes, so the shard is there whole or not at all)."""

    def __init__(self, target: str, options: str) -> None:
        self.target = target
        self.remote = storage.is_remote(target)
        if self.remote:
            handle, self.local = tempfile.mkstemp(prefix="beam-tfrecord-", suffix=".array_record")
            os.close(handle)
        else:
            self.local = target
        self.records = 0
        try:
            self._writer = _module().ArrayRecordWriter(self.local, options)
            if not self._writer.ok():
                raise OSError(f"the ArrayRecord writer could not open {self.local}")
        except Exception:
            self._remove_local()
            raise

    def write(self, record: bytes) -> None:
        try:
            self._writer.write(record)
        except RuntimeError as error:
            raise _os_error(error, self.local) from error
        self.records += 1

    def close(self) -> int:
        """Finish the file (and its copy); returns its size in bytes."""
        try:
            self._writer.close()
        except RuntimeError as error:
            self._remove_local()
            raise _os_error(error, self.local) from error
        size = os.path.getsize(self.local)
        if self.remote:
            try:
                with (
                    open(self.local, "rb") as source,
                    FileSystems.create(self.target, compression_type=CompressionTypes.UNCOMPRESSED) as copy,
                ):
                    shutil.copyfileobj(source, copy, _COPY_CHUNK)
            finally:
                self._remove_local()
        return size

    def abandon(self) -> None:
        """Give up after a failure: the local file goes; errors are swallowed."""
        with contextlib.suppress(Exception):
            self._writer.close()
        if self.remote:
            self._remove_local()

    def _remove_local(self) -> None:
        if self.remote and os.path.exists(self.local):
            os.remove(self.local)


def open_reader(path: str, random_access: bool = False) -> ShardReader:
    """The package's reader of a local shard; a remote one is refused in one line. For reads at
    random, no read-ahead and a small buffer (what Grain's data source opens its readers with):
    a read-ahead would fetch chunks the next read does not want."""
    if storage.is_remote(path):
        raise RemoteArrayRecord(path)
    if random_access:
        reader = _module().ArrayRecordReader(
            path, options="readahead_buffer_size:0", file_reader_buffer_size=32768
        )
    else:
        reader = _module().ArrayRecordReader(path)
    if not reader.ok():
        raise OSError(f"{path}: not a readable ArrayRecord file")
    return reader


def count_records(path: str) -> int:
    reader = open_reader(path)
    try:
        return reader.num_records()
    finally:
        reader.close()


def read_records(path: str, indices: Sequence[int]) -> list[bytes]:
    """Records at these positions, in the order asked (random access)."""
    reader = open_reader(path)
    try:
        return list(reader.read(list(indices)))
    finally:
        reader.close()


def iter_range(path: str, start: int = 0, stop: int | None = None, batch: int = 256) -> Iterator[bytes]:
    """Records `start` to `stop` (the end when None), front to back, `batch` at a time."""
    reader = open_reader(path)
    try:
        end = reader.num_records() if stop is None else min(stop, reader.num_records())
        for first in range(start, end, batch):
            yield from reader.read(first, min(first + batch, end))
    finally:
        reader.close()
