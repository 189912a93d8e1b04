"""Shard counts and names: `{split}-{index:05d}-of-{count:05d}.tfrecord[.gz]`."""

from __future__ import annotations

import math
import re

__all__ = ["SHARD_NAME", "SHARD_TEMPLATE", "is_shard_name", "shard_count", "shard_name", "shard_suffix"]

SHARD_TEMPLATE = "-SSSSS-of-NNNNN"
SHARD_NAME = re.compile(r"^(?P<split>[a-z0-9_]+)-(?P<index>\d{5})-of-(?P<count>\d{5})\.tfrecord(\.gz)?$")


def shard_suffix(compression: str) -> str:
    return ".tfrecord.gz" if compression == "gzip" else ".tfrecord"


def shard_name(split: str, index: int, count: int, compression: str = "none") -> str:
    return f"{split}-{index:05d}-of-{count:05d}{shard_suffix(compression)}"


def shard_count(
    total_bytes: int, shard_size_mb: float, inputs: int | None = None, parallelism: int = 1
) -> int:
    """Enough shards that none is much over the target size, and at least `parallelism` (so
    every worker gets one) rounded up to a multiple of it, but never more shards than inputs;
    at least one, even when empty."""
    target = shard_size_mb * 1024 * 1024
    count = max(1, math.ceil(total_bytes / target), parallelism)
    if parallelism > 1:
        count = math.ceil(count / parallelism) * parallelism
    if inputs is not None:
        count = min(count, max(1, inputs))
    return count


def is_shard_name(name: str) -> bool:
    return SHARD_NAME.match(name) is not None
