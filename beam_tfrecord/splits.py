"""Deterministic split assignment: a hash of the relative path, never a random draw."""

from __future__ import annotations

import hashlib
import math
from collections import defaultdict
from collections.abc import Iterable

__all__ = ["parse_splits", "path_hash", "split_of", "stratified_splits"]

SPLIT_NAME_CHARS = frozenset("abcdefghijklmnopqrstuvwxyz0123456789_")


def parse_splits(text: str) -> dict[str, float]:
    """`train=0.8,validation=0.2` -> {'train': 0.8, 'validation': 0.2}, fractions summing to 1."""
    splits: dict[str, float] = {}
    for part in text.split(","):
        name, sep, value = part.strip().partition("=")
        name = name.strip()
        if not sep or not name or set(name) - SPLIT_NAME_CHARS:
            raise ValueError(f"--splits: {part!r} is not NAME=FRACTION (lower-case names)")
        if name in splits:
            raise ValueError(f"--splits names {name} twice")
        try:
            fraction = float(value)
        except ValueError:
            raise ValueError(f"--splits: {value!r} is not a number") from None
        if not 0 < fraction <= 1:
            raise ValueError(f"--splits: {name}={value} must be in (0, 1]")
        splits[name] = fraction
    if not math.isclose(sum(splits.values()), 1.0, abs_tol=1e-6):
        raise ValueError(f"--splits fractions must sum to 1, not {sum(splits.values()):g}")
    return splits


def path_hash(relpath: str, seed: int) -> float:
    """A uniform number in [0, 1) fixed by the path and seed, identical on every machine."""
    digest = hashlib.sha256(f"{seed}:{relpath}".encode()).digest()
    return int.from_bytes(digest[:8], "big") / 2**64


def split_of(relpath: str, splits: dict[str, float], seed: int = 0) -> str:
    """The split whose cumulative fraction band holds the path's hash."""
    point = path_hash(relpath, seed)
    cumulative = 0.0
    for name, fraction in splits.items():
        cumulative += fraction
        if point < cumulative:
            return name
    return next(reversed(splits))


def stratified_splits(
    labeled: Iterable[tuple[str, str]], splits: dict[str, float], seed: int = 0
) -> dict[str, str]:
    """Per class, order paths by hash and cut by fractions, so each split has each class's share.

    Exact proportions per class, at the price that adding files to a class may move others.
    """
    by_label: dict[str, list[str]] = defaultdict(list)
    for relpath, label in labeled:
        by_label[label].append(relpath)
    assignment: dict[str, str] = {}
    for paths in by_label.values():
        paths.sort(key=lambda p: (path_hash(p, seed), p))
        start, cumulative = 0, 0.0
        for name, fraction in splits.items():
            cumulative += fraction
            end = round(cumulative * len(paths))
            for relpath in paths[start:end]:
                assignment[relpath] = name
            start = end
        for relpath in paths[start:]:
            assignment[relpath] = next(reversed(splits))
    return assignment
