"""Guarding the output directory: an earlier run's shards are never mixed with a new run's.

summary.json is the completeness marker: it is written last (atomically) and lists every shard
file of the run. A reader that finds no summary.json, or shard files it does not list, is
looking at an interrupted or foreign run; `complete_shards` does that check.
"""

from __future__ import annotations

import logging
import os
import posixpath

from apache_beam.io.filesystems import FileSystems

from beam_tfrecord import gcs, names, storage
from beam_tfrecord.config_base import ConfigError
from beam_tfrecord.edges import JsonObject
from beam_tfrecord.names import METADATA_FILES, SUMMARY_FILE, TEMP_PREFIXES
from beam_tfrecord.summary import Summary, SummaryError, read_summary

_LOGGER = logging.getLogger(__name__)

__all__ = [
    "IncompleteOutput",
    "OutputInUse",
    "append_marker",
    "clear_append",
    "clear_outputs",
    "clear_temp",
    "complete_shards",
    "complete_summary",
    "existing_outputs",
    "leftover_temp",
    "prepare_output",
    "unfinished_message",
]


class IncompleteOutput(Exception):
    """The output directory does not hold one complete run."""


class OutputInUse(ConfigError):
    """The output already holds an earlier run's files and no one said to replace them (the
    `overwrite` argument of `prepare_output` and `pipeline.prepare`)."""


def prepare_output(output: str, overwrite: bool = False) -> None:
    """Refuse to mix runs: shards already in `output` need `overwrite`, which removes them first
    (summary.json first); temporary files of interrupted runs are removed in any case.

    A gs:// output is probed for writes before anything is deleted (gcs.check_writable)."""
    existing = existing_outputs(output)
    if existing and not overwrite:
        found_names = {posixpath.basename(p) for p in existing}
        what = "an earlier run" if SUMMARY_FILE in found_names else "an interrupted run (no summary.json)"
        raise OutputInUse(
            "output",
            f"{output} already holds {len(existing)} files of {what} "
            f"(e.g. {posixpath.basename(existing[0])})",
        )
    gcs.check_writable("output", output)
    clear_outputs(existing)
    clear_append(output)
    for leftover in clear_temp(output):
        _LOGGER.info("removed %s, left by an interrupted run", leftover)


def existing_outputs(output: str) -> list[str]:
    """Paths of shards, their `.idx` files and metadata files of an earlier run directly under
    `output` (never a run's claim, names.CLAIM_FILE: a live run's is not to be cleared)."""
    try:
        (result,) = FileSystems.match([FileSystems.join(output, "*")])
    except Exception as error:
        if not storage.is_gcs(output):
            raise
        raise gcs.StorageError.of("output", output, error) from None
    found = []
    for metadata in result.metadata_list:
        name = posixpath.basename(metadata.path)
        if names.is_shard_name(name) or names.is_index_name(name) or name in METADATA_FILES:
            found.append(metadata.path)
    return sorted(found)


def clear_append(output: str) -> None:
    """What a killed `--append` left (output.append): its marker first (then nothing excuses files
    that summary.json does not list), then its work folder. A run replacing the dataset clears it."""
    storage.delete([FileSystems.join(output, names.APPEND_MARKER)], missing_ok=True)
    work = FileSystems.join(output, names.APPEND_DIR)
    (found,) = FileSystems.match([work + "/**"])
    if found.metadata_list:
        FileSystems.delete([m.path for m in found.metadata_list])
    if storage.is_folder(work, if_remote=False):  # the emptied local folders (GCS has none)
        import shutil

        shutil.rmtree(work, ignore_errors=True)


def clear_outputs(paths: list[str]) -> None:
    """Delete an earlier run's files, summary.json first: if this is interrupted, what is left
    no longer claims to be complete."""
    summaries = [p for p in paths if posixpath.basename(p) == SUMMARY_FILE]
    for group in (summaries, [p for p in paths if p not in summaries]):
        if group:
            FileSystems.delete(group)


def leftover_temp(output: str) -> list[str]:
    """Temporary directories (local) or files (remote) that an interrupted run left behind."""
    if not storage.is_remote(output):
        if not os.path.isdir(output):
            return []
        return sorted(os.path.join(output, n) for n in os.listdir(output) if n.startswith(TEMP_PREFIXES))
    # GCS has no folders: every object under a temporary prefix, at any depth.
    patterns = [FileSystems.join(output, f"{p}*{tail}") for p in TEMP_PREFIXES for tail in ("", "/**")]
    return sorted(m.path for result in FileSystems.match(patterns) for m in result.metadata_list)


def clear_temp(output: str, keep: str | None = None) -> list[str]:
    """Remove what interrupted runs left (but `keep`, the temporary folder of a run being
    resumed); one run at a time may write to an output directory."""
    leftovers = [
        p for p in leftover_temp(output) if keep is None or not (p == keep or p.startswith(keep + "/"))
    ]
    if leftovers:
        FileSystems.delete(leftovers)
    return leftovers


def unfinished_message(output: str) -> str:
    """What every reader says of a folder without summary.json: one wording, whichever reader."""
    return (
        f"{output} holds no finished conversion: {SUMMARY_FILE} is missing (the run is still going "
        "or was stopped; or this folder is not the output of a conversion)"
    )


def complete_summary(output: str) -> Summary:
    """summary.json of the complete run in `output`, or raise `IncompleteOutput`.

    Complete means: summary.json exists, and the shard files on disk are exactly those it lists
    (`.idx` files aside). One listing of the folder, so it is cheap on GCS too."""
    try:
        summary = read_summary(output)
    except SummaryError as error:  # there, but not one this project wrote (or can read)
        raise IncompleteOutput(str(error)) from error
    except Exception as error:
        raise IncompleteOutput(unfinished_message(output)) from error
    expected = {name for split in summary.splits.values() for name in split.files}
    present = {
        posixpath.basename(p)
        for p in existing_outputs(output)
        if not names.is_index_name(posixpath.basename(p))
    } - set(METADATA_FILES)
    if present != expected and not _append_under_way(output, present, expected):
        raise IncompleteOutput(
            f"{output}: shard files {sorted(present ^ expected)} differ from those in {SUMMARY_FILE} "
            "(another run is writing here, or one was stopped while replacing this one)"
        )
    return summary


def _append_under_way(output: str, present: set[str], expected: set[str]) -> bool:
    """An `--append` merging beside this dataset (output.append): every shard summary.json lists
    is there, and each other one is a file the append's marker names. Readers read the dataset
    summary.json describes, whole, until the append replaces it."""
    if not expected <= present:
        return False
    marker = append_marker(output)
    return marker is not None and present - expected <= set(marker["extra"])


def append_marker(output: str) -> JsonObject | None:
    """The marker an `--append` under way keeps beside the dataset (output.append writes it):
    the files summary.json does not list yet, and each side file's length before the merge;
    None when no append is under way."""
    return storage.read_json_or_none(FileSystems.join(output, names.APPEND_MARKER))


def complete_shards(output: str) -> dict[str, list[str]]:
    """Split -> shard paths of the complete run in `output`, or raise `IncompleteOutput`."""
    summary = complete_summary(output)
    return {
        name: [FileSystems.join(output, f) for f in split.files] for name, split in summary.splits.items()
    }
