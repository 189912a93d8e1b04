"""A segmentation run's sources: each picture paired with its mask file the way the dataset's own
tools lay them out, found from the dataset's root or from its images folder, local or gs://.
Each layout is its format's (`MaskLayout`: plan.sources.voc, cityscapes, ade20k, folders); this
module pairs, names the classes, decides the rule that reads the masks and says what every other
listed file is, for all of them.

Every listed file is a picture of the dataset or a `skipped` line saying what it is (a mask, the
visualisations labelme writes, Cityscapes' other ground-truth files): a mask is never a picture of
a class. A mask that names no listed picture is an `annotations_without_image` line.

How mask values become class ids is one `MaskRule` for the run (`labels.class_mask` applies it):
the ignore value (255 by default), the dataset's palette for masks saved as colours, and for a
plain pair whose masks hold only 0 and 255 (Kaggle's binary masks) the documented rule that 255 is
class 1, decided from the first masks read here, never per picture. The rule also gives the
stored masks' type, one for the run: 16-bit where a class id or the ignore value passes 255 (more
than 256 classes, a set of thousands of mask ids), said in the first line.

The class names are given, else a names file of the dataset's (a `class_names.txt`, or a dataset
YAML's `names:` or `classes:`) at its root, beside the masks or up to two folders above them,
else the layout's own table; a set that names none is binary (above) or takes its mask ids as
names, up to the largest a sample spread over the set holds, and says so in one warning.
"""

from __future__ import annotations

import logging
import posixpath
import re
from collections import defaultdict
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import ClassVar

import numpy as np
from PIL import Image

from beam_tfrecord import reasons, storage
from beam_tfrecord.config_base import ConfigError
from beam_tfrecord.elements import MAX_MASK_VALUE, ImageAnnotations, MaskRule
from beam_tfrecord.labels.class_mask import MaskFile, class_ids, mask_file
from beam_tfrecord.labels.mask_files import mask_values
from beam_tfrecord.labels.objects.label_map import unused_name
from beam_tfrecord.plan.annotations.catalog import ANNOTATION_EXTENSIONS, read_many, read_one, stem
from beam_tfrecord.plan.annotations.declared import DeclaredSplits, split_name
from beam_tfrecord.plan.annotations.locate import input_base, join, relative_to
from beam_tfrecord.plan.annotations.names_files import YAML_EXTENSIONS, names_from, read_names
from beam_tfrecord.plan.annotations.results import AnnotationSet, UnmatchedEntry
from beam_tfrecord.plan.annotations.segmentation_classes import voc_palette
from beam_tfrecord.plan.listing import InputFile, list_inputs, skip_reason
from beam_tfrecord.plan.sources.base import CERTAIN, Listing, LoadRequest, SourceError, SourceFormat

__all__ = [
    "BINARY_NAMES",
    "BINARY_SAMPLE",
    "MASK_EXTENSIONS",
    "Found",
    "MaskFormat",
    "MaskLayout",
    "Pairing",
    "SegmentationSettings",
    "checked_rule",
    "first_split",
    "load_segmentation",
    "mask_type_said",
    "named_folder",
    "pairs_any",
    "sampled_values",
    "score_masks",
    "split_word",
]

MASK_EXTENSIONS = (".png", ".bmp", ".gif", ".tif", ".tiff", ".jpg", ".jpeg", ".webp", ".pgm", ".ppm")
NAMES_FILES = ("class_names.txt", "labels.txt", "classes.txt")
# A dataset YAML's keys for its classes: Ultralytics' `names` (a list or index map), or the
# `classes` index map of semantic mask sets (COCO128's); how its refusals start.
YAML_NAMES_KEYS = ("names", "classes")
NAMES_WHAT = "class names"
# A dataset YAML's usual names, looked for in a gs:// folder outside the input (with the
# folder's own name: `coco128-seg.yaml`).
DATASET_YAMLS = ("data.yaml", "dataset.yaml", "classes.yaml")
# How many folders above the masks a names file is looked for in.
NAMES_LEVELS = 2
# How many masks a plain pair's launcher reads to tell binary 0/255 masks apart.
BINARY_SAMPLE = 16
# How many masks, spread over the set, a set without class names reads for its largest id.
IDS_SAMPLE = 64
_LOGGER = logging.getLogger(__name__)


@dataclass(frozen=True)
class SegmentationSettings:
    """What a segmentation run asks of its sources.

    Args:
      ignore: the value that means "not labelled" in the masks (and fills a pad's margins).
      train_ids: Cityscapes: the 19 training classes instead of the 34 label ids.
      class_names: fixes the class names (id = position), instead of the dataset's.
      declared_splits: the dataset's own splits are kept (no `--splits` given).
      keep_split_names: those splits keep the names the dataset gives them (`val`, `train_aug`).
      overlapping_splits: and lists that repeat pictures of others are splits too.
    """

    ignore: int = 255
    train_ids: bool = False
    class_names: tuple[str, ...] | None = None
    declared_splits: bool = True
    keep_split_names: bool = False
    overlapping_splits: bool = False


Place = tuple[str, str, str]  # a picture's (dataset root, images folder's name, path under it)


@dataclass(frozen=True)
class Pairing:
    """Where one layout keeps a picture's mask: `places(path)` are the ways a picture's full path
    reads as (root, images folder, rest), nearest first; `candidates(root, folder, rest)` are the
    (mask folder, key) pairs to look for, in order, the key being the mask's path under that folder
    without its extension (any extension matches) or with it (that file only); `split` is the
    split a place's folders declare."""

    places: Callable[[str], list[Place]]
    candidates: Callable[[str, str, str], list[tuple[str, str]]]
    split: Callable[[Place], str | None]


def named_folder(pattern: str) -> Callable[[str], list[Place]]:
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


def split_word(word: str) -> str | None:
    return split_name(word) or {"training": "train"}.get(word.lower())


def first_split(rest: str) -> str | None:
    parts = rest.split("/")
    return split_word(parts[0]) if len(parts) > 1 else None


class MaskLayout:
    """One segmentation format's layout: where a picture's mask is, and what the dataset says of
    its classes and splits when no names file does. Each step has the default most layouts take.

    Attributes:
      takes_masks_folder: `annotations_path` may name the masks folder (the plain pair's).
    """

    takes_masks_folder: bool = False

    def pairing(self, settings: SegmentationSettings, given: str | None, base: str) -> Pairing:
        """Where a picture's mask is (`given`: the masks folder named with annotations_path)."""
        raise NotImplementedError

    def has_folders(self, names: frozenset[str]) -> bool:
        """Whether the listing's folder names hold the folders the layout pairs, so a
        class-folder run of a million pictures pays no pairing."""
        raise NotImplementedError

    def repaired(self, settings: SegmentationSettings, found: Found) -> Pairing | None:
        """A second pairing where the first found masks that cannot be read alike (None: none)."""
        return None

    def class_names(
        self, root: str, settings: SegmentationSettings, found: Found
    ) -> tuple[tuple[str, ...], str]:
        """The dataset's class names when it keeps no names file, and where they came from."""
        return (), ""

    def rule(
        self, class_names: tuple[str, ...], settings: SegmentationSettings, found: Found
    ) -> tuple[MaskRule, str]:
        """The run's MaskRule and a line that says it."""
        ignore = settings.ignore
        return checked_rule(MaskRule(len(class_names), ignore), class_names), (
            f"values are class ids, {ignore} ignored"
        )

    def declared(
        self,
        fmt: SourceFormat,
        root: str,
        pictures: Sequence[InputFile],
        found: Found,
        settings: SegmentationSettings,
    ) -> DeclaredSplits | None:
        """The dataset's own splits: its split folders."""
        claims = {r: s for r, s in found.splits.items() if s is not None}
        if not claims or len(claims) < len(found.splits) / 2:
            return None
        names = tuple(n for n in ("train", "validation", "test") if n in claims.values())
        names += tuple(sorted(set(claims.values()) - set(names)))
        return DeclaredSplits(f"the {fmt.title} split folders", names, claims)

    def palette(self, class_names: Sequence[str], train_ids: bool) -> tuple[tuple[int, int, int], ...]:
        """The colour the contact sheet draws each class id in: the VOC colour map that VOC's
        masks, labelme and imgviz use, unless the dataset has its own."""
        return voc_palette(len(class_names))


class MaskFormat(SourceFormat):
    """A format that reads segmentation alone, by its `layout`: the search asks the layout
    whether it pairs any picture, and the load is this module's."""

    tasks = ("segmentation",)
    layout: ClassVar[MaskLayout]

    def score(self, task: str, listing: Listing) -> float:
        return score_masks(self.layout, listing)

    def load(self, request: LoadRequest) -> AnnotationSet:
        return load_segmentation(self, self.layout, request)


def score_masks(layout: MaskLayout, listing: Listing) -> float:
    """The layout search's score of a segmentation format: a masks folder named with
    `annotations_path` is the plain pair's; else whether the layout pairs any listed picture with
    a mask (the first format that does is the run's)."""
    if listing.paths:
        return CERTAIN if layout.takes_masks_folder else 0.0
    names = None if listing.outside else listing.folder_names
    return CERTAIN if pairs_any(layout, listing.files, outside=listing.outside, names=names) else 0.0


class _Folders:
    """Files by folder, from the listing where the folder is under the input, else listed once
    (the masks beside an images folder given as the input)."""

    def __init__(self, files: Sequence[InputFile], base: str, outside: bool = True) -> None:
        self.files = files
        self.base = base.rstrip("/")
        self.outside = outside  # folders outside the input are listed too
        self._index: dict[str, dict[str, list[InputFile]]] = {}
        self._dirs: set[str] | None = None
        self._yamls: dict[str, list[str]] | None = None

    def yamls(self, folder: str) -> list[str]:
        """The YAML files directly in a folder: the listing's where the input holds the folder;
        else a local folder's, or on gs:// (where a folder's listing walks every object under
        it) those named as datasets name theirs."""
        folder = folder.rstrip("/")
        if not storage.is_absolute(folder):
            return []
        under = relative_to(folder, self.base)
        if under is not None:
            if self._yamls is None:
                self._yamls = defaultdict(list)
                for file in self.files:
                    if file.problem is None and file.relpath.lower().endswith(YAML_EXTENSIONS):
                        self._yamls[posixpath.dirname(file.relpath)].append(file.path)
            return sorted(self._yamls.get(under, ()))
        if storage.is_remote(folder):
            names = [*DATASET_YAMLS, f"{posixpath.basename(folder)}.yaml"]
            return [path for path in (join(folder, name) for name in names) if storage.is_file(path)]
        try:
            return sorted(m.path for ext in YAML_EXTENSIONS for m in storage.match(join(folder, "*" + ext)))
        except OSError:  # not a folder, or not readable: no names there
            return []

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
class Found:
    """What pairing found: picture relpath -> (its mask, its mask's folder), the folders that held
    masks, and each picture's split by its folders."""

    masks: dict[str, tuple[InputFile, str]]
    mask_folders: set[str]
    splits: dict[str, str | None]
    roots: set[str]


def _pair(files: Sequence[InputFile], pairing: Pairing, folders: _Folders) -> tuple[list[InputFile], Found]:
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
    found = Found({}, set(), {}, set())
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


def load_segmentation(fmt: SourceFormat, layout: MaskLayout, request: LoadRequest) -> AnnotationSet:
    """Every listed picture of `fmt`'s layout with its mask file, the rule that reads the masks,
    the class names and the declared splits (see the module docstring)."""
    files, paths = request.files, request.paths
    settings = SegmentationSettings(
        request.ignore_value,
        request.train_ids,
        request.class_names,
        request.declared_splits,
        request.keep_split_names,
        request.overlapping_splits,
    )
    if any(p.split for p in paths) or len(paths) > 1:
        raise SourceError(f"annotations_path: {fmt.title} masks take one folder, without a split")
    base = input_base(files)
    given = paths[0].path if paths else None
    if given is not None and not layout.takes_masks_folder:
        raise SourceError(
            f"names the masks folder of --annotations folders; {fmt.title} masks "
            "are found where the dataset keeps them",
            field="annotations_path",
            file=given,
        )
    folders = _Folders(files, base)
    pictures, found = _pair(files, layout.pairing(settings, given, base), folders)
    second = layout.repaired(settings, found)
    if second is not None:
        pictures, found = _pair(files, second, folders)
    root = _root(found, base)
    if not found.masks:  # nothing to read: the planner's match check says so in one line
        return _nothing_found(fmt, files, pictures, found, folders)
    class_names, names_from = _class_names(layout, root, settings, found, folders)
    warnings: tuple[str, ...] = ()
    if not class_names:  # a set that names no classes: binary masks, or its ids as names
        class_names, names_from, warning = _unnamed(found, settings.ignore)
        if warning:
            _LOGGER.warning("%s", warning)
            warnings = (warning,)
    rule, rule_text = layout.rule(class_names, settings, found)
    rule_text += mask_type_said(rule)
    images: dict[str, ImageAnnotations] = {}
    for file in pictures:
        mask = found.masks.get(file.relpath)
        value: dict[str, list[object]] = {}
        if mask is not None:
            shown = relative_to(mask[0].path, root) or mask[0].path
            value = {"class_mask": MaskFile(mask[0].path, mask[0].size, shown).value()}
        images[file.relpath] = ImageAnnotations((), stem(file.relpath), values=value)
    unannotated = frozenset(r for r in images if mask_file(images[r]) is None)
    declared = layout.declared(fmt, root, pictures, found, settings)
    if declared is not None and settings.declared_splits:
        unannotated = frozenset(r for r in unannotated if r in declared.split_of)
    where = ", ".join(sorted(relative_to(f, root) or f for f in found.mask_folders)[:3]) or "nowhere"
    found_at = f"{fmt.title} masks in {where} (dataset root {root or base}); {names_from}; {rule_text}"
    return AnnotationSet(
        fmt.name,
        class_names,
        images,
        unannotated=unannotated,
        sources=_sources(fmt, files, images, found, folders),
        unmatched=_unmatched(found, folders, images, root),
        found_at=found_at,
        declared=declared,
        mask_rule=rule,
        looked_for=fmt.looked_for[request.task],
        task="segmentation",
        palette=layout.palette(class_names, settings.train_ids),
        warnings=warnings,
    )


def _folder_names(files: Sequence[InputFile]) -> frozenset[str]:
    """Every folder name the listing's relative paths hold (one pass over them)."""
    names: set[str] = set()
    for file in files:
        names.update(file.relpath.split("/")[:-1])
    return frozenset(names)


def pairs_any(
    layout: MaskLayout,
    files: Sequence[InputFile],
    *,
    outside: bool = True,
    names: frozenset[str] | None = None,
) -> bool:
    """Whether the layout pairs any listed picture with a mask (a run given `--task
    segmentation` without `--annotations` takes the first format that does); `outside`: masks
    beside the input count too (else only those the listing holds, and a listing without the
    layout's folders is told apart from its folder names alone, never paired file by file)."""
    if not outside and not layout.has_folders(names if names is not None else _folder_names(files)):
        return False
    base = input_base(files)
    pairing = layout.pairing(SegmentationSettings(), None, base)
    _, found = _pair(files, pairing, _Folders(files, base, outside))
    return bool(found.masks)


def _nothing_found(
    fmt: SourceFormat,
    files: Sequence[InputFile],
    pictures: Sequence[InputFile],
    found: Found,
    folders: _Folders,
) -> AnnotationSet:
    """No picture pairs with a mask: every picture unannotated, for the match check to refuse."""
    images = {f.relpath: ImageAnnotations((), stem(f.relpath)) for f in pictures}
    return AnnotationSet(
        fmt.name,
        (),
        images,
        unannotated=frozenset(images),
        sources=_sources(fmt, files, images, found, folders),
        mask_rule=MaskRule(0),
        looked_for=fmt.looked_for["segmentation"],
        task="segmentation",
    )


def _root(found: Found, base: str) -> str:
    if len(found.roots) == 1:
        return next(iter(found.roots)) or base
    return base


def _class_names(
    layout: MaskLayout, root: str, settings: SegmentationSettings, found: Found, folders: _Folders
) -> tuple[tuple[str, ...], str]:
    """The class names by id and where they came from, in words: given, a names file or a dataset
    YAML (`names:` or `classes:`) at the dataset root, beside the masks or up to two folders above
    them, else the dataset's own (`MaskLayout.class_names`)."""
    if settings.class_names:
        return tuple(settings.class_names), "class names from class_names"
    for folder in _names_folders(root, found, folders.base):
        for name in NAMES_FILES:
            path = join(folder, name)
            names = _names_file(path)
            if names:
                return names, f"class names from {relative_to(path, root) or path}"
        for path in folders.yamls(folder):
            shown = relative_to(path, root) or path
            data = read_names(path, shown, NAMES_WHAT)
            by_id = names_from(data, shown, NAMES_WHAT, optional=True, keys=YAML_NAMES_KEYS)
            if by_id is not None:
                return _by_id(by_id, settings.ignore), f"class names from {shown}"
    return layout.class_names(root, settings, found)


def _names_folders(root: str, found: Found, base: str) -> list[str]:
    """Where a names file is looked for, in order: the dataset root; the masks' own folders (the
    masks folders and those of the first masks read), then those one and two folders up; the
    input."""
    near = {posixpath.dirname(found.masks[r][0].path) for r in sorted(found.masks)[:BINARY_SAMPLE]}
    level = sorted(near | {f.rstrip("/") for f in found.mask_folders})
    order = [root]
    for _ in range(NAMES_LEVELS + 1):
        order += level
        level = sorted({up for f in level if storage.is_absolute(up := posixpath.dirname(f))})
    return list(dict.fromkeys([*order, base]))


def _by_id(names: dict[int, str], ignore: int) -> tuple[str, ...]:
    """A YAML's names by mask value: an id it skips holds a placeholder (the masks' values are
    the ids, never renumbered); a name at the ignore value names it, not a class."""
    names = {i: n for i, n in names.items() if i != ignore}
    return tuple(names.get(i, unused_name(i)) for i in range(max(names) + 1)) if names else ()


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


BINARY_NAMES = ("background", "foreground")


def _unnamed(found: Found, ignore: int) -> tuple[tuple[str, ...], str, str]:
    """A set that names no classes: binary masks (the first masks read hold only 0 and 255, or 0
    and 1) are background and foreground; other masks' values are their own names, "0" to the
    largest id of a sample of the masks spread over the set, with the warning that says so (a
    mask holding a larger id is a named reject)."""
    values = sampled_values(found)
    if values and (values <= {0, 255} or values <= {0, 1}):
        return BINARY_NAMES, "class names background and foreground (binary masks)", ""
    ids, colours, read = _spread_values(found)
    ids.discard(ignore)
    if not ids:
        what = "colours, not class ids" if colours else "no class id"
        raise SourceError(
            f"class_names: the {read} masks read hold {what} and the dataset names no classes: give "
            "class_names, or a class_names.txt or a dataset YAML (names:) beside the masks"
        )
    largest = max(ids)
    words = f"class names the mask ids 0 to {largest} (the dataset names none)"
    warning = (
        f"the dataset names no classes: the class names are the mask ids 0 to {largest}, the largest "
        f"id in {read} of its masks (num_classes {largest + 1}); a mask holding a larger id is a "
        f"{reasons.CLASS_MASK_UNKNOWN_VALUE.code} reject: give class_names, or a class_names.txt or "
        "a dataset YAML (names:) beside the masks"
    )
    return tuple(str(i) for i in range(largest + 1)), words, warning


def checked_rule(rule: MaskRule, class_names: tuple[str, ...]) -> MaskRule:
    """The rule, where its ignore value is no class id and every class id fits a 16-bit mask."""
    if len(class_names) > MAX_MASK_VALUE + 1:
        raise SourceError(
            f"{len(class_names)} classes: a mask stores class ids up to {MAX_MASK_VALUE} (16 bits)",
            field="class_names",
        )
    if rule.ignore is not None and rule.ignore < len(class_names):
        raise SourceError(
            f"{rule.ignore} is a class id of the {len(class_names)} classes: "
            "give an ignore_value above the last class id",
            field="ignore_value",
        )
    return rule


def mask_type_said(rule: MaskRule) -> str:
    """What the first line adds where the run's masks are 16-bit (nothing for 8-bit ones)."""
    if rule.dtype == "uint8":
        return ""
    return "; masks stored as 16-bit PNGs (class ids or the ignore value past 255)"


def sampled_values(found: Found) -> set[int]:
    """The values the first masks hold (sorted by path: the same masks every run)."""
    values: set[int] = set()
    for relpath in sorted(found.masks)[:BINARY_SAMPLE]:
        try:
            array = mask_values(read_one(found.masks[relpath][0].path), relpath)
        except Exception:  # the worker rejects it by name
            continue
        if array.ndim == 3:  # colours: their grey, as a binary mask saved as RGB holds
            array = np.asarray(Image.fromarray(array[..., :3].astype(np.uint8)).convert("L"))
        values |= {int(v) for v in np.unique(array)}
    return values


def _spread_values(found: Found) -> tuple[set[int], int, int]:
    """The class ids that IDS_SAMPLE masks spread evenly over the set (sorted by path: the same
    masks every run) hold, how many of them hold colours rather than ids, and how many were read."""
    ordered = sorted(found.masks)
    step = max(1, len(ordered) / IDS_SAMPLE)
    chosen = list(dict.fromkeys(ordered[int(i * step)] for i in range(min(IDS_SAMPLE, len(ordered)))))
    values: set[int] = set()
    colours = read = 0
    for _, data, _ in read_many([found.masks[r][0].path for r in chosen]):
        if data is None:
            continue
        try:
            ids, _ = class_ids(data, MaskRule(MAX_MASK_VALUE + 1, None), "")
        except reasons.Reject as reject:  # colours, or values past 16 bits (a 32-bit TIFF)
            colours += reject.registered == reasons.CLASS_MASK_COLOURS
            if reject.registered == reasons.CLASS_MASK_UNKNOWN_VALUE:
                values.add(MAX_MASK_VALUE + 1)
            continue
        except Exception:  # a mask the worker names as unreadable
            continue
        read += 1
        values |= {int(v) for v in np.unique(ids)}
    return values, colours, read


def _sources(
    fmt: SourceFormat,
    files: Sequence[InputFile],
    images: dict[str, ImageAnnotations],
    found: Found,
    folders: _Folders,
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
            what = f"an image outside the {fmt.title} pictures' folders ({parent}/), not a picture"
        else:
            what = f"a {posixpath.splitext(file.relpath)[1] or 'extensionless'} file, not an image"
        sources[file.relpath] = what
    return sources


def _unmatched(
    found: Found, folders: _Folders, images: dict[str, ImageAnnotations], root: str
) -> tuple[UnmatchedEntry, ...]:
    """Masks in the masks folders that no listed picture has."""
    used = {found.path for found in map(mask_file, images.values()) if found is not None}
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
