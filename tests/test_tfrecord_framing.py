"""TFRecord framing written and read with google_crc32c: the same bytes TensorFlow writes, read
back by TensorFlow, and damage rejected rather than read as fewer records."""

from __future__ import annotations

import random

import pytest
import tensorflow as tf

from beam_tfrecord.write import tfrecord_files
from beam_tfrecord.write.tfrecord_files import (
    FramingError,
    count_records,
    frame_record,
    iter_records,
    masked_crc32c,
    write_record,
)

# Obtained once from tf.io.TFRecordWriter (TensorFlow 2.21.0), one record per file:
# uint64 length | masked crc32c(length) | data | masked crc32c(data), little-endian (fromhex
# skips the spaces between them).
GOLDEN = {
    b"beam-tfrecord": bytes.fromhex("0d00000000000000 3c37b834 6265616d2d74667265636f7264 f8cc7170"),
    b"": bytes.fromhex("0000000000000000 29039807 d8ea82a2"),
}
# Empty, one byte, a header's worth, small, a typical JPEG and a large features record.
SIZES = (0, 1, 12, 1000, 27_000, 300_000)


@pytest.fixture(scope="module")
def records() -> list[bytes]:
    rng = random.Random(20240611)
    return [rng.randbytes(size) for size in SIZES]


@pytest.fixture(scope="module")
def tensorflow_file(tmp_path_factory, records) -> bytes:
    path = tmp_path_factory.mktemp("tf") / "written_by_tensorflow.tfrecord"
    with tf.io.TFRecordWriter(str(path)) as writer:
        for record in records:
            writer.write(record)
    return path.read_bytes()


@pytest.mark.parametrize("data", list(GOLDEN))
def test_frame_record_gives_tensorflows_golden_bytes(data):
    assert frame_record(data) == GOLDEN[data]


def test_masked_crc32c_of_nothing_is_tensorflows_mask_delta():
    assert masked_crc32c(b"") == 0xA282EAD8  # crc32c(b"") is 0, so only the mask remains


def test_write_record_writes_what_tensorflow_writes(tmp_path, records, tensorflow_file):
    path = tmp_path / "ours.tfrecord"
    with open(path, "wb") as handle:
        for record in records:
            write_record(handle, record)
    assert path.read_bytes() == tensorflow_file
    assert path.read_bytes() == b"".join(frame_record(record) for record in records)
    assert [item.numpy() for item in tf.data.TFRecordDataset(str(path))] == records
    assert count_records(str(path)) == len(records)


def test_iter_records_reads_tensorflows_file(tmp_path, records, tensorflow_file):
    path = tmp_path / "theirs.tfrecord"
    path.write_bytes(tensorflow_file)
    with open(path, "rb") as handle:
        assert list(iter_records(handle)) == records


def test_iter_records_reads_a_long_record_in_chunks(tmp_path, monkeypatch, records, tensorflow_file):
    """A damaged length must not become one huge read; a real long record still reads whole."""
    monkeypatch.setattr(tfrecord_files, "_READ_CHUNK", 1000)
    path = tmp_path / "theirs.tfrecord"
    path.write_bytes(tensorflow_file)
    with open(path, "rb") as handle:
        assert list(iter_records(handle)) == records
    path.write_bytes(tensorflow_file[:-5000])
    with open(path, "rb") as handle, pytest.raises(FramingError, match="cut short"):
        list(iter_records(handle))


def test_iter_records_of_an_empty_file_is_empty(tmp_path):
    path = tmp_path / "empty.tfrecord"
    path.write_bytes(b"")
    with open(path, "rb") as handle:
        assert list(iter_records(handle)) == []


# Offsets in the second record (1 byte of data): its length, the length's CRC, its data, its CRC.
SECOND = len(frame_record(b""))


@pytest.mark.parametrize(
    ("offset", "message"),
    [
        (SECOND + 0, "bad CRC of the length"),
        (SECOND + 9, "bad CRC of the length"),
        (SECOND + 12, "bad CRC of the data"),
        (SECOND + 14, "bad CRC of the data"),
        (-1, "bad CRC of the data"),  # the last record's data CRC
        (-5, "bad CRC of the data"),  # the last record's data
    ],
)
def test_iter_records_rejects_a_flipped_byte(tmp_path, tensorflow_file, offset, message):
    data = bytearray(tensorflow_file)
    data[offset] ^= 0x01
    path = tmp_path / "flipped.tfrecord"
    path.write_bytes(bytes(data))
    with open(path, "rb") as handle, pytest.raises(FramingError, match=message):
        list(iter_records(handle))


def test_without_crc_checks_a_flipped_data_byte_reads_through(tmp_path, records, tensorflow_file):
    data = bytearray(tensorflow_file)
    data[-5] ^= 0x01
    path = tmp_path / "flipped.tfrecord"
    path.write_bytes(bytes(data))
    with open(path, "rb") as handle:
        read = list(iter_records(handle, check_crc=False))
    assert read[:-1] == records[:-1] and read[-1] != records[-1]


@pytest.mark.parametrize("cut", [1, 4, 13, 100, 1000])
def test_iter_records_rejects_a_cut_short_file(tmp_path, tensorflow_file, cut):
    """Cut inside the last record's data CRC and inside its data."""
    path = tmp_path / "cut.tfrecord"
    path.write_bytes(tensorflow_file[:-cut])
    with open(path, "rb") as handle, pytest.raises(FramingError, match="cut short"):
        list(iter_records(handle))


def test_iter_records_rejects_a_cut_short_header(tmp_path):
    path = tmp_path / "cut.tfrecord"
    path.write_bytes(frame_record(b"whole") + frame_record(b"cut")[:7])
    with open(path, "rb") as handle, pytest.raises(FramingError, match=r"record 1 at byte 21: header cut"):
        list(iter_records(handle))
