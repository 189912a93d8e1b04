"""TFRecord framing: writing, reading and counting records without TensorFlow or Beam internals.

A record is framed as `uint64 length | uint32 masked crc32c(length) | data | uint32 masked
crc32c(data)`, all little-endian: TensorFlow's format (tensorflow/core/lib/io/record_writer.cc),
written here with the public `google_crc32c` library (a C extension, already a dependency of
google-cloud-storage) instead of Beam's private `_TFRecordUtil`, so a Beam upgrade cannot
break it. A count needs only the 12-byte headers: the data is skipped with a seek. TFDS needs
exact per-shard counts, and Beam's WriteToTFRecord does not say how many records went to each
shard.
"""

from __future__ import annotations

import struct
from collections.abc import Iterator
from typing import BinaryIO

import google_crc32c
from apache_beam.io.filesystem import CompressionTypes
from apache_beam.io.filesystems import FileSystems

__all__ = [
    "FOOTER_BYTES",
    "HEADER_BYTES",
    "FramingError",
    "count_records",
    "format_index",
    "frame_record",
    "index_records",
    "iter_records",
    "masked_crc32c",
    "parse_index",
    "write_record",
]

HEADER_BYTES = 12  # uint64 length + uint32 masked CRC of the length
FOOTER_BYTES = 4  # uint32 masked CRC of the data
_MASK_DELTA = 0xA282EAD8  # TensorFlow's kMaskDelta (tensorflow/core/lib/hash/crc32c.h)
_READ_CHUNK = 16 << 20  # a damaged length field must not become one huge allocation
# `SHARD.idx` beside an uncompressed shard: one line `offset size` per record, size including the
# framing (DALI's tfrecord2idx format), so DALI and PyTorch readers can seek and split shards.


class FramingError(ValueError):
    """The file is not a whole number of intact TFRecord records (cut short, a CRC that does not
    match, or not a TFRecord file)."""


def masked_crc32c(data: bytes) -> int:
    """CRC32C of `data`, rotated and offset as TFRecord stores it: TensorFlow masks the CRC so
    that a CRC of data that itself holds CRCs is not trivially related to them."""
    crc = google_crc32c.value(data)
    return (((crc >> 15) | (crc << 17)) + _MASK_DELTA) & 0xFFFFFFFF


def _header(length: int) -> bytes:
    encoded_length = struct.pack("<Q", length)
    return encoded_length + struct.pack("<I", masked_crc32c(encoded_length))


def frame_record(data: bytes) -> bytes:
    """One record as its bytes in a TFRecord file; byte-identical to what `tf.io.TFRecordWriter`
    writes for `data` (tests/test_tfrecord_framing.py checks it against TensorFlow)."""
    return _header(len(data)) + data + struct.pack("<I", masked_crc32c(data))


def write_record(handle: BinaryIO, data: bytes) -> int:
    """Append one framed record to an open binary file (local or a `FileSystems` handle); returns
    the bytes written, framing included, so the writer keeps the index without a second pass.

    Three writes rather than `frame_record`, so a large record is not copied once more."""
    handle.write(_header(len(data)))
    handle.write(data)
    handle.write(struct.pack("<I", masked_crc32c(data)))
    return HEADER_BYTES + len(data) + FOOTER_BYTES


def format_index(sizes: list[int]) -> str:
    """The `.idx` text for records of these framed sizes, in file order (DALI's tfrecord2idx)."""
    lines, offset = [], 0
    for size in sizes:
        lines.append(f"{offset} {size}\n")
        offset += size
    return "".join(lines)


def parse_index(text: str) -> list[tuple[int, int]]:
    """(offset, framed size) per record from a `.idx` file's text."""
    pairs = []
    for number, line in enumerate(text.splitlines()):
        fields = line.split()
        if len(fields) != 2:
            raise FramingError(f"index line {number + 1} is not 'offset size': {line!r}")
        pairs.append((int(fields[0]), int(fields[1])))
    return pairs


def iter_records(handle: BinaryIO, *, check_crc: bool = True) -> Iterator[bytes]:
    """The records of an uncompressed TFRecord stream, in order.

    Raises FramingError when the stream ends inside a record or, with `check_crc`, when a CRC
    does not match: a damaged file is an error, never a silently shorter list of records.
    """
    index = position = 0
    while True:
        header = _read_up_to(handle, HEADER_BYTES)
        if not header:
            return
        if len(header) < HEADER_BYTES:
            raise FramingError(f"record {index} at byte {position}: header cut short")
        encoded_length, length_crc = header[:8], struct.unpack("<I", header[8:])[0]
        if check_crc and masked_crc32c(encoded_length) != length_crc:
            raise FramingError(f"record {index} at byte {position}: bad CRC of the length")
        (length,) = struct.unpack("<Q", encoded_length)
        data = _read_up_to(handle, length)
        footer = _read_up_to(handle, FOOTER_BYTES)
        if len(data) < length or len(footer) < FOOTER_BYTES:
            raise FramingError(f"record {index} at byte {position}: claims {length} bytes, cut short")
        if check_crc and masked_crc32c(data) != struct.unpack("<I", footer)[0]:
            raise FramingError(f"record {index} at byte {position}: bad CRC of the data")
        yield data
        index += 1
        position += HEADER_BYTES + length + FOOTER_BYTES


def _read_up_to(handle: BinaryIO, size: int) -> bytes:
    """`size` bytes, fewer only at the end of the stream: read in bounded chunks, and read again
    after a short read (a raw stream may return less than asked before its end)."""
    first = handle.read(min(size, _READ_CHUNK))
    if len(first) == size or not first:
        return first
    chunks, size = [first], size - len(first)
    while size > 0:
        chunk = handle.read(min(size, _READ_CHUNK))
        if not chunk:
            break
        chunks.append(chunk)
        size -= len(chunk)
    return b"".join(chunks)


def index_records(path: str, size: int | None = None) -> list[int]:
    """Framed size of every record of an uncompressed TFRecord file, from its 12-byte headers
    (the data is skipped with a seek); CRCs are not checked (pipelines.inspect does)."""
    if size is None:
        (result,) = FileSystems.match([path])
        size = result.metadata_list[0].size_in_bytes
    sizes: list[int] = []
    position = 0
    with FileSystems.open(path, compression_type=CompressionTypes.UNCOMPRESSED) as handle:
        while position < size:
            header = handle.read(HEADER_BYTES)
            if len(header) < HEADER_BYTES:
                raise FramingError(f"{path}: record {len(sizes)} header cut short at byte {position}")
            (length,) = struct.unpack("<Q", header[:8])
            framed = HEADER_BYTES + length + FOOTER_BYTES
            position += framed
            if position > size:
                raise FramingError(
                    f"{path}: record {len(sizes)} claims {length} bytes, past the end of the file"
                )
            handle.seek(position)
            sizes.append(framed)
    return sizes


def count_records(path: str, size: int | None = None) -> int:
    """Records in an uncompressed TFRecord file, from the headers alone (see `index_records`)."""
    return len(index_records(path, size))
