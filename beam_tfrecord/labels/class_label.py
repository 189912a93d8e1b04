"""The class: one class id (and its name) per picture, or several in a multi-label run, from the
picture's folder, its file name or a manifest row. Its keys are the table's `label` and
`label_text` (`RecordLayout.labeled`); its values are the record's `label` and `label_text`
fields, set by the planner from the listing.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from operator import attrgetter
from typing import Any

from beam_tfrecord.elements import PlannedInput, RecordFields
from beam_tfrecord.labels.base import FileReader, KindTally, LabelKind, Placed
from beam_tfrecord.labels.geometry import PixelTransform

__all__ = ["CLASS", "ClassKind", "ClassTally"]


@dataclass
class ClassTally(KindTally):
    """A classification run counts each record once for its class (a multi-label record once for
    each of its classes) in the run's records per label; nothing of its own."""

    def add(self, facts: Any, split: str, labels: Counter) -> None:
        if isinstance(facts, tuple):
            for name in facts:
                labels[(split, name)] += 1
        else:
            labels[(split, facts)] += 1


class ClassKind(LabelKind):
    """The class of a picture: set from the plan, untouched by the picture's geometry."""

    name = "class"
    names_classes = True

    def encoders(self) -> Mapping[str, Callable[[RecordFields], Any]]:
        return {
            "label": attrgetter("label"),
            "label_text": lambda fields: fields.label_text if fields.label_text is not None else "",
        }

    def place(
        self,
        item: PlannedInput,
        transform: PixelTransform,
        setting: Any,
        placed: Mapping[str, Placed],
        read: FileReader,
    ) -> Placed:
        return Placed(facts=item.label_text)

    def new_tally(self) -> ClassTally:
        return ClassTally()


CLASS = ClassKind()
