"""Objects: each picture's annotated objects, a box, a class and the source's flags each, and with
`--masks` an instance mask each, stored with the Object Detection API's and Model Garden's keys
(`image/object/...`, the table's `objects` and `object_masks` groups), class ids from 1 (0 is
background, as the Object Detection API counts).

Every object of the source ends as one stored object or one dropped with a reason
(`placement`), so `annotated = stored + dropped` holds per picture and per run.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import NamedTuple, TypeAlias

from PIL import Image

from beam_tfrecord import names, reasons
from beam_tfrecord.edges import ByKind, Json, JsonObject, ParsedRecord, TorchValue
from beam_tfrecord.elements import DroppedObject, DroppedObjectLine, PlannedInput, StoredObject
from beam_tfrecord.keys import RecordLayout
from beam_tfrecord.labels.base import (
    Annotated,
    AnyPlaced,
    Checks,
    Encoder,
    FileReader,
    KindTally,
    LabelCounts,
    LabelKind,
    Placed,
    ReadContext,
    SectionInputs,
    TargetOptions,
    TfTarget,
)
from beam_tfrecord.labels.class_mask import CLASS_MASK
from beam_tfrecord.labels.drawing import Sheet
from beam_tfrecord.labels.geometry import PixelTransform
from beam_tfrecord.labels.objects.checks import ObjectChecks, ObjectMarks, draw_objects
from beam_tfrecord.labels.objects.label_map import label_map
from beam_tfrecord.labels.objects.placement import place_annotations, size_mismatch_detail
from beam_tfrecord.labels.objects.reading import DETECTION_KEYS, detection_target
from beam_tfrecord.labels.objects.summary import ObjectSummary, object_summary
from beam_tfrecord.reasons import Reject

__all__ = [
    "OBJECTS",
    "SIZE_BUCKETS",
    "ObjectFacts",
    "ObjectLabels",
    "ObjectSetting",
    "ObjectTally",
    "ObjectsKind",
    "size_bucket",
]

# Each object note's record-level change (reasons.record_changes), looked up once.
_RECORD_CHANGES = reasons.record_changes()
# COCO's box size buckets: an object's area (in the stored image's pixels) under 32^2 is small,
# under 96^2 medium, else large.
SIZE_BUCKETS = (("small", 32**2), ("medium", 96**2), ("large", float("inf")))


def size_bucket(area: float) -> str:
    for name, limit in SIZE_BUCKETS:
        if area < limit:
            return name
    raise ValueError(f"no size bucket holds an area of {area}")  # NaN


# What the tally counts of a record's objects: each stored object's class name and area.
ObjectFacts: TypeAlias = tuple[tuple[str, float], ...]


class ObjectLabels(NamedTuple):
    """What a record stores of its objects: the picture's id in its source, and its objects as
    placed (() a negative)."""

    source_id: str
    objects: tuple[StoredObject, ...]


@dataclass(frozen=True)
class ObjectSetting:
    """What a detection run's workers need: the class names in id order (ids from 1), and whether
    objects keep their masks."""

    class_names: tuple[str, ...] = ()
    masks: bool = False
    ids: Mapping[str, int] = field(default_factory=dict, compare=False)

    @classmethod
    def of(cls, class_names: Sequence[str], masks: bool) -> ObjectSetting:
        names = tuple(class_names)
        return cls(names, masks, {name: index + 1 for index, name in enumerate(names)})

    def to_json(self) -> JsonObject:
        return {"class_names": list(self.class_names), "masks": self.masks}


@dataclass
class ObjectTally(KindTally[ObjectFacts]):
    """A detection run's objects: stored per class, records per object count, stored per COCO size
    bucket. A record counts once in the run's records per label for each class it holds."""

    per_class: Counter[str] = field(default_factory=Counter)
    per_image: Counter[int] = field(default_factory=Counter)
    sizes: Counter[str] = field(default_factory=Counter)

    def add(self, facts: ObjectFacts, split: str, labels: LabelCounts) -> None:
        names = [name for name, _ in facts]  # (lists and maps: Counter counts them in C)
        for name in set(names):
            labels[(split, name)] += 1
        self.per_class.update(names)
        self.per_image[len(facts)] += 1
        self.sizes.update(map(size_bucket, [area for _, area in facts]))


def _values(get: Callable[[StoredObject], object]) -> Encoder:
    """A key's values, one per stored object, in order."""
    return lambda fields: tuple(get(o) for o in fields.labels["objects"].objects)


class ObjectsKind(
    LabelKind[ObjectSetting, ObjectLabels, ObjectFacts, ObjectTally, ObjectSummary, ObjectMarks]
):
    """Boxes (and masks) that move with the picture: clipped, mapped through its EXIF turn and
    resize, cut by a crop (`placement`)."""

    name = "objects"
    options = ("masks", "label_map")
    keys_named = "the Object Detection API's keys"
    digested = True
    names_classes = True

    def key_groups(self, setting: ObjectSetting | None) -> tuple[str, ...]:
        """The objects' keys, and their masks' where the run keeps them (None: a reader, which
        has the section instead: `section_groups`)."""
        return ("objects", "object_masks") if setting is not None and setting.masks else ("objects",)

    def encoders(self) -> Mapping[str, Encoder]:
        return {
            "source_id": lambda fields: fields.labels["objects"].source_id,
            "object_xmin": _values(lambda o: o.xmin),
            "object_ymin": _values(lambda o: o.ymin),
            "object_xmax": _values(lambda o: o.xmax),
            "object_ymax": _values(lambda o: o.ymax),
            "object_label": _values(lambda o: o.class_id),
            "object_text": _values(lambda o: o.class_name),
            "object_area": _values(lambda o: o.area),
            "object_is_crowd": _values(lambda o: int(o.is_crowd)),
            "object_difficult": _values(lambda o: int(o.difficult)),
            "object_truncated": _values(lambda o: int(o.truncated)),
            "object_view": _values(lambda o: o.pose),
            "object_mask": _values(lambda o: o.mask_png or b""),
        }

    def refusal(self, option: str, run: set[str]) -> str | None:
        """A run that stores one class mask per picture has no objects to mask or number."""
        if CLASS_MASK.name not in run:
            return None
        if option == "masks":
            return "stores a mask per object (detection); segmentation stores one per picture"
        return "numbers objects' classes (detection); give class_names instead"

    def read_setting(self, staged: Json) -> ObjectSetting:
        staged = staged or {}
        return ObjectSetting.of(staged.get("class_names", ()), bool(staged.get("masks")))

    def place(
        self,
        item: PlannedInput,
        transform: PixelTransform,
        setting: ObjectSetting,
        placed: Mapping[str, AnyPlaced],
        read: FileReader,
    ) -> Placed[ObjectLabels, ObjectFacts]:
        """The picture's objects placed in its stored image, with their ids, and the change reasons
        they make. A picture whose declared size fits neither its stored nor its upright picture is
        a reject: the annotations are for another picture, and a negative would teach the model
        that its objects are background."""
        annotations = item.annotations
        assert annotations is not None
        found = place_annotations(annotations, transform, masks=setting.masks, class_ids=setting.ids)
        if found.frame is None:
            raise Reject(reasons.ANNOTATION_SIZE_MISMATCH, size_mismatch_detail(annotations, transform))
        ids = setting.ids
        stored, dropped = [], list(found.dropped)
        for one in found.objects:
            if one.class_name in ids:  # placed with its id
                stored.append(one)
            else:  # the planner drops unknown classes; a task without class names has none
                detail = f"class {one.class_name!r} is not among the class names"
                dropped.append(
                    DroppedObject(one.class_name, reasons.UNKNOWN_CATEGORY.code, detail, one.source_ref)
                )
        notes = {_RECORD_CHANGES[n] for o in stored for n in o.notes if n in _RECORD_CHANGES}
        notes |= {_RECORD_CHANGES[n] for n in annotations.notes if n in _RECORD_CHANGES}
        if dropped:
            notes.add(reasons.OBJECTS_DROPPED.code)
        kept = tuple(stored)
        facts = tuple((o.class_name, o.area) for o in kept)
        return Placed(ObjectLabels(annotations.source_id, kept), facts, tuple(notes), tuple(dropped))

    def new_tally(self) -> ObjectTally:
        return ObjectTally()

    section_key = "objects"
    section_type = ObjectSummary

    def plan_facts(self, annotated: Annotated) -> JsonObject:
        """Whether objects keep their masks, how many the source holds, those dropped while
        planning per reason (their lines are staged beside the facts) and those of entries that
        name no listed picture."""
        return {
            "masks": annotated.masks,
            "annotated": annotated.annotated_objects,
            "unmatched_objects": annotated.unmatched_objects,
            "dropped_per_reason": dict(sorted(Counter(d.reason for d in annotated.dropped).items())),
        }

    def worker_setting(self, facts: JsonObject | None, class_names: tuple[str, ...]) -> JsonObject:
        assert facts is not None  # a detection run's plan has them (`plan_facts`)
        return ObjectSetting.of(class_names, bool(facts["masks"])).to_json()

    def section(self, facts: JsonObject | None, tally: ObjectTally, inputs: SectionInputs) -> ObjectSummary:
        assert facts is not None
        sizes = {name: tally.sizes[name] for name, _ in SIZE_BUCKETS}
        return object_summary(facts, tally.per_class, tally.per_image, sizes, inputs)

    def section_groups(self, section: ObjectSummary) -> tuple[str, ...]:
        return ("objects", "object_masks") if section.masks else ("objects",)

    joined_files = (names.DROPPED_OBJECTS_FILE,)
    target_needs_image = True
    held_as = "objects"
    transforms_target = True

    def holds_lists(self, layout: RecordLayout) -> bool:
        return True

    def tf_target(self, context: ReadContext, options: TargetOptions, channels: int | None) -> TfTarget:
        """KerasHub's targets (labels.objects.tf_targets); a `max_objects` below the run's most
        objects in one picture (summary.json) is refused here."""
        section = context.section
        most = section.per_image.get("max") if isinstance(section, ObjectSummary) else None
        if options.max_objects is not None and most is not None and options.max_objects < int(most):
            raise ValueError(
                f"{context.where}: an image holds up to {int(most)} objects (summary.json), so "
                f"max_objects={options.max_objects} would lose some: pass max_objects={int(most)} or more"
            )
        from beam_tfrecord.labels.objects.tf_targets import ObjectTargets

        return ObjectTargets(context, options, channels)

    def numpy_fields(self, record: ParsedRecord, layout: RecordLayout) -> None:
        """The objects as NumPy arrays (`DETECTION_KEYS`): boxes in pixel xyxy, labels from 0,
        masks decoded, keypoints."""
        target = detection_target(record, labels_from=0)
        record.update({key: target[key] for key in DETECTION_KEYS if key in target})

    def torch_target(self, record: ParsedRecord, image_size: tuple[int, int] | None) -> TorchValue:
        """torchvision's detection target dict: labels from 1 (its class 0 is the background)."""
        import torch

        arrays = detection_target(record, image_size=image_size, labels_from=1)
        return {name: torch.from_numpy(value) for name, value in arrays.items()}

    def checks(
        self, class_names: tuple[str, ...] | None, section: ObjectSummary | None
    ) -> Checks[ObjectMarks]:
        return ObjectChecks(class_names or (), section if isinstance(section, ObjectSummary) else None)

    def drawn_classes(self, drawn: ObjectMarks | None) -> tuple[str, ...]:
        return tuple(drawn.names) if drawn is not None else ()

    def draw(self, thumb: Image.Image, drawn: ObjectMarks | None, sheet: Sheet) -> Image.Image:
        return draw_objects(thumb, drawn, sheet) if drawn is not None else thumb

    def grown_files(self, class_names: tuple[str, ...]) -> dict[str, str]:
        return {names.LABEL_MAP_FILE: label_map(class_names)}

    def side_files(
        self, class_names: tuple[str, ...], facts: ByKind, dropped: tuple[DroppedObjectLine, ...]
    ) -> dict[str, str]:
        """The Object Detection API's label_map.pbtxt (a keypoints run's classes with their
        points), and dropped_objects.jsonl: every object in no record, one line each."""
        points = (facts.get("keypoints") or {}).get("names")
        lines = "".join(line.to_json() + "\n" for line in sorted(dropped))
        return {names.LABEL_MAP_FILE: label_map(class_names, points), names.DROPPED_OBJECTS_FILE: lines}


OBJECTS = ObjectsKind()
