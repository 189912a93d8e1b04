"""Class masks drawn from shapes: what a format whose files hold outlines (a labelling tool's
polygons and brush strokes, YOLO's segmentation lines) gives a segmentation run. The format
loads its objects as for detection, in the order they are to be drawn, and this module turns
them into each picture's `DrawnShapes` (`labels.class_mask`) with the run's class names and
`MaskRule`:

- class id 0 is the background, the pixels no shape covers: the format's own background class
  where its first class is one (`_background_`, labelme2voc's), else a class `background` put
  before the format's classes (YOLO's class 0 is a real class: its pixels are 1);
- a shape whose class is `__ignore__` (labelme2voc's) is drawn in the ignore value;
- `class_names` given fixes the ids (position = id); shapes of other classes are dropped
  `unknown_category`;
- an object with no outline (a box, a point) has nothing to fill: dropped `not_drawn`.

Plan-time only: the worker draws the shapes into the picture's frame (`class_mask.place_drawn`).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence

from beam_tfrecord import reasons
from beam_tfrecord.elements import ImageAnnotations, MaskRule, ObjectBox
from beam_tfrecord.labels.class_mask import DrawnShapes
from beam_tfrecord.plan.annotations.results import AnnotationSet, ObjectNote
from beam_tfrecord.plan.annotations.segmentation import checked_rule, mask_type_said
from beam_tfrecord.plan.annotations.segmentation_classes import voc_palette
from beam_tfrecord.plan.sources.base import LoadRequest, SourceError

__all__ = ["BACKGROUND", "BACKGROUND_NAMES", "IGNORE_NAMES", "class_masks_of", "mask_class_names"]

BACKGROUND = "background"
# A format's first class that already means "no object" (labelme2voc's labels.txt, VOC's).
BACKGROUND_NAMES = frozenset({"background", "_background_", "__background__"})
# Shapes of these classes are drawn in the ignore value (labelme2voc's `__ignore__`).
IGNORE_NAMES = frozenset({"__ignore__"})


def mask_class_names(found: Sequence[str], given: Sequence[str] | None = None) -> tuple[tuple[str, ...], str]:
    """The class names by id (0: background) and where they came from, in words."""
    if given:
        return tuple(given), "class names from class_names"
    names = [name for name in found if name not in IGNORE_NAMES]
    if names and names[0].lower() in BACKGROUND_NAMES:
        return tuple(names), "class names as the annotations list them (0 their background)"
    return (BACKGROUND, *names), "class names as the annotations list them, after 0 background"


def class_masks_of(found: AnnotationSet, request: LoadRequest) -> AnnotationSet:
    """`found` (a format's objects, each picture's in drawing order) as a segmentation run's
    annotations: each picture's shapes to draw, the class names and the rule (module docstring).
    Raises SourceError for an ignore value that is a class id."""
    names, names_from = mask_class_names(found.class_names, request.class_names)
    ids = {name: index for index, name in enumerate(names)}
    ignore = request.ignore_value
    rule = checked_rule(MaskRule(len(names), ignore), names)
    images: dict[str, ImageAnnotations] = {}
    dropped = list(found.dropped)
    drawn = 0
    for relpath, picture in found.images.items():
        shapes = []
        for item in picture.objects:
            value = ignore if item.class_name in IGNORE_NAMES else ids.get(item.class_name)
            if value is None:
                detail = f"{item.source_ref}: class {item.class_name!r} is not in class_names"
                dropped.append(ObjectNote(relpath, reasons.UNKNOWN_CATEGORY.code, detail))
            elif item.mask is None:
                dropped.append(ObjectNote(relpath, reasons.NOT_DRAWN.code, _undrawn(item)))
            else:
                shapes.append((value, item.mask))
        drawn += bool(shapes)
        value_of = {} if relpath in found.unannotated else {"class_mask": DrawnShapes(tuple(shapes)).value()}
        images[relpath] = dataclasses.replace(picture, objects=(), values=value_of)
    undrawn = sum(1 for note in dropped if note.reason == reasons.NOT_DRAWN.code)
    if not drawn and undrawn:
        raise SourceError(
            f"{found.format}: no picture has a shape with an area to draw ({undrawn} boxes, lines or "
            "points); a class mask needs polygons or masks: use --task detection for boxes"
        )
    return dataclasses.replace(
        found,
        class_names=names,
        images=images,
        dropped=tuple(sorted(dropped, key=lambda note: note.relpath)),
        mask_rule=rule,
        task="segmentation",
        palette=voc_palette(len(names)),
        found_at=f"{found.found_at}; {names_from}; shapes drawn in order, {ignore} ignored"
        + mask_type_said(rule),
        keypoint_names={},
        skeletons={},
    )


def _undrawn(item: ObjectBox) -> str:
    return f"{item.source_ref}: a {item.class_name!r} box without an outline has no area to draw"
