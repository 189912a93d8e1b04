"""What a run does with its output folder, decided once before anything is listed or cleared.

Why one value: a fresh run, a run replacing an earlier one, an append, the merge that finishes an
append and a dry run differ in what they may clear, where the pipeline writes, whether anything
is written at all and whether a claim is taken. Read from loose flags at each step, those
answers drifted apart; `prepare` and the command both read them from this value instead.

Resuming is not a kind of its own: any run that writes may find an interrupted run of its very
plan and keep its finished shard tasks (`resume`); only the plan, made after this value, can tell
(`output.resume.find_resumable`), and the staged plan says whether it did (`StagedPlan.finished`).
"""

from __future__ import annotations

import enum
from dataclasses import dataclass

from beam_tfrecord.output.append import work_dir
from beam_tfrecord.plan.planner import KnownRecords

__all__ = ["OutputKind", "OutputMode"]


class OutputKind(enum.Enum):
    """Which run this is, as far as its output folder is concerned."""

    FRESH = "fresh"  # an output with no earlier run's files (an interrupted one's excepted)
    OVERWRITE = "overwrite"  # an earlier run's shards and metadata are replaced
    APPEND = "append"  # a finished dataset grows: new files converted in its work folder, then merged
    MERGE = "merge"  # an append whose new files are converted already: merged, nothing converted


@dataclass(frozen=True)
class OutputMode:
    """What a run does with its output.

    Args:
      kind: see OutputKind.
      dry_run: plan and describe only: nothing is claimed, cleared, staged or written.
      resume: an interrupted run of this very plan is resumed (its finished shard tasks kept);
        False removes it and starts clean.
      known: an append's dataset as it stands (its class ids and records' hashes), which the plan
        of the new files is made against; only with APPEND or MERGE.
    """

    kind: OutputKind = OutputKind.FRESH
    dry_run: bool = False
    resume: bool = True
    known: KnownRecords | None = None

    def __post_init__(self) -> None:
        if self.kind is OutputKind.APPEND and self.known is None:
            raise ValueError("an append's output mode needs the dataset it grows (known)")
        if self.known is not None and not self.appends:
            raise ValueError(f"a {self.kind.value} run grows no dataset: known is for an append")

    @property
    def writes(self) -> bool:
        """Whether the run writes anything under the output (and so needs the output's claim)."""
        return not self.dry_run

    @property
    def appends(self) -> bool:
        return self.kind in (OutputKind.APPEND, OutputKind.MERGE)

    @property
    def converts(self) -> bool:
        """Whether the pipeline runs: a merge only moves what an earlier append converted."""
        return self.kind is not OutputKind.MERGE

    @property
    def clears(self) -> bool:
        """Whether an earlier run's files where the pipeline writes are removed rather than refused:
        an overwrite's in the output, an append's (a killed conversion's) in its work folder."""
        return self.kind in (OutputKind.OVERWRITE, OutputKind.APPEND)

    def target(self, output: str) -> str:
        """Where the pipeline writes: the output, or an append's work folder under it."""
        return work_dir(output) if self.appends else output
