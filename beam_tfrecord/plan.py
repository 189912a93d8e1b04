"""The plan of a run, made from the listing alone: each input's label and split, the rejects
known before any byte is read, the class names and the shard count of each split.

It is small (paths and sizes) and deterministic, so the workers only read, decode and write.
"""

from __future__ import annotations

import heapq
import json
import re
from collections import defaultdict
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field

from beam_tfrecord import labels as labels_lib
from beam_tfrecord import sharding
from beam_tfrecord import splits as splits_lib
from beam_tfrecord.config import ConvertConfig, SourceConfig
from beam_tfrecord.listing import InputFile, list_inputs, skip_reason

__all__ = [
    "LabelSource",
    "Plan",
    "PlannedInput",
    "RejectLine",
    "ShardTask",
    "label_source_for",
    "make_plan",
    "plan_files",
    "plan_inputs",
    "shard_tasks",
]


@dataclass(frozen=True, slots=True)
class PlannedInput:
    """One input file with everything the worker needs besides its bytes."""

    relpath: str
    path: str
    size: int
    split: str
    label: int | None = None
    label_text: str | None = None


@dataclass(frozen=True)
class ShardTask:
    """One output shard and the inputs that go into it, in order: the unit of work of the
    path-planned sink (paths travel between workers, image bytes never do)."""

    split: str
    index: int
    count: int
    inputs: tuple[PlannedInput, ...]

    def to_json(self) -> str:
        rows = [[i.relpath, i.path, i.size, i.split, i.label, i.label_text] for i in self.inputs]
        return json.dumps({"split": self.split, "index": self.index, "count": self.count, "inputs": rows})

    @classmethod
    def from_json(cls, text: str) -> ShardTask:
        task = json.loads(text)
        inputs = tuple(PlannedInput(*row) for row in task["inputs"])
        return cls(task["split"], task["index"], task["count"], inputs)


@dataclass(frozen=True, order=True)
class RejectLine:
    """One line of rejects.jsonl: the input's path relative to --input, a code and a detail."""

    path: str
    reason: str
    detail: str

    def to_json(self) -> str:
        return json.dumps(asdict(self), ensure_ascii=False, sort_keys=True)

    @classmethod
    def from_json(cls, text: str) -> RejectLine:
        return cls(**json.loads(text))


@dataclass(frozen=True)
class LabelSource:
    """Where labels come from: `mode` is one of labels.LABEL_MODES."""

    mode: str = "folder"
    pattern: re.Pattern[str] | None = None
    manifest: labels_lib.Manifest | None = None

    def label_of(self, relpath: str) -> str | None:
        if self.mode == "none":
            return None
        if self.mode == "folder":
            return labels_lib.label_from_folder(relpath)
        if self.mode == "filename":
            assert self.pattern is not None
            return labels_lib.label_from_filename(relpath, self.pattern)
        if self.mode == "manifest":
            assert self.manifest is not None
            return self.manifest.label_of(relpath)
        raise ValueError(f"label_source must be one of {labels_lib.LABEL_MODES}, not {self.mode!r}")


def label_source_for(source: SourceConfig) -> LabelSource:
    """The runtime label source of a config: the pattern compiled, the manifest loaded."""
    pattern = manifest = None
    if source.label_source == "filename":
        pattern = labels_lib.compile_label_pattern(source.label_pattern or "")
    if source.label_source == "manifest":
        manifest = labels_lib.Manifest.load(source.manifest or "")
    return LabelSource(source.label_source, pattern, manifest)


@dataclass
class Plan:
    inputs: list[PlannedInput]
    rejects: list[RejectLine]  # known from the listing: skipped, unlabeled, unknown_class
    class_names: list[str] | None  # None for an unlabeled run
    splits: dict[str, float]
    shard_counts: dict[str, int]
    listed: int
    manifest_unmatched: list[str] = field(default_factory=list)

    @property
    def skipped(self) -> int:
        return sum(1 for r in self.rejects if r.reason == "skipped")

    @property
    def input_count(self) -> int:
        """Inputs as the summary counts them: every listed file that is not skipped clutter."""
        return self.listed - self.skipped

    def bytes_per_split(self) -> dict[str, int]:
        totals = dict.fromkeys(self.splits, 0)
        for item in self.inputs:
            totals[item.split] += item.size
        return totals


def make_plan(
    files: Sequence[InputFile],
    label_source: LabelSource,
    splits: dict[str, float],
    split_seed: int = 0,
    stratify: bool = False,
    num_shards: int | None = None,
    shard_size_mb: float = 128.0,
    fixed_class_names: Sequence[str] | None = None,
    parallelism: int = 1,
    round_robin: bool = False,
) -> Plan:
    """Labels, splits and shard counts from the listing alone.

    `parallelism` is how many shard tasks the runner can run at once and `round_robin` whether
    it deals them out in turn (see beam_tfrecord.runners); without `num_shards` they shape the
    shard counts (see sharding.shard_count).
    """
    rejects: list[RejectLine] = []
    labeled: list[tuple[InputFile, str | None]] = []
    for file in files:
        reason = skip_reason(file.relpath)
        if reason is not None:
            rejects.append(RejectLine(file.relpath, "skipped", reason))
            continue
        if file.problem is not None:  # known from the listing: a broken link, a loop, a FIFO
            rejects.append(RejectLine(file.relpath, *file.problem))
            continue
        try:
            labeled.append((file, label_source.label_of(file.relpath)))
        except labels_lib.Unlabeled as error:
            rejects.append(RejectLine(file.relpath, "unlabeled", str(error)))

    class_names: list[str] | None = None
    if label_source.mode != "none":
        class_names = labels_lib.class_names_from(
            (label for _, label in labeled if label is not None), fixed_class_names
        )
        known = set(class_names)
        kept = []
        for file, label in labeled:
            if label in known:
                kept.append((file, label))
            else:
                rejects.append(
                    RejectLine(file.relpath, "unknown_class", f"class {label!r} is not in --class_names")
                )
        labeled = kept
    ids = {name: i for i, name in enumerate(class_names or [])}

    if stratify:
        split_by_path = splits_lib.stratified_splits(
            ((f.relpath, label or "") for f, label in labeled), splits, split_seed
        )
    else:
        split_by_path = {f.relpath: splits_lib.split_of(f.relpath, splits, split_seed) for f, _ in labeled}

    inputs = [
        PlannedInput(
            relpath=f.relpath,
            path=f.path,
            size=f.size,
            split=split_by_path[f.relpath],
            label=ids.get(label) if label is not None else None,
            label_text=label,
        )
        for f, label in labeled
    ]
    totals: dict[str, int] = defaultdict(int)
    counts: dict[str, int] = defaultdict(int)
    for item in inputs:
        totals[item.split] += item.size
        counts[item.split] += 1
    shard_counts = {
        name: num_shards
        if num_shards
        else sharding.shard_count(totals[name], shard_size_mb, counts[name], parallelism, round_robin)
        for name in splits
    }
    unmatched = label_source.manifest.unmatched() if label_source.manifest else []
    return Plan(
        inputs=inputs,
        rejects=sorted(rejects),
        class_names=class_names,
        splits=dict(splits),
        shard_counts=shard_counts,
        listed=len(files),
        manifest_unmatched=unmatched,
    )


def plan_files(
    files: Sequence[InputFile],
    source: SourceConfig,
    config: ConvertConfig,
    label_source: LabelSource | None = None,
    parallelism: int = 1,
    round_robin: bool = False,
) -> Plan:
    """Plan a listing for `config`: `make_plan` with the configs' settings.

    `label_source` passes one already loaded (the command line loads the manifest early, to
    fail fast); by default it is made from the config."""
    return make_plan(
        files,
        label_source or label_source_for(source),
        dict(source.splits),
        split_seed=source.split_seed,
        stratify=source.stratify,
        num_shards=config.num_shards,
        shard_size_mb=config.shard_size_mb,
        fixed_class_names=source.class_names,
        parallelism=parallelism,
        round_robin=round_robin,
    )


def plan_inputs(
    source: SourceConfig,
    config: ConvertConfig,
    label_source: LabelSource | None = None,
    parallelism: int = 1,
    round_robin: bool = False,
) -> Plan:
    """List `source.input` and plan it for `config`: the launcher's whole share of the work."""
    return plan_files(list_inputs(source.input), source, config, label_source, parallelism, round_robin)


def shard_tasks(plan: Plan, split_seed: int = 0) -> list[ShardTask]:
    """Every planned shard with its inputs, balanced by bytes and independent of listing order.

    Inputs are taken in path-hash order and each goes to the shard with the fewest bytes so far,
    so shards of one split differ in size by at most about one image.
    """
    by_split: dict[str, list[PlannedInput]] = defaultdict(list)
    for item in plan.inputs:
        by_split[item.split].append(item)
    tasks = []
    for split, count in plan.shard_counts.items():
        items = sorted(
            by_split[split], key=lambda i: (splits_lib.path_hash(i.relpath, split_seed + 1), i.relpath)
        )
        heap = [(0, index) for index in range(count)]
        members: list[list[PlannedInput]] = [[] for _ in range(count)]
        for item in items:
            size, index = heapq.heappop(heap)
            members[index].append(item)
            heapq.heappush(heap, (size + item.size, index))
        tasks += [ShardTask(split, index, count, tuple(members[index])) for index in range(count)]
    return tasks
