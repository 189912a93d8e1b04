"""How far split shares fall from the asked fractions, hash splits against --stratify.

For each dataset size, many split seeds (each seed is a different, equally likely assignment of
the same paths): the largest gap of any split from its fraction, in percentage points, as the
median and 95th percentile over seeds; and the per-class gap of the first class (the complaint
was "cat 21 against dog 7" in a validation split). Paths only: no image is read.

    .venv/bin/python benchmarks/split_shares.py --sizes 100,1000,100000 --seeds 200
"""

from __future__ import annotations

import argparse
import statistics
from collections import Counter
from collections.abc import Sequence

from beam_tfrecord.plan.splits import assign_splits, expected_deviation

SPLIT_SETS = {"80/20": {"train": 0.8, "validation": 0.2}, "34/33/33": {"a": 0.34, "b": 0.33, "c": 0.33}}


def dataset(size: int) -> list[tuple[str, str]]:
    """(relpath, label): two classes, three quarters cat."""
    return [(f"{'cat' if i % 4 else 'dog'}/{i}.jpg", "cat" if i % 4 else "dog") for i in range(size)]


def worst_gap(
    assignment: dict[str, str], labeled: Sequence[tuple[str, str]], splits: dict[str, float]
) -> float:
    """The largest |share - fraction| of any split, in percentage points."""
    counts = Counter(assignment[relpath] for relpath, _ in labeled)
    return max(abs(counts[name] / len(labeled) - fraction) for name, fraction in splits.items()) * 100


def measure(size: int, splits: dict[str, float], seeds: int, stratify: bool) -> tuple[float, float, float]:
    """(median, 95th percentile) of the worst split gap over seeds, and of the cat-only gap."""
    labeled = dataset(size)
    cats = [pair for pair in labeled if pair[1] == "cat"]
    gaps, class_gaps = [], []
    for seed in range(seeds):
        assignment = assign_splits(labeled, splits, seed, stratify)
        gaps.append(worst_gap(assignment, labeled, splits))
        class_gaps.append(worst_gap(assignment, cats, splits))
    gaps.sort()
    return statistics.median(gaps), gaps[int(0.95 * (len(gaps) - 1))], statistics.median(class_gaps)


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default="100,1000,100000")
    parser.add_argument("--seeds", type=int, default=200)
    args = parser.parse_args(argv)
    header = "| files | splits | method | worst split gap, median | 95th pct | one class's gap, median |"
    print(header + " 2 sd of a 20% split |")
    print("|---|---|---|---|---|---|---|")
    for size in (int(s) for s in args.sizes.split(",")):
        seeds = args.seeds if size <= 1000 else max(5, args.seeds // 20)  # 100,000 paths per seed
        for name, splits in SPLIT_SETS.items():
            for stratify in (False, True):
                median, p95, class_median = measure(size, splits, seeds, stratify)
                method = "stratified" if stratify else "hash"
                tolerance = 100 * expected_deviation(0.2, size)
                print(
                    f"| {size:,} | {name} | {method} | {median:.2f} pp | {p95:.2f} pp | "
                    f"{class_median:.2f} pp | ±{tolerance:.2f} pp |"
                )


if __name__ == "__main__":
    main()
