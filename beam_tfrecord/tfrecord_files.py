"""Counting the records of a TFRecord file from its framing, without TensorFlow or reading images.

A record is framed as `uint64 length | uint32 crc(length) | data | uint32 crc(data)`, so a count
needs only the 12-byte headers: the data is skipped with a seek. TFDS needs exact per-shard
counts, and Beam's WriteToTFRecord does not say how many records went to each shard.
"""

from __future__ import annotations

import struct

from apache_beam.io.filesystem import CompressionTypes
from apache_beam.io.filesystems import FileSystems

HEADER_BYTES = 12  # uint64 length + uint32 masked CRC of the length
FOOTER_BYTES = 4  # uint32 masked CRC of the data


class FramingError(ValueError):
    """The file is not a whole number of TFRecord records (cut short or not a TFRecord file)."""


def count_records(path: str, size: int | None = None) -> int:
    """Records in an uncompressed TFRecord file; CRCs are not checked (pipelines.inspect does)."""
    if size is None:
        (result,) = FileSystems.match([path])
        size = result.metadata_list[0].size_in_bytes
    count = position = 0
    with FileSystems.open(path, compression_type=CompressionTypes.UNCOMPRESSED) as handle:
        while position < size:
            header = handle.read(HEADER_BYTES)
            if len(header) < HEADER_BYTES:
                raise FramingError(f"{path}: record {count} header cut short at byte {position}")
            (length,) = struct.unpack("<Q", header[:8])
            position += HEADER_BYTES + length + FOOTER_BYTES
            if position > size:
                raise FramingError(f"{path}: record {count} claims {length} bytes, past the end of the file")
            handle.seek(position)
            count += 1
    return count
