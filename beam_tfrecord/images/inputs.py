"""One planned input to a validated image (`PendingRecord`) or a reject line: read and validate,
the worker's first step, Beam-free; and the ordered thread pool that overlaps reads."""

from __future__ import annotations

import hashlib
import os
from collections import deque
from collections.abc import Callable, Iterable, Iterator
from concurrent.futures import Executor, Future, ThreadPoolExecutor
from typing import TypeVar

from beam_tfrecord import gcs
from beam_tfrecord.elements import PendingRecord, PlannedInput, RecordFields, RejectLine, ShardKey
from beam_tfrecord.images.normalize import Reject, encode_for_tensorflow
from beam_tfrecord.images.options import ImageOptions

__all__ = ["ordered_map", "ordered_submit", "prepare_input", "read_bytes"]

T = TypeVar("T")
R = TypeVar("R")


def read_bytes(path: str, limit: int | None = None) -> bytes:
    """The file's bytes as stored: no decompression by extension (a `.gz` image stays bytes).

    A local path is opened directly (Beam's LocalFileSystem does the same after a lookup that
    costs about as much as the read itself); gs:// objects go through one reused client per
    thread (`gcs.read_bytes`); other schemes through Beam's filesystems.

    At most `limit` + 1 bytes are read from a local file, so one that grew past the limit since
    it was listed costs no more memory than the limit (remote sizes come from the listing).
    """
    if "://" not in path:
        with open(path, "rb") as handle:
            if limit is None:
                return handle.read()
            # Sized like read() sizes it: a read(limit) would allocate the whole limit each time.
            size = os.fstat(handle.fileno()).st_size
            data = handle.read(min(size, limit) + 1)  # a byte more than listed: did it grow?
            if size < len(data) <= limit:
                data += handle.read(limit + 1 - len(data))
            return data
    return gcs.read_bytes(path)


def prepare_input(
    item: PlannedInput, image_options: ImageOptions, shard: ShardKey | None = None
) -> PendingRecord | RejectLine:
    """Read, validate and normalize one planned input: everything but the serialization.

    `shard` is the output shard its record goes to (default: the only shard of its split)."""
    limit = image_options.max_file_bytes
    if item.size > limit:
        return _too_big(item.relpath, item.size, image_options)
    try:
        data = read_bytes(item.path, limit)
    except Exception as error:  # permissions, a file gone since listing, a flaky remote read
        return RejectLine(item.relpath, "unreadable", f"{type(error).__name__}: {error}")
    if len(data) > limit:
        return _too_big(item.relpath, len(data), image_options)
    try:
        image = encode_for_tensorflow(data, image_options, name=item.relpath)
    except Reject as reject:
        return RejectLine(item.relpath, reject.reason, reject.detail)
    content_sha256 = hashlib.sha256(data).hexdigest()
    fields = RecordFields(
        encoded=image.data,
        format=image.format,
        height=image.height,
        width=image.width,
        channels=image.channels,
        relpath=item.relpath,
        sha256=content_sha256,
        label=item.label,
        label_text=item.label_text,
        extras=item.extras,
    )
    shard = shard or ShardKey(item.split)
    return PendingRecord(shard, fields, image.source_format, image.reencoded, image.mode, image.changes)


def _too_big(relpath: str, size: int, image_options: ImageOptions) -> RejectLine:
    """Known from the file's size alone: its bytes are never read."""
    detail = f"{size / 1e6:.1f} MB is over max_file_mb ({image_options.max_file_mb:g} MB)"
    return RejectLine(relpath, "too_large", detail)


def ordered_map(
    fn: Callable[[T], R], items: Iterable[T], threads: int, window: int | None = None
) -> Iterator[R]:
    """`map` on a thread pool, in input order, with at most `window` items in flight.

    Reads and decodes release the GIL, so a few threads keep one core busy while another file
    is read; the window bounds memory whatever the shard size.
    """
    if threads <= 1:
        yield from map(fn, items)
        return
    with ThreadPoolExecutor(threads, thread_name_prefix="decode") as pool:
        yield from ordered_submit(pool, fn, items, window or 2 * threads)


def ordered_submit(pool: Executor, fn: Callable[[T], R], items: Iterable[T], window: int) -> Iterator[R]:
    """Results of `fn` over `items` from any executor, in input order, `window` in flight."""
    pending: deque[Future[R]] = deque()
    for item in items:
        pending.append(pool.submit(fn, item))
        if len(pending) >= window:
            yield pending.popleft().result()
    while pending:
        yield pending.popleft().result()
