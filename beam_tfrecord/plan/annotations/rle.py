"""COCO's run-length encoded masks: its compressed string form, a mask's extent, and the pixels.

COCO stores crowd masks as run lengths over the image in column-major order, alternating runs of
0 and 1 and starting with 0, either as a list of ints or compressed into an ASCII string
(pycocotools' `rleToString`): each count, after the third, is stored as its difference from the
count two before it, in 5-bit groups, least significant first, with bit 0x20 saying another group
follows and bit 0x10 of the last group carrying the sign, each group offset by 48 (`'0'`). The
string is short (hundreds of characters for a 640x480 mask), so it is decoded here in plain Python
rather than by pycocotools' C extension, which the workers would then need; tests/ check both
directions against pycocotools itself.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from beam_tfrecord.elements import RunLengths

__all__ = [
    "BadRunLengths",
    "decode_counts",
    "encode_counts",
    "extent",
    "from_mask",
    "to_mask",
    "unpack_words",
]


class BadRunLengths(ValueError):
    """A counts string or list that is not a valid COCO RLE."""


def decode_counts(text: str) -> tuple[int, ...]:
    """COCO's compressed counts string -> the run lengths (pycocotools' `rleFrString`)."""
    counts: list[int] = []
    position, end = 0, len(text)
    while position < end:
        value = shift = 0
        more = True
        while more:
            if position >= end:
                raise BadRunLengths(f"counts string ends inside a number at character {position}")
            group = ord(text[position]) - 48
            if not 0 <= group < 64:
                raise BadRunLengths(f"character {text[position]!r} at {position} is not an RLE digit")
            value |= (group & 0x1F) << shift
            more = bool(group & 0x20)
            position += 1
            shift += 5
            if not more and group & 0x10:
                value |= -1 << shift
        if len(counts) > 2:
            value += counts[-2]
        if value < 0:
            raise BadRunLengths(f"run {len(counts)} is negative ({value})")
        counts.append(value)
    return tuple(counts)


def encode_counts(counts: Sequence[int]) -> str:
    """The run lengths -> COCO's compressed counts string (pycocotools' `rleToString`)."""
    out: list[str] = []
    for index, count in enumerate(counts):
        value = int(count) - (int(counts[index - 2]) if index > 2 else 0)
        more = True
        while more:
            group = value & 0x1F
            value >>= 5
            more = value != -1 if group & 0x10 else value != 0
            out.append(chr((group | (0x20 if more else 0)) + 48))
    return "".join(out)


def extent(rle: RunLengths) -> tuple[float, float, float, float] | None:
    """The mask's box `xmin, ymin, xmax, ymax` in pixel edges (a one-pixel mask at column 3,
    row 5 gives 3, 5, 4, 6), or None when no pixel is set; the same box as pycocotools' `toBbox`."""
    height = rle.height
    xmin = ymin = xmax = ymax = -1
    position = 0
    for index, run in enumerate(rle.counts):
        if index % 2 and run > 0:
            first_column, first_row = divmod(position, height)
            last_column, last_row = divmod(position + run - 1, height)
            if xmin < 0:
                xmin, ymin, ymax = first_column, height, -1
            xmax = last_column
            if first_column == last_column:
                ymin, ymax = min(ymin, first_row), max(ymax, last_row)
            else:  # the run wraps from the foot of one column to the head of the next
                ymin, ymax = 0, height - 1
        position += run
    if xmin < 0:
        return None
    return float(xmin), float(ymin), float(xmax + 1), float(ymax + 1)


def to_mask(rle: RunLengths) -> np.ndarray:
    """The mask as a `height x width` uint8 array of 0 and 1."""
    total = sum(rle.counts)
    if total != rle.height * rle.width:
        raise BadRunLengths(f"runs cover {total} pixels, not {rle.height}x{rle.width}")
    values = np.arange(len(rle.counts), dtype=np.uint8) % 2
    flat = np.repeat(values, np.asarray(rle.counts, dtype=np.int64))
    return flat.reshape(rle.width, rle.height).T.copy()


def from_mask(mask: np.ndarray) -> RunLengths:
    """A (height, width) mask (nonzero: in) as COCO's uncompressed run lengths: column-major,
    from a run of 0 (an empty first run where the first pixel is in); `to_mask`'s inverse."""
    height, width = mask.shape
    flat = (mask != 0).flatten(order="F").astype(np.int8)
    changes = np.flatnonzero(np.diff(flat)) + 1
    counts = np.diff(np.concatenate(([0], changes, [flat.size]))).tolist()
    if flat.size and flat[0]:
        counts = [0, *counts]
    return RunLengths(height, width, tuple(int(c) for c in counts))


def unpack_words(packed: Sequence[int], count: int) -> np.ndarray:
    """thi-ng's `rle-pack` bytes (a 32-bit value count, a 5-bit word size less one, four 4-bit run
    length sizes less one, then runs: a repeat bit, a 2-bit size index, a length less one, and
    one word repeated or that many words) -> its `count` words. Painting tools store a picture's
    RGBA bytes so. Raises BadRunLengths for bytes that are not one holding `count` words."""
    if not all(isinstance(b, int) and 0 <= b < 256 for b in packed):
        raise BadRunLengths("its rle is not a list of bytes")
    bits = "".join(f"{b:08b}" for b in packed)
    position = 0

    def read(size: int) -> int:
        nonlocal position
        if position + size > len(bits):
            raise BadRunLengths("its rle ends before its values")
        found = int(bits[position : position + size], 2) if size else 0
        position += size
        return found

    held = read(32)
    if held != count:
        raise BadRunLengths(f"its rle holds {held} values, not {count}")
    word = read(5) + 1
    sizes = [read(4) + 1 for _ in range(4)]
    out = np.zeros(count, dtype=np.uint32)
    index = 0
    while index < count:
        repeated = read(1)
        end = min(count, index + 1 + read(sizes[read(2)]))
        if repeated:
            out[index:end] = read(word)
            index = end
        else:
            while index < end:
                out[index] = read(word)
                index += 1
    return out
