"""The class mask: a class id per pixel of the picture (segmentation). A segmentation run's mask
file becomes the class-id mask a record stores: read, checked against the run's `MaskRule`, moved
as the picture was, and encoded as the single-channel PNG DeepLab and TF Model Garden read from
`image/segmentation/class/encoded` (the table's `class_mask` group).

The stored masks are 8-bit PNGs, unless the run's class ids or ignore value pass 255 (ADE20K's
full class list, a microscopy set's thousands of nucleus ids): then every mask of the run is a
16-bit PNG (`MaskRule.dtype`, the `class_mask_uint16` group, summary.json's `mask_dtype`), and
every reader gives uint16. One type per run, never per record: a tensor has one.

Which values are class ids:

- a palette PNG (Pascal VOC, labelme2voc): its indices, whatever colours the palette shows;
- an 8-bit grey or 1-bit PNG (Cityscapes' `labelIds`, ADE20K, CamVid): its values;
- a 16-bit grey PNG (Pillow's `I;16`, what `Image.fromarray(uint16)` and cellpose write), a
  16- or 32-bit TIFF (read with tifffile: what ImageJ, scikit-image and Mask2Former's ADE20K-full
  write): its values as stored, never scaled, which must fit the classes;
- colours (an RGB PNG, a palette saved as RGB, tensorflow/models#3739's NaN loss): mapped through
  the dataset's palette (`MaskRule.palette`), every colour or none: a colour no class has rejects
  the picture, naming it. A grey mask saved as RGB (three equal channels) is read as grey.

Then `MaskRule.remap` applies (a two-valued 0/255 set's 255 -> 1), and every value must be a
class id or the ignore value: another rejects the picture, naming the values, never stored.

Geometry: the mask is in the stored picture's frame when its size is the stored size, else in the
upright frame when it fits that (a mask drawn on the turned photo), else the picture is a reject. It
moves through `geometry.resample` with the nearest neighbour, so a value never blends into another,
and the margins of a pad hold the ignore value.

Pure functions on bytes and arrays; no Beam, no TensorFlow.
"""

from __future__ import annotations

import dataclasses
import io
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import TypeAlias, TypedDict

import numpy as np
from PIL import Image

from beam_tfrecord import reasons, tasks
from beam_tfrecord.edges import ByKind, Json, JsonObject, ParsedRecord, Tensor, TorchValue
from beam_tfrecord.elements import (
    DroppedObjectLine,
    ImageAnnotations,
    MaskRule,
    PlannedInput,
    Polygon,
    RunLengths,
    mask_from_row,
    mask_row,
)
from beam_tfrecord.keys import RecordLayout, key_of
from beam_tfrecord.labels.base import (
    Annotated,
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
    tf_message,
)
from beam_tfrecord.labels.drawing import INK, MASK_OPACITY, Sheet, palette_colours
from beam_tfrecord.labels.geometry import PixelTransform, encode_mask_png, placed_label_image, rasterize_mask
from beam_tfrecord.labels.mask_files import mask_values
from beam_tfrecord.names import DROPPED_OBJECTS_FILE
from beam_tfrecord.reasons import Reject

__all__ = [
    "CLASS_MASK",
    "MASK16_GROUP",
    "ClassMaskKind",
    "ClassMaskTally",
    "ClassPixels",
    "DrawnShapes",
    "MaskFile",
    "PixelCounts",
    "PlacedMask",
    "SegmentationSummary",
    "class_ids",
    "decode_class_mask",
    "draw_class_mask",
    "drawn_shapes",
    "empty_mask",
    "mask_file",
    "mask_target",
    "pixel_counts",
    "place_class_mask",
    "place_drawn",
    "placed_ids",
    "stored_dtype",
]

# The key group of a run whose masks are 16-bit PNGs (`keys.KeyTable.groups`): its keys are the
# 8-bit masks' own; TFDS and the readers read them as uint16.
MASK16_GROUP = "class_mask_uint16"
# Pillow's mode of a stored mask of each type.
_MODES = {"uint8": "L", "uint16": "I;16"}


def stored_dtype(layout: RecordLayout) -> str:
    """The type of a run's stored masks, told by its record layout (uint8 or uint16)."""
    return "uint16" if MASK16_GROUP in layout.groups else "uint8"


@dataclass(frozen=True, slots=True)
class MaskFile:
    """A segmentation run's mask of one picture: a file of class ids (or of colours that name
    them), read by the worker beside the picture; staged as the picture's value of this kind
    (`ImageAnnotations.values`).

    Args:
      path: where it is (local or gs://).
      size: its size in bytes, from the listing.
      name: how messages name it (its path under the dataset's root).
    """

    path: str
    size: int
    name: str

    def value(self) -> list[Json]:
        """Its staged form, the picture's value of this kind."""
        return [self.path, self.size, self.name]


def mask_file(annotations: ImageAnnotations | None) -> MaskFile | None:
    """The picture's mask file (None: it has none, or its mask is drawn from shapes)."""
    found = annotations.values.get("class_mask") if annotations is not None else None
    return MaskFile(*found) if isinstance(found, list) else None


@dataclass(frozen=True, slots=True)
class DrawnShapes:
    """A picture's class mask drawn from outlines and run lengths (polygons of a labelling tool's
    export, YOLO's segmentation lines) rather than read from a mask file: each shape's pixels
    take its value, in order, so a later shape covers an earlier one (the format decides the
    order: CVAT's `z_order`, labelme2voc's file order, Ultralytics' largest first). Pixels no
    shape covers are class 0 (background). The coordinates are the picture's
    `ImageAnnotations` frame: pixels of its declared size, or fractions when `normalized`.

    Args:
      shapes: (value, shape) pairs: a class id, or the run's ignore value (`__ignore__`).
    """

    shapes: tuple[tuple[int, Polygons | RunLengths], ...]

    def value(self) -> JsonObject:
        """Its staged form, the picture's value of this kind."""
        return {"shapes": [[value, mask_row(shape)] for value, shape in self.shapes]}

    def painted(self, width: int, height: int, normalized: bool, dtype: str = "uint8") -> np.ndarray:
        """The class ids of a `width` x `height` picture (in the run's mask `dtype`), every shape
        drawn in turn."""
        ids = np.zeros((height, width), dtype=dtype)
        for value, shape in self.shapes:
            ids[np.asarray(rasterize_mask(shape, width, height, normalized)) > 0] = value
        return ids


def drawn_shapes(annotations: ImageAnnotations | None) -> DrawnShapes | None:
    """The picture's shapes to draw (None: its mask is a file, or it has none)."""
    found = annotations.values.get("class_mask") if annotations is not None else None
    if not isinstance(found, dict):
        return None
    shapes = []
    for value, row in found["shapes"]:
        shape = mask_from_row(row)
        assert shape is not None
        shapes.append((int(value), shape))
    return DrawnShapes(tuple(shapes))


Polygons: TypeAlias = tuple[Polygon, ...]

# The most values a reject's detail names.
_SHOWN = 8
# (value, pixels) of every value a mask holds, ascending: what the tally counts of a record's mask.
PixelCounts: TypeAlias = tuple[tuple[int, int], ...]


@dataclass(frozen=True)
class PlacedMask:
    """A record's class-id mask and its facts.

    Args:
      png: the mask as stored (an 8-bit PNG, or a 16-bit one in a run of `MaskRule.dtype`
        uint16; the stored image's size).
      pixels: (value, pixels) of every value it holds, the ignore value's included, ascending;
        () for a picture without a mask file.
      changes: change codes the mask made (`mask_from_colours`).
    """

    png: bytes
    pixels: PixelCounts
    changes: tuple[str, ...] = ()


def class_ids(data: bytes, rule: MaskRule, name: str) -> tuple[np.ndarray, tuple[str, ...]]:
    """The mask file's class ids as a (height, width) array of the run's mask type
    (`MaskRule.dtype`) in its own frame, and the change codes its reading made; raises `Reject`
    for a file that is not a mask of this rule."""
    array = mask_values(data, name)
    changes: tuple[str, ...] = ()
    if array.ndim == 3:  # colours
        rgb = array[..., :3]
        if (rgb[..., 0] == rgb[..., 1]).all() and (rgb[..., 1] == rgb[..., 2]).all():
            array = rgb[..., 0]
        else:
            array = _from_colours(rgb, rule, name)
            changes = (reasons.CLASS_MASK_FROM_COLOURS.code,)
    if rule.remap:
        array = _remapped(array, rule.remap)
    return _checked(array, rule, name), changes


def _from_colours(rgb: np.ndarray, rule: MaskRule, name: str) -> np.ndarray:
    """Colours -> class ids through the palette (the ignore colours -> the ignore value)."""
    if not rule.palette:
        raise Reject(
            reasons.CLASS_MASK_COLOURS,
            f"{name} holds colours, not class ids, and the dataset declares no palette to map them",
        )
    packed = (rgb[..., 0].astype(np.uint32) << 16) | (rgb[..., 1].astype(np.uint32) << 8) | rgb[..., 2]
    table = {(r << 16) | (g << 8) | b: index for index, (r, g, b) in enumerate(rule.palette)}
    if rule.ignore is not None:
        table |= {(r << 16) | (g << 8) | b: rule.ignore for r, g, b in rule.palette_ignore}
    colours, inverse = np.unique(packed, return_inverse=True)
    unknown = [int(c) for c in colours if int(c) not in table]
    if unknown:
        shown = ", ".join(f"({c >> 16}, {(c >> 8) & 255}, {c & 255})" for c in unknown[:_SHOWN])
        more = f" and {len(unknown) - _SHOWN} more" if len(unknown) > _SHOWN else ""
        raise Reject(
            reasons.CLASS_MASK_COLOURS, f"{name} holds colours no class of the palette has: {shown}{more}"
        )
    ids = np.array([table[int(c)] for c in colours], dtype=rule.dtype)
    return ids[inverse].reshape(packed.shape)


def _remapped(array: np.ndarray, remap: Sequence[tuple[int, int]]) -> np.ndarray:
    """The values through the remap, in one pass over the pixels (a lookup table: Cityscapes'
    34 label ids are 34 pairs)."""
    if array.dtype != np.uint8:  # a 16- or 32-bit mask: its values above 255 are named later
        out = array.copy()
        for before, after in remap:
            out[array == before] = after
        return out
    table = np.arange(256, dtype=np.uint8)
    for before, after in remap:
        table[before] = after
    return table[array]


def _checked(array: np.ndarray, rule: MaskRule, name: str) -> np.ndarray:
    """The values in the run's mask type, each a class id or the ignore value."""
    values = np.unique(array)
    wrong = [int(v) for v in values if (int(v) >= rule.classes or int(v) < 0) and int(v) != rule.ignore]
    if wrong:
        shown = ", ".join(map(str, wrong[:_SHOWN])) + (
            f" and {len(wrong) - _SHOWN} more" if len(wrong) > _SHOWN else ""
        )
        ignore = f" or the ignore value {rule.ignore}" if rule.ignore is not None else ""
        raise Reject(
            reasons.CLASS_MASK_UNKNOWN_VALUE,
            f"{name} holds {shown}: class ids are 0 to {rule.classes - 1}{ignore}",
        )
    return array.astype(rule.dtype, copy=False)


def place_class_mask(data: bytes, rule: MaskRule, transform: PixelTransform, name: str) -> PlacedMask:
    """The mask file as its record stores it: read (`class_ids`), moved as the picture was, and
    encoded; raises `Reject` for a mask the picture cannot be stored with."""
    ids, changes = class_ids(data, rule, name)
    return placed_ids(ids, rule, transform, name, changes)


def place_drawn(
    shapes: DrawnShapes, annotations: ImageAnnotations, rule: MaskRule, transform: PixelTransform
) -> PlacedMask:
    """Shapes drawn into class ids at the size the source declares (the stored picture's when
    it declares none), then placed as a mask file of that size would be."""
    width = annotations.width or transform.stored_width
    height = annotations.height or transform.stored_height
    ids = shapes.painted(width, height, annotations.normalized, rule.dtype)
    return placed_ids(ids, rule, transform, f"the shapes of {annotations.source_id}", ())


def placed_ids(
    ids: np.ndarray, rule: MaskRule, transform: PixelTransform, name: str, changes: tuple[str, ...]
) -> PlacedMask:
    """Class ids in the stored picture's frame or the upright one (told by their size), moved as
    the picture was and encoded; raises `Reject` when their size fits neither frame."""
    try:
        mask = placed_label_image(_label_image(ids), transform, rule.fill)
    except ValueError as error:
        raise Reject(reasons.CLASS_MASK_SIZE_MISMATCH, f"{name} {error}") from None
    return PlacedMask(encode_mask_png(mask), pixel_counts(np.asarray(mask)), changes)


def _label_image(ids: np.ndarray) -> Image.Image:
    """Class ids as the Pillow image that moves with the picture: mode L (8 bits), or I;16, which
    Pillow turns, resizes, pads and saves as a 16-bit PNG as it does L."""
    if ids.dtype == np.uint8:
        return Image.fromarray(ids, mode="L")
    return Image.fromarray(ids.astype(np.uint16, copy=False))


def empty_mask(rule: MaskRule, width: int, height: int) -> PlacedMask:
    """A picture without a mask file, kept (`--unannotated keep`): every pixel the ignore value
    (0 where the rule has none), so every record parses alike; no pixel counts (`()`: the tally
    counts it as a picture without a mask)."""
    mask = Image.new(_MODES[rule.dtype], (width, height), rule.fill)
    return PlacedMask(encode_mask_png(mask), ())


def decode_class_mask(encoded: bytes, dtype: str = "uint8") -> np.ndarray:
    """`[height, width]` class ids from a segmentation record's mask PNG, in the run's mask type
    (`stored_dtype`: uint8, or uint16 where its ids or ignore value pass 255), never scaled."""
    with Image.open(io.BytesIO(encoded), formats=("PNG",)) as mask:
        return np.array(mask, dtype=dtype)


def mask_target(ids: np.ndarray, image_size: tuple[int, int] | None) -> np.ndarray:
    """A record's class ids as PyTorch's losses take them (`cross_entropy`'s target, torchvision's
    segmentation references): int64 `[height, width]`, stretched to `image_size=(height, width)`
    by the nearest neighbour as the picture is stretched (a value never blends into another)."""
    if image_size is not None and ids.shape != tuple(image_size):
        height, width = image_size
        ids = np.asarray(_label_image(ids).resize((width, height), Image.Resampling.NEAREST))
    return ids.astype(np.int64)


class _MaskTarget(TfTarget):
    """`(image, mask)`: uint8 (or, in a run of 16-bit masks, uint16) [height, width, 1] class ids
    and the ignore value, moved with the picture by nearest neighbour, a pad's margins holding
    the ignore value (never class 0)."""

    def __init__(self, context: ReadContext, options: TargetOptions) -> None:
        section = context.section
        ignore = section.ignore if isinstance(section, SegmentationSummary) else None
        self.fill = ignore if ignore is not None else 0
        self.key = key_of(context.layout, "mask")
        self.dtype = stored_dtype(context.layout)
        self.options = options

    def pair(
        self, record: dict[str, Tensor], image: Tensor, source_hw: Tensor, fit: PictureFit
    ) -> TfTargetPair:
        import tensorflow as tf

        dtype = tf.as_dtype(self.dtype)
        mask = tf.io.decode_png(record[self.key], channels=1, dtype=dtype)
        size = self.options.image_size
        if size is None:
            return image, mask
        if not self.options.pad:
            return image, fit.fit(mask, 1, method="nearest")
        shifted = tf.cast(mask, tf.int32) + 1  # 0 is the margin resize_with_pad adds
        resized = tf.image.resize_with_pad(shifted, size[0], size[1], method="nearest")
        resized = tf.cast(tf.round(resized), tf.int32)
        fitted = tf.cast(tf.where(resized == 0, self.fill, resized - 1), dtype)
        fitted.set_shape([size[0], size[1], 1])
        return image, fitted


class _MaskChecks(Checks[bytes]):
    """A segmentation record's mask: one channel, the picture's size, the bit depth summary.json
    says (`mask_dtype`), every value a class id or the ignore value; its pixels counted against
    summary.json's (where every picture had a mask)."""

    def __init__(self, class_names: tuple[str, ...], section: SegmentationSummary | None) -> None:
        self.names = class_names
        self.section = section
        self.dtype = section.mask_dtype if section is not None else "uint8"
        self.pixels: Counter[int] = Counter()

    def record(
        self, facts: ParsedRecord, shape: tuple[int, ...], where: str, errors: list[str]
    ) -> Checked[bytes]:
        import tensorflow as tf

        png = bytes(facts["mask"])
        bits = _png_bits(png)
        if bits is not None and bits != np.dtype(self.dtype).itemsize * 8:
            errors.append(f"{where}: its mask is a PNG of {bits} bits; summary.json says {self.dtype}")
            return Checked((), "", png)
        try:
            mask = tf.io.decode_png(png, channels=0, dtype=tf.as_dtype(self.dtype)).numpy()
        except tf.errors.InvalidArgumentError as error:
            errors.append(f"{where}: its mask does not decode: {tf_message(error)}")
            return Checked((), "", png)
        if mask.shape[2] != 1 or mask.shape[:2] != shape[:2]:
            errors.append(f"{where}: its mask is {mask.shape}, the image {shape[:2]} with one channel")
            return Checked((), "", png)
        values, counts = np.unique(mask, return_counts=True)
        names = self.names
        ignore = self.section.ignore if self.section is not None else None
        wrong = [int(v) for v in values if int(v) >= len(names) and int(v) != ignore]
        if wrong:
            errors.append(f"{where}: its mask holds {wrong}, not class ids (0..{len(names) - 1})")
        self.pixels.update({int(v): int(n) for v, n in zip(values, counts, strict=True)})
        classes = tuple(names[int(v)] for v in values if int(v) < len(names))
        return Checked(classes, "|".join(classes), png)

    def against_summary(self) -> list[str]:
        section = self.section
        if section is None or section.pictures_without_mask:
            return []
        errors = []
        for index, (name, counts) in enumerate(section.per_class.items()):
            if self.pixels[index] != counts["pixels"]:
                errors.append(
                    f"class {name}: {self.pixels[index]} pixels read, summary.json says {counts['pixels']}"
                )
        return errors


def _png_bits(png: bytes) -> int | None:
    """A PNG's bit depth per sample, from its header (None: no PNG header)."""
    if len(png) < 25 or not png.startswith(b"\x89PNG\r\n\x1a\n") or png[12:16] != b"IHDR":
        return None
    return png[24]


def draw_class_mask(
    thumb: Image.Image, png: bytes, palette: Sequence[Sequence[int]], ignore: int | None
) -> Image.Image:
    """`thumb` with a segmentation record's class ids laid over it in the dataset's palette (class
    id i in `palette[i]`, any number of classes: a 16-bit mask's ids past 255 too; an id past
    the palette in ink); the ignore value's pixels are left as the picture shows them."""
    try:
        with Image.open(io.BytesIO(png), formats=("PNG",)) as mask:
            ids = np.asarray(mask.resize(thumb.size, Image.Resampling.NEAREST)).astype(np.int64)
    except Exception:
        return thumb
    colours = palette_colours(palette)
    if ids.size and int(ids.max()) >= len(colours):
        colours += [INK] * (int(ids.max()) + 1 - len(colours))
    table = np.array([colour[:3] for colour in colours], dtype=np.uint8)
    overlay = Image.fromarray(table[ids])  # uint8 [H, W, 3]: RGB
    alpha = np.where(ids == ignore, 0, int(255 * MASK_OPACITY)).astype(np.uint8)
    thumb = thumb.convert("RGB")
    thumb.paste(overlay, (0, 0), Image.fromarray(alpha))
    return thumb


def pixel_counts(ids: np.ndarray) -> PixelCounts:
    """(value, pixels) of every value present, ascending."""
    counts = np.bincount(ids.ravel(), minlength=256)
    return tuple((int(value), int(counts[value])) for value in np.flatnonzero(counts))


class ClassPixels(TypedDict):
    """One class's pixels, its share of the labelled pixels and the records whose mask holds it
    (`SegmentationSummary.per_class`)."""

    pixels: int
    share: float
    pictures: int


@dataclass
class SegmentationSummary(Section):
    """A segmentation run's masks (summary.json's `segmentation`): what every class covers, and
    what the records hold.

    `per_class` gives each class's pixels, its share of the labelled pixels (the ignore value's
    aside) and the records whose mask holds it; `ignored_pixels` the ignore value's pixels;
    `pictures_without_mask` the records stored with a mask of the ignore value alone (no mask
    file, `--unannotated keep`); `mask_dtype` the type of every stored mask, written only where
    it is uint16 (a run of 8-bit masks writes the section as it always has)."""

    kind: str  # the annotations' format (summary.json's key)
    ignore: int | None
    per_class: dict[str, ClassPixels] = field(default_factory=dict)
    ignored_pixels: int = 0
    pictures_without_mask: int = 0
    unmatched_masks: int = 0
    class_ids: str = "from 0, as labels.txt lists them: a mask's value is its pixel's class id"
    mask_key: str = "image/segmentation/class/encoded (a single-channel PNG the picture's size)"
    found_at: str = ""
    palette: list[list[int]] = field(default_factory=list)  # class id i's colour, for pictures
    mask_dtype: str = "uint8"  # uint16: class ids or the ignore value pass 255, 16-bit PNGs

    def to_json(self) -> JsonObject:
        """The section's keys; `mask_dtype` only where the masks are 16-bit."""
        data = super().to_json()
        if self.mask_dtype == "uint8":
            del data["mask_dtype"]
        return data

    def rows(self) -> list[tuple[str, str]]:
        """Where the masks came from, their type where it is 16 bits, and each class's share of
        the pixels."""
        rows = [("masks", self.found_at)] if self.found_at else []
        if self.mask_dtype != "uint8":
            rows.append(("mask values", f"{self.mask_dtype}: 16-bit PNGs (ids or the ignore value past 255)"))
        rows.append(("pixels per class", "share of labelled pixels, in pictures"))
        rows += [(f"  {name}", f"{n['share']:.1%} in {n['pictures']}") for name, n in self.per_class.items()]
        if self.ignore is not None:
            rows.append((f"ignored ({self.ignore})", f"{self.ignored_pixels} pixels"))
        if self.pictures_without_mask:
            rows.append(("pictures without a mask", f"{self.pictures_without_mask} (stored all ignored)"))
        if self.unmatched_masks:
            rows.append(
                ("masks without a picture", f"{self.unmatched_masks} (annotations_without_image.jsonl)")
            )
        return rows

    def merged(self, new: Section, grown: Grown) -> SegmentationSummary:
        """Pixels and pictures per class summed, shares of the labelled pixels recomputed."""
        assert isinstance(new, SegmentationSummary)
        names = list(dict.fromkeys([*self.per_class, *new.per_class]))
        none: ClassPixels = {"pixels": 0, "share": 0.0, "pictures": 0}
        pixels = {
            n: self.per_class.get(n, none)["pixels"] + new.per_class.get(n, none)["pixels"] for n in names
        }
        labelled = sum(pixels.values())
        per_class: dict[str, ClassPixels] = {
            name: {
                "pixels": pixels[name],
                "share": round(pixels[name] / labelled, 6) if labelled else 0.0,
                "pictures": self.per_class.get(name, none)["pictures"]
                + new.per_class.get(name, none)["pictures"],
            }
            for name in names
        }
        return dataclasses.replace(
            new,
            per_class=per_class,
            ignored_pixels=self.ignored_pixels + new.ignored_pixels,
            pictures_without_mask=self.pictures_without_mask + new.pictures_without_mask,
        )


@dataclass
class ClassMaskTally(KindTally[PixelCounts]):
    """A segmentation run's masks: pixels per value (class ids and the ignore value), records that
    hold each value, and records whose picture had no mask file (stored all ignore)."""

    pixels: Counter[int] = field(default_factory=Counter)
    pictures: Counter[int] = field(default_factory=Counter)
    missing: int = 0

    def add(self, facts: PixelCounts, split: str, labels: LabelCounts) -> None:
        if not facts:  # no mask file (`empty_mask`)
            self.missing += 1
            return
        for value, count in facts:
            self.pixels[value] += count
            self.pictures[value] += 1


class ClassMaskKind(LabelKind[MaskRule, bytes, PixelCounts, ClassMaskTally, SegmentationSummary, bytes]):
    """A mask file per picture, read by the run's `MaskRule` and moved with the pixels (nearest
    neighbour, a pad's margins the ignore value)."""

    name = "class_mask"
    options = ("ignore_value", "train_ids")
    keys_named = "DeepLab's and Model Garden's keys"
    names_classes = True

    def key_groups(self, setting: MaskRule | None) -> tuple[str, ...]:
        """The mask's keys; read as 16-bit PNGs where the run's ids or ignore value pass 255."""
        wide = setting is not None and setting.dtype == "uint16"
        return (MASK16_GROUP,) if wide else ("class_mask",)

    def section_groups(self, section: SegmentationSummary) -> tuple[str, ...]:
        return (MASK16_GROUP,) if section.mask_dtype == "uint16" else ("class_mask",)

    def encoders(self) -> Mapping[str, Encoder]:
        return {"mask": lambda fields: fields.labels["class_mask"], "mask_format": lambda fields: "png"}

    def refusal(self, option: str, run: set[str]) -> str | None:
        """Its options read masks: a run of another task has none."""
        if self.name in run:
            return None
        needs = next(t.name for t in tasks.TASKS.values() if self.name in t.kinds)
        return f"reads masks: it needs --task {needs}"

    def read_setting(self, staged: Json) -> MaskRule:
        return MaskRule.from_row(staged)

    def place(
        self,
        item: PlannedInput,
        transform: PixelTransform,
        setting: MaskRule,
        placed: Mapping[str, AnyPlaced],
        read: FileReader,
    ) -> Placed[bytes, PixelCounts]:
        """The picture's class-id mask as its record stores it; a picture without a mask file gets
        one of the ignore value. Raises `Reject` for a mask file that cannot be read or is no mask
        of the run's rule (the picture itself was fine)."""
        found = mask_file(item.annotations)
        shapes = drawn_shapes(item.annotations)
        if shapes is not None and item.annotations is not None:
            mask = place_drawn(shapes, item.annotations, setting, transform)
        elif found is None:
            mask = empty_mask(setting, transform.width, transform.height)
        else:
            try:
                data = read(found.path, found.size)
            except Exception as error:  # a mask gone since listing, a flaky remote read
                detail = f"{found.name}: {type(error).__name__}: {error}"
                raise Reject(reasons.CLASS_MASK_UNREADABLE, detail) from None
            mask = place_class_mask(data, setting, transform, found.name)
        return Placed(mask.png, mask.pixels, mask.changes)

    def new_tally(self) -> ClassMaskTally:
        return ClassMaskTally()

    section_key = "segmentation"
    section_type = SegmentationSummary

    def plan_facts(self, annotated: Annotated) -> JsonObject:
        """The rule that reads the run's mask files (its workers' setting), and the colour of each
        class id on the contact sheet."""
        rule = annotated.mask_rule
        assert rule is not None
        return {"rule": rule.to_row(), "palette": [list(colour) for colour in annotated.palette]}

    def worker_setting(self, facts: JsonObject | None, class_names: tuple[str, ...]) -> Json:
        assert facts is not None  # a segmentation run's plan has them (`plan_facts`)
        return facts["rule"]

    def section(
        self, facts: JsonObject | None, tally: ClassMaskTally, inputs: SectionInputs
    ) -> SegmentationSummary:
        assert facts is not None
        ignore = facts["rule"]["ignore"]
        dtype = MaskRule.from_row(facts["rule"]).dtype
        labelled = sum(n for value, n in tally.pixels.items() if value != ignore)
        per_class: dict[str, ClassPixels] = {
            name: {
                "pixels": tally.pixels[index],
                "share": round(tally.pixels[index] / labelled, 6) if labelled else 0.0,
                "pictures": tally.pictures[index],
            }
            for index, name in enumerate(inputs.class_names)
        }
        return SegmentationSummary(
            kind=inputs.format,
            ignore=ignore,
            per_class=per_class,
            ignored_pixels=tally.pixels[ignore] if ignore is not None else 0,
            pictures_without_mask=tally.missing,
            unmatched_masks=inputs.unmatched_entries,
            class_ids="from 0, as labels.txt lists them: a mask's value is its pixel's class id"
            + (f"; {ignore} is ignored (not labelled)" if ignore is not None else ""),
            found_at=inputs.found_at,
            palette=facts["palette"],
            mask_dtype=dtype,
            mask_key=SegmentationSummary.mask_key
            if dtype == "uint8"
            else "image/segmentation/class/encoded (a single-channel 16-bit PNG the picture's size)",
        )

    def side_files(
        self, class_names: tuple[str, ...], facts: ByKind, dropped: tuple[DroppedObjectLine, ...]
    ) -> dict[str, str]:
        """dropped_objects.jsonl where shapes were left out of masks drawn from shapes (a box,
        a line: `not_drawn`), one line each; a run of mask files writes none."""
        if not dropped:
            return {}
        return {DROPPED_OBJECTS_FILE: "".join(line.to_json() + "\n" for line in sorted(dropped))}

    target_needs_image = True
    held_as = "masks"

    def tf_target(self, context: ReadContext, options: TargetOptions, channels: int | None) -> TfTarget:
        return _MaskTarget(context, options)

    def numpy_fields(self, record: ParsedRecord, layout: RecordLayout) -> None:
        """`mask` decoded to its class ids (uint8, or uint16 in a run of 16-bit masks), `mask_png`
        the stored PNG's bytes."""
        record["mask_png"] = record["mask"]
        record["mask"] = decode_class_mask(record["mask_png"], stored_dtype(layout))

    def torch_target(self, record: ParsedRecord, image_size: tuple[int, int] | None) -> TorchValue:
        """The class ids as an int64 tensor `[height, width]` (`mask_target`): what
        `cross_entropy(..., ignore_index=IGNORE)` takes, every stored value exact."""
        import torch

        return torch.from_numpy(mask_target(record["mask"], image_size))

    def checks(
        self, class_names: tuple[str, ...] | None, section: SegmentationSummary | None
    ) -> Checks[bytes]:
        found = section if isinstance(section, SegmentationSummary) else None
        return _MaskChecks(class_names or (), found)

    def draw(self, thumb: Image.Image, drawn: bytes | None, sheet: Sheet) -> Image.Image:
        """The class ids in the dataset's palette (summary.json's), the ignore value left clear."""
        section = sheet.sections.get(self.name)
        if drawn is None or not isinstance(section, SegmentationSummary):
            return thumb
        return draw_class_mask(thumb, drawn, section.palette, section.ignore)

    def label_counts(self, tally: ClassMaskTally, class_names: tuple[str, ...]) -> Counter[str | None]:
        """A class's records are those whose mask holds it."""
        return Counter({class_names[v]: n for v, n in tally.pictures.items() if v < len(class_names)})


CLASS_MASK = ClassMaskKind()
