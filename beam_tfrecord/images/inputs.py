"""One input to one serialized record, or to a reject line: the work of a worker, Beam-free."""

from __future__ import annotations

import dataclasses
import hashlib
import json
import os
from typing import NamedTuple

import numpy as np

from beam_tfrecord import gcs
from beam_tfrecord.images.normalize import RUN_WIDE_REASONS, ImageOptions, Reject, encode_for_tensorflow
from beam_tfrecord.plan.planner import PlannedInput, RejectLine
from beam_tfrecord.write import schema as schema_lib

__all__ = [
    "ChangeLine",
    "ConvertedRecord",
    "PendingRecord",
    "ShardKey",
    "convert_input",
    "finish_record",
    "prepare_input",
    "read_bytes",
]


class ShardKey(NamedTuple):
    """The output shard a record goes to: the path-planned sink writes each shard whole."""

    split: str
    index: int = 0
    count: int = 1


class ConvertedRecord(NamedTuple):
    """A record ready to write and the few facts about it the summary needs (not its pixels)."""

    shard: ShardKey
    example: bytes
    relpath: str
    label_text: str | tuple[str, ...] | None  # a tuple of names in a --multi_label run
    height: int
    width: int
    source_format: str
    reencoded: bool
    digest: bytes = b""  # sha256 of `example`: the split's content digest in summary.json
    content_sha256: str = ""  # sha256 of the source file: duplicates are counted by it
    feature_shape: tuple[int, ...] | None = None
    mode: str = ""  # the source's Pillow mode
    changes: tuple[str, ...] = ()  # images.CHANGE_REASONS codes

    @property
    def split(self) -> str:
        return self.shard.split

    def change_line(self) -> ChangeLine | None:
        """Its line of changes.jsonl: None when the file was stored as it is and named right, or
        changed only by what an option asks of every record (`RUN_WIDE_REASONS`)."""
        if not set(self.changes) - set(RUN_WIDE_REASONS):
            return None
        return ChangeLine(self.relpath, self.source_format, self.mode, self.reencoded, self.changes)


class PendingRecord(NamedTuple):
    """A validated image whose record is not built yet (it may wait for the model's features)."""

    shard: ShardKey
    fields: schema_lib.RecordFields
    source_format: str
    reencoded: bool
    mode: str = ""
    changes: tuple[str, ...] = ()

    @property
    def split(self) -> str:
        return self.shard.split

    @property
    def encoded(self) -> bytes:
        """The stored image bytes, which the model input is decoded from."""
        return self.fields.encoded


@dataclasses.dataclass(frozen=True, order=True)
class ChangeLine:
    """One line of changes.jsonl: an input whose stored image differs from its file (or whose
    name says another format), with the source's format and mode and every reason."""

    path: str
    source_format: str
    mode: str
    reencoded: bool
    reasons: tuple[str, ...]

    def to_json(self) -> str:
        return json.dumps(dataclasses.asdict(self), ensure_ascii=False, sort_keys=True)

    @classmethod
    def from_json(cls, text: str) -> ChangeLine:
        row = json.loads(text)
        return cls(**{**row, "reasons": tuple(row["reasons"])})


def read_bytes(path: str, limit: int | None = None) -> bytes:
    """The file's bytes as stored: no decompression by extension (a `.gz` image stays bytes).

    A local path is opened directly (Beam's LocalFileSystem does the same after a lookup that
    costs about as much as the read itself); gs:// objects go through one reused client per
    thread (`gcs.read_bytes`); other schemes through Beam's filesystems.

    At most `limit` + 1 bytes are read from a local file, so one that grew past the limit since
    it was listed costs no more memory than the limit (remote sizes come from the listing).
    """
    if "://" not in path:
        with open(path, "rb") as handle:
            if limit is None:
                return handle.read()
            # Sized like read() sizes it: a read(limit) would allocate the whole limit each time.
            size = os.fstat(handle.fileno()).st_size
            data = handle.read(min(size, limit) + 1)  # a byte more than listed: did it grow?
            if size < len(data) <= limit:
                data += handle.read(limit + 1 - len(data))
            return data
    return gcs.read_bytes(path)


def convert_input(
    item: PlannedInput, schema: str, image_options: ImageOptions, shard: ShardKey | None = None
) -> ConvertedRecord | RejectLine:
    """Read, validate, normalize and serialize one planned input."""
    pending = prepare_input(item, image_options, shard)
    return pending if isinstance(pending, RejectLine) else finish_record(schema, pending)


def prepare_input(
    item: PlannedInput, image_options: ImageOptions, shard: ShardKey | None = None
) -> PendingRecord | RejectLine:
    """Read, validate and normalize one planned input: everything but the serialization.

    `shard` is the output shard its record goes to (default: the only shard of its split)."""
    limit = image_options.max_file_bytes
    if item.size > limit:
        return _too_big(item.relpath, item.size, image_options)
    try:
        data = read_bytes(item.path, limit)
    except Exception as error:  # permissions, a file gone since listing, a flaky remote read
        return RejectLine(item.relpath, "unreadable", f"{type(error).__name__}: {error}")
    if len(data) > limit:
        return _too_big(item.relpath, len(data), image_options)
    try:
        image = encode_for_tensorflow(data, image_options, name=item.relpath)
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
        extras=item.extras,
    )
    shard = shard or ShardKey(item.split)
    return PendingRecord(shard, fields, image.source_format, image.reencoded, image.mode, image.changes)


def _too_big(relpath: str, size: int, image_options: ImageOptions) -> RejectLine:
    """Known from the file's size alone: its bytes are never read."""
    detail = f"{size / 1e6:.1f} MB is over --max_file_mb={image_options.max_file_mb:g}"
    return RejectLine(relpath, "too_large", detail)


def finish_record(
    schema: str,
    pending: PendingRecord,
    features: np.ndarray | None = None,
    feature_dtype: str = "float32",
    include_image: bool = True,
) -> ConvertedRecord:
    """Serialize a prepared record, with the model's features when there are any."""
    fields = pending.fields
    if features is not None or not include_image:
        fields = dataclasses.replace(
            fields, features=features, feature_dtype=feature_dtype, include_image=include_image
        )
    example = schema_lib.serialize(schema, fields)
    return ConvertedRecord(
        shard=pending.shard,
        example=example,
        relpath=fields.relpath,
        label_text=fields.label_text,
        height=fields.height,
        width=fields.width,
        source_format=pending.source_format,
        reencoded=pending.reencoded,
        digest=hashlib.sha256(example).digest(),
        content_sha256=fields.sha256,
        feature_shape=tuple(int(n) for n in features.shape) if features is not None else None,
        mode=pending.mode,
        changes=pending.changes,
    )
