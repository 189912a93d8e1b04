"""What a kind of label declares: one object per kind drives every stage's part of it, as TFDS's
`FeatureConnector` drives a feature's encode, decode and spec, so the stages loop over a run's
kinds and never name one.

A kind says, for its labels:

- its record keys (a group of `keys.KeyTable`) and how each key's value is taken from a record's
  fields (`encoders`);
- what its workers need to know of the run, staged with every shard task (`worker_setting`,
  `read_setting`);
- how its labels move with the picture and what a record stores of them (`place`): the stored
  value, the few facts the tally counts, the changes it makes to the record and the parts it
  leaves out (drops); a label the picture cannot be stored with raises `reasons.Reject`;
- what it counts of every record (`new_tally`: a `KindTally` merged across workers).

Plain declarations: no Beam, no TensorFlow; a kind's TensorFlow reader is imported only by the
reader that asks for it.
"""

from __future__ import annotations

import dataclasses
from collections import Counter
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, ClassVar, NamedTuple

from beam_tfrecord.elements import DroppedObject, PlannedInput, RecordFields
from beam_tfrecord.labels.geometry import PixelTransform

__all__ = [
    "FileReader",
    "KindTally",
    "LabelKind",
    "Placed",
]

# Reads a file a label names (a segmentation run's mask file): (path, its size in bytes from the
# listing) -> its bytes, within the run's file limits; raises (OSError or any error) when it cannot.
FileReader = Callable[[str, int], bytes]


class Placed(NamedTuple):
    """One kind's labels of one picture, placed in the image its record stores.

    Args:
      stored: what the record stores (the kind's `encoders` read it from `RecordFields.labels`);
        None: the kind adds nothing to the record's fields (its keys read another kind's value).
      facts: what the tally counts of it: small, no pixels (`KindTally.add`).
      changes: `reasons` change codes it makes to the record.
      dropped: parts of the source's labels left out of the record, each with its reason.
    """

    stored: Any = None
    facts: Any = None
    changes: tuple[str, ...] = ()
    dropped: tuple[DroppedObject, ...] = ()


@dataclass
class KindTally:
    """A kind's counts over a run's records, merged across workers: every field is a `Counter`
    or an int, so merging and the JSON form (a finished shard task's, kept for a rerun) are the
    same for every kind. A kind's subclass says how a record's facts are counted (`add`)."""

    def add(self, facts: Any, split: str, labels: Counter) -> None:
        """Count one record's facts; `labels` counts (split, class name) -> records, the records
        that hold each class (the summary's `records_per_label`). The base counts nothing."""

    def merge(self, other: KindTally) -> None:
        for item in dataclasses.fields(self):
            mine, theirs = getattr(self, item.name), getattr(other, item.name)
            if isinstance(mine, Counter):
                mine.update(theirs)
            else:
                setattr(self, item.name, mine + theirs)

    def to_json(self) -> dict[str, Any]:
        data: dict[str, Any] = {}
        for item in dataclasses.fields(self):
            value = getattr(self, item.name)
            data[item.name] = (
                [[_plain(k), n] for k, n in value.items()] if isinstance(value, Counter) else value
            )
        return data

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> KindTally:
        found = cls()
        for item in dataclasses.fields(found):
            value = getattr(found, item.name)
            if isinstance(value, Counter):
                value.update({_key(k): n for k, n in data.get(item.name, ())})
            else:
                setattr(found, item.name, data.get(item.name, value))
        return found


def _plain(key: Any) -> Any:
    return list(key) if isinstance(key, tuple) else key


def _key(key: Any) -> Any:
    """A counter key back from JSON: the pairs it holds are tuples again."""
    return tuple(key) if isinstance(key, list) else key


class LabelKind:
    """One kind of label (the class, objects, a class mask, keypoints, captions): everything every
    stage does with it. `tasks.Task.kinds` names a task's kinds; `labels.KINDS` holds one of each.

    A subclass sets `name` (what tasks.py calls it) and overrides what its kind does; the defaults
    do nothing, so a kind declares only its own parts.
    """

    name: ClassVar[str] = ""

    # --- the record's keys ---------------------------------------------------------------------

    def key_groups(self, setting: Any) -> tuple[str, ...]:
        """The groups of `keys.KeyTable.groups` its records hold, given the run's setting (the
        class's keys are the table's own `label` keys: none)."""
        return ()

    def encoders(self) -> Mapping[str, Callable[[RecordFields], Any]]:
        """Each of its keys' values, by the key's name (`keys.RecordKey.name`), from a record's
        fields (this kind's stored value is `fields.labels[self.name]`)."""
        return {}

    # --- the worker ----------------------------------------------------------------------------

    def read_setting(self, staged: Any) -> Any:
        """What the workers need of the run, back from its staged JSON form (a shard task's)."""
        return staged

    def place(
        self,
        item: PlannedInput,
        transform: PixelTransform,
        setting: Any,
        placed: Mapping[str, Placed],
        read: FileReader,
    ) -> Placed:
        """The picture's labels of this kind as its record stores them, moved as the pixels were
        (`transform`); `placed` holds the kinds placed before it (the run's kinds in order).
        Raises `reasons.Reject` when the picture cannot be stored with its labels."""
        return Placed()

    # --- the tally -----------------------------------------------------------------------------

    def new_tally(self) -> KindTally:
        """Its counts over a run (the base counts nothing)."""
        return KindTally()
