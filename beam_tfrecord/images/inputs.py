"""One planned input to a validated image (`PendingRecord`) or a reject line: read and validate,
the worker's first step, Beam-free; and the ordered thread pool that overlaps reads."""

from __future__ import annotations

import functools
import hashlib
from collections import deque
from collections.abc import Callable, Iterable, Iterator
from concurrent.futures import Executor, Future, ThreadPoolExecutor
from dataclasses import dataclass
from itertools import islice
from typing import Generic, TypeVar

from beam_tfrecord import gcs, reasons
from beam_tfrecord.elements import PendingRecord, PlannedInput, RecordFields, RejectLine, ShardKey
from beam_tfrecord.images import bands, pages
from beam_tfrecord.images.normalize import EncodedImage, encode_for_tensorflow
from beam_tfrecord.images.options import ImageConfig
from beam_tfrecord.labels import CLASSIFIED, AnyPlaced, RunLabels
from beam_tfrecord.reasons import Reject
from beam_tfrecord.storage import read_bytes  # the read every input starts with, named here too

__all__ = ["ordered_map", "ordered_submit", "prepare_input", "read_bytes"]

T = TypeVar("T")
R = TypeVar("R")


def prepare_input(
    item: PlannedInput,
    image_options: ImageConfig,
    shard: ShardKey | None = None,
    *,
    labels: RunLabels = CLASSIFIED,
    storage: gcs.GcsConfig | None = None,
    recent: pages.RecentFiles | None = None,
) -> PendingRecord | RejectLine:
    """Read, validate and normalize one planned input: everything but the serialization.

    `shard` is the output shard its record goes to (default: the only shard of its split). Each
    of the run's kinds of label (`labels`, in order) places the picture's labels in the image its
    record stores, moved as the pixels were (`labels.LabelKind.place`); one that cannot makes the
    input a reject. `storage`: how long a gs:// read may wait (the run's settings, passed by the
    worker that reads). `recent`: the files a shard task's pages were read from (`--pages each`),
    so a file's next page is not read again."""
    limit = image_options.max_file_bytes
    found = _read_files(item, image_options, storage, recent)
    if isinstance(found, RejectLine):
        return found
    read, sha256 = found
    objects = len(item.annotations.objects) if item.annotations is not None else 0
    try:
        if item.bands:  # a picture whose bands are files of their own (--bands)
            image = bands.encode_bands(list(zip(item.bands, read, strict=True)), image_options)
        elif item.page is not None:  # one page of a multi-page file (--pages each)
            image = pages.encode_page(read[0], item.page, image_options, name=item.file_relpath)
        else:
            image = encode_for_tensorflow(read[0], image_options, name=item.relpath)
        placed = _placed(item, image, labels, limit, storage)
    except Reject as reject:
        return RejectLine(item.relpath, reject.reason, reject.detail, objects=objects)
    changes = image.changes
    noted = [code for found in placed.values() for code in found.changes]
    if noted:  # (image.changes is already in this order)
        changes = tuple(code for code in reasons.codes("change") if code in {*changes, *noted})
    fields = RecordFields(
        encoded=image.data,
        format=image.format,
        height=image.height,
        width=image.width,
        channels=image.channels,
        relpath=item.relpath,
        sha256=sha256,
        label=item.label,
        label_text=item.label_text,
        extras=item.extras,
        labels={name: found.stored for name, found in placed.items()},
        groups=labels.groups,
        depth=image.depth,
    )
    dropped = tuple(one for found in placed.values() for one in found.dropped)
    facts = {name: found.facts for name, found in placed.items()}
    return PendingRecord(
        shard or ShardKey(item.split),
        fields,
        image.source_format,
        image.reencoded,
        image.mode,
        changes,
        dropped,
        facts,
        objects,
    )


def _read_files(
    item: PlannedInput,
    image_options: ImageConfig,
    storage: gcs.GcsConfig | None,
    recent: pages.RecentFiles | None = None,
) -> tuple[list[bytes], str] | RejectLine:
    """The input's bytes (its file's, or each of its band files' in band order: `--bands`), each
    within `max_file_mb`, and the record's sha256; a file over the limit or that cannot be read
    makes the input a reject. A page's file comes from `recent` where it holds it."""
    limit = image_options.max_file_bytes
    files = [(band.path, band.size, f"band {band.band} ({band.relpath}): ") for band in item.bands]
    found, held = [], None
    for path, size, named in files or [(item.path, item.size, "")]:
        if size > limit:
            return _too_big(item.relpath, size, image_options, named)
        try:
            if recent is not None and item.page is not None:
                data, held = recent.read(path, functools.partial(read_bytes, path, limit, storage))
            else:
                data = read_bytes(path, limit, storage)
        except Exception as error:  # permissions, a file gone since listing, a flaky remote read
            return RejectLine(
                item.relpath, reasons.UNREADABLE.code, f"{named}{type(error).__name__}: {error}"
            )
        if len(data) > limit:
            return _too_big(item.relpath, len(data), image_options, named)
        found.append(data)
    sha256 = held or _sha256(found)
    return found, item.page.sha256(sha256) if item.page is not None else sha256


def _sha256(files: list[bytes]) -> str:
    """The record's `sha256`: of its file's bytes, or of its band files' one after another in
    band order (what `--dedupe` and duplicates.jsonl compare: plan.dedupe.content_hash); a page's
    of its file's hash and its index (`elements.Page.sha256`)."""
    digest = hashlib.sha256()
    for data in files:
        digest.update(data)
    return digest.hexdigest()


def _placed(
    item: PlannedInput, image: EncodedImage, labels: RunLabels, limit: int, storage: gcs.GcsConfig | None
) -> dict[str, AnyPlaced]:
    """Each of the run's kinds of label placed in the stored image, in the run's order; raises
    `Reject` for a picture one of them cannot be stored with."""
    assert image.transform is not None

    def read(path: str, size: int) -> bytes:
        """A file a label names, within the input's limits."""
        if size > limit:
            raise OSError(f"{size / 1e6:.1f} MB is over max_file_mb")
        return read_bytes(path, limit, storage)

    placed: dict[str, AnyPlaced] = {}
    for kind, setting in zip(labels.kinds, labels.settings, strict=True):
        placed[kind.name] = kind.place(item, image.transform, setting, placed, read)
    return placed


def _too_big(relpath: str, size: int, image_options: ImageConfig, named: str = "") -> RejectLine:
    """Known from the file's size alone: its bytes are never read."""
    detail = f"{named}{size / 1e6:.1f} MB is over max_file_mb ({image_options.max_file_mb:g} MB)"
    return RejectLine(relpath, reasons.TOO_LARGE.code, detail)


def ordered_map(
    fn: Callable[[T], R], items: Iterable[T], threads: int, window: int | None = None, batch: int = 1
) -> Iterator[R]:
    """`map` on `threads` threads (this one and a pool of the others), in input order, with at
    most `window` items in flight.

    Reads and decodes release the GIL, so a few threads keep one core busy while another file
    is read; the window bounds memory whatever the shard size. `batch`: items per hand-off
    (`ordered_submit`).
    """
    if threads <= 1:
        yield from map(fn, items)
        return
    with ThreadPoolExecutor(threads - 1, thread_name_prefix="decode") as pool:
        yield from ordered_submit(pool, fn, items, window or 2 * threads * batch, batch)


def ordered_submit(
    pool: Executor, fn: Callable[[T], R], items: Iterable[T], window: int, batch: int = 1
) -> Iterator[R]:
    """Results of `fn` over `items` from any executor and this thread, in input order, at most
    `window` items in flight (and at least one batch).

    Items go to the pool `batch` at a time, one future each: a future, a queue hand-off and a wait per
    item cost CPU, mostly waits for the GIL, that is not small beside a decode
    (benchmarks/NOTES.md#per-step-costs-behind-the-code). This thread works too: rather than wait
    for a batch the pool is still running, it takes back (`Future.cancel`) the first batch no pool
    thread has started and runs it itself, so a pool of one thread fewer keeps as many threads busy,
    and one fewer contends for the GIL. An error in `fn` is raised here after the results of the
    items before it, as one item at a time would; an interrupt (KeyboardInterrupt, SystemExit) in a
    batch this thread runs is raised at once. Closed early, it cancels the batches no thread has
    started.
    """
    batch = max(1, batch)
    batches = max(1, window // batch)
    pending: deque[_Batch[T, R]] = deque()
    iterator = iter(items)
    try:
        while chunk := list(islice(iterator, batch)):
            pending.append(_Batch(chunk, pool.submit(_run_batch, fn, chunk)))
            if len(pending) >= batches:
                yield from _batch_results(pending.popleft(), pending, fn)
        while pending:
            yield from _batch_results(pending.popleft(), pending, fn)
    finally:  # closed early (the consumer stopped, or an error): what no thread started never runs
        for waiting in pending:
            waiting.future.cancel()


Outcome = tuple[list[R], BaseException | None]  # a batch's results, and the error that stopped it


@dataclass(slots=True)
class _Batch(Generic[T, R]):
    """Items handed to the pool together; `outcome` is set when this thread ran them instead."""

    items: list[T]
    future: Future[Outcome[R]]
    outcome: Outcome[R] | None = None


def _run_batch(fn: Callable[[T], R], chunk: list[T]) -> Outcome[R]:
    """`fn` over a batch, stopping at the first error: the results before it, and the error."""
    results: list[R] = []
    try:
        for item in chunk:
            results.append(fn(item))
    except BaseException as error:  # raised in the consumer's thread, after these results
        return results, error
    return results, None


def _batch_results(head: _Batch[T, R], later: deque[_Batch[T, R]], fn: Callable[[T], R]) -> Iterator[R]:
    """`head`'s results in order; while a pool thread is still at them, this thread runs the
    first batch (`head` itself or a later one) that no pool thread has started."""
    while head.outcome is None and not head.future.done():
        idle = next((b for b in (head, *later) if b.outcome is None and b.future.cancel()), None)
        if idle is None:  # every batch is started: only waiting is left
            break
        idle.outcome = _run_batch(fn, idle.items)
        interrupt = idle.outcome[1]
        if interrupt is not None and not isinstance(interrupt, Exception):
            raise interrupt  # Ctrl-C, SystemExit: at once, as while this thread only waited
    results, error = head.outcome if head.outcome is not None else head.future.result()
    yield from results
    if error is not None:
        raise error
