"""Captions: the sentences that describe a picture, stored as the plan gives them (in their files'
order) under Model Garden's `image/caption` (the table's `captions` group). Nothing moves with the
picture; a picture without one is stored with none (`--unannotated keep`).
"""

from __future__ import annotations

import dataclasses
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import TypedDict

from beam_tfrecord.edges import Json, JsonObject, ParsedRecord, Tensor
from beam_tfrecord.elements import ImageAnnotations, PlannedInput
from beam_tfrecord.keys import RecordLayout, key_of
from beam_tfrecord.labels.base import (
    AnyPlaced,
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
from beam_tfrecord.labels.geometry import PixelTransform

__all__ = [
    "CAPTIONS",
    "CaptionSummary",
    "CaptionTally",
    "CaptionsKind",
    "CaptionsPerPicture",
    "captions_of",
    "captions_value",
]


class CaptionsPerPicture(TypedDict, total=False):
    """The fewest, mean and most captions a picture with captions holds (`CaptionSummary`).
    Empty in a section read without it."""

    min: int
    mean: float
    max: int


@dataclass
class CaptionSummary(Section):
    """A captions run's captions (summary.json's `captions`): how many were stored, how they
    spread over the pictures, the pictures stored without one (`--unannotated keep`) and the
    entries that name no listed picture (annotations_without_image.jsonl, lines that cannot be
    read included)."""

    kind: str  # the annotations' format (summary.json's key)
    captions: int = 0
    pictures_with_captions: int = 0
    pictures_without_caption: int = 0
    per_picture: CaptionsPerPicture = field(default_factory=CaptionsPerPicture)
    unmatched_entries: int = 0
    caption_key: str = "image/caption (every caption of the picture, UTF-8, in its file's order)"
    found_at: str = ""

    def rows(self) -> list[tuple[str, str]]:
        """Where the captions came from, how many, how spread."""
        rows = [("captions", self.found_at)] if self.found_at else []
        per = self.per_picture
        rows.append(
            (
                "captions stored",
                f"{self.captions} for {self.pictures_with_captions} pictures "
                f"({per.get('min', 0)} to {per.get('max', 0)} a picture)",
            )
        )
        if self.pictures_without_caption:
            rows.append(("pictures without a caption", str(self.pictures_without_caption)))
        if self.unmatched_entries:
            rows.append(
                ("captions naming no picture", f"{self.unmatched_entries} (annotations_without_image.jsonl)")
            )
        return rows

    def merged(self, new: Section, grown: Grown) -> CaptionSummary:
        """Captions and pictures summed; the fewest, mean and most captions a picture recomputed."""
        assert isinstance(new, CaptionSummary)
        records = (
            self.pictures_with_captions
            + self.pictures_without_caption
            + new.pictures_with_captions
            + new.pictures_without_caption
        )
        captions = self.captions + new.captions
        lows = [s.per_picture.get("min", 0) for s in (self, new) if s.pictures_with_captions]
        return dataclasses.replace(
            new,
            captions=captions,
            pictures_with_captions=self.pictures_with_captions + new.pictures_with_captions,
            pictures_without_caption=self.pictures_without_caption + new.pictures_without_caption,
            per_picture={
                "min": min(lows, default=0),
                "mean": round(captions / records, 2) if records else 0.0,
                "max": max(self.per_picture.get("max", 0), new.per_picture.get("max", 0)),
            },
        )


def captions_of(annotations: ImageAnnotations | None) -> tuple[str, ...]:
    """The picture's sentences, in their files' order (() where it has none)."""
    found = annotations.values.get("captions") if annotations is not None else None
    return tuple(found) if found else ()


def captions_value(captions: Sequence[str]) -> dict[str, Json]:
    """A picture's sentences as its `ImageAnnotations.values` (none: no value)."""
    return {"captions": list(captions)} if captions else {}


class _CaptionTarget(TfTarget):
    """`(image, captions)`: a 1-D tf.string tensor of the picture's captions, in their file's
    order, batched as a RaggedTensor."""

    ragged = True

    def __init__(self, context: ReadContext) -> None:
        self.key = key_of(context.layout, "caption")

    def pair(
        self, record: dict[str, Tensor], image: Tensor, source_hw: Tensor, fit: PictureFit
    ) -> TfTargetPair:
        return image, record[self.key]


class _CaptionChecks(Checks[None]):
    """A captions record's first caption stands for it on the contact sheet."""

    def record(
        self, facts: ParsedRecord, shape: tuple[int, ...], where: str, errors: list[str]
    ) -> Checked[None]:
        texts = [t.decode("utf-8", "replace") for t in facts["caption"]]
        return Checked(shown=texts[0] if texts else "(no caption)")


@dataclass
class CaptionTally(KindTally[int]):
    """A captions run's records per caption count (0: a picture kept without one)."""

    per_image: Counter[int] = field(default_factory=Counter)

    def add(self, facts: int, split: str, labels: LabelCounts) -> None:
        self.per_image[facts] += 1


class CaptionsKind(LabelKind[None, tuple[str, ...], int, CaptionTally, CaptionSummary, None]):
    """The picture's sentences: stored as they are, the tally counting how many a record holds."""

    name = "captions"
    keys_named = "Model Garden's image/caption"

    def key_groups(self, setting: None) -> tuple[str, ...]:
        return ("captions",)

    def encoders(self) -> Mapping[str, Encoder]:
        return {"caption": lambda fields: fields.labels["captions"]}

    def place(
        self,
        item: PlannedInput,
        transform: PixelTransform,
        setting: None,
        placed: Mapping[str, AnyPlaced],
        read: FileReader,
    ) -> Placed[tuple[str, ...], int]:
        captions = captions_of(item.annotations)
        return Placed(captions, len(captions))

    def new_tally(self) -> CaptionTally:
        return CaptionTally()

    def holds_lists(self, layout: RecordLayout) -> bool:
        return True

    def tf_target(self, context: ReadContext, options: TargetOptions, channels: int | None) -> TfTarget:
        return _CaptionTarget(context)

    def checks(self, class_names: tuple[str, ...] | None, section: CaptionSummary | None) -> Checks[None]:
        return _CaptionChecks()

    section_key = "captions"
    section_type = CaptionSummary

    def section(self, facts: JsonObject | None, tally: CaptionTally, inputs: SectionInputs) -> CaptionSummary:
        counts = tally.per_image
        records = sum(counts.values())
        stored = sum(k * n for k, n in counts.items())
        with_some = {k: n for k, n in counts.items() if k}
        return CaptionSummary(
            kind=inputs.format,
            captions=stored,
            pictures_with_captions=sum(with_some.values()),
            pictures_without_caption=counts.get(0, 0),
            per_picture={
                "min": min(with_some, default=0),
                "mean": round(stored / records, 2) if records else 0.0,
                "max": max(counts, default=0),
            },
            unmatched_entries=inputs.unmatched_entries,
            found_at=inputs.found_at,
        )


CAPTIONS = CaptionsKind()
