"""summary.json built: from the plan's facts, the rejects known from the listing, the pipeline's
tally and the shard files in place (`build_summary`), with the warnings a user should read before
training, worded once for a run's summary and a grown dataset's (output.grown_summary).

The summary's types, and how the file is written and read, are `beam_tfrecord.summary`'s; the run's
settings reach it as their configs record them (`OptionsSummary`), and are read back into the
configs here, where the configs' stages lie below.
"""

from __future__ import annotations

import dataclasses
import posixpath
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from typing import TYPE_CHECKING

from beam_tfrecord import reasons
from beam_tfrecord.elements import DuplicateGroup, RejectLine
from beam_tfrecord.features.options import FeatureConfig
from beam_tfrecord.keys import extra_key
from beam_tfrecord.labels import KINDS, Section, SectionInputs, of_task
from beam_tfrecord.labels.objects.label_map import is_unused
from beam_tfrecord.names import DUPLICATES_FILE, MANIFEST_UNMATCHED_FILE
from beam_tfrecord.plan import splits as splits_lib
from beam_tfrecord.plan.source_config import SourceConfig
from beam_tfrecord.summary import (
    DIGEST_METHOD,
    DuplicateCounts,
    ExtraColumnSummary,
    FeatureSummary,
    GroupSummary,
    MixedPixels,
    OptionsSummary,
    Resumed,
    RunSummary,
    SizeRange,
    SplitSummary,
    Summary,
)
from beam_tfrecord.write.output_config import ConvertConfig
from beam_tfrecord.write.tally import Tally

if TYPE_CHECKING:
    from beam_tfrecord.plan.staging import PlanFacts

__all__ = [
    "build_summary",
    "copy_warnings",
    "duplicate_counts",
    "recorded_again",
    "share_and_class_warnings",
]

# A hash split further than this from its fraction gets a warning that names stratify.
SHARE_WARNING = 0.01
# The classes without a record a warning names (one line for them all: a set of 200 classes
# whose sample holds 20 would print 180 lines).
CLASSES_SHOWN = 10


def recorded_again(options: OptionsSummary) -> OptionsSummary:
    """`options` as this version records them: read back into the configs and recorded again, so
    an earlier version's record takes the defaults of what it lacks and loses the keys no config
    declares now (a grown dataset's summary.json holds its first run's options so; an append
    compares its options with them so). `features_only` stays as recorded: the output config reads
    back without its feature model (the `features` section's), whose absence records False."""
    output = options.config(ConvertConfig)
    recorded = OptionsSummary.of(options.config(SourceConfig), output).to_json()
    if output is not None:
        recorded["features_only"] = bool(options.value("features_only"))
    return OptionsSummary(recorded)


def duplicate_counts(groups: Sequence[DuplicateGroup]) -> DuplicateCounts:
    """summary.json's duplicate figures: records beyond the first copy of each content
    (`duplicate_records`), groups, and records whose bytes also lie in another split
    (`cross_split_duplicates`: every copy of a group that spans two splits or more)."""
    return {
        "duplicate_records": sum(len(g.copies) - 1 for g in groups),
        "duplicate_groups": len(groups),
        "cross_split_duplicates": sum(len(g.copies) for g in groups if len(g.splits) > 1),
    }


def _splits(
    facts: PlanFacts, tally: Tally, shard_files: Iterable[tuple[str, int]], records: int, stratified: bool
) -> dict[str, SplitSummary]:
    """Each split's counts, share, expected deviation, labels and shards."""
    shards: dict[str, list[tuple[str, int]]] = {name: [] for name in facts.splits}
    for path, size in sorted(shard_files):
        split = posixpath.basename(path).split("-", 1)[0]
        shards.setdefault(split, []).append((posixpath.basename(path), size))
    grouping = facts.grouping
    # What a hash split draws: each group once, each file of no group once.
    units = grouping.groups + grouping.without_group if grouping.source else records
    splits = {}
    for name in facts.splits:
        per_label = {
            label: n for (split, label), n in sorted(tally.by_split_label.items(), key=str) if split == name
        }
        count = tally.records.get(name, 0)
        deviation = 0.0 if stratified else splits_lib.expected_deviation(facts.splits[name], units)
        splits[name] = SplitSummary(
            fraction=facts.splits[name],
            records=count,
            share=round(count / records, 4) if records else 0.0,
            expected_deviation=round(deviation, 4),
            labels={str(k): v for k, v in per_label.items()} if facts.class_names is not None else {},
            shards=len(shards[name]),
            planned_shards=facts.shard_counts[name],
            bytes=sum(size for _, size in shards[name]),
            files=[file for file, _ in shards[name]],
            digest=f"{tally.digests.get(name, 0):064x}",
        )
    return splits


def share_and_class_warnings(
    splits: Mapping[str, SplitSummary],
    class_names: Sequence[str],
    records_of: Mapping[str, int] | Mapping[str | None, int],
    records: int,
    stratified: bool,
    declared: bool,
) -> list[str]:
    """The warnings on a dataset's split shares (hash splits only: declared splits asked no
    fraction) and on its classes without a record, worded once for a run's summary and a grown
    dataset's (output.append). `records_of`: class name -> its records."""
    warnings = []
    if not stratified and not declared and len(splits) > 1 and records:
        name, split = max(splits.items(), key=lambda item: abs(item[1].share - item[1].fraction))
        if abs(split.share - split.fraction) > SHARE_WARNING:
            warnings.append(
                f"split {name} holds {split.share:.1%} of records, not the {split.fraction:.1%} asked: "
                f"hash splits are off by up to ±{split.expected_deviation:.1%} at this size "
                "(and never move a file when files are added); stratify gives exact shares"
            )
    empty = [label for label in class_names if not records_of.get(label) and not is_unused(label)]
    if len(empty) == 1:  # (is_unused: a label map's missing id, no class)
        warnings.append(f"class {empty[0]!r} has no valid image")
    elif empty:
        shown = ", ".join(map(repr, empty[:CLASSES_SHOWN]))
        more = f" and {len(empty) - CLASSES_SHOWN} more" if len(empty) > CLASSES_SHOWN else ""
        counted = sum(1 for label in class_names if not is_unused(label))
        warnings.append(f"classes with no valid image ({len(empty)} of {counted}): {shown}{more}")
    return warnings


def pixel_warnings(summary: Summary) -> list[str]:
    """The warning on a run whose records hold pictures of several kinds (summary.MixedPixels)."""
    try:
        summary.pixel_layout()
    except MixedPixels as mixed:
        return [str(mixed)]
    return []


def copy_warnings(duplicate_records: int, cross_split_duplicates: int) -> list[str]:
    """The warnings on records whose source bytes another record has, in one split or across two."""
    warnings = []
    if duplicate_records:
        warnings.append(
            f"{duplicate_records} records have the same image bytes as another record (see {DUPLICATES_FILE})"
        )
    if cross_split_duplicates:
        warnings.append(
            f"{cross_split_duplicates} records have the same bytes as a record in another "
            f"split: the splits leak (see {DUPLICATES_FILE}; dedupe keeps one copy)"
        )
    return warnings


def _warnings(
    facts: PlanFacts,
    splits: Mapping[str, SplitSummary],
    label_counts: Counter[str | None],
    records: int,
    stratified: bool,
    dupes: DuplicateCounts,
) -> list[str]:
    """What a user should know before training on the output."""
    declared = facts.split_source.startswith("declared")
    warnings = share_and_class_warnings(
        splits, facts.class_names or [], label_counts, records, stratified, declared
    )
    if facts.manifest_unmatched:
        warnings.append(
            f"{len(facts.manifest_unmatched)} manifest rows name no listed file "
            f"(see {MANIFEST_UNMATCHED_FILE})"
        )
    if records == 0:
        warnings.append("every input was rejected: no record was written")
    warnings += copy_warnings(dupes["duplicate_records"], dupes["cross_split_duplicates"])
    grouping = facts.grouping
    if grouping.source and not grouping.groups:
        warnings.append(f"no file has a group ({grouping.source}): every file was split on its own")
    warnings += facts.annotation_warnings
    return warnings


def _feature_summary(
    options: FeatureConfig | None, shapes: Counter[tuple[int, ...]], warnings: list[str]
) -> FeatureSummary | None:
    """What a reader needs to restore the features (shape, dtype, image kept or not) and how
    they were made; None for a run without a feature model."""
    if options is None:
        return None
    if len(shapes) > 1:
        warnings.append(f"features have {len(shapes)} different shapes: {sorted(shapes)}")
    shape = list(shapes.most_common(1)[0][0]) if shapes else None
    return FeatureSummary(
        model=options.feature_model or options.model_path,
        weights=options.model_weights if options.feature_model else None,
        pooling=options.pooling,
        dtype=options.dtype,
        precision=options.precision,
        features_only=options.features_only,
        batch_size=options.batch_size,
        shape=shape,
        framework=options.framework,
        input_normalization=options.input_normalization,
    )


def _sections(
    facts: PlanFacts, tally: Tally, planned_rejects: Sequence[RejectLine], label_counts: Counter[str | None]
) -> dict[str, Section]:
    """Each of the run's kinds of label's section, in the registry's order (summary.json's)."""
    found = facts.annotations
    inputs = SectionInputs(
        class_names=tuple(facts.class_names or ()),
        format=found.format if found is not None else "",
        found_at=found.found_at if found is not None else "",
        unmatched_entries=found.unmatched_entries if found is not None else 0,
        dropped=dict(tally.dropped),
        objects_rejected=tally.objects_rejected + sum(r.objects for r in planned_rejects),
        records_per_label=dict(label_counts),
    )
    run = {kind.name for kind in of_task(facts.task)}
    sections = {}
    for kind in KINDS.values():
        if kind.name in run:
            section = kind.section(facts.kinds.get(kind.name), tally.kind(kind.name), inputs)
            if section is not None:
                sections[kind.name] = section
    return sections


def build_summary(
    facts: PlanFacts,
    planned_rejects: Sequence[RejectLine],
    tally: Tally,
    shard_files: Iterable[tuple[str, int]],
    options: OptionsSummary,
    run: RunSummary | None = None,
    features: FeatureConfig | None = None,
    duplicates: Sequence[DuplicateGroup] = (),
    resumed: Resumed | None = None,
) -> Summary:
    """summary.json from the plan's facts, the rejects known from the listing, the tally of the
    rest and the shard files (path, size) in place: counts per split, label and reason, and the
    nothing-lost check.

    `options` are the run's settings; `run` says how it ran; `duplicates`
    are the groups of records with identical source bytes."""
    skipped = sum(1 for r in planned_rejects if r.reason == reasons.SKIPPED.code)
    planned = Counter(r.reason for r in planned_rejects if r.reason != reasons.SKIPPED.code)
    rejects = Counter(tally.rejects) + planned
    inputs = facts.listed - skipped
    records = sum(tally.records.values())
    rejected = sum(rejects.values())
    source = options.config(SourceConfig)
    stratified = bool(source and source.stratify)
    splits = _splits(facts, tally, shard_files, records, stratified)
    label_counts: Counter[str | None] = Counter()
    for (_, label), n in tally.by_split_label.items():
        label_counts[label] += n
    kinds = of_task(facts.task)
    names = tuple(facts.class_names or ())
    for kind in kinds:  # a kind that counts a class's records otherwise (the masks that hold it)
        counted = kind.label_counts(tally.kind(kind.name), names)
        if counted is not None:
            label_counts = counted
    dupes = duplicate_counts(duplicates)
    warnings = _warnings(facts, splits, label_counts, records, stratified, dupes)
    output = options.config(ConvertConfig)
    schema = output.schema if output is not None else "tfds"
    columns = [
        ExtraColumnSummary(c.name, c.type, extra_key(schema, c.name))
        for c in (source.extra_columns if source else ())
    ]
    feature_info = _feature_summary(features, tally.feature_shapes, warnings)
    labeled = facts.class_names is not None
    sections = _sections(facts, tally, planned_rejects, label_counts)
    for section in sections.values():
        warnings += section.warnings()
    summary = Summary(
        inputs_listed=facts.listed,
        skipped=skipped,
        inputs=inputs,
        records=records,
        rejects=rejected,
        consistent=inputs + facts.in_two_splits == records + rejected,
        in_two_splits=facts.in_two_splits,
        splits=splits,
        class_names=facts.class_names,
        records_per_label={str(k): v for k, v in sorted(label_counts.items(), key=str)} if labeled else {},
        rejects_per_reason=dict(sorted(rejects.items())),
        reencoded=tally.reencoded,
        changes_per_reason={r: tally.changes[r] for r in reasons.codes("change") if tally.changes[r]},
        frames_dropped=tally.changes[reasons.FRAMES_DROPPED.code],
        duplicate_records=dupes["duplicate_records"],
        duplicate_groups=dupes["duplicate_groups"],
        cross_split_duplicates=dupes["cross_split_duplicates"],
        duplicates_file=DUPLICATES_FILE,
        split_method=facts.split_source or ("stratified" if stratified else "hash"),
        groups=GroupSummary(**dataclasses.asdict(facts.grouping)),
        multi_label=bool(source and source.multi_label),
        extra_columns=columns,
        digest_method=DIGEST_METHOD,
        source_formats=dict(sorted(tally.source_formats.items())),
        image_height=SizeRange.of(tally.heights),
        image_width=SizeRange.of(tally.widths),
        full_depth=dict(sorted(tally.depth.items())) or None,
        manifest_rows_without_file=len(facts.manifest_unmatched),
        manifest_rows_without_file_sample=facts.manifest_unmatched[:20],
        manifest_rows_without_file_list=MANIFEST_UNMATCHED_FILE if facts.manifest_unmatched else None,
        warnings=warnings,
        features=feature_info,
        sections=sections,
        resumed=resumed.copy() if resumed else None,
        options=options,
        run=run,
    )
    summary.warnings += pixel_warnings(summary)
    return summary
