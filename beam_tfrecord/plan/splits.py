"""Deterministic split assignment: a hash of the relative path (or of the file's group), never a
random draw."""

from __future__ import annotations

import hashlib
import math
import re
from collections import Counter, defaultdict
from collections.abc import Iterable, Mapping

from beam_tfrecord.config_base import ConfigError

__all__ = [
    "assign_splits",
    "expected_deviation",
    "format_splits",
    "group_of",
    "parse_splits",
    "path_hash",
    "split_of",
    "stratified_splits",
]

SPLIT_NAME_CHARS = frozenset("abcdefghijklmnopqrstuvwxyz0123456789_")


def parse_splits(text: str) -> dict[str, float]:
    """`train=0.8,validation=0.2` -> {'train': 0.8, 'validation': 0.2}, fractions summing to 1."""
    splits: dict[str, float] = {}
    for part in text.split(","):
        name, sep, value = part.strip().partition("=")
        name = name.strip()
        if not sep or not name or set(name) - SPLIT_NAME_CHARS:
            raise ConfigError("splits", f"{part!r} is not NAME=FRACTION (lower-case names)")
        if name in splits:
            raise ConfigError("splits", f"names {name} twice")
        try:
            fraction = float(value)
        except ValueError:
            raise ConfigError("splits", f"{value!r} is not a number") from None
        if not 0 < fraction <= 1:
            raise ConfigError("splits", f"{name}={value} must be in (0, 1]")
        splits[name] = fraction
    if not math.isclose(sum(splits.values()), 1.0, abs_tol=1e-6):
        raise ConfigError("splits", f"fractions must sum to 1, not {sum(splits.values()):g}")
    return splits


def format_splits(splits: Mapping[str, float]) -> str:
    """{"train": 0.8, "validation": 0.2} -> `train=0.8,validation=0.2`, the inverse of `parse_splits`."""
    return ",".join(f"{name}={fraction:g}" for name, fraction in splits.items())


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


def group_of(relpath: str, pattern: re.Pattern[str]) -> str | None:
    """The first group of `pattern` searched in the relative path, or None when it does not match
    (or captures nothing): `^(p\\d+)_` on `p007_1.jpg` -> `p007`."""
    match = pattern.search(relpath)
    return match.group(1) if match and match.group(1) else None


def assign_splits(
    labeled: Iterable[tuple[str, str]],
    splits: dict[str, float],
    seed: int = 0,
    stratify: bool = False,
    groups: Mapping[str, str] | None = None,
) -> dict[str, str]:
    """relpath -> split for (relpath, label) pairs. A file in `groups` (relpath -> group) is
    split by its group's hash, so a group never straddles two splits; any other by its path's."""
    groups = groups or {}
    if stratify:
        return stratified_splits(labeled, splits, seed, groups)
    return {
        relpath: split_of(groups[relpath], splits, seed)
        if relpath in groups
        else split_of(relpath, splits, seed)
        for relpath, _ in labeled
    }


def stratified_splits(
    labeled: Iterable[tuple[str, str]],
    splits: dict[str, float],
    seed: int = 0,
    groups: Mapping[str, str] | None = None,
) -> dict[str, str]:
    """Per class, order units (a group, or a file of no group) by hash and cut by fractions, so
    each split has each class's share: exact for single files, within a group's size for groups.

    A group belongs to the class most of its files have (ties: the first name), and goes whole
    to the split that holds its middle file. Adding files to a class may move others.
    """
    groups = groups or {}
    members: dict[tuple[bool, str], list[tuple[str, str]]] = defaultdict(list)
    for relpath, label in labeled:
        unit = (True, groups[relpath]) if relpath in groups else (False, relpath)
        members[unit].append((relpath, label))
    by_label: dict[str, list[tuple[bool, str]]] = defaultdict(list)
    for unit, files in members.items():
        counts = Counter(label for _, label in files)
        by_label[min(counts, key=lambda label: (-counts[label], label))].append(unit)
    names = list(splits)
    assignment: dict[str, str] = {}
    for units in by_label.values():
        units.sort(key=lambda unit: (path_hash(unit[1], seed), unit))
        total = sum(len(members[unit]) for unit in units)
        ends, cumulative = [], 0.0
        for fraction in splits.values():
            cumulative += fraction
            ends.append(round(cumulative * total))
        offset = 0
        for unit in units:
            size = len(members[unit])
            middle = offset + (size - 1) // 2
            name = next((n for n, end in zip(names, ends, strict=True) if middle < end), names[-1])
            for relpath, _ in members[unit]:
                assignment[relpath] = name
            offset += size
    return assignment


def expected_deviation(fraction: float, count: int) -> float:
    """Two standard deviations of a hash split's share of `count` files (binomial): the share
    lies within this of `fraction` about 95 times in 100; 0 for an empty split set."""
    return 2 * math.sqrt(fraction * (1 - fraction) / count) if count else 0.0
