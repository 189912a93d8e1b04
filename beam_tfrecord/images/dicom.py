"""DICOM at full depth: a medical picture's stored values, as pydicom decodes them, never rescaled.

A CT slice holds signed 16-bit stored values that become Hounsfield units only through its rescale
slope and intercept; an MR holds 12 bits in 16; an angiography run holds frames. Converting them to
8-bit JPEG, as a photo pipeline would, throws away what a model of them learns from, so the reader
gives pydicom's `pixel_array` as it is (a `DeepPicture`) and keeps the rescale and what else a
reader of the values needs as its facts. Neither the rescale nor a window is applied: the first is
a fact beside the values, the second a choice of display that each reader makes for itself.
MONOCHROME1 stays as stored too (its low values are white), as its fact says.

pydicom and its decoders are the optional `[dicom]` extra (requirements-dicom.txt), imported
inside the functions that use them, so this module imports, and `is_dicom` answers, without them;
a DICOM read without them is a reject that names the extra.

What a user would expect, where pydicom offers a choice:

- YCbCr (`YBR_FULL`, `YBR_FULL_422`: what JPEG Baseline frames of ultrasound are) is given as RGB,
  as `pixel_array` gives it by default and as every viewer shows it; the `photometric_interpretation`
  fact then says `RGB`, which is what the pixels are.
- `PALETTE COLOR` pictures are given through their palette, as RGB (8 or 16 bits a sample, as
  the palette's entries are): the indices mean nothing without the palette, which no record keeps.
- A Segmentation has Pixel Data (a bit a pixel), but its frames are masks that label another
  series' pictures, not pictures: it is a `no_picture` reject, like an object with no Pixel Data
  at all (a DICOMDIR, an RT Structure Set, a report), its detail naming the SOP class.
- JPEG Lossless and JPEG-LS have no decoder in the extra: the one pydicom uses for JPEG Lossless
  (pylibjpeg-libjpeg) is GPL-3.0, which a user adds knowingly; the `codec_missing` reject names it,
  its licence and the permissive alternatives.
"""

from __future__ import annotations

import contextlib
import io
import struct
import zlib
from typing import TYPE_CHECKING, Any

import numpy as np

from beam_tfrecord import reasons
from beam_tfrecord.images.deep import PAGES_IN_FILE, DeepPicture, Fact
from beam_tfrecord.reasons import Reject

if TYPE_CHECKING:
    from pydicom import Dataset
    from pydicom.pixels.decoders.base import Decoder
    from pydicom.uid import UID

__all__ = ["SOURCE_FORMAT", "is_dicom", "read_dicom"]

SOURCE_FORMAT = "DICOM"
EXTRA = "pip install 'beam-tfrecord[dicom]'"

# Value representations of explicit-VR elements, and those whose length is 4 bytes after 2 reserved.
_VRS = frozenset(
    b"AE AS AT CS DA DS DT FD FL IS LO LT OB OD OF OL OV OW PN SH SL SQ SS ST SV TM UC UI UL UN UR "
    b"US UT UV".split()
)
_LONG_VRS = frozenset(b"OB OD OF OL OV OW SQ SV UC UN UR UT UV".split())
_UNDEFINED = 0xFFFFFFFF
# The Pixel Data elements: integer samples, 32-bit and 64-bit floats.
_PIXEL_TAGS = (0x7FE00010, 0x7FE00008, 0x7FE00009)
# Segmentations: Pixel Data of masks that label other pictures (binary or fractional, label maps,
# heightmaps), never a picture themselves.
_SEGMENTATIONS = frozenset(
    {"1.2.840.10008.5.1.4.1.1.66.4", "1.2.840.10008.5.1.4.1.1.66.7", "1.2.840.10008.5.1.4.1.1.66.8"}
)
# What to install for a transfer syntax pydicom knows but no installed package decodes: the
# packages pydicom's decoders use, with their licences (a GPL one is the user's choice to make).
_JPEG = "pip install pylibjpeg-libjpeg (GPL-3.0; read through the extra's pylibjpeg) or python-gdcm (BSD)"
_JPEG_LS = "pip install pyjpegls (MIT), or pylibjpeg-libjpeg (GPL-3.0) or python-gdcm (BSD)"
_CODECS = {
    "1.2.840.10008.1.2.4.51": _JPEG,  # JPEG Extended at 12 bits: Pillow decodes 8 bits only
    "1.2.840.10008.1.2.4.57": _JPEG,  # JPEG Lossless
    "1.2.840.10008.1.2.4.70": _JPEG,  # JPEG Lossless SV1
    "1.2.840.10008.1.2.4.80": _JPEG_LS,  # JPEG-LS Lossless
    "1.2.840.10008.1.2.4.81": _JPEG_LS,  # JPEG-LS Near Lossless
}


def is_dicom(data: bytes) -> bool:
    """Whether `data` is a DICOM file: the File Format's 128-byte preamble and `DICM`, or, as old
    scanners wrote them (often with no extension), data elements from the first byte: the File Meta
    group (0002) or the dataset's group 0008, in implicit or explicit VR. Without a magic number,
    the first two elements must parse and their tags ascend, which other formats' bytes do not."""
    if data[128:132] == b"DICM":
        return True
    if len(data) < 8:
        return False
    group, element = struct.unpack_from("<HH", data)
    if group not in (0x0002, 0x0008):
        return False
    explicit = (True,) if group == 0x0002 else (True, False)  # File Meta is explicit VR always
    for vr_explicit in explicit:
        end = _element_end(data, 0, vr_explicit)
        if end is None:
            continue
        if end == _UNDEFINED or end == len(data):  # a sequence of undefined length; a lone element
            return True
        if end + 8 <= len(data) and struct.unpack_from("<HH", data, end) > (group, element):
            return True
    return False


def _element_end(data: bytes, position: int, explicit: bool) -> int | None:
    """Where the element at `position` ends, `_UNDEFINED` for a value of undefined length, None
    where its header does not parse or its value runs past the data."""
    if explicit:
        vr = data[position + 4 : position + 6]
        if vr not in _VRS:
            return None
        if vr in _LONG_VRS:
            if data[position + 6 : position + 8] != b"\0\0" or len(data) < position + 12:
                return None
            header, length = 12, struct.unpack_from("<L", data, position + 8)[0]
        else:
            header, length = 8, struct.unpack_from("<H", data, position + 6)[0]
    else:
        header, length = 8, struct.unpack_from("<L", data, position + 4)[0]
    if length == _UNDEFINED:
        return _UNDEFINED
    end = position + header + length
    return end if end <= len(data) else None


def read_dicom(data: bytes, *, max_pixels: int, pages: str = "stack", page: int | None = None) -> DeepPicture:
    """The picture a DICOM file holds, at full depth, or raise `Reject`.

    `pixels` are pydicom's `pixel_array`: the stored values (no rescale, no window), in the
    sample type pydicom gives (uint8, uint16, int16 for Pixel Representation 1, uint32, int32,
    float32 for Float Pixel Data, float64 for Double Float Pixel Data), [H, W, C] for one frame and
    [D, H, W, C] for several, C = 1 (MONOCHROME1, MONOCHROME2) or 3 (RGB, YCbCr given as RGB, a
    palette applied). `facts`: `modality`, `photometric_interpretation` (of the pixels given),
    `rescale_slope` and `rescale_intercept` where the file has them, `transfer_syntax` (its name)
    and `bits_stored`.

    `pages="first"` decodes the first frame alone (the frames left out are the fact
    `pages_left_out`); `page=N` frame N alone (`--pages each`; the fact `pages_in_file` is the
    frame count, and a file of fewer frames is `pages_changed`). `max_pixels` bounds rows x
    columns x the frames decoded, judged from the header before a byte is decoded."""
    if pages not in ("stack", "first"):
        raise ValueError(f"pages must be stack or first, not {pages!r}")
    if not is_dicom(data):
        raise Reject(reasons.NOT_AN_IMAGE, "not a DICOM file (no DICM after the preamble, no data elements)")
    try:
        import pydicom  # noqa: F401  (whether the extra is installed)
    except ImportError:
        raise Reject(reasons.CODEC_MISSING, f"a DICOM file, and pydicom is not installed: {EXTRA}") from None
    ds = _parse(data)
    tag = _pixel_tag(data, ds)
    syntax = ds.file_meta.TransferSyntaxUID
    frames = max(_int(ds, "NumberOfFrames", 1), 1)
    if page is not None and page >= frames:
        raise Reject(reasons.PAGES_CHANGED, f"it holds {frames} frames, no frame {page}: it changed since")
    index = page if page is not None else 0 if pages == "first" and frames > 1 else None
    decoded = frames if index is None else 1
    rows, columns = _int(ds, "Rows", 0), _int(ds, "Columns", 0)
    if not rows or not columns:
        raise Reject(reasons.CORRUPT, f"its header declares {columns}x{rows} pixels (Columns x Rows)")
    if rows * columns * decoded > max_pixels:
        stack = f" x {decoded} frames" if decoded > 1 else ""
        raise Reject(
            reasons.TOO_LARGE,
            f"{columns}x{rows}{stack} = {rows * columns * decoded} pixels is over max_pixels ({max_pixels})",
        )
    decoder = _decoder(ds, syntax)
    _check_length(ds, tag, syntax, frames)
    pixels, properties = _decode(ds, decoder, index)
    photometric = str(properties["photometric_interpretation"])
    bits = ds.get("BitsStored") or ds.get("BitsAllocated")
    if photometric == "PALETTE COLOR":
        from pydicom.pixels import apply_color_lut

        try:
            pixels, photometric = apply_color_lut(pixels, ds), "RGB"
            bits = ds.RedPaletteColorLookupTableDescriptor[2]  # the palette's entries are the samples
        except (AttributeError, IndexError, ValueError) as error:  # a palette absent or malformed
            raise Reject(reasons.CORRUPT, f"its palette cannot be applied: {error}") from None
    samples = 3 if photometric == "RGB" else int(properties["samples_per_pixel"])
    # pydicom leaves a band count of 1 and a frame count of 1 out of the shape; put them back.
    shape = ((decoded,) if decoded > 1 else ()) + (rows, columns, samples)
    pixels = np.ascontiguousarray(pixels.reshape(shape), dtype=pixels.dtype.newbyteorder("="))
    facts = _facts(ds, photometric, syntax.name)
    if bits is not None:
        facts["bits_stored"] = int(bits)
    if page is not None:
        facts[PAGES_IN_FILE] = frames
    elif index is not None:
        facts["pages_left_out"] = frames - 1
    return DeepPicture(pixels, SOURCE_FORMAT, facts)


def _parse(data: bytes) -> Dataset:
    """The dataset, its transfer syntax known (a file with no File Meta, as old scanners wrote,
    is in the encoding pydicom found its elements in), or a reject for a file cut short."""
    import pydicom
    from pydicom.uid import ExplicitVRBigEndian, ExplicitVRLittleEndian, ImplicitVRLittleEndian

    meta_end = _meta_end(data)
    if len(data) < meta_end:
        raise Reject(
            reasons.TRUNCATED, f"the file ends at byte {len(data)}, inside its File Meta (to byte {meta_end})"
        )
    try:
        ds = pydicom.dcmread(io.BytesIO(data), force=True)  # force: a file with no preamble
    except (EOFError, struct.error) as error:  # a length that runs past the end of the data
        raise Reject(reasons.TRUNCATED, f"the file ends inside an element: {error}") from None
    except zlib.error as error:  # Deflated Explicit VR Little Endian, inflated whole
        reason = reasons.TRUNCATED if "truncated" in str(error) else reasons.CORRUPT
        raise Reject(reason, f"its deflated dataset does not inflate: {error}") from None
    except Exception as error:  # pydicom raises what the bytes lead it to: value, key, length errors
        raise Reject(reasons.CORRUPT, f"pydicom cannot parse it: {type(error).__name__}: {error}") from None
    if "TransferSyntaxUID" not in ds.file_meta:
        implicit, little = ds.original_encoding
        ds.file_meta.TransferSyntaxUID = (
            ImplicitVRLittleEndian if implicit else ExplicitVRLittleEndian if little else ExplicitVRBigEndian
        )
    _check_whole(data, ds)
    return ds


def _meta_end(data: bytes) -> int:
    """Where the File Meta group ends, from its group length (the first element, 12 bytes)."""
    start = 132 if data[128:132] == b"DICM" else 0
    if data[start : start + 6] != b"\x02\x00\x00\x00UL":  # no group length: pydicom finds the end
        return start
    if len(data) < start + 12:
        return start + 12
    return start + 12 + struct.unpack_from("<L", data, start + 8)[0]


def _check_whole(data: bytes, ds: Dataset) -> None:
    """Reject a file cut short that pydicom read without a word: an element cut inside its value
    keeps the bytes it has, and one cut inside a sequence or encapsulated Pixel Data (an end of
    file where a delimiter should be) loses the whole dataset, leaving only the File Meta."""
    from pydicom.dataelem import RawDataElement

    if not len(ds):
        raise Reject(
            reasons.TRUNCATED,
            f"the file ends at byte {len(data)} with no dataset after its File Meta: none, or one cut "
            "inside a sequence or its Pixel Data (no delimiter ends them)",
        )
    last = ds.get_item(max(ds.keys()))
    if (
        isinstance(last, RawDataElement)
        and isinstance(last.value, bytes)
        and last.length not in (_UNDEFINED, len(last.value))
    ):
        raise Reject(
            reasons.TRUNCATED,
            f"the file ends at byte {len(data)}, inside element {last.tag}: {len(last.value)} of its "
            f"{last.length} bytes",
        )


def _pixel_tag(data: bytes, ds: Dataset) -> int:
    """Which Pixel Data element holds the picture; a reject for an object that holds none (no
    Pixel Data, or a Segmentation's masks) or a file cut before its Pixel Data."""
    ends_inside_header = _ends_inside_header(data, ds)  # before an element is read (and converted)
    tag = next((t for t in _PIXEL_TAGS if t in ds), None)
    uid = ds.get("SOPClassUID") or ds.file_meta.get("MediaStorageSOPClassUID")
    named = f"{uid.name} ({uid})" if uid and uid.name != uid else uid
    sop_class = f"its SOP class is {named}" if uid else "it names no SOP class"
    if uid in _SEGMENTATIONS:
        frames = _int(ds, "NumberOfFrames", 1)
        raise Reject(
            reasons.NO_PICTURE,
            f"{sop_class}: its {frames} frames are masks that label other pictures, not a picture",
        )
    if tag is not None:
        return tag
    # An image's SOP class or header with no Pixel Data after it was cut before it.
    if ends_inside_header or "Rows" in ds or (uid and "Image Storage" in uid.name):
        raise Reject(
            reasons.TRUNCATED, f"the file ends at byte {len(data)}, before any Pixel Data ({sop_class})"
        )
    raise Reject(reasons.NO_PICTURE, f"no Pixel Data: {sop_class}")


def _ends_inside_header(data: bytes, ds: Dataset) -> bool:
    """Whether 1 to 7 bytes follow the last element: the start of a header pydicom stopped at."""
    from pydicom.dataelem import RawDataElement
    from pydicom.uid import DeflatedExplicitVRLittleEndian

    last = ds.get_item(max(ds.keys()))
    if ds.file_meta.TransferSyntaxUID == DeflatedExplicitVRLittleEndian:
        return False  # its positions are in the inflated data, and zlib refuses a cut stream
    if not isinstance(last, RawDataElement) or last.length == _UNDEFINED:
        return False
    return 0 < len(data) - (last.value_tell + last.length) < 8


def _check_length(ds: Dataset, tag: int, syntax: UID, frames: int) -> None:
    """Reject Pixel Data shorter than its header says, before a decoder meets it: native samples
    fewer than rows x columns x frames, or an encapsulated fragment cut or frames missing."""
    value = ds[tag].value
    if not syntax.is_encapsulated:
        from pydicom.pixels.utils import get_expected_length

        try:
            expected = get_expected_length(ds, "bytes")
        except (AttributeError, TypeError, ValueError) as error:  # an element it needs is absent
            raise Reject(reasons.CORRUPT, f"its image header is incomplete: {error}") from None
        if len(value) < expected:
            raise Reject(
                reasons.TRUNCATED,
                f"its Pixel Data holds {len(value)} bytes of the {expected} its header declares "
                f"({ds.Rows}x{ds.Columns}" + (f", {frames} frames)" if frames > 1 else ")"),
            )
        return
    from pydicom.encaps import parse_fragments

    try:
        count, offsets = parse_fragments(value)
    except ValueError as error:
        raise Reject(reasons.CORRUPT, f"its encapsulated Pixel Data does not parse: {error}") from None
    if offsets:
        last = offsets[-1]
        length = struct.unpack_from("<L", value, last + 4)[0]
        if last + 8 + length > len(value):
            raise Reject(
                reasons.TRUNCATED,
                f"its encapsulated Pixel Data ends inside fragment {count - 1}: "
                f"{len(value) - last - 8} of its {length} bytes",
            )
    if count - 1 < frames:  # the first item is the Basic Offset Table, empty or not
        raise Reject(
            reasons.TRUNCATED, f"its encapsulated Pixel Data holds {max(count - 1, 0)} of {frames} frames"
        )


def _decoder(ds: Dataset, syntax: UID) -> Decoder:
    """pydicom's decoder for the transfer syntax, or a reject naming what to install."""
    from pydicom.pixels import get_decoder

    try:
        decoder = get_decoder(syntax)
    except NotImplementedError:
        raise Reject(
            reasons.UNSUPPORTED_FORMAT,
            f"its transfer syntax {syntax.name} ({syntax}) is one no package of pydicom's decodes "
            "(video, or a compression newer than the installed pydicom)",
        ) from None
    plugins = set(decoder.available_plugins)
    if syntax == "1.2.840.10008.1.2.4.51" and _int(ds, "BitsStored", 8) > 8:
        plugins.discard("pillow")  # Pillow's libjpeg decodes 8-bit JPEG only
    if decoder.is_native or plugins:
        return decoder
    install = _CODECS.get(str(syntax), f"{EXTRA} (its pylibjpeg-openjpeg and pylibjpeg-rle)")
    raise Reject(
        reasons.CODEC_MISSING,
        f"its transfer syntax {syntax.name} ({syntax}) needs a decoder that is not installed: {install}",
    )


def _decode(ds: Dataset, decoder: Decoder, index: int | None) -> tuple[np.ndarray, dict[str, Any]]:
    """`pixel_array`'s own call (pydicom.pixels.pixel_array for a dataset), with the properties
    of what it gave (the photometric interpretation after YCbCr became RGB); `index`: that
    frame alone, the others never decoded."""
    from pydicom.pixels import as_pixel_options

    try:
        return decoder.as_array(ds, index=index, validate=True, raw=False, **as_pixel_options(ds))
    except Exception as error:  # a decoder's own error on bad bytes, whatever its type
        raise Reject(reasons.CORRUPT, f"{type(error).__name__}: {error}") from None


def _facts(ds: Dataset, photometric: str, syntax_name: str) -> dict[str, Fact]:
    """What a reader of the values needs: what the pixels are, how they were stored, and the
    rescale to real units (top level, or an enhanced multi-frame's shared functional group)."""
    facts: dict[str, Fact] = {"photometric_interpretation": photometric, "transfer_syntax": syntax_name}
    if "Modality" in ds:
        facts["modality"] = str(ds.Modality)
    source = ds
    if "RescaleSlope" not in ds and "SharedFunctionalGroupsSequence" in ds:
        shared = ds.SharedFunctionalGroupsSequence[0]
        transform = shared.get("PixelValueTransformationSequence")
        source = transform[0] if transform else ds
    for keyword, fact in (("RescaleSlope", "rescale_slope"), ("RescaleIntercept", "rescale_intercept")):
        with contextlib.suppress(TypeError, ValueError):  # absent, empty or not one number
            facts[fact] = float(source.get(keyword))
    return facts


def _int(ds: Dataset, keyword: str, default: int) -> int:
    """An integer header value (Number of Frames is an IS string), `default` where absent."""
    value = ds.get(keyword)
    try:
        return int(value) if value not in (None, "") else default
    except (TypeError, ValueError):
        raise Reject(reasons.CORRUPT, f"its {keyword} is {value!r}, not a number") from None
