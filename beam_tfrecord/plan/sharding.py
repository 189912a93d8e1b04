"""How many shards a split gets (their names are `beam_tfrecord.names`')."""

from __future__ import annotations

import math
from dataclasses import dataclass

__all__ = ["ShardSettings", "shard_count"]


@dataclass(frozen=True)
class ShardSettings:
    """How a run's splits are cut into shards.

    Args:
      num_shards: shards per split; None derives them from `shard_size_mb` and the parallelism.
      shard_size_mb: the target shard size when `num_shards` is None.
      parallelism: shard tasks the runner can run at once (beam_tfrecord.runners.parallelism).
      round_robin: the runner deals shard tasks out in turn, once (the local runner), rather than
        rebalancing as it goes (Dataflow).
    """

    num_shards: int | None = None
    shard_size_mb: float = 128.0
    parallelism: int = 1
    round_robin: bool = False

    def count_for(self, total_bytes: int, inputs: int) -> int:
        """The shard count of a split of `inputs` files and `total_bytes` bytes."""
        if self.num_shards:
            return self.num_shards
        return shard_count(total_bytes, self.shard_size_mb, inputs, self.parallelism, self.round_robin)


def shard_count(
    total_bytes: int,
    shard_size_mb: float,
    inputs: int | None = None,
    parallelism: int = 1,
    round_robin: bool = False,
) -> int:
    """How many shards a split gets when num_shards does not say.

    Enough that none is much over the target size; more if the runner can run more shard tasks
    at once (`parallelism`), but never so many that shards fall under a quarter of the target
    (a million-image split on a big Dataflow pool must not become thousands of tiny files);
    rounded up to a multiple of the parallelism when the runner deals shard tasks out round-robin
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
