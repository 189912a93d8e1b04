"""Pictures whose bands are files of their own (`--bands`): the listing's files grouped into one
input a picture, before anything else is planned, so labels, splits, dedupe, the file index and
an append all see one input where the worker makes one record.

Why by a word of the path: the datasets that keep bands apart name each file after its band, in
a folder's name, the file's, or both (38-Cloud's `train_red/red_patch_1.TIF`, Sentinel-2's
`T33UUP_20200101T101031_B02.jp2`, BigEarthNet's `..._B8A.tif`), and nothing else tells the files
of one picture apart from another's.

The rule, on each listed file's path relative to `--input`:

- Its words are the words of each folder's name and of the file's name without its extension
  (from its last `.`), cut at `_`, `-` and `.`. A file is band NAME when a word equals NAME,
  case ignored.
- Its picture's key is that path with every band word left out (each with the separator after
  it, or before it when it ends the name), folders left empty dropped, and no extension:
  `train_red/red_patch_1.TIF` -> `train/patch_1`. A path made of band words only (`red.tif`)
  has the name of the `--input` folder as its key. The key is the record's `image/filename`.
- The files of one key are one input: a record, or a reject that says why (`band_missing`,
  `band_ambiguous`, a band's own listing problem). A file that names no band is no input
  (`skipped`: 38-Cloud's `train_gt/` masks, its CSV lists).

A run where no file names a band, or where one band is named by no file (a typo in `--bands`),
fails in one line: it would otherwise exit 0 having made nothing.
"""

from __future__ import annotations

import dataclasses
import posixpath
import re
from collections import defaultdict
from collections.abc import Collection, Mapping, Sequence

from beam_tfrecord import reasons
from beam_tfrecord.config_base import ConfigError
from beam_tfrecord.elements import BandFile
from beam_tfrecord.plan.listing import InputFile, skip_reason

__all__ = ["grouped", "picture_key"]

_SEPARATED = re.compile(r"([_.\-])")  # a word's separators, kept by the split
_ONLY_BANDS = "picture"  # the key of a path of band words only, where no folder name is known


def picture_key(relpath: str, bands: Mapping[str, str]) -> tuple[str, tuple[str, ...]]:
    """(the picture's key, the bands its words name, in `bands`' spelling and path order) of one
    relative path; `bands` maps each band's lower-case name to the run's spelling."""
    *folders, name = relpath.split("/")
    stem = name.rsplit(".", 1)[0] if "." in name.lstrip(".") else name
    named: dict[str, None] = {}
    parts = []
    for part in (*folders, stem):
        kept = _without_bands(part, bands, named)
        if kept:
            parts.append(kept)
    return "/".join(parts), tuple(named)


def _without_bands(part: str, bands: Mapping[str, str], named: dict[str, None]) -> str:
    """One folder's name or file stem less its band words (`named` gets the bands found)."""
    pieces = _SEPARATED.split(part)
    words, separators = pieces[0::2], [*pieces[1::2], ""]
    kept = []
    for word, separator in zip(words, separators, strict=True):
        band = bands.get(word.lower())
        if band is None:
            kept.append((word, separator))
        else:
            named[band] = None
    if kept:
        kept[-1] = (kept[-1][0], "")  # the separator before a band word that ended the name
    return "".join(word + separator for word, separator in kept)


def grouped(files: Sequence[InputFile], bands: Sequence[str] | None) -> list[InputFile]:
    """The listing with each picture's band files as one input (`InputFile.bands`), sorted by
    relative path; without `bands`, the listing as it is. Files that already are a picture's or
    were skipped for naming no band, and clutter (`listing.skip_reason`), pass as they are, so
    grouping twice (the command, then the planner; an append's new files) changes nothing.

    Raises ConfigError when a listing's files name no band, or one band is named by none."""
    if not bands:
        return list(files)
    spelling = {band.lower(): band for band in bands}
    by_key: dict[str, list[tuple[tuple[str, ...], InputFile]]] = defaultdict(list)
    others: list[InputFile] = []
    seen = {band.band for file in files for band in file.bands}
    listed = False  # whether any file was still as the listing gave it
    for file in files:
        if file.bands or skip_reason(file.relpath) is not None or _skipped(file):
            others.append(file)
            continue
        listed = True
        key, named = picture_key(file.relpath, spelling)
        if not named:
            others.append(_not_a_band(file, bands))
            continue
        seen.update(named)
        by_key[key or _input_name(file)].append((named, file))
    if listed:
        _refuse_unnamed(seen, bands)
    pictures = [_picture(key, found, bands) for key, found in by_key.items()]
    _refuse_shared_names(pictures, others)
    return sorted([*others, *pictures])


def _skipped(file: InputFile) -> bool:
    return file.problem is not None and file.problem[0] == reasons.SKIPPED.code


def _not_a_band(file: InputFile, bands: Sequence[str]) -> InputFile:
    """A file that names no band: `skipped`, whatever else the listing found wrong with it."""
    detail = f"names none of the bands {', '.join(bands)} (--bands)"
    return dataclasses.replace(file, problem=(reasons.SKIPPED.code, detail))


def _input_name(file: InputFile) -> str:
    """The `--input` folder's name: the key of a path made of band words only."""
    if not file.path.endswith("/" + file.relpath):
        return _ONLY_BANDS
    return posixpath.basename(file.path[: -len(file.relpath) - 1]) or _ONLY_BANDS


def _refuse_unnamed(seen: Collection[str], bands: Sequence[str]) -> None:
    """A run that would make no record for a reason the command line holds fails in one line."""
    example = "a folder's or the file's name, cut at _ - and ., as train_red/red_patch_1.TIF is red's"
    if not seen:
        raise ConfigError(
            "bands",
            f"names {', '.join(bands)}: no file under --input has one as a word of its path ({example})",
        )
    unseen = [band for band in bands if band not in seen]
    if unseen:
        raise ConfigError(
            "bands",
            f"names {unseen[0]}, and no file under --input has it as a word of its path ({example}); "
            f"files were found for {', '.join(band for band in bands if band in seen)}",
        )


def _picture(key: str, found: Sequence[tuple[tuple[str, ...], InputFile]], bands: Sequence[str]) -> InputFile:
    """One picture's input: its band files in band order, or the problem that makes it a reject."""
    files_of: dict[str, list[InputFile]] = {band: [] for band in bands}
    for named, file in found:
        for band in named:
            files_of[band].append(file)
    band_files = tuple(
        BandFile(band, f.relpath, f.path, f.size) for band in bands for f in files_of[band][:1]
    )
    problem = _problem(found, files_of)
    every = {file.relpath: file for _, file in found}.values()
    return InputFile(
        key,
        band_files[0].path,
        sum(f.size for f in every),
        problem,
        max(f.mtime for f in every),
        band_files,
    )


def _problem(
    found: Sequence[tuple[tuple[str, ...], InputFile]], files_of: Mapping[str, list[InputFile]]
) -> tuple[str, str] | None:
    """Why the picture cannot be made from its files, known from the listing; None: it can be."""
    for named, file in found:
        if len(named) > 1:
            return (
                reasons.BAND_AMBIGUOUS.code,
                f"{file.relpath} names {' and '.join(named)}: which band is it?",
            )
    for band, files in files_of.items():
        if len(files) > 1:
            return (
                reasons.BAND_AMBIGUOUS.code,
                f"{' and '.join(f.relpath for f in files)} both are band {band}",
            )
    missing = [band for band, files in files_of.items() if not files]
    if missing:
        have = ", ".join(f"{band} {files[0].relpath}" for band, files in files_of.items() if files)
        return reasons.BAND_MISSING.code, f"no file of band {', '.join(missing)}; found {have}"
    for band, files in files_of.items():
        if files[0].problem is not None:
            reason, detail = files[0].problem
            return reason, f"band {band} ({files[0].relpath}): {detail}"
    return None


def _refuse_shared_names(pictures: Sequence[InputFile], others: Sequence[InputFile]) -> None:
    """A relative path is an input's identity in every output: a picture's key that is another
    listed file's path fails in one line, never merges the two."""
    taken = {file.relpath for file in others}
    shared = sorted(picture.relpath for picture in pictures if picture.relpath in taken)
    if shared:
        raise ConfigError(
            "bands",
            f"makes {shared[0]!r} the key of a picture's band files, and a file has that path: rename it",
        )
