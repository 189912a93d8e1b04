"""How many shards a split gets (their names are `beam_tfrecord.names`')."""

from __future__ import annotations

import math

__all__ = ["shard_count"]


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
