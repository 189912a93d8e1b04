"""`dedupe`: exact copies (same SHA-256 of the bytes) kept once, decided on the launcher before
planning.

Why a pass over paths on the launcher, before the plan, rather than in the pipeline: which copy
is kept must be known before any shard is written (a shard is streamed as it is read), and
deciding it from the whole listing makes the choice independent of listing order, runner and
sharding: the copy with the smallest relative path is kept. Each file is read where the
launcher runs and only its 64-character hash is kept, so no image byte moves between workers.
The cost is one more read of every input (see docs/usage.md's figure); on gs:// that read goes
through the launcher's network, which is what would make a distributed pass (hash per shard
task, group by hash) worth its second pipeline stage at the scale of millions of objects.
"""

from __future__ import annotations

import hashlib
from collections import defaultdict
from collections.abc import Callable, Iterable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import TypeVar

from beam_tfrecord import reasons, storage
from beam_tfrecord.elements import RejectLine
from beam_tfrecord.plan.listing import InputFile

__all__ = [
    "HASH_THREADS",
    "content_hash",
    "content_hashes",
    "input_hashes",
    "kept_copies",
    "sources",
    "without_copies",
]

HASH_THREADS = 8  # reads wait on disk or network; hashlib releases the GIL on large buffers
Entry = TypeVar("Entry")  # what a candidate carries beside its file (its label entry)


Sources = str | tuple[str, ...]  # a file's path, or a picture's band files' paths in band order


def content_hash(path: Sources) -> str:
    """SHA-256 (hex) of a file's bytes as stored, local or remote; of a picture whose bands are
    files of their own (`--bands`), of its files' bytes one after another, in band order, as
    the worker hashes them for the record."""
    if not isinstance(path, str):
        digest = hashlib.sha256()
        for one in path:
            digest.update(storage.read_bytes(one))
        return digest.hexdigest()
    if storage.is_remote(path):
        return hashlib.sha256(storage.read_bytes(path)).hexdigest()  # as stored: never decompressed
    with open(path, "rb") as handle:  # streamed: a large local file is never held whole
        return hashlib.file_digest(handle, "sha256").hexdigest()


def _try_hash(path: Sources) -> str | None:
    try:
        return content_hash(path)
    except Exception:  # unreadable now: the worker will read it again and reject it `unreadable`
        return None


def sources(file: InputFile) -> Sources:
    """What an input's hash is made of: its file, or its band files."""
    return tuple(band.path for band in file.bands) if file.bands else file.path


def content_hashes(paths: Sequence[Sources], threads: int = HASH_THREADS) -> list[str | None]:
    """The hash of each path (or band files), in order; None for a file that cannot be read now."""
    if threads <= 1 or len(paths) < 2:
        return [_try_hash(path) for path in paths]
    with ThreadPoolExecutor(threads, thread_name_prefix="hash") as pool:
        return list(pool.map(_try_hash, paths, chunksize=16))


def input_hashes(files: Sequence[InputFile], threads: int = HASH_THREADS) -> list[str | None]:
    """Each input's content hash, as the worker hashes its record (`image/key/sha256`): its
    file's or band files' bytes, a page's of its file's hash and its index (`elements.Page.sha256`,
    `--pages each`). A file is read once however many of its pages are inputs; None for one that
    cannot be read now."""
    unique = list(dict.fromkeys(sources(f) for f in files))
    hashed = dict(zip(unique, content_hashes(unique, threads), strict=True))
    found = [hashed[sources(f)] for f in files]
    return [
        f.page.sha256(digest) if f.page is not None and digest is not None else digest
        for f, digest in zip(files, found, strict=True)
    ]


def kept_copies(hashed: Iterable[tuple[str, str | None]]) -> dict[str, str]:
    """relpath -> the relpath of the copy kept instead, for every copy that is not kept.

    Among files with one hash the smallest relative path is kept, whatever order they came in.
    Files without a hash (unreadable) are never treated as copies."""
    by_hash: dict[str, list[str]] = defaultdict(list)
    for relpath, digest in hashed:
        if digest is not None:
            by_hash[digest].append(relpath)
    dropped: dict[str, str] = {}
    for relpaths in by_hash.values():
        kept, *others = sorted(relpaths)
        for relpath in others:
            dropped[relpath] = kept
    return dropped


def without_copies(
    labeled: Sequence[tuple[InputFile, Entry]],
    rejects: list[RejectLine],
    known: Mapping[str, str],
    objects: Callable[[str], int] | None = None,
) -> list[tuple[InputFile, Entry]]:
    """The plan's dedupe step: one candidate of each content (the smallest relative path); the
    others are `duplicate` rejects. A file whose bytes a record of the dataset already holds
    (`known`: sha256 -> its relpath, an append's) is a copy of that record. `objects`: a
    detection run's objects per picture, which a copy's reject line counts (its objects are
    `image_rejected`, so every object is accounted for)."""
    count = objects or (lambda relpath: 0)
    hashes = input_hashes([f for f, _ in labeled])
    old = {
        f.relpath: known[h] for (f, _), h in zip(labeled, hashes, strict=True) if h is not None and h in known
    }
    for relpath, kept_path in sorted(old.items()):
        detail = f"same bytes as {kept_path}, already in the dataset"
        rejects.append(RejectLine(relpath, reasons.DUPLICATE.code, detail, objects=count(relpath)))
    rest = [(item, h) for item, h in zip(labeled, hashes, strict=True) if item[0].relpath not in old]
    dropped = kept_copies((f.relpath, h) for (f, _), h in rest)
    for relpath, kept_path in dropped.items():
        detail = f"same bytes as {kept_path}, which is kept"
        rejects.append(RejectLine(relpath, reasons.DUPLICATE.code, detail, objects=count(relpath)))
    return [(f, entry) for f, entry in labeled if f.relpath not in dropped and f.relpath not in old]
