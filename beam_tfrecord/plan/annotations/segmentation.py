"""A segmentation run's sources: each picture paired with its mask file the way the dataset's own
tools lay them out, found from the dataset's root or from its images folder, local or gs://.

- `voc`: `JPEGImages/x.jpg` with `SegmentationClass/x.png` (labelme2voc's `SegmentationClassPNG/`
  first, where its `SegmentationClass/` holds `.npy` arrays; DeepLab's `SegmentationClassRaw/` or
  the augmented `SegmentationClassAug/` where there is no `SegmentationClass/`); splits from
  `ImageSets/Segmentation/*.txt`; names from `class_names.txt` or `labels.txt`, else VOC's 21;
- `cityscapes`: `leftImg8bit/<split>/<city>/<id>_leftImg8bit.png` with
  `gtFine/<split>/<city>/<id>_gtFine_labelIds.png` (`gtCoarse/` where there is no `gtFine/`); with
  `train_ids`, its `_labelTrainIds.png` (createTrainIdLabelImgs.py's), or the label ids mapped by
  Cityscapes' table where those were never made; the split folders are the splits;
- `ade20k`: `images/{training,validation}/x.jpg` with `annotations/<same>/x.png`; 0 is "other";
- `folders`: a plain pair found beside the pictures (`images/` + `masks/`, `image/` + `label/`,
  CamVid's `train/` + `trainannot/`), or the masks folder named with `annotations_path`, matched
  by the file's stem whatever the extensions; split folders (`train/`, `val/`) are the splits.

Every listed file is a picture of the dataset or a `skipped` line saying what it is (a mask, the
visualisations labelme writes, Cityscapes' other ground-truth files): a mask is never a picture of
a class. A mask that names no listed picture is an `annotations_without_image` line.

How mask values become class ids is one `MaskRule` for the run (`labels.class_mask` applies it):
the ignore value (255 by default), the dataset's palette for masks saved as colours, and for a
plain pair whose masks hold only 0 and 255 (Kaggle's binary masks) the documented rule that 255 is
class 1, decided from the first masks read here, never per picture.
"""

from __future__ import annotations

import io
import posixpath
import re
from collections import defaultdict
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np
from PIL import Image

from beam_tfrecord import reasons, storage, tasks
from beam_tfrecord.config_base import ConfigError
from beam_tfrecord.elements import AnnotationKind, ImageAnnotations, MaskFile, MaskRule
from beam_tfrecord.plan.annotations.catalog import ANNOTATION_EXTENSIONS, read_one, stem
from beam_tfrecord.plan.annotations.declared import DeclaredSplits, split_name
from beam_tfrecord.plan.annotations.locate import input_base, join, relative_to
from beam_tfrecord.plan.annotations.paths import AnnotationPath
from beam_tfrecord.plan.annotations.results import AnnotationSet, UnmatchedEntry
from beam_tfrecord.plan.annotations.segmentation_classes import (
    ADE20K_CLASSES,
    CAMVID_CLASSES,
    CITYSCAPES_LABELS,
    VOC_CLASSES,
    VOC_VOID_COLOUR,
    cityscapes_names,
    voc_palette,
)
from beam_tfrecord.plan.listing import InputFile, list_inputs, skip_reason

__all__ = [
    "KINDS",
    "LOOKED_FOR",
    "MASK_EXTENSIONS",
    "SegmentationSettings",
    "display_palette",
    "load_segmentation",
    "pairs_any",
    "title",
]

MASK_EXTENSIONS = (".png", ".bmp", ".gif", ".tif", ".tiff", ".jpg", ".jpeg", ".webp", ".pgm", ".ppm")
NAMES_FILES = ("class_names.txt", "labels.txt", "classes.txt")
# How many masks a plain pair's launcher reads to tell binary 0/255 masks apart.
BINARY_SAMPLE = 16
KINDS = tasks.SEGMENTATION_FORMATS  # in the order a layout is looked for
_TITLES = {"voc": "Pascal VOC", "cityscapes": "Cityscapes", "ade20k": "ADE20K", "folders": "paired folders"}
LOOKED_FOR = {
    "voc": "SegmentationClass/ (or labelme2voc's SegmentationClassPNG/) beside JPEGImages/",
    "cityscapes": "gtFine/<split>/<city>/*_gtFine_labelIds.png beside leftImg8bit/",
    "ade20k": "annotations/{training,validation}/ beside images/{training,validation}/",
    "folders": "masks/ beside images/, label/ beside image/, <name>annot/ beside <name>/ "
    "(or name the masks folder with annotations_path)",
}
# Where VOC-layout masks are, in the order looked for: labelme2voc's PNGs (its
# SegmentationClass/ holds .npy arrays), VOC's own palette PNGs, then DeepLab's single-channel
# copies (remove_gt_colormap.py's SegmentationClassRaw/) and the SBD-augmented set's.
VOC_MASK_FOLDERS = (
    "SegmentationClassPNG",
    "SegmentationClass",
    "SegmentationClassRaw",
    "SegmentationClassAug",
)
IMAGE_FOLDERS = ("images", "image", "imgs", "img")
MASK_FOLDERS = ("masks", "mask", "labels", "label", "annotations", "gt")


def title(kind: str) -> str:
    return _TITLES[kind]


@dataclass(frozen=True)
class SegmentationSettings:
    """What a segmentation run asks of its sources.

    Args:
      ignore: the value that means "not labelled" in the masks (and fills a pad's margins).
      train_ids: Cityscapes: the 19 training classes instead of the 34 label ids.
      class_names: fixes the class names (id = position), instead of the dataset's.
      declared_splits: the dataset's own splits are kept (no `--splits` given).
    """

    ignore: int = 255
    train_ids: bool = False
    class_names: tuple[str, ...] | None = None
    declared_splits: bool = True


Place = tuple[str, str, str]  # a picture's (dataset root, images folder's name, path under it)


@dataclass(frozen=True)
class _Pairing:
    """Where one layout keeps a picture's mask: `places(path)` are the ways a picture's full path
    reads as (root, images folder, rest), nearest first; `candidates(root, folder, rest)` are the
    (mask folder, key) pairs to look for, in order, the key being the mask's path under that folder
    without its extension (any extension matches) or with it (that file only); `split` is the
    split a place's folders declare."""

    places: Callable[[str], list[Place]]
    candidates: Callable[[str, str, str], list[tuple[str, str]]]
    split: Callable[[Place], str | None]


def _named_folder(pattern: str) -> Callable[[str], list[Place]]:
    """The last folder of the path matching `pattern` (and the path under it matching `rest`)."""
    compiled = re.compile(rf"^(?P<root>.*?)/?(?P<folder>{pattern})$")

    def places(path: str) -> list[Place]:
        parts = path.split("/")
        for index in range(len(parts) - 2, -1, -1):
            match = compiled.match(parts[index])
            if match is not None:
                return [("/".join(parts[:index]), parts[index], "/".join(parts[index + 1 :]))]
        return []

    return places


def _voc_pairing() -> _Pairing:
    def candidates(root: str, folder: str, rest: str) -> list[tuple[str, str]]:
        key = stem(rest)
        return [(join(root, name), key + ".png") for name in VOC_MASK_FOLDERS]

    return _Pairing(_named_folder("JPEGImages"), candidates, lambda place: None)


def _cityscapes_pairing(train_ids: bool) -> _Pairing:
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

    return _Pairing(_named_folder("leftImg8bit"), candidates, lambda place: _first_split(place[2]))


def _ade20k_pairing() -> _Pairing:
    def candidates(root: str, folder: str, rest: str) -> list[tuple[str, str]]:
        if rest.split("/")[0] not in ("training", "validation"):
            return []
        return [(join(root, "annotations"), stem(rest) + ".png")]

    return _Pairing(_named_folder("images"), candidates, lambda place: _first_split(place[2]))


def _folders_pairing(masks_folder: str | None, base: str) -> _Pairing:
    base = base.rstrip("/")
    if masks_folder is not None:  # named: every picture's path under --input is its key there

        def named(root: str, folder: str, rest: str) -> list[tuple[str, str]]:
            return [(masks_folder.rstrip("/"), stem(rest))]

        def under_input(path: str) -> list[Place]:
            rest = relative_to(path, base)
            return [(posixpath.dirname(base), posixpath.basename(base), rest)] if rest else []

        return _Pairing(under_input, named, lambda place: _first_split(place[2]))

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
            return _first_split(rest) or _split_word(posixpath.basename(root))
        return _split_word(folder)

    return _Pairing(places, candidates, split)


def _split_word(word: str) -> str | None:
    return split_name(word) or {"training": "train"}.get(word.lower())


def _first_split(rest: str) -> str | None:
    parts = rest.split("/")
    return _split_word(parts[0]) if len(parts) > 1 else None


class _Folders:
    """Files by folder, from the listing where the folder is under the input, else listed once
    (the masks beside an images folder given as the input)."""

    def __init__(self, files: Sequence[InputFile], base: str, outside: bool = True) -> None:
        self.files = files
        self.base = base.rstrip("/")
        self.outside = outside  # folders outside the input are listed too
        self._index: dict[str, dict[str, list[InputFile]]] = {}
        self._dirs: set[str] | None = None

    def _has_dir(self, under: str) -> bool:
        """Whether the listing holds a folder (a relpath), without scanning it for each name asked."""
        if self._dirs is None:
            self._dirs = {""}
            for file in self.files:
                parts = file.relpath.split("/")[:-1]
                self._dirs.update("/".join(parts[:end]) for end in range(1, len(parts) + 1))
        return under in self._dirs

    def index(self, folder: str) -> dict[str, list[InputFile]]:
        """The folder's mask files: key (path under it, with and without extension) -> files."""
        folder = folder.rstrip("/")
        if not storage.is_absolute(folder):
            return {}  # a place above the filesystem's root: none
        if folder not in self._index:
            under = relative_to(folder, self.base)
            if under is not None and not self._has_dir(under):
                keyed = []
            elif under is not None:
                head = under + "/" if under else ""
                found = [f for f in self.files if f.relpath.startswith(head) and f.problem is None]
                keyed = [(f.relpath[len(head) :], f) for f in found]
            else:
                keyed = [(f.relpath, f) for f in _listed(folder)] if self.outside else []
            index: dict[str, list[InputFile]] = defaultdict(list)
            for relpath, file in keyed:
                if relpath.lower().endswith(MASK_EXTENSIONS) and skip_reason(relpath) is None:
                    index[relpath].append(file)
                    index[stem(relpath)].append(file)
            self._index[folder] = dict(index)
        return self._index[folder]


def _listed(folder: str) -> list[InputFile]:
    if not storage.is_folder(folder, if_remote=True):
        return []
    try:
        return [f for f in list_inputs(folder) if f.problem is None]
    except (ConfigError, ValueError, OSError):
        return []


@dataclass
class _Found:
    """What pairing found: picture relpath -> (its mask, its mask's folder), the folders that held
    masks, and each picture's split by its folders."""

    masks: dict[str, tuple[InputFile, str]]
    mask_folders: set[str]
    splits: dict[str, str | None]
    roots: set[str]


def _pair(files: Sequence[InputFile], pairing: _Pairing, folders: _Folders) -> tuple[list[InputFile], _Found]:
    """The listed pictures of the layout, and their masks: a picture is a listed image (not an
    annotation file) in a place of the layout; the first place whose mask folder holds its mask
    pairs it."""
    candidates: list[tuple[InputFile, list[Place]]] = []
    for file in files:
        if file.problem is not None or skip_reason(file.relpath) is not None:
            continue
        if posixpath.splitext(file.relpath)[1].lower() in ANNOTATION_EXTENSIONS:
            continue
        places = pairing.places(file.path)
        if places:
            candidates.append((file, places))
    found = _Found({}, set(), {}, set())
    placed: dict[str, Place] = {}
    matches: dict[str, list[tuple[InputFile, str]]] = {}  # picture -> its masks, candidate order
    for file, places in candidates:
        placed[file.relpath] = places[0]
        for place in places:
            here = [
                (masks[0], f) for f, key in pairing.candidates(*place) if (masks := folders.index(f).get(key))
            ]
            if here:
                matches[file.relpath] = here
                placed[file.relpath] = place
                break
    # One mask folder a folder of pictures: the one that pairs the most of them (the first in
    # the layout's order on a tie), so a devkit with VOC's masks and the augmented set's is read
    # from one of them, never picture by picture from both (CamVid's train/ and val/ each have
    # their own).
    chosen: dict[tuple[str, str], str] = {}
    order = list(dict.fromkeys(f for here in matches.values() for _, f in here))
    counts: dict[tuple[str, str], dict[str, int]] = defaultdict(dict)
    for relpath, here in matches.items():
        tally = counts[placed[relpath][:2]]
        for folder in dict.fromkeys(f for _, f in here):
            tally[folder] = tally.get(folder, 0) + 1
    for pictures_folder, tally in counts.items():
        chosen[pictures_folder] = max(tally, key=lambda f: (tally[f], -order.index(f)))
    for relpath, here in matches.items():
        folder = chosen[placed[relpath][:2]]
        mask = next((m for m in here if m[1] == folder), None)
        if mask is not None:
            found.masks[relpath] = mask
            found.mask_folders.add(folder.rstrip("/"))
    # A picture inside a folder of masks is a mask (CamVid's `trainannot/` is a place too).
    pictures = [
        f
        for f, _ in candidates
        if not any(relative_to(f.path, folder) is not None for folder in found.mask_folders)
    ]
    if found.masks:  # the dataset's pictures: those in a folder named as the paired ones' (test/images/ too)
        used = {placed[r][1] for r in found.masks}
        pictures = [f for f in pictures if placed[f.relpath][1] in used]
    kept = {f.relpath for f in pictures}
    found.masks = {r: m for r, m in found.masks.items() if r in kept}
    found.roots = {placed[r][0] for r in found.masks}
    found.splits = {f.relpath: pairing.split(placed[f.relpath]) for f in pictures}
    return pictures, found


def load_segmentation(
    kind: AnnotationKind,
    files: Sequence[InputFile],
    paths: Sequence[AnnotationPath],
    settings: SegmentationSettings,
) -> AnnotationSet:
    """Every listed picture of `kind`'s layout with its mask file, the rule that reads the masks,
    the class names and the declared splits (see the module docstring)."""
    if kind not in _TITLES:
        raise ValueError(f"annotations must be one of {', '.join(_TITLES)} for segmentation, not {kind!r}")
    if any(p.split for p in paths) or len(paths) > 1:
        raise ValueError(f"annotations_path: {_TITLES[kind]} masks take one folder, without a split")
    base = input_base(files)
    given = paths[0].path if paths else None
    if given is not None and kind != "folders":
        raise ValueError(
            f"annotations_path names the masks folder of --annotations folders; {_TITLES[kind]} masks "
            "are found where the dataset keeps them"
        )
    folders = _Folders(files, base)
    pictures, found = _pair(files, _pairing(kind, settings, given, base), folders)
    if (
        kind == "cityscapes"
        and settings.train_ids
        and any(_label_ids_file(m) for m, _ in found.masks.values())
    ):
        # createTrainIdLabelImgs.py was not run for every picture: the label ids of every one,
        # mapped by the table (one rule a run, never train ids for some and label ids for others).
        pictures, found = _pair(files, _cityscapes_pairing(False), folders)
    root = _root(found, base)
    if not found.masks:  # nothing to read: the planner's match check says so in one line
        return _nothing_found(kind, files, pictures, found, folders)
    class_names, names_from = _class_names(kind, root, settings, found, folders)
    if not class_names:  # a plain pair that names no classes: binary masks, or refused
        class_names, names_from = _binary_names(found)
    rule, rule_text = _rule(kind, class_names, settings, found)
    images: dict[str, ImageAnnotations] = {}
    for file in pictures:
        mask = found.masks.get(file.relpath)
        mask_file = None
        if mask is not None:
            shown = relative_to(mask[0].path, root) or mask[0].path
            mask_file = MaskFile(mask[0].path, mask[0].size, shown)
        images[file.relpath] = ImageAnnotations((), stem(file.relpath), class_mask=mask_file)
    unannotated = frozenset(r for r in images if images[r].class_mask is None)
    declared = _declared(kind, root, files, pictures, found)
    if declared is not None and settings.declared_splits:
        unannotated = frozenset(r for r in unannotated if r in declared.split_of)
    where = ", ".join(sorted(relative_to(f, root) or f for f in found.mask_folders)[:3]) or "nowhere"
    found_at = f"{_TITLES[kind]} masks in {where} (dataset root {root or base}); {names_from}; {rule_text}"
    return AnnotationSet(
        kind,
        class_names,
        images,
        unannotated=unannotated,
        sources=_sources(files, images, found, folders, kind),
        unmatched=_unmatched(found, folders, images, root),
        found_at=found_at,
        declared=declared,
        mask_rule=rule,
        looked_for=LOOKED_FOR[kind],
        task="segmentation",
    )


def _pairing(kind: str, settings: SegmentationSettings, given: str | None, base: str) -> _Pairing:
    if kind == "voc":
        return _voc_pairing()
    if kind == "cityscapes":
        return _cityscapes_pairing(settings.train_ids)
    if kind == "ade20k":
        return _ade20k_pairing()
    return _folders_pairing(given, base)


def display_palette(
    kind: str, class_names: Sequence[str], train_ids: bool
) -> tuple[tuple[int, int, int], ...]:
    """The colour the contact sheet draws each class id in: the dataset's own (Cityscapes' label
    colours), else the VOC colour map that VOC's masks, labelme and imgviz use."""
    if kind == "cityscapes":
        labels = sorted(
            (label for label in CITYSCAPES_LABELS if not train_ids or label.train_id != 255),
            key=lambda label: label.train_id if train_ids else label.id,
        )
        if len(labels) == len(class_names):
            return tuple(label.colour for label in labels)
    return voc_palette(len(class_names))


def folder_names(files: Sequence[InputFile]) -> frozenset[str]:
    """Every folder name the listing's relative paths hold (one pass over them)."""
    names: set[str] = set()
    for file in files:
        names.update(file.relpath.split("/")[:-1])
    return frozenset(names)


def pairs_any(
    kind: str, files: Sequence[InputFile], *, outside: bool = True, names: frozenset[str] | None = None
) -> bool:
    """Whether `kind`'s layout pairs any listed picture with a mask (a run given `--task
    segmentation` without `--annotations` takes the first format that does); `outside`: masks
    beside the input count too (else only those the listing holds, and a listing without the
    layout's folders is told apart from its folder names alone, never paired file by file)."""
    if not outside and not _has_layout_folders(kind, names if names is not None else folder_names(files)):
        return False
    base = input_base(files)
    pairing = _pairing(kind, SegmentationSettings(), None, base)
    _, found = _pair(files, pairing, _Folders(files, base, outside))
    return bool(found.masks)


def _nothing_found(
    kind: AnnotationKind,
    files: Sequence[InputFile],
    pictures: Sequence[InputFile],
    found: _Found,
    folders: _Folders,
) -> AnnotationSet:
    """No picture pairs with a mask: every picture unannotated, for the match check to refuse."""
    images = {f.relpath: ImageAnnotations((), stem(f.relpath)) for f in pictures}
    return AnnotationSet(
        kind,
        (),
        images,
        unannotated=frozenset(images),
        sources=_sources(files, images, found, folders, kind),
        mask_rule=MaskRule(0),
        looked_for=LOOKED_FOR[kind],
        task="segmentation",
    )


def _has_layout_folders(kind: str, names: frozenset[str]) -> bool:
    """Whether the listing's folder names (`folder_names`) hold the folders `kind`'s layout pairs,
    so a class-folder run of a million pictures pays no pairing."""
    if kind == "voc":
        return "JPEGImages" in names and bool(names & set(VOC_MASK_FOLDERS))
    if kind == "cityscapes":
        return "leftImg8bit" in names and bool(names & {"gtFine", "gtCoarse"})
    if kind == "ade20k":
        return "images" in names and "annotations" in names
    masks = set(MASK_FOLDERS) | {name.capitalize() for name in MASK_FOLDERS}
    return bool(names & set(IMAGE_FOLDERS) and names & masks) or any(f"{n}annot" in names for n in names)


def _label_ids_file(mask: InputFile) -> bool:
    return mask.path.endswith("_labelIds.png")


def _root(found: _Found, base: str) -> str:
    if len(found.roots) == 1:
        return next(iter(found.roots)) or base
    return base


def _class_names(
    kind: str, root: str, settings: SegmentationSettings, found: _Found, folders: _Folders
) -> tuple[tuple[str, ...], str]:
    """The class names by id and where they came from, in words."""
    if settings.class_names:
        return tuple(settings.class_names), "class names from class_names"
    for folder in dict.fromkeys(
        [root, *sorted({posixpath.dirname(f) for f in found.mask_folders}), folders.base]
    ):
        for name in NAMES_FILES:
            path = join(folder, name)
            names = _names_file(path)
            if names:
                return names, f"class names from {relative_to(path, root) or path}"
    if kind == "voc":
        return VOC_CLASSES, "Pascal VOC's 21 class names"
    if kind == "cityscapes":
        count = "19 train ids" if settings.train_ids else "34 label ids"
        return cityscapes_names(settings.train_ids), f"Cityscapes' class names ({count})"
    if kind == "ade20k":
        info = _ade_info(root)
        if info:
            return info, "class names from objectInfo150"
        return ADE20K_CLASSES, "ADE20K's 150 class names and 0 other"
    if any(f.endswith("annot") for f in found.mask_folders):
        return CAMVID_CLASSES, "CamVid's 11 class names and Unlabelled (SegNet's layout)"
    return (), ""


def _names_file(path: str) -> tuple[str, ...]:
    """class_names.txt (labelme2voc's), labels.txt (labelme's: `__ignore__` first is the ignore
    value, not a class) or classes.txt: one name a line."""
    if not storage.is_file(path, if_remote=True):
        return ()
    try:
        text = read_one(path).decode("utf-8-sig")
    except Exception:  # absent on gs://, or unreadable: the defaults apply
        return ()
    names = [line.strip() for line in text.splitlines() if line.strip()]
    return tuple(name for name in names if name != "__ignore__")


def _ade_info(root: str) -> tuple[str, ...]:
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


def _rule(
    kind: str, class_names: tuple[str, ...], settings: SegmentationSettings, found: _Found
) -> tuple[MaskRule, str]:
    """The run's MaskRule and a line that says it."""
    ignore = settings.ignore
    if kind == "voc":
        rule = MaskRule(len(class_names), ignore, voc_palette(len(class_names)), (VOC_VOID_COLOUR,))
        return _checked(rule, class_names), f"palette indices are class ids, {ignore} ignored"
    if kind == "cityscapes":
        mapped = settings.train_ids and any(_label_ids_file(m) for m, _ in found.masks.values())
        if mapped:  # labelTrainIds were never made: the label ids mapped by the table
            remap = tuple((label.id, label.train_id) for label in CITYSCAPES_LABELS)
            rule = MaskRule(len(class_names), 255, remap=remap)
            return _checked(
                rule, class_names
            ), "label ids mapped to train ids by Cityscapes' table, 255 ignored"
        what = "train ids" if settings.train_ids else "label ids"
        return _checked(MaskRule(len(class_names), ignore), class_names), f"{what}, {ignore} ignored"
    if kind == "ade20k":
        return _checked(
            MaskRule(len(class_names), ignore), class_names
        ), f"values are class ids, 0 other, {ignore} ignored"
    if kind == "folders" and class_names == BINARY_NAMES and not settings.class_names:
        if 1 in _sampled_values(found):
            return _checked(MaskRule(2, ignore), class_names), f"binary masks of 0 and 1, {ignore} ignored"
        # 0 and 255, or 0 alone so far (empty masks first): 255 is the object, never ignored.
        rule = MaskRule(2, ignore if ignore not in (0, 1) else None, remap=((255, 1),))
        return rule, f"binary masks (the first {BINARY_SAMPLE} read hold only 0 and 255): 255 is class 1"
    return _checked(
        MaskRule(len(class_names), ignore), class_names
    ), f"values are class ids, {ignore} ignored"


BINARY_NAMES = ("background", "foreground")


def _binary_names(found: _Found) -> tuple[tuple[str, ...], str]:
    """A plain pair without class names: binary masks (the first masks read hold only 0 and 255,
    or 0 and 1) are background and foreground; any other values need the names given."""
    values = _sampled_values(found)
    if values and (values <= {0, 255} or values <= {0, 1}):
        return BINARY_NAMES, "class names background and foreground (binary masks)"
    shown = ", ".join(map(str, sorted(values)[:12])) if values else "none read"
    raise ValueError(
        f"class_names: the masks hold class ids ({shown} in the first {BINARY_SAMPLE} read) and the "
        "dataset names no classes: give class_names, or a class_names.txt beside the masks"
    )


def _checked(rule: MaskRule, class_names: tuple[str, ...]) -> MaskRule:
    if len(class_names) > 256 or (rule.ignore is not None and rule.ignore < len(class_names)):
        raise ValueError(
            f"ignore_value {rule.ignore} is a class id of the {len(class_names)} classes: "
            "give an ignore_value above the last class id"
        )
    return rule


def _sampled_values(found: _Found) -> set[int]:
    """The values the first masks hold (sorted by path: the same masks every run)."""
    values: set[int] = set()
    for relpath in sorted(found.masks)[:BINARY_SAMPLE]:
        try:
            with Image.open(io.BytesIO(read_one(found.masks[relpath][0].path))) as image:
                array = np.asarray(image.convert("L") if image.mode in ("RGB", "RGBA", "LA") else image)
        except Exception:  # the worker rejects it by name
            continue
        values |= {int(v) for v in np.unique(array)}
    return values


def _declared(
    kind: str, root: str, files: Sequence[InputFile], pictures: Sequence[InputFile], found: _Found
) -> DeclaredSplits | None:
    """The dataset's own splits: VOC's ImageSets/Segmentation lists, else the split folders."""
    if kind == "voc":
        return _voc_lists(root, pictures)
    claims = {r: s for r, s in found.splits.items() if s is not None}
    if not claims or len(claims) < len(found.splits) / 2:
        return None
    names = tuple(n for n in ("train", "validation", "test") if n in claims.values())
    names += tuple(sorted(set(claims.values()) - set(names)))
    return DeclaredSplits(f"the {_TITLES[kind]} split folders", names, claims)


def _voc_lists(root: str, pictures: Sequence[InputFile]) -> DeclaredSplits | None:
    folder = join(root, "ImageSets/Segmentation")
    lists = {}
    for name in ("train", "val", "test", "trainval", "train_aug", "trainaug", "val_aug"):
        path = join(folder, f"{name}.txt")
        if not storage.is_file(path, if_remote=True):
            continue
        try:
            lists[name] = read_one(path).decode("utf-8", "replace").split()
        except Exception:  # absent on gs://
            continue
    if "trainval" in lists and ("train" in lists or "val" in lists):
        del lists["trainval"]
    if not lists:
        return None
    claims: dict[str, list[str]] = defaultdict(list)
    for name, ids in lists.items():  # DeepLab's augmented set's train_aug.txt is a train list too
        word = name.removesuffix("_aug").removesuffix("aug")
        split = "train" if word == "trainval" else (split_name(word) or word)
        for item in ids:
            claims[item].append(split)
    split_of, conflicts = {}, {}
    for file in pictures:
        key = posixpath.basename(stem(file.relpath))
        splits = sorted(set(claims.get(key, ())))
        if len(splits) > 1:
            conflicts[file.relpath] = " and ".join(f"ImageSets/Segmentation ({s})" for s in splits)
        elif splits:
            split_of[file.relpath] = splits[0]
    names = tuple(n for n in ("train", "validation", "test") if n in split_of.values())
    source = f"Pascal VOC split lists (ImageSets/Segmentation: {', '.join(sorted(lists))})"
    return DeclaredSplits(source, names, split_of, conflicts)


def _sources(
    files: Sequence[InputFile],
    images: dict[str, ImageAnnotations],
    found: _Found,
    folders: _Folders,
    kind: str,
) -> dict[str, str]:
    """Every listed file that is not a picture of the dataset -> what it is."""
    sources = {}
    for file in files:
        if file.relpath in images or skip_reason(file.relpath) is not None or file.problem is not None:
            continue
        folder = next((f for f in found.mask_folders if relative_to(file.path, f) is not None), None)
        if folder is not None:
            what = f"a segmentation mask ({posixpath.basename(folder)}/), not a picture"
        elif posixpath.splitext(file.relpath)[1].lower() in MASK_EXTENSIONS:
            parent = posixpath.basename(posixpath.dirname(file.relpath)) or "--input"
            what = f"an image outside the {_TITLES[kind]} pictures' folders ({parent}/), not a picture"
        else:
            what = f"a {posixpath.splitext(file.relpath)[1] or 'extensionless'} file, not an image"
        sources[file.relpath] = what
    return sources


def _unmatched(
    found: _Found, folders: _Folders, images: dict[str, ImageAnnotations], root: str
) -> tuple[UnmatchedEntry, ...]:
    """Masks in the masks folders that no listed picture has."""
    used = {m.class_mask.path for m in images.values() if m.class_mask is not None}
    entries = []
    for folder in sorted(found.mask_folders):
        seen = set()
        for files in folders.index(folder).values():
            for file in files:
                if file.path in used or file.path in seen:
                    continue
                seen.add(file.path)
                if _is_other_ground_truth(file.path):
                    continue
                shown = relative_to(file.path, root) or file.path
                detail = "a mask whose picture is not listed (or has another name)"
                entries.append(UnmatchedEntry(shown, "", reasons.MISSING_IMAGE.code, detail))
    return tuple(sorted(entries, key=lambda e: e.annotation))


def _is_other_ground_truth(path: str) -> bool:
    """Cityscapes keeps its colour, instance and polygon files (and the other id kind) beside the
    masks read: they are the dataset's, not masks without a picture."""
    name = posixpath.basename(path)
    return bool(
        re.search(r"_gt(Fine|Coarse)_(color|instanceIds|labelIds|labelTrainIds|polygons)\.\w+$", name)
    )
