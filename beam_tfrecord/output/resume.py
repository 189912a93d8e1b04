"""Keeping what an interrupted run finished: each shard task leaves two small files in the run's
temporary folder when it is done (write.done_files), and a rerun of the same plan keeps the shard
tasks they prove done.

A shard task is finished when both are there, its records and rejects add up to its inputs, and
its shard file proves it by its framing: every record header walked, their count and sizes equal
to the files' (a shard's name alone proves nothing). A shard task whose images failed later, at
the feature model, does not add up and is done again. The rerun reads its inputs only for the
other shard tasks; the finished ones give their outcomes to the summary as if they had just run.

Whether a rerun is the same plan is `RunFingerprint`'s to say: the listing (paths, sizes and
modification times), the settings and the staged plan, each hashed, so a rerun that differs says
which.
"""

from __future__ import annotations

import hashlib
import json
import posixpath
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, field

from apache_beam.io.filesystem import CompressionTypes
from apache_beam.io.filesystems import FileSystems

from beam_tfrecord import names, storage
from beam_tfrecord.edges import Json, JsonObject
from beam_tfrecord.elements import ShardTask, WrittenShard
from beam_tfrecord.names import ShardFormat
from beam_tfrecord.write import array_record_files
from beam_tfrecord.write.done_files import (
    ReadOutcome,
    ShardOutcome,
    done_path,
    read_json,
    shard_task_name,
)
from beam_tfrecord.write.tfrecord_files import FramingError, index_records, iter_records

__all__ = [
    "Resumable",
    "RunFingerprint",
    "TextDigest",
    "find_resumable",
    "fingerprint_path",
    "finished_shard_tasks",
    "interrupted_plans",
    "load_written",
    "shard_task_inputs",
]

# A change to what a finished shard task's files say, or to how the fingerprint is made, makes
# earlier ones unusable. 2: the listing and the staged shard tasks are hashed one file, one shard
# task at a time. 3: a staged shard task's objects keep their source_refs in a list of their own
# (elements.ShardTask).
FINGERPRINT_VERSION = 3


class TextDigest:
    """One sha256 of many texts fed one at a time, each led by its length (so where one ends
    counts), then a tail: the shard tasks of a COCO-sized run are hashed as they are staged,
    never held twice. Made as one JSON document of every shard task, the digest held all their
    text at once, a large part of the launcher's peak for a COCO-sized run with masks
    (benchmarks/NOTES.md#the-coco-launchers-choices-measured)."""

    def __init__(self) -> None:
        self._sha = hashlib.sha256()

    def add(self, text: str) -> None:
        data = text.encode()
        self._sha.update(len(data).to_bytes(8, "big"))
        self._sha.update(data)

    def hexdigest(self, tail: Json = None) -> str:
        """The digest of the texts so far and `tail` (JSON), without changing what comes next."""
        found = self._sha.copy()
        found.update(json.dumps(tail, sort_keys=True, default=str).encode())
        return found.hexdigest()


@dataclass(frozen=True)
class RunFingerprint:
    """What must be the same for a rerun to keep an interrupted run's finished shard tasks."""

    inputs: str  # the listing: every path, size and modification time
    settings: str  # the source's and the output's settings that shape records and shards
    plan: str  # the staged shard tasks and facts
    version: int = FINGERPRINT_VERSION

    @staticmethod
    def digest(value: Json) -> str:
        return hashlib.sha256(json.dumps(value, sort_keys=True, default=str).encode()).hexdigest()

    def differs_from(self, other: RunFingerprint) -> str | None:
        """Why another run's plan cannot be resumed by this one (None: it can)."""
        if self.version != other.version:
            return "it was written by another version of beam-tfrecord"
        if self.inputs != other.inputs:
            return "the inputs changed since (files added, removed or modified)"
        if self.settings != other.settings:
            return "it was run with other options"
        if self.plan != other.plan:
            return "its shard tasks differ (another shard count or worker count)"
        return None

    def to_json(self) -> JsonObject:
        return asdict(self)

    @classmethod
    def from_json(cls, data: Mapping[str, Json]) -> RunFingerprint:
        return cls(**data)


def _proves(path: str, records: int, size: int, shard_format: ShardFormat) -> bool:
    """The shard file's framing holds exactly `records` records and `size` bytes. A gs://
    ArrayRecord shard, which its package cannot open, is proven by its size: a GCS object
    appears only once its upload closed whole."""
    try:
        (found,) = FileSystems.match([path])
        if not found.metadata_list or found.metadata_list[0].size_in_bytes != size:
            return False
        if shard_format.file_format == "array_record":
            return storage.is_remote(path) or array_record_files.count_records(path) == records
        if shard_format.compression == "gzip":
            with FileSystems.open(path, compression_type=CompressionTypes.GZIP) as handle:
                return sum(1 for _ in iter_records(handle)) == records
        return len(index_records(path, size)) == records
    except (FramingError, OSError, ValueError):
        return False


def finished_shard_tasks(
    temp_dir: str, output: str, shard_task_inputs: Mapping[str, int], shard_format: ShardFormat
) -> dict[str, ShardOutcome | None]:
    """The shard tasks of an interrupted run that are proven done, by name, with their outcomes
    (None for a shard task whose every input was rejected: it wrote no shard); each one's shard is
    its temporary file or, when the run was stopped while renaming, its final file."""
    found: dict[str, ShardOutcome | None] = {}
    for shard_task, inputs in sorted(shard_task_inputs.items()):
        try:
            read = ReadOutcome.from_json(read_json(done_path(temp_dir, shard_task, "read")))
        except Exception:  # missing, or cut short by the kill: the shard task is done again
            continue
        if read.inputs == inputs and len(read.rejects) == inputs:
            found[shard_task] = None
            continue
        try:
            written = ShardOutcome.from_json(read_json(done_path(temp_dir, shard_task, "written")))
        except Exception:
            continue
        shard = written.shard
        if read.inputs != inputs or shard.records + len(read.rejects) != inputs:
            continue
        if not _proves(shard.temp_path, shard.records, written.bytes, shard_format):
            name = names.shard_name(shard.split, shard.index, shard.count, shard_format)
            final = FileSystems.join(output, name)
            if not _proves(final, shard.records, written.bytes, shard_format):
                continue
            place = (shard.split, shard.index, shard.count)
            written.shard = WrittenShard(*place, final, shard.records, shard.indexed)
        found[shard_task] = written
    return found


def load_written(
    temp_dir: str, shard_task: str, output: str, shard_format: ShardFormat
) -> ShardOutcome | None:
    """A finished shard task's writer's done file (None when it wrote no shard), with its shard
    where `finished_shard_tasks` found it: its final name when an interrupted finalize had moved
    it."""
    data = storage.read_json_or_none(done_path(temp_dir, shard_task, "written"))
    if data is None:
        return None
    written = ShardOutcome.from_json(data)
    shard = written.shard
    if not FileSystems.exists(shard.temp_path):
        final = FileSystems.join(
            output, names.shard_name(shard.split, shard.index, shard.count, shard_format)
        )
        written.shard = WrittenShard(
            shard.split, shard.index, shard.count, final, shard.records, shard.indexed
        )
    return written


def shard_task_inputs(shard_tasks: Sequence[ShardTask]) -> dict[str, int]:
    """Each staged shard task's input count, by its name (`done_files.shard_task_name`)."""
    return {shard_task_name(t.split, t.index): len(t.inputs) for t in shard_tasks}


@dataclass(frozen=True)
class Resumable:
    """What a rerun found of an interrupted run: its temporary folder and its finished shard tasks
    (with their outcomes), or why it cannot be resumed (`why`, and nothing kept)."""

    temp_dir: str | None = None
    finished: Mapping[str, ShardOutcome | None] = field(default_factory=dict)
    why: str | None = None

    @property
    def records(self) -> int:
        return sum(outcome.shard.records for outcome in self.finished.values() if outcome is not None)


def fingerprint_path(temp_dir: str) -> str:
    return FileSystems.join(temp_dir, names.PLAN_DIR, names.PLAN_RUN_FILE)


def interrupted_plans(output: str) -> list[str]:
    """The fingerprints (`fingerprint_path`) of the interrupted runs in `output`, sorted; none
    when it holds a finished run (summary.json) or nothing yet."""
    if FileSystems.exists(FileSystems.join(output, names.SUMMARY_FILE)):
        return []
    pattern = FileSystems.join(output, f"{names.TEMP_PREFIX}*", names.PLAN_DIR, names.PLAN_RUN_FILE)
    try:
        (found,) = FileSystems.match([pattern])
    except Exception:  # no such folder yet
        return []
    return sorted(m.path for m in found.metadata_list)


def find_resumable(
    output: str, fingerprint: RunFingerprint, shard_task_inputs: Mapping[str, int], shard_format: ShardFormat
) -> Resumable:
    """The interrupted run in `output` whose plan is this one, with what it finished; or why
    none can be resumed. An output with summary.json holds a finished run: nothing to resume."""
    reasons = []
    for path in interrupted_plans(output):
        temp_dir = path[: -len(f"/{names.PLAN_DIR}/{names.PLAN_RUN_FILE}")]
        try:
            theirs = RunFingerprint.from_json(read_json(path))
        except Exception:
            reasons.append(f"{temp_dir}: its plan cannot be read")
            continue
        why = fingerprint.differs_from(theirs)
        if why is not None:
            reasons.append(f"{posixpath.basename(temp_dir)}: {why}")
            continue
        return Resumable(temp_dir, finished_shard_tasks(temp_dir, output, shard_task_inputs, shard_format))
    return Resumable(why="; ".join(reasons) if reasons else None)
