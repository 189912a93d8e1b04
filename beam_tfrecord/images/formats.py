"""Which picture formats become records, which are refused and why, and what a file's name says.

Every format that Pillow (and pillow-heif, for HEIC/HEIF) decodes inside the process is accepted.
Refused are the formats whose decoding would start another program (EPS and PostScript run
Ghostscript) or that are not raster pictures Pillow can decode here (vector metafiles, video, the
scientific containers Pillow only identifies). An untrusted input never reaches an external
program: `Image.open` is only ever called with `formats=ACCEPTED_FORMATS` before a decode, and
the refused plugins are only asked to identify a header, never to load it.

A test checks that every plugin Pillow registers is in exactly one of the two lists, so a Pillow
upgrade that adds a plugin fails the tests until someone decides which list it belongs to.
"""

from __future__ import annotations

import posixpath
import warnings
from collections.abc import Mapping

from PIL import Image

from beam_tfrecord.images import quiet

__all__ = [
    "ACCEPTED_FORMATS",
    "REFUSED_FORMATS",
    "extension_format",
    "is_lossless_webp",
    "register_plugins",
    "sniff_format",
    "wrong_extension",
]

# Tried in this order by `Image.open(formats=...)`: the common formats first, because each
# plugin's header check costs a little on every input.
ACCEPTED_FORMATS: tuple[str, ...] = (
    "JPEG",  # also MPO (several JPEGs in one file, from cameras), which JPEG's plugin opens
    "PNG",
    "WEBP",
    "HEIF",  # pillow-heif: HEIC from phones, HEIF
    "AVIF",
    "GIF",
    "TIFF",
    "BMP",
    "DIB",
    "PPM",  # also PGM, PBM, PNM and PFM (float)
    "JPEG2000",
    "ICO",
    "CUR",
    "ICNS",
    "TGA",
    "QOI",
    "DDS",
    "BLP",
    "PCX",
    "DCX",
    "SGI",
    "SPIDER",
    "IM",
    "MSP",
    "XBM",
    "XPM",
    "PSD",
    "FLI",
    "FITS",
    "FTEX",
    "GBR",
    "IMT",
    "MCIDAS",
    "PCD",
    "PIXAR",
    "SUN",
    "XVTHUMB",
)

REFUSED_FORMATS: Mapping[str, str] = {
    "EPS": "EPS and PostScript are decoded by Ghostscript, an external program, never run on an input",
    "PDF": "PDF is a document format, not a picture",
    "WMF": "WMF and EMF are vector metafiles that Pillow only rasterizes through Windows",
    "MPEG": "MPEG is video; Pillow identifies it but cannot decode it",
    "BUFR": "BUFR is a weather data container that Pillow only identifies",
    "GRIB": "GRIB is a weather data container that Pillow only identifies",
    "HDF5": "HDF5 is a scientific data container that Pillow only identifies",
    "IPTC": "IPTC/NAA wraps a file that Pillow opens with every plugin, EPS (Ghostscript) included",
}

# Formats that are one family for the purpose of a file's extension.
_SAME_FAMILY = {"MPO": "JPEG", "DIB": "BMP", "CUR": "ICO", "DCX": "PCX"}

# Signatures of formats whose header Pillow could not parse: the reject then says "a TIFF that
# cannot be read" rather than "not an image", which is what a cut-short file is.
_SIGNATURES: tuple[tuple[int, bytes, str], ...] = (
    (0, b"\xff\xd8\xff", "JPEG"),
    (0, b"\x89PNG\r\n\x1a\n", "PNG"),
    (0, b"GIF8", "GIF"),
    (0, b"II*\x00", "TIFF"),
    (0, b"MM\x00*", "TIFF"),
    (0, b"II+\x00", "TIFF"),  # BigTIFF
    (0, b"MM\x00+", "TIFF"),
    (8, b"WEBP", "WEBP"),
    (4, b"ftypheic", "HEIF"),
    (4, b"ftypheix", "HEIF"),
    (4, b"ftypmif1", "HEIF"),
    (4, b"ftypmsf1", "HEIF"),
    (4, b"ftypavif", "AVIF"),
    (4, b"ftypavis", "AVIF"),
    (0, b"\x00\x00\x00\x0cjP  \r\n\x87\n", "JPEG2000"),
    (0, b"\xff\x4f\xff\x51", "JPEG2000"),
    (0, b"qoif", "QOI"),
    (0, b"DDS ", "DDS"),
    (0, b"8BPS", "PSD"),
    (0, b"icns", "ICNS"),
    (0, b"%PDF-", "PDF"),
    (0, b"%!PS", "EPS"),
)

_registered = False


def register_plugins() -> None:
    """Register every Pillow plugin and pillow-heif's HEIF opener, and silence Pillow's warnings
    (they name no file; the outcome does), once per process.

    Called before the first decode (and so in every worker process), never at import, so that
    importing the library changes nothing in a user's process until it converts something."""
    global _registered
    if _registered:
        return
    import pillow_heif

    Image.init()
    pillow_heif.register_heif_opener()
    # Pillow warns on odd headers (corrupt EXIF, a cut TIFF directory) through `warnings`: the
    # file's outcome says what matters, the terminal should not. Installed once, because
    # `warnings.catch_warnings` per decode is not thread-safe (it swaps process-wide state).
    warnings.filterwarnings("ignore", module=r"(PIL|pillow_heif)(\.|$)")
    warnings.filterwarnings("ignore", category=Image.DecompressionBombWarning)
    # Pillow's own log records of a conversion go into the reject's detail (quiet.pillow_log).
    quiet.quiet_pillow_loggers()
    _registered = True


def sniff_format(data: bytes) -> str | None:
    """The format a file's first bytes announce, for files whose header Pillow cannot parse."""
    for offset, signature, name in _SIGNATURES:
        if data[offset : offset + len(signature)] == signature:
            return name
    return None


def is_lossless_webp(data: bytes) -> bool:
    """A WebP file whose first chunk is VP8L (lossless): it is stored as PNG, not JPEG."""
    return data[8:16] == b"WEBPVP8L" or (data[8:16] == b"WEBPVP8X" and b"VP8L" in data[30:4096])


def extension_format(relpath: str) -> str | None:
    """The format a file's extension names (`photo.JPG` -> JPEG), None for an unknown one."""
    register_plugins()
    extension = posixpath.splitext(relpath)[1].lower()
    return Image.registered_extensions().get(extension)


def wrong_extension(relpath: str, source_format: str) -> str | None:
    """Why the name misleads, e.g. "PNG named .jpg", or None when the name is right or says
    nothing (no extension, or one no picture format uses: `.dat`, `.bin`)."""
    named = extension_format(relpath)
    if named is None:
        return None
    if _SAME_FAMILY.get(named, named) == _SAME_FAMILY.get(source_format, source_format):
        return None
    extension = posixpath.splitext(relpath)[1]
    return f"{source_format} named {extension}"
