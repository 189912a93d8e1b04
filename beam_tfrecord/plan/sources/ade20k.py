"""ADE20K (SceneParsing, `ADEChallengeData2016`): `images/{training,validation}/x.jpg` with
`annotations/<same>/x.png`; 0 is "other"; the class names from `objectInfo150` where the dataset
keeps it, else the challenge's 150. The masks are paired and read by
plan.annotations.segmentation.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import ClassVar

from beam_tfrecord import storage
from beam_tfrecord.elements import MaskRule
from beam_tfrecord.plan.annotations.catalog import read_one, stem
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
from beam_tfrecord.plan.annotations.segmentation_classes import ADE20K_CLASSES

__all__ = ["FORMAT", "Ade20k"]


class _Masks(MaskLayout):
    def pairing(self, settings: SegmentationSettings, given: str | None, base: str) -> Pairing:
        def candidates(root: str, folder: str, rest: str) -> list[tuple[str, str]]:
            if rest.split("/")[0] not in ("training", "validation"):
                return []
            return [(join(root, "annotations"), stem(rest) + ".png")]

        return Pairing(named_folder("images"), candidates, lambda place: first_split(place[2]))

    def has_folders(self, names: frozenset[str]) -> bool:
        return "images" in names and "annotations" in names

    def class_names(
        self, root: str, settings: SegmentationSettings, found: Found
    ) -> tuple[tuple[str, ...], str]:
        info = _object_info(root)
        if info:
            return info, "class names from objectInfo150"
        return ADE20K_CLASSES, "ADE20K's 150 class names and 0 other"

    def rule(
        self, class_names: tuple[str, ...], settings: SegmentationSettings, found: Found
    ) -> tuple[MaskRule, str]:
        ignore = settings.ignore
        rule = checked_rule(MaskRule(len(class_names), ignore), class_names)
        return rule, f"values are class ids, 0 other, {ignore} ignored"


def _object_info(root: str) -> tuple[str, ...]:
    """ADE20K's own table of its 150 classes: `objectInfo150.txt` as the challenge's zip holds it
    (tab-separated `Idx Ratio Train Val Name`), or the devkit's `objectInfo150.csv`; the names as
    written."""
    for name in ("objectInfo150.txt", "objectInfo150.csv"):
        path = join(root, name)
        if not storage.is_file(path, if_remote=True):
            continue
        try:
            lines = [line for line in read_one(path).decode("utf-8-sig").splitlines() if line.strip()]
        except Exception:  # the built-in names apply
            continue
        separator = "\t" if lines and "\t" in lines[0] else ","
        names = [line.split(separator, 4)[-1].strip() for line in lines[1:]]
        if len(names) == 150:
            return ("other", *names)
    return ()


class Ade20k(MaskFormat):
    name = "ade20k"
    title = "ADE20K"
    help = "ADE20K: annotations/{training,validation}/ masks beside images/{training,validation}/"
    looked_for: ClassVar[Mapping[str, str]] = {
        "segmentation": "annotations/{training,validation}/ beside images/{training,validation}/",
    }
    layout = _Masks()
    options = ("ignore_value", "allow_unmatched_annotations", "declared_splits")


FORMAT = Ade20k()
