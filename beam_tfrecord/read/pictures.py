"""Pictures of what was written: a contact sheet of sampled records and a label histogram.

Drawn with Pillow (already a dependency) and its built-in font, so nothing else is installed and
nothing is downloaded. Thumbnails are decoded from the stored bytes, the ones a trainer reads; a
detection record's stored boxes are drawn on its thumbnail with their class names, and its
masks laid over it, one colour per class, so a box that no longer frames its object shows.
"""

from __future__ import annotations

import io
from collections.abc import Mapping, Sequence

from apache_beam.io.filesystems import FileSystems
from PIL import Image, ImageDraw, ImageFont

from beam_tfrecord.read.verify import Sample

__all__ = [
    "contact_sheet",
    "draw_class_mask",
    "draw_objects",
    "draw_points",
    "label_histogram",
    "save_png",
    "thumbnail",
]

BACKGROUND = (255, 255, 255)
CELL_BACKGROUND = (235, 235, 235)
INK = (20, 20, 20)
FAINT = (90, 90, 90)
# Colour-blind-safe (Okabe-Ito) colours, one per split.
SPLIT_COLOURS = [(0, 114, 178), (230, 159, 0), (0, 158, 115), (204, 121, 167), (86, 180, 233), (213, 94, 0)]
MAX_HISTOGRAM_ROWS = 60
MASK_OPACITY = 0.45
TAG_HEIGHT = 13  # a class name's tag, in pixels (11 px text)


def font(size: int) -> ImageFont.FreeTypeFont | ImageFont.ImageFont:
    return ImageFont.load_default(size=size)


def _fit(
    draw: ImageDraw.ImageDraw,
    text: str,
    face: ImageFont.FreeTypeFont | ImageFont.ImageFont,
    width: int,
    keep_end: bool = False,
) -> str:
    """`text` cut with an ellipsis to fit `width`: labels keep their start, file paths (which
    differ at their ends) `keep_end`."""
    if draw.textlength(text, font=face) <= width:
        return text
    while text and draw.textlength(f"…{text}" if keep_end else f"{text}…", font=face) > width:
        text = text[1:] if keep_end else text[:-1]
    return f"…{text}" if keep_end else f"{text}…"


def thumbnail(encoded: bytes, size: int) -> Image.Image:
    """The stored image scaled to fit a `size` square; a grey cross if Pillow cannot read it."""
    try:
        with Image.open(io.BytesIO(encoded)) as source:
            image = source.convert("RGB")
            image.thumbnail((size, size))
            return image
    except Exception:
        broken = Image.new("RGB", (size, size), (200, 200, 200))
        ImageDraw.Draw(broken).line([(0, 0), (size, size), (0, size), (size, 0)], fill=(150, 0, 0), width=3)
        return broken


def _class_colours(samples: Sequence[Sample]) -> dict[str, tuple[int, int, int]]:
    """One colour per class name on the sheet, in name order (the same class, the same colour)."""
    names = sorted({name for sample in samples for name in sample.box_labels})
    return {name: SPLIT_COLOURS[i % len(SPLIT_COLOURS)] for i, name in enumerate(names)}


def _mask(png: bytes, size: tuple[int, int]) -> Image.Image | None:
    """A stored mask (0 and 1) as an 8-bit alpha of `size`, or None if Pillow cannot read it."""
    try:
        with Image.open(io.BytesIO(png), formats=("PNG",)) as mask:
            alpha = mask.convert("L").resize(size, Image.Resampling.NEAREST)
    except Exception:
        return None
    return alpha.point(lambda v: int(255 * MASK_OPACITY) if v else 0)


def draw_objects(
    thumb: Image.Image, sample: Sample, colours: Mapping[str, tuple[int, int, int]]
) -> Image.Image:
    """`thumb` with the sample's masks laid over it and its boxes (fractions of the image) drawn
    with their class names, each in its class's colour."""
    if not sample.boxes and not sample.masks:
        return thumb
    thumb = thumb.convert("RGB")
    names = list(sample.box_labels) + [""] * (len(sample.boxes) - len(sample.box_labels))
    for png, name in zip(sample.masks, names, strict=False):
        alpha = _mask(png, thumb.size)
        if alpha is not None:
            thumb.paste(Image.new("RGB", thumb.size, colours.get(name, INK)), (0, 0), alpha)
    draw, face = ImageDraw.Draw(thumb), font(11)
    for (xmin, ymin, xmax, ymax), name in zip(sample.boxes, names, strict=True):
        colour = colours.get(name, INK)
        left, top = xmin * (thumb.width - 1), ymin * (thumb.height - 1)
        box = [left, top, max(left, xmax * (thumb.width - 1)), max(top, ymax * (thumb.height - 1))]
        draw.rectangle(box, outline=colour, width=2)
        if name:  # above the box, or below it where the top is too near, never over the object
            width = draw.textlength(name, font=face)
            tag_top = top - TAG_HEIGHT if top >= TAG_HEIGHT else min(box[3] + 1, thumb.height - TAG_HEIGHT)
            draw.rectangle([left, tag_top, left + width + 4, tag_top + TAG_HEIGHT - 1], fill=colour)
            draw.text((left + 2, tag_top), name, fill=BACKGROUND, font=face)
    return thumb


def draw_points(
    thumb: Image.Image,
    sample: Sample,
    colours: Mapping[str, tuple[int, int, int]],
    skeletons: Mapping[str, Sequence[Sequence[int]]],
) -> Image.Image:
    """`thumb` with each object's labelled keypoints drawn in its class's colour (a visible point
    filled, a hidden one a ring), joined by its class's skeleton where the dataset has one."""
    if not sample.keypoints:
        return thumb
    thumb = thumb.convert("RGB")
    draw = ImageDraw.Draw(thumb)
    names = list(sample.box_labels) + [""] * (len(sample.keypoints) - len(sample.box_labels))
    for points, name in zip(sample.keypoints, names, strict=False):
        colour = colours.get(name, INK)
        at = [(x * (thumb.width - 1), y * (thumb.height - 1), v) for x, y, v in points]
        for a, b in skeletons.get(name, ()):
            if a < len(at) and b < len(at) and at[a][2] and at[b][2]:
                draw.line([at[a][:2], at[b][:2]], fill=colour, width=2)
        for x, y, v in at:
            if v:
                draw.ellipse(
                    [x - 3, y - 3, x + 3, y + 3], outline=colour, fill=colour if v == 2 else None, width=1
                )
    return thumb


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
    colours = [tuple(palette[i]) if i < len(palette) else INK for i in range(256)]
    overlay = Image.new("P", thumb.size)
    overlay.putpalette([channel for colour in colours for channel in colour[:3]])
    overlay.putdata(list(ids.getdata()))
    alpha = ids.point(lambda v: 0 if v == ignore else int(255 * MASK_OPACITY))
    thumb = thumb.convert("RGB")
    thumb.paste(overlay.convert("RGB"), (0, 0), alpha)
    return thumb


def contact_sheet(
    samples: Sequence[Sample],
    title: str,
    columns: int = 6,
    cell: int = 160,
    palette: Sequence[Sequence[int]] = (),
    ignore: int | None = None,
    skeletons: Mapping[str, Sequence[Sequence[int]]] | None = None,
) -> Image.Image:
    """A grid of thumbnails, each with its label (large) and split and file name (small) under it;
    a detection record's boxes, class names and masks drawn on it, a segmentation record's class
    ids in `palette` (the dataset's colours, class id i in `palette[i]`)."""
    columns = max(1, min(columns, len(samples) or 1))
    rows = max(1, -(-len(samples) // columns))
    pad, caption, header = 8, 40, 36
    sheet = Image.new(
        "RGB", (columns * (cell + pad) + pad, header + rows * (cell + caption + pad)), BACKGROUND
    )
    draw = ImageDraw.Draw(sheet)
    big, small = font(16), font(12)
    colours = _class_colours(samples)
    draw.text((pad, 8), title, fill=INK, font=font(18))
    for i, sample in enumerate(samples):
        x = pad + (i % columns) * (cell + pad)
        y = header + (i // columns) * (cell + caption + pad)
        draw.rectangle([x, y, x + cell - 1, y + cell - 1], fill=CELL_BACKGROUND)
        thumb = draw_objects(thumbnail(sample.encoded, cell), sample, colours)
        thumb = draw_points(thumb, sample, colours, skeletons or {})
        if sample.class_mask is not None:
            thumb = draw_class_mask(thumb, sample.class_mask, palette, ignore)
        sheet.paste(thumb, (x + (cell - thumb.width) // 2, y + (cell - thumb.height) // 2))
        label = sample.class_name if sample.class_name is not None else "(unlabeled)"
        split_width = int(draw.textlength(sample.split, font=small))
        draw.text((x + cell - split_width, y + cell + 5), sample.split, fill=FAINT, font=small)
        draw.text((x, y + cell + 2), _fit(draw, label, big, cell - split_width - 6), fill=INK, font=big)
        draw.text(
            (x, y + cell + 22),
            _fit(draw, sample.filename, small, cell, keep_end=True),
            fill=FAINT,
            font=small,
        )
    if not samples:
        draw.text((pad, header), "no record to show", fill=FAINT, font=big)
    return sheet


def label_histogram(
    counts: Mapping[str, Mapping[str, int]], splits: Sequence[str], title: str, width: int = 900
) -> Image.Image:
    """Horizontal bars, one per label (most frequent first), stacked by split, count at the end."""
    labels = sorted(counts, key=lambda label: (-sum(counts[label].values()), label))
    hidden = max(0, len(labels) - MAX_HISTOGRAM_ROWS)
    labels = labels[:MAX_HISTOGRAM_ROWS]
    row, pad, header = 26, 12, 64
    body, small = font(15), font(13)
    measure = ImageDraw.Draw(Image.new("RGB", (1, 1)))
    name_width = min(260, max([measure.textlength(label, font=body) for label in labels] or [40]) + 8)
    height = header + row * max(1, len(labels)) + (row if hidden else 0) + pad
    image = Image.new("RGB", (width, int(height)), BACKGROUND)
    draw = ImageDraw.Draw(image)
    draw.text((pad, 8), title, fill=INK, font=font(18))
    legend_x = pad
    for i, split in enumerate(splits):
        colour = SPLIT_COLOURS[i % len(SPLIT_COLOURS)]
        draw.rectangle([legend_x, 38, legend_x + 14, 52], fill=colour)
        draw.text((legend_x + 20, 37), split, fill=INK, font=small)
        legend_x += 20 + int(draw.textlength(split, font=small)) + 24
    top = max([sum(c.values()) for c in counts.values()] or [1]) or 1
    bar_left = pad + name_width
    bar_space = width - bar_left - 70
    for r, label in enumerate(labels):
        y = header + r * row
        draw.text((pad, y + 4), _fit(draw, label, body, int(name_width) - 8), fill=INK, font=body)
        x = bar_left
        for i, split in enumerate(splits):
            n = counts[label].get(split, 0)
            length = round(bar_space * n / top)
            if length:
                draw.rectangle(
                    [x, y + 4, x + length - 1, y + row - 4], fill=SPLIT_COLOURS[i % len(SPLIT_COLOURS)]
                )
            x += length
        draw.text((x + 6, y + 5), str(sum(counts[label].values())), fill=INK, font=small)
    if hidden:
        draw.text((pad, header + len(labels) * row + 4), f"… and {hidden} more labels", fill=FAINT, font=body)
    return image


def save_png(image: Image.Image, path: str) -> None:
    """Through Beam's FileSystems, so a `gs://` destination works like a local one."""
    buffer = io.BytesIO()
    image.save(buffer, format="PNG")
    with FileSystems.create(path) as handle:
        handle.write(buffer.getvalue())
