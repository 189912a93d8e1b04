"""One image's annotated objects placed in the image its record stores: what the worker calls once
it knows what was done to the pixels (`normalize.EncodedImage.transform`).

Every object of the source ends as one `StoredObject` (box normalized to the stored image, area
in its pixels, flags, optional mask PNG, notes on what changed) or one `DroppedObject` with a
reason code (a `reasons` drop), so `annotated = stored + dropped` holds per image.

**Which frame the source drew in.** `ImageAnnotations` says its boxes are in the stored
picture's frame (before the EXIF orientation). A source that declares the image's size tells us
more: the rule, in order, is

1. no declared size (YOLO; VOC's `<size>` of 0), or one that equals both the stored and the
   upright size (no quarter turn, or a square picture): `ambiguous_frame` decides (default
   "stored", the contract of `elements`);
2. the stored size (width, height as the file stores them): the stored frame;
3. the upright size (the stored size turned by the EXIF orientation 5 to 8): the annotator
   worked on the upright picture, as a browser or OpenCV shows it; the boxes are taken in that
   frame and only the resize moves them;
4. anything else (a source made for a resized copy, or for another picture): every object is
   dropped as `size_mismatch`, since neither frame can be trusted. The worker should reject the
   image rather than store it as a negative.

**Area.** `image/object/area` is in the stored image's pixels, as Model Garden's decoder reads
it (it falls back to the box's pixel area when the key is absent). A source `area` (COCO's mask
area) is scaled with the pixels and, when clipping or a crop removed part of the object's box,
multiplied by the part of the box that was kept; an object without one gets its box's area in
the stored image's pixels. The mask PNG's own pixel count can differ by the raster's edge pixels.

**Clipping.** Boxes are clipped to the source picture, then to the stored image (a crop may cut
them). An edge moved by more than `CLIP_TOLERANCE_PX` adds a note (`clipped`, `cropped`);
less is rounding (COCO's `x + width` often passes the edge by a fraction of a pixel), clipped
without one.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from math import isfinite
from typing import Literal, NamedTuple

from PIL import Image

from beam_tfrecord import reasons
from beam_tfrecord.elements import DroppedObject, ImageAnnotations, ObjectBox, RunLengths, StoredObject
from beam_tfrecord.labels import geometry
from beam_tfrecord.labels.geometry import BoxMapper, PixelTransform

__all__ = [
    "CLIP_TOLERANCE_PX",
    "DroppedObject",
    "Frame",
    "PlacedAnnotations",
    "StoredObject",
    "annotation_frame",
    "place_annotations",
    "size_mismatch_detail",
]

Frame = Literal["stored", "upright"]

# An edge moved by less than this (in the source's or the stored image's pixels) is rounding.
CLIP_TOLERANCE_PX = 0.5


@dataclass(frozen=True, slots=True)
class PlacedAnnotations:
    """An image's objects after placement, each object exactly once in `objects` or `dropped`.

    `frame` is the frame the source's coordinates were taken in (None when its declared size fits
    neither: every object is then dropped as `size_mismatch`)."""

    objects: tuple[StoredObject, ...]
    dropped: tuple[DroppedObject, ...]
    frame: Frame | None


def annotation_frame(
    annotations: ImageAnnotations, transform: PixelTransform, ambiguous_frame: Frame = "stored"
) -> Frame | None:
    """The frame the source's coordinates are in, by the rule of the module docstring; None when
    its declared size fits neither the stored nor the upright picture."""
    declared = (annotations.width, annotations.height)
    if not declared[0] or not declared[1]:
        return ambiguous_frame
    stored = (transform.stored_width, transform.stored_height)
    fits_stored, fits_upright = declared == stored, declared == transform.upright_size
    if fits_stored and fits_upright:
        return ambiguous_frame
    if fits_stored:
        return "stored"
    return "upright" if fits_upright else None


def size_mismatch_detail(annotations: ImageAnnotations, transform: PixelTransform) -> str:
    """The declared size against the picture's, when the two fit in neither frame."""
    upright = "" if transform.orientation == 1 else " ({}x{} upright)".format(*transform.upright_size)
    return (
        f"the source says {annotations.width}x{annotations.height}; the picture is "
        f"{transform.stored_width}x{transform.stored_height}{upright}"
    )


def place_annotations(
    annotations: ImageAnnotations,
    transform: PixelTransform,
    *,
    masks: bool = False,
    ambiguous_frame: Frame = "stored",
    class_ids: Mapping[str, int] | None = None,
) -> PlacedAnnotations:
    """The image's objects in the stored image: boxes clipped and normalized, areas in its pixels,
    and with `masks` one PNG per object moved as the pixels were. `transform` carries the decoded
    picture's size, against which the source's declared size is checked. `class_ids` gives each
    stored object its `class_id` (0 for a class it lacks), so it is built once, never copied."""
    frame = annotation_frame(annotations, transform, ambiguous_frame)
    if frame is None:
        detail = size_mismatch_detail(annotations, transform)
        dropped = tuple(
            DroppedObject(o.class_name, reasons.SIZE_MISMATCH.code, detail, o.source_ref)
            for o in annotations.objects
        )
        return PlacedAnnotations((), dropped, None)
    moved = transform if frame == "stored" else transform.upright()
    sizes = _Sizes.of(moved)
    map_box = moved.box_mapper()  # the transform's numbers once per image, not per box
    ids = class_ids or {}
    stored: list[StoredObject] = []
    dropped_objects: list[DroppedObject] = []
    for item in annotations.objects:
        outcome = _place_object(item, moved, annotations.normalized, masks, map_box, ids, sizes)
        if isinstance(outcome, StoredObject):
            stored.append(outcome)
        else:
            dropped_objects.append(outcome)
    return PlacedAnnotations(tuple(stored), tuple(dropped_objects), frame)


class _Sizes(NamedTuple):
    """A transform's numbers that every box of an image uses, looked up once per image: each
    attribute or property read per box (`scale` divides each time) cost more than the box's own
    arithmetic."""

    width: int  # the stored picture's
    height: int
    right: float  # the same, as the floats a box is clipped to
    bottom: float
    final_width: int  # the stored image's
    final_height: int
    final_right: float
    final_bottom: float
    scale_x: float
    scale_y: float

    @classmethod
    def of(cls, transform: PixelTransform) -> _Sizes:
        width, height = transform.stored_width, transform.stored_height
        final_width, final_height = transform.width, transform.height
        return cls(
            width, height, float(width), float(height),
            final_width, final_height, float(final_width), float(final_height), *transform.scale,
        )  # fmt: skip


def _place_object(
    item: ObjectBox,
    transform: PixelTransform,
    normalized: bool,
    masks: bool,
    map_box: BoxMapper,
    class_ids: Mapping[str, int],
    sizes: _Sizes,
) -> StoredObject | DroppedObject:
    """One object through clipping, the transform, the crop and (optionally) its mask.
    `map_box` is `transform.box_mapper()`, `sizes` its numbers (`_Sizes.of(transform)`)."""
    width, height = sizes.width, sizes.height
    box = (item.xmin, item.ymin, item.xmax, item.ymax)
    if not (isfinite(box[0]) and isfinite(box[1]) and isfinite(box[2]) and isfinite(box[3])):
        return _drop(item, reasons.INVALID_BOX, f"box {box}")
    if normalized:
        box = (box[0] * width, box[1] * height, box[2] * width, box[3] * height)
    xmin, ymin, xmax, ymax = box
    if xmax <= xmin or ymax <= ymin:
        return _drop(item, reasons.ZERO_AREA, f"box {_pixels(box)} in a {width}x{height} picture")
    if xmax <= 0 or ymax <= 0 or xmin >= width or ymin >= height:
        return _drop(item, reasons.OUTSIDE_IMAGE, f"box {_pixels(box)} in a {width}x{height} picture")
    notes = []
    # max(value, 0.0) and min(value, edge) as the builtins decide (the second argument only when
    # strictly greater or less), without a call each: this runs for every object of every image.
    right, bottom = sizes.right, sizes.bottom
    inside = (
        0.0 if xmin < 0.0 else xmin,
        0.0 if ymin < 0.0 else ymin,
        right if right < xmax else xmax,
        bottom if bottom < ymax else ymax,
    )
    if inside != box and _moved(box, inside):  # (a box inside the picture, as most are, equals it)
        notes.append(reasons.CLIPPED.code)

    mapped = map_box(*inside)
    right, bottom = sizes.final_right, sizes.final_bottom
    kept = (
        0.0 if mapped[0] < 0.0 else mapped[0],
        0.0 if mapped[1] < 0.0 else mapped[1],
        right if right < mapped[2] else mapped[2],
        bottom if bottom < mapped[3] else mapped[3],
    )
    if kept[2] <= kept[0] or kept[3] <= kept[1]:
        detail = f"box {_pixels(box)}, outside the crop window {_pixels(transform.window)}"
        return _drop(item, reasons.CROPPED_OUT, detail)
    if kept != mapped and _moved(mapped, kept):
        notes.append(reasons.CROPPED.code)

    mask_png = None
    if masks:
        if isinstance(item.mask, RunLengths) and (item.mask.width, item.mask.height) != (width, height):
            detail = f"run lengths of {item.mask.width}x{item.mask.height} for a {width}x{height} picture"
            return _drop(item, reasons.MASK_SIZE_MISMATCH, detail)
        try:
            mask = _stored_mask(item, transform, normalized, kept)
        except ValueError as error:
            return _drop(item, reasons.MASK_INVALID, str(error))
        if item.mask is None:
            notes.append(reasons.MASK_FROM_BOX.code)
        elif mask.getbbox() is None:
            notes.append(reasons.MASK_EMPTY.code)
        mask_png = geometry.encode_mask_png(mask)

    keypoints, outside = None, 0
    if item.keypoints is not None:
        keypoints, outside = _place_points(item.keypoints, transform, normalized, sizes)
        if outside:
            notes.append(reasons.POINTS_OUTSIDE.code)

    final_width, final_height = sizes.final_width, sizes.final_height
    area = _area(item, sizes, normalized, kept, mapped if inside == box else map_box(*box))
    # Positional, in the fields' order (a NamedTuple built from keywords costs a third more);
    # tests/test_geometry.py checks that each flag lands in its own field.
    return StoredObject(
        kept[0] / final_width, kept[1] / final_height, kept[2] / final_width, kept[3] / final_height,
        item.class_name, area, item.is_crowd, item.difficult, item.truncated, item.pose, mask_png,
        item.source_ref,
        tuple(code for code in reasons.codes("object_note") if code in notes) if notes else (),
        class_ids.get(item.class_name, 0), keypoints, outside,
    )  # fmt: skip


def _place_points(
    points: tuple[float, ...], transform: PixelTransform, normalized: bool, sizes: _Sizes
) -> tuple[tuple[float, ...], int]:
    """An object's keypoints in the stored image, as fractions of its size, and how many labelled
    points the picture's edge or the crop left outside (they are stored unlabelled: 0, 0, 0).
    Each moves as the pixel under it does (`PixelTransform.map_point`)."""
    placed: list[float] = []
    outside = 0
    width, height = sizes.right, sizes.bottom
    final_width, final_height = sizes.final_right, sizes.final_bottom
    for index in range(0, len(points), 3):
        x, y, v = points[index], points[index + 1], points[index + 2]
        if not v:
            placed += (0.0, 0.0, 0.0)
            continue
        if normalized:
            x, y = x * width, y * height
        if not (isfinite(x) and isfinite(y) and 0.0 <= x <= width and 0.0 <= y <= height):
            outside += 1
            placed += (0.0, 0.0, 0.0)
            continue
        x, y = transform.map_point(x, y)
        if not (0.0 <= x <= final_width and 0.0 <= y <= final_height):
            outside += 1
            placed += (0.0, 0.0, 0.0)
            continue
        placed += (x / final_width, y / final_height, float(v))
    return tuple(placed), outside


def _drop(item: ObjectBox, reason: reasons.Reason, detail: str) -> DroppedObject:
    return DroppedObject(item.class_name, reason.code, detail, item.source_ref)


def _stored_mask(
    item: ObjectBox, transform: PixelTransform, normalized: bool, kept: tuple[float, float, float, float]
) -> Image.Image:
    """The object's mask in the stored image; its kept box, filled, when the source has none."""
    if item.mask is None:
        mask = Image.new("L", (transform.width, transform.height), 0)
        left, top, right, bottom = (round(value) for value in kept)
        mask.paste(1, (left, top, right, bottom))
        return mask
    raster = geometry.rasterize_mask(item.mask, transform.stored_width, transform.stored_height, normalized)
    return geometry.transform_mask(raster, transform)


def _area(
    item: ObjectBox,
    sizes: _Sizes,
    normalized: bool,
    kept: tuple[float, float, float, float],
    whole: tuple[float, float, float, float],
) -> float:
    """The object's area in the stored image's pixels (rule in the module docstring). `whole` is
    its box before clipping, in the final image (what `map_box` gives: the box as it was mapped
    when nothing was clipped)."""
    kept_area = (kept[2] - kept[0]) * (kept[3] - kept[1])
    if item.area is None:
        return kept_area
    source_area = item.area * sizes.width * sizes.height if normalized else item.area
    whole_area = (whole[2] - whole[0]) * (whole[3] - whole[1])
    # A box too thin for its area to be a float (1e-51 by 1e-311 pixels) has nothing clipped worth
    # a share: its area is the source's, scaled, never a division by zero that fails the run.
    kept_share = min(1.0, kept_area / whole_area) if whole_area > 0 else 1.0
    area = source_area * sizes.scale_x * sizes.scale_y * kept_share
    # A source's area near the float limit overflows when the picture is scaled up: the kept
    # box's area then, never an infinity that no size bucket of the summary holds.
    return area if isfinite(area) else kept_area


def _moved(before: tuple[float, ...], after: tuple[float, ...]) -> bool:
    """Whether any edge of a box moved by more than rounding (both boxes have four edges)."""
    return (
        abs(before[0] - after[0]) > CLIP_TOLERANCE_PX
        or abs(before[1] - after[1]) > CLIP_TOLERANCE_PX
        or abs(before[2] - after[2]) > CLIP_TOLERANCE_PX
        or abs(before[3] - after[3]) > CLIP_TOLERANCE_PX
    )


def _pixels(box: tuple[float, ...]) -> str:
    return "(" + ", ".join(f"{value:g}" for value in box) + ")"
