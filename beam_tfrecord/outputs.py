"""Guarding the output directory: an earlier run's shards are never mixed with a new run's."""

from __future__ import annotations

import posixpath

from apache_beam.io.filesystems import FileSystems

from beam_tfrecord import gcs, sharding
from beam_tfrecord.metadata import LABELS_FILE, REJECTS_FILE, SUMMARY_FILE
from beam_tfrecord.tfds_metadata import TFDS_FILES

# Drawn by `python -m pipelines.inspect` beside the shards by default.
CONTACT_SHEET_FILE = "contact_sheet.png"
HISTOGRAM_FILE = "label_histogram.png"
METADATA_FILES = (LABELS_FILE, REJECTS_FILE, SUMMARY_FILE, *TFDS_FILES, CONTACT_SHEET_FILE, HISTOGRAM_FILE)


def existing_outputs(output: str) -> list[str]:
    """Paths of shards and metadata files of an earlier run directly under `output`."""
    try:
        (result,) = FileSystems.match([FileSystems.join(output, "*")])
    except Exception as error:
        if not output.startswith("gs://"):
            raise
        raise gcs.StorageError(gcs.describe("--output", output, error)) from None
    found = []
    for metadata in result.metadata_list:
        name = posixpath.basename(metadata.path)
        if sharding.is_shard_name(name) or name in METADATA_FILES:
            found.append(metadata.path)
    return sorted(found)


def clear_outputs(paths: list[str]) -> None:
    if paths:
        FileSystems.delete(paths)
