"""Record `i` of a split, in any order, without TensorFlow: what a map-style PyTorch `Dataset`,
Grain's `MapDataset` and any sampler with a global shuffle need.

ArrayRecord shards are read through their own index (local files only: the `array_record`
package opens no gs:// path). Uncompressed TFRecord shards are read at the offsets of their
`.idx` files (local or gs://, through Beam's filesystems). Gzip shards cannot be seeked into,
so they are refused in one line.
"""

from __future__ import annotations

import bisect
import struct
from collections.abc import Callable
from typing import BinaryIO

from apache_beam.io.filesystem import CompressionTypes
from apache_beam.io.filesystems import FileSystems

from beam_tfrecord.edges import ParsedRecord
from beam_tfrecord.read.examples import record_to_dict
from beam_tfrecord.read.files import SplitFiles, read_index, split_files
from beam_tfrecord.write import array_record_files
from beam_tfrecord.write.tfrecord_files import FOOTER_BYTES, HEADER_BYTES, FramingError, masked_crc32c

__all__ = ["RecordArray", "record_parser"]


def record_parser(output: str, split: str = "train") -> Callable[[bytes], ParsedRecord]:
    """bytes -> the record's dict (`record_to_dict`), for a reader of the shards of its own,
    such as Grain's `ArrayRecordDataSource` followed by `.map(record_parser(out))`."""
    files = split_files(output, split)
    return lambda serialized: record_to_dict(serialized, files)


class RecordArray:
    """A split's records by position: `len(array)` and `array[i]` (a dict, see
    `record_to_dict`; `array.serialized(i)` gives the bytes). Positions run shard after shard,
    in file order, as every reader of the project counts them.

    Picklable (open files are not carried), so DataLoader and Grain worker processes each open
    their own.
    """

    def __init__(self, output: str, split: str = "train") -> None:
        self.files: SplitFiles = split_files(output, split)
        self.output, self.split = output, split
        self._offsets: list[list[tuple[int, int]]] | None = None
        if self.files.random_access:
            lengths = [array_record_files.count_records(path) for path in self.files.paths]
        elif self.files.compression:
            raise ValueError(
                f"{output}: gzip shards cannot be read at random (no offsets into a gzip stream); "
                "convert with --compression none or --file_format array_record"
            )
        else:
            indexes = [read_index(path) for path in self.files.paths]
            missing = [path for path, found in zip(self.files.paths, indexes, strict=True) if found is None]
            if missing:
                raise ValueError(f"{missing[0]} has no .idx file beside it: read it with iter_examples")
            offsets = [found for found in indexes if found is not None]  # (all of them, by now)
            self._offsets = offsets
            lengths = [len(found) for found in offsets]
        if sum(lengths) != self.files.records:
            raise ValueError(
                f"{output} split {split}: its shards hold {sum(lengths)} records, summary.json says "
                f"{self.files.records}"
            )
        self._starts = [0]
        for length in lengths:
            self._starts.append(self._starts[-1] + length)
        # Each shard's open file (TFRecord) or reader (ArrayRecord), opened on first use.
        self._files: dict[int, BinaryIO] = {}
        self._readers: dict[int, array_record_files.ShardReader] = {}

    def __len__(self) -> int:
        return self._starts[-1]

    def __getitem__(self, position: int) -> ParsedRecord:
        return record_to_dict(self.serialized(position), self.files)

    def serialized(self, position: int) -> bytes:
        if position < 0:
            position += len(self)
        if not 0 <= position < len(self):
            raise IndexError(f"record {position} of {len(self)}")
        shard = bisect.bisect_right(self._starts, position) - 1
        within = position - self._starts[shard]
        if self._offsets is None:
            if shard not in self._readers:
                self._readers[shard] = array_record_files.open_reader(
                    self.files.paths[shard], random_access=True
                )
            return self._readers[shard].read([within])[0]
        offset, size = self._offsets[shard][within]
        if shard not in self._files:
            path = self.files.paths[shard]
            self._files[shard] = FileSystems.open(path, compression_type=CompressionTypes.UNCOMPRESSED)
        return _framed_record(self._files[shard], self.files.paths[shard], offset, size)

    def __getstate__(self) -> dict[str, object]:
        state = dict(self.__dict__)
        state["_files"], state["_readers"] = {}, {}
        return state


def _framed_record(handle: BinaryIO, path: str, offset: int, size: int) -> bytes:
    """One TFRecord record read at its offset, CRCs checked."""
    handle.seek(offset)
    framed = handle.read(size)
    if len(framed) != size:
        raise FramingError(f"{path}: record at byte {offset} cut short")
    (length,) = struct.unpack("<Q", framed[:8])
    data = framed[HEADER_BYTES : HEADER_BYTES + length]
    if (
        length + HEADER_BYTES + FOOTER_BYTES != size
        or masked_crc32c(data) != struct.unpack("<I", framed[-4:])[0]
    ):
        raise FramingError(f"{path}: the record at byte {offset} does not match its .idx entry")
    return data
