"""`--append`: grow a finished dataset with the files it does not hold yet, never reading or
rewriting an old shard or an old picture.

The append converts only the new files, as a run of their own into a work folder under the output
(names.APPEND_DIR: the ordinary pipeline, so resume, dedupe and every check hold), planned with the
dataset's label ids and record hashes (plan.planner.KnownRecords). Then `merge` puts them beside
the old shards:

- every split that grew is renumbered so TFDS's `{split}-{index:05d}-of-{count:05d}` template
  holds one count per split: an old shard gets its new name by a hard link (local: no byte
  copied) or a server-side copy (gs://), a new one is moved out of the work folder;
- the side files, the file index and TFDS's dataset_info.json count old plus new (a detection
  dataset's objects, label map and object files too: write.grown_objects);
- summary.json is replaced last, with a `history` of the runs; then the old names are removed.

While it merges, a marker (names.APPEND_MARKER) names the files not in summary.json yet, so every
reader keeps reading the old dataset whole (write.outputs.complete_summary); a merge killed
anywhere is finished by the next `--append` (`merge` is idempotent).
"""

from __future__ import annotations

import dataclasses
import json
import os
import posixpath
import re
import time
from collections import Counter, defaultdict
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from apache_beam.io.filesystem import CompressionTypes
from apache_beam.io.filesystems import FileSystems

from beam_tfrecord import fault_injection, names
from beam_tfrecord.elements import DuplicateGroup
from beam_tfrecord.plan.annotations.label_map import is_unused
from beam_tfrecord.plan.listing import InputFile
from beam_tfrecord.plan.splits import expected_deviation, group_of
from beam_tfrecord.write import grown_objects
from beam_tfrecord.write.file_index import IndexEntry, load_index, write_index
from beam_tfrecord.write.side_files import write_text
from beam_tfrecord.write.summary import (
    SHARE_WARNING,
    GroupSummary,
    RunOptions,
    SizeRange,
    SplitSummary,
    Summary,
    duplicate_counts,
)
from beam_tfrecord.write.tally import DIGEST_MODULUS
from beam_tfrecord.write.tfds_metadata import write_tfds_metadata
from beam_tfrecord.write_failures import writing

__all__ = [
    "UNCHECKED_OPTIONS",
    "ListingDelta",
    "compare_listing",
    "marker_names",
    "merge",
    "option_differences",
    "work_dir",
]

# Options that may differ from the first run's: where files come from and go (the annotations
# too: a new folder has its own), how the shards are cut and read, dedupe (which decides what is
# kept, not what a record looks like) and whether a poor annotation match may go on (a warning).
# A detection append checks at plan time what those may change: each old class id keeps its
# class, and splits the dataset declared stay declared (`declared_splits` is compared there, as
# the split the plan makes, not as the option: a dataset that declares none hashes either way).
UNCHECKED_OPTIONS = frozenset(
    {
        "input",
        "output",
        "sink",
        "num_shards",
        "shard_size_mb",
        "read_threads",
        "dedupe",
        "gcs",
        "annotations_path",
        "allow_unmatched_annotations",
        "declared_splits",
    }
)


def work_dir(output: str) -> str:
    """Where an append converts its new files, under the output."""
    return FileSystems.join(output, names.APPEND_DIR)


def option_differences(first: RunOptions, now: RunOptions) -> list[str]:
    """One phrase per option that shapes a record (or a split) and differs from the dataset's
    first run's, e.g. `--resize is 64x64, the dataset's is None`."""
    old, new = first.to_json(), now.to_json()
    found = []
    for key in sorted(set(old) | set(new)):
        if key not in UNCHECKED_OPTIONS and old.get(key) != new.get(key):
            found.append(f"--{key} is {new.get(key)!r}, the dataset's {old.get(key)!r}")
    return found


@dataclass(frozen=True)
class ListingDelta:
    """The listing against the file index: files to convert, and converted ones since changed
    (size or modification time) or gone, which an append never converts again."""

    new: list[InputFile]
    changed: list[tuple[IndexEntry, InputFile]]
    gone: list[IndexEntry]
    converted: int  # listed files the index holds, unchanged

    def lines(self) -> list[str]:
        """changed_since_converted.jsonl's lines: what changed, then what is gone, by path."""
        out = [
            json.dumps(
                {
                    "path": old.relpath,
                    "change": "changed",
                    "size": [old.size, now.size],
                    "mtime": [old.mtime, now.mtime],
                    "split": old.split,
                },
                ensure_ascii=False,
            )
            for old, now in self.changed
        ]
        out += [
            json.dumps({"path": old.relpath, "change": "gone", "split": old.split}, ensure_ascii=False)
            for old in self.gone
        ]
        return out


def compare_listing(
    listing: Sequence[InputFile], index: Sequence[IndexEntry], same_input: bool
) -> ListingDelta:
    """Which listed files are new, by relpath, size and mtime alone (no byte read). `gone` is
    only looked for when the append lists the dataset's own input (another folder holds only
    some of it)."""
    known = {entry.relpath: entry for entry in index}
    new, changed = [], []
    converted = 0
    for file in listing:
        entry = known.get(file.relpath)
        if entry is None:
            new.append(file)
        elif entry.size != file.size or entry.mtime != file.mtime:
            changed.append((entry, file))
        else:
            converted += 1
    gone: list[IndexEntry] = []
    if same_input:
        listed = {f.relpath for f in listing}
        gone = [entry for entry in index if entry.relpath not in listed]
    return ListingDelta(new, changed, gone, converted)


def marker_names(output: str) -> set[str] | None:
    """File names an append under way has put beside the dataset (summary.json does not list
    them yet), or None when no append is under way."""
    path = FileSystems.join(output, names.APPEND_MARKER)
    try:
        with FileSystems.open(path, compression_type=CompressionTypes.UNCOMPRESSED) as handle:
            return set(json.loads(handle.read().decode("utf-8"))["extra"])
    except Exception:
        if FileSystems.exists(path):
            raise
        return None


def _write_json(path: str, data: Any) -> None:
    write_text(path, json.dumps(data, ensure_ascii=False))


def _read_text(path: str) -> str:
    if not FileSystems.exists(path):
        return ""
    with FileSystems.open(path, compression_type=CompressionTypes.UNCOMPRESSED) as handle:
        return handle.read().decode("utf-8")


def _lines(path: str) -> list[str]:
    return [line for line in _read_text(path).splitlines() if line]


def _shard_lengths(folder: str, summary: Summary) -> dict[str, int]:
    """Records per shard file name, from TFDS's dataset_info.json (no shard read)."""
    text = _read_text(FileSystems.join(folder, names.TFDS_INFO_FILE))
    if not text:
        return {}
    lengths = {}
    for split in json.loads(text).get("splits", []):
        files = sorted(summary.splits[split["name"]].files) if split["name"] in summary.splits else []
        for name, length in zip(files, split.get("shardLengths", []), strict=False):
            lengths[name] = int(length)
    return lengths


def _renames(old: Summary, new: Summary, compression: str) -> tuple[dict[str, str], dict[str, str]]:
    """(old name -> its name in the grown dataset, new name in the work folder -> its name)."""
    keep, move = {}, {}
    for split, added in new.splits.items():
        if not added.files:
            continue
        before = sorted(old.splits[split].files) if split in old.splits else []
        count = len(before) + len(added.files)
        for i, name in enumerate(before):
            keep[name] = names.shard_name(split, i, count, compression)
        for j, name in enumerate(sorted(added.files)):
            move[name] = names.shard_name(split, len(before) + j, count, compression)
    return keep, move


def _link(source: str, target: str) -> None:
    """`target` names the bytes of `source`: a hard link where local, a server-side copy on GCS."""
    if FileSystems.exists(target):
        return
    if "://" not in source:
        os.link(source, target)
    else:
        FileSystems.copy([source], [target])


def _move(source: str, target: str) -> None:
    if FileSystems.exists(source) and not FileSystems.exists(target):
        FileSystems.rename([source], [target])


def _sum_dicts(*dicts: Mapping[str, int]) -> dict[str, int]:
    total: Counter = Counter()
    for d in dicts:
        total.update(d)
    return dict(sorted(total.items()))


def _size_range(a: SizeRange | None, b: SizeRange | None, na: int, nb: int) -> SizeRange | None:
    if a is None or b is None:
        return a or b
    mean = (a.mean * na + b.mean * nb) / max(1, na + nb)
    return SizeRange(min(a.min, b.min), max(a.max, b.max), round(mean, 1))


def _duplicates(entries: Iterable[IndexEntry]) -> list[DuplicateGroup]:
    by_hash: dict[str, list[tuple[str, str]]] = defaultdict(list)
    for e in entries:
        if e.sha256 is not None and e.split is not None:
            by_hash[e.sha256].append((e.relpath, e.split))
    return sorted(DuplicateGroup(h, tuple(sorted(c))) for h, c in by_hash.items() if len(c) > 1)


def _recounted(text: str) -> bool:
    """A warning `_warnings` makes again from the grown dataset's counts."""
    return (
        text.startswith(("split ", "class ", "every input was rejected"))
        or "records have the same" in text
        or "objects were annotated," in text
        or "pictures are in none of the declared splits" in text
    )


def _warnings(summary: Summary, earlier: Iterable[str], recounted: Iterable[str] = ()) -> list[str]:
    """The grown dataset's warnings: those about shares, classes, copies and objects from its own
    counts (as write.summary words them; `recounted`: those counted over its side files), the
    runs' others kept."""
    found = []
    splits = summary.splits
    declared = summary.split_method.startswith("declared")  # no fraction was asked of them
    if not summary.stratified and not declared and len(splits) > 1 and summary.records:
        name, split = max(splits.items(), key=lambda item: abs(item[1].share - item[1].fraction))
        if abs(split.share - split.fraction) > SHARE_WARNING:
            found.append(
                f"split {name} holds {split.share:.1%} of records, not the {split.fraction:.1%} asked: "
                f"hash splits are off by up to ±{split.expected_deviation:.1%} at this size "
                "(and never move a file when files are added); stratify gives exact shares"
            )
    for label in summary.class_names or []:
        if not summary.records_per_label.get(label) and not is_unused(label):  # a label map's gap
            found.append(f"class {label!r} has no valid image")
    if summary.records == 0:
        found.append("every input was rejected: no record was written")
    if summary.duplicate_records:
        found.append(
            f"{summary.duplicate_records} records have the same image bytes as another record "
            f"(see {names.DUPLICATES_FILE})"
        )
    if summary.cross_split_duplicates:
        found.append(
            f"{summary.cross_split_duplicates} records have the same bytes as a record in another "
            f"split: the splits leak (see {names.DUPLICATES_FILE}; dedupe keeps one copy)"
        )
    found += [w for w in dict.fromkeys(earlier) if not _recounted(w)]
    found += recounted
    objects = summary.objects
    if objects is not None and not objects.consistent:
        found.append(
            f"{objects.annotated} objects were annotated, {objects.stored} stored and {objects.dropped} "
            "dropped: some object is unaccounted for"
        )
    return found


def _is_manifest_warning(text: str) -> bool:
    """The manifest's unmatched rows: the append's run counts them against every indexed file."""
    return "manifest rows name no listed file" in text


def _history_entry(summary: Summary, when: float | None, **more: Any) -> dict[str, Any]:
    run = summary.run
    started = when if when is not None else (run.started_at if run is not None else None)
    return {
        "date": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(started)) if started else None,
        "input": run.input if run is not None else None,
        "inputs": summary.inputs,
        "records": summary.records,
        "rejects": summary.rejects,
        **more,
    }


def _merged_groups(old: Summary, new: Summary, indexed: Iterable[IndexEntry]) -> GroupSummary:
    """The grown dataset's groups: with a group pattern, counted again over every record of the
    merged index (a group that gained files is one group, not two); a manifest's groups, which the
    index does not hold, are the runs' counts added up."""
    source = old.options.source
    if old.groups.source == "group_pattern" and source is not None and source.group_pattern:
        pattern = re.compile(source.group_pattern)
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


def _merged_summary(
    old: Summary,
    new: Summary,
    keep: Mapping[str, str],
    move: Mapping[str, str],
    groups: Sequence[DuplicateGroup],
    entry: dict[str, Any],
    indexed: Iterable[IndexEntry] = (),
    unmatched: Sequence[str] = (),
    recounted: Sequence[str] = (),
) -> Summary:
    """`unmatched`: a detection dataset's merged entries that name no picture
    (write.grown_objects); `recounted`: warnings counted over the merged side files."""
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
    history = list(old.history or [_history_entry(old, None)])
    history.append(entry)
    class_names = new.class_names if new.class_names is not None else old.class_names
    objects = old.objects
    if objects is not None:
        objects = grown_objects.merged_objects(objects, new.objects, class_names or (), unmatched)
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
        run=new.run,
        resumed=new.resumed,
        history=history,
        objects=objects,
        # A declared split's source as the append's run found it (a list may have been added).
        split_method=new.split_method
        if declared and new.split_method.startswith("declared")
        else old.split_method,
    )
    earlier = [w for w in old.warnings if not _is_manifest_warning(w)] + new.warnings
    return dataclasses.replace(grown, warnings=_warnings(grown, earlier, recounted))


def merge(
    output: str, old: Summary, new: Summary, delta_lines: Sequence[str], entry: dict[str, Any]
) -> Summary:
    """Put the work folder's finished run (`new`) beside the dataset (`old`, its summary as it
    stands) and replace summary.json last; returns the grown dataset's summary. `delta_lines`
    are changed_since_converted.jsonl's lines, `entry` this run's line of the history.

    Idempotent: a merge killed anywhere is finished by calling it again with the same arguments
    (each link or move is skipped where already done; summary.json is replaced at one point)."""
    work = work_dir(output)
    compression = old.compression
    keep, move = _renames(old, new, compression)
    extra = [*keep, *keep.values(), *move.values()]
    extra += [names.index_path(n) for n in extra]
    _write_json(FileSystems.join(output, names.APPEND_MARKER), {"extra": sorted(set(extra))})
    for name, target in keep.items():
        if name != target:
            _link(FileSystems.join(output, name), FileSystems.join(output, target))
            if FileSystems.exists(FileSystems.join(output, names.index_path(name))):
                _link(
                    FileSystems.join(output, names.index_path(name)),
                    FileSystems.join(output, names.index_path(target)),
                )
    for name, target in move.items():
        _move(
            FileSystems.join(work, names.index_path(name)), FileSystems.join(output, names.index_path(target))
        )
        _move(FileSystems.join(work, name), FileSystems.join(output, target))
    fault_injection.pause_point("append_linked")
    lengths = {keep.get(n, n): v for n, v in _shard_lengths(output, old).items()}
    lengths.update({move.get(n, n): v for n, v in _shard_lengths(work, new).items()})
    old_index = load_index(output) or []
    new_index = load_index(work) or []
    index = {e.relpath: e for e in old_index}
    index.update({e.relpath: e for e in new_index})
    groups = _duplicates(index.values())
    merged_lines = {
        name: sorted(set(_lines(FileSystems.join(output, name))) | set(_lines(FileSystems.join(work, name))))
        for name in (names.REJECTS_FILE, names.CHANGES_FILE)
    }
    unmatched: list[str] = []
    recounted: list[str] = []
    if old.objects is not None:  # a detection dataset's dropped objects and unmatched entries
        unmatched = grown_objects.merge_object_files(output, work, (e.relpath for e in new_index))
        found = grown_objects.undeclared_warning(merged_lines[names.REJECTS_FILE])
        recounted = [found] if found else []
    summary = _merged_summary(old, new, keep, move, groups, entry, index.values(), unmatched, recounted)
    if summary.class_names is not None:
        write_text(
            FileSystems.join(output, names.LABELS_FILE), "".join(f"{c}\n" for c in summary.class_names)
        )
        if summary.objects is not None:
            grown_objects.write_label_map(output, summary.class_names)
    for name, lines in merged_lines.items():
        write_text(FileSystems.join(output, name), "".join(f"{line}\n" for line in lines))
    write_text(FileSystems.join(output, names.DUPLICATES_FILE), "".join(g.to_json() + "\n" for g in groups))
    write_text(
        FileSystems.join(output, names.CHANGED_SINCE_FILE), "".join(f"{line}\n" for line in delta_lines)
    )
    write_index(output, index.values())
    unmatched_path = FileSystems.join(output, names.MANIFEST_UNMATCHED_FILE)
    unmatched = _read_text(FileSystems.join(work, names.MANIFEST_UNMATCHED_FILE))
    if unmatched:  # the append's run matched the manifest against every indexed file too
        write_text(unmatched_path, unmatched)
    elif FileSystems.exists(unmatched_path):
        FileSystems.delete([unmatched_path])
    if summary.tfds_metadata is not None and summary.tfds_metadata.written:
        with writing(FileSystems.join(output, names.TFDS_INFO_FILE)):
            summary = dataclasses.replace(
                summary, tfds_metadata=write_tfds_metadata(output, summary, lengths)
            )
    fault_injection.pause_point("append_metadata")
    temp = FileSystems.join(output, names.SUMMARY_TEMP_FILE)
    write_text(temp, summary.to_text())
    with writing(FileSystems.join(output, names.SUMMARY_FILE)):
        FileSystems.rename([temp], [FileSystems.join(output, names.SUMMARY_FILE)])
    finish(output)
    return summary


def finish(output: str) -> None:
    """After summary.json names the grown dataset: remove the old names no longer listed, the
    work folder, then the marker."""
    from beam_tfrecord.write.outputs import existing_outputs
    from beam_tfrecord.write.summary import read_summary

    summary = read_summary(output)
    listed = {n for s in summary.splits.values() for n in s.files}
    stale = []
    for path in existing_outputs(output):
        name = posixpath.basename(path)
        shard = name[: -len(names.INDEX_SUFFIX)] if names.is_index_name(name) else name
        if names.is_shard_name(shard) and shard not in listed:
            stale.append(path)
    if stale:
        FileSystems.delete(stale)
    work = work_dir(output)
    if "://" not in work:
        import shutil

        shutil.rmtree(work, ignore_errors=True)
    else:
        (found,) = FileSystems.match([work + "/**"])
        if found.metadata_list:
            FileSystems.delete([m.path for m in found.metadata_list])
    marker = FileSystems.join(output, names.APPEND_MARKER)
    if FileSystems.exists(marker):
        FileSystems.delete([marker])
