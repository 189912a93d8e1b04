"""Panoptic segments: every pixel's category and, for a thing, its instance, from COCO panoptic's
PNG of segment ids (read by the worker beside the picture) and its `segments_info`, stored as TF
Model Garden's `create_coco_tf_record.py --include_panoptic_masks` stores them (the table's
`panoptic` group):

- `image/panoptic/category_mask`: each pixel's category id as the dataset numbers them (COCO's
  1..200 with gaps); 0 where no segment is (void);
- `image/panoptic/instance_mask`: a thing segment's pixels hold its position in the picture's
  `segments_info` plus one; stuff and void pixels 0;
- `image/segmentation/class/encoded`: Model Garden's semantic mask: every thing 1, a stuff
  category its id minus the offset that makes the first stuff category 2 (COCO's 92 -> 2, as
  Model Garden's `_STUFF_CLASSES_OFFSET = 90`), void 0;
- `image/object/mask`: each stored thing object's pixels (0 and 1), in the objects' order.

Each is a grey PNG the picture's size: 8 bits where every value fits, else 16 bits (a change,
`panoptic_wide_ids`): Model Garden's converter writes uint8 and wraps a 256th segment's id.
Crowd segments are kept, as its converter does by default (`--panoptic_skip_crowd` off).

A segment id of the PNG that `segments_info` does not list is void, as in Model Garden's
converter. The ids move with the picture (EXIF turn, resize, crop, pad) by nearest neighbour
before the masks are made from them, so every mask moves alike; a pad's margins are void.

Pure functions on bytes and arrays; no Beam, no TensorFlow but in the reader it hands out.
"""

from __future__ import annotations

import io
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import NamedTuple, TypeAlias, TypedDict

import numpy as np
from PIL import Image

from beam_tfrecord import reasons
from beam_tfrecord.edges import Json, JsonObject, ParsedRecord, Tensor, TorchValue
from beam_tfrecord.elements import ImageAnnotations, PlannedInput, RecordFields
from beam_tfrecord.keys import RecordLayout
from beam_tfrecord.labels.base import (
    AnyPlaced,
    Checked,
    Checks,
    Encoder,
    FileReader,
    Grown,
    KindTally,
    LabelCounts,
    LabelKind,
    PictureFit,
    Placed,
    ReadContext,
    Section,
    SectionInputs,
    TargetOptions,
    TfTarget,
    TfTargetPair,
)
from beam_tfrecord.labels.drawing import MASK_OPACITY, Sheet
from beam_tfrecord.labels.geometry import PixelTransform, encode_mask_png, placed_label_image
from beam_tfrecord.labels.objects.reading import decode_masks, detection_target
from beam_tfrecord.reasons import Reject

__all__ = [
    "PANOPTIC",
    "PanopticFacts",
    "PanopticKind",
    "PanopticLabels",
    "PanopticPicture",
    "PanopticSummary",
    "PanopticTally",
    "Segment",
    "decode_ids",
    "encode_ids",
    "panoptic_masks",
    "panoptic_picture",
    "segment_ids",
]

# The masks' names in a record (keys.TABLES' `panoptic` group) and in what the readers hand out.
MASKS = ("category_mask", "instance_mask", "semantic_mask")


@dataclass(frozen=True, slots=True)
class Segment:
    """One entry of a picture's `segments_info`.

    Args:
      id: its segment id in the PNG (R + 256 G + 256^2 B, as panopticapi's `rgb2id`).
      category_id: its category, as the dataset numbers them.
      crowd: `iscrowd`.
      semantic: its value in the semantic mask (1 for a thing, the stuff's shifted id).
      thing: its category's `isthing`.
      name: its category's name.
    """

    id: int
    category_id: int
    crowd: bool
    semantic: int
    thing: bool
    name: str

    def row(self) -> list[Json]:
        return [self.id, self.category_id, int(self.crowd), self.semantic, int(self.thing), self.name]


@dataclass(frozen=True)
class PanopticPicture:
    """A picture's panoptic labels as planning stages them (`ImageAnnotations.values["panoptic"]`):
    its PNG, read by the worker, and its segments in `segments_info` order.

    Args:
      path: the PNG (local or gs://); size: its size in bytes, from the listing; shown: how
        messages name it; ref: the panoptic file's name, which each thing object's `source_ref`
        starts with (`ref#segment ID`); segments: in `segments_info` order.
    """

    path: str
    size: int
    shown: str
    ref: str
    segments: tuple[Segment, ...]

    def value(self) -> JsonObject:
        return {
            "png": [self.path, self.size, self.shown],
            "ref": self.ref,
            "segments": [s.row() for s in self.segments],
        }

    def object_ref(self, segment: Segment) -> str:
        """The `source_ref` of the object a thing segment stands for."""
        return f"{self.ref}#segment {segment.id}"


def panoptic_picture(annotations: ImageAnnotations | None) -> PanopticPicture | None:
    """The picture's staged panoptic labels (None: the source gave it none)."""
    found = annotations.values.get("panoptic") if annotations is not None else None
    if not isinstance(found, dict):
        return None
    path, size, shown = found["png"]
    segments = tuple(
        Segment(int(i), int(c), bool(k), int(s), bool(t), str(n)) for i, c, k, s, t, n in found["segments"]
    )
    return PanopticPicture(str(path), int(size), str(shown), str(found["ref"]), segments)


def segment_ids(data: bytes, name: str) -> np.ndarray:
    """The PNG's segment ids (uint32 [height, width]: R + 256 G + 256^2 B); raises `Reject` for
    a file that is not an RGB image."""
    try:
        with Image.open(io.BytesIO(data)) as image:
            image.load()
            mode = image.mode
            rgb = np.asarray(image.convert("RGB")) if mode in ("RGB", "RGBA", "P") else None
    except Exception as error:  # any decoder error: the PNG, not the picture, is at fault
        raise Reject(reasons.PANOPTIC_UNREADABLE, f"{name}: {type(error).__name__}: {error}") from None
    if rgb is None:
        raise Reject(reasons.PANOPTIC_UNREADABLE, f"{name}: a {mode} image holds no RGB-encoded segment ids")
    wide = rgb.astype(np.uint32)
    return wide[..., 0] + 256 * wide[..., 1] + 65536 * wide[..., 2]


def panoptic_masks(ids: np.ndarray, segments: Sequence[Segment]) -> dict[str, np.ndarray]:
    """The category, instance and semantic masks (int32) of segment ids, as Model Garden's
    `generate_coco_panoptics_masks` makes them: each listed segment's pixels, in order, take its
    category id, its position plus one (things; stuff 0) and its semantic value; the rest 0."""
    masks = {name: np.zeros(ids.shape, dtype=np.int32) for name in MASKS}
    for index, segment in enumerate(segments):
        pixels = ids == segment.id
        masks["category_mask"][pixels] = segment.category_id
        masks["instance_mask"][pixels] = index + 1 if segment.thing else 0
        masks["semantic_mask"][pixels] = segment.semantic
    return masks


def encode_ids(values: np.ndarray) -> tuple[bytes, bool]:
    """A mask of non-negative ids as a grey PNG: 8 bits where every value fits, else 16 bits
    (True: wide)."""
    wide = bool(values.size) and int(values.max()) > 255
    if wide and int(values.max()) > 65535:
        raise ValueError(f"a panoptic value of {int(values.max())} does not fit 16 bits")
    image = Image.fromarray(values.astype(np.uint16 if wide else np.uint8))
    out = io.BytesIO()
    image.save(out, format="PNG")
    return out.getvalue(), wide


def decode_ids(png: bytes) -> np.ndarray:
    """int32 [height, width] values of a panoptic mask PNG, 8- or 16-bit."""
    with Image.open(io.BytesIO(png), formats=("PNG",)) as mask:
        return np.asarray(mask).astype(np.int32)


class PanopticLabels(NamedTuple):
    """What a record stores of its segments: the three masks' PNGs and each thing object's mask
    PNG by its `source_ref`."""

    category_mask: bytes
    instance_mask: bytes
    semantic_mask: bytes
    object_masks: Mapping[str, bytes]


# What the tally counts of a record: (category id, name, thing, segments, pixels) per category
# present, the void pixels, and whether its masks are 16-bit.
PanopticFacts: TypeAlias = tuple[tuple[tuple[int, str, bool, int, int], ...], int, bool]


def _placed_ids(ids: np.ndarray, transform: PixelTransform, name: str) -> np.ndarray:
    """Segment ids moved as the picture was (`geometry.placed_label_image`), a pad's margins void."""
    try:
        image = placed_label_image(Image.fromarray(ids.astype(np.int32), mode="I"), transform, 0)
    except ValueError as error:
        raise Reject(reasons.PANOPTIC_SIZE_MISMATCH, f"{name} {error}") from None
    return np.asarray(image).astype(np.int64)


def place_panoptic(
    picture: PanopticPicture, data: bytes, transform: PixelTransform
) -> Placed[PanopticLabels, PanopticFacts]:
    """A picture's PNG as its record stores it: segment ids read, moved with the picture, made
    into the three masks and each thing's mask."""
    ids = _placed_ids(segment_ids(data, picture.shown), transform, picture.shown)
    masks = panoptic_masks(ids, picture.segments)
    encoded = {name: encode_ids(values) for name, values in masks.items()}
    objects = {
        picture.object_ref(s): encode_mask_png(Image.fromarray((ids == s.id).astype(np.uint8), mode="L"))
        for s in picture.segments
        if s.thing
    }
    counts: Counter[tuple[int, str, bool]] = Counter()
    pixels: Counter[tuple[int, str, bool]] = Counter()
    category = masks["category_mask"]
    for segment in picture.segments:
        key = (segment.category_id, segment.name, segment.thing)
        counts[key] += 1
        pixels[key] += 0
    values, found = np.unique(category, return_counts=True)
    by_id = {int(v): int(n) for v, n in zip(values, found, strict=True)}
    for key in counts:
        pixels[key] = by_id.get(key[0], 0)
    wide = any(w for _, w in encoded.values())
    facts: PanopticFacts = (
        tuple((c, n, t, counts[(c, n, t)], pixels[(c, n, t)]) for c, n, t in sorted(counts)),
        by_id.get(0, 0),
        wide,
    )
    labels = PanopticLabels(
        encoded["category_mask"][0], encoded["instance_mask"][0], encoded["semantic_mask"][0], objects
    )
    changes = (reasons.PANOPTIC_WIDE_IDS.code,) if wide else ()
    return Placed(labels, facts, changes)


def _void(transform: PixelTransform) -> Placed[PanopticLabels, PanopticFacts]:
    """A picture without panoptic labels, kept (`--unannotated keep`): every pixel void."""
    empty = np.zeros((transform.height, transform.width), dtype=np.uint8)
    png = encode_ids(empty)[0]
    return Placed(PanopticLabels(png, png, png, {}), ((), int(empty.size), False))


class CategoryCounts(TypedDict):
    """One category's segments and pixels over a run's records (`PanopticSummary.per_category`)."""

    id: int
    thing: bool
    segments: int
    pixels: int


@dataclass
class PanopticSummary(Section):
    """A panoptic run's segments (summary.json's `panoptic`): per category (by name) its id, whether
    it is a thing, its segments and pixels; the void pixels; the records whose masks are 16-bit."""

    kind: str
    per_category: dict[str, CategoryCounts] = field(default_factory=dict)
    void_pixels: int = 0
    wide_records: int = 0
    keys: str = (
        "image/panoptic/category_mask (category ids), image/panoptic/instance_mask (a thing's "
        "position in segments_info + 1), image/segmentation/class/encoded (things 1, stuff from 2): "
        "grey PNGs the picture's size, 0 void"
    )
    found_at: str = ""

    def rows(self) -> list[tuple[str, str]]:
        rows = [("segments", self.found_at)] if self.found_at else []
        rows.append(("segments per category", "segments, pixels"))
        rows += [
            (f"  {name}{'' if n['thing'] else ' (stuff)'}", f"{n['segments']}, {n['pixels']}")
            for name, n in self.per_category.items()
        ]
        rows.append(("void pixels", str(self.void_pixels)))
        if self.wide_records:
            rows.append(("16-bit masks", f"{self.wide_records} records (more than 255 ids)"))
        return rows

    def merged(self, new: Section, grown: Grown) -> PanopticSummary:
        """Segments and pixels per category summed."""
        assert isinstance(new, PanopticSummary)
        per_category = dict(self.per_category)
        for name, counts in new.per_category.items():
            old = per_category.get(name)
            per_category[name] = (
                counts
                if old is None
                else {
                    "id": counts["id"],
                    "thing": counts["thing"],
                    "segments": old["segments"] + counts["segments"],
                    "pixels": old["pixels"] + counts["pixels"],
                }
            )
        ordered = dict(sorted(per_category.items(), key=lambda item: item[1]["id"]))
        return PanopticSummary(
            new.kind,
            ordered,
            self.void_pixels + new.void_pixels,
            self.wide_records + new.wide_records,
            found_at=new.found_at,
        )


@dataclass
class PanopticTally(KindTally[PanopticFacts]):
    """Segments and pixels per (category id, name, thing), void pixels, records with 16-bit masks.
    The records per class are the objects kind's (the records that hold each thing)."""

    segments: Counter[tuple[int, str, bool]] = field(default_factory=Counter)
    pixels: Counter[tuple[int, str, bool]] = field(default_factory=Counter)
    void: int = 0
    wide: int = 0

    def add(self, facts: PanopticFacts, split: str, labels: LabelCounts) -> None:
        categories, void, wide = facts
        for category_id, name, thing, segments, pixels in categories:
            key = (category_id, name, thing)
            self.segments[key] += segments
            self.pixels[key] += pixels
        self.void += void
        self.wide += int(wide)


def _decode_tf(png: Tensor) -> Tensor:
    """int32 [height, width, 1] of an 8- or 16-bit grey PNG (its IHDR's bit depth, byte 24)."""
    import tensorflow as tf

    wide = tf.equal(tf.strings.substr(png, 24, 1), b"\x10")
    return tf.cond(
        wide,
        lambda: tf.cast(tf.io.decode_png(png, channels=1, dtype=tf.uint16), tf.int32),
        lambda: tf.cast(tf.io.decode_png(png, channels=1), tf.int32),
    )


class _PanopticTarget(TfTarget):
    """`(image, {category_mask, instance_mask, semantic_mask})`: int32 [height, width, 1] each, at
    the stored size."""

    def __init__(self, context: ReadContext, options: TargetOptions) -> None:
        if options.image_size is not None:
            raise ValueError(
                f"{context.where}: load_dataset hands out panoptic masks at the stored size: leave "
                "image_size out (or convert with --resize)"
            )
        self.keys = {name: _key(context.layout, name) for name in MASKS}

    def pair(
        self, record: dict[str, Tensor], image: Tensor, source_hw: Tensor, fit: PictureFit
    ) -> TfTargetPair:
        return image, {name: _decode_tf(record[key]) for name, key in self.keys.items()}


def _key(layout: RecordLayout, name: str) -> str:
    from beam_tfrecord.keys import record_keys

    return next(k.key for k in record_keys(layout) if k.name == name)


# What inspect keeps of a record to draw: its category and instance masks' PNGs.
Drawn: TypeAlias = tuple[bytes, bytes]


class _PanopticChecks(Checks[Drawn]):
    """A panoptic record's masks: each decodes to the picture's size; instances lie on things
    (a non-zero instance has a non-zero category), semantic and category masks are void alike;
    pixels per category id summed against summary.json's."""

    def __init__(self, section: PanopticSummary | None) -> None:
        self.section = section
        self.pixels: Counter[int] = Counter()

    def record(
        self, facts: ParsedRecord, shape: tuple[int, ...], where: str, errors: list[str]
    ) -> Checked[Drawn]:
        try:
            masks = {name: decode_ids(bytes(facts[name])) for name in MASKS}
        except Exception as error:
            errors.append(f"{where}: a panoptic mask does not decode: {type(error).__name__}: {error}")
            return Checked()
        for name, values in masks.items():
            if values.shape != tuple(shape[:2]):
                errors.append(f"{where}: its {name} is {values.shape}, the image {tuple(shape[:2])}")
                return Checked()
        category = masks["category_mask"]
        if ((masks["instance_mask"] > 0) & (category == 0)).any():
            errors.append(f"{where}: its instance mask holds instances on void pixels")
        if ((masks["semantic_mask"] == 0) != (category == 0)).any():
            errors.append(f"{where}: its semantic and category masks disagree on the void pixels")
        values, counts = np.unique(category, return_counts=True)
        self.pixels.update({int(v): int(n) for v, n in zip(values, counts, strict=True) if v})
        drawn = (bytes(facts["category_mask"]), bytes(facts["instance_mask"]))
        return Checked(drawn=drawn)  # the records per class are the objects' (things), as the tally's

    def against_summary(self) -> list[str]:
        if self.section is None:
            return []
        return [
            f"category {name}: {self.pixels[n['id']]} pixels read, summary.json says {n['pixels']}"
            for name, n in self.section.per_category.items()
            if self.pixels[n["id"]] != n["pixels"]
        ]


def draw_segments(thumb: Image.Image, drawn: Drawn) -> Image.Image:
    """`thumb` with each segment (a category and instance pair) in a colour of its own, void clear."""
    try:
        category, instance = decode_ids(drawn[0]), decode_ids(drawn[1])
    except Exception:
        return thumb
    pairs = category.astype(np.int64) * 65536 + instance
    keys, inverse = np.unique(pairs, return_inverse=True)
    rng = np.random.default_rng(7)
    colours = rng.integers(40, 256, size=(len(keys), 3), dtype=np.uint8)
    rgb = colours[inverse.reshape(pairs.shape)]
    overlay = Image.fromarray(rgb, mode="RGB").resize(thumb.size, Image.Resampling.NEAREST)
    alpha = Image.fromarray(np.where(category > 0, int(255 * MASK_OPACITY), 0).astype(np.uint8), mode="L")
    alpha = alpha.resize(thumb.size, Image.Resampling.NEAREST)
    thumb = thumb.convert("RGB")
    thumb.paste(overlay, (0, 0), alpha)
    return thumb


def _object_masks(fields: RecordFields) -> tuple[bytes, ...]:
    """Each stored object's mask, in the objects' order (an object without a segment: none)."""
    masks: Mapping[str, bytes] = fields.labels["panoptic"].object_masks
    return tuple(masks.get(o.source_ref, b"") for o in fields.labels["objects"].objects)


class PanopticKind(LabelKind[None, PanopticLabels, PanopticFacts, PanopticTally, PanopticSummary, Drawn]):
    """A PNG of segment ids per picture, with its segments: Model Garden's panoptic masks, and the
    thing objects' masks beside the objects kind's boxes."""

    name = "panoptic"
    keys_named = "Model Garden's panoptic keys"
    names_classes = True

    def key_groups(self, setting: None) -> tuple[str, ...]:
        return ("panoptic",)

    def encoders(self) -> Mapping[str, Encoder]:
        return {
            "category_mask": lambda fields: fields.labels["panoptic"].category_mask,
            "instance_mask": lambda fields: fields.labels["panoptic"].instance_mask,
            "semantic_mask": lambda fields: fields.labels["panoptic"].semantic_mask,
            "segment_mask": _object_masks,
        }

    def place(
        self,
        item: PlannedInput,
        transform: PixelTransform,
        setting: None,
        placed: Mapping[str, AnyPlaced],
        read: FileReader,
    ) -> Placed[PanopticLabels, PanopticFacts]:
        """The picture's masks; a picture without panoptic labels gets void ones. Raises `Reject`
        for a PNG that cannot be read or is no PNG of this picture."""
        picture = panoptic_picture(item.annotations)
        if picture is None:
            return _void(transform)
        try:
            data = read(picture.path, picture.size)
        except Exception as error:  # a PNG gone since listing, a flaky remote read
            detail = f"{picture.shown}: {type(error).__name__}: {error}"
            raise Reject(reasons.PANOPTIC_UNREADABLE, detail) from None
        return place_panoptic(picture, data, transform)

    def new_tally(self) -> PanopticTally:
        return PanopticTally()

    section_key = "panoptic"
    section_type = PanopticSummary

    def section(
        self, facts: JsonObject | None, tally: PanopticTally, inputs: SectionInputs
    ) -> PanopticSummary:
        per_category: dict[str, CategoryCounts] = {}
        for category_id, name, thing in sorted(tally.segments):
            key = (category_id, name, thing)
            per_category[name] = {
                "id": category_id,
                "thing": thing,
                "segments": tally.segments[key],
                "pixels": tally.pixels[key],
            }
        return PanopticSummary(inputs.format, per_category, tally.void, tally.wide, found_at=inputs.found_at)

    target_needs_image = True
    held_as = "panoptic masks"

    def tf_target(self, context: ReadContext, options: TargetOptions, channels: int | None) -> TfTarget:
        return _PanopticTarget(context, options)

    def numpy_fields(self, record: ParsedRecord, layout: RecordLayout) -> None:
        """Each mask decoded to int32 [height, width] (its PNG kept as `NAME_png`), and the thing
        objects' masks as the objects kind gives its own: `object_mask` (PNGs) and `masks` (uint8
        [N, height, width] of 0 and 1), beside their boxes."""
        for name in MASKS:
            record[f"{name}_png"] = record[name]
            record[name] = decode_ids(record[name])
        pngs = list(record.pop("segment_mask", None) or [])
        record["object_mask"] = pngs  # the objects' own name, so their target takes them
        height, width = record[MASKS[0]].shape
        record["masks"] = decode_masks(pngs, height, width)

    def torch_target(self, record: ParsedRecord, image_size: tuple[int, int] | None) -> TorchValue:
        """The three masks as int64 tensors [height, width], and the things' boxes, labels (from 1)
        and masks as torchvision's detection target gives them."""
        import torch

        target = {name: torch.from_numpy(record[name].astype(np.int64)) for name in MASKS}
        arrays = detection_target(record, image_size=image_size, labels_from=1)
        target |= {name: torch.from_numpy(value) for name, value in arrays.items()}
        return target

    def checks(self, class_names: tuple[str, ...] | None, section: PanopticSummary | None) -> Checks[Drawn]:
        return _PanopticChecks(section if isinstance(section, PanopticSummary) else None)

    def draw(self, thumb: Image.Image, drawn: Drawn | None, sheet: Sheet) -> Image.Image:
        return draw_segments(thumb, drawn) if drawn is not None else thumb


PANOPTIC = PanopticKind()
