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
- what it counts of every record (`new_tally`: a `KindTally` merged across workers);
- what planning learns of its labels (`plan_facts`, from what the run's annotations hold:
  `Annotated`), staged with the plan for the summary;
- its section of summary.json (`section`: a `Section`, which writes and reads its JSON, merges with
  a grown dataset's, and gives its rows of the terminal's table) and the side files it writes
  beside the shards (`side_files`).

Plain declarations: no Beam, no TensorFlow; a kind's TensorFlow reader is imported only by the
reader that asks for it.
"""

from __future__ import annotations

import dataclasses
from collections import Counter
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, ClassVar, NamedTuple

from beam_tfrecord.elements import DroppedObject, DroppedObjectLine, MaskRule, PlannedInput, RecordFields
from beam_tfrecord.labels.geometry import PixelTransform

__all__ = [
    "Annotated",
    "FileReader",
    "Grown",
    "KindTally",
    "LabelKind",
    "Placed",
    "Section",
    "SectionInputs",
    "fields_from",
    "plain",
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


@dataclass(frozen=True)
class Annotated:
    """What planning found in a run's annotations, for each kind's plan facts (the planner makes
    one, whatever the format; each kind takes its part).

    Args:
      format: the annotations' format (`--annotations`).
      class_names: the run's class names in id order.
      masks: the objects keep their instance masks (`--masks`).
      annotated_objects: every object the source holds (kept, dropped, on rejected pictures and on
        entries that name no listed picture).
      dropped: objects left out while planning, one line each (dropped_objects.jsonl's).
      unmatched_objects: the objects of the entries that name no listed picture.
      keypoint_names, skeletons: a keypoints run's, by class name.
      mask_rule: a segmentation run's rule for reading its mask files.
      palette: a segmentation run's colour of each class id, for pictures.
    """

    format: str
    class_names: tuple[str, ...] = ()
    masks: bool = False
    annotated_objects: int = 0
    dropped: tuple[DroppedObjectLine, ...] = ()
    unmatched_objects: int = 0
    keypoint_names: Mapping[str, tuple[str, ...]] = dataclasses.field(default_factory=dict)
    skeletons: Mapping[str, tuple[tuple[int, int], ...]] = dataclasses.field(default_factory=dict)
    mask_rule: MaskRule | None = None
    palette: tuple[tuple[int, int, int], ...] = ()


@dataclass(frozen=True)
class SectionInputs:
    """What a kind's summary section is counted from besides its own plan facts and tally: the
    run's class names, its annotations' format and where they were found, the entries that name
    no listed picture, the objects left out per reason (planning's and the workers') and those
    that went with rejected pictures."""

    class_names: tuple[str, ...] = ()
    format: str = ""
    found_at: str = ""
    unmatched_entries: int = 0
    dropped: Mapping[str, int] = dataclasses.field(default_factory=dict)
    objects_rejected: int = 0
    records_per_label: Mapping[str, int] = dataclasses.field(default_factory=dict)


@dataclass(frozen=True)
class Grown:
    """What merging a grown dataset's sections (`--append`) needs besides the two sections: the
    grown class names and the merged entries that name no picture (JSON lines)."""

    class_names: tuple[str, ...] = ()
    unmatched: tuple[str, ...] = ()


def fields_from(cls: type, data: Mapping[str, Any]) -> dict[str, Any]:
    """The keys of `data` that are fields of `cls` (a later version's extra keys are ignored)."""
    names = {f.name for f in dataclasses.fields(cls)}
    return {key: value for key, value in data.items() if key in names}


def plain(value: Any) -> Any:
    """Dataclasses (and dicts and lists of them) as JSON values, in field order."""
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return {f.name: plain(getattr(value, f.name)) for f in dataclasses.fields(value)}
    if isinstance(value, dict):
        return {key: plain(item) for key, item in value.items()}
    if isinstance(value, list):
        return [plain(item) for item in value]
    return value


@dataclass
class Section:
    """A kind's section of summary.json: a dataclass whose fields are the section's keys, in order.
    A subclass gives its rows of the terminal's table and how two runs' sections merge."""

    def to_json(self) -> dict[str, Any]:
        return plain(self)

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> Section:
        return cls(**fields_from(cls, data))

    def accounted(self) -> bool:
        """Whether its own accounting holds (every annotated object stored or dropped)."""
        return True

    def warnings(self) -> list[str]:
        """What a user should know of its labels before training."""
        return []

    def rows(self) -> list[tuple[str, str]]:
        """Its rows of the table a run ends with."""
        return []

    def merged(self, new: Section, grown: Grown) -> Section:
        """This dataset's section grown by an append's run's (`new`), as a run over every picture
        would count it."""
        return self


class LabelKind:
    """One kind of label (the class, objects, a class mask, keypoints, captions): everything every
    stage does with it. `tasks.Task.kinds` names a task's kinds; `labels.KINDS` holds one of each.

    A subclass sets `name` (what tasks.py calls it) and overrides what its kind does; the defaults
    do nothing, so a kind declares only its own parts.
    """

    name: ClassVar[str] = ""
    # Its labels name the run's classes (labels.txt lists them): a captions run has none.
    names_classes: ClassVar[bool] = False
    # The tools whose keys its records hold, for a message that refuses another schema.
    keys_named: ClassVar[str] = ""
    # The file index keeps a digest of each picture's labels of this kind, from which an append
    # tells an old picture whose annotations changed since (the objects').
    digested: ClassVar[bool] = False

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

    # --- planning and the summary --------------------------------------------------------------

    # summary.json's key of its section, and the section's type (None: it has no section).
    section_key: ClassVar[str] = ""
    section_type: ClassVar[type[Section] | None] = None

    def plan_facts(self, annotated: Annotated) -> dict[str, Any] | None:
        """What planning learnt of its labels, as JSON (staged with the plan's facts), for its
        section and its workers; None: nothing."""
        return None

    def worker_setting(self, facts: Any, class_names: tuple[str, ...]) -> Any:
        """Its staged worker setting (`read_setting` reads it) from its plan facts; None: none."""
        return None

    def section(self, facts: Any, tally: KindTally, inputs: SectionInputs) -> Section | None:
        """Its section of summary.json from its plan facts, its tally and the run's counts."""
        return None

    def section_groups(self, section: Any) -> tuple[str, ...]:
        """The key groups the records of a run with this section hold (readers, from summary.json)."""
        return self.key_groups(None)

    def label_counts(self, tally: KindTally, class_names: tuple[str, ...]) -> Counter | None:
        """Records per class name, where this kind counts them otherwise than by the records
        that hold each class (the run's `by_split_label`); None: as those."""
        return None

    # Its side files whose lines a grown dataset (`--append`) joins with the append's run's.
    joined_files: ClassVar[tuple[str, ...]] = ()

    def grown_files(self, class_names: tuple[str, ...]) -> dict[str, str]:
        """Its side files a grown dataset writes anew for its grown class names (name -> text)."""
        return {}

    def side_files(
        self, class_names: tuple[str, ...], facts: Mapping[str, Any], dropped: tuple[DroppedObjectLine, ...]
    ) -> dict[str, str]:
        """The files it writes beside the shards (name -> text): `facts` are every kind's plan
        facts (by kind name), `dropped` the lines of every part of a label left out."""
        return {}
