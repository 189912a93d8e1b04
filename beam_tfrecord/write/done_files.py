"""The two small files a shard task leaves when it is done, beside the run's staged plan:

    <temp>/done/<split>-<index>.read.json      the reader's: the shard task's inputs and its rejects
    <temp>/done/<split>-<index>.written.json   the writer's: the temporary shard, its record count
                                               and bytes, and everything the summary counts of it
                                               (tally, changes, dropped objects, content hashes)

The steps that read and write a shard task write them as they finish it; a rerun of the same plan
reads them back to keep the shard tasks they prove done (output.resume).
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from dataclasses import asdict, dataclass, field
from typing import Literal

from apache_beam.io.filesystems import FileSystems

from beam_tfrecord import names, storage
from beam_tfrecord.edges import Json, JsonObject
from beam_tfrecord.elements import ChangeLine, DroppedObjectLine, RejectLine, WrittenShard
from beam_tfrecord.storage import read_json  # a done file, read back by output.resume
from beam_tfrecord.write.tally import Tally
from beam_tfrecord.write_failures import writing

__all__ = [
    "DoneStep",
    "ReadOutcome",
    "ShardOutcome",
    "done_path",
    "read_json",
    "read_outcomes",
    "shard_task_name",
    "write_json",
]


def shard_task_name(split: str, index: int) -> str:
    """`train-00003`: a shard task's name, in done files and in `StagedPlan.finished`."""
    return f"{split}-{index:05d}"


def write_json(path: str, data: Json) -> None:
    """Write whole or not at all: aside, then renamed (a GCS object appears only once closed)."""
    with writing(path):
        storage.write_atomic(path, json.dumps(data, ensure_ascii=False))


@dataclass
class ReadOutcome:
    """The reader's done file: how many inputs the shard task had and which it rejected."""

    inputs: int
    rejects: list[RejectLine] = field(default_factory=list)

    def to_json(self) -> JsonObject:
        return {"inputs": self.inputs, "rejects": [json.loads(r.to_json()) for r in self.rejects]}

    @classmethod
    def from_json(cls, data: Mapping[str, Json]) -> ReadOutcome:
        return cls(data["inputs"], [RejectLine(**r) for r in data["rejects"]])


@dataclass
class ShardOutcome:
    """The writer's done file: the shard as written and what the summary counts of its records."""

    shard: WrittenShard
    bytes: int
    tally: Tally
    changes: list[ChangeLine] = field(default_factory=list)
    dropped: list[DroppedObjectLine] = field(default_factory=list)
    content: list[tuple[str, str]] = field(default_factory=list)  # (source sha256, path) per record

    def to_json(self) -> JsonObject:
        return {
            "shard": asdict(self.shard),
            "bytes": self.bytes,
            "tally": self.tally.to_json(),
            "changes": [json.loads(c.to_json()) for c in self.changes],
            "dropped": [asdict(d) for d in self.dropped],
            "content": [list(pair) for pair in self.content],
        }

    @classmethod
    def from_json(cls, data: Mapping[str, Json]) -> ShardOutcome:
        return cls(
            shard=WrittenShard(**data["shard"]),
            bytes=data["bytes"],
            tally=Tally.from_json(data["tally"]),
            changes=[ChangeLine.from_json(json.dumps(c)) for c in data["changes"]],
            dropped=[DroppedObjectLine(**d) for d in data["dropped"]],
            content=[(sha, path) for sha, path in data["content"]],
        )


# Which step of a shard task left a done file: the reader's or the writer's.
DoneStep = Literal["read", "written"]


def done_path(temp_dir: str, shard_task: str, step: DoneStep) -> str:
    """A shard task's done file (`shard_task_name`) of one step."""
    return FileSystems.join(temp_dir, names.PLAN_DONE_DIR, f"{shard_task}.{step}.json")


def read_outcomes(temp_dir: str, shard_tasks: Iterable[str]) -> dict[str, ReadOutcome]:
    """The reader's done files of these shard tasks (their rejects go into the summary)."""
    return {name: ReadOutcome.from_json(read_json(done_path(temp_dir, name, "read"))) for name in shard_tasks}
