"""Captions: the sentences that describe a picture, stored as the plan gives them (in their files'
order) under Model Garden's `image/caption` (the table's `captions` group). Nothing moves with the
picture; a picture without one is stored with none (`--unannotated keep`).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from beam_tfrecord.elements import PlannedInput, RecordFields
from beam_tfrecord.labels.base import FileReader, KindTally, LabelKind, Placed
from beam_tfrecord.labels.geometry import PixelTransform

__all__ = ["CAPTIONS", "CaptionTally", "CaptionsKind"]


@dataclass
class CaptionTally(KindTally):
    """A captions run's records per caption count (0: a picture kept without one)."""

    per_image: Counter = field(default_factory=Counter)

    def add(self, facts: Any, split: str, labels: Counter) -> None:
        self.per_image[facts] += 1


class CaptionsKind(LabelKind):
    """The picture's sentences."""

    name = "captions"

    def key_groups(self, setting: Any) -> tuple[str, ...]:
        return ("captions",)

    def encoders(self) -> Mapping[str, Callable[[RecordFields], Any]]:
        return {"caption": lambda fields: fields.labels["captions"]}

    def place(
        self,
        item: PlannedInput,
        transform: PixelTransform,
        setting: Any,
        placed: Mapping[str, Placed],
        read: FileReader,
    ) -> Placed:
        captions = item.annotations.captions if item.annotations is not None else ()
        return Placed(captions, len(captions))

    def new_tally(self) -> CaptionTally:
        return CaptionTally()


CAPTIONS = CaptionsKind()
