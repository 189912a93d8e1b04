"""One planned input to a validated image (`PendingRecord`) or a reject line: read and validate,
the worker's first step, Beam-free; and the ordered thread pool that overlaps reads."""

from __future__ import annotations

import hashlib
from collections import deque
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from concurrent.futures import Executor, Future, ThreadPoolExecutor
from dataclasses import dataclass
from itertools import islice
from typing import Generic, TypeVar

from beam_tfrecord import gcs, reasons
from beam_tfrecord.elements import (
    DroppedObject,
    MaskRule,
    PendingRecord,
    PlannedInput,
    RecordFields,
    RejectLine,
    ShardKey,
    StoredObject,
)
from beam_tfrecord.images.class_masks import PlacedMask, empty_mask, place_class_mask
from beam_tfrecord.images.normalize import EncodedImage, Reject, encode_for_tensorflow
from beam_tfrecord.images.options import ImageConfig
from beam_tfrecord.images.placement import place_annotations, size_mismatch_detail
from beam_tfrecord.storage import read_bytes  # the read every input starts with, named here too

__all__ = ["ordered_map", "ordered_submit", "prepare_input", "read_bytes"]

T = TypeVar("T")
R = TypeVar("R")
# Each object note's record-level change (reasons.record_changes), looked up once per record.
_RECORD_CHANGES = reasons.record_changes()


def prepare_input(
    item: PlannedInput,
    image_options: ImageConfig,
    shard: ShardKey | None = None,
    *,
    class_names: Sequence[str] = (),
    masks: bool = False,
    mask_rule: MaskRule | None = None,
    captions: bool = False,
    keypoints: bool = False,
    storage: gcs.GcsConfig | None = None,
) -> PendingRecord | RejectLine:
    """Read, validate and normalize one planned input: everything but the serialization.

    `shard` is the output shard its record goes to (default: the only shard of its split). In a
    detection run (`item.annotations`) its objects follow the pixels (`placement`), get their ids
    from `class_names` (from 1: 0 is background) and, with `masks`, one mask PNG each. In a
    segmentation run (`mask_rule`) its mask file is read by the rule and moves with the pixels
    (`class_masks`). In a captions run (`captions`) its captions go into the record as the plan
    gives them; in a keypoints run (`keypoints`) every object's points move with the pixels as
    its box does. `storage`: how long a gs:// read may wait (the run's settings, passed by the
    worker that reads)."""
    limit = image_options.max_file_bytes
    if item.size > limit:
        return _too_big(item.relpath, item.size, image_options)
    try:
        data = read_bytes(item.path, limit, storage)
    except Exception as error:  # permissions, a file gone since listing, a flaky remote read
        return RejectLine(item.relpath, reasons.UNREADABLE.code, f"{type(error).__name__}: {error}")
    if len(data) > limit:
        return _too_big(item.relpath, len(data), image_options)
    try:
        image = encode_for_tensorflow(data, image_options, name=item.relpath)
    except Reject as reject:
        objects = len(item.annotations.objects) if item.annotations is not None else 0
        return RejectLine(item.relpath, reject.reason, reject.detail, objects=objects)
    stored, dropped, changes = None, (), image.changes
    if item.annotations is not None and mask_rule is None and not captions:  # a detection run's objects
        placed = _objects(item, image, class_names, masks)
        if isinstance(placed, RejectLine):
            return placed
        stored, dropped, notes = placed
        if notes:  # (image.changes is already in this order)
            noted = {*image.changes, *notes}
            changes = tuple(code for code in reasons.codes("change") if code in noted)
    class_mask = None
    if mask_rule is not None:
        class_mask = _class_mask(item, image, mask_rule, limit, storage)
        if isinstance(class_mask, RejectLine):
            return class_mask
        if class_mask.changes:
            noted = {*changes, *class_mask.changes}
            changes = tuple(code for code in reasons.codes("change") if code in noted)
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
        source_id=item.annotations.source_id if item.annotations is not None else None,
        objects=stored,
        masks=masks,
        class_mask=class_mask.png if class_mask is not None else None,
        captions=(item.annotations.captions if item.annotations is not None else ()) if captions else None,
        keypoints=keypoints,
    )
    shard = shard or ShardKey(item.split)
    pixels = class_mask.pixels if class_mask is not None else None
    return PendingRecord(
        shard, fields, image.source_format, image.reencoded, image.mode, changes, dropped, pixels
    )


def _class_mask(
    item: PlannedInput, image: EncodedImage, rule: MaskRule, limit: int, storage: gcs.GcsConfig | None
) -> PlacedMask | RejectLine:
    """The picture's class-id mask as its record stores it, or the reject its mask file makes
    (the picture itself was fine). A picture without a mask file gets one of the ignore value."""
    assert image.transform is not None
    found = item.annotations.class_mask if item.annotations is not None else None
    if found is None:
        return empty_mask(rule, image.width, image.height)
    try:
        if found.size > limit:
            raise OSError(f"{found.size / 1e6:.1f} MB is over max_file_mb")
        data = read_bytes(found.path, limit, storage)
    except Exception as error:  # a mask gone since listing, a flaky remote read
        detail = f"{found.name}: {type(error).__name__}: {error}"
        return RejectLine(item.relpath, reasons.CLASS_MASK_UNREADABLE.code, detail)
    try:
        return place_class_mask(data, rule, image.transform, found.name)
    except Reject as reject:
        return RejectLine(item.relpath, reject.reason, reject.detail)


def _objects(
    item: PlannedInput, image: EncodedImage, class_names: Sequence[str], masks: bool
) -> tuple[tuple[StoredObject, ...], tuple[DroppedObject, ...], set[str]] | RejectLine:
    """The image's objects placed in its stored image, with their ids; the change reasons they
    make. An image whose declared size fits neither its stored nor its upright picture is a
    reject: the annotations are for another picture, and a negative would teach the model that
    its objects are background."""
    annotations = item.annotations
    assert annotations is not None and image.transform is not None
    ids = _class_ids(class_names)
    placed = place_annotations(annotations, image.transform, masks=masks, class_ids=ids)
    if placed.frame is None:
        detail = size_mismatch_detail(annotations, image.transform)
        return RejectLine(
            item.relpath, reasons.ANNOTATION_SIZE_MISMATCH.code, detail, objects=len(annotations.objects)
        )
    stored, dropped = [], list(placed.dropped)
    for found in placed.objects:
        if found.class_name in ids:  # placed with its id
            stored.append(found)
        else:  # the planner drops unknown classes; a task without class names has none
            detail = f"class {found.class_name!r} is not among the class names"
            dropped.append(
                DroppedObject(found.class_name, reasons.UNKNOWN_CATEGORY.code, detail, found.source_ref)
            )
    notes = {_RECORD_CHANGES[n] for o in stored for n in o.notes if n in _RECORD_CHANGES}
    notes |= {_RECORD_CHANGES[n] for n in annotations.notes if n in _RECORD_CHANGES}
    if dropped:
        notes.add(reasons.OBJECTS_DROPPED.code)
    return tuple(stored), tuple(dropped), notes


# The last tuple of class names and its ids: a shard task's inputs share one tuple, and its
# dict costs more to build than placing an object does
# (docs/performance.md#per-step-costs-behind-the-code). A tuple cannot
# change, and the reference held here keeps its identity from being reused.
_last_class_ids: tuple[tuple[str, ...], dict[str, int]] = ((), {})


def _class_ids(class_names: Sequence[str]) -> Mapping[str, int]:
    """Each class name's id, from 1 (0 is background)."""
    global _last_class_ids
    names, ids = _last_class_ids
    if names is class_names:
        return ids
    ids = {name: index + 1 for index, name in enumerate(class_names)}
    if isinstance(class_names, tuple):
        _last_class_ids = (class_names, ids)
    return ids


def _too_big(relpath: str, size: int, image_options: ImageConfig) -> RejectLine:
    """Known from the file's size alone: its bytes are never read."""
    detail = f"{size / 1e6:.1f} MB is over max_file_mb ({image_options.max_file_mb:g} MB)"
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
    (docs/performance.md#per-step-costs-behind-the-code). This thread works too: rather than wait
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
