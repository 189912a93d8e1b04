"""The splits a dataset declares for itself, read where each format's tools keep them:

- YOLO: `data.yaml`'s `train`, `val`, `test`: a folder, a list of folders, or a `.txt` file
  listing images (`./images/train/x.jpg`, relative to the list), each relative to `path`
  (itself relative to the YAML), else to the YAML (Ultralytics also drops a leading `../` that
  leads nowhere, as Roboflow's exports need);
- Pascal VOC: `ImageSets/Main/train.txt`, `val.txt`, `test.txt` beside `JPEGImages/`
  (`trainval.txt` only when neither `train.txt` nor `val.txt` is there);
- COCO: files named `instances_<split>*.json` (`instances_val2017.json`), and Roboflow's
  `<split>/_annotations.coco.json`.

`val`, `valid` and `minival` mean `validation`, the name the readers use. A picture two
declarations claim is in `conflicts`; one none claims is in neither map (the planner names it).
"""

from __future__ import annotations

import dataclasses
import logging
import posixpath
import re
from collections import defaultdict
from collections.abc import Mapping, Sequence

import yaml

from beam_tfrecord import storage
from beam_tfrecord.edges import JsonObject
from beam_tfrecord.plan.annotations.catalog import Catalog, read_one, stem
from beam_tfrecord.plan.annotations.locate import Located, join, relative_to
from beam_tfrecord.plan.annotations.results import DeclaredSplits

__all__ = ["DeclaredSplits", "coco_split", "split_name", "voc_splits", "with_dataset_names", "yolo_splits"]

SPLIT_WORDS = {
    "train": "train",
    "val": "validation",
    "valid": "validation",
    "validation": "validation",
    "minival": "validation",
    "test": "test",
}
SPLIT_ORDER = ("train", "validation", "test")
YOLO_KEYS = ("train", "val", "test")
VOC_LISTS = ("train", "val", "test")
_LOGGER = logging.getLogger(__name__)
_COCO_WORD = re.compile(r"^(?:instances|person_keypoints)_([a-z]+)", re.IGNORECASE)


def split_name(word: str) -> str | None:
    """`val` -> `validation`; None for a word that names no split."""
    return SPLIT_WORDS.get(word.lower())


def with_dataset_names(found: DeclaredSplits, words: Mapping[str, str]) -> DeclaredSplits:
    """`found` with each split called by the dataset's own word (`validation` -> `val`), as
    `keep_split_names` asks."""
    return dataclasses.replace(
        found,
        names=tuple(words.get(n, n) for n in found.names),
        split_of={r: words.get(s, s) for r, s in found.split_of.items()},
        kept_names=True,
    )


def _ordered(names: Sequence[str]) -> tuple[str, ...]:
    return tuple(sorted(set(names), key=lambda n: (SPLIT_ORDER.index(n) if n in SPLIT_ORDER else 9, n)))


def _declared(source: str, claims: Mapping[str, list[tuple[str, str]]]) -> DeclaredSplits | None:
    """relpath -> [(split, where)] -> the declaration (None when nothing is claimed)."""
    if not claims:
        return None
    split_of, conflicts = {}, {}
    for relpath, found in claims.items():
        splits = {split for split, _ in found}
        if len(splits) > 1:
            conflicts[relpath] = " and ".join(f"{where} ({split})" for split, where in found)
        else:
            split_of[relpath] = found[0][0]
    names = _ordered([s for found in claims.values() for s, _ in found])
    return DeclaredSplits(source, names, split_of, conflicts)


def coco_split(display: str) -> str | None:
    """The split a COCO file's name declares: `instances_val2017.json` -> validation,
    `valid/_annotations.coco.json` -> validation; None for `instances_shapes.json`."""
    name = posixpath.basename(display)
    if name.lower() == "_annotations.coco.json":
        return split_name(posixpath.basename(posixpath.dirname(display)))
    match = _COCO_WORD.match(name)
    return split_name(match.group(1)) if match else None


def voc_splits(located: Located) -> DeclaredSplits | None:
    """Each picture's split from its devkit's `ImageSets/Main` lists (by its id, the file stem)."""
    catalog = located.catalog
    lists: dict[str, dict[str, str]] = defaultdict(dict)  # devkit folder -> list name -> relpath
    for relpath in catalog.annotation_files:
        parts = relpath.split("/")
        if len(parts) >= 3 and parts[-3:-1] == ["ImageSets", "Main"]:
            name = posixpath.splitext(parts[-1])[0]
            if name in (*VOC_LISTS, "trainval"):
                lists["/".join(parts[:-3])][name] = relpath
    claims: dict[str, list[tuple[str, str]]] = defaultdict(list)
    used: list[str] = []
    for devkit, named in lists.items():
        chosen = [n for n in VOC_LISTS if n in named]
        if "train" not in named and "val" not in named and "trainval" in named:
            chosen.append("trainval")
        ids: dict[str, list[tuple[str, str]]] = defaultdict(list)
        for name in chosen:
            text = read_one(catalog.annotation_files[named[name]].path).decode("utf-8", "replace")
            split = "train" if name == "trainval" else SPLIT_WORDS[name]
            for line in text.splitlines():
                if line.split():
                    ids[line.split()[0]].append((split, named[name]))
            used.append(named[name])
        images = join(devkit, "JPEGImages") if devkit else "JPEGImages"
        for relpath in catalog.images:
            under = relative_to(relpath, images)
            if under is not None and (found := ids.get(stem(under))):
                claims[relpath[len(located.prefix) :]] += found
    shown = ", ".join(located.display(r) for r in used[:4])
    return _declared(f"Pascal VOC split lists ({shown})", claims)


def yolo_splits(located: Located, catalog: Catalog, given: str | None) -> DeclaredSplits | None:
    """Each picture's split from data.yaml's `train`, `val`, `test` (see the module docstring)."""
    yaml_path = given if given and given.lower().endswith((".yaml", ".yml")) else None
    if yaml_path is None:
        found = sorted(
            (r for r in catalog.annotation_files if r.lower().endswith((".yaml", ".yml"))),
            key=lambda r: (r.count("/"), r),
        )
        for relpath in found:
            document = _yaml(catalog.annotation_files[relpath].path)
            if any(document.get(k) for k in YOLO_KEYS):
                yaml_path = catalog.annotation_files[relpath].path
                break
    if yaml_path is None:
        return None
    document = _yaml(yaml_path)
    folder = posixpath.dirname(yaml_path)
    base = folder
    if isinstance(document.get("path"), str) and document["path"].strip():
        candidate = _resolve(folder, document["path"].strip())
        # A laptop's path in a bucket's YAML names no place the pictures are.
        same_storage = storage.is_remote(candidate) == storage.is_remote(folder)
        # Only where the listed pictures are: a copied dataset's YAML still names the original.
        holds = any(
            relative_to(storage.normalize(f.path), candidate) is not None for f in catalog.images.values()
        )
        base = candidate if same_storage and holds else folder
    folders: dict[str, list[str]] = defaultdict(list)  # split -> image folders
    listed: dict[str, set[str]] = defaultdict(set)  # split -> image paths
    for key in YOLO_KEYS:
        value = document.get(key)
        entries = value if isinstance(value, list) else [value] if isinstance(value, str) else []
        split = SPLIT_WORDS[key]
        for entry in entries:
            path = _resolve(base, str(entry).strip())
            if not storage.exists(path) and str(entry).startswith("../"):
                path = _resolve(base, str(entry)[3:])
            if path.lower().endswith(".txt"):
                text = read_one(path).decode("utf-8", "replace") if storage.exists(path) else ""
                listed[split] |= {
                    _resolve(posixpath.dirname(path), line.strip())
                    for line in text.splitlines()
                    if line.strip()
                }
            else:
                folders[split].append(path.rstrip("/"))
    if not folders and not listed:
        return None
    # Ultralytics' coco128.yaml validates on its training folder (`val: images/train2017`): a
    # split that repeats an earlier one's declaration is that split, not a conflict.
    seen: dict[tuple[tuple[str, ...], frozenset[str]], str] = {}
    for split in SPLIT_ORDER:
        declaration = (tuple(sorted(folders.get(split, ()))), frozenset(listed.get(split, ())))
        if declaration == ((), frozenset()):
            continue
        if declaration in seen:
            _LOGGER.warning(
                "data.yaml's %s names the same images as its %s: kept in %s",
                split,
                seen[declaration],
                seen[declaration],
            )
            folders.pop(split, None)
            listed.pop(split, None)
        else:
            seen[declaration] = split
    claims: dict[str, list[tuple[str, str]]] = defaultdict(list)
    for relpath, file in catalog.images.items():
        path = storage.normalize(file.path)
        for split in SPLIT_ORDER:
            if path in listed.get(split, ()) or any(
                relative_to(path, f) is not None for f in folders.get(split, ())
            ):
                claims[relpath[len(located.prefix) :]].append((split, f"data.yaml {split}"))
    keys = [k for k in YOLO_KEYS if document.get(k)]
    return _declared(f"{yaml_path} ({', '.join(keys)})", claims)


def _yaml(path: str) -> JsonObject:
    try:
        document = yaml.safe_load(read_one(path).decode("utf-8-sig"))
    except Exception:  # the names reader has said what is wrong with it
        return {}
    return document if isinstance(document, dict) else {}


def _resolve(folder: str, path: str) -> str:
    """`path` as a YAML or list writes it, relative to `folder` unless absolute."""
    if storage.is_absolute(path):
        return storage.normalize(path)
    return storage.normalize(join(folder, path.removeprefix("./")))
