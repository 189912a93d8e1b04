"""The plan of a run, made from the listing alone: each input's label and split, the rejects
known before any byte is read, the class names and the shard count of each split.

It is small (paths and sizes) and deterministic, so the workers only read, decode and write.
`make_plan` composes the steps, each a module of this stage: the labels (plan.labelling, or
plan.annotating for a run with annotations), dedupe (plan.dedupe), the splits (plan.splitting)
and the shards (here: the counts, then `shard_tasks`).
"""

from __future__ import annotations

import dataclasses
import heapq
from collections import defaultdict
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from beam_tfrecord import reasons, tasks
from beam_tfrecord.edges import JsonObject
from beam_tfrecord.elements import DroppedObjectLine, PlannedInput, RejectLine, ShardTask
from beam_tfrecord.labels import of_task
from beam_tfrecord.plan import annotating, bands, bulk, dedupe, labelling, splitting
from beam_tfrecord.plan import splits as splits_lib
from beam_tfrecord.plan.annotating import AnnotationFacts
from beam_tfrecord.plan.annotations.results import AnnotationSet
from beam_tfrecord.plan.known import KnownRecords
from beam_tfrecord.plan.labelling import Candidates, LabelSource, label_source_for
from beam_tfrecord.plan.listing import InputFile, list_inputs
from beam_tfrecord.plan.sharding import ShardSettings
from beam_tfrecord.plan.source_config import SourceConfig
from beam_tfrecord.plan.splitting import GroupFacts, undeclared_split_warning

__all__ = [
    "AnnotationFacts",
    "GroupFacts",
    "KnownRecords",
    "LabelSource",
    "Plan",
    "label_source_for",
    "make_plan",
    "plan_inputs",
    "shard_tasks",
    "undeclared_split_warning",
]


@dataclass
class Plan:
    inputs: list[PlannedInput]
    rejects: list[RejectLine]  # known from the listing: skipped, unlabeled, unknown_class
    class_names: list[str] | None  # None for an unlabeled run
    splits: dict[str, float]
    shard_counts: dict[str, int]
    listed: int
    manifest_unmatched: list[str] = field(default_factory=list)
    grouping: GroupFacts = field(default_factory=GroupFacts)
    groups: dict[str, str] = field(default_factory=dict)  # relpath -> group, for files that have one
    # An append's old pictures whose annotations changed since converted: (relpath, split).
    annotations_changed: list[tuple[str, str | None]] = field(default_factory=list)
    # Where a classification run's splits came from, when its tree declares them (split folders).
    split_source: str = ""
    task: str = tasks.DEFAULT  # the run's task (`tasks.TASKS`): its kinds of label
    annotations: AnnotationFacts | None = None  # an annotated run's
    # Each of the run's kinds of label's plan facts (`labels.LabelKind.plan_facts`), by kind name.
    kinds: JsonObject = field(default_factory=dict)
    # Parts of labels left out while planning, one line each (dropped_objects.jsonl's).
    dropped: tuple[DroppedObjectLine, ...] = ()
    # Records planned beyond each picture's first split (`overlapping_splits`: a picture in two).
    in_two_splits: int = 0

    @property
    def unmatched_lines(self) -> tuple[str, ...]:
        """annotations_without_image.jsonl's lines (an annotated run's)."""
        return self.annotations.unmatched if self.annotations is not None else ()

    @property
    def skipped(self) -> int:
        return sum(1 for r in self.rejects if r.reason == reasons.SKIPPED.code)

    @property
    def input_count(self) -> int:
        """Inputs as the summary counts them: every listed file that is not skipped clutter."""
        return self.listed - self.skipped

    def bytes_per_split(self) -> dict[str, int]:
        totals = dict.fromkeys(self.splits, 0)
        for item in self.inputs:
            totals[item.split] += item.weight
        return totals


DEFAULT_SHARDS = ShardSettings()


def make_plan(
    files: Sequence[InputFile],
    source: SourceConfig,
    shards: ShardSettings = DEFAULT_SHARDS,
    label_source: LabelSource | None = None,
    known: KnownRecords | None = None,
) -> Plan:
    """Labels, groups, splits and shard counts from the listing (and, with `source.dedupe`, one
    hash of every candidate's bytes): the launcher's whole share of the work, in the steps below.

    `shards` says how many shards there will be (see sharding.shard_count). A file in a group
    (the first group of `source.group_pattern` in its path, else the manifest's `group` column)
    is split with its group. `label_source` passes one already loaded (the command loads the
    manifest early, to fail fast); by default it is made from `source`. `known`: the dataset an
    append grows (its label ids kept, its records' bytes known to dedupe).
    """
    files = bands.grouped(files, source.bands)  # one input a picture (a listing grouped already stays)
    with bulk.cycles_paused():  # a detection run makes an object per box: see plan.bulk
        return _make_plan(files, source, shards, label_source or label_source_for(source), known)


def _make_plan(
    files: Sequence[InputFile],
    source: SourceConfig,
    shards: ShardSettings,
    label_source: LabelSource,
    known: KnownRecords | None = None,
) -> Plan:
    rejects: list[RejectLine] = []  # each step adds the files it turns away, with the reason
    known_names = known.class_names if known is not None else None
    # Labels: the annotations' where the run has them, else the label source's.
    loaded = annotating.load_annotations(files, source, known)
    if loaded is None:
        candidates = labelling.label_files(files, source, label_source, known_names, rejects)
        declared = splitting.split_folders(candidates.files, source, label_source, known)
    else:  # its candidates kept to the splits the annotations declare, where the run keeps them
        candidates = annotating.annotated_files(files, loaded, source, known_names, rejects)
        declared = loaded.declared
    annotated = loaded.found if loaded is not None else None
    # Splits: the dataset's own where it declares them, else hashed; no copy in two of them.
    if source.dedupe:
        candidates = _without_copies(candidates, annotated, known, rejects)
    assigned = splitting.split_files(candidates.files, source, label_source, declared, annotated)
    # Shards: how many each split gets (`shard_tasks` deals the inputs out to them).
    inputs = _planned_inputs(candidates, assigned.split_of, annotated, assigned.also)
    plan = Plan(
        inputs=inputs,
        rejects=sorted(rejects),
        class_names=candidates.class_names,
        splits=assigned.splits,
        shard_counts=_shard_counts(inputs, assigned.splits, shards),
        listed=len(files),
        manifest_unmatched=label_source.manifest.unmatched() if label_source.manifest else [],
        grouping=assigned.grouping,
        groups=assigned.groups,
        annotations_changed=loaded.changed if loaded is not None else [],
        split_source=f"declared by {declared.source}" if declared is not None and loaded is None else "",
        in_two_splits=len(inputs) - len({item.relpath for item in inputs}),
    )
    if loaded is None:
        return plan
    run = annotating.annotated_run(loaded, source, plan.rejects, plan.class_names)
    return dataclasses.replace(
        plan, task=run.task, annotations=run.annotations, kinds=run.kinds, dropped=run.dropped
    )


def _without_copies(
    candidates: Candidates,
    annotated: AnnotationSet | None,
    known: KnownRecords | None,
    rejects: list[RejectLine],
) -> Candidates:
    """The candidates less their copies (dedupe.without_copies), an append's included: a file
    whose bytes a record of the dataset already holds."""
    objects = annotating.objects_of(annotated) if annotated is not None else None
    hashes = known.hashes if known is not None else {}
    kept = dedupe.without_copies(candidates.files, rejects, hashes, objects)
    return dataclasses.replace(candidates, files=kept)


def _planned_inputs(
    candidates: Candidates,
    split_of: Mapping[str, str],
    annotated: AnnotationSet | None,
    also: Mapping[str, tuple[str, ...]] | None = None,
) -> list[PlannedInput]:
    """Each kept candidate as the workers get it: its split, its class ids (and names), its
    manifest values and, in an annotated run, its annotations as staged."""
    ids = {name: i for i, name in enumerate(candidates.class_names or [])}
    annotations_of = annotating.staged_annotations(annotated) if annotated is not None else None
    return [
        PlannedInput(
            relpath=f.relpath,
            path=f.path,
            size=f.size,
            split=split,
            label=labelling.label_ids(entry.class_name, ids) if entry is not None else None,
            label_text=labelling.label_texts(entry.class_name, ids) if entry is not None else None,
            extras=candidates.extras.get(f.relpath, ()),
            annotations=annotations_of(f.relpath) if annotations_of is not None else None,
            bands=f.bands,
            page=f.page if f.page is not None and f.page.count > 1 else None,
        )
        for f, entry in candidates.files
        for split in (split_of[f.relpath], *(also or {}).get(f.relpath, ()))
    ]


def _shard_counts(
    inputs: Sequence[PlannedInput], splits: Mapping[str, float], shards: ShardSettings
) -> dict[str, int]:
    """Each split's shard count: the fixed one, else derived from its bytes (sharding.shard_count)."""
    totals: dict[str, int] = defaultdict(int)
    counts: dict[str, int] = defaultdict(int)
    for item in inputs:
        totals[item.split] += item.weight
        counts[item.split] += 1
    return {name: shards.count_for(totals[name], counts[name]) for name in splits}


def plan_inputs(
    source: SourceConfig, shards: ShardSettings = DEFAULT_SHARDS, label_source: LabelSource | None = None
) -> Plan:
    """List `source.input` and plan it (`make_plan`)."""
    return make_plan(list_inputs(source.input), source, shards, label_source)


def shard_tasks(plan: Plan, split_seed: int = 0) -> list[ShardTask]:
    """Every planned shard with its inputs, balanced by bytes and independent of listing order.

    Inputs are taken in path-hash order and each goes to the shard with the fewest bytes so far,
    so shards of one split differ in size by at most about one image. The pages of a file
    (`--pages each`) go together, in page order, as one input of the file's bytes: the worker
    reads the file once for all of them (images.pages), never once a shard.
    """
    by_split: dict[str, dict[str, list[PlannedInput]]] = defaultdict(lambda: defaultdict(list))
    for item in plan.inputs:
        by_split[item.split][item.file_relpath].append(item)
    found: list[ShardTask] = []
    kinds, settings = tuple(k.name for k in of_task(plan.task)), worker_settings(plan)
    for split, count in plan.shard_counts.items():
        files = sorted(
            by_split[split].items(), key=lambda f: (splits_lib.path_hash(f[0], split_seed + 1), f[0])
        )
        heap = [(0, index) for index in range(count)]
        members: list[list[PlannedInput]] = [[] for _ in range(count)]
        for _, items in files:
            size, index = heapq.heappop(heap)
            members[index] += sorted(items, key=lambda i: i.page.index if i.page is not None else 0)
            heapq.heappush(heap, (size + sum(item.weight for item in items), index))
        found += [
            ShardTask(split, index, count, tuple(members[index]), kinds, settings) for index in range(count)
        ]
    return found


def worker_settings(plan: Plan) -> JsonObject:
    """What each of the run's kinds of label needs on the workers, staged with every
    shard task."""
    names = tuple(plan.class_names or ())
    settings = {k.name: k.worker_setting(plan.kinds.get(k.name), names) for k in of_task(plan.task)}
    return {name: setting for name, setting in settings.items() if setting is not None}
