"""The path-planned sink without Beam: records stream into one temporary file per planned shard,
then every shard is renamed into place at once.

Each shard task's records reach the writer in the bundle that read it, in order (a fused
stage passes elements on as they are made), so a shard's file is written from start to end by
one worker and no step ever groups image bytes: `WriteToTFRecord` with a fixed `num_shards`
groups every record by shard key, which on the DirectRunner held several times the dataset in
memory (benchmarks/NOTES.md#memory).
Names and temp-then-rename finalize are the same as `WriteToTFRecord`'s.

Beside every uncompressed shard goes `SHARD.idx` (DALI's tfrecord2idx format: `offset size` per
record, framing included), from the sizes the writer returns as it writes: no second pass. Gzip
shards get none: offsets into the uncompressed stream cannot be seeked to, and neither DALI nor
the PyTorch TFRecord readers use an index with gzip. ArrayRecord shards (`--file_format
array_record`) get none either: the format is its own index. Their writer opens local files only,
so a gs:// shard is written on the worker's disk and copied (write.array_record_files).
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Iterable, Mapping
from contextlib import suppress
from typing import BinaryIO

from apache_beam.io.filesystem import CompressionTypes
from apache_beam.io.filesystems import FileSystems

from beam_tfrecord import fault_injection, gcs, names, storage
from beam_tfrecord.elements import FinalShard, ShardKey, WrittenShard
from beam_tfrecord.names import TFRECORD, ShardFormat, index_path
from beam_tfrecord.write.array_record_files import DEFAULT_OPTIONS as DEFAULT_ARRAY_RECORD_OPTIONS
from beam_tfrecord.write.array_record_files import LocalShardWriter
from beam_tfrecord.write.tfrecord_files import format_index, write_record
from beam_tfrecord.write_failures import writing

__all__ = [
    "ShardFiles",
    "compression_type",
    "finalize_shards",
    "remove_tree",
    "write_index",
]


def compression_type(shard_format: ShardFormat) -> str:
    return CompressionTypes.GZIP if shard_format.compression == "gzip" else CompressionTypes.UNCOMPRESSED


def write_index(shard_path: str, sizes: list[int]) -> None:
    path = index_path(shard_path)
    with writing(path), FileSystems.create(path, compression_type=CompressionTypes.UNCOMPRESSED) as handle:
        handle.write(format_index(sizes).encode("ascii"))


class ShardFiles:
    """Writes records into fresh temporary files, one open at a time.

    A record of another shard closes the open one: records arrive shard after shard. A record
    for a shard this writer already closed means the runner split a shard task's records
    between bundles, which would lose records at finalize, so it raises instead.
    """

    def __init__(
        self,
        temp_dir: str,
        shard_format: ShardFormat = TFRECORD,
        on_close: Callable[[WrittenShard, int], None] | None = None,
        array_record_options: str = DEFAULT_ARRAY_RECORD_OPTIONS,
    ) -> None:
        self.temp_dir = temp_dir
        self.shard_format = shard_format
        self.array_record_options = array_record_options
        self.on_close = on_close  # told of each shard once closed and indexed, with its bytes
        self._key: ShardKey | None = None
        self._handle: BinaryIO | LocalShardWriter | None = None  # a FileSystems handle (TFRecord)
        self._path = ""
        self._sizes: list[int] = []  # framed size of every record of the open shard
        self._closed: set[ShardKey] = set()
        self.written: list[WrittenShard] = []

    def write(self, shard: ShardKey, example: bytes) -> None:
        if shard != self._key:
            self._close_current()
            self._open(shard)
        with writing(self._path):
            fault_injection.fail_point("writing")
            handle = self._handle
            if isinstance(handle, LocalShardWriter):
                handle.write(example)
                self._sizes.append(len(example))
            else:
                assert handle is not None  # opened above
                self._sizes.append(write_record(handle, example))
        fault_injection.pause_point("writing")

    def close(self) -> list[WrittenShard]:
        """Close the open file; returns every shard written since the last call."""
        self._close_current()
        written, self.written = self.written, []
        return written

    def abandon(self) -> None:
        """Give up the open file after a failure: nothing is reported, errors are swallowed."""
        if isinstance(self._handle, LocalShardWriter):
            self._handle.abandon()
        elif self._handle is not None:
            gcs.abandon(self._handle)
            with suppress(Exception):
                self._handle.close()
        self._key, self._handle, self.written = None, None, []

    def _open(self, shard: ShardKey) -> None:
        if shard in self._closed:
            raise RuntimeError(
                f"records of shard {shard.split}-{shard.index:05d} arrived after it was closed: this "
                "runner splits a shard task's output between bundles; use the beam sink"
            )
        final = names.shard_name(shard.split, shard.index, shard.count, self.shard_format)
        self._path = FileSystems.join(self.temp_dir, f"{final}.{uuid.uuid4().hex}")
        with writing(self._path):
            if self.shard_format.file_format == "array_record":
                storage.make_folders(self.temp_dir)  # the writer opens its own local file
                self._handle = LocalShardWriter(self._path, self.array_record_options)
            else:
                self._handle = FileSystems.create(
                    self._path, compression_type=compression_type(self.shard_format)
                )
        self._key, self._sizes = shard, []

    def _close_current(self) -> None:
        if self._key is None:
            return
        handle = self._handle
        assert handle is not None  # a shard is open (`_key`)
        local = isinstance(handle, LocalShardWriter)
        with writing(self._path):
            closed = handle.close()
        file_size = closed if local else None  # a LocalShardWriter knows its file's size
        key, indexed = self._key, self.shard_format.indexed
        if indexed:
            write_index(self._path, self._sizes)
        shard = WrittenShard(key.split, key.index, key.count, self._path, len(self._sizes), indexed)
        self.written.append(shard)
        self._closed.add(key)
        self._key, self._handle = None, None
        if self.on_close is not None:
            if indexed:
                size = sum(self._sizes)
            elif file_size is None:
                size = FileSystems.match([self._path])[0].metadata_list[0].size_in_bytes
            else:
                size = file_size
            self.on_close(shard, size)


def _final(output: str, shard: WrittenShard, shard_format: ShardFormat) -> str:
    return FileSystems.join(output, names.shard_name(shard.split, shard.index, shard.count, shard_format))


def _size(path: str) -> int:
    (found,) = FileSystems.match([path])
    return found.metadata_list[0].size_in_bytes


def finalize_shards(
    written: Iterable[WrittenShard],
    output: str,
    shard_format: ShardFormat,
    shard_counts: Mapping[str, int],
    array_record_options: str = DEFAULT_ARRAY_RECORD_OPTIONS,
) -> list[FinalShard]:
    """Rename every temporary shard to its final name; write an empty shard for every planned
    one that got no record (its every input was rejected), so names stay `-of-N` complete.

    Runs once, after every shard task succeeded, so final names appear only for a full set;
    every temporary file is checked before the first rename. The renames themselves are one by
    one (no filesystem renames many files at once), so a run killed here leaves some final
    names without summary.json: readers check summary.json (outputs.complete_shards).
    """
    chosen: dict[tuple[str, int], WrittenShard] = {}
    for one in written:
        key = (one.split, one.index)
        if key in chosen:
            raise RuntimeError(f"shard {one.split}-{one.index:05d} was written twice: {one.temp_path}")
        chosen[key] = one
    moving = [s for (split, index), s in chosen.items() if s.temp_path != _final(output, s, shard_format)]
    temps = [s.temp_path for s in moving] + [index_path(s.temp_path) for s in moving if s.indexed]
    missing = [path for path in temps if not FileSystems.exists(path)]
    if missing:
        raise OSError(f"temporary shards vanished before finalize, nothing renamed: {missing}")
    finals = []
    for split, count in shard_counts.items():
        for index in range(count):
            final = FileSystems.join(output, names.shard_name(split, index, count, shard_format))
            shard = chosen.pop((split, index), None)
            if shard is None:
                if shard_format.indexed:
                    write_index(final, [])
                with writing(final):
                    if shard_format.file_format == "array_record":  # an empty one, still a readable file
                        LocalShardWriter(final, array_record_options).close()
                    else:
                        FileSystems.create(final, compression_type=compression_type(shard_format)).close()
                finals.append(FinalShard(split, index, count, final, 0))
                continue
            if shard.temp_path == final:  # renamed by an interrupted run's finalize, and kept
                finals.append(FinalShard(split, index, count, final, shard.records))
                continue
            with writing(final):
                if shard.indexed:  # the index first: a shard under its final name always has its index
                    FileSystems.rename([index_path(shard.temp_path)], [index_path(final)])
                FileSystems.rename([shard.temp_path], [final])
            finals.append(FinalShard(split, index, count, final, shard.records))
            fault_injection.pause_point("finalizing")
    if chosen:
        raise RuntimeError(f"shards outside the plan were written: {sorted(chosen)}")
    return finals


def remove_tree(directory: str) -> None:
    """Delete a folder and everything in it; on GCS (no folders) every object under its prefix:
    the staged plan and the temporary files of retried shard tasks."""
    (found,) = FileSystems.match([FileSystems.join(directory, "**")])
    leftovers = [m.path for m in found.metadata_list]
    if leftovers:
        FileSystems.delete(leftovers)
    if storage.exists(directory, if_remote=False):  # the emptied local folder (GCS has none)
        FileSystems.delete([directory])
