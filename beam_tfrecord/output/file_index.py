"""The dataset's file index (names.INDEX_FILE): one line per listed input of every run that made
the dataset, `[relpath, size, mtime, sha256, split]` (sha256 and split null for a reject), then,
only where they say something, `input` (which input the file was listed in: the position in
summary.json's `history` of the first run that listed it; absent: the first run's), `group`
(the file's split group, from `--group_pattern` or a manifest's `group` column, for a run that
has groups) and its objects digest (a detection record's: the digest of the objects it was made
from, plan.annotations.growing.objects_digest_of; an append lists an old picture whose
annotations have another digest now); sorted by relpath.

Why: `--append` (output.append) tells new files from converted ones by the listing alone (path,
size, modification time) against this index, and finds copies of old records by their sha256,
without reading an old shard or an old picture. The metadata step writes it before summary.json,
from the listing staged with the plan (`stage_listing`) and the records' content hashes the
pipeline already gathers for duplicates.jsonl. About 120 bytes a file: 1,000,000 files, 120 MB.

`input` tells a camera's `IMG_0001.jpg` of one day's folder from another day's (each is its own
file; an append compares a listing only with its own input's entries); `group` keeps the
group -> split map with the dataset, so the merged groups are counted over the index, rejected
files included, as the plan counts them.
"""

from __future__ import annotations

import io
import json
import sys
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass

from apache_beam.io.filesystem import CompressionTypes
from apache_beam.io.filesystems import FileSystems

from beam_tfrecord.edges import Json
from beam_tfrecord.names import INDEX_FILE, PLAN_LISTING_FILE
from beam_tfrecord.plan import bulk
from beam_tfrecord.plan.listing import InputFile
from beam_tfrecord.write_failures import writing

__all__ = ["IndexEntry", "index_entries", "load_index", "remove_index", "stage_listing", "write_index"]

# json.dumps(row, ensure_ascii=False) builds an encoder per call: one encoder, the same text, a
# third less time for an index's 10,000 lines.
_ENCODE = json.JSONEncoder(ensure_ascii=False).encode


@dataclass(frozen=True, slots=True)
class IndexEntry:
    """One converted input: where it was, what it was, and where its record went (if any)."""

    relpath: str
    size: int
    mtime: float
    sha256: str | None = None  # None: the input became a reject, not a record
    split: str | None = None
    input: int = 0  # which input it was listed in (output.append.input_number); 0: the first run's
    group: str | None = None  # its split group (group pattern or manifest column), where it has one
    objects_digest: str | None = None  # a detection record's; None: none (or an older index)

    def to_json(self) -> str:
        row: list[Json] = [self.relpath, self.size, self.mtime, self.sha256, self.split]
        more = self.objects_digest is not None
        if self.input or self.group is not None or more:  # absent where they say nothing: compact
            row.append(self.input)
        if self.group is not None or more:
            row.append(self.group)
        if more:
            row.append(self.objects_digest)
        return _ENCODE(row)

    @classmethod
    def from_json(cls, line: str) -> IndexEntry:
        relpath, size, mtime, sha256, split, *more = json.loads(line)
        number = int(more[0]) if more else 0
        group = more[1] if len(more) > 1 else None
        objects_digest = more[2] if len(more) > 2 else None  # an index written before: none
        # A few split names (and groups) for a million entries: one string each, not one per entry.
        return cls(
            relpath,
            int(size),
            float(mtime),
            sha256,
            sys.intern(split) if split else None,
            number,
            sys.intern(group) if group is not None else None,
            objects_digest,
        )

    @property
    def key(self) -> tuple[str, int]:
        """What names an entry in the index: its path within its input (two inputs may each hold
        an `IMG_0001.jpg`, two pictures)."""
        return self.relpath, self.input


def _write_lines(path: str, lines: Iterable[str], batch: int = 4096) -> None:
    """The lines written `batch` at a time: one write call a line slowed an append's merge
    (benchmarks/NOTES.md#append); the text is never held whole (1,000,000 entries: 120 MB)."""
    with writing(path), FileSystems.create(path, compression_type=CompressionTypes.UNCOMPRESSED) as handle:
        chunk: list[str] = []
        for line in lines:
            chunk.append(line)
            if len(chunk) == batch:
                handle.write(("\n".join(chunk) + "\n").encode("utf-8"))
                chunk.clear()
        if chunk:
            handle.write(("\n".join(chunk) + "\n").encode("utf-8"))


def _read_lines(path: str) -> Iterator[str]:
    """The file's lines, streamed (1,000,000 entries: never 128 MB of text held twice)."""
    with FileSystems.open(path, compression_type=CompressionTypes.UNCOMPRESSED) as handle:
        for raw in io.TextIOWrapper(handle, encoding="utf-8"):
            if raw.strip():
                yield raw


def stage_listing(
    plan_dir: str,
    listing: Sequence[InputFile],
    groups: Mapping[str, str] | None = None,
    objects_digests: Mapping[str, str] | None = None,
) -> None:
    """The run's listing (relpath, size, mtime, the file's split group where `groups` has one
    and its objects digest where `objects_digests` has one) beside its staged plan, for the
    metadata step."""
    groups = groups or {}
    objects_digests = objects_digests or {}

    def row(f: InputFile) -> list[Json]:
        group, digest = groups.get(f.relpath), objects_digests.get(f.relpath)
        if digest is not None:
            return [f.relpath, f.size, f.mtime, group, digest]
        return [f.relpath, f.size, f.mtime] if group is None else [f.relpath, f.size, f.mtime, group]

    _write_lines(
        FileSystems.join(plan_dir, PLAN_LISTING_FILE),
        (_ENCODE(row(f)) for f in listing),
    )


def index_entries(plan_dir: str, contents: Iterable[tuple[str, tuple[str, str]]]) -> list[IndexEntry] | None:
    """The staged listing joined with the records' `(sha256, (relpath, split))` content keys (an
    objects digest kept only where the file became a record); None for a plan staged by an
    older version (a resumed run): no index, never an empty one, which would make an `--append`
    take every file for new and convert it twice."""
    records = {relpath: (sha256, split) for sha256, (relpath, split) in contents}
    path = FileSystems.join(plan_dir, PLAN_LISTING_FILE)
    if not FileSystems.exists(path):
        return None
    entries = []
    for line in _read_lines(path):
        relpath, size, mtime, *more = json.loads(line)
        sha256, split = records.get(relpath, (None, None))
        group = more[0] if more else None
        digest = more[1] if len(more) > 1 and sha256 is not None else None
        entries.append(IndexEntry(relpath, int(size), float(mtime), sha256, split, 0, group, digest))
    return sorted(entries, key=lambda e: e.key)


def write_index(output: str, entries: Iterable[IndexEntry]) -> None:
    """INDEX_FILE under `output`, sorted by relpath (then input)."""
    _write_lines(
        FileSystems.join(output, INDEX_FILE), (e.to_json() for e in sorted(entries, key=lambda e: e.key))
    )


def remove_index(output: str) -> None:
    """INDEX_FILE under `output` gone, if there."""
    path = FileSystems.join(output, INDEX_FILE)
    if FileSystems.exists(path):
        FileSystems.delete([path])


def load_index(output: str) -> list[IndexEntry] | None:
    """The dataset's index, or None where it has none (made before the index existed).

    Its entries hold no reference cycle, so the cycle collector is paused while they are made
    (plan.bulk): otherwise the first load in the command's process pays a full collection of
    the heap its imports built, most of the load's time (benchmarks/NOTES.md#append)."""
    path = FileSystems.join(output, INDEX_FILE)
    if not FileSystems.exists(path):
        return None
    with bulk.cycles_paused():
        return [IndexEntry.from_json(line) for line in _read_lines(path)]
