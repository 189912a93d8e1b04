"""The kinds of labelled pictures a run converts, each declared once: what `--task` offers and
says, which kinds of label its records hold (`labels.KINDS`), and its docs page. Which annotation
formats read a task is each format's own declaration (plan.sources: `SourceFormat.tasks`).

What reads it: the `--task` option's choices, help and docs table (`plan.annotations.options`),
the `--annotations` help and docs table (one part a task, with its docs page), and every stage
that loops over a run's kinds of label (`labels.of_task`): a new task made of the kinds there
are is a declaration here and the formats that read it; a new kind of label is a module of
`labels`.

Plain data: no stage imported.
"""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["DEFAULT", "TASKS", "TASK_NAMES", "Task", "task"]


@dataclass(frozen=True)
class Task:
    """One kind of labelled picture.

    Args:
      name: the `--task` value.
      help: what its labels are, in a line for `--help` and the docs.
      kinds: its kinds of label (`labels.KINDS`' names), in the order its stages take them.
      docs: its page under docs/.
      negatives: a picture no annotation names is worth keeping as it is (a detection negative,
        which teaches the model its background), not one to leave out (`--unannotated drop`).
      listed_labels: its labels come from the listing (folders, file names, a manifest) unless
        `--annotations` names a format that reads it (CVAT's tags); a format given alone never
        stands for it.
    """

    name: str
    help: str
    kinds: tuple[str, ...]
    docs: str
    negatives: bool = False
    listed_labels: bool = False


TASKS: dict[str, Task] = {
    task.name: task
    for task in (
        Task(
            name="classification",
            help="one class per picture",
            kinds=("class",),
            docs="usage.md",
            listed_labels=True,
        ),
        Task(
            name="detection",
            help="boxes (and masks) per picture",
            kinds=("objects",),
            docs="detection.md",
            negatives=True,
        ),
        Task(
            name="segmentation",
            help="a class id per pixel",
            kinds=("class_mask",),
            docs="segmentation.md",
        ),
        Task(
            name="keypoints",
            help="boxes with each object's keypoints",
            kinds=("objects", "keypoints"),
            docs="keypoints.md",
        ),
        Task(
            name="panoptic",
            help="a category and instance per pixel",
            kinds=("panoptic", "objects"),
            docs="panoptic.md",
        ),
        Task(
            name="captions",
            help="sentences describing each picture",
            kinds=("captions",),
            docs="captions.md",
        ),
    )
}
TASK_NAMES: tuple[str, ...] = tuple(TASKS)
# The task of a run given no `--task` and no `--annotations`: its labels come from the listing.
DEFAULT = "classification"


def task(name: str) -> Task:
    try:
        return TASKS[name]
    except KeyError:
        raise ValueError(f"task must be one of {', '.join(TASK_NAMES)}, not {name!r}") from None
