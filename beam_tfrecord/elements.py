"""The elements that flow between the stages, in one place, each with its shape: what a DoFn
takes and gives, what is staged with the plan, and what the metadata step collects. Plain data
only (no Beam, no TensorFlow, no stage imported), so every stage can name them.

In flow order, one flow on every runner:

    str (a staged shard plan's path) --LoadShardPlan--> ShardTask (one output shard's PlannedInputs)
    ShardTask --ReadValidate--> PendingRecord (RecordFields + facts) | RejectLine
    PendingRecord --RunInference--> PredictionResult(example=PendingRecord, inference=array | str)
        (feature runs only)
    PendingRecord | PredictionResult --BuildRecords--> ConvertedRecord | RejectLine | ChangeLine
    ConvertedRecord --DuplicateGroups--> DuplicateGroup (hashes and paths grouped, no bytes)
    ConvertedRecord --a sink--> WrittenShard (temporary) --finalize--> FinalShard, and a Tally
    (write.tally.Tally: the counts, merged across workers)
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from typing import Any, NamedTuple

import numpy as np

__all__ = [
    "ChangeLine",
    "ConvertedRecord",
    "DuplicateGroup",
    "Extras",
    "FinalShard",
    "PendingRecord",
    "PlannedInput",
    "RecordFields",
    "RejectLine",
    "ShardKey",
    "ShardTask",
    "WrittenShard",
]

Extras = tuple[tuple[str, str, Any], ...]  # (column name, column type, typed value) per extra column


@dataclass(frozen=True, slots=True)
class PlannedInput:
    """One input file with everything the worker needs besides its bytes.

    `label` and `label_text` are tuples (ids, names) in a multi-label run; `extras` are the
    manifest columns' values (extra_columns), typed while planning."""

    relpath: str
    path: str
    size: int
    split: str
    label: int | tuple[int, ...] | None = None
    label_text: str | tuple[str, ...] | None = None
    extras: Extras = ()

    def to_row(self) -> list[Any]:
        return [self.relpath, self.path, self.size, self.split, self.label, self.label_text, self.extras]

    @classmethod
    def from_row(cls, row: Sequence[Any]) -> PlannedInput:
        """The inverse of `to_row` (JSON gives lists where the plan had tuples)."""
        relpath, path, size, split, label, label_text, *rest = row
        extras = tuple(
            (n, t, tuple(v) if isinstance(v, list) else v) for n, t, v in (rest[0] if rest else ())
        )
        return cls(relpath, path, size, split, _tuple(label), _tuple(label_text), extras)


def _tuple(value: Any) -> Any:
    return tuple(value) if isinstance(value, list) else value


@dataclass(frozen=True)
class ShardTask:
    """One output shard and the inputs that go into it, in order: the unit of work of the
    path-planned sink (paths travel between workers, image bytes never do)."""

    split: str
    index: int
    count: int
    inputs: tuple[PlannedInput, ...]

    def to_json(self) -> str:
        rows = [i.to_row() for i in self.inputs]
        return json.dumps({"split": self.split, "index": self.index, "count": self.count, "inputs": rows})

    @classmethod
    def from_json(cls, text: str) -> ShardTask:
        task = json.loads(text)
        inputs = tuple(PlannedInput.from_row(row) for row in task["inputs"])
        return cls(task["split"], task["index"], task["count"], inputs)


@dataclass(frozen=True, order=True)
class RejectLine:
    """One line of rejects.jsonl: the input's path relative to the input, a code and a detail."""

    path: str
    reason: str
    detail: str

    def to_json(self) -> str:
        return json.dumps(asdict(self), ensure_ascii=False, sort_keys=True)

    @classmethod
    def from_json(cls, text: str) -> RejectLine:
        return cls(**json.loads(text))


@dataclass(frozen=True)
class RecordFields:
    """Everything one record holds, independent of the schema's key names."""

    encoded: bytes
    format: str
    height: int
    width: int
    channels: int
    relpath: str
    sha256: str
    label: int | tuple[int, ...] | None = None  # a tuple of ids in a multi-label run
    label_text: str | tuple[str, ...] | None = None
    features: np.ndarray | None = None  # the model's output for this image, any shape
    feature_dtype: str = "float32"  # float32 (FloatList) | float16 (bytes)
    include_image: bool = True  # False for features_only
    extras: tuple[tuple[str, str, Any], ...] = ()  # (column, type, value) of extra_columns


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
    label_text: str | tuple[str, ...] | None  # a tuple of names in a multi-label run
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


class PendingRecord(NamedTuple):
    """A validated image whose record is not built yet (it may wait for the model's features)."""

    shard: ShardKey
    fields: RecordFields
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


@dataclass(frozen=True, order=True)
class ChangeLine:
    """One line of changes.jsonl: an input whose stored image differs from its file (or whose
    name says another format), with the source's format and mode and every reason."""

    path: str
    source_format: str
    mode: str
    reencoded: bool
    reasons: tuple[str, ...]

    def to_json(self) -> str:
        return json.dumps(asdict(self), ensure_ascii=False, sort_keys=True)

    @classmethod
    def from_json(cls, text: str) -> ChangeLine:
        row = json.loads(text)
        return cls(**{**row, "reasons": tuple(row["reasons"])})


@dataclass(frozen=True, order=True)
class DuplicateGroup:
    """Records whose source files have identical bytes: the sha256 and each copy's (path, split),
    sorted by path. Found in the pipeline by grouping (sha256, split, path): no image bytes move."""

    sha256: str
    copies: tuple[tuple[str, str], ...]

    @property
    def splits(self) -> list[str]:
        return sorted({split for _, split in self.copies})

    def to_json(self) -> str:
        paths = [{"path": path, "split": split} for path, split in self.copies]
        return json.dumps({"sha256": self.sha256, "splits": self.splits, "copies": paths}, ensure_ascii=False)


@dataclass(frozen=True)
class WrittenShard:
    """A shard written to its temporary path, waiting for the finalize step."""

    split: str
    index: int
    count: int
    temp_path: str
    records: int
    indexed: bool = False  # its `.idx` was written beside temp_path


@dataclass(frozen=True)
class FinalShard:
    """A shard under its final name, with the record count its writer counted (None when the
    writer does not say: Beam's WriteToTFRecord)."""

    split: str
    index: int
    count: int
    path: str
    records: int | None
