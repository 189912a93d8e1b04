"""A plain pair of folders: the masks found beside the pictures (`images/` + `masks/`, `image/` +
`label/`, CamVid's `train/` + `trainannot/`), or the masks folder named with `annotations_path`,
matched by the file's stem whatever the extensions; split folders (`train/`, `val/`) are the
splits. Masks of only 0 and 255 (Kaggle's binary masks) are background and foreground, 255 class
1. The masks are paired and read by plan.annotations.segmentation.
"""

from __future__ import annotations

import posixpath
from collections.abc import Mapping
from typing import ClassVar

from beam_tfrecord.elements import MaskRule
from beam_tfrecord.plan.annotations.catalog import stem
from beam_tfrecord.plan.annotations.locate import join, relative_to
from beam_tfrecord.plan.annotations.segmentation import (
    BINARY_NAMES,
    BINARY_SAMPLE,
    Found,
    MaskFormat,
    MaskLayout,
    Pairing,
    Place,
    SegmentationSettings,
    checked_rule,
    first_split,
    sampled_values,
    split_word,
)
from beam_tfrecord.plan.annotations.segmentation_classes import CAMVID_CLASSES

__all__ = ["FORMAT", "Folders"]

IMAGE_FOLDERS = ("images", "image", "imgs", "img")
MASK_FOLDERS = ("masks", "mask", "labels", "label", "annotations", "gt")


def _named(masks_folder: str, base: str) -> Pairing:
    """The masks folder named: every picture's path under --input is its key there."""

    def candidates(root: str, folder: str, rest: str) -> list[tuple[str, str]]:
        return [(masks_folder.rstrip("/"), stem(rest))]

    def under_input(path: str) -> list[Place]:
        rest = relative_to(path, base)
        return [(posixpath.dirname(base), posixpath.basename(base), rest)] if rest else []

    return Pairing(under_input, candidates, lambda place: first_split(place[2]))


def _beside(base: str) -> Pairing:
    """The masks folder found beside the pictures' folder, at any level up to the input's."""

    def places(path: str) -> list[Place]:
        """Every folder from the picture's own up to the input's (a pair may sit above it)."""
        parts = path.split("/")
        floor = len(base.split("/")) - 1
        return [
            ("/".join(parts[:index]), parts[index], "/".join(parts[index + 1 :]))
            for index in range(len(parts) - 2, max(floor, 0) - 1, -1)
        ]

    def candidates(root: str, folder: str, rest: str) -> list[tuple[str, str]]:
        key = stem(rest)
        if folder.lower() in IMAGE_FOLDERS:
            names = [*MASK_FOLDERS, *(name.capitalize() for name in MASK_FOLDERS)]
            return [(join(root, name), key) for name in names]
        return [(join(root, folder + "annot"), key)]  # CamVid's `train/` + `trainannot/`

    def split(place: Place) -> str | None:
        root, folder, rest = place
        if folder.lower() in IMAGE_FOLDERS:  # images/train/x.jpg, or train/images/x.jpg
            return first_split(rest) or split_word(posixpath.basename(root))
        return split_word(folder)

    return Pairing(places, candidates, split)


class _Masks(MaskLayout):
    takes_masks_folder = True

    def pairing(self, settings: SegmentationSettings, given: str | None, base: str) -> Pairing:
        base = base.rstrip("/")
        return _named(given, base) if given is not None else _beside(base)

    def has_folders(self, names: frozenset[str]) -> bool:
        masks = set(MASK_FOLDERS) | {name.capitalize() for name in MASK_FOLDERS}
        return bool(names & set(IMAGE_FOLDERS) and names & masks) or any(f"{n}annot" in names for n in names)

    def class_names(
        self, root: str, settings: SegmentationSettings, found: Found
    ) -> tuple[tuple[str, ...], str]:
        if any(f.endswith("annot") for f in found.mask_folders):
            return CAMVID_CLASSES, "CamVid's 11 class names and Unlabelled (SegNet's layout)"
        return (), ""

    def rule(
        self, class_names: tuple[str, ...], settings: SegmentationSettings, found: Found
    ) -> tuple[MaskRule, str]:
        ignore = settings.ignore
        if class_names == BINARY_NAMES and not settings.class_names:
            if 1 in sampled_values(found):
                return checked_rule(
                    MaskRule(2, ignore), class_names
                ), f"binary masks of 0 and 1, {ignore} ignored"
            # 0 and 255, or 0 alone so far (empty masks first): 255 is the object, never ignored.
            rule = MaskRule(2, ignore if ignore not in (0, 1) else None, remap=((255, 1),))
            return rule, f"binary masks (the first {BINARY_SAMPLE} read hold only 0 and 255): 255 is class 1"
        return super().rule(class_names, settings, found)


class Folders(MaskFormat):
    name = "folders"
    title = "paired folders"
    help = "a pair of folders: pictures and their masks, matched by name (images/ + masks/, ...)"
    looked_for: ClassVar[Mapping[str, str]] = {
        "segmentation": "masks/ beside images/, label/ beside image/, <name>annot/ beside <name>/ "
        "(or name the masks folder with annotations_path)",
    }
    layout = _Masks()
    options = ("path", "ignore_value", "allow_unmatched_annotations", "declared_splits")


FORMAT = Folders()
