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
from PIL.PngImagePlugin import PngInfo

from beam_tfrecord.labels import KINDS, Section
from beam_tfrecord.labels.drawing import BACKGROUND, INK, Sheet, font
from beam_tfrecord.read.verify import Sample

__all__ = [
    "contact_sheet",
    "label_histogram",
    "save_png",
    "thumbnail",
]

CELL_BACKGROUND = (235, 235, 235)
FAINT = (90, 90, 90)
# Colour-blind-safe (Okabe-Ito) colours, one per split.
SPLIT_COLOURS = [(0, 114, 178), (230, 159, 0), (0, 158, 115), (204, 121, 167), (86, 180, 233), (213, 94, 0)]
MAX_HISTOGRAM_ROWS = 60


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
    """One colour per class name the sheet draws, in name order (the same class, the same colour)."""
    names = sorted(
        {
            name
            for sample in samples
            for kind, drawn in sample.labels.items()
            for name in KINDS[kind].drawn_classes(drawn)
        }
    )
    return {name: SPLIT_COLOURS[i % len(SPLIT_COLOURS)] for i, name in enumerate(names)}


def contact_sheet(
    samples: Sequence[Sample],
    title: str,
    columns: int = 6,
    cell: int = 160,
    sections: Mapping[str, Section] | None = None,
) -> Image.Image:
    """A grid of thumbnails, each with its label (large) and split and file name (small) under it,
    and its labels drawn on it by their kinds (`labels.LabelKind.draw`: a detection record's
    boxes, class names and masks, a segmentation record's class ids in the dataset's palette, a
    keypoints record's points); `sections` are the run's summary sections (palettes, skeletons)."""
    columns = max(1, min(columns, len(samples) or 1))
    rows = max(1, -(-len(samples) // columns))
    pad, caption, header = 8, 40, 36
    heading = font(18)
    # As wide as its title: what the title says of the pictures (inspect: how a picture past 8
    # bits is shown) must be read whole, however few cells there are.
    title_width = int(ImageDraw.Draw(Image.new("RGB", (1, 1))).textlength(title, font=heading))
    width = max(columns * (cell + pad) + pad, title_width + 2 * pad)
    sheet = Image.new("RGB", (width, header + rows * (cell + caption + pad)), BACKGROUND)
    sheet.info["Title"] = title  # save_png writes it into the file
    draw = ImageDraw.Draw(sheet)
    big, small = font(16), font(12)
    style = Sheet(_class_colours(samples), sections or {})
    draw.text((pad, 8), title, fill=INK, font=heading)
    for i, sample in enumerate(samples):
        x = pad + (i % columns) * (cell + pad)
        y = header + (i // columns) * (cell + caption + pad)
        draw.rectangle([x, y, x + cell - 1, y + cell - 1], fill=CELL_BACKGROUND)
        thumb = thumbnail(sample.encoded, cell)
        for kind, drawn in sample.labels.items():  # in the run's order of its kinds
            thumb = KINDS[kind].draw(thumb, drawn, style)
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
    image.info["Title"] = title
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
    """Through Beam's FileSystems, so a `gs://` destination works like a local one; the picture's
    title (`image.info["Title"]`) goes into the file as PNG's Title text, which viewers show and
    a script reads (`Image.open(path).text["Title"]`)."""
    buffer = io.BytesIO()
    text = PngInfo()
    if image.info.get("Title"):
        text.add_text("Title", str(image.info["Title"]))
    image.save(buffer, format="PNG", pnginfo=text)
    with FileSystems.create(path) as handle:
        handle.write(buffer.getvalue())
