"""The class mask: a class id per pixel of the picture (segmentation). A segmentation run's mask
file becomes the class-id mask a record stores: read, checked against the run's `MaskRule`, moved
as the picture was, and encoded as the single-channel PNG DeepLab and TF Model Garden read from
`image/segmentation/class/encoded` (the table's `class_mask` group).

Which values are class ids:

- a palette PNG (Pascal VOC, labelme2voc): its indices, whatever colours the palette shows;
- an 8-bit grey or 1-bit PNG (Cityscapes' `labelIds`, ADE20K, CamVid): its values;
- a 16- or 32-bit grey PNG: its values, which must fit the classes;
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
from beam_tfrecord.edges import ByKind, Json, JsonObject, ParsedRecord, Tensor
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
from beam_tfrecord.labels.drawing import MASK_OPACITY, Sheet, palette_colours
from beam_tfrecord.labels.geometry import PixelTransform, encode_mask_png, placed_label_image, rasterize_mask
from beam_tfrecord.names import DROPPED_OBJECTS_FILE
from beam_tfrecord.reasons import Reject

__all__ = [
    "CLASS_MASK",
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
    "pixel_counts",
    "place_class_mask",
    "place_drawn",
    "placed_ids",
]


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

    def painted(self, width: int, height: int, normalized: bool) -> np.ndarray:
        """The class ids of a `width` x `height` picture (uint8), every shape drawn in turn."""
        ids = np.zeros((height, width), dtype=np.uint8)
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
      png: the mask as stored (mode L PNG, the stored image's size).
      pixels: (value, pixels) of every value it holds, the ignore value's included, ascending;
        () for a picture without a mask file.
      changes: change codes the mask made (`mask_from_colours`).
    """

    png: bytes
    pixels: PixelCounts
    changes: tuple[str, ...] = ()


def class_ids(data: bytes, rule: MaskRule, name: str) -> tuple[np.ndarray, tuple[str, ...]]:
    """The mask file's class ids as a uint8 (height, width) array in its own frame, and the change
    codes its reading made; raises `Reject` for a file that is not a mask of this rule."""
    try:
        with Image.open(io.BytesIO(data)) as image:
            image.load()
            mode = image.mode
            array = np.asarray(image)
    except Exception as error:  # any decoder error: the mask, not the picture, is at fault
        raise Reject(reasons.CLASS_MASK_UNREADABLE, f"{name}: {type(error).__name__}: {error}") from None
    changes: tuple[str, ...] = ()
    if mode in ("RGB", "RGBA"):
        rgb = array[..., :3]
        if (rgb[..., 0] == rgb[..., 1]).all() and (rgb[..., 1] == rgb[..., 2]).all():
            array = rgb[..., 0]
        else:
            array = _from_colours(rgb, rule, name)
            changes = (reasons.CLASS_MASK_FROM_COLOURS.code,)
    elif mode == "LA":
        array = array[..., 0]
    elif mode == "1":
        array = array.astype(np.uint8)
    elif mode not in ("P", "L", "I", "I;16", "I;16B", "I;16L"):
        raise Reject(reasons.CLASS_MASK_UNREADABLE, f"{name}: a {mode} image is not a mask of class ids")
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
    ids = np.array([table[int(c)] for c in colours], dtype=np.uint8)
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
    """The values as uint8, each a class id or the ignore value."""
    values = np.unique(array)
    wrong = [int(v) for v in values if int(v) >= rule.classes and int(v) != rule.ignore]
    if wrong:
        shown = ", ".join(map(str, wrong[:_SHOWN])) + (
            f" and {len(wrong) - _SHOWN} more" if len(wrong) > _SHOWN else ""
        )
        ignore = f" or the ignore value {rule.ignore}" if rule.ignore is not None else ""
        raise Reject(
            reasons.CLASS_MASK_UNKNOWN_VALUE,
            f"{name} holds {shown}: class ids are 0 to {rule.classes - 1}{ignore}",
        )
    return array.astype(np.uint8, copy=False)


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
    ids = shapes.painted(width, height, annotations.normalized)
    return placed_ids(ids, rule, transform, f"the shapes of {annotations.source_id}", ())


def placed_ids(
    ids: np.ndarray, rule: MaskRule, transform: PixelTransform, name: str, changes: tuple[str, ...]
) -> PlacedMask:
    """Class ids in the stored picture's frame or the upright one (told by their size), moved as
    the picture was and encoded; raises `Reject` when their size fits neither frame."""
    try:
        mask = placed_label_image(Image.fromarray(ids, mode="L"), transform, rule.fill)
    except ValueError as error:
        raise Reject(reasons.CLASS_MASK_SIZE_MISMATCH, f"{name} {error}") from None
    return PlacedMask(encode_mask_png(mask), pixel_counts(np.asarray(mask)), changes)


def empty_mask(rule: MaskRule, width: int, height: int) -> PlacedMask:
    """A picture without a mask file, kept (`--unannotated keep`): every pixel the ignore value
    (0 where the rule has none), so every record parses alike; no pixel counts (`()`: the tally
    counts it as a picture without a mask)."""
    mask = Image.new("L", (width, height), rule.fill)
    return PlacedMask(encode_mask_png(mask), ())


def decode_class_mask(encoded: bytes) -> np.ndarray:
    """uint8 `[height, width]` class ids from a segmentation record's mask PNG."""
    with Image.open(io.BytesIO(encoded), formats=("PNG",)) as mask:
        return np.array(mask, dtype=np.uint8)


class _MaskTarget(TfTarget):
    """`(image, mask)`: uint8 [height, width, 1] class ids and the ignore value, moved with the
    picture by nearest neighbour, a pad's margins holding the ignore value (never class 0)."""

    def __init__(self, context: ReadContext, options: TargetOptions) -> None:
        section = context.section
        ignore = section.ignore if isinstance(section, SegmentationSummary) else None
        self.fill = ignore if ignore is not None else 0
        self.key = key_of(context.layout, "mask")
        self.options = options

    def pair(
        self, record: dict[str, Tensor], image: Tensor, source_hw: Tensor, fit: PictureFit
    ) -> TfTargetPair:
        import tensorflow as tf

        mask = tf.io.decode_png(record[self.key], channels=1)
        size = self.options.image_size
        if size is None:
            return image, mask
        if not self.options.pad:
            return image, fit.fit(mask, 1, method="nearest")
        shifted = tf.cast(mask, tf.int32) + 1  # 0 is the margin resize_with_pad adds
        resized = tf.image.resize_with_pad(shifted, size[0], size[1], method="nearest")
        resized = tf.cast(tf.round(resized), tf.int32)
        fitted = tf.cast(tf.where(resized == 0, self.fill, resized - 1), tf.uint8)
        fitted.set_shape([size[0], size[1], 1])
        return image, fitted


class _MaskChecks(Checks[bytes]):
    """A segmentation record's mask: one channel, the picture's size, every value a class id or
    the ignore value; its pixels counted against summary.json's (where every picture had a mask)."""

    def __init__(self, class_names: tuple[str, ...], section: SegmentationSummary | None) -> None:
        self.names = class_names
        self.section = section
        self.pixels: Counter[int] = Counter()

    def record(
        self, facts: ParsedRecord, shape: tuple[int, ...], where: str, errors: list[str]
    ) -> Checked[bytes]:
        import tensorflow as tf

        png = bytes(facts["mask"])
        try:
            mask = tf.io.decode_png(png, channels=0).numpy()
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


def draw_class_mask(
    thumb: Image.Image, png: bytes, palette: Sequence[Sequence[int]], ignore: int | None
) -> Image.Image:
    """`thumb` with a segmentation record's class ids laid over it in the dataset's palette (class
    id i in `palette[i]`); the ignore value's pixels are left as the picture shows them."""
    try:
        with Image.open(io.BytesIO(png), formats=("PNG",)) as mask:
            ids = mask.convert("L").resize(thumb.size, Image.Resampling.NEAREST)
    except Exception:
        return thumb
    overlay = Image.new("P", thumb.size)
    overlay.putpalette([channel for colour in palette_colours(palette) for channel in colour[:3]])
    overlay.putdata(list(ids.getdata()))
    alpha = ids.point(lambda v: 0 if v == ignore else int(255 * MASK_OPACITY))
    thumb = thumb.convert("RGB")
    thumb.paste(overlay.convert("RGB"), (0, 0), alpha)
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
    file, `--unannotated keep`)."""

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

    def rows(self) -> list[tuple[str, str]]:
        """Where the masks came from, and each class's share of the pixels."""
        rows = [("masks", self.found_at)] if self.found_at else []
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
        return ("class_mask",)

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
        """`mask` decoded to its class ids, `mask_png` the stored PNG's bytes."""
        record["mask_png"] = record["mask"]
        record["mask"] = decode_class_mask(record["mask_png"])

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
