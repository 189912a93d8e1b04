"""Pascal VOC: one XML per image -> its objects (boxes in pixels, `difficult`, `truncated`, `pose`),
a detection run's; a mask PNG per picture, a segmentation run's (`_Masks`).

An image's XML is, in this order: under `annotations_path` (same relative stem, the stem below
`JPEGImages/`, or a unique file name stem), in the standard tree (`Annotations/x.xml` for
`JPEGImages/x.jpg`, `annotations/x.xml` for `images/x.jpg`), or beside the image (`x.xml`).
Boxes are kept as written: VOC's own files count pixels from 1, and the TensorFlow Object
Detection API's `create_pascal_tf_record.py` and the Model Garden read them unshifted, as this
does, so records match theirs.

The XML is untrusted: `defusedxml` parses it, refusing any entity declaration (a billion laughs
or an external entity is an `unsafe_annotation` reject for its image, nothing expanded) and never
fetching anything (an external DTD is not loaded). The declared `size` is kept for the worker to
check against the decoded image.
"""

from __future__ import annotations

import dataclasses
import logging
import math
import posixpath
from collections import defaultdict
from collections.abc import Mapping, Sequence
from typing import ClassVar
from xml.etree.ElementTree import Element, ParseError

import defusedxml
import defusedxml.ElementTree

from beam_tfrecord import reasons, storage
from beam_tfrecord.elements import ImageAnnotations, MaskRule, ObjectBox
from beam_tfrecord.plan.annotations import declared
from beam_tfrecord.plan.annotations.catalog import (
    MAX_IMAGE_ANNOTATION_BYTES,
    Catalog,
    read_many,
    read_one,
    stem,
)
from beam_tfrecord.plan.annotations.declared import DeclaredSplits, split_name
from beam_tfrecord.plan.annotations.locate import Located, component, join, listed_under, rerooted, under
from beam_tfrecord.plan.annotations.objects import ObjectFiles, load_objects, score_objects
from beam_tfrecord.plan.annotations.paths import AnnotationPath
from beam_tfrecord.plan.annotations.results import AnnotationSet, ImageProblem, ObjectNote, UnmatchedEntry
from beam_tfrecord.plan.annotations.segmentation import (
    Found,
    MaskLayout,
    Pairing,
    SegmentationSettings,
    checked_rule,
    load_segmentation,
    named_folder,
    score_masks,
)
from beam_tfrecord.plan.annotations.segmentation_classes import VOC_CLASSES, VOC_VOID_COLOUR, voc_palette
from beam_tfrecord.plan.listing import InputFile, list_inputs
from beam_tfrecord.plan.sources.base import Listing, LoadRequest, SourceError, SourceFormat

__all__ = ["FORMAT", "Voc", "read_xmls"]

STANDARD_IMAGES = "JPEGImages"
STANDARD_ANNOTATIONS = "Annotations"
# Image folder -> annotation folders beside it: VOC's devkit, and the `images/` +
# `annotations/` pair of LabelImg, Roboflow and Kaggle exports.
ANNOTATION_FOLDERS = {STANDARD_IMAGES: (STANDARD_ANNOTATIONS,), "images": ("annotations", "Annotations")}
# Where VOC-layout masks are, in the order looked for: labelme2voc's PNGs (its
# SegmentationClass/ holds .npy arrays), VOC's own palette PNGs, then DeepLab's single-channel
# copies (remove_gt_colormap.py's SegmentationClassRaw/) and the SBD-augmented set's.
MASK_FOLDERS = (
    "SegmentationClassPNG",
    "SegmentationClass",
    "SegmentationClassRaw",
    "SegmentationClassAug",
)
_TRUE = {"1", "true", "yes"}
_LOGGER = logging.getLogger(__name__)
_FALSE = {"0", "false", "no", ""}


class _Rejected(Exception):
    """An XML that cannot annotate its image: (reason, detail)."""


class _NotVoc(_Rejected):
    """An XML whose root is not VOC's `<annotation>` (another tool's file): no VOC entry."""


class _ParsedXml:
    """One VOC XML: its image's annotations and the objects left out, as (reason, detail)."""

    __slots__ = ("annotations", "dropped", "filename")

    def __init__(self, annotations: ImageAnnotations, dropped: list[tuple[str, str]], filename: str) -> None:
        self.annotations = annotations
        self.dropped = dropped
        self.filename = filename


def _parse_xml(data: bytes, display: str) -> _ParsedXml:
    """A VOC XML's bytes -> its objects; raises _Rejected(reason, detail) for a malformed or
    unsafe file (reason `bad_annotation` or `unsafe_annotation`)."""
    try:
        root = defusedxml.ElementTree.fromstring(data)
    except defusedxml.DefusedXmlException as error:
        raise _Rejected(reasons.UNSAFE_ANNOTATION.code, f"{display}: refused, {_unsafe(error)}") from None
    except ParseError as error:
        line, column = error.position[0], error.position[1] + 1  # expat counts columns from 0
        reason = str(error).split(":")[0]
        raise _Rejected(
            reasons.BAD_ANNOTATION.code,
            f"{display} is not valid XML: {reason} at line {line} column {column}",
        ) from None
    if root.tag != "annotation":
        raise _NotVoc(
            reasons.BAD_ANNOTATION.code, f"{display}: its root element is <{root.tag}>, not <annotation>"
        )
    filename = (root.findtext("filename") or "").strip()
    width, height = _size(root)
    objects: list[ObjectBox] = []
    dropped: list[tuple[str, str]] = []
    for number, element in enumerate(root.findall("object"), start=1):
        ref = f"{display}#object {number}"
        try:
            objects.append(_object(element, ref))
        except _Rejected as error:
            reason, detail = error.args
            dropped.append((reason, f"{ref}: {detail}"))
    annotations = ImageAnnotations(tuple(objects), filename, width=width, height=height)
    return _ParsedXml(annotations, dropped, filename)


def _unsafe(error: Exception) -> str:
    name = getattr(error, "name", None)
    system_id = getattr(error, "sysid", None) or getattr(error, "system_id", None)
    if name is not None:
        where = f" (external: {system_id})" if system_id else ""
        return f"it declares the XML entity {name!r}{where}; annotation XML is never expanded"
    return f"{type(error).__name__}: annotation XML may not declare entities or external references"


def _size(root: Element) -> tuple[int | None, int | None]:
    def positive(text: str | None) -> int | None:
        try:
            value = int(float((text or "").strip()))
        except ValueError:
            return None
        return value if value > 0 else None

    size = root.find("size")
    if size is None:
        return None, None
    return positive(size.findtext("width")), positive(size.findtext("height"))


def _flag(element: Element, name: str) -> bool:
    text = (element.findtext(name) or "").strip().lower()
    if text in _TRUE:
        return True
    if text in _FALSE:
        return False
    try:
        return float(text) != 0
    except ValueError:
        raise _Rejected(reasons.BAD_OBJECT.code, f"<{name}> {text!r} is not 0 or 1") from None


def _object(element: Element, ref: str) -> ObjectBox:
    name = (element.findtext("name") or "").strip()
    if not name:
        raise _Rejected(reasons.BAD_OBJECT.code, "no <name>")
    box = element.find("bndbox")
    if box is None:
        raise _Rejected(reasons.BAD_OBJECT.code, "no <bndbox>")
    values = []
    for corner in ("xmin", "ymin", "xmax", "ymax"):
        text = (box.findtext(corner) or "").strip()
        try:
            value = float(text)
        except ValueError:
            value = math.nan
        if not math.isfinite(value):
            raise _Rejected(reasons.BAD_OBJECT.code, f"<{corner}> {text!r} is not a number")
        values.append(value)
    xmin, ymin, xmax, ymax = values
    if xmax <= xmin or ymax <= ymin:
        raise _Rejected(reasons.ZERO_AREA.code, f"box {xmin:g},{ymin:g} to {xmax:g},{ymax:g} has no area")
    return ObjectBox(
        xmin,
        ymin,
        xmax,
        ymax,
        name,
        difficult=_flag(element, "difficult"),
        truncated=_flag(element, "truncated"),
        pose=(element.findtext("pose") or "").strip(),
        source_ref=ref,
    )


def _external(folder: AnnotationPath) -> list[InputFile]:
    try:
        return [f for f in list_inputs(folder.path) if f.relpath.lower().endswith(".xml")]
    except ValueError:
        raise SourceError(
            f"{folder.path} does not exist or holds no files", field="annotations_path", file=folder.path
        ) from None


def _standard(relpath: str) -> list[str]:
    """`VOC2012/JPEGImages/x.jpg` -> `VOC2012/Annotations/x.xml` (the last `JPEGImages`), and
    `ds/images/x.jpg` -> `ds/annotations/x.xml` (or `Annotations/`)."""
    parts = stem(relpath).split("/")
    for index in range(len(parts) - 2, -1, -1):
        if parts[index] in ANNOTATION_FOLDERS:
            return [
                "/".join([*parts[:index], folder, *parts[index + 1 :]]) + ".xml"
                for folder in ANNOTATION_FOLDERS[parts[index]]
            ]
    return []


def read_xmls(listed: Catalog, folder: AnnotationPath | None = None) -> AnnotationSet:
    """Every listed image's objects from its XML (see the module docstring for where it is)."""
    external = _external(folder) if folder is not None else []
    by_stem = {stem(f.relpath): f for f in external}
    by_name: dict[str, list[InputFile]] = defaultdict(list)
    for file in external:
        by_name[posixpath.basename(stem(file.relpath))].append(file)
    annotation_files = listed.annotation_files

    found: dict[str, InputFile] = {}  # image relpath -> its XML
    used: set[str] = set()  # XMLs that some image claims (ambiguous ones included)
    problems: list[ImageProblem] = []
    for relpath in listed.images:
        image_stem = stem(relpath)
        xml = by_stem.get(image_stem) or by_stem.get(image_stem.split(f"{STANDARD_IMAGES}/")[-1])
        if xml is None and external:
            named = by_name.get(posixpath.basename(image_stem), [])
            if len(named) > 1:
                used.update(f.path for f in named)
                names = ", ".join(f.relpath for f in named[:5])
                detail = f"annotations_path holds several XMLs for it: {names}"
                problems.append(ImageProblem(relpath, reasons.AMBIGUOUS_ANNOTATION.code, detail))
                continue
            xml = named[0] if named else None
        for candidate in _standard(relpath) if xml is None else ():
            xml = xml or annotation_files.get(candidate)
        if xml is None:
            xml = annotation_files.get(image_stem + ".xml")
        if xml is not None:
            found[relpath] = xml

    claimed: dict[str, list[str]] = defaultdict(list)
    for relpath, xml in found.items():
        claimed[xml.path].append(relpath)
    used.update(claimed)
    sources = {
        xml.relpath: f"Pascal VOC annotations of {', '.join(claimed[xml.path])}"
        for xml in found.values()
        if _display(xml, listed) == xml.relpath
    }
    for relpath, xml in list(found.items()):
        if len(claimed[xml.path]) > 1:
            others = ", ".join(r for r in claimed[xml.path] if r != relpath)
            problems.append(
                ImageProblem(
                    relpath,
                    reasons.AMBIGUOUS_ANNOTATION.code,
                    f"{_display(xml, listed)} could be for {others} too",
                )
            )
            del found[relpath]

    images: dict[str, ImageAnnotations] = {}
    dropped: list[ObjectNote] = []
    parsed = _parse_all(list(found.values()), listed)
    for relpath, xml in found.items():
        result = parsed[xml.path]
        if isinstance(result, _Rejected):
            problems.append(ImageProblem(relpath, *result.args))
            continue
        annotations = result.annotations
        if not annotations.source_id:  # the XML names no file: the image's own name
            annotations = dataclasses.replace(annotations, source_id=posixpath.basename(relpath))
        images[relpath] = annotations
        dropped += [ObjectNote(relpath, reason, detail) for reason, detail in result.dropped]
    rejected = {p.relpath for p in problems}
    unannotated = [r for r in listed.images if r not in images and r not in rejected]
    for relpath in unannotated:
        images[relpath] = ImageAnnotations((), posixpath.basename(relpath))

    unmatched = _orphans(listed, external, used)
    class_names = sorted({obj.class_name for found_image in images.values() for obj in found_image.objects})
    return AnnotationSet(
        format="voc",
        class_names=tuple(class_names),
        images=images,
        unannotated=frozenset(unannotated),
        problems=tuple(sorted(problems)),
        sources=sources,
        unmatched=tuple(unmatched),
        dropped=tuple(dropped),
    )


def _orphans(listed: Catalog, external: Sequence[InputFile], used: set[str]) -> list[UnmatchedEntry]:
    """XMLs no listed image claims: each an entry of annotations_without_image, with its objects."""
    unclaimed: dict[str, InputFile] = {}  # by path: annotations_path may lie under the input
    for file in [*listed.annotation_files.values(), *external]:
        if file.path not in used and file.relpath.lower().endswith(".xml"):
            unclaimed.setdefault(file.path, file)
    orphans = list(unclaimed.values())
    unmatched: list[UnmatchedEntry] = []
    parsed_orphans = _parse_all(orphans, listed)
    for file in orphans:
        result = parsed_orphans[file.path]
        display = _display(file, listed)
        if isinstance(result, _NotVoc):
            continue  # another format's XML: its `skipped` line says what it is, and the hint names it
        if isinstance(result, _Rejected):
            detail = f"no listed image has its stem, and it cannot be read: {result.args[1]}"
            unmatched.append(UnmatchedEntry(display, "", reasons.MISSING_IMAGE.code, detail))
        else:
            count = len(result.annotations.objects) + len(result.dropped)
            unmatched.append(
                UnmatchedEntry(
                    display,
                    result.filename,
                    reasons.MISSING_IMAGE.code,
                    "no listed image has its stem",
                    count,
                )
            )

    return unmatched


def _display(file: InputFile, listed: Catalog) -> str:
    """An XML as messages name it: its relpath under the input, else its path."""
    return file.relpath if listed.annotation_files.get(file.relpath) is file else file.path


def _parse_all(files: Sequence[InputFile], listed: Catalog) -> dict[str, _ParsedXml | _Rejected]:
    """path -> parsed XML or why not, for distinct files (read in parallel from gs://)."""
    unique = list({f.path: f for f in files}.values())
    results: dict[str, _ParsedXml | _Rejected] = {}
    small = [f for f in unique if f.size <= MAX_IMAGE_ANNOTATION_BYTES]
    for file in unique:
        if file.size > MAX_IMAGE_ANNOTATION_BYTES:
            results[file.path] = _Rejected(
                reasons.BAD_ANNOTATION.code,
                f"{_display(file, listed)} is {file.size / 2**20:.0f} MiB: too large, not read",
            )
    by_path = {f.path: f for f in small}
    for path, data, error in read_many([f.path for f in small]):
        file = by_path[path]
        display = _display(file, listed)
        if data is None:
            results[path] = _Rejected(reasons.BAD_ANNOTATION.code, f"{display} {error}")
            continue
        try:
            results[path] = _parse_xml(data, display)
        except _Rejected as rejected:
            results[path] = rejected
    return results


class _Xmls(ObjectFiles):
    """Pascal VOC's XMLs: one folder of them (or one XML) named, else found beside the pictures."""

    def given(self, path: str, task: str) -> bool:
        return not path.endswith((".json", ".json.gz", ".yaml", ".yml", ".txt"))

    def outside_pictures(self, listed: Catalog) -> dict[str, str]:
        """A Pascal VOC devkit listed from its root holds, beside JPEGImages/, the segmentation masks
        (SegmentationClass/, SegmentationObject/): PNGs that are no picture of the detection dataset,
        and, taken for pictures without annotations, 5,826 of them would be negatives. Where any
        picture is in a JPEGImages/ folder, every listed image outside one -> what it is."""
        images = listed.images
        if not any("JPEGImages" in r.split("/")[:-1] for r in images):
            return {}
        found = {}
        for relpath in images:
            if "JPEGImages" not in relpath.split("/")[:-1]:
                folder = posixpath.basename(posixpath.dirname(relpath)) or "--input"
                found[relpath] = (
                    f"an image outside JPEGImages/ ({folder}/), not a picture of the Pascal VOC devkit"
                )
        return found

    def locate(
        self, base: str, listed: Catalog, paths: tuple[AnnotationPath, ...], keypoints: bool
    ) -> Located:
        """`Annotations/` beside `JPEGImages/`, `annotations/` (or `Annotations/`) beside
        `images/`, and the devkit's `ImageSets/Main/*.txt`."""
        catalog = listed
        index = component(base, ("JPEGImages", "images"))
        if index is None:
            return Located(catalog, paths=paths)
        parts = base.split("/")
        root, prefix = "/".join(parts[:index]), "/".join(parts[index:]) + "/"
        folders: tuple[str, ...] = (
            ("Annotations",) if parts[index] == "JPEGImages" else ("annotations", "Annotations")
        )
        if paths:  # annotations_path says where the XMLs are: only the split lists are looked for
            folders = ()
        beside: dict[str, InputFile] = {}
        looked = []
        for name in folders:
            folder = "/".join([root, name, *parts[index + 1 :]])
            found = under(root, folder, listed_under(folder, (".xml",)))
            if found:
                looked.append(folder)
                beside |= found
        sets = join(root, "ImageSets/Main")
        beside |= under(root, sets, listed_under(join(sets, "*.txt"), (".txt",)))
        if not beside:
            return Located(catalog, paths=paths)
        return Located(rerooted(catalog, prefix, beside), prefix, root, tuple(looked), paths)

    def read(self, located: Located, request: LoadRequest) -> AnnotationSet:
        return read_xmls(located.catalog, located.paths[0] if located.paths else None)

    def declared(
        self, result: AnnotationSet, located: Located, paths: tuple[AnnotationPath, ...]
    ) -> AnnotationSet:
        return dataclasses.replace(result, declared=declared.voc_splits(located))

    def split_words(self, found: DeclaredSplits) -> Mapping[str, str] | None:
        """`ImageSets/Main`'s list names: `val`, and `trainval` where it stands for train."""
        train = "trainval" if "trainval" in found.source and "train.txt" not in found.source else "train"
        return {"train": train, "validation": "val", "test": "test"}


class _Masks(MaskLayout):
    """`JPEGImages/x.jpg` with `SegmentationClass/x.png` (labelme2voc's `SegmentationClassPNG/`
    first, where its `SegmentationClass/` holds `.npy` arrays; DeepLab's `SegmentationClassRaw/`
    or the augmented `SegmentationClassAug/` where there is no `SegmentationClass/`); splits from
    `ImageSets/Segmentation/*.txt`; names from `class_names.txt` or `labels.txt`, else VOC's 21."""

    def pairing(self, settings: SegmentationSettings, given: str | None, base: str) -> Pairing:
        def candidates(root: str, folder: str, rest: str) -> list[tuple[str, str]]:
            key = stem(rest)
            return [(join(root, name), key + ".png") for name in MASK_FOLDERS]

        return Pairing(named_folder("JPEGImages"), candidates, lambda place: None)

    def has_folders(self, names: frozenset[str]) -> bool:
        return "JPEGImages" in names and bool(names & set(MASK_FOLDERS))

    def class_names(
        self, root: str, settings: SegmentationSettings, found: Found
    ) -> tuple[tuple[str, ...], str]:
        return VOC_CLASSES, "Pascal VOC's 21 class names"

    def rule(
        self, class_names: tuple[str, ...], settings: SegmentationSettings, found: Found
    ) -> tuple[MaskRule, str]:
        ignore = settings.ignore
        rule = MaskRule(len(class_names), ignore, voc_palette(len(class_names)), (VOC_VOID_COLOUR,))
        return checked_rule(rule, class_names), f"palette indices are class ids, {ignore} ignored"

    def declared(
        self,
        fmt: SourceFormat,
        root: str,
        pictures: Sequence[InputFile],
        found: Found,
        settings: SegmentationSettings,
    ) -> DeclaredSplits | None:
        if settings.keep_split_names:
            return _named_segmentation_lists(root, pictures, settings.overlapping_splits)
        return _segmentation_lists(root, pictures)


# The devkit's ImageSets/Segmentation lists, and the augmented set's that DeepLab's scripts make.
SEGMENTATION_LISTS = ("train", "train_aug", "trainaug", "trainval", "val", "val_aug", "test")
# With the dataset's names kept, the order lists are taken in: a list that repeats a picture of
# one taken before is left out whole (`trainval` is `train` + `val`; SBD's `train_aug` holds
# `train`), so DeepLab's usual pair, `train_aug` and `val`, is what an augmented devkit gives.
NAMED_LIST_ORDER = ("val", "test", "train_aug", "trainaug", "val_aug", "train", "trainval")


def _read_lists(root: str) -> dict[str, list[str]]:
    """list name -> the ids it holds, for the `ImageSets/Segmentation` lists present."""
    folder = join(root, "ImageSets/Segmentation")
    lists = {}
    for name in SEGMENTATION_LISTS:
        path = join(folder, f"{name}.txt")
        if not storage.is_file(path, if_remote=True):
            continue
        try:
            lists[name] = read_one(path).decode("utf-8", "replace").split()
        except Exception:  # absent on gs://
            continue
    return lists


def _segmentation_lists(root: str, pictures: Sequence[InputFile]) -> DeclaredSplits | None:
    """Each picture's split from the devkit's `ImageSets/Segmentation` lists (DeepLab's augmented
    set's `train_aug.txt` too), named as the readers name them: `val` is validation, `train_aug`
    is train, and `trainval` only where there is neither `train` nor `val`."""
    lists = _read_lists(root)
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


def _named_segmentation_lists(
    root: str, pictures: Sequence[InputFile], overlapping: bool
) -> DeclaredSplits | None:
    """Each picture's split as `keep_split_names` asks: each list is a split of its own name
    (`val`, `train_aug`), taken in NAMED_LIST_ORDER; a list that repeats a picture of a list
    taken before is left out, and the declaration's source says which and why, unless
    `overlapping` (`overlapping_splits`) keeps it too: the picture's other splits are `also`."""
    lists = _read_lists(root)
    if not lists:
        return None
    kept: dict[str, str] = {}  # id -> its list
    extra: dict[str, list[str]] = defaultdict(list)
    taken: list[str] = []
    left: list[str] = []
    for name in NAMED_LIST_ORDER:
        if name not in lists:
            continue
        repeated = next((kept[i] for i in lists[name] if i in kept), None)
        if repeated is not None and overlapping:
            for item in lists[name]:
                if item in kept:
                    extra[item].append(name)
                else:
                    kept[item] = name
            taken.append(name)
            continue
        if repeated is not None:
            left.append(f"{name} (repeats pictures of {repeated})")
            continue
        kept.update((item, name) for item in lists[name])
        taken.append(name)
    split_of: dict[str, str] = {}
    also: dict[str, tuple[str, ...]] = {}  # picture -> the later lists that repeat it
    for file in pictures:
        key = posixpath.basename(stem(file.relpath))
        if key in kept:
            split_of[file.relpath] = kept[key]
            if extra.get(key):
                also[file.relpath] = tuple(extra[key])
    used = {*split_of.values(), *(s for others in also.values() for s in others)}
    names = tuple(n for n in SEGMENTATION_LISTS if n in used)
    source = f"Pascal VOC split lists (ImageSets/Segmentation: {', '.join(sorted(taken))}"
    if also:
        source += f"; {len(also)} pictures in two splits or more"
    if left:
        source += f"; left out: {', '.join(left)}"
        _LOGGER.warning(
            "ImageSets/Segmentation: %s left out: a picture is in one split (unless "
            "--overlapping_splits), and those lists repeat pictures of %s",
            ", ".join(n.split(" ")[0] for n in left),
            ", ".join(taken),
        )
    return DeclaredSplits(source + ")", names, split_of, kept_names=True, also=also)


_XML_FILES = _Xmls()
_MASKS = _Masks()


class Voc(SourceFormat):
    name = "voc"
    title = "Pascal VOC"
    tasks = ("detection", "segmentation")
    help = "Pascal VOC: an XML per picture (detection), a mask PNG per picture (segmentation)"
    looked_for: ClassVar[Mapping[str, str]] = {
        "detection": "Annotations/ beside JPEGImages/, annotations/ beside images/, an XML beside each "
        "picture",
        "segmentation": "SegmentationClass/ (or labelme2voc's SegmentationClassPNG/) beside JPEGImages/",
    }
    searched_as: ClassVar[Mapping[str, str]] = {"detection": "VOC XMLs"}
    layout_as = "Pascal VOC XMLs"
    instead_as = "XML files (Pascal VOC)"
    options = ("path", "label_map", "allow_unmatched_annotations", "declared_splits", "ignore_value")
    suffixes = (".xml",)

    def claims(self, relpath: str, task: str) -> bool:
        return task == "detection" and relpath.lower().endswith(".xml")

    def evident(self, count: int, pictures: int) -> bool:
        """XML is a common extension: a tree is a VOC one when its XMLs are half its pictures."""
        return count * 2 >= max(1, pictures)

    def score(self, task: str, listing: Listing) -> float:
        if task == "segmentation":
            return score_masks(_MASKS, listing)
        return score_objects(self, _XML_FILES, task, listing)

    def load(self, request: LoadRequest) -> AnnotationSet:
        if request.task == "segmentation":
            return load_segmentation(self, _MASKS, request)
        return load_objects(self, _XML_FILES, request)


FORMAT = Voc()
