"""Cityscapes: `leftImg8bit/<split>/<city>/<id>_leftImg8bit.png` with
`gtFine/<split>/<city>/<id>_gtFine_labelIds.png` (`gtCoarse/` where there is no `gtFine/`); with
`train_ids`, its `_labelTrainIds.png` (createTrainIdLabelImgs.py's), or the label ids mapped by
Cityscapes' table where those were never made; the split folders are the splits. The masks are
paired and read by plan.annotations.segmentation.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import ClassVar

from beam_tfrecord.elements import MaskRule
from beam_tfrecord.plan.annotations.locate import join
from beam_tfrecord.plan.annotations.segmentation import (
    Found,
    MaskFormat,
    MaskLayout,
    Pairing,
    SegmentationSettings,
    checked_rule,
    first_split,
    named_folder,
)
from beam_tfrecord.plan.annotations.segmentation_classes import CITYSCAPES_LABELS, cityscapes_names
from beam_tfrecord.plan.listing import InputFile

__all__ = ["FORMAT", "Cityscapes"]


def _pairing(train_ids: bool) -> Pairing:
    def candidates(root: str, folder: str, rest: str) -> list[tuple[str, str]]:
        if not rest.endswith("_leftImg8bit.png"):
            return []
        key = rest.removesuffix("_leftImg8bit.png")
        found = []
        for gt in ("gtFine", "gtCoarse"):
            if train_ids:
                found.append((join(root, gt), f"{key}_{gt}_labelTrainIds.png"))
            found.append((join(root, gt), f"{key}_{gt}_labelIds.png"))
        return found

    return Pairing(named_folder("leftImg8bit"), candidates, lambda place: first_split(place[2]))


def _label_ids_file(mask: InputFile) -> bool:
    return mask.path.endswith("_labelIds.png")


class _Masks(MaskLayout):
    def pairing(self, settings: SegmentationSettings, given: str | None, base: str) -> Pairing:
        return _pairing(settings.train_ids)

    def has_folders(self, names: frozenset[str]) -> bool:
        return "leftImg8bit" in names and bool(names & {"gtFine", "gtCoarse"})

    def repaired(self, settings: SegmentationSettings, found: Found) -> Pairing | None:
        """createTrainIdLabelImgs.py was not run for every picture: the label ids of every one,
        mapped by the table (one rule a run, never train ids for some and label ids for others)."""
        if settings.train_ids and any(_label_ids_file(m) for m, _ in found.masks.values()):
            return _pairing(False)
        return None

    def class_names(
        self, root: str, settings: SegmentationSettings, found: Found
    ) -> tuple[tuple[str, ...], str]:
        count = "19 train ids" if settings.train_ids else "34 label ids"
        return cityscapes_names(settings.train_ids), f"Cityscapes' class names ({count})"

    def rule(
        self, class_names: tuple[str, ...], settings: SegmentationSettings, found: Found
    ) -> tuple[MaskRule, str]:
        ignore = settings.ignore
        mapped = settings.train_ids and any(_label_ids_file(m) for m, _ in found.masks.values())
        if mapped:  # labelTrainIds were never made: the label ids mapped by the table
            remap = tuple((label.id, label.train_id) for label in CITYSCAPES_LABELS)
            rule = MaskRule(len(class_names), 255, remap=remap)
            return checked_rule(
                rule, class_names
            ), "label ids mapped to train ids by Cityscapes' table, 255 ignored"
        what = "train ids" if settings.train_ids else "label ids"
        return checked_rule(MaskRule(len(class_names), ignore), class_names), f"{what}, {ignore} ignored"

    def palette(self, class_names: Sequence[str], train_ids: bool) -> tuple[tuple[int, int, int], ...]:
        """Cityscapes' own label colours."""
        labels = sorted(
            (label for label in CITYSCAPES_LABELS if not train_ids or label.train_id != 255),
            key=lambda label: label.train_id if train_ids else label.id,
        )
        if len(labels) == len(class_names):
            return tuple(label.colour for label in labels)
        return super().palette(class_names, train_ids)


class Cityscapes(MaskFormat):
    name = "cityscapes"
    title = "Cityscapes"
    help = "Cityscapes: gtFine/ (or gtCoarse/) label id masks beside leftImg8bit/"
    looked_for: ClassVar[Mapping[str, str]] = {
        "segmentation": "gtFine/<split>/<city>/*_gtFine_labelIds.png beside leftImg8bit/",
    }
    layout = _Masks()
    options = ("train_ids", "ignore_value", "allow_unmatched_annotations", "declared_splits")


FORMAT = Cityscapes()
