"""Pascal VOC: one XML per image -> its objects (boxes in pixels, `difficult`, `truncated`, `pose`).

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
import math
import posixpath
from collections import defaultdict
from collections.abc import Sequence
from xml.etree.ElementTree import Element, ParseError

import defusedxml
import defusedxml.ElementTree

from beam_tfrecord import reasons
from beam_tfrecord.elements import ImageAnnotations, ObjectBox
from beam_tfrecord.plan.annotations.catalog import MAX_IMAGE_ANNOTATION_BYTES, Catalog, read_many, stem
from beam_tfrecord.plan.annotations.paths import AnnotationPath
from beam_tfrecord.plan.annotations.results import AnnotationSet, ImageProblem, ObjectNote, UnmatchedEntry
from beam_tfrecord.plan.listing import InputFile, list_inputs

__all__ = ["load"]

STANDARD_IMAGES = "JPEGImages"
STANDARD_ANNOTATIONS = "Annotations"
# Image folder -> annotation folders beside it: VOC's devkit, and the `images/` +
# `annotations/` pair of LabelImg, Roboflow and Kaggle exports.
ANNOTATION_FOLDERS = {STANDARD_IMAGES: (STANDARD_ANNOTATIONS,), "images": ("annotations", "Annotations")}
_TRUE = {"1", "true", "yes"}
_FALSE = {"0", "false", "no", ""}


class _Rejected(Exception):
    """An XML that cannot annotate its image: (reason, detail)."""


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
        raise _Rejected(
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
        raise ValueError(f"annotations_path {folder.path} does not exist or holds no files") from None


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


def load(listed: Catalog, folder: AnnotationPath | None = None) -> AnnotationSet:
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

    unclaimed: dict[str, InputFile] = {}  # by path: annotations_path may lie under the input
    for file in [*annotation_files.values(), *external]:
        if file.path not in used and file.relpath.lower().endswith(".xml"):
            unclaimed.setdefault(file.path, file)
    orphans = list(unclaimed.values())
    unmatched = []
    parsed_orphans = _parse_all(orphans, listed)
    for file in orphans:
        result = parsed_orphans[file.path]
        display = _display(file, listed)
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

    class_names = sorted({obj.class_name for found_image in images.values() for obj in found_image.objects})
    return AnnotationSet(
        kind="voc",
        class_names=tuple(class_names),
        images=images,
        unannotated=frozenset(unannotated),
        problems=tuple(sorted(problems)),
        sources=sources,
        unmatched=tuple(unmatched),
        dropped=tuple(dropped),
    )


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
