"""The launcher's bulk work: planning a COCO-sized detection run makes millions of small objects
(a box, its floats, its polygons) that never form reference cycles, and Python's cycle collector
walks every one of them again at each full collection, so its cost grew faster than the objects.

`cycles_paused` turns the collector off for such a step (reference counting still frees
everything at once) and back on after, as it was: a COCO-sized launch plans in less time at the
same peak memory (benchmarks/NOTES.md#the-coco-launchers-choices-measured).
"""

from __future__ import annotations

import contextlib
import gc
from collections.abc import Iterator

__all__ = ["cycles_paused"]


@contextlib.contextmanager
def cycles_paused() -> Iterator[None]:
    """No cyclic garbage collection inside the block; the collector's state is restored after
    (a nested block, or a caller that had turned it off, leaves it off). Cycles made inside are
    collected later, so only work that makes few of them belongs here."""
    if not gc.isenabled():
        yield
        return
    gc.disable()
    try:
        yield
    finally:
        gc.enable()
