"""The names of everything a run writes, in one place: shards and their indexes, the side files
beside them, the temporary folder and the staged plan inside it. Writers, readers, the output
guard and the tests all take names from here, so a name is changed once.

An output folder after a run:

    {split}-{index:05d}-of-{count:05d}.tfrecord[.gz]   the shards (TFDS's and Beam's naming), or
    {split}-{index:05d}-of-{count:05d}.array_record    with --file_format array_record
    {shard}.idx                                       offsets of an uncompressed shard's records
    labels.txt, rejects.jsonl, changes.jsonl, duplicates.jsonl, manifest_rows_without_file.txt
    label_map.pbtxt, dropped_objects.jsonl, annotations_without_image.jsonl   (detection runs)
    dataset_info.json, features.json, *.labels.txt    TFDS's metadata
    summary.json                                      last: the completeness marker
    contact_sheet.png, label_histogram.png            drawn by `python -m pipelines.inspect`

and while it runs, `.temp-beam-tfrecord-<run id>/` (the staged plan under `plan/`, the paths
sink's temporary shards beside it) or Beam's `beam-temp-*` (the beam sink), and the run's claim
on the folder, `.beam-tfrecord-claim.json` (output.claim): neither an output nor temporary.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

__all__ = [
    "ANNOTATIONS_UNMATCHED_FILE",
    "APPEND_DIR",
    "APPEND_MARKER",
    "ARRAY_RECORD",
    "BEAM_TEMP_PREFIX",
    "CHANGED_SINCE_FILE",
    "CHANGES_FILE",
    "CLAIM_FILE",
    "CONTACT_SHEET_FILE",
    "DROPPED_OBJECTS_FILE",
    "DUPLICATES_FILE",
    "FILE_FORMATS",
    "HISTOGRAM_FILE",
    "INDEX_FILE",
    "INDEX_SUFFIX",
    "LABELS_FILE",
    "LABEL_MAP_FILE",
    "MANIFEST_UNMATCHED_FILE",
    "METADATA_FILES",
    "PLAN_DIR",
    "PLAN_DONE_DIR",
    "PLAN_DROPPED_OBJECTS_FILE",
    "PLAN_FACTS_FILE",
    "PLAN_LISTING_FILE",
    "PLAN_REJECTS_FILE",
    "PLAN_RUN_FILE",
    "PLAN_SHARD_TASKS_DIR",
    "PLAN_UNMATCHED_FILE",
    "REJECTS_FILE",
    "SHARD_NAME",
    "SHARD_TEMPLATE",
    "SUMMARY_FILE",
    "SUMMARY_TEMP_FILE",
    "TEMP_PREFIX",
    "TEMP_PREFIXES",
    "TFDS_FEATURES_FILE",
    "TFDS_FILES",
    "TFDS_INFO_FILE",
    "TFRECORD",
    "ShardFormat",
    "index_path",
    "is_array_record",
    "is_index_name",
    "is_shard_name",
    "shard_format_of",
    "shard_name",
    "shard_task_file_name",
]

# Shards: `train-00003-of-00010.tfrecord`, Beam's WriteToTFRecord template and TFDS's
# `{SPLIT}-{SHARD_X_OF_Y}.{FILEFORMAT}` alike.
SHARD_TEMPLATE = "-SSSSS-of-NNNNN"
SHARD_NAME = re.compile(
    r"^(?P<split>[a-z0-9_]+)-(?P<index>\d{5})-of-(?P<count>\d{5})\.(?P<suffix>tfrecord(\.gz)?|array_record)$"
)
# The containers a shard may be, by TFDS's names for them: TFRecord (read front to back) or
# ArrayRecord (random access: Grain's and TFDS's data sources).
FILE_FORMATS = ("tfrecord", "array_record")
# A shard's index beside it, DALI's tfrecord2idx format (as DALI's examples name it).
INDEX_SUFFIX = ".idx"

LABELS_FILE = "labels.txt"  # class names in id order
REJECTS_FILE = "rejects.jsonl"  # one line per rejected or skipped input
CHANGES_FILE = "changes.jsonl"  # one line per record stored unlike its file
DUPLICATES_FILE = "duplicates.jsonl"  # one line per group of records with identical source bytes
MANIFEST_UNMATCHED_FILE = "manifest_rows_without_file.txt"  # one manifest key per line
# A detection run's: the Object Detection API's label map (ids from 1), one line per annotated
# object in no record, and one per annotation entry that names no listed image.
LABEL_MAP_FILE = "label_map.pbtxt"
DROPPED_OBJECTS_FILE = "dropped_objects.jsonl"
ANNOTATIONS_UNMATCHED_FILE = "annotations_without_image.jsonl"
SUMMARY_FILE = "summary.json"
TFDS_INFO_FILE = "dataset_info.json"
TFDS_FEATURES_FILE = "features.json"
# Every file TFDS's writer may put in the output folder (a ClassLabel's names go to
# `<feature path with - for />.labels.txt`), so an overwrite clears an earlier run's.
TFDS_FILES = (
    TFDS_INFO_FILE,
    TFDS_FEATURES_FILE,
    "image-class-label.labels.txt",
    "label.labels.txt",
    "image-object-class-label.labels.txt",
)
# Kept with the dataset for `--append` (output.file_index, output.append): every listed file's
# relpath, size, mtime, sha256 and split, written by the metadata step before summary.json; an
# append's files converted since the dataset was made, but changed or gone; the append's work folder
# (its new files converted as a run of their own) and its marker, present while it merges.
INDEX_FILE = "index/files.jsonl"
CHANGED_SINCE_FILE = "changed_since_converted.jsonl"
APPEND_DIR = ".beam-tfrecord-append"
APPEND_MARKER = ".beam-tfrecord-append.json"
PLAN_LISTING_FILE = "listing.jsonl"  # the run's listing, staged for the index

CONTACT_SHEET_FILE = "contact_sheet.png"
HISTOGRAM_FILE = "label_histogram.png"
METADATA_FILES = (
    LABELS_FILE,
    REJECTS_FILE,
    CHANGES_FILE,
    SUMMARY_FILE,
    DUPLICATES_FILE,
    MANIFEST_UNMATCHED_FILE,
    LABEL_MAP_FILE,
    DROPPED_OBJECTS_FILE,
    ANNOTATIONS_UNMATCHED_FILE,
    CHANGED_SINCE_FILE,
    *TFDS_FILES,
    CONTACT_SHEET_FILE,
    HISTOGRAM_FILE,
)

# A run's temporary folder (its staged plan and the paths sink's shards), and Beam's
# WriteToTFRecord's; summary.json is written under a temporary name and renamed.
TEMP_PREFIX = ".temp-beam-tfrecord-"
BEAM_TEMP_PREFIX = "beam-temp-"
TEMP_PREFIXES = (TEMP_PREFIX, BEAM_TEMP_PREFIX)
SUMMARY_TEMP_FILE = f"{TEMP_PREFIX}{SUMMARY_FILE}"

# One run at a time per output (output.claim): created before anything there is touched, removed
# at the end. Matches no temporary prefix, so no run sweeps a live run's claim.
CLAIM_FILE = ".beam-tfrecord-claim.json"

# The staged plan, under the temporary folder: PLAN_DIR/{facts.json, rejects.jsonl, shards/*.json}.
PLAN_DIR = "plan"
PLAN_FACTS_FILE = "facts.json"
PLAN_REJECTS_FILE = "rejects.jsonl"  # rejects known from the listing
PLAN_SHARD_TASKS_DIR = "shards"  # one ShardTask per file
PLAN_RUN_FILE = "run.json"  # the plan's fingerprint: a rerun of the same plan resumes it
PLAN_DONE_DIR = "done"  # a finished shard task's two files (output.resume), beside the plan
PLAN_DROPPED_OBJECTS_FILE = DROPPED_OBJECTS_FILE  # objects dropped while planning
PLAN_UNMATCHED_FILE = ANNOTATIONS_UNMATCHED_FILE


@dataclass(frozen=True)
class ShardFormat:
    """What a shard file is: its container (`file_format`) and, for TFRecord, its compression.
    Its name's suffix and whether an `.idx` goes beside it follow from these two, in one place."""

    file_format: str = "tfrecord"
    compression: str = "none"  # "none" or "gzip" (TFRecord only: ArrayRecord compresses inside)

    @property
    def suffix(self) -> str:
        if self.file_format == "array_record":
            return ".array_record"
        return ".tfrecord.gz" if self.compression == "gzip" else ".tfrecord"

    @property
    def indexed(self) -> bool:
        """An uncompressed TFRecord shard gets an `.idx`; ArrayRecord is its own index, and
        offsets into a gzip stream cannot be seeked to."""
        return self.file_format == "tfrecord" and self.compression == "none"


TFRECORD = ShardFormat()
ARRAY_RECORD = ShardFormat("array_record")


def shard_format_of(name: str) -> ShardFormat | None:
    """The format a shard's file name says (None: not a shard's name)."""
    match = SHARD_NAME.match(name)
    if match is None:
        return None
    suffix = match["suffix"]
    if suffix == "array_record":
        return ARRAY_RECORD
    return ShardFormat("tfrecord", "gzip" if suffix.endswith(".gz") else "none")


def is_array_record(path: str) -> bool:
    """A shard (or its path) in ArrayRecord, which its own package reads, not TFRecord's framing."""
    return path.endswith(ARRAY_RECORD.suffix)


def shard_name(split: str, index: int, count: int, shard_format: ShardFormat = TFRECORD) -> str:
    return f"{split}-{index:05d}-of-{count:05d}{shard_format.suffix}"


def is_shard_name(name: str) -> bool:
    return SHARD_NAME.match(name) is not None


def index_path(shard_path: str) -> str:
    """Where a shard's index lives: beside it, its name plus `.idx`."""
    return shard_path + INDEX_SUFFIX


def is_index_name(name: str) -> bool:
    """A shard's `.idx` file (`train-00000-of-00002.tfrecord.idx`), never a shard itself."""
    return name.endswith(INDEX_SUFFIX) and is_shard_name(name[: -len(INDEX_SUFFIX)])


def shard_task_file_name(split: str, index: int) -> str:
    """A staged shard task's file under PLAN_SHARD_TASKS_DIR: name order is split, then shard order."""
    return f"{split}-{index:05d}.json"
