"""Where a dataset's annotations are, found the way each format's own tools find them, from
whichever folder the user names: the dataset's root, its images folder, or one split's folder.

The parsers match images to annotation files by paths relative to one root. When `--input` is
the root, that is the listing as it is. When it is a folder inside the dataset (`ds/images`,
`VOC2012/JPEGImages`, `coco/train2017`), the annotations are beside it, outside the listing:

- YOLO: Ultralytics' rule on the image's whole path (the last `/images/` becomes `/labels/`), so
  `ds/labels/...` is listed for `--input ds/images/...`, with `ds/*.yaml` and `ds/classes.txt`;
- Pascal VOC: `Annotations/` beside `JPEGImages/`, `annotations/` (or `Annotations/`) beside
  `images/`, and the devkit's `ImageSets/Main/*.txt`;
- COCO: `instances_*.json` in the input's parent or grandparent (or their `annotations/`),
  those named after the input's folder (`instances_val2017.json` for `val2017/`) when any is.

Then the listing is seen from that root (`ds/images/train/x.jpg` is `images/train/x.jpg`), the
files found beside are added to it, and the parsers' answer is brought back to the input's
relpaths (`Located.back`). Nothing beside the input is ever an input or a reject line.
"""

from __future__ import annotations

import dataclasses
import posixpath
import re
from collections.abc import Sequence
from dataclasses import dataclass

import yaml

from beam_tfrecord import reasons, storage
from beam_tfrecord.config_base import ConfigError
from beam_tfrecord.plan.annotations import coco
from beam_tfrecord.plan.annotations.catalog import ANNOTATION_EXTENSIONS, Catalog, read_one
from beam_tfrecord.plan.annotations.paths import AnnotationPath
from beam_tfrecord.plan.annotations.results import AnnotationSet, ImageProblem, ObjectNote
from beam_tfrecord.plan.listing import InputFile, list_inputs

__all__ = ["Located", "input_base", "locate", "relative_to"]

COCO_NAME = re.compile(r"^(instances_.*|_annotations\.coco)\.json$", re.IGNORECASE)


@dataclass(frozen=True)
class Located:
    """The listing as the parsers see it, seen from the dataset's root.

    Args:
      catalog: images keyed `prefix + relpath`; annotation files under the input and beside it,
        keyed by their path under `root`.
      prefix: the input's path under `root` with a trailing `/` ("" when the input is the root).
      root: the dataset's root (the input's own folder, or an ancestor).
      beside: folders (or files) listed beside the input that held annotation files.
      paths: annotations_path, as the parser takes it (a YOLO labels folder becomes none: its
        files are in the catalog).
    """

    catalog: Catalog
    prefix: str = ""
    root: str = ""
    beside: tuple[str, ...] = ()
    paths: tuple[AnnotationPath, ...] = ()

    def back(self, result: AnnotationSet) -> AnnotationSet:
        """The parsers' answer in the input's relpaths: annotation files beside the input are in
        no reject line (they are not listed), and images lose the prefix."""
        if not self.prefix:
            return result
        cut = len(self.prefix)

        def note(item: ObjectNote) -> ObjectNote:
            return dataclasses.replace(item, relpath=item.relpath[cut:])

        def problem(item: ImageProblem) -> ImageProblem:
            return dataclasses.replace(item, relpath=item.relpath[cut:])

        return dataclasses.replace(
            result,
            images={relpath[cut:]: found for relpath, found in result.images.items()},
            unannotated=frozenset(relpath[cut:] for relpath in result.unannotated),
            sources={r[cut:]: what for r, what in result.sources.items() if r.startswith(self.prefix)},
            problems=tuple(map(problem, result.problems)),
            dropped=tuple(map(note, result.dropped)),
            changed=tuple(map(note, result.changed)),
        )

    def display(self, relpath: str) -> str:
        """A root-relative path as a user finds it: under the root's own path."""
        return join(self.root, relpath) if self.prefix else relpath


def input_base(files: Sequence[InputFile]) -> str:
    """The folder the listing's relpaths are relative to."""
    for file in files:
        if file.path.endswith("/" + file.relpath):
            return file.path[: -len(file.relpath) - 1]
    return posixpath.dirname(files[0].path) if files else ""


def join(folder: str, relpath: str) -> str:
    return f"{folder.rstrip('/')}/{relpath}" if relpath else folder


def relative_to(path: str, folder: str) -> str | None:
    """`path` under `folder` as a relpath ("" for the folder itself), or None when not under it."""
    path, folder = path.rstrip("/"), folder.rstrip("/")
    if path == folder:
        return ""
    return path[len(folder) + 1 :] if path.startswith(folder + "/") else None


def _parents(path: str) -> list[str]:
    """`path`'s ancestors, nearest first, never above a bucket or `/`."""
    return storage.parents(path)


def _list(folder: str, keep: tuple[str, ...] = tuple(ANNOTATION_EXTENSIONS)) -> list[InputFile]:
    """Annotation files under a folder (or matching a glob), [] when there is none."""
    if "*" not in folder and not storage.exists(folder, if_remote=True):
        return []
    try:
        files = list_inputs(folder)
    except (ConfigError, ValueError, OSError):
        return []
    # A name that is not UTF-8 is read all the same (its path is the bytes) and shown with \xNN.
    return [
        f
        for f in files
        if (f.problem is None or f.problem[0] == reasons.UNDECODABLE_NAME.code)
        and f.relpath.lower().endswith(keep)
    ]


def _rerooted(catalog: Catalog, prefix: str, beside: dict[str, InputFile]) -> Catalog:
    """The catalog seen from the root: every file's relpath is its key (the parsers name files
    by their relpath)."""
    images = {prefix + r: dataclasses.replace(f, relpath=prefix + r) for r, f in catalog.images.items()}
    annotation_files = {
        prefix + r: dataclasses.replace(f, relpath=prefix + r) for r, f in catalog.annotation_files.items()
    }
    for relpath, file in beside.items():
        annotation_files.setdefault(relpath, file)
    return Catalog(images, annotation_files)


def _under(root: str, folder: str, files: Sequence[InputFile]) -> dict[str, InputFile]:
    """Files listed from `folder`, keyed (and named) by their path under `root`."""
    head = relative_to(folder, root) or ""
    keyed = {join(head, f.relpath) if head else f.relpath: f for f in files}
    return {key: dataclasses.replace(f, relpath=key) for key, f in keyed.items()}


def locate(
    kind: str,
    files: Sequence[InputFile],
    catalog: Catalog,
    paths: tuple[AnnotationPath, ...],
    keypoints: bool = False,
) -> Located:
    """Where `kind`'s annotations are for the listed `files` (see the module docstring);
    `keypoints`: COCO's `person_keypoints_*.json` first."""
    base = input_base(files)
    if kind == "yolo":
        return _yolo(base, catalog, paths)
    if kind == "voc":
        return _voc(base, catalog, paths)
    return _coco(base, catalog, paths, keypoints)


def _component(base: str, names: Sequence[str]) -> int | None:
    """The index of the last of `names` among `base`'s folders."""
    parts = base.split("/")
    for index in range(len(parts) - 1, 0, -1):
        if parts[index] in names:
            return index
    return None


def _yolo(base: str, catalog: Catalog, paths: tuple[AnnotationPath, ...]) -> Located:
    located = _yolo_labels(base, catalog, paths)
    if located.paths or any(_is_names_file(r) for r in located.catalog.annotation_files):
        return located
    # No names under the input: the dataset's data.yaml a level or two up (a Roboflow export's
    # is beside its split folders), named as if given.
    for folder in _parents(located.root or base)[:2]:
        found = sorted(
            (f for f in _names_files(folder).values() if _has_names(f)),
            key=lambda f: (not f.relpath.lower().endswith(YAMLS), f.relpath),
        )
        if found:
            return dataclasses.replace(located, paths=(AnnotationPath(found[0].path),))
    return located


YAMLS = (".yaml", ".yml")


def _has_names(file: InputFile) -> bool:
    """A classes.txt, or a YAML file with `names` (never another project's YAML above the input)."""
    if not file.relpath.lower().endswith(YAMLS):
        return True
    if file.size > 4 * 2**20:
        return False
    try:
        document = yaml.safe_load(read_one(file.path).decode("utf-8-sig"))
    except Exception:  # not this dataset's names file
        return False
    return isinstance(document, dict) and "names" in document


def _is_names_file(relpath: str) -> bool:
    return relpath.lower().endswith(YAMLS) or posixpath.basename(relpath).lower() == "classes.txt"


def _yolo_labels(base: str, catalog: Catalog, paths: tuple[AnnotationPath, ...]) -> Located:
    folders = [p for p in paths if storage.is_folder(p.path)]
    names = tuple(p for p in paths if p not in folders)
    if folders:  # the labels folder, named
        labels = folders[0].path.rstrip("/")
        found = _list(labels, (".txt", ".yaml", ".yml"))
        root = next((r for r in _parents(labels) if relative_to(base, r) is not None), "")
        under_root = relative_to(base, root) if root else None
        if under_root is not None and "labels" in (relative_to(labels, root) or "").split("/"):
            prefix = under_root + "/" if under_root else ""
            beside = _under(root, labels, found)
            beside |= _names_files(root)
        else:  # no common dataset root: the images as `images/`, the labels as `labels/`
            root, prefix = posixpath.dirname(labels), "images/"
            beside = {
                f"labels/{f.relpath}": dataclasses.replace(f, relpath=f"labels/{f.relpath}") for f in found
            }
            index = _component(base, ("images",))
            beside |= _names_files("/".join(base.split("/")[:index]) if index else posixpath.dirname(base))
        return Located(_rerooted(catalog, prefix, beside), prefix, root, (labels,), names)
    index = _component(base, ("images",))
    if index is None:
        return Located(catalog, paths=paths)
    parts = base.split("/")
    root, prefix = "/".join(parts[:index]), "/".join(parts[index:]) + "/"
    labels = "/".join([root, "labels", *parts[index + 1 :]])
    beside = _under(root, labels, _list(labels, (".txt",)))
    if not beside:
        return Located(catalog, paths=paths)
    beside |= _names_files(root)
    return Located(_rerooted(catalog, prefix, beside), prefix, root, (labels,), names)


def _names_files(root: str) -> dict[str, InputFile]:
    """A YOLO dataset's own names files at its root: `*.yaml` (data.yaml) and `classes.txt`."""
    found: dict[str, InputFile] = {}
    for pattern in ("*.yaml", "*.yml", "classes.txt"):
        found |= _under(root, root, _list(join(root, pattern)))
    return found


def _voc(base: str, catalog: Catalog, paths: tuple[AnnotationPath, ...]) -> Located:
    index = _component(base, ("JPEGImages", "images"))
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
        found = _under(root, folder, _list(folder, (".xml",)))
        if found:
            looked.append(folder)
            beside |= found
    sets = join(root, "ImageSets/Main")
    beside |= _under(root, sets, _list(join(sets, "*.txt"), (".txt",)))
    if not beside:
        return Located(catalog, paths=paths)
    return Located(_rerooted(catalog, prefix, beside), prefix, root, tuple(looked), paths)


def _coco(base: str, catalog: Catalog, paths: tuple[AnnotationPath, ...], keypoints: bool = False) -> Located:
    if paths or coco.discover(catalog, keypoints):
        return Located(catalog, paths=paths)
    for root in _parents(base)[:2]:
        found: dict[str, InputFile] = {}
        for pattern in ("*.json", "annotations/*.json"):
            found |= {r: f for r, f in _under(root, root, _list(join(root, pattern), (".json",))).items()}
        named = {
            r: f for r, f in found.items() if keypoints and coco.KEYPOINTS_NAME.match(posixpath.basename(r))
        }
        found = named or {r: f for r, f in found.items() if COCO_NAME.match(posixpath.basename(r))}
        if not found:
            continue
        under = relative_to(base, root) or ""
        prefix = under + "/"
        folders = set(under.split("/"))
        named = {r: f for r, f in found.items() if _coco_hint(r) in folders}
        found = named or found
        return Located(_rerooted(catalog, prefix, found), prefix, root, tuple(sorted(found)), paths)
    return Located(catalog, paths=paths)


def _coco_hint(relpath: str) -> str:
    """`annotations/instances_val2017.json` -> `val2017`, the folder its images are in."""
    name = posixpath.splitext(posixpath.basename(relpath))[0]
    return name.rsplit("_", 1)[1] if name.lower().startswith(("instances_", "person_keypoints_")) else ""
