"""Every page of a multi-page file an input of its own (`--pages each`): the listing's multi-page
TIFFs and multi-frame DICOMs expanded into one input a page, before anything else is planned.

Why the planner counts pages, not the worker: an input becomes one record or one reject
(`inputs = records + rejects`), and shards are planned on paths before a byte is decoded. With
the page as the input, labels, splits, dedupe, the file index, an append and a resumed run each
see one input where the worker makes one record, as `--bands` makes them see one input a picture.
The pages of a file are labelled, grouped and split as the file is (plan.labelling and
plan.splitting ask `InputFile.file_relpath`): neighbouring slices of a stack, nearly the same
picture, never sit on both sides of a train/test line.

What a page is, counted from the header alone (tifffile reads the page directories, pydicom the
elements before the Pixel Data), as the readers (images.tiff, images.dicom) read it:

- TIFF: each position of each stack the file holds at full resolution (tifffile's series whose
  pages are not reduced-resolution copies), in the file's order: a z-slice or a time point of an
  ImageJ or OME hyperstack, with all its channels as bands; a page of a plain page sequence; a
  page of another size (a scanned document's second page). Overviews and pyramid levels are no
  pages: they are smaller copies of one.
- DICOM: each frame (Number of Frames). A Segmentation's frames are masks, not pictures: the
  object stays one input, which the reader rejects once (`no_picture`).

A file that holds one page, is neither TIFF nor DICOM, or whose header tifffile or pydicom cannot
parse, is one input under its own name, as without the option: the reader judges it (a broken
header is one reject, with the reason the reader finds). A file that cannot be read at all is an
`unreadable` reject. Every file's first bytes are read to tell TIFF and DICOM apart (a DICOM often
has no extension), on `COUNT_THREADS` threads, as `--dedupe` reads every file.
"""

from __future__ import annotations

import contextlib
import dataclasses
import logging
import math
import threading
from collections.abc import Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import TYPE_CHECKING, BinaryIO

from beam_tfrecord import reasons, storage
from beam_tfrecord.config_base import ConfigError
from beam_tfrecord.elements import Page
from beam_tfrecord.plan.listing import InputFile, skip_reason
from beam_tfrecord.plan.source_config import SourceConfig

if TYPE_CHECKING:
    from tifffile import TiffPageSeries

__all__ = ["COUNT_THREADS", "expanded", "file_bytes", "page_count", "refuse_annotations"]

COUNT_THREADS = 8  # header reads wait on disk or network
_HEAD = 132  # a DICOM's preamble and `DICM`; a TIFF's byte order and magic number
_TIFF_MAGICS = (b"II*\x00", b"MM\x00*", b"II+\x00", b"MM\x00+")  # classic and BigTIFF, both orders
_DICOM_GROUPS = (b"\x02\x00", b"\x08\x00")  # a DICOM with no preamble starts with group 0002 or 0008
_NOT_DEPTH = "YXCS"  # tifffile's axes of one position: rows, columns, channels, a page's samples
_THREAD = threading.local()


def expanded(files: Sequence[InputFile], each: bool, threads: int = COUNT_THREADS) -> list[InputFile]:
    """The listing with each multi-page file as one input a page (`InputFile.page`, named
    `Page.name`), sorted by relative path; without `each`, the listing as it is. A file counted
    already (its `page` set), a picture of band files (`--bands`: each band a file of one page),
    clutter and what the listing found wrong pass as they are, so expanding twice (the command,
    then an append's new files) reads no header again.

    Raises ConfigError when a page's name is another listed file's relative path."""
    if not each:
        return list(files)
    waiting = [file for file in files if _to_count(file)]
    with ThreadPoolExecutor(max(1, min(threads, len(waiting))), thread_name_prefix="pages") as pool:
        counted = dict(zip(waiting, pool.map(_counted, waiting), strict=True))
    found: list[InputFile] = []
    for file in files:
        found += counted.get(file, [file])
    _refuse_shared_names(found)
    return sorted(found)


def refuse_annotations(pages: str, source: SourceConfig) -> None:
    """`--pages each` with annotations fails in one line: an annotation names a file (its boxes
    drawn on which page?), and no format's pages are read yet."""
    if pages == "each" and source.annotations is not None:
        raise ConfigError(
            "pages",
            "each makes a record of every page, and annotations name files, not their pages: "
            "annotations of single pages are not read yet (leave out --pages each)",
        )


def page_count(path: str) -> int:
    """How many pages the file holds, as the readers number them (see the module docstring): 1
    for a file of one page, of another format, or whose header does not parse. Raises OSError
    (or the store's error) when the file cannot be read."""
    head = storage.read_head(path, _HEAD)
    is_tiff, is_dicom = head[:4] in _TIFF_MAGICS, head[128:132] == b"DICM" or head[:2] in _DICOM_GROUPS
    if not is_tiff and not is_dicom:
        return 1
    try:
        with _quiet(), storage.open_binary(path) as handle:
            return max(1, _tiff_pages(handle) if is_tiff else _dicom_frames(handle))
    except Exception:  # a header the reader will judge, with its own reason, once
        return 1


def file_bytes(files: Sequence[InputFile]) -> int:
    """The bytes of the listed files, each file once however many of its pages are inputs."""
    return sum(f.size for f in files if f.page is None or f.page.index == 0)


def _to_count(file: InputFile) -> bool:
    return (
        file.page is None
        and not file.bands
        and file.problem is None
        and skip_reason(file.relpath) is None
        and file.size > 0
    )


def _counted(file: InputFile) -> list[InputFile]:
    """The file's pages as inputs, itself marked as one page, or itself as a reject."""
    try:
        count = page_count(file.path)
    except Exception as error:  # permissions, a file gone since listing, a flaky remote read
        problem = (reasons.UNREADABLE.code, f"its pages cannot be counted: {type(error).__name__}: {error}")
        return [dataclasses.replace(file, problem=problem)]
    pages = [Page(index, count) for index in range(count)]
    return [dataclasses.replace(file, relpath=page.name(file.relpath), page=page) for page in pages]


def _tiff_pages(handle: BinaryIO) -> int:
    """The positions of the full-resolution stacks (images.tiff reads page N as the same)."""
    import tifffile

    with tifffile.TiffFile(handle) as tif:
        everything = tif.series
        full = [s for s in everything if not (s.keyframe.is_reduced or s.keyframe.is_mask)]
        return sum(_positions(series) for series in full or everything[:1])


def _positions(series: TiffPageSeries) -> int:
    axes, shape = series.get_axes(False), series.get_shape(False)
    return math.prod(n for axis, n in zip(axes, shape, strict=True) if axis not in _NOT_DEPTH)


def _dicom_frames(handle: BinaryIO) -> int:
    """Number of Frames, read before the Pixel Data; 1 for a Segmentation (masks, no picture)."""
    import pydicom

    ds = pydicom.dcmread(handle, stop_before_pixels=True, force=True)
    uid = ds.get("SOPClassUID") or ds.file_meta.get("MediaStorageSOPClassUID")
    if uid is not None and "Segmentation" in str(getattr(uid, "name", "")):
        return 1
    frames = ds.get("NumberOfFrames")
    return int(frames) if frames not in (None, "") else 1


class _WhileCounting(logging.Filter):
    """What tifffile and pydicom log while a header is only counted stays off the terminal: the
    reader meets the same file again, and says what matters in its reject's detail."""

    def filter(self, record: logging.LogRecord) -> bool:
        return not getattr(_THREAD, "counting", False)


_FILTER = _WhileCounting()


@contextlib.contextmanager
def _quiet() -> Iterator[None]:
    for name in ("tifffile", "pydicom"):
        logger = logging.getLogger(name)
        if _FILTER not in logger.filters:
            logger.addFilter(_FILTER)
    _THREAD.counting = True
    try:
        yield
    finally:
        _THREAD.counting = False


def _refuse_shared_names(found: Sequence[InputFile]) -> None:
    """A relative path is an input's identity in every output: a page named as another listed
    file (`stack.tif#1` beside a file of that name) fails in one line, never merges the two."""
    pages = {file.relpath for file in found if file.page is not None and file.page.count > 1}
    shared = sorted(pages & {file.relpath for file in found if file.page is None or file.page.count <= 1})
    if shared:
        raise ConfigError(
            "pages",
            f"each names a page {shared[0]!r}, and a file has that path: rename it, or leave out "
            "--pages each",
        )
