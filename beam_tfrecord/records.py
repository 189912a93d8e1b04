"""One input to one serialized record, or to a reject line: the work of a worker, Beam-free."""

from __future__ import annotations

import hashlib
from typing import NamedTuple

from apache_beam.io.filesystem import CompressionTypes
from apache_beam.io.filesystems import FileSystems

from beam_tfrecord import gcs  # noqa: F401  (anonymous GCS clients on workers when an emulator is set)
from beam_tfrecord import schema as schema_lib
from beam_tfrecord.images import ImageOptions, Reject, encode_for_tensorflow
from beam_tfrecord.plan import PlannedInput, RejectLine


class ConvertedRecord(NamedTuple):
    """A written record and the few facts about it the summary needs (not its pixels)."""

    split: str
    example: bytes
    relpath: str
    label_text: str | None
    height: int
    width: int
    source_format: str
    reencoded: bool
    digest: bytes = b""  # sha256 of `example`: the split's content digest in summary.json
    content_sha256: str = ""  # sha256 of the source file: duplicates are counted by it


def read_bytes(path: str) -> bytes:
    """The file's bytes as stored: no decompression by extension (a `.gz` image stays bytes)."""
    with FileSystems.open(path, compression_type=CompressionTypes.UNCOMPRESSED) as handle:
        return handle.read()


def convert_input(
    item: PlannedInput, schema: str, image_options: ImageOptions
) -> ConvertedRecord | RejectLine:
    """Read, validate, normalize and serialize one planned input."""
    try:
        data = read_bytes(item.path)
    except Exception as error:  # permissions, a file gone since listing, a flaky remote read
        return RejectLine(item.relpath, "unreadable", f"{type(error).__name__}: {error}")
    try:
        image = encode_for_tensorflow(data, image_options)
    except Reject as reject:
        return RejectLine(item.relpath, reject.reason, reject.detail)
    content_sha256 = hashlib.sha256(data).hexdigest()
    fields = schema_lib.RecordFields(
        encoded=image.data,
        format=image.format,
        height=image.height,
        width=image.width,
        channels=image.channels,
        relpath=item.relpath,
        sha256=content_sha256,
        label=item.label,
        label_text=item.label_text,
    )
    example = schema_lib.serialize(schema, fields)
    return ConvertedRecord(
        split=item.split,
        example=example,
        relpath=item.relpath,
        label_text=item.label_text,
        height=image.height,
        width=image.width,
        source_format=image.source_format,
        reencoded=image.reencoded,
        digest=hashlib.sha256(example).digest(),
        content_sha256=content_sha256,
    )
