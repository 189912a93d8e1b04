"""Where a dataset's annotations are, found the way each format's own tools find them, from
whichever folder the user names: the dataset's root, its images folder, or one split's folder.

The parsers match images to annotation files by paths relative to one root. When `--input` is
the root, that is the listing as it is. When it is a folder inside the dataset (`ds/images`,
`VOC2012/JPEGImages`, `coco/train2017`), the annotations are beside it, outside the listing:

YOLO's `ds/labels/...` for `--input ds/images/...`, Pascal VOC's `Annotations/` beside
`JPEGImages/`, COCO's `instances_*.json` in the input's parent. Each format's rule is in its own
module (plan.sources); this module is what they share, and names no format.

Then the listing is seen from that root (`ds/images/train/x.jpg` is `images/train/x.jpg`), the
files found beside are added to it, and the parsers' answer is brought back to the input's
relpaths (`Located.back`). Nothing beside the input is ever an input or a reject line.
"""

from __future__ import annotations

import dataclasses
import posixpath
from collections.abc import Sequence
from dataclasses import dataclass

from beam_tfrecord import reasons, storage
from beam_tfrecord.config_base import ConfigError
from beam_tfrecord.plan.annotations.catalog import ANNOTATION_EXTENSIONS, Catalog
from beam_tfrecord.plan.annotations.paths import AnnotationPath
from beam_tfrecord.plan.annotations.results import AnnotationSet, ImageProblem, ObjectNote
from beam_tfrecord.plan.listing import InputFile, list_inputs

__all__ = [
    "Located",
    "component",
    "input_base",
    "join",
    "listed_under",
    "parents",
    "relative_to",
    "rerooted",
    "under",
]


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


def parents(path: str) -> list[str]:
    """`path`'s ancestors, nearest first, never above a bucket or `/`."""
    return storage.parents(path)


def listed_under(folder: str, keep: tuple[str, ...] = tuple(ANNOTATION_EXTENSIONS)) -> list[InputFile]:
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


def rerooted(catalog: Catalog, prefix: str, beside: dict[str, InputFile]) -> Catalog:
    """The catalog seen from the root: every file's relpath is its key (the parsers name files
    by their relpath)."""
    images = {prefix + r: dataclasses.replace(f, relpath=prefix + r) for r, f in catalog.images.items()}
    annotation_files = {
        prefix + r: dataclasses.replace(f, relpath=prefix + r) for r, f in catalog.annotation_files.items()
    }
    for relpath, file in beside.items():
        annotation_files.setdefault(relpath, file)
    return Catalog(images, annotation_files)


def under(root: str, folder: str, files: Sequence[InputFile]) -> dict[str, InputFile]:
    """Files listed from `folder`, keyed (and named) by their path under `root`."""
    head = relative_to(folder, root) or ""
    keyed = {join(head, f.relpath) if head else f.relpath: f for f in files}
    return {key: dataclasses.replace(f, relpath=key) for key, f in keyed.items()}


def component(base: str, names: Sequence[str]) -> int | None:
    """The index of the last of `names` among `base`'s folders."""
    parts = base.split("/")
    for index in range(len(parts) - 1, 0, -1):
        if parts[index] in names:
            return index
    return None
