"""`inspect`'s checks of a detection run's records and how its contact sheet draws them: ids in
1..K with their names, boxes inside the picture with min <= max, one mask per object of the
picture's size; the objects counted per class against summary.json; boxes, names and masks drawn
on the thumbnail in their class's colour."""

from __future__ import annotations

from collections import Counter
from typing import NamedTuple

import numpy as np
from PIL import Image

from beam_tfrecord.edges import ParsedRecord
from beam_tfrecord.labels.base import Checked, Checks
from beam_tfrecord.labels.drawing import BACKGROUND, TAG_HEIGHT, Sheet, font, mask_alpha
from beam_tfrecord.labels.objects.summary import ObjectSummary

__all__ = ["ObjectChecks", "ObjectMarks", "draw_objects"]

BOX_ORDER = ("xmin", "ymin", "xmax", "ymax")


class ObjectMarks(NamedTuple):
    """What the contact sheet draws of a detection record: its boxes (xmin, ymin, xmax, ymax as
    fractions of the picture), their class names and their mask PNGs."""

    boxes: tuple[tuple[float, float, float, float], ...] = ()
    names: tuple[str, ...] = ()
    masks: tuple[bytes, ...] = ()


class ObjectChecks(Checks[ObjectMarks]):
    """A detection run's records, and their objects per class against the objects section."""

    def __init__(self, class_names: tuple[str, ...], section: ObjectSummary | None) -> None:
        self.names = class_names
        self.section = section
        self.per_class: Counter[str] = Counter()

    def record(
        self, facts: ParsedRecord, shape: tuple[int, ...], where: str, errors: list[str]
    ) -> Checked[ObjectMarks]:
        import tensorflow as tf

        names = self.names
        ids = [int(i) for i in np.asarray(facts["object_label"]).reshape(-1)]
        texts = [t.decode("utf-8", "replace") for t in np.asarray(facts["object_text"]).reshape(-1)]
        boxes = np.stack(
            [np.asarray(facts[f"object_{k}"], dtype=np.float32).reshape(-1) for k in BOX_ORDER], axis=1
        )
        for label_id, text in zip(ids, texts, strict=True):
            if not 1 <= label_id <= len(names):
                errors.append(f"{where}: object class {label_id} is not in 1..{len(names)}")
            elif names[label_id - 1] != text:
                errors.append(
                    f"{where}: object class {label_id} is named {text!r}, not {names[label_id - 1]!r}"
                )
            self.per_class[text] += 1
        if len(boxes) and (
            boxes.min() < 0
            or boxes.max() > 1
            or (boxes[:, 2] < boxes[:, 0]).any()
            or (boxes[:, 3] < boxes[:, 1]).any()
        ):
            errors.append(f"{where}: a box lies outside 0..1 or has its min past its max")
        found = facts.get("object_mask")
        masks = [bytes(m) for m in np.asarray(found).reshape(-1)] if found is not None else []
        if "object_mask" in facts:
            if len(masks) != len(ids):
                errors.append(f"{where}: {len(masks)} masks for {len(ids)} objects")
            for mask in masks:
                size = tuple(tf.io.decode_png(mask, channels=1).shape[:2])
                if size != shape[:2]:
                    errors.append(f"{where}: a mask is {size}, the image {shape[:2]}")
                    break
        classes = sorted(set(texts))
        marks = ObjectMarks(tuple(map(tuple, boxes.tolist())), tuple(texts), tuple(masks))
        return Checked(tuple(classes), "|".join(classes), marks)

    def against_summary(self) -> list[str]:
        if self.section is None:
            return []
        errors = []
        for name, counts in self.section.per_class.items():
            if self.per_class[name] != counts["objects"]:
                found = self.per_class[name]
                errors.append(f"class {name}: {found} objects read, summary.json says {counts['objects']}")
        return errors


def draw_objects(thumb: Image.Image, marks: ObjectMarks, sheet: Sheet) -> Image.Image:
    """`thumb` with the record's masks laid over it and its boxes (fractions of the picture)
    drawn with their class names, each in its class's colour."""
    if not marks.boxes and not marks.masks:
        return thumb
    thumb = thumb.convert("RGB")
    names = list(marks.names) + [""] * (len(marks.boxes) - len(marks.names))
    for png, name in zip(marks.masks, names, strict=False):
        alpha = mask_alpha(png, thumb.size)
        if alpha is not None:
            thumb.paste(Image.new("RGB", thumb.size, sheet.colour(name)), (0, 0), alpha)
    from PIL import ImageDraw  # only inspect draws: no worker loads it

    draw, face = ImageDraw.Draw(thumb), font(11)
    for (xmin, ymin, xmax, ymax), name in zip(marks.boxes, names, strict=True):
        colour = sheet.colour(name)
        left, top = xmin * (thumb.width - 1), ymin * (thumb.height - 1)
        box = [left, top, max(left, xmax * (thumb.width - 1)), max(top, ymax * (thumb.height - 1))]
        draw.rectangle(box, outline=colour, width=2)
        if name:  # above the box, or below it where the top is too near, never over the object
            width = draw.textlength(name, font=face)
            tag_top = top - TAG_HEIGHT if top >= TAG_HEIGHT else min(box[3] + 1, thumb.height - TAG_HEIGHT)
            draw.rectangle([left, tag_top, left + width + 4, tag_top + TAG_HEIGHT - 1], fill=colour)
            draw.text((left + 2, tag_top), name, fill=BACKGROUND, font=face)
    return thumb
