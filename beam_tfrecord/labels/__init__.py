"""The kinds of label, one module each, and the one registry of them: a task is a tuple of kinds
(`tasks.Task.kinds`), and every stage loops over a run's kinds instead of naming one.

    class       class_label: one class (or several) per picture, from its folder, name or a manifest
    panoptic    panoptic: each pixel's category and instance, from a PNG of segment ids per picture
    objects     objects/: boxes with their classes and flags, and instance masks
    class_mask  class_mask: a class id per pixel, from a mask file per picture
    captions    captions: the sentences that describe the picture
    keypoints   keypoints: each object's points, beside its box

The registry's order is the order a run's kinds write their summary sections in, and a task's
kinds are in its order (a reader tells the task from its sections, and the first kind gives
`load_dataset`'s target: a panoptic run's masks before its things' boxes). This layer sits
between the shared contracts (elements, keys, reasons, ...) and the stages: a kind imports only
the shared modules and this folder, and every stage may import it.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from beam_tfrecord import tasks
from beam_tfrecord.edges import Json
from beam_tfrecord.labels.base import (
    Annotated,
    AnyKind,
    AnyPlaced,
    AnyTally,
    Checked,
    Checks,
    Encoder,
    FileReader,
    Grown,
    KindTally,
    LabelCounts,
    LabelKind,
    PictureFit,
    Placed,
    ReadContext,
    Section,
    SectionInputs,
    TargetOptions,
    TfTarget,
    TfTargetPair,
)
from beam_tfrecord.labels.captions import CAPTIONS
from beam_tfrecord.labels.class_label import CLASS
from beam_tfrecord.labels.class_mask import CLASS_MASK
from beam_tfrecord.labels.keypoints import KEYPOINTS
from beam_tfrecord.labels.objects import OBJECTS
from beam_tfrecord.labels.panoptic import PANOPTIC

__all__ = [
    "CLASSIFIED",
    "KINDS",
    "Annotated",
    "AnyKind",
    "AnyPlaced",
    "AnyTally",
    "Checked",
    "Checks",
    "Encoder",
    "FileReader",
    "Grown",
    "KindTally",
    "LabelCounts",
    "LabelKind",
    "PictureFit",
    "Placed",
    "ReadContext",
    "RunLabels",
    "Section",
    "SectionInputs",
    "TargetOptions",
    "TfTarget",
    "TfTargetPair",
    "kind",
    "kinds",
    "of_task",
]

KINDS: dict[str, AnyKind] = {k.name: k for k in (CLASS, PANOPTIC, OBJECTS, CLASS_MASK, CAPTIONS, KEYPOINTS)}


def kind(name: str) -> AnyKind:
    try:
        return KINDS[name]
    except KeyError:
        raise ValueError(f"kind of label must be one of {', '.join(KINDS)}, not {name!r}") from None


def kinds(names: Sequence[str]) -> tuple[AnyKind, ...]:
    """The named kinds, in the order given (a task's)."""
    return tuple(kind(name) for name in names)


def of_task(name: str) -> tuple[AnyKind, ...]:
    """A task's kinds of label (`tasks.Task.kinds`), in order."""
    return kinds(tasks.task(name).kinds)


@dataclass(frozen=True)
class RunLabels:
    """A run's kinds of label, in order, each with what its workers need (read once per shard
    task, not per picture), and the key groups its records hold."""

    kinds: tuple[AnyKind, ...]
    settings: tuple[object, ...]  # each kind's own (its `read_setting`'s), in the kinds' order
    groups: tuple[str, ...]

    @classmethod
    def of(cls, names: Sequence[str], staged: Mapping[str, Json] | None = None) -> RunLabels:
        """The named kinds with their settings read from their staged forms (a shard task's)."""
        found = kinds(names)
        settings = tuple(k.read_setting((staged or {}).get(k.name)) for k in found)
        groups = tuple(g for k, s in zip(found, settings, strict=True) for g in k.key_groups(s))
        return cls(found, settings, groups)


# A classification run's: the class alone.
CLASSIFIED = RunLabels.of(("class",))
