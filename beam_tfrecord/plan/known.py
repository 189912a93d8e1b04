"""An append's view of the dataset it grows, as its plan takes it (output.append reads it there)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from beam_tfrecord.plan.listing import InputFile

__all__ = ["KnownRecords"]


@dataclass(frozen=True)
class KnownRecords:
    """What an `--append` run's plan takes from the dataset it grows (output.append): its class
    names in id order (a class seen first now gets the next id), and the sha256 of every record
    it holds -> that record's relpath (with `dedupe`, a new file with those bytes is a
    `duplicate` reject naming it).

    A detection dataset's append also gives the whole listing (`listing`: its annotations are
    matched against every picture, old and new, as a run over all of them matches them), the
    relpaths the dataset's index holds (`indexed`: an entry naming one is an old picture's, never
    `unmatched`), the entries it already lists as naming no picture (`unmatched`: their
    growing.entry_key), how it was split (`split_method`, summary.json's: its declared
    splits stay declared), and, for the listed pictures it holds a record of, the digest of the
    objects each was made from and its split (`converted`: relpath -> (digest, split); those
    whose annotations now differ are the plan's `annotations_changed`; None: not compared)."""

    class_names: tuple[str, ...] | None = None
    hashes: Mapping[str, str] = field(default_factory=dict)
    listing: Sequence[InputFile] = ()
    indexed: frozenset[str] = frozenset()
    unmatched: frozenset[str] = frozenset()
    split_method: str | None = None
    converted: Mapping[str, tuple[str, str | None]] | None = None
