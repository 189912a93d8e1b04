"""Shard counts and names: `{split}-{index:05d}-of-{count:05d}.tfrecord[.gz]`."""

from __future__ import annotations

import math
import re

__all__ = [
    "SHARD_NAME",
    "SHARD_TEMPLATE",
    "is_index_name",
    "is_shard_name",
    "shard_count",
    "shard_name",
    "shard_suffix",
]

SHARD_TEMPLATE = "-SSSSS-of-NNNNN"
SHARD_NAME = re.compile(r"^(?P<split>[a-z0-9_]+)-(?P<index>\d{5})-of-(?P<count>\d{5})\.tfrecord(\.gz)?$")


def shard_suffix(compression: str) -> str:
    return ".tfrecord.gz" if compression == "gzip" else ".tfrecord"


def shard_name(split: str, index: int, count: int, compression: str = "none") -> str:
    return f"{split}-{index:05d}-of-{count:05d}{shard_suffix(compression)}"


def shard_count(
    total_bytes: int,
    shard_size_mb: float,
    inputs: int | None = None,
    parallelism: int = 1,
    round_robin: bool = False,
) -> int:
    """How many shards a split gets when --num_shards does not say.

    Enough that none is much over the target size; more if the runner can run more shard tasks
    at once (`parallelism`), but never so many that shards fall under a quarter of the target
    (a million-image split on a big Dataflow pool must not become thousands of tiny files);
    rounded up to a multiple of the parallelism when the runner deals tasks out round-robin
    (the local runner), so every worker gets the same share; never more shards than inputs,
    and at least one, even when empty.
    """
    target = shard_size_mb * 1024 * 1024
    count = max(1, math.ceil(total_bytes / target))
    if parallelism > count:
        count = max(count, min(parallelism, math.ceil(total_bytes / (target / 4))))
    if round_robin and parallelism > 1:
        count = math.ceil(count / parallelism) * parallelism
    if inputs is not None:
        count = min(count, max(1, inputs))
    return count


def is_shard_name(name: str) -> bool:
    return SHARD_NAME.match(name) is not None


def is_index_name(name: str) -> bool:
    """A shard's `.idx` file (`train-00000-of-00002.tfrecord.idx`), never a shard itself."""
    return name.endswith(".idx") and is_shard_name(name[: -len(".idx")])
