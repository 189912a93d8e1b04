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
        "An input that cannot become a record is one line of `rejects.jsonl` with one of these "
        "`reason`s and a `detail` for people; summary.json counts them in `rejects_per_reason`, "
        "the Beam counters as `rejected_<reason>`.",
    ),
    "skip": KindInfo(
        "Skipped files",
        "A listed file that is not an input at all is a `rejects.jsonl` line with this reason, "
        "its `detail` saying what the file is; it is counted apart (summary.json's `skipped`), "
        "not as a reject.",
    ),
    "change": KindInfo(
        "Changes",
        "A record whose stored image differs from its file, or whose file is not what its name "
        "says, is one line of `changes.jsonl` listing these `reasons` in this order; summary.json "
        "counts each in `changes_per_reason`. What an option does to every record ({run_wide}) "
        "is counted and listed beside another reason, but alone makes no line.",
    ),
    "drop": KindInfo(
        "Dropped objects",
        "A detection run stores every annotated object or names why not: an object left out of "
        "its image is one line of `dropped_objects.jsonl` with one of these reasons, and "
        "summary.json's `objects.dropped_per_reason` counts them (with `image_rejected` and "
        "`no_image` for the objects of rejected images and of unmatched entries), so "
        "`annotated = stored + dropped`.",
    ),
    "unmatched": KindInfo(
        "Annotations without an image",
        "An annotation entry that names no listed image is one line of "
        "`annotations_without_image.jsonl` with one of these reasons; its objects count as "
        "`no_image`.",
    ),
    "object_note": KindInfo(
        "Object notes",
        "What changed on one stored object, as planning and the worker note it on the object "
        "(never in a file of the output): each makes its record's change named in its meaning.",
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
    if record_change is not None:  # the docs name the change the note makes
        meaning = f"{meaning}: `{record_change.code}`"
    changes = record_change.code if record_change is not None else None
    _DECLARED[code] = reason = Reason(code, kind, meaning, changes)
    return reason


# Rejects: an input that cannot become a record.
EMPTY = _reason("empty", "reject", "the file has zero bytes")
NOT_AN_IMAGE = _reason("not_an_image", "reject", "no image codec recognises the bytes")
TRUNCATED = _reason("truncated", "reject", "the image is cut short")
CORRUPT = _reason(
    "corrupt", "reject", "a decoder error; the decoder's own message (libtiff's included) is the detail"
)
UNSUPPORTED_FORMAT = _reason("unsupported_format", "reject", "a refused format; the detail says why")
CODEC_MISSING = _reason(
    "codec_missing",
    "reject",
    "no installed package decodes it (a DICOM file without the `[dicom]` extra, or in a compression "
    "none of its decoders reads): the detail names what to `pip install`, and its licence",
)
NO_PICTURE = _reason(
    "no_picture",
    "reject",
    "a DICOM object that holds no picture: no Pixel Data (a DICOMDIR, an RT Structure Set, a report), "
    "or a Segmentation, whose frames are masks of other pictures (the detail names its SOP class)",
)
TOO_LARGE = _reason(
    "too_large",
    "reject",
    "over `--max_pixels` (from the header) or `--max_file_mb` (from the listed size, before a byte is read)",
)
UNREADABLE = _reason(
    "unreadable",
    "reject",
    "the file cannot be read (a broken symlink, a FIFO, a directory that cannot be listed)",
)
UNDECODABLE_NAME = _reason(
    "undecodable_name",
    "reject",
    "its path is not valid UTF-8, which `image/filename` and every JSON output need (rename it; the "
    "path is shown with `\\xNN` for each byte that is not)",
)
UNLABELED = _reason("unlabeled", "reject", "no label found for it")
UNKNOWN_CLASS = _reason("unknown_class", "reject", "its class is not in `--class_names`")
BAD_MANIFEST_VALUE = _reason(
    "bad_manifest_value",
    "reject",
    "an `--extra_columns` value that does not parse as its type (the detail names the column and the value)",
)
DUPLICATE = _reason(
    "duplicate", "reject", "a copy of another input's bytes, with `--dedupe` (the detail names the kept copy)"
)
UNANNOTATED = _reason("unannotated", "reject", "no annotation names the image, with `--unannotated drop`")
BAD_ANNOTATION = _reason(
    "bad_annotation", "reject", "its annotation file is malformed (the detail names the file and line)"
)
UNSAFE_ANNOTATION = _reason(
    "unsafe_annotation",
    "reject",
    "its annotation XML declares entities or external references, never expanded",
)
CONFLICTING_ANNOTATIONS = _reason(
    "conflicting_annotations", "reject", "two annotation entries claim the image"
)
AMBIGUOUS_ANNOTATION = _reason(
    "ambiguous_annotation", "reject", "an annotation entry could be for the image or another listed file"
)
# With the dataset's own splits (no `splits` given): never in two splits, never guessed.
CONFLICTING_SPLIT = _reason("conflicting_split", "reject", "two of the splits the dataset declares claim it")
UNDECLARED_SPLIT = _reason("undeclared_split", "reject", "none of the splits the dataset declares names it")
ANNOTATION_SIZE_MISMATCH = _reason(
    "annotation_size_mismatch",
    "reject",
    "the size its annotation source declares fits neither the stored nor the upright picture",
)
# A segmentation run's mask file (the picture's own bytes are fine).
CLASS_MASK_UNREADABLE = _reason(
    "class_mask_unreadable",
    "reject",
    "its mask file cannot be read or decoded, or is not a mask of class ids",
)
CLASS_MASK_SIZE_MISMATCH = _reason(
    "class_mask_size_mismatch", "reject", "its mask's size fits neither the stored nor the upright picture"
)
CLASS_MASK_COLOURS = _reason(
    "class_mask_colours",
    "reject",
    "its mask holds colours and no class of the dataset's palette has them (the detail names them)",
)
CLASS_MASK_UNKNOWN_VALUE = _reason(
    "class_mask_unknown_value",
    "reject",
    "its mask holds values that are neither a class id nor the ignore value (the detail names them)",
)
# A panoptic run's PNG of segment ids (the picture's own bytes are fine).
PANOPTIC_UNREADABLE = _reason(
    "panoptic_unreadable",
    "reject",
    "its panoptic PNG (segment ids as colours) is missing, cannot be read or decoded, or is not RGB",
)
PANOPTIC_SIZE_MISMATCH = _reason(
    "panoptic_size_mismatch",
    "reject",
    "its panoptic PNG's size fits neither the stored nor the upright picture",
)
# A picture whose bands are files of their own (`--bands`).
BAND_MISSING = _reason(
    "band_missing",
    "reject",
    "`--bands`: no file holds one of the picture's bands (the detail names the files found)",
)
BAND_AMBIGUOUS = _reason(
    "band_ambiguous",
    "reject",
    "`--bands`: two files name the same band of the picture, or one file's path names two bands",
)
BANDS_DIFFER = _reason(
    "bands_differ",
    "reject",
    "`--bands`: the picture's band files differ in size or sample type (the detail names both)",
)
BAND_NOT_SINGLE = _reason(
    "band_not_single",
    "reject",
    "`--bands`: a band's file holds more than one band (RGB, several pages): it is not one band",
)
# One record a page (`--pages each`).
PAGES_CHANGED = _reason(
    "pages_changed",
    "reject",
    "`--pages each`: the file holds another number of pages than when the run counted them (it "
    "changed since): the page cannot be told from another",
)
FEATURE_FAILED = _reason("feature_failed", "reject", "the feature model cannot be fed the image")
INFERENCE_FAILED = _reason(
    "inference_failed",
    "reject",
    "the feature model's call on the image's batch raised (the detail is the error)",
)

# Skipped: a listed file that is not an input.
SKIPPED = _reason(
    "skipped",
    "skip",
    "hidden files, `Thumbs.db`, `.DS_Store`, `desktop.ini`, `__MACOSX/`, a symlink loop, the "
    "`--manifest` or an annotation file lying inside `--input`, and with `--bands` a file that "
    "names none of the bands",
)

# Changes: why a stored image differs from its file, in the order changes.jsonl lists them.
FORMAT = _reason(
    "format",
    "change",
    "TensorFlow does not decode the source format as stored (TIFF, WebP, HEIC, BMP, ...): "
    "stored as JPEG or PNG",
)
FORMAT_FORCED = _reason("format_forced", "change", "`--image_format` asked for the other format")
WRONG_EXTENSION = _reason(
    "wrong_extension",
    "change",
    "the extension names another format (a PNG named `.jpg`); the bytes are kept when they can be",
)
CMYK = _reason("cmyk", "change", "CMYK converted to RGB")
HIGH_BIT_DEPTH = _reason("high_bit_depth", "change", "16-bit, 32-bit or float pixels scaled to 8 bits")
PALETTE = _reason("palette", "change", "a palette expanded to RGB or grayscale")
ALPHA_FLATTENED = _reason("alpha_flattened", "change", "transparency composited over white")
MODE = _reason("mode", "change", "1-bit, LAB, YCbCr or another pixel mode converted to grayscale or RGB")
EXIF_ROTATION = _reason("exif_rotation", "change", "the EXIF orientation applied to the pixels")
FRAMES_DROPPED = _reason("frames_dropped", "change", "only the first frame (an icon's largest size) kept")
RESIZED = _reason("resized", "change", "resized as `--resize` asks")
CHANNELS = _reason("channels", "change", "converted to `--channels`' count")
JPEG_END_MISSING = _reason(
    "jpeg_end_missing", "change", "a JPEG without its end marker (TensorFlow refuses those), re-encoded"
)
BOXES_CLIPPED = _reason(
    "boxes_clipped", "change", "an object's box passed the picture's edge and was clipped to it"
)
BOXES_CROPPED = _reason(
    "boxes_cropped", "change", "the crop of `--resize_mode crop` cut part of an object's box away"
)
MASKS_FROM_BOXES = _reason(
    "masks_from_boxes", "change", "masks were asked and an object has none: its filled box stands for it"
)
MASKS_EMPTY = _reason("masks_empty", "change", "an object's mask has no pixel left in the stored image")
MASKS_DROPPED = _reason(
    "masks_dropped", "change", "an object's mask was malformed and left out (its box is kept)"
)
BOXES_UNROTATED = _reason(
    "boxes_unrotated", "change", "a rotated box was stored as the axis-aligned box that holds it"
)
CLASS_MASK_FROM_COLOURS = _reason(
    "class_mask_from_colours",
    "change",
    "its mask file held colours (an RGB PNG), mapped to class ids through the dataset's palette",
)
PANOPTIC_WIDE_IDS = _reason(
    "panoptic_wide_ids",
    "change",
    "its panoptic masks hold a value past 255 (more than 255 segments, or a category id past 255): "
    "they are 16-bit PNGs, where Model Garden's converter wraps the values to 8 bits",
)
KEYPOINTS_DROPPED = _reason(
    "keypoints_dropped", "change", "an object's keypoints were malformed and left out (its box is kept)"
)
KEYPOINTS_OUTSIDE = _reason(
    "keypoints_outside",
    "change",
    "an object's labelled keypoints fell outside the picture or the crop: stored unlabelled, counted",
)
OBJECTS_DROPPED = _reason(
    "objects_dropped",
    "change",
    "objects of the image were left out of its record (`dropped_objects.jsonl` names each)",
)

# Dropped: why an annotated object is not stored.
UNKNOWN_CATEGORY = _reason("unknown_category", "drop", "its category is not among the class names")
BAD_OBJECT = _reason("bad_object", "drop", "its box is missing or not numbers")
INVALID_BOX = _reason("invalid_box", "drop", "a box coordinate is not a finite number")
ZERO_AREA = _reason("zero_area", "drop", "its box has no width or no height (or a negative one)")
OUTSIDE_IMAGE = _reason("outside_image", "drop", "its box lies wholly outside the picture")
CROPPED_OUT = _reason(
    "cropped_out", "drop", "its box lies wholly in the part of the picture that `--resize_mode crop` removed"
)
SIZE_MISMATCH = _reason(
    "size_mismatch",
    "drop",
    "the size the source declares for the image is neither its stored nor its upright size",
)
MASK_INVALID = _reason("mask_invalid", "drop", "its mask's run lengths do not cover the picture exactly")
MASK_SIZE_MISMATCH = _reason(
    "mask_size_mismatch", "drop", "its mask's run lengths are for another size than the picture's"
)
NOT_DRAWN = _reason(
    "not_drawn",
    "drop",
    "a shape with no area to fill (a box without an outline, a line, a point) in a class mask drawn "
    "from shapes, or a line in a detection run",
)
OTHER_SHAPE = _reason(
    "other_shape",
    "drop",
    "a shape of a kind the run's task does not store (points in a detection or segmentation run, a box "
    "or an outline in a keypoints run, a cuboid), where the format keeps every kind of shape in one file",
)
UNATTACHED_POINT = _reason(
    "unattached_point",
    "drop",
    "a labelled point that joins no one object (LabelMe's group, Label Studio's parent or the one box "
    "around it), or a second point of its name there",
)
IMAGE_REJECTED = _reason("image_rejected", "drop", "its image is a reject line (counted, not listed)")
NO_IMAGE = _reason("no_image", "drop", "its annotation entry names no listed image (counted, not listed)")

# Unmatched: why an annotation entry applies to no listed image.
MISSING_IMAGE = _reason("missing_image", "unmatched", "it names a file that is not listed")
AMBIGUOUS_IMAGE = _reason("ambiguous_image", "unmatched", "its file name matches several listed files")
UNKNOWN_IMAGE = _reason("unknown_image", "unmatched", "it names an image id its file does not list")
BAD_ENTRY = _reason("bad_entry", "unmatched", "its image entry has no usable id or file name")

# Object notes: what changed on one stored object (singular), named in its record's change
# (plural) above.
CLIPPED = _reason(
    "clipped", "object_note", "its box passed the picture's edge and was clipped", BOXES_CLIPPED
)
CROPPED = _reason("cropped", "object_note", "the crop cut part of its box away", BOXES_CROPPED)
MASK_FROM_BOX = _reason(
    "mask_from_box",
    "object_note",
    "masks were asked and it has none; its filled box stands for it",
    MASKS_FROM_BOXES,
)
MASK_EMPTY = _reason("mask_empty", "object_note", "its mask has no pixel in the stored image", MASKS_EMPTY)
MASK_MALFORMED = _reason(
    "mask_malformed",
    "object_note",
    "its source mask is malformed and left out, its box kept",
    MASKS_DROPPED,
)
ROTATED_BOX = _reason(
    "rotated_box",
    "object_note",
    "a rotated box: stored as the axis-aligned box that holds it, its corners as its mask",
    BOXES_UNROTATED,
)
KEYPOINTS_MALFORMED = _reason(
    "keypoints_malformed",
    "object_note",
    "its source keypoints are not x, y, v triples of its category's count: left out, its box kept",
    KEYPOINTS_DROPPED,
)
POINTS_OUTSIDE = _reason(
    "points_outside",
    "object_note",
    "some of its labelled keypoints fell outside the picture or the crop",
    KEYPOINTS_OUTSIDE,
)

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
        "<!-- Generated by `python -m beam_tfrecord.reasons > docs/reasons.md` from "
        "beam_tfrecord/reasons.py; tests/test_reasons.py checks it. -->",
        "",
        "Every input ends as one record or one line of `rejects.jsonl`, and every annotated object "
        "is stored or named. These are the codes the output files use, each declared once in "
        "`beam_tfrecord/reasons.py`.",
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
