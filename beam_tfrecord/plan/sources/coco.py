"""COCO: instances files (`instances_*.json`) -> each listed image's objects (detection);
keypoints files (`person_keypoints_*.json`) -> its objects with their points (keypoints);
captions files (`captions_*.json`) -> its sentences (captions); panoptic files
(`panoptic_*.json` with their PNG folders) -> its segments (panoptic: plan.annotations.coco_panoptic).

Where the files are: every `instances_*.json` (and Roboflow's `_annotations.coco.json`) under the
input, else every `.json` in an `annotations/` folder, else those in the input's parent or
grandparent (or their `annotations/`), the ones named after the input's folder
(`instances_val2017.json` for `val2017/`) when any is. An instances file is read in one pass, in
chunks (plan.annotations.coco_json).

Labels: category names in the order of their category ids (sorted numerically), label id = the
position in that order, counting from 0 (COCO's 80 categories, ids 1..90 with gaps, become
0..79). Several files must give a category id the same name; two ids with one name are one class.

Keypoints (a keypoints run): the files are `person_keypoints_*.json`
(or instances-named files whose categories carry `keypoints`); each category's `keypoints` names
and `skeleton` (1-based pairs) are read, and each annotation's `keypoints` (`x, y, v` triples, v
as COCO defines it, floats included) kept with its box, padded with unlabelled points to the run's
most points of a category. A detection run counts the annotations that carry labelled points, so
it can say it leaves them out.

An image entry's `file_name` is matched to a listed file by its relative path, else by a unique
path suffix (`x.jpg` or `train2017/x.jpg` finds `coco/train2017/x.jpg`). When several listed
files match, the one under a folder named after the annotation file (`train2017` for
`instances_train2017.json`) or its split wins; otherwise the entry is `ambiguous_image` and
every matching file no other entry claims is rejected `ambiguous_annotation`, never silently
treated as a negative.
"""

from __future__ import annotations

import dataclasses
import json
import os
import posixpath
import re
from collections import defaultdict
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import ClassVar

from beam_tfrecord import reasons, storage
from beam_tfrecord.elements import ImageAnnotations, ObjectBox, RunLengths
from beam_tfrecord.plan.annotations import captions, declared
from beam_tfrecord.plan.annotations.captions import Caption, CaptionFiles, load_captions, read_text
from beam_tfrecord.plan.annotations.catalog import Catalog, stem
from beam_tfrecord.plan.annotations.coco_json import (
    CocoFile,
    CocoImage,
    ImageId,
    is_image_id,
    read_file,
    short,
)
from beam_tfrecord.plan.annotations.coco_panoptic import (
    LOOKED_FOR,
    is_panoptic_file,
    load_panoptic,
    score_panoptic,
)
from beam_tfrecord.plan.annotations.locate import (
    Located,
    join,
    listed_under,
    parents,
    relative_to,
    rerooted,
    under,
)
from beam_tfrecord.plan.annotations.objects import ObjectFiles, load_objects, score_objects
from beam_tfrecord.plan.annotations.paths import AnnotationPath
from beam_tfrecord.plan.annotations.results import AnnotationSet, ImageProblem, ObjectNote, UnmatchedEntry
from beam_tfrecord.plan.listing import InputFile
from beam_tfrecord.plan.sources.base import Listing, LoadRequest, SourceError, SourceFormat

__all__ = ["FORMAT", "KEYPOINTS_NAME", "Coco", "discover", "read_instances"]

_INSTANCES = re.compile(r"^(instances_.*|_annotations\.coco)\.json$", re.IGNORECASE)
KEYPOINTS_NAME = re.compile(r"^person_keypoints_.*\.json$", re.IGNORECASE)
ROBOFLOW_NAME = "_annotations.coco.json"  # one per split folder, beside its images
_CAPTIONS = re.compile(r"^captions_.*\.json$", re.IGNORECASE)
# How COCO numbers its classes, for an append's refusal: its categories' ids, in order.
NUMBERED_BY = "COCO's categories in id order"


def discover(listed: Catalog, keypoints: bool = False) -> list[str]:
    """The instances files under the input: every `instances_*.json` (and Roboflow's
    `_annotations.coco.json`), else every `.json` in an `annotations/` folder; relpaths, sorted.
    For keypoints, every `person_keypoints_*.json` first."""
    files = listed.annotation_files
    found = [r for r in files if keypoints and KEYPOINTS_NAME.match(posixpath.basename(r))]
    found = found or [r for r in files if _INSTANCES.match(posixpath.basename(r))]
    if not found:
        found = [
            r for r in files if r.lower().endswith(".json") and "annotations" in r.lower().split("/")[:-1]
        ]
    return sorted(found)


def _dataset_categories(
    parsed: Sequence[CocoFile], categories: dict[ImageId, tuple[str, str]]
) -> set[ImageId]:
    """Categories that name the dataset, not a class: Roboflow's exports list the project itself as
    category 0, the supercategory of every other category, and no annotation uses it. Kept, it
    would be a class of no object and shift every real class id by one against the same
    dataset's YOLO or VOC export."""
    used = {raw.category for file in parsed for raws in file.annotations.values() for raw in raws}
    supers = {c: s for file in parsed for c, s in file.supercategories.items()}
    found = set()
    for category_id, (name, _) in categories.items():
        others = [c for c in categories if c != category_id]
        if category_id not in used and others and all(supers.get(c) == name for c in others):
            found.add(category_id)
    return found


def _hints(source: AnnotationPath, display: str) -> list[str]:
    """Folder names that settle an ambiguous file_name: `train2017` for
    `instances_train2017.json`, and the file's split."""
    name = posixpath.splitext(posixpath.basename(display))[0]
    hints = [name.rsplit("_", 1)[1]] if name.lower().startswith(("instances_", "person_keypoints_")) else []
    return hints + ([source.split] if source.split else [])


def read_instances(
    listed: Catalog,
    sources: Sequence[AnnotationPath],
    displays: Sequence[str],
    masks: bool = True,
    keypoints: bool = False,
) -> AnnotationSet:
    """Every listed image's objects from the instances files `sources` (shown as `displays`,
    relpaths for files under the input); with `keypoints`, each object's points too. Raises
    SourceError when two files give one category id two names (the label order would be
    undefined), or, with `keypoints`, when no category carries keypoints."""
    parsed = [
        read_file(source, display, masks, keypoints)
        for source, display in zip(sources, displays, strict=True)
    ]
    categories = _categories(parsed)
    ordered = sorted(categories, key=lambda c: (isinstance(c, str), c))
    class_names = tuple(dict.fromkeys(categories[c][0] for c in ordered))
    points = _point_sets(parsed, categories) if keypoints else None
    claims, ambiguous, unmatched = _claims(listed, parsed)
    broken = [file.broken for file in parsed if file.broken]
    images: dict[str, ImageAnnotations] = {}
    problems: list[ImageProblem] = []
    dropped: list[ObjectNote] = []
    changed: list[ObjectNote] = []
    unannotated = []
    for relpath in listed.images:
        entries = claims.get(relpath)
        if entries and len(entries) > 1:
            where = " and ".join(f"{file.display}#image {image.id}" for file, image in entries)
            count = sum(len(file.annotations.get(image.id, ())) for file, image in entries)
            problems.append(
                ImageProblem(relpath, reasons.CONFLICTING_ANNOTATIONS.code, f"annotated by {where}", count)
            )
        elif entries:
            file, image = entries[0]
            images[relpath] = _annotations(relpath, file, image, categories, dropped, changed, points)
        elif relpath in ambiguous:
            problems.append(
                ImageProblem(
                    relpath,
                    reasons.AMBIGUOUS_ANNOTATION.code,
                    f"{' and '.join(ambiguous[relpath])} could be this file or another listed one",
                )
            )
        elif broken:
            problems.append(ImageProblem(relpath, reasons.BAD_ANNOTATION.code, "; ".join(broken)))
        else:
            unannotated.append(relpath)
            images[relpath] = ImageAnnotations((), stem(relpath))
    read = {
        file.display: f"COCO instances file{f' of split {file.source.split}' if file.source.split else ''}"
        + (", malformed (its images are rejected)" if file.broken else ", read")
        for file in parsed
        if file.display in listed.annotation_files
    }
    return AnnotationSet(
        format="coco",
        class_names=class_names,
        images=images,
        unannotated=frozenset(unannotated),
        sources=read,
        problems=tuple(sorted(problems)),
        unmatched=tuple(unmatched),
        dropped=tuple(dropped),
        changed=tuple(changed),
        split_names=tuple(dict.fromkeys(s.split for s in sources if s.split)),
        warnings=_left_out_keypoints(parsed),
        task="keypoints" if keypoints else "detection",
        keypoint_names={categories[c][0]: n for c, n in points.names.items()} if points else {},
        skeletons={categories[c][0]: k for c, k in points.skeletons.items()} if points else {},
        numbered_by=NUMBERED_BY,
    )


def _categories(parsed: Sequence[CocoFile]) -> dict[ImageId, tuple[str, str]]:
    """Category id -> (name, file that named it), the dataset's own category left out; a
    SourceError when two files name one id differently."""
    categories: dict[ImageId, tuple[str, str]] = {}
    for file in parsed:
        for category_id, name in file.categories.items():
            if category_id in categories and categories[category_id][0] != name:
                first = categories[category_id]
                raise SourceError(
                    f"annotations_path: category id {category_id} is {first[0]!r} in {first[1]} "
                    f"but {name!r} in {file.display}",
                    file=file.display,
                )
            categories.setdefault(category_id, (name, file.display))
    for category_id in _dataset_categories(parsed, categories):
        del categories[category_id]
    return categories


def _left_out_keypoints(parsed: Sequence[CocoFile]) -> tuple[str, ...]:
    """A detection run's warning on the labelled points it leaves out: labels the run was not
    asked for are said, never left out without a word."""
    labelled = sum(file.labelled_keypoints for file in parsed)
    if not labelled:
        return ()
    return (
        f"{labelled} annotations also hold keypoints, which a detection run leaves out: "
        "--task keypoints stores them",
    )


def _claims(
    listed: Catalog, parsed: Sequence[CocoFile]
) -> tuple[dict[str, list[tuple[CocoFile, CocoImage]]], dict[str, list[str]], list[UnmatchedEntry]]:
    """Listed image -> the image entries that name it; image -> the ambiguous entries that could;
    and the entries that name no listed image (or none at all)."""
    claims: dict[str, list[tuple[CocoFile, CocoImage]]] = defaultdict(list)
    ambiguous: dict[str, list[str]] = defaultdict(list)
    unmatched: list[UnmatchedEntry] = []
    for file in parsed:
        unmatched += file.bad_entries
        hints = _hints(file.source, file.display)
        for image in file.images:
            where = f"{file.display}#image {image.id}"
            if not image.file_name:
                objects = len(file.annotations.pop(image.id, ()))
                unmatched.append(
                    UnmatchedEntry(where, "", reasons.BAD_ENTRY.code, "the image has no file_name", objects)
                )
                continue
            found = listed.matches(image.file_name)
            if len(found) > 1:
                found = next(
                    (
                        kept
                        for hint in hints
                        if len(kept := [r for r in found if hint in r.split("/")[:-1]]) == 1
                    ),
                    found,
                )
            objects = len(file.annotations.get(image.id, ()))
            if not found:
                unmatched.append(
                    UnmatchedEntry(
                        where,
                        image.file_name,
                        reasons.MISSING_IMAGE.code,
                        "no listed file has this name",
                        objects,
                    )
                )
            elif len(found) > 1:
                unmatched.append(
                    UnmatchedEntry(
                        where,
                        image.file_name,
                        reasons.AMBIGUOUS_IMAGE.code,
                        f"matches {len(found)} listed files: {', '.join(found[:5])}",
                        objects,
                    )
                )
                for relpath in found:
                    ambiguous[relpath].append(f"{where} ({image.file_name!r})")
            else:
                claims[found[0]].append((file, image))
        unmatched += _unknown_images(file)
    return claims, ambiguous, unmatched


def _unknown_images(file: CocoFile) -> list[UnmatchedEntry]:
    """Annotations whose image id is not among the file's images."""
    known = {image.id for image in file.images}
    return [
        UnmatchedEntry(
            f"{file.display}#annotation {raws[0].ref}",
            "",
            reasons.UNKNOWN_IMAGE.code,
            f"image id {image_id} is not in {file.display}'s images",
            len(raws),
        )
        for image_id, raws in file.annotations.items()
        if image_id not in known
    ]


@dataclass(frozen=True)
class _PointSets:
    """A keypoints run's categories' points: names and skeleton by category id, and the count
    every object's points are padded to (the most of any category)."""

    names: dict[ImageId, tuple[str, ...]]
    skeletons: dict[ImageId, tuple[tuple[int, int], ...]]
    count: int


def _point_sets(parsed: Sequence[CocoFile], categories: dict[ImageId, tuple[str, str]]) -> _PointSets:
    names: dict[ImageId, tuple[str, ...]] = {}
    skeletons: dict[ImageId, tuple[tuple[int, int], ...]] = {}
    for file in parsed:
        for category_id, found in file.keypoint_names.items():
            if category_id in names and names[category_id] != found:
                raise SourceError(
                    f"annotations_path: category id {category_id} has other keypoints in {file.display}",
                    file=file.display,
                )
            names[category_id] = found
            skeletons[category_id] = file.skeletons.get(category_id, ())
    names = {c: n for c, n in names.items() if c in categories}
    if not names:
        shown = ", ".join(file.display for file in parsed)
        raise SourceError(
            f"annotations_path: no category of {shown} carries keypoints (names): a keypoints run "
            "reads person_keypoints_*.json files",
            file=shown,
        )
    return _PointSets(names, {c: skeletons[c] for c in names}, max(len(n) for n in names.values()))


def _annotations(
    relpath: str,
    file: CocoFile,
    image: CocoImage,
    categories: dict[ImageId, tuple[str, str]],
    dropped: list[ObjectNote],
    changed: list[ObjectNote],
    points: _PointSets | None = None,
) -> ImageAnnotations:
    """One image's objects; each raw record is released once its object is made. In a keypoints
    run every object gets the run's count of points: its own (as many as its category names),
    then unlabelled ones."""
    objects = []
    for raw in file.annotations.pop(image.id, ()):
        ref = f"{file.display}#annotation {raw.ref}"
        if raw.drop is not None:
            dropped.append(ObjectNote(relpath, raw.drop[0], f"{ref}: {raw.drop[1]}"))
            continue
        category = categories.get(raw.category) if is_image_id(raw.category) else None
        if category is None:
            dropped.append(
                ObjectNote(
                    relpath,
                    reasons.UNKNOWN_CATEGORY.code,
                    f"{ref}: category_id {short(raw.category)} is not in categories",
                )
            )
            continue
        mask, change = raw.mask, raw.change
        declared = (image.height, image.width)
        if isinstance(mask, RunLengths) and None not in declared and (mask.height, mask.width) != declared:
            sizes = f"{mask.height}x{mask.width}, the image's {image.height}x{image.width}"
            mask = None
            change = (reasons.MASK_MALFORMED.code, f"run lengths over {sizes}")
        keypoints = None
        if points is not None:
            own = raw.keypoints or ()
            expected = 3 * len(points.names.get(raw.category, ()))
            if own and len(own) != expected:
                change = change or (
                    reasons.KEYPOINTS_MALFORMED.code,
                    f"{len(own) // 3} keypoints, where its category names {expected // 3}",
                )
                own = ()
            keypoints = own + (0.0,) * (3 * points.count - len(own))
        if change is not None:
            changed.append(ObjectNote(relpath, change[0], f"{ref}: {change[1]}"))
        assert raw.box is not None  # only an annotation dropped while parsing has none
        xmin, ymin, xmax, ymax = raw.box
        objects.append(
            ObjectBox(
                xmin, ymin, xmax, ymax, category[0], raw.area, raw.crowd, mask=mask, source_ref=ref,
                keypoints=keypoints,
            )
        )  # fmt: skip
    return ImageAnnotations(
        tuple(objects), str(image.id), width=image.width, height=image.height, split=file.source.split
    )


class _Instances(ObjectFiles):
    """COCO's instances and keypoints files: several, one per split (`train=a.json,...`)."""

    several_paths = True

    def given(self, path: str, task: str) -> bool:
        return path.endswith((".json", ".json.gz"))

    def locate(
        self, base: str, listed: Catalog, paths: tuple[AnnotationPath, ...], keypoints: bool
    ) -> Located:
        """Under the input, else in its parent or grandparent (or their `annotations/`), those
        named after the input's folder when any is."""
        if paths or discover(listed, keypoints):
            return Located(listed, paths=paths)
        for root in parents(base)[:2]:
            found: dict[str, InputFile] = {}
            for pattern in ("*.json", "annotations/*.json"):
                found |= under(root, root, listed_under(join(root, pattern), (".json",)))
            named = {
                r: f for r, f in found.items() if keypoints and KEYPOINTS_NAME.match(posixpath.basename(r))
            }
            found = named or {r: f for r, f in found.items() if _INSTANCES.match(posixpath.basename(r))}
            if not found:
                continue
            inside = relative_to(base, root) or ""
            prefix = inside + "/"
            folders = set(inside.split("/"))
            named = {r: f for r, f in found.items() if _folder_hint(r) in folders}
            found = named or found
            return Located(rerooted(listed, prefix, found), prefix, root, tuple(sorted(found)), paths)
        return Located(listed, paths=paths)

    def read(self, located: Located, request: LoadRequest) -> AnnotationSet:
        listed, paths = located.catalog, located.paths
        keypoints = request.keypoints
        if not paths:
            found = discover(listed, keypoints)
            if not found:
                # Nothing to read: every picture unannotated, which the planner refuses in one line.
                images = {relpath: ImageAnnotations((), stem(relpath)) for relpath in listed.images}
                return AnnotationSet("coco", (), images, unannotated=frozenset(listed.images))
            named = [AnnotationPath(listed.annotation_files[r].path, declared.coco_split(r)) for r in found]
            result = read_instances(listed, named, found, request.masks, keypoints)
            return dataclasses.replace(result, split_names=())  # declared, not given: see `declared`
        for path in paths:
            if os.path.isdir(path.path):
                raise SourceError(
                    f"{path.path} is a folder; name the COCO instances files in it",
                    field="annotations_path",
                    file=path.path,
                )
        displays = [_display(listed, path.path) for path in paths]
        return read_instances(listed, paths, displays, request.masks, keypoints)

    def declared(
        self, result: AnnotationSet, located: Located, paths: tuple[AnnotationPath, ...]
    ) -> AnnotationSet:
        """COCO files found (not given per split) declare their splits by name."""
        if paths:  # given files: `train=a.json` holds its images in that split, as before
            return result
        claims = {r: found.split for r, found in result.images.items() if found.split}
        if not claims:
            return result
        images = {
            r: dataclasses.replace(found, split=None) if found.split else found
            for r, found in result.images.items()
        }
        names = tuple(n for n in declared.SPLIT_ORDER if n in claims.values())
        source = (
            "COCO files named by split (instances_<split>*.json, person_keypoints_<split>*.json, "
            "<split>/_annotations.coco.json)"
        )
        return dataclasses.replace(
            result, images=images, declared=declared.DeclaredSplits(source, names, claims)
        )


def _folder_hint(relpath: str) -> str:
    """`annotations/instances_val2017.json` -> `val2017`, the folder its images are in."""
    name = posixpath.splitext(posixpath.basename(relpath))[0]
    return name.rsplit("_", 1)[1] if name.lower().startswith(("instances_", "person_keypoints_")) else ""


def _display(listed: Catalog, path: str) -> str:
    """A given annotation file as messages name it: its relpath when it is under the input."""
    real = storage.real_path(path)
    for file in listed.annotation_files.values():
        if storage.real_path(file.path) == real:
            return file.relpath
    return path


class _Captions(CaptionFiles):
    """COCO's captions files: each entry's `image_id` names an `images` entry's `file_name`,
    usually five a picture; the file's name declares its split (`captions_val2017.json`)."""

    what = "a captions file"
    title = "COCO captions"

    def wanted(self, relpath: str) -> bool:
        return bool(_CAPTIONS.match(posixpath.basename(relpath)))

    def split_of(self, shown: str) -> str | None:
        """`captions_val2017.json` -> validation."""
        match = re.match(r"^captions_([a-z]+)", posixpath.basename(shown), re.IGNORECASE)
        return declared.split_name(match.group(1)) if match else None

    def holds(self, head: str) -> bool:
        """A JSON document (an object), not JSON lines: its first line is not an object by itself
        unless it is the whole document (a COCO file on one line holds `annotations`)."""
        text = head.lstrip()
        if not text.startswith("{"):
            return False
        first = text.split("\n", 1)[0]
        try:
            document = json.loads(first)
        except json.JSONDecodeError:  # an object that goes on past its first line (or the head)
            return True
        return isinstance(document, dict) and ("annotations" in document or "images" in document)

    def read(self, source: InputFile, shown: str) -> Iterator[Caption | UnmatchedEntry]:
        """A COCO captions file's captions, each naming its picture's `file_name`."""
        try:
            document = json.loads(read_text(source, shown))
        except json.JSONDecodeError as error:
            raise SourceError(
                f"{shown} is not JSON: {error} (a file of image, caption lines is --annotations pairs')",
                field="annotations_path",
                file=shown,
            ) from None
        if not isinstance(document, dict) or not isinstance(document.get("annotations"), list):
            raise SourceError(
                f"{shown} is not a COCO captions file (no annotations list)",
                field="annotations_path",
                file=shown,
            )
        annotations = document["annotations"]
        if "categories" in document and not any(isinstance(a, dict) and "caption" in a for a in annotations):
            raise SourceError(
                f"{shown} is a COCO instances file (categories, no captions): pass its "
                "captions_*.json, or --task detection",
                field="annotations_path",
                file=shown,
            )
        names = {}
        for image in document.get("images") or []:
            if isinstance(image, dict) and "id" in image and isinstance(image.get("file_name"), str):
                names[image["id"]] = image["file_name"]
        for index, entry in enumerate(annotations):
            where = f"{shown}#annotation {entry.get('id', index) if isinstance(entry, dict) else index}"
            if not isinstance(entry, dict) or not isinstance(entry.get("caption"), str):
                if isinstance(entry, dict) and "bbox" in entry:
                    raise SourceError(
                        f"{shown} is a COCO instances file (boxes, no captions): "
                        "pass its captions_*.json, or --task detection",
                        field="annotations_path",
                        file=shown,
                    )
                yield UnmatchedEntry(where, "", reasons.BAD_ENTRY.code, "an annotation without a caption")
                continue
            name = names.get(entry.get("image_id"))
            if name is None:
                detail = f"image_id {entry.get('image_id')!r} is not among the file's images"
                yield UnmatchedEntry(where, "", reasons.UNKNOWN_IMAGE.code, detail)
                continue
            yield Caption(name, where, entry["caption"].strip())


_INSTANCE_FILES = _Instances()
_CAPTION_FILES = _Captions()


class Coco(SourceFormat):
    name = "coco"
    title = "COCO"
    tasks = ("detection", "keypoints", "panoptic", "captions")
    help = "COCO's JSON files: instances_*.json, person_keypoints_*.json, panoptic_*.json, captions_*.json"
    looked_for: ClassVar[Mapping[str, str]] = {
        "detection": "instances_*.json or _annotations.coco.json under --input, or beside it",
        "keypoints": "instances_*.json or _annotations.coco.json under --input, or beside it",
        "captions": "captions_*.json under --input or beside it (or its annotations/ folder)",
        "panoptic": LOOKED_FOR,
    }
    searched_as: ClassVar[Mapping[str, str]] = {
        "detection": "COCO instances files",
        "keypoints": "COCO files",
        "panoptic": "COCO panoptic files (panoptic_*.json)",
    }
    layout_as = "COCO instances files"
    instead_as = "COCO instances files"
    options = ("path", "masks", "label_map", "allow_unmatched_annotations", "declared_splits")
    suffixes = (".json",)

    def claims(self, relpath: str, task: str) -> bool:
        name = posixpath.basename(relpath).lower()
        if task == "captions":
            return bool(_CAPTIONS.match(name))
        if task == "panoptic":
            return is_panoptic_file(name)
        return name.endswith(".json") and (
            name.startswith(("instances_", "person_keypoints_")) or name == ROBOFLOW_NAME
        )

    def score(self, task: str, listing: Listing) -> float:
        if task == "captions":
            return captions.score_files(_CAPTION_FILES, listing)
        if task == "panoptic":
            return score_panoptic(listing)
        return score_objects(self, _INSTANCE_FILES, task, listing)

    def load(self, request: LoadRequest) -> AnnotationSet:
        if request.task == "captions":
            return load_captions(self, _CAPTION_FILES, request)
        if request.task == "panoptic":
            return load_panoptic(request, self.name)
        return load_objects(self, _INSTANCE_FILES, request)


FORMAT = Coco()
