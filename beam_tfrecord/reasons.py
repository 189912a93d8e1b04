"""Every reason code a run writes, declared once: why an input is rejected or skipped, why a stored
image differs from its file, why an object is left out, why an annotation entry applies to no image.

Each code is a `Reason` (code, kind, a one-line meaning for users), a constant here
(`reasons.CORRUPT`); code that emits a reason takes it from here (`Reject(reasons.CORRUPT, ...)`,
`RejectLine(path, reasons.UNLABELED.code, ...)`), and the files users read hold its `code`, a
plain string. Declaration order is the order of each kind's view (`of_kind`): the change reasons'
order is the order of `changes.jsonl`'s `reasons` and of summary.json's `changes_per_reason`.

`tests/test_reasons.py` reads the library's code and fails on a reason emitted that is not here,
or one here that nothing emits; docs/reasons.md is `python -m beam_tfrecord.reasons`, and a test
checks it is.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass
from typing import Literal

__all__ = [
    "KINDS",
    "RUN_WIDE",
    "Kind",
    "KindInfo",
    "Reason",
    "Reject",
    "codes",
    "counter_name",
    "get",
    "markdown",
    "of_kind",
    "record_changes",
]

Kind = Literal["reject", "skip", "change", "drop", "unmatched", "object_note"]


@dataclass(frozen=True, slots=True)
class KindInfo:
    """What a kind of reason is and where a user meets it (docs/reasons.md's section)."""

    title: str
    where: str


KINDS: dict[Kind, KindInfo] = {
    "reject": KindInfo(
        "Rejects",
        "An input that cannot become a record: a [`rejects.jsonl`](output-files.md#the-folder) line, "
        "its `detail` naming the file, value or error.",
    ),
    "skip": KindInfo(
        "Skipped files",
        "A listed file that is not an input: a `rejects.jsonl` line, its `detail` saying what it is.",
    ),
    "change": KindInfo(
        "Changes",
        "A record stored unlike its file: a [`changes.jsonl`](output-files.md#the-folder) line, its "
        "`reasons` in this order; {run_wide} (an option's, on every record) make no line alone.",
    ),
    "drop": KindInfo(
        "Dropped objects",
        "An annotated object in no record: a [`dropped_objects.jsonl`](output-files.md#the-folder) line.",
    ),
    "unmatched": KindInfo(
        "Annotations without an image",
        "An annotation entry naming no listed picture: an "
        "[`annotations_without_image.jsonl`](output-files.md#the-folder) line; its objects count as "
        "`no_image`.",
    ),
    "object_note": KindInfo(
        "Object notes",
        "Never written: each note on a stored object becomes its record's change:",
    ),
}


@dataclass(frozen=True, slots=True)
class Reason:
    """One reason: `code` is what the output files say, `meaning` is its one line for users;
    an object note's `record_change` is the change (plural) its record gets for it."""

    code: str
    kind: Kind
    meaning: str
    record_change: str | None = None


class Reject(Exception):
    """An input that cannot become a record; `reason` is its stable code (a `Reason`'s),
    `detail` is for people. Raised by the decode and by a kind of label's checks alike, and
    turned into the input's reject line by the worker."""

    def __init__(self, reason: Reason, detail: str) -> None:
        super().__init__(f"{reason.code}: {detail}")
        self.registered = reason
        self.reason = reason.code
        self.detail = detail

    def with_detail(self, detail: str) -> Reject:
        """The same reason, said with more (what the decoder printed)."""
        return Reject(self.registered, detail)


_DECLARED: dict[str, Reason] = {}


def _reason(code: str, kind: Kind, meaning: str, record_change: Reason | None = None) -> Reason:
    if code in _DECLARED:
        raise ValueError(f"reason {code!r} is declared twice")
    if record_change is not None:  # the docs name the change the note makes (a note's meaning)
        meaning = f"{meaning}: `{record_change.code}`" if meaning else f"`{record_change.code}`"
    changes = record_change.code if record_change is not None else None
    _DECLARED[code] = reason = Reason(code, kind, meaning, changes)
    return reason


# Rejects: an input that cannot become a record.
EMPTY = _reason("empty", "reject", "zero bytes")
NOT_AN_IMAGE = _reason("not_an_image", "reject", "no codec recognises the bytes")
TRUNCATED = _reason("truncated", "reject", "cut short")
CORRUPT = _reason("corrupt", "reject", "a decoder error (the detail is its message)")
UNSUPPORTED_FORMAT = _reason("unsupported_format", "reject", "a refused format")
CODEC_MISSING = _reason("codec_missing", "reject", "no installed decoder; the detail says what to install")
NO_PICTURE = _reason(
    "no_picture",
    "reject",
    "a DICOM without a picture (DICOMDIR, RT Structure Set, report, Segmentation)",
)
TOO_LARGE = _reason("too_large", "reject", "over `--max_pixels` or `--max_file_mb`")
UNREADABLE = _reason("unreadable", "reject", "a broken symlink, a FIFO, an unlistable directory, ...")
UNDECODABLE_NAME = _reason("undecodable_name", "reject", "path not UTF-8: rename it")
UNLABELED = _reason("unlabeled", "reject", "no label found")
UNKNOWN_CLASS = _reason("unknown_class", "reject", "class not in `--class_names`")
BAD_MANIFEST_VALUE = _reason("bad_manifest_value", "reject", "an `--extra_columns` value not of its type")
DUPLICATE = _reason("duplicate", "reject", "`--dedupe`: a copy of another input")
UNANNOTATED = _reason("unannotated", "reject", "`--unannotated drop`: no annotation names it")
BAD_ANNOTATION = _reason("bad_annotation", "reject", "a malformed annotation file")
UNSAFE_ANNOTATION = _reason(
    "unsafe_annotation", "reject", "annotation XML with entities or external references"
)
CONFLICTING_ANNOTATIONS = _reason("conflicting_annotations", "reject", "two annotation entries claim it")
AMBIGUOUS_ANNOTATION = _reason("ambiguous_annotation", "reject", "an entry may be for it or another file")
# With the dataset's own splits (no `splits` given): never in two splits, never guessed.
CONFLICTING_SPLIT = _reason("conflicting_split", "reject", "two declared splits claim it")
UNDECLARED_SPLIT = _reason("undeclared_split", "reject", "no declared split names it")
ANNOTATION_SIZE_MISMATCH = _reason(
    "annotation_size_mismatch", "reject", "annotated size neither the stored nor the upright picture's"
)
# A segmentation run's mask file (the picture's own bytes are fine).
CLASS_MASK_UNREADABLE = _reason("class_mask_unreadable", "reject", "mask file unreadable or not of class ids")
CLASS_MASK_SIZE_MISMATCH = _reason(
    "class_mask_size_mismatch", "reject", "mask size neither the stored nor the upright picture's"
)
CLASS_MASK_COLOURS = _reason("class_mask_colours", "reject", "mask colours no class of the palette has")
CLASS_MASK_UNKNOWN_VALUE = _reason(
    "class_mask_unknown_value", "reject", "mask values neither a class id nor the ignore value"
)
# A panoptic run's PNG of segment ids (the picture's own bytes are fine).
PANOPTIC_UNREADABLE = _reason("panoptic_unreadable", "reject", "panoptic PNG missing, unreadable or not RGB")
PANOPTIC_SIZE_MISMATCH = _reason(
    "panoptic_size_mismatch", "reject", "panoptic PNG size neither the stored nor the upright picture's"
)
# A picture whose bands are files of their own (`--bands`).
BAND_MISSING = _reason("band_missing", "reject", "`--bands`: a band has no file")
BAND_AMBIGUOUS = _reason(
    "band_ambiguous", "reject", "`--bands`: two files for one band, or a path naming two"
)
BANDS_DIFFER = _reason("bands_differ", "reject", "`--bands`: band files differ in size or sample type")
BAND_NOT_SINGLE = _reason("band_not_single", "reject", "`--bands`: a band file holds several bands or pages")
PAGES_CHANGED = _reason(
    "pages_changed", "reject", "`--pages each`: the file's page count changed since counted"
)
FEATURE_FAILED = _reason("feature_failed", "reject", "the feature model cannot take it")
INFERENCE_FAILED = _reason("inference_failed", "reject", "the model raised on its batch")

# Skipped: a listed file that is not an input.
SKIPPED = _reason(
    "skipped",
    "skip",
    "hidden files, `Thumbs.db`, `.DS_Store`, `desktop.ini`, `__MACOSX/`, symlink loops, the manifest "
    "and annotation files, files naming no `--bands` band",
)

# Changes: why a stored image differs from its file, in the order changes.jsonl lists them.
FORMAT = _reason(
    "format",
    "change",
    "TensorFlow cannot decode it (TIFF, WebP, HEIC, BMP, ...): stored as JPEG or PNG",
)
FORMAT_FORCED = _reason("format_forced", "change", "`--image_format` forced the other format")
WRONG_EXTENSION = _reason(
    "wrong_extension",
    "change",
    "the extension names another format (a PNG named `.jpg`); bytes kept where possible",
)
CMYK = _reason("cmyk", "change", "CMYK to RGB")
HIGH_BIT_DEPTH = _reason("high_bit_depth", "change", "16-bit, 32-bit or float pixels scaled to 8 bits")
PALETTE = _reason("palette", "change", "a palette expanded to RGB or grayscale")
ALPHA_FLATTENED = _reason("alpha_flattened", "change", "transparency composited over white")
MODE = _reason("mode", "change", "1-bit, LAB, YCbCr or another mode to grayscale or RGB")
EXIF_ROTATION = _reason("exif_rotation", "change", "EXIF orientation applied")
FRAMES_DROPPED = _reason("frames_dropped", "change", "only the first frame kept (an icon's largest size)")
RESIZED = _reason("resized", "change", "`--resize`")
CHANNELS = _reason("channels", "change", "`--channels`")
JPEG_END_MISSING = _reason(
    "jpeg_end_missing", "change", "a JPEG missing its end marker, which TensorFlow refuses: re-encoded"
)
BOXES_CLIPPED = _reason("boxes_clipped", "change", "a box crossed the edge: clipped")
BOXES_CROPPED = _reason("boxes_cropped", "change", "`--resize_mode crop` cut part of a box")
MASKS_FROM_BOXES = _reason("masks_from_boxes", "change", "`--masks`: a maskless object got its filled box")
MASKS_EMPTY = _reason("masks_empty", "change", "an object's mask has no pixel left")
MASKS_DROPPED = _reason("masks_dropped", "change", "an object's malformed mask left out, its box kept")
BOXES_UNROTATED = _reason(
    "boxes_unrotated", "change", "a rotated box stored axis-aligned, its corners as its mask"
)
CLASS_MASK_FROM_COLOURS = _reason(
    "class_mask_from_colours", "change", "an RGB mask mapped to class ids through the palette"
)
PANOPTIC_WIDE_IDS = _reason(
    "panoptic_wide_ids",
    "change",
    "panoptic values past 255, stored as 16-bit PNGs (Model Garden's converter wraps them)",
)
KEYPOINTS_DROPPED = _reason(
    "keypoints_dropped", "change", "an object's malformed keypoints left out (box kept)"
)
KEYPOINTS_OUTSIDE = _reason(
    "keypoints_outside", "change", "labelled keypoints outside the picture or crop, stored unlabelled"
)
OBJECTS_DROPPED = _reason("objects_dropped", "change", "objects left out (listed in `dropped_objects.jsonl`)")

# Dropped: why an annotated object is not stored.
UNKNOWN_CATEGORY = _reason("unknown_category", "drop", "category not a class name")
BAD_OBJECT = _reason("bad_object", "drop", "box missing or not numbers")
INVALID_BOX = _reason("invalid_box", "drop", "a box coordinate not finite")
ZERO_AREA = _reason("zero_area", "drop", "zero or negative box width or height")
OUTSIDE_IMAGE = _reason("outside_image", "drop", "box wholly outside the picture")
CROPPED_OUT = _reason("cropped_out", "drop", "box wholly in what `--resize_mode crop` removed")
SIZE_MISMATCH = _reason("size_mismatch", "drop", "declared image size neither the stored nor the upright one")
MASK_INVALID = _reason("mask_invalid", "drop", "mask run lengths do not cover the picture")
MASK_SIZE_MISMATCH = _reason("mask_size_mismatch", "drop", "mask run lengths for another size")
NOT_DRAWN = _reason(
    "not_drawn",
    "drop",
    "nothing to fill in a drawn class mask (a box without outline, a line, a point); a line in detection",
)
OTHER_SHAPE = _reason(
    "other_shape",
    "drop",
    "a shape the task does not store (points in detection or segmentation; boxes, outlines in keypoints; "
    "cuboids)",
)
UNATTACHED_POINT = _reason(
    "unattached_point",
    "drop",
    "a point in no one object (LabelMe group, Label Studio parent, enclosing box), or a repeated name",
)
IMAGE_REJECTED = _reason("image_rejected", "drop", "its image rejected (counted, not listed)")
NO_IMAGE = _reason("no_image", "drop", "its entry names no listed image (counted, not listed)")

# Unmatched: why an annotation entry applies to no listed image.
MISSING_IMAGE = _reason("missing_image", "unmatched", "names an unlisted file")
AMBIGUOUS_IMAGE = _reason("ambiguous_image", "unmatched", "file name matches several listed files")
UNKNOWN_IMAGE = _reason("unknown_image", "unmatched", "names an image id its file does not list")
BAD_ENTRY = _reason("bad_entry", "unmatched", "no usable image id or file name")

# Object notes: what changed on one stored object (singular), named in its record's change
# (plural) above.
CLIPPED = _reason("clipped", "object_note", "", BOXES_CLIPPED)
CROPPED = _reason("cropped", "object_note", "", BOXES_CROPPED)
MASK_FROM_BOX = _reason("mask_from_box", "object_note", "", MASKS_FROM_BOXES)
MASK_EMPTY = _reason("mask_empty", "object_note", "", MASKS_EMPTY)
MASK_MALFORMED = _reason("mask_malformed", "object_note", "", MASKS_DROPPED)
ROTATED_BOX = _reason("rotated_box", "object_note", "", BOXES_UNROTATED)
KEYPOINTS_MALFORMED = _reason("keypoints_malformed", "object_note", "", KEYPOINTS_DROPPED)
POINTS_OUTSIDE = _reason("points_outside", "object_note", "", KEYPOINTS_OUTSIDE)

# Changes an option makes to every record: counted, but alone they make no changes.jsonl line
# (with a resize every record would have one, and the file would say nothing).
RUN_WIDE: tuple[Reason, ...] = (FORMAT_FORCED, RESIZED, CHANNELS)


@functools.cache
def record_changes() -> dict[str, str]:
    """Each object note (singular: `mask_malformed`) -> the record-level change it makes
    (plural: `masks_dropped`), from the notes' declarations."""
    return {r.code: r.record_change for r in _DECLARED.values() if r.record_change is not None}


def of_kind(kind: Kind) -> tuple[Reason, ...]:
    """The reasons of one kind, in declaration order (asked per record: computed once)."""
    return tuple(reason for reason in _DECLARED.values() if reason.kind == kind)


@functools.cache
def codes(kind: Kind) -> tuple[str, ...]:
    """The codes of one kind, in declaration order (changes: the order changes.jsonl lists them)."""
    return tuple(reason.code for reason in of_kind(kind))


def get(code: str) -> Reason:
    """The reason a code names; KeyError for a code that is not declared here."""
    return _DECLARED[code]


def counter_name(code: str) -> str:
    """The Beam counter that counts a reason: `rejected_<code>` for a reject line (a skipped file's
    included), `changed_<code>` for a change."""
    reason = get(code)
    if reason.kind in ("reject", "skip"):
        return f"rejected_{code}"
    if reason.kind == "change":
        return f"changed_{code}"
    raise ValueError(f"{code!r} is a {reason.kind} reason, not counted per record")


def markdown() -> str:
    """docs/reasons.md: one section per kind (its anchor is the kind, `reasons.md#drop`), each with
    where a user meets it and a table of its codes and meanings."""
    lines = [
        "# Reason codes",
        "",
        "<!-- Generated from beam_tfrecord/reasons.py: `python -m beam_tfrecord.reasons > "
        "docs/reasons.md`. -->",
        "",
        "The codes in a run's output files.",
    ]
    run_wide = ", ".join(f"`{reason.code}`" for reason in RUN_WIDE)
    for kind, info in KINDS.items():
        lines += [
            "",
            f'<a id="{kind}"></a>',
            "",
            f"## {info.title}",
            "",
            info.where.format(run_wide=run_wide),
            "",
            "| reason | meaning |",
            "|---|---|",
        ]
        lines += [f"| `{reason.code}` | {reason.meaning} |" for reason in of_kind(kind)]
    return "\n".join(lines) + "\n"


if __name__ == "__main__":
    print(markdown(), end="")
