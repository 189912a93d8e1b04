"""A grown dataset's summary.json (`--append`, output.append): the dataset's summary and the
append's run's counted together, as one run over every picture would count them where the two
runs' counts allow it (each split's share and expected deviation, the groups, a declared split's
fraction, every kind of label's section: `labels.Section.merged`), with a `history` of the runs
and the warnings worded as a run's (write.summary).
"""

from __future__ import annotations

import dataclasses
import re
import time
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence

from beam_tfrecord import names
from beam_tfrecord.elements import DuplicateGroup
from beam_tfrecord.labels import KINDS, Grown
from beam_tfrecord.output.file_index import IndexEntry
from beam_tfrecord.plan.splits import expected_deviation, group_of
from beam_tfrecord.summary import GroupSummary, HistoryEntry, SizeRange, SplitSummary, Summary
from beam_tfrecord.write.summary import (
    copy_warnings,
    duplicate_counts,
    pixel_warnings,
    recorded_again,
    share_and_class_warnings,
)
from beam_tfrecord.write.tally import DIGEST_MODULUS

__all__ = ["merged_summary"]


def _sum_dicts(*dicts: Mapping[str, int]) -> dict[str, int]:
    total: Counter[str] = Counter()
    for d in dicts:
        total.update(d)
    return dict(sorted(total.items()))


def _size_range(a: SizeRange | None, b: SizeRange | None, na: int, nb: int) -> SizeRange | None:
    if a is None or b is None:
        return a or b
    mean = (a.mean * na + b.mean * nb) / max(1, na + nb)
    return SizeRange(min(a.min, b.min), max(a.max, b.max), round(mean, 1))


def _recounted(text: str) -> bool:
    """A warning `_warnings` makes again from the grown dataset's counts."""
    return (
        text.startswith(("split ", "class ", "classes ", "every input was rejected"))
        or "records have the same" in text
        or "objects were annotated," in text
        or "pictures are in none of the declared splits" in text
        or "annotations changed since they were converted" in text
        or text.startswith("the records hold pictures of several kinds")
    )


def _warnings(summary: Summary, earlier: Iterable[str], recounted: Iterable[str] = ()) -> list[str]:
    """The grown dataset's warnings: those about shares, classes, copies and objects from its own
    counts (as write.summary words them; `recounted`: those counted over its side files), the
    runs' others kept."""
    declared = summary.split_method.startswith("declared")  # no fraction was asked of them
    found = share_and_class_warnings(
        summary.splits,
        summary.class_names or [],
        summary.records_per_label,
        summary.records,
        summary.stratified,
        declared,
    )
    if summary.records == 0:
        found.append("every input was rejected: no record was written")
    found += copy_warnings(summary.duplicate_records, summary.cross_split_duplicates)
    found += [w for w in dict.fromkeys(earlier) if not _recounted(w)]
    found += recounted
    # The append's old pictures whose annotations changed (output.append.ANNOTATIONS_CHANGED).
    changed = summary.history[-1].get("annotations_changed") if summary.history else None
    if changed:
        found.append(
            f"{changed} old pictures' annotations changed since they were converted: their records "
            f"keep the objects they had (see {names.CHANGED_SINCE_FILE}; a full run with --overwrite "
            "rebuilds)"
        )
    for section in summary.sections.values():
        found += section.warnings()
    return found + pixel_warnings(summary)


def _is_manifest_warning(text: str) -> bool:
    """The manifest's unmatched rows: the append's run counts them against every indexed file."""
    return "manifest rows name no listed file" in text


def _first_entry(summary: Summary) -> HistoryEntry:
    """The history's line of the run that made a dataset not grown before."""
    run = summary.run
    started = run.started_at if run is not None else None
    return {
        "date": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(started)) if started else None,
        "input": run.input if run is not None else None,
        "inputs": summary.inputs,
        "records": summary.records,
        "rejects": summary.rejects,
    }


def _merged_groups(old: Summary, new: Summary, indexed: Iterable[IndexEntry]) -> GroupSummary:
    """The grown dataset's groups, counted again over the merged index (a group that gained files
    is one group, not two): over the groups the index keeps, as the plans counted them (a
    picture a worker rejected is in its group: found in review, a group pattern's count over the
    records' paths missed it); the files of no group, each its own, are the runs' counts added
    up. Where the index does not hold every run's groups (one written before it kept them): a
    group pattern's over every record's path, a manifest's the runs' counts added up."""
    kept = [e.group for e in indexed if e.group is not None]
    if old.groups.source and len(kept) == old.groups.grouped_files + new.groups.grouped_files:
        return dataclasses.replace(
            old.groups,
            groups=len(set(kept)),
            grouped_files=len(kept),
            without_group=old.groups.without_group + new.groups.without_group,
        )
    group_pattern = old.options.value("group_pattern")
    if old.groups.source == "group_pattern" and group_pattern:
        pattern = re.compile(group_pattern)
        found = [group_of(e.relpath, pattern) for e in indexed if e.split]
        named = [g for g in found if g is not None]
        return dataclasses.replace(
            old.groups,
            groups=len(set(named)),
            grouped_files=len(named),
            without_group=len(found) - len(named),
        )
    return dataclasses.replace(
        old.groups,
        groups=old.groups.groups + new.groups.groups,
        grouped_files=old.groups.grouped_files + new.groups.grouped_files,
        without_group=old.groups.without_group + new.groups.without_group,
    )


def _declared_fraction(old: Summary, new: Summary, name: str) -> float:
    """A declared split's fraction over both runs: the share of the planned pictures it holds,
    as a run over all of them gives it. Each run's fraction is of its own pictures, weighted here
    by its records (exact unless workers rejected pictures: those were planned, not recorded)."""
    a = old.splits[name].fraction if name in old.splits else 0.0
    b = new.splits[name].fraction if name in new.splits else 0.0
    return round(a * old.records + b * new.records, 6) / max(1, old.records + new.records)


def merged_summary(
    old: Summary,
    new: Summary,
    keep: Mapping[str, str],
    move: Mapping[str, str],
    groups: Sequence[DuplicateGroup],
    entry: HistoryEntry,
    indexed: Iterable[IndexEntry] = (),
    unmatched: Sequence[str] = (),
    recounted: Sequence[str] = (),
) -> Summary:
    """The grown dataset's summary: the dataset's (`old`) and the append's run's (`new`) counted
    together, its shards under their new names (`keep`: old name -> new, `move`: the new shards'),
    `groups` the copies of one content over the merged index (`indexed`), `entry` the append's
    line of the history. `unmatched`: a detection dataset's merged entries that name no picture
    (output.grown_files); `recounted`: warnings counted over the merged side files."""
    records = old.records + new.records
    groups_summary = _merged_groups(old, new, indexed)
    # What a hash split draws: each group once, each file of no group once (as write.summary).
    units = groups_summary.groups + groups_summary.without_group if groups_summary.source else records
    declared = old.split_method.startswith("declared")
    splits: dict[str, SplitSummary] = {}
    # The new run's order (the splits asked, or the dataset's declared ones in their order), then
    # any old split it lacks.
    for name in [*new.splits, *(n for n in old.splits if n not in new.splits)]:
        a = old.splits.get(name) or SplitSummary(fraction=new.splits[name].fraction, records=0)
        b = new.splits.get(name) or SplitSummary(fraction=a.fraction, records=0)
        files = sorted({keep.get(f, f) for f in a.files} | {move.get(f, f) for f in b.files})
        fraction = _declared_fraction(old, new, name) if declared else a.fraction
        splits[name] = dataclasses.replace(
            a,
            fraction=fraction,
            records=a.records + b.records,
            share=round((a.records + b.records) / max(1, records), 4),
            expected_deviation=round(expected_deviation(fraction, units), 4),
            labels=_sum_dicts(a.labels, b.labels),
            shards=len(files),
            planned_shards=a.planned_shards + b.planned_shards,
            bytes=a.bytes + b.bytes,
            files=files,
            digest=f"{(int(a.digest or '0', 16) + int(b.digest or '0', 16)) % DIGEST_MODULUS:064x}",
        )
    history = list(old.history or [_first_entry(old)])
    history.append(entry)
    class_names = new.class_names if new.class_names is not None else old.class_names
    grown_as = Grown(tuple(class_names or ()), tuple(unmatched))
    sections = {
        name: section.merged(new.sections[name], grown_as) if name in new.sections else section
        for name, section in old.sections.items()
    }
    sections |= {name: section for name, section in new.sections.items() if name not in sections}
    grown = dataclasses.replace(
        old,
        inputs_listed=old.inputs_listed + new.inputs_listed,
        skipped=old.skipped + new.skipped,
        inputs=old.inputs + new.inputs,
        records=records,
        rejects=old.rejects + new.rejects,
        consistent=old.consistent and new.consistent,
        splits=splits,
        class_names=class_names,
        records_per_label=_sum_dicts(old.records_per_label, new.records_per_label),
        rejects_per_reason=_sum_dicts(old.rejects_per_reason, new.rejects_per_reason),
        reencoded=old.reencoded + new.reencoded,
        changes_per_reason=_sum_dicts(old.changes_per_reason, new.changes_per_reason),
        frames_dropped=old.frames_dropped + new.frames_dropped,
        manifest_rows_without_file=new.manifest_rows_without_file,  # counted against every file
        manifest_rows_without_file_sample=new.manifest_rows_without_file_sample,
        manifest_rows_without_file_list=new.manifest_rows_without_file_list,
        **duplicate_counts(groups),
        groups=groups_summary,
        source_formats=_sum_dicts(old.source_formats, new.source_formats),
        image_height=_size_range(old.image_height, new.image_height, old.records, new.records),
        image_width=_size_range(old.image_width, new.image_width, old.records, new.records),
        full_depth=_sum_dicts(old.full_depth or {}, new.full_depth or {}) or None,
        run=new.run,
        resumed=new.resumed,
        # The first run's settings as this version records them (an earlier version's record
        # takes the defaults of what it lacks).
        options=recorded_again(old.options),
        history=history,
        sections={name: sections[name] for name in KINDS if name in sections},
        # A declared split's source as the append's run found it (a list may have been added).
        split_method=new.split_method
        if declared and new.split_method.startswith("declared")
        else old.split_method,
    )
    earlier = [w for w in old.warnings if not _is_manifest_warning(w)] + new.warnings
    return dataclasses.replace(grown, warnings=_warnings(grown, earlier, recounted))
