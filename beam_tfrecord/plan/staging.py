"""The plan as files under the output's temporary folder, so the job graph never holds it.

The launcher writes, before the pipeline is built:

    <output>/.temp-beam-tfrecord-<run_id>/plan/facts.json          class names, splits, shard counts, counts
    <output>/.temp-beam-tfrecord-<run_id>/plan/rejects.jsonl       rejects known from the listing
    <output>/.temp-beam-tfrecord-<run_id>/plan/shards/<split>-<index>.json   one ShardTask each

and the pipeline holds only a `StagedPlan`: that folder's name and the shard counts. Pickled
into the job instead, 32,000 planned inputs made a 603 KB Dataflow graph (about 190 MB at 10
million, over Dataflow's request limit); staged, the graph's size does not depend on the inputs.
The workers read one shard task each; the metadata step reads the facts and the rejects.
"""

from __future__ import annotations

import dataclasses
import json
import uuid
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

from apache_beam.io.filesystem import CompressionTypes
from apache_beam.io.filesystems import FileSystems

from beam_tfrecord import tasks
from beam_tfrecord.edges import JsonObject
from beam_tfrecord.elements import DroppedObjectLine, PlannedInput, RejectLine, ShardTask
from beam_tfrecord.names import (
    PLAN_DIR,
    PLAN_DROPPED_OBJECTS_FILE,
    PLAN_FACTS_FILE,
    PLAN_REJECTS_FILE,
    PLAN_SHARD_TASKS_DIR,
    PLAN_UNMATCHED_FILE,
    TEMP_PREFIX,
    shard_task_file_name,
)
from beam_tfrecord.plan import bulk, planner
from beam_tfrecord.plan.planner import AnnotationFacts, GroupFacts, Plan
from beam_tfrecord.plan.source_config import SourceConfig
from beam_tfrecord.write_failures import writing

__all__ = [
    "PlanFacts",
    "PlannedAnnotations",
    "StagedPlan",
    "list_shard_task_files",
    "load_facts",
    "load_planned_dropped",
    "load_planned_rejects",
    "load_shard_task",
    "load_unmatched",
    "locate_plan",
    "new_run_id",
    "stage_plan",
]

STAGING_THREADS = 16


@dataclass(frozen=True)
class PlannedAnnotations:
    """What planning learnt of an annotated run's annotations, for the summary: their format,
    where they were found (and how many pictures they matched), how many entries name no listed
    picture (their lines are staged beside the facts), the warnings planning leaves, and where
    the splits came from."""

    format: str
    found_at: str = ""
    unmatched_entries: int = 0
    warnings: list[str] = field(default_factory=list)
    split_source: str = ""

    @classmethod
    def of(cls, found: AnnotationFacts) -> PlannedAnnotations:
        return cls(
            found.format, found.found_at, len(found.unmatched), list(found.warnings), found.split_source
        )


@dataclass(frozen=True)
class PlanFacts:
    """What the metadata step needs of the plan besides its rejects; small whatever the input.
    Staged as facts.json (`to_json`), read back whole (`from_json`). `kinds` holds each of the
    run's kinds of label's plan facts (`labels.LabelKind.plan_facts`), by kind name."""

    listed: int
    class_names: list[str] | None
    splits: dict[str, float]
    shard_counts: dict[str, int]
    manifest_unmatched: list[str] = field(default_factory=list)
    source: SourceConfig | None = None  # the settings the plan was made from
    grouping: GroupFacts = field(default_factory=GroupFacts)
    task: str = tasks.DEFAULT
    annotations: PlannedAnnotations | None = None  # an annotated run's
    kinds: JsonObject = field(default_factory=dict)
    split_folders: str = ""  # a classification run's splits' source, when its tree declares them
    in_two_splits: int = 0  # records beyond each picture's first split (overlapping_splits)

    @classmethod
    def of(cls, plan: Plan, source: SourceConfig | None = None) -> PlanFacts:
        found = plan.annotations
        return cls(
            plan.listed,
            plan.class_names,
            dict(plan.splits),
            dict(plan.shard_counts),
            plan.manifest_unmatched,
            source,
            plan.grouping,
            plan.task,
            PlannedAnnotations.of(found) if found is not None else None,
            dict(plan.kinds),
            plan.split_source,
            plan.in_two_splits,
        )

    @property
    def split_source(self) -> str:
        """Where the splits came from, when the dataset declares its own ("": hashed)."""
        found = self.annotations
        return found.split_source if found is not None else self.split_folders

    @property
    def annotation_warnings(self) -> list[str]:
        return list(self.annotations.warnings) if self.annotations is not None else []

    def to_json(self) -> JsonObject:
        data = dataclasses.asdict(self)
        data["source"] = self.source.to_json() if self.source is not None else None
        return data

    @classmethod
    def from_json(cls, data: JsonObject) -> PlanFacts:
        source = data.get("source")
        found = data.get("annotations")
        return cls(
            data["listed"],
            data["class_names"],
            data["splits"],
            data["shard_counts"],
            data.get("manifest_unmatched", []),
            SourceConfig.from_json(source) if source else None,
            GroupFacts(**(data.get("grouping") or {})),
            data.get("task", tasks.DEFAULT),
            PlannedAnnotations(**found) if found else None,
            data.get("kinds", {}),
            data.get("split_folders", ""),
            data.get("in_two_splits", 0),
        )


@dataclass(frozen=True)
class StagedPlan:
    """Where a plan's files are and the few numbers the graph needs: the pipeline's whole input.

    Args:
      temp_dir: the run's temporary folder under the output; the plan is in `temp_dir/plan`,
        temporary shards beside it; the metadata step removes it at the end.
      shard_counts: split -> planned shard count (display data, and the empty shards finalize
        makes for a shard task whose every input was rejected).
      inputs: planned inputs that will be read (the progress line's total).
      listed: files the listing found; skipped: clutter among them (`.DS_Store`, ...);
        rejected: inputs rejected from the listing alone (the start-up line counts them).
    """

    temp_dir: str
    shard_counts: dict[str, int]
    inputs: int
    listed: int = 0
    skipped: int = 0
    rejected: int = 0
    task: str = tasks.DEFAULT  # the run's task (`tasks.TASKS`): its kinds of label
    # Shard tasks an interrupted run finished, which this run keeps (`train-00003`, ...), and
    # how many records their shards hold.
    finished: tuple[str, ...] = ()
    resumed_records: int = 0
    # Called with what a commit step is about to write (the shards' final names, the metadata)
    # before it writes: raises when the run no longer holds its output (output.claim.check_held).
    fence: Callable[[str], None] | None = None

    def check_fence(self, what: str) -> None:
        if self.fence is not None:
            self.fence(what)

    @property
    def input_count(self) -> int:
        """Inputs as the summary counts them: every listed file that is not skipped clutter."""
        return self.listed - self.skipped

    @property
    def plan_dir(self) -> str:
        return FileSystems.join(self.temp_dir, PLAN_DIR)

    @property
    def shard_task_pattern(self) -> str:
        return FileSystems.join(self.plan_dir, PLAN_SHARD_TASKS_DIR, "*.json")


def new_run_id() -> str:
    return uuid.uuid4().hex[:12]


def locate_plan(plan: Plan, output: str, run_id: str | None = None) -> StagedPlan:
    """Where `stage_plan` puts `plan` for `output`, without writing anything (dry runs use this)."""
    temp_dir = FileSystems.join(output, f"{TEMP_PREFIX}{run_id or new_run_id()}")
    rejected = len(plan.rejects) - plan.skipped
    counts = (len(plan.inputs), plan.listed, plan.skipped, rejected)
    return StagedPlan(temp_dir, dict(plan.shard_counts), *counts, plan.task)


def _write(path: str, data: bytes) -> None:
    with writing(path), FileSystems.create(path, compression_type=CompressionTypes.UNCOMPRESSED) as handle:
        handle.write(data)


def _read(path: str) -> bytes:
    with FileSystems.open(path, compression_type=CompressionTypes.UNCOMPRESSED) as handle:
        return handle.read()


def stage_plan(
    plan: Plan,
    output: str,
    source: SourceConfig | None = None,
    run_id: str | None = None,
    shard_tasks: Sequence[ShardTask] | None = None,
    staged_shard_task: Callable[[str], None] | None = None,
    objects_staged: Callable[[PlannedInput, list[str]], None] | None = None,
) -> StagedPlan:
    """Write the plan's files under `output` (see the module docstring); returns where they are.

    `source` is the config the plan was made from: its split seed orders the shards' inputs, and
    summary.json records it. `shard_tasks` are its shard tasks when already made.
    `staged_shard_task` is given each shard task's text, in order, as it is written (the resume
    fingerprint hashes them);
    `objects_staged` each annotated input and its objects' texts (`ShardTask.to_json`)."""
    with bulk.cycles_paused():  # a detection run's shard tasks hold an object per box: plan.bulk
        return _stage(plan, output, source, run_id, shard_tasks, staged_shard_task, objects_staged)


def _stage(
    plan: Plan,
    output: str,
    source: SourceConfig | None,
    run_id: str | None,
    shard_tasks: Sequence[ShardTask] | None,
    staged_shard_task: Callable[[str], None] | None,
    objects_staged: Callable[[PlannedInput, list[str]], None] | None,
) -> StagedPlan:
    staged = locate_plan(plan, output, run_id)
    base = staged.plan_dir
    if shard_tasks is None:
        shard_tasks = planner.shard_tasks(plan, source.split_seed if source is not None else 0)
    for shard_task in shard_tasks:
        text = shard_task.to_json(objects_staged)
        name = shard_task_file_name(shard_task.split, shard_task.index)
        _write(FileSystems.join(base, PLAN_SHARD_TASKS_DIR, name), text.encode())
        if staged_shard_task is not None:
            staged_shard_task(text)
    _write(
        FileSystems.join(base, PLAN_REJECTS_FILE), "".join(r.to_json() + "\n" for r in plan.rejects).encode()
    )
    if plan.annotations is not None:
        dropped = "".join(line.to_json() + "\n" for line in plan.dropped)
        _write(FileSystems.join(base, PLAN_DROPPED_OBJECTS_FILE), dropped.encode())
        unmatched = "".join(line + "\n" for line in plan.unmatched_lines)
        _write(FileSystems.join(base, PLAN_UNMATCHED_FILE), unmatched.encode())
    _write(FileSystems.join(base, PLAN_FACTS_FILE), json.dumps(PlanFacts.of(plan, source).to_json()).encode())
    return staged


def list_shard_task_files(plan_dir: str) -> list[str]:
    """The staged shard tasks, in name order: a local runner deals them out round-robin in the
    order they arrive, and name order alternates equal-sized shards across its workers."""
    (result,) = FileSystems.match([FileSystems.join(plan_dir, PLAN_SHARD_TASKS_DIR, "*.json")])
    return sorted(m.path for m in result.metadata_list)


def load_shard_task(path: str) -> ShardTask:
    """A staged shard task, read back in a worker. Its objects (a box and its values for every
    object of a detection run) form no cycles, so the collector is paused while they are made,
    as while they were planned (plan.bulk): a shard task reads faster, most of all over an unfrozen heap
    (benchmarks/NOTES.md#the-coco-launchers-choices-measured)."""
    text = _read(path).decode("utf-8")
    with bulk.cycles_paused():
        return ShardTask.from_json(text)


def load_facts(plan_dir: str) -> PlanFacts:
    return PlanFacts.from_json(json.loads(_read(FileSystems.join(plan_dir, PLAN_FACTS_FILE))))


def load_planned_rejects(plan_dir: str) -> list[RejectLine]:
    text = _read(FileSystems.join(plan_dir, PLAN_REJECTS_FILE)).decode("utf-8")
    return [RejectLine.from_json(line) for line in text.splitlines() if line]


def load_planned_dropped(plan_dir: str) -> list[DroppedObjectLine]:
    """An annotated run's parts of labels (objects) dropped while planning ([] for any other run)."""
    path = FileSystems.join(plan_dir, PLAN_DROPPED_OBJECTS_FILE)
    if not FileSystems.exists(path):
        return []
    return [DroppedObjectLine.from_json(line) for line in _read(path).decode("utf-8").splitlines() if line]


def load_unmatched(plan_dir: str) -> list[str]:
    """A detection run's annotation entries that name no listed image, as JSON lines."""
    path = FileSystems.join(plan_dir, PLAN_UNMATCHED_FILE)
    return _read(path).decode("utf-8").splitlines() if FileSystems.exists(path) else []


def describe(shard_counts: dict[str, int]) -> str:
    """`train 8, validation 2` for logs and display data."""
    return ", ".join(f"{split} {count}" for split, count in shard_counts.items())
