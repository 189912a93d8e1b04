"""The class: one class id (and its name) per picture, or several in a multi-label run, from the
picture's folder, its file name or a manifest row. Its keys are the table's `label` and
`label_text` (`RecordLayout.labeled`); its values are the record's `label` and `label_text`
fields, set by the planner from the listing.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from operator import attrgetter
from typing import TypeAlias

import numpy as np

from beam_tfrecord.edges import ParsedRecord, Tensor, TorchValue
from beam_tfrecord.elements import PlannedInput
from beam_tfrecord.keys import RecordLayout, key_of
from beam_tfrecord.labels.base import (
    AnyPlaced,
    Checked,
    Checks,
    Encoder,
    FileReader,
    KindTally,
    LabelCounts,
    LabelKind,
    PictureFit,
    Placed,
    ReadContext,
    Section,
    TargetOptions,
    TfTarget,
    TfTargetPair,
)
from beam_tfrecord.labels.geometry import PixelTransform

__all__ = ["CLASS", "ClassFacts", "ClassKind", "ClassTally", "multi_hot"]

# What the tally counts of a record's class: its class name (None: an unlabeled run), or a
# multi-label record's names.
ClassFacts: TypeAlias = str | tuple[str, ...] | None


class _ClassChecks(Checks[None]):
    """Every id names a class, and the stored name is that class's."""

    def __init__(self, class_names: tuple[str, ...] | None) -> None:
        self.names = class_names

    def record(
        self, facts: ParsedRecord, shape: tuple[int, ...], where: str, errors: list[str]
    ) -> Checked[None]:
        names = self.names
        if names is None:  # an unlabeled run
            return Checked()
        labels: list[str] = []
        for label_id in np.asarray(facts["label"]).reshape(-1).tolist():
            if not 0 <= label_id < len(names):
                errors.append(f"{where}: label {label_id} out of range")
                labels.append(str(label_id))
            else:
                labels.append(names[label_id])
        if "label_text" in facts:
            texts = [t.decode() for t in np.asarray(facts["label_text"]).reshape(-1).tolist()]
            if texts != labels:
                errors.append(f"{where}: label text is not {labels!r}")
        return Checked(tuple(labels), "|".join(labels))


def multi_hot(ids: Tensor, classes: int) -> Tensor:
    """Class ids -> float32 [classes] with 1 at each id (zeros for none); TensorFlow."""
    import tensorflow as tf

    return tf.minimum(tf.reduce_sum(tf.one_hot(ids, classes, dtype=tf.float32), axis=0), 1.0)


class _ClassTarget(TfTarget):
    """`(image, label)`, or the image alone in an unlabeled run; a multi-label run's label as a
    multi-hot float32 vector of the class count (Keras' binary cross-entropy takes it)."""

    def __init__(self, context: ReadContext) -> None:
        layout = context.layout
        self.key = key_of(layout, "label") if layout.labeled else ""
        self.classes = len(context.class_names) if layout.multi_label else 0

    def parsed(self, record: dict[str, Tensor]) -> dict[str, Tensor]:
        if self.classes:
            record[self.key] = multi_hot(record[self.key], self.classes)
        return record

    def pair(
        self, record: dict[str, Tensor], image: Tensor, source_hw: Tensor, fit: PictureFit
    ) -> TfTargetPair:
        return (image, record[self.key]) if self.key else image

    def without_image(self, record: dict[str, Tensor]) -> Tensor | None:
        return record[self.key] if self.key else None


@dataclass
class ClassTally(KindTally[ClassFacts]):
    """A classification run counts each record once for its class (a multi-label record once for
    each of its classes) in the run's records per label; nothing of its own."""

    def add(self, facts: ClassFacts, split: str, labels: LabelCounts) -> None:
        if isinstance(facts, tuple):
            for name in facts:
                labels[(split, name)] += 1
        else:
            labels[(split, facts)] += 1


class ClassKind(LabelKind[None, None, ClassFacts, ClassTally, Section, None]):
    """The class of a picture: set from the plan, untouched by the picture's geometry. Its
    values are the record's own `label` and `label_text` fields: it stores nothing of its own
    and has no summary section."""

    name = "class"
    names_classes = True
    labels_picture = True

    def encoders(self) -> Mapping[str, Encoder]:
        return {
            "label": attrgetter("label"),
            "label_text": lambda fields: fields.label_text if fields.label_text is not None else "",
        }

    def place(
        self,
        item: PlannedInput,
        transform: PixelTransform,
        setting: None,
        placed: Mapping[str, AnyPlaced],
        read: FileReader,
    ) -> Placed[None, ClassFacts]:
        return Placed(facts=item.label_text)

    def new_tally(self) -> ClassTally:
        return ClassTally()

    def holds_lists(self, layout: RecordLayout) -> bool:
        return layout.multi_label

    def tf_target(self, context: ReadContext, options: TargetOptions, channels: int | None) -> TfTarget:
        return _ClassTarget(context)

    def torch_target(self, record: ParsedRecord, image_size: tuple[int, int] | None) -> TorchValue:
        import torch

        return torch.tensor(record["label"]) if "label" in record else None

    def checks(self, class_names: tuple[str, ...] | None, section: Section | None) -> Checks[None]:
        """A labeled run's records: the class names labels.txt lists (an unlabeled run has none)."""
        return _ClassChecks(class_names)


CLASS = ClassKind()
