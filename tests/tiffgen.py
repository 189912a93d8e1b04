"""TIFFs made by the tests themselves, written with tifffile's writer the way the tools that make
them write them: a microscope's 16-bit planes (PackBits, Deflate), a 16-bit RGB saved with LZW,
a Sentinel-2 tile as EuroSAT holds it (13 uint16 bands, band-interleaved, tiled, GeoTIFF keys),
a 4-band float64 reflectance tile, SAR tiles of complex samples (complex float, and the complex
int16 of an SLC), a float32 depth map in metres with holes, z-stacks (ImageJ hyperstacks, OME,
plain page sequences), pyramids (overviews in the page chain as GDAL writes them, SubIFDs as OME
and QuPath do) and thumbnails, BigTIFF and big-endian files; and broken ones (a missing tile, a
tile past the end, a codec imagecodecs lacks, a header claiming a huge page).

Each maker returns a `Made`: the file's bytes and what tifffile reads back for the picture (its
`asarray()` and axes), which is the truth `images.tiff.read_tiff` is held to. Pictures are small
and deterministic (seeded numpy), some with sizes that are not a multiple of the tile size.
"""

from __future__ import annotations

import io
import struct
from dataclasses import dataclass
from typing import Any

import numpy as np
import tifffile

# GeoKeyDirectoryTag (34735) of a UTM 33N picture, as GDAL writes it: version 1.1.0, 4 keys:
# GTModelType = projected, GTRasterType = PixelIsArea, ProjectedCSType = EPSG:32633, metres.
UTM33N_KEYS = (1, 1, 0, 4, 1024, 0, 1, 1, 1025, 0, 1, 1, 3072, 0, 1, 32633, 3076, 0, 1, 9001)
# The same for WGS 84 longitude/latitude (GeographicType = EPSG:4326), PixelIsPoint.
WGS84_POINT_KEYS = (1, 1, 0, 3, 1024, 0, 1, 2, 1025, 0, 1, 2, 2048, 0, 1, 4326)
EUROSAT_ORIGIN = (499_980.0, 5_200_020.0)  # a 10 m Sentinel-2 tile's corner in UTM 33N


@dataclass(frozen=True)
class Made:
    """A generated file and what tifffile reads back for its picture."""

    data: bytes
    array: np.ndarray  # tifffile's asarray() of the picture's series (its own squeezed shape)
    axes: str  # tifffile's axes for `array` ("SYX", "TZCYX", ...)
    written: np.ndarray  # what the writer was given


def _rng(seed: int) -> np.random.Generator:
    return np.random.default_rng(seed)


def _write(array: np.ndarray, **options: Any) -> bytes:
    out = io.BytesIO()
    tifffile.imwrite(out, array, **options)
    return out.getvalue()


def _made(data: bytes, written: np.ndarray, series: int = 0) -> Made:
    with tifffile.TiffFile(io.BytesIO(data)) as tif:
        picture = tif.series[series]
        return Made(data, picture.asarray(), picture.axes, written)


def microscopy_gray16(compression: str = "packbits", seed: int = 1) -> Made:
    """A 16-bit fluorescence plane as a camera's software saves it: values up to ~44,000 over a
    dark background, a pixel size in micrometres, PackBits or Deflate strips."""
    rng = _rng(seed)
    y, x = np.mgrid[0:37, 0:45]
    spot = 44_000 * np.exp(-((x - 20) ** 2 + (y - 15) ** 2) / 60.0)
    plane = (spot + rng.integers(90, 110, spot.shape)).clip(0, 44_100).astype(np.uint16)
    data = _write(
        plane,
        photometric="minisblack",
        compression=compression,
        rowsperstrip=8,
        resolution=(1 / 0.65, 1 / 0.65),
        resolutionunit="CENTIMETER",
        metadata=None,
    )
    return _made(data, plane)


def rgb16(seed: int = 2) -> Made:
    """A 16-bit RGB photograph as an editor saves it: LZW with the horizontal predictor."""
    plane = _rng(seed).integers(0, 65_536, (29, 33, 3), dtype=np.uint16)
    data = _write(plane, photometric="rgb", compression="lzw", predictor=True, metadata=None)
    return _made(data, plane)


def eurosat_tile(seed: int = 3, height: int = 40, width: int = 56) -> Made:
    """A Sentinel-2 tile as EuroSAT's multispectral set holds it: 13 uint16 bands, one plane
    each (planar separate), 16x16 Deflate tiles (partial at the edges), GeoTIFF keys of UTM 33N
    with 10 m pixels (ModelPixelScale, ModelTiepoint, GeoKeyDirectory)."""
    bands = _rng(seed).integers(0, 10_000, (13, height, width), dtype=np.uint16)
    x0, y0 = EUROSAT_ORIGIN
    data = _write(
        bands,
        photometric="minisblack",
        planarconfig="separate",
        tile=(16, 16),
        compression="zlib",
        metadata=None,
        extratags=[
            (33550, "d", 3, (10.0, 10.0, 0.0)),
            (33922, "d", 6, (0.0, 0.0, 0.0, x0, y0, 0.0)),
            (34735, "H", len(UTM33N_KEYS), UTM33N_KEYS),
        ],
    )
    return _made(data, bands)


def float64_tile(seed: int = 4) -> Made:
    """A 4-band (R, G, B, NIR) float64 reflectance tile, pixel-interleaved and tiled, placed by a
    ModelTransformation matrix in WGS 84 longitude/latitude, its values at pixel centres."""
    tile = _rng(seed).random((20, 24, 4))
    matrix = (0.001, 0.0, 0.0, 14.5, 0.0, -0.001, 0.0, 46.1, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 1.0)
    data = _write(
        tile,
        photometric="minisblack",
        planarconfig="contig",
        tile=(16, 16),
        compression="zlib",
        metadata=None,
        extratags=[(34264, "d", 16, matrix), (34735, "H", len(WGS84_POINT_KEYS), WGS84_POINT_KEYS)],
    )
    return _made(data, tile)


def sar_complex64(seed: int = 5) -> Made:
    """A dual-polarisation SAR tile (VV, VH) of complex float samples (GDAL's CFloat32), one
    plane per band."""
    rng = _rng(seed)
    shape = (2, 18, 22)
    tile = (rng.normal(size=shape) + 1j * rng.normal(size=shape)).astype(np.complex64)
    data = _write(tile, photometric="minisblack", planarconfig="separate", metadata=None)
    return _made(data, tile)


def sar_cint16(seed: int = 6) -> Made:
    """A SAR SLC tile as Sentinel-1 delivers one: complex int16 samples (SampleFormat 5, 32 bits a
    sample, GDAL's CInt16), which tifffile gives as complex64. tifffile's writer has no complex
    integers, so the pairs are written as int32 and the sample format set as GDAL sets it."""
    pairs = _rng(seed).integers(-2_000, 2_000, (14, 2 * 17), dtype=np.int16)
    data = bytearray(_write(pairs.view(np.int32), photometric="minisblack", metadata=None))
    with tifffile.TiffFile(io.BytesIO(bytes(data))) as tif:
        where = tif.pages[0].tags[339].valueoffset  # SampleFormat, held in its entry
    struct.pack_into("<H", data, where, 5)
    written = pairs[:, 0::2].astype(np.complex64) + 1j * pairs[:, 1::2].astype(np.complex64)
    return _made(bytes(data), written)


def depth_map(seed: int = 7) -> Made:
    """A float32 depth map in metres as a depth camera's tools save it: NaN where no depth was
    measured, Deflate with the floating-point predictor."""
    y, x = np.mgrid[0:30, 0:40]
    depth = (0.5 + 0.02 * x + 0.01 * y + _rng(seed).normal(0, 0.001, x.shape)).astype(np.float32)
    depth[5:9, 10:14] = np.nan
    data = _write(depth, photometric="minisblack", compression="zlib", predictor=True, metadata=None)
    return _made(data, depth)


def imagej_hyperstack(seed: int = 8) -> Made:
    """A 16-bit ImageJ hyperstack, 2 time points x 3 slices x 2 channels, as ImageJ saves one
    (one page per plane, pages in TZC order, its axes in the ImageJ description)."""
    stack = _rng(seed).integers(0, 44_000, (2, 3, 2, 12, 15), dtype=np.uint16)
    data = _write(stack, imagej=True, metadata={"axes": "TZCYX", "spacing": 0.5, "unit": "um"})
    return _made(data, stack)


def imagej_zstack(seed: int = 9) -> Made:
    """A plain 16-bit ImageJ z-stack of 5 slices, one channel."""
    stack = _rng(seed).integers(0, 44_000, (5, 12, 15), dtype=np.uint16)
    data = _write(stack, imagej=True, metadata={"axes": "ZYX"})
    return _made(data, stack)


def plain_zstack(seed: int = 10) -> Made:
    """A z-stack of 4 pages with no description at all, as libtiff-based tools write a page
    sequence (tifffile groups it as axes `IYX`)."""
    stack = _rng(seed).integers(0, 4_096, (4, 11, 13), dtype=np.uint16)
    out = io.BytesIO()
    with tifffile.TiffWriter(out) as writer:
        for plane in stack:
            writer.write(plane, photometric="minisblack", compression="zlib", metadata=None)
    return _made(out.getvalue(), stack)


def ome_stack(seed: int = 11) -> Made:
    """An OME-TIFF of 3 slices x 2 channels (uint16), as Bio-Formats writers save one."""
    stack = _rng(seed).integers(0, 44_000, (3, 2, 10, 14), dtype=np.uint16)
    data = _write(stack, ome=True, photometric="minisblack", metadata={"axes": "ZCYX"})
    return _made(data, stack)


def gdal_overviews(seed: int = 12) -> Made:
    """A tiled single-band GeoTIFF with two overviews after it in the page chain, each marked
    reduced-resolution (NewSubfileType 1), as `gdaladdo` leaves one."""
    full = _rng(seed).integers(0, 65_536, (64, 48), dtype=np.uint16)
    out = io.BytesIO()
    with tifffile.TiffWriter(out) as writer:
        writer.write(full, tile=(16, 16), photometric="minisblack", metadata=None)
        writer.write(full[::2, ::2], tile=(16, 16), photometric="minisblack", subfiletype=1, metadata=None)
        writer.write(full[::4, ::4], tile=(16, 16), photometric="minisblack", subfiletype=1, metadata=None)
    return _made(out.getvalue(), full)


def pyramid_with_thumbnail(seed: int = 13) -> Made:
    """A whole-slide-style RGB pyramid: levels in SubIFDs of the full-resolution page (as OME
    and QuPath write them), then a small thumbnail page not marked reduced."""
    full = _rng(seed).integers(0, 256, (64, 64, 3), dtype=np.uint8)
    out = io.BytesIO()
    with tifffile.TiffWriter(out) as writer:
        writer.write(full, tile=(16, 16), photometric="rgb", subifds=2, compression="zlib", metadata=None)
        for step in (2, 4):
            writer.write(full[::step, ::step], tile=(16, 16), photometric="rgb", subfiletype=1, metadata=None)
        writer.write(full[::8, ::8], photometric="rgb", metadata=None)  # the thumbnail
    return _made(out.getvalue(), full)


def thumbnail_first(seed: int = 14) -> Made:
    """A reduced-resolution preview written before the full picture, as some cameras' TIFFs hold
    one: the picture is tifffile's second series."""
    full = _rng(seed).integers(0, 4_096, (32, 40), dtype=np.uint16)
    out = io.BytesIO()
    with tifffile.TiffWriter(out) as writer:
        writer.write(full[::4, ::4], photometric="minisblack", subfiletype=1, metadata=None)
        writer.write(full, photometric="minisblack", metadata=None)
    return _made(out.getvalue(), full, series=1)


def pages_of_two_sizes(seed: int = 15) -> Made:
    """A scanned document of two pages of different sizes (8-bit gray): two series, the second
    left out of the picture."""
    rng = _rng(seed)
    first = rng.integers(0, 256, (30, 20), dtype=np.uint8)
    out = io.BytesIO()
    with tifffile.TiffWriter(out) as writer:
        writer.write(first, photometric="minisblack", metadata=None)
        writer.write(rng.integers(0, 256, (25, 20), dtype=np.uint8), photometric="minisblack", metadata=None)
    return _made(out.getvalue(), first)


def bigtiff_big_endian(seed: int = 16) -> Made:
    """A BigTIFF in big-endian byte order, uncompressed int16 (what tifffile hands back in the
    file's byte order)."""
    plane = _rng(seed).integers(-30_000, 30_000, (17, 19), dtype=np.int16)
    data = _write(plane, bigtiff=True, byteorder=">", photometric="minisblack", metadata=None)
    return _made(data, plane)


def bilevel(seed: int = 17) -> Made:
    """A 1-bit scan (MinIsBlack), which tifffile gives as bool."""
    plane = _rng(seed).random((21, 30)) > 0.5
    return _made(_write(plane, photometric="minisblack", metadata=None), plane)


# Broken files ----------------------------------------------------------------------------------


def _tag_entry(data: bytes, code: int, page: int = 0) -> tuple[int, int, int]:
    """Where tag `code` of a page keeps its values (in its entry when they fit there): (byte
    offset, struct code of one value, count)."""
    with tifffile.TiffFile(io.BytesIO(data)) as tif:
        tag = tif.pages[page].aspage().tags[code]  # (a later page may be a tag-less frame)
        return tag.valueoffset, {3: "H", 4: "I", 16: "Q"}[int(tag.dtype)], tag.count


def with_tile(
    data: bytes, tile: int, *, offset: int | None = None, count: int | None = None, page: int = 0
) -> bytes:
    """`data` with one tile's (or strip's) offset or byte count replaced: 0 for a missing tile
    (a sparse file, a writer that stopped), a large offset for one that lies past the end."""
    changed = bytearray(data)
    order = "<" if data[:2] == b"II" else ">"
    with tifffile.TiffFile(io.BytesIO(data)) as tif:
        tiled = tif.pages[page].aspage().is_tiled
    codes = (324, 325) if tiled else (273, 279)  # TileOffsets, TileByteCounts or the strips'
    for code, value in zip(codes, (offset, count), strict=True):
        if value is None:
            continue
        where, kind, _ = _tag_entry(data, code, page)
        struct.pack_into(order + kind, changed, where + tile * struct.calcsize(kind), value)
    return bytes(changed)


def with_compression(data: bytes, compression: int) -> bytes:
    """`data` with its first page's Compression tag set to another scheme (JETRAW: 48124, which
    imagecodecs' wheels are built without)."""
    changed = bytearray(data)
    where, kind, _ = _tag_entry(data, 259)
    order = "<" if data[:2] == b"II" else ">"
    struct.pack_into(order + kind, changed, where, compression)
    return bytes(changed)


def huge_page(width: int = 100_000, height: int = 80_000) -> bytes:
    """A little-endian TIFF whose header claims a page of `width` x `height` 16-bit pixels, with
    the 64 bytes of one tiny strip behind it: only a reader that trusts the header decodes it."""
    data = bytearray(_write(np.zeros((4, 8), np.uint16), photometric="minisblack", metadata=None))
    for code, value in ((256, width), (257, height)):
        where, kind, _ = _tag_entry(bytes(data), code)
        struct.pack_into("<" + kind, data, where, value)
    return bytes(data)


def imagej_claiming_more_slices(seed: int = 9) -> Made:
    """An ImageJ z-stack whose description claims 7 slices where the file holds 5 pages (a stack
    some tool cut short and left the description of): tifffile logs that the ImageJ metadata is
    invalid and reads the 5 pages as a plain sequence."""
    made = imagej_zstack(seed)
    data = made.data.replace(b"slices=5\n", b"slices=7\n", 1)
    return _made(data, made.written)
