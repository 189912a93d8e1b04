"""COCO panoptic (`--task panoptic`, read by the COCO format): a `panoptic_*.json` with its PNG
folder beside it, as COCO ships them and panopticapi writes them:

    annotations/panoptic_train2017.json      images, annotations (one per image: image_id,
                                             file_name (its PNG), segments_info [{id,
                                             category_id, iscrowd, bbox, area}]), categories
                                             ({id, name, supercategory, isthing, color})
    annotations/panoptic_train2017/*.png     one PNG per image: segment ids as colours
                                             (id = R + 256 G + 256^2 B, panopticapi's rgb2id)
    train2017/*.jpg                          the pictures
    (panoptic_coco_categories.json)          the categories, where the JSON lists none

Where the files are: every `panoptic_*.json` under the input, else in its parent or grandparent
(or their `annotations/`), those named after the input's folder (`panoptic_val2017.json` for
`val2017/`) when any is; or the files `--annotations_path` names. Each JSON's PNGs are in the
folder of its name (`panoptic_train2017/`), read by the workers (never here).

Labels: every category, things and stuff, named in id order (labels.txt); the things' segments
are the objects (box from `bbox`, area from `area`, `iscrowd` kept, mask from the PNG), so a
panoptic run needs no instances file and its objects are the segments its masks hold. The
semantic mask's value of a stuff category is its id minus the offset that makes the smallest
stuff id 2 (Model Garden's 90 for COCO's 92..200); every thing is 1.

A picture no entry names is unannotated; an entry whose picture is not listed is unmatched; an
entry whose PNG is not there rejects its picture (`panoptic_unreadable`).
"""

from __future__ import annotations

import json
import posixpath
import re
from collections.abc import Sequence
from dataclasses import dataclass

from beam_tfrecord import reasons
from beam_tfrecord.edges import Json
from beam_tfrecord.elements import ImageAnnotations, ObjectBox
from beam_tfrecord.labels.panoptic import PanopticPicture, Segment
from beam_tfrecord.plan.annotations import declared
from beam_tfrecord.plan.annotations.catalog import Catalog, partition, read_one, stem
from beam_tfrecord.plan.annotations.locate import (
    input_base,
    join,
    listed_under,
    parents,
    relative_to,
)
from beam_tfrecord.plan.annotations.results import (
    AnnotationSet,
    DeclaredSplits,
    ImageProblem,
    ObjectNote,
    UnmatchedEntry,
)
from beam_tfrecord.plan.listing import InputFile
from beam_tfrecord.plan.sources.base import CERTAIN, Listing, LoadRequest, SourceError

__all__ = ["CATEGORIES_NAME", "LOOKED_FOR", "is_panoptic_file", "load_panoptic", "score_panoptic"]

_PANOPTIC = re.compile(r"^panoptic_.*\.json$", re.IGNORECASE)
CATEGORIES_NAME = "panoptic_coco_categories.json"
LOOKED_FOR = "panoptic_*.json with its PNG folder under --input, or beside it (its annotations/ folder)"


def is_panoptic_file(relpath: str) -> bool:
    """A COCO panoptic file's name (`panoptic_val2017.json`; not the categories file)."""
    name = posixpath.basename(relpath)
    return bool(_PANOPTIC.match(name)) and name.lower() != CATEGORIES_NAME


def score_panoptic(listing: Listing) -> float:
    """Certain where a panoptic file is under the input (or beside it, where files beside count)."""
    if listing.paths or any(is_panoptic_file(r) for r in listing.catalog.annotation_files):
        return CERTAIN
    if listing.outside and listing.files and _beside(input_base(listing.files)):
        return CERTAIN
    return 0.0


@dataclass(frozen=True)
class _Json:
    """A panoptic file: its path, how messages name it, where its PNGs are, its split by name."""

    path: str
    shown: str
    pngs: str
    split: str | None


def _beside(base: str) -> list[_Json]:
    """Panoptic files in the input's parent or grandparent (or their `annotations/`), those named
    after the input's folder when any is."""
    for root in parents(base)[:2]:
        found = [
            f
            for pattern in ("*.json", "annotations/*.json")
            for f in listed_under(join(root, pattern), (".json",))
            if is_panoptic_file(f.relpath)
        ]
        if not found:
            continue
        inside = set((relative_to(base, root) or "").split("/"))
        named = [f for f in found if _split_word(f.path) in inside]
        return [_file(f.path, f.path) for f in sorted(named or found, key=lambda f: f.path)]
    return []


def _split_word(path: str) -> str:
    """`panoptic_val2017.json` -> `val2017`."""
    return posixpath.splitext(posixpath.basename(path))[0].split("_", 1)[1]


def _file(path: str, shown: str) -> _Json:
    word = re.match(r"^panoptic_([a-z]+)", posixpath.basename(path), re.IGNORECASE)
    return _Json(path, shown, path[: -len(".json")], declared.split_name(word.group(1)) if word else None)


def _categories(document: dict[str, Json], shown: str, beside: Sequence[str]) -> list[dict[str, Json]]:
    """The file's categories, else those of a panoptic_coco_categories.json beside it."""
    found = document.get("categories")
    if isinstance(found, list) and found:
        return [c for c in found if isinstance(c, dict)]
    for path in beside:
        if posixpath.basename(path).lower() == CATEGORIES_NAME:
            listed = json.loads(read_one(path))
            if isinstance(listed, list):
                return [c for c in listed if isinstance(c, dict)]
    raise SourceError(
        f"{shown} lists no categories and no {CATEGORIES_NAME} is beside it",
        field="annotations_path",
        file=shown,
    )


def _pngs(folder: str, catalog: Catalog) -> dict[str, InputFile]:
    """The PNG folder's files by name: from the listing where it is under the input, else listed."""
    found = {
        posixpath.basename(f.path): f for f in catalog.images.values() if f.path.startswith(folder + "/")
    }
    if found:
        return found
    return {posixpath.basename(f.path): f for f in listed_under(folder, (".png",))}


def _located(request: LoadRequest, listed: Catalog) -> list[_Json]:
    """The panoptic files given, else those under the input, else those beside it."""
    if request.paths:
        return [_Json(p.path, p.path, p.path.removesuffix(".json"), p.split) for p in request.paths]
    under = sorted(r for r in listed.annotation_files if is_panoptic_file(r))
    return [_file(listed.annotation_files[r].path, r) for r in under] or _beside(input_base(request.files))


def _sources(listed: Catalog, files: Sequence[_Json]) -> dict[str, str]:
    """The listed files that are no pictures: the PNGs (labels), the JSON files."""
    jsons = {f.path for f in files}
    sources: dict[str, str] = {}
    for relpath, listed_file in listed.images.items():
        if any(listed_file.path.startswith(f.pngs + "/") for f in files):
            sources[relpath] = "a COCO panoptic PNG (segment ids), read with its picture"
    for relpath, listed_file in listed.annotation_files.items():
        if listed_file.path in jsons:
            sources[relpath] = "COCO panoptic file, read"
        elif posixpath.basename(relpath).lower() == CATEGORIES_NAME:
            sources[relpath] = "COCO panoptic categories, read"
        else:  # an instances file beside: the things are the panoptic segments
            sources[relpath] = "not a panoptic file: a panoptic run reads panoptic_*.json"
    return sources


def _parsed(
    files: Sequence[_Json], beside: Sequence[str]
) -> tuple[list[tuple[_Json, dict[str, Json]]], dict[int, tuple[str, bool]]]:
    """Each file's document, and the categories: id -> (name, isthing)."""
    categories: dict[int, tuple[str, bool]] = {}
    parsed = []
    for file in files:
        try:
            document = json.loads(read_one(file.path))
        except (OSError, ValueError) as error:
            raise SourceError(f"{file.shown}: {error}", field="annotations_path", file=file.shown) from None
        if not isinstance(document, dict) or not isinstance(document.get("annotations"), list):
            raise SourceError(
                f"{file.shown} is not a COCO panoptic file (no annotations list)",
                field="annotations_path",
                file=file.shown,
            )
        here = [posixpath.join(posixpath.dirname(file.path), CATEGORIES_NAME), *beside]
        for category in _categories(document, file.shown, here):
            key = int(str(category.get("id")))
            named = (str(category.get("name")), bool(category.get("isthing")))
            if categories.setdefault(key, named) != named:
                raise SourceError(
                    f"category id {key} is {categories[key]} and {named} in {file.shown}",
                    field="annotations_path",
                    file=file.shown,
                )
        parsed.append((file, document))
    return parsed, categories


def load_panoptic(request: LoadRequest, name: str = "coco") -> AnnotationSet:
    """Every listed picture's segments from the panoptic files found (or given). Raises
    SourceError for a file that is not a COCO panoptic file or whose categories disagree."""
    listed = partition(request.files)
    files = _located(request, listed)
    sources = _sources(listed, files)
    catalog = Catalog({r: f for r, f in listed.images.items() if r not in sources}, listed.annotation_files)
    parsed, categories = _parsed(files, [f.path for f in listed.annotation_files.values()])
    ordered = sorted(categories)
    stuff = [c for c in ordered if not categories[c][1]]
    offset = min(stuff) - 2 if stuff else 0
    images: dict[str, ImageAnnotations] = {}
    problems: list[ImageProblem] = []
    unmatched: list[UnmatchedEntry] = []
    dropped: list[ObjectNote] = []
    split_of: dict[str, str] = {}
    for file, document in parsed:
        pngs = _pngs(file.pngs, catalog)
        entries = {a.get("image_id"): a for a in document["annotations"] if isinstance(a, dict)}
        for image in document.get("images") or []:
            if not isinstance(image, dict):
                continue
            where = f"{file.shown}#image {image.get('id')}"
            entry = entries.pop(image.get("id"), None)
            segments = entry.get("segments_info") or [] if entry is not None else []
            matched = catalog.matches(str(image.get("file_name", "")))
            if len(matched) != 1:
                code, detail = (
                    (reasons.MISSING_IMAGE.code, "no listed file has this name")
                    if not matched
                    else (reasons.AMBIGUOUS_IMAGE.code, f"matches {len(matched)} listed files")
                )
                unmatched.append(
                    UnmatchedEntry(where, str(image.get("file_name", "")), code, detail, len(segments))
                )
                continue
            relpath = matched[0]
            if entry is None:
                continue  # unannotated, below
            png = pngs.get(str(entry.get("file_name", "")))
            if png is None:
                problems.append(
                    ImageProblem(
                        relpath,
                        reasons.PANOPTIC_UNREADABLE.code,
                        f"{join(file.pngs, str(entry.get('file_name')))} is not there",
                        len(segments),
                    )
                )
                continue
            picture, objects, left_out = _picture(entry, segments, categories, offset, file, png)
            dropped += [ObjectNote(relpath, reason, detail) for reason, detail in left_out]
            images[relpath] = ImageAnnotations(
                objects,
                str(image.get("id")),
                width=image.get("width") if isinstance(image.get("width"), int) else None,
                height=image.get("height") if isinstance(image.get("height"), int) else None,
                values={"panoptic": picture.value()},
            )
            if file.split:
                split_of[relpath] = file.split
        for image_id, entry in entries.items():
            unmatched.append(
                UnmatchedEntry(
                    f"{file.shown}#annotation {image_id}",
                    str(entry.get("file_name", "")),
                    reasons.UNKNOWN_IMAGE.code,
                    f"image id {image_id} is not in {file.shown}'s images",
                    len(entry.get("segments_info") or []),
                )
            )
    problem_paths = {p.relpath for p in problems}
    unannotated = [r for r in catalog.images if r not in images and r not in problem_paths]
    for relpath in unannotated:
        images[relpath] = ImageAnnotations((), stem(relpath))
    names = tuple(n for n in declared.SPLIT_ORDER if n in split_of.values())
    return AnnotationSet(
        format=name,
        class_names=tuple(dict.fromkeys(categories[c][0] for c in ordered)),
        images=images,
        unannotated=frozenset(unannotated),
        sources=sources,
        problems=tuple(sorted(problems)),
        unmatched=tuple(unmatched),
        dropped=tuple(dropped),
        found_at=", ".join(f.shown for f in files) or "no panoptic_*.json found",
        looked_for="" if files else LOOKED_FOR,
        task="panoptic",
        declared=(
            DeclaredSplits("COCO panoptic files named by split (panoptic_<split>*.json)", names, split_of)
            if split_of and request.declared_splits
            else None
        ),
        numbered_by="COCO's categories in id order",
    )


def _picture(
    entry: dict[str, Json],
    segments: list[Json],
    categories: dict[int, tuple[str, bool]],
    offset: int,
    file: _Json,
    png: InputFile,
) -> tuple[PanopticPicture, tuple[ObjectBox, ...], list[tuple[str, str]]]:
    """An entry's segments (those of a category the file lists) and its things as objects, and
    the segments left out, each as (reason, detail)."""
    kept = []
    left_out: list[tuple[str, str]] = []
    for number, raw in enumerate(segments):
        where = f"{file.shown}#image {entry.get('image_id')} segment {number}"
        if not isinstance(raw, dict):
            left_out.append((reasons.BAD_OBJECT.code, f"{where}: not an object"))
            continue
        if int(str(raw.get("category_id"))) not in categories:
            detail = f"{where}: category {raw.get('category_id')} is not in the file's categories"
            left_out.append((reasons.UNKNOWN_CATEGORY.code, detail))
            continue
        category_id = int(str(raw["category_id"]))
        name, thing = categories[category_id]
        semantic = 1 if thing else category_id - offset
        kept.append(
            Segment(int(str(raw["id"])), category_id, bool(raw.get("iscrowd")), semantic, thing, name)
        )
    shown = join(posixpath.basename(file.pngs), str(entry.get("file_name")))
    picture = PanopticPicture(png.path, png.size, shown, posixpath.basename(file.shown), tuple(kept))
    objects = []
    raws = {int(str(r["id"])): r for r in segments if isinstance(r, dict)}
    for segment in kept:
        if not segment.thing:
            continue
        raw = raws[segment.id]
        x, y, w, h = (float(v) for v in raw.get("bbox") or (0, 0, 0, 0))
        area = raw.get("area")
        objects.append(
            ObjectBox(
                x,
                y,
                x + w,
                y + h,
                segment.name,
                float(area) if isinstance(area, (int, float)) else None,
                segment.crowd,
                source_ref=picture.object_ref(segment),
            )
        )
    return picture, tuple(objects), left_out
