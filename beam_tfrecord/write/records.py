"""A validated image becomes a serialized record: the build step of the flow, Beam-free."""

from __future__ import annotations

import dataclasses
import hashlib

import numpy as np

from beam_tfrecord import reasons
from beam_tfrecord.elements import (
    ChangeLine,
    ConvertedRecord,
    DroppedObjectLine,
    PendingRecord,
    PlannedInput,
    RejectLine,
    ShardKey,
)
from beam_tfrecord.images.inputs import prepare_input
from beam_tfrecord.images.options import ImageConfig
from beam_tfrecord.labels import CLASSIFIED, RunLabels
from beam_tfrecord.write import schema as schema_lib

__all__ = ["change_line", "convert_input", "dropped_lines", "finish_record"]


def convert_input(
    item: PlannedInput,
    schema: str,
    image_options: ImageConfig,
    shard: ShardKey | None = None,
    labels: RunLabels = CLASSIFIED,
) -> ConvertedRecord | RejectLine:
    """Read, validate, normalize and serialize one planned input (of a classification run unless
    `labels` names the run's kinds of label)."""
    pending = prepare_input(item, image_options, shard, labels=labels)
    return pending if isinstance(pending, RejectLine) else finish_record(schema, pending)


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
        facts=pending.facts,
        dropped=tuple(dropped_lines(pending)),
        depth=fields.depth.layout.token if fields.depth is not None and include_image else "",
    )


def dropped_lines(pending: PendingRecord) -> list[DroppedObjectLine]:
    """dropped_objects.jsonl's lines for the objects the worker left out of a record."""
    return [
        DroppedObjectLine(pending.fields.relpath, d.reason, f"{d.source_ref}: {d.class_name}: {d.detail}")
        for d in pending.dropped
    ]


def change_line(record: ConvertedRecord) -> ChangeLine | None:
    """Its line of changes.jsonl: None when the file was stored as it is and named right, or
    changed only by what an option asks of every record (`reasons.RUN_WIDE`)."""
    if not set(record.changes) - {reason.code for reason in reasons.RUN_WIDE}:
        return None
    return ChangeLine(record.relpath, record.source_format, record.mode, record.reencoded, record.changes)
