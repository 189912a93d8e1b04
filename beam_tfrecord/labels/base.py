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
  beside the shards (`side_files`);
- what each reader hands out for it: `load_dataset`'s target (`tf_target`, a `TfTarget` whose
  TensorFlow code is imported only then), `iter_examples`' fields (`numpy_fields`) and
  `TorchImages`' target (`torch_target`);
- how `inspect` checks every record of it and its counts against its section (`checks`: a
  `Checks`), and how the contact sheet draws it (`draw`).

Plain declarations: no Beam, no TensorFlow; a kind's TensorFlow reader is imported only by the
reader that asks for it.

A kind is typed by what its own methods exchange (`LabelKind`'s parameters: its worker setting,
its stored value, its tally's facts, its tally, its section and what the contact sheet draws of a
record), so each kind's module is checked with its own types; where a run's kinds meet, in one
registry and one loop, they are `AnyKind`.
"""

from __future__ import annotations

import dataclasses
import re
from collections import Counter
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, ClassVar, Generic, NamedTuple, Protocol, Self, TypeAlias, TypeVar, cast

from beam_tfrecord.edges import ByKind, Json, JsonObject, ParsedRecord, Tensor, TorchValue
from beam_tfrecord.elements import (
    DroppedObject,
    DroppedObjectLine,
    ImageAnnotations,
    MaskRule,
    PlannedInput,
    RecordFields,
)
from beam_tfrecord.keys import RecordLayout
from beam_tfrecord.labels.geometry import PixelTransform

if TYPE_CHECKING:
    from PIL import Image

    from beam_tfrecord.labels.drawing import Sheet

__all__ = [
    "Annotated",
    "AnyKind",
    "AnyPlaced",
    "AnyTally",
    "Checked",
    "Checks",
    "Encoder",
    "FileReader",
    "Grown",
    "KindTally",
    "LabelCounts",
    "LabelKind",
    "PictureFit",
    "Placed",
    "ReadContext",
    "Section",
    "SectionInputs",
    "TargetOptions",
    "TfTarget",
    "TfTargetPair",
    "fields_from",
    "plain",
    "tf_message",
]

# Reads a file a label names (a segmentation run's mask file): (path, its size in bytes from the
# listing) -> its bytes, within the run's file limits; raises (OSError or any error) when it cannot.
FileReader = Callable[[str, int], bytes]
# A record key's value from a record's fields (`LabelKind.encoders`): a str, bytes, a number or a
# tuple of them, as the key's `keys.RecordKey` says (`write.schema` sets it on the Example).
Encoder = Callable[[RecordFields], object]

SettingT = TypeVar("SettingT")
StoredT = TypeVar("StoredT")
FactsT = TypeVar("FactsT")
DrawnT = TypeVar("DrawnT")


class Placed(NamedTuple, Generic[StoredT, FactsT]):
    """One kind's labels of one picture, placed in the image its record stores.

    Args:
      stored: what the record stores (the kind's `encoders` read it from `RecordFields.labels`);
        None: the kind adds nothing to the record's fields (its keys read another kind's value).
      facts: what the tally counts of it: small, no pixels (`KindTally.add`).
      changes: `reasons` change codes it makes to the record.
      dropped: parts of the source's labels left out of the record, each with its reason.
    """

    stored: StoredT | None = None
    facts: FactsT | None = None
    changes: tuple[str, ...] = ()
    dropped: tuple[DroppedObject, ...] = ()


# Another kind's placement, as `place` is given the kinds placed before it (each reads the one it
# needs as what that kind stores: keypoints, the objects').
AnyPlaced: TypeAlias = Placed[Any, Any]
# The records per (split, class name) a run counts (`KindTally.add`'s `labels`; None: unlabeled).
LabelCounts: TypeAlias = "Counter[tuple[str, str | None]]"


@dataclass
class KindTally(Generic[FactsT]):
    """A kind's counts over a run's records, merged across workers: every field is a `Counter`
    or an int, so merging and the JSON form (a finished shard task's, kept for a rerun) are the
    same for every kind. A kind's subclass says how a record's facts are counted (`add`)."""

    def add(self, facts: FactsT, split: str, labels: LabelCounts) -> None:
        """Count one record's facts; `labels` counts (split, class name) -> records, the records
        that hold each class (the summary's `records_per_label`). The base counts nothing."""

    def merge(self, other: KindTally[FactsT]) -> None:
        for item in dataclasses.fields(self):
            mine, theirs = getattr(self, item.name), getattr(other, item.name)
            if isinstance(mine, Counter):
                mine.update(theirs)
            else:
                setattr(self, item.name, mine + theirs)

    def to_json(self) -> JsonObject:
        data: JsonObject = {}
        for item in dataclasses.fields(self):
            value = getattr(self, item.name)
            data[item.name] = (
                [[_plain(k), n] for k, n in value.items()] if isinstance(value, Counter) else value
            )
        return data

    @classmethod
    def from_json(cls, data: Mapping[str, Json]) -> Self:
        found = cls()
        for item in dataclasses.fields(found):
            value = getattr(found, item.name)
            if isinstance(value, Counter):
                value.update({_key(k): n for k, n in data.get(item.name, ())})
            else:
                setattr(found, item.name, data.get(item.name, value))
        return found


def _plain(key: Json) -> Json:
    return list(key) if isinstance(key, tuple) else key


def _key(key: Json) -> Json:
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
    records_per_label: Mapping[str | None, int] = dataclasses.field(default_factory=dict)


@dataclass(frozen=True)
class Grown:
    """What merging a grown dataset's sections (`--append`) needs besides the two sections: the
    grown class names and the merged entries that name no picture (JSON lines)."""

    class_names: tuple[str, ...] = ()
    unmatched: tuple[str, ...] = ()


def fields_from(cls: type, data: Mapping[str, Json]) -> JsonObject:
    """The keys of `data` that are fields of `cls` (a later version's extra keys are ignored)."""
    names = {f.name for f in dataclasses.fields(cls)}
    return {key: value for key, value in data.items() if key in names}


def plain(value: object) -> Json:
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

    def to_json(self) -> JsonObject:
        data: JsonObject = plain(self)
        return data

    @classmethod
    def from_json(cls, data: Mapping[str, Json]) -> Self:
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


# A kind's tally where a run's tallies meet (`write.tally.Tally.kinds`), whatever facts it counts.
AnyTally: TypeAlias = KindTally[Any]
SectionT = TypeVar("SectionT", bound=Section)
TallyT = TypeVar("TallyT", bound=AnyTally)


@dataclass(frozen=True)
class ReadContext:
    """What a kind's reader knows of the split it reads: where it is (for messages), its records'
    layout, the run's class names, this kind's summary section (None: the run has none), and the
    one (height, width) every stored picture has, where they share one."""

    where: str
    layout: RecordLayout
    class_names: tuple[str, ...] = ()
    section: Section | None = None
    stored_size: tuple[int, int] | None = None


@dataclass(frozen=True)
class TargetOptions:
    """How `load_dataset` hands out a record's labels: boxes in `box_format` (Keras's names),
    padded to `max_objects` where given, and moved with the picture's resize to `image_size`
    (stretched, or with `crop` or `pad` as Keras does)."""

    box_format: str = "xyxy"
    max_objects: int | None = None
    image_size: tuple[int, int] | None = None
    crop: bool = False
    pad: bool = False


class PictureFit(Protocol):
    """How `load_dataset` brings a stored picture to the size it hands out (`read.tf_data`'s):
    labels that lie on the picture are moved the same way."""

    def fit(self, image: Tensor, channels: int, method: str = "bilinear") -> Tensor:
        """`image` (uint8 [height, width, channels]) resized, cropped or padded as the picture."""
        ...

    def frame(self, source_hw: Tensor) -> tuple[Tensor, Tensor, Tensor, Tensor]:
        """(scale_y, offset_y, scale_x, offset_x) that take a stored box's fractions to pixels of
        the picture handed out, from the stored picture's (height, width)."""
        ...


# What `load_dataset` hands out of one record: `(image, target)`, or the image alone.
TfTargetPair: TypeAlias = tuple[Tensor, Tensor] | Tensor


class TfTarget:
    """A kind's part of `load_dataset`'s tuples (TensorFlow tensors in, tensors out): the base
    hands out the picture alone."""

    # Its targets batch as RaggedTensors (any number of values per record).
    ragged: bool = False

    def parsed(self, record: dict[str, Tensor]) -> dict[str, Tensor]:
        """A parsed record's fields as every tuple and dict hands them out (a multi-label run's
        label as multi-hot); the base keeps them as parsed."""
        return record

    def pair(
        self, record: dict[str, Tensor], image: Tensor, source_hw: Tensor, fit: PictureFit
    ) -> TfTargetPair:
        """What a record gives with its picture: `(image, target)`, or the image alone."""
        return image

    def without_image(self, record: dict[str, Tensor]) -> Tensor | None:
        """A features_only run's target beside the features (None: the features alone)."""
        return None


class Checked(NamedTuple, Generic[DrawnT]):
    """What one kind found in one record `inspect` read.

    Args:
      classes: the classes the record holds (each once), for the per-split counts; None: this
        kind says nothing of them.
      shown: the record's caption on the contact sheet (its classes, or its first caption); None:
        this kind says nothing of it.
      drawn: what the contact sheet draws of it (`LabelKind.draw`); None: nothing.
    """

    classes: tuple[str | None, ...] | None = None
    shown: str | None = None
    drawn: DrawnT | None = None


def tf_message(error: Tensor) -> str:
    """TensorFlow's message of an op error without the eager wrapper's function and op names
    around it, for a check's line."""
    text = re.sub(r"\{\{function_node [^}]*\}\}\s*", "", error.message.splitlines()[0])
    return re.sub(r"\s*\[Op:[^\]]*\].*$", "", text).strip()


class Checks(Generic[DrawnT]):
    """A kind's checks over every record `inspect` reads, and what it counts of them to compare
    with summary.json (a fresh one per output read)."""

    def record(
        self, facts: ParsedRecord, shape: tuple[int, ...], where: str, errors: list[str]
    ) -> Checked[DrawnT]:
        """Check one record's parsed values (`facts`, NumPy, by key name) against its decoded
        picture's `shape`; a problem is one line in `errors`, naming the record (`where`)."""
        return Checked()

    def against_summary(self) -> list[str]:
        """Its counts over every record read against its summary section's."""
        return []


class LabelKind(Generic[SettingT, StoredT, FactsT, TallyT, SectionT, DrawnT]):
    """One kind of label (the class, objects, a class mask, keypoints, captions): everything every
    stage does with it. `tasks.Task.kinds` names a task's kinds; `labels.KINDS` holds one of each.

    A subclass sets `name` (what tasks.py calls it) and overrides what its kind does; the defaults
    do nothing, so a kind declares only its own parts. It is typed by what its methods exchange:
    `SettingT` what its workers read of the run (`read_setting`), `StoredT` what a record stores of
    its labels and `FactsT` what the tally counts of them (`place`), `TallyT` its tally, `SectionT`
    its section of summary.json and `DrawnT` what `inspect` keeps of a record to draw (`checks`).
    """

    name: ClassVar[str] = ""
    # Its labels name the run's classes (labels.txt lists them): a captions run has none.
    names_classes: ClassVar[bool] = False
    # Its labels are the picture's own label (`PlannedInput.label`): an annotated run's picture
    # that its annotations give none is `unlabeled` (`picture_label`).
    labels_picture: ClassVar[bool] = False

    def picture_label(self, annotations: ImageAnnotations | None) -> tuple[str, ...]:
        """The class names an annotation format gives the picture itself (CVAT's tags, Label
        Studio's choices: `ImageAnnotations.values[name]`), in order; () for none."""
        found = annotations.values.get(self.name) if annotations is not None else None
        return tuple(str(name) for name in found) if isinstance(found, list) else ()

    # The annotation options (`AnnotationConfig` fields) only this kind reads: `refusal` says
    # where one of them, given, has no use.
    options: ClassVar[tuple[str, ...]] = ()
    # The tools whose keys its records hold, for a message that refuses another schema.
    keys_named: ClassVar[str] = ""
    # The file index keeps a digest of each picture's labels of this kind, from which an append
    # tells an old picture whose annotations changed since (the objects').
    digested: ClassVar[bool] = False

    def refusal(self, option: str, run: set[str]) -> str | None:
        """Why one of its `options`, given, has no use in a run of the kinds named in `run` (the
        text after the option's name); None: it has one."""
        return None

    # --- the record's keys ---------------------------------------------------------------------

    def key_groups(self, setting: SettingT | None) -> tuple[str, ...]:
        """The groups of `keys.KeyTable.groups` its records hold, given the run's setting (the
        class's keys are the table's own `label` keys: none)."""
        return ()

    def encoders(self) -> Mapping[str, Encoder]:
        """Each of its keys' values, by the key's name (`keys.RecordKey.name`), from a record's
        fields (this kind's stored value is `fields.labels[self.name]`)."""
        return {}

    # --- the worker ----------------------------------------------------------------------------

    def read_setting(self, staged: Json) -> SettingT:
        """What the workers need of the run, back from its staged JSON form (a shard task's)."""
        setting: SettingT = staged
        return setting

    def place(
        self,
        item: PlannedInput,
        transform: PixelTransform,
        setting: SettingT,
        placed: Mapping[str, AnyPlaced],
        read: FileReader,
    ) -> Placed[StoredT, FactsT]:
        """The picture's labels of this kind as its record stores them, moved as the pixels were
        (`transform`); `placed` holds the kinds placed before it (the run's kinds in order).
        Raises `reasons.Reject` when the picture cannot be stored with its labels."""
        return Placed()

    # --- the tally -----------------------------------------------------------------------------

    def new_tally(self) -> TallyT:
        """Its counts over a run (the base counts nothing: its tally is a `KindTally`)."""
        return cast(TallyT, KindTally())

    # --- planning and the summary --------------------------------------------------------------

    # summary.json's key of its section, and the section's type (None: it has no section).
    section_key: ClassVar[str] = ""
    section_type: ClassVar[type[Section] | None] = None

    def plan_facts(self, annotated: Annotated) -> JsonObject | None:
        """What planning learnt of its labels, as JSON (staged with the plan's facts), for its
        section and its workers; None: nothing."""
        return None

    def worker_setting(self, facts: JsonObject | None, class_names: tuple[str, ...]) -> Json:
        """Its staged worker setting (`read_setting` reads it) from its plan facts (as staged and
        read back); None: none."""
        return None

    def section(self, facts: JsonObject | None, tally: TallyT, inputs: SectionInputs) -> SectionT | None:
        """Its section of summary.json from its plan facts, its tally and the run's counts."""
        return None

    def section_groups(self, section: SectionT) -> tuple[str, ...]:
        """The key groups the records of a run with this section hold (readers, from summary.json)."""
        return self.key_groups(None)

    def label_counts(self, tally: TallyT, class_names: tuple[str, ...]) -> Counter[str | None] | None:
        """Records per class name, where this kind counts them otherwise than by the records
        that hold each class (the run's `by_split_label`); None: as those."""
        return None

    # Its side files whose lines a grown dataset (`--append`) joins with the append's run's.
    joined_files: ClassVar[tuple[str, ...]] = ()

    def grown_files(self, class_names: tuple[str, ...]) -> dict[str, str]:
        """Its side files a grown dataset writes anew for its grown class names (name -> text)."""
        return {}

    def side_files(
        self, class_names: tuple[str, ...], facts: ByKind, dropped: tuple[DroppedObjectLine, ...]
    ) -> dict[str, str]:
        """The files it writes beside the shards (name -> text): `facts` are every kind's plan
        facts (by kind name), `dropped` the lines of every part of a label left out."""
        return {}

    # --- reading back --------------------------------------------------------------------------

    # Its target lies on the picture (boxes, masks): a features_only run, which stored no
    # picture, cannot hand it out; `held_as` names what its records hold, for that refusal.
    target_needs_image: ClassVar[bool] = False
    held_as: ClassVar[str] = ""
    # TorchImages' `transform` takes (image, target) together, as torchvision's detection
    # transforms do, not the image alone.
    transforms_target: ClassVar[bool] = False

    def holds_lists(self, layout: RecordLayout) -> bool:
        """Its keys hold lists (a dict of every key then batches as RaggedTensors)."""
        return False

    def tf_target(self, context: ReadContext, options: TargetOptions, channels: int | None) -> TfTarget:
        """Its part of `load_dataset`'s tuples (`channels`: the pictures' as handed out); raises
        ValueError for options its records cannot honour (naming `context.where`)."""
        return TfTarget()

    def numpy_fields(self, record: ParsedRecord, layout: RecordLayout) -> None:
        """Adds its decoded fields to an `iter_examples` dict (boxes as arrays, masks decoded)."""

    def torch_target(self, record: ParsedRecord, image_size: tuple[int, int] | None) -> TorchValue:
        """`TorchImages`' target of an `iter_examples` dict (torch tensors); None: none."""
        return None

    # --- inspect ---------------------------------------------------------------------------------

    def checks(self, class_names: tuple[str, ...] | None, section: SectionT | None) -> Checks[DrawnT]:
        """Its checks over one output's records (`section`: its summary section, if any)."""
        return Checks()

    def drawn_classes(self, drawn: DrawnT) -> tuple[str, ...]:
        """The class names a record's drawing shows (each gets its colour on the sheet)."""
        return ()

    def draw(self, thumb: Image.Image, drawn: DrawnT, sheet: Sheet) -> Image.Image:
        """`thumb` (a Pillow image) with this kind's labels drawn on it (`sheet`: a
        `labels.drawing.Sheet`); the base draws nothing."""
        return thumb


# A run's kinds of label where they meet (the registry, a run's tuple of them, the loops of every
# stage): each kind is typed by its own parameters, and these are where they differ.
AnyKind: TypeAlias = LabelKind[Any, Any, Any, Any, Any, Any]
