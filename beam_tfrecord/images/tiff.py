"""TIFF and GeoTIFF read at full depth through tifffile: what microscopes, satellites and scanners
write (16-bit and float samples, any band count, stacks of pages), which Pillow reads only in
part and at 8 bits.

What a file becomes (a `DeepPicture`):

- The picture is the file's first series as tifffile groups pages (an ImageJ hyperstack, an
  OME-TIFF's image, pages of one shape and sample type). Reduced-resolution pages (a GDAL
  overview, a pyramid's levels, whether in the page chain or in SubIFDs) are smaller copies of
  it and are left out; where the first series is itself reduced (a thumbnail written first), the
  first full-resolution series is the picture. Pages of any other series (a thumbnail page not
  marked reduced, scanned pages of other sizes) are left out and counted in the fact
  `pages_left_out`, so a caller can say so.
- Bands (C) are a page's samples (RGB, the 13 bands of a Sentinel-2 tile, planar-separate or
  not) and, where the file declares a channel axis (ImageJ's and OME's `C`: each channel its own
  page), the channels: a two-channel fluorescence stack is [Z, H, W, 2], not [2Z, H, W, 1].
  Every other axis (Z, T, pages of unknown meaning) is flattened, in the file's order, into D;
  a picture with D = 1 is [H, W, C]. `pages="first"` keeps the first position of D only, and
  decodes only its pages.
- `page=N` (`--pages each`: every page an input of its own) reads the file's page N alone, as
  [H, W, C]: the file's pages are the positions of D of each full-resolution series in turn (the
  picture's, then those of other series, a document's page of another size among them), as
  `plan.pages` counts them while planning; the fact `pages_in_file` says how many there are.
- Values are what tifffile's `asarray()` gives: the stored sample type (bool for 1-bit, uint8
  for 2..8 bits, uint16 for 9..16, float32 for float24, float16 kept), stored values (a
  palette's indices, not colours; MinIsWhite not inverted), in native byte order, C-contiguous.
  A complex sample (complex float, or the complex integers of a SAR SLC, which tifffile gives
  as complex64) is two bands of its float type (real, imaginary), band by band.
- A GeoTIFF's `geo_transform` is GDAL's six numbers, as GDAL derives them by default: from
  ModelPixelScale and the first ModelTiepoint (pixel height negated, as GDAL does) or from
  ModelTransformation, moved half a pixel where the raster type is PixelIsPoint. `crs` is
  `EPSG:<code>` from ProjectedCSTypeGeoKey, else GeographicTypeGeoKey; a user-defined CRS
  (32767) gives none.

What is refused, from the header before any pixel is decoded: a page over `max_pixels`, a
picture over `max_bytes` (a record holds at most 2 GiB), a file whose tables point past its end
(`truncated`: cut short, or an offset corrupted past it, the detail says where), a strip or tile
missing (offset or byte count 0: `corrupt`, GDAL's sparse files included, whose missing tiles
tifffile would fill with zeros), a compression whose codec is not installed
(`unsupported_format`, naming the package). What tifffile logs meanwhile is kept off the
terminal and added to the reject's detail (`images.quiet.tifffile_log`). Decoding runs in the
calling thread: parallelism comes from the runner.
"""

from __future__ import annotations

import io
import math
import struct
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import tifffile

from beam_tfrecord import reasons
from beam_tfrecord.images.deep import PAGES_IN_FILE, DeepPicture, Fact
from beam_tfrecord.images.quiet import Captured, tifffile_log
from beam_tfrecord.reasons import Reject

__all__ = ["MAX_BYTES", "PAGES", "SOURCE_FORMAT", "is_tiff", "read_tiff"]

SOURCE_FORMAT = "TIFF"
# What `pages` may ask: every page of the picture, or the first position of its stack.
PAGES = ("stack", "first")
# A record is one protobuf message, which cannot exceed 2 GiB: a larger picture cannot be stored.
MAX_BYTES = 2**31 - 1

_MAGICS = (b"II*\x00", b"MM\x00*", b"II+\x00", b"MM\x00+")  # classic and BigTIFF, both orders
_BAND_AXES = "CS"  # a channel axis (pages) and a page's samples
_USER_DEFINED = 32767  # GeoTIFF's code for a CRS given by parameters, not by an EPSG code
_PIXEL_IS_POINT = 2  # GTRasterTypeGeoKey's RasterPixelIsPoint
# TIFF field types -> bytes per value (TIFF 6 and BigTIFF); others are skipped, as readers do.
_TYPE_SIZES = {1: 1, 2: 1, 3: 2, 4: 4, 5: 8, 6: 1, 7: 1, 8: 2, 9: 4, 10: 8, 11: 4, 12: 8, 13: 4}
_TYPE_SIZES |= {16: 8, 17: 8, 18: 8}
# Codecs imagecodecs' wheels are built without, and what brings them.
_EXTERNAL_CODECS = {48124: "Dotphoton's jetraw library, and imagecodecs built with it"}


def is_tiff(data: bytes) -> bool:
    """Whether `data` starts as a TIFF does: classic or BigTIFF, little- or big-endian."""
    return data[:4] in _MAGICS


def read_tiff(
    data: bytes,
    *,
    max_pixels: int,
    pages: str = "stack",
    page: int | None = None,
    max_bytes: int = MAX_BYTES,
) -> DeepPicture:
    """Decode a TIFF's picture at full depth, or raise `Reject` with a reason.

    Args:
      data: the file's bytes.
      max_pixels: a page of more pixels (height x width) is `too_large`, from its header.
      pages: "stack" keeps every page of the picture ([D, H, W, C] when there are several),
        "first" the first position of the stack only ([H, W, C]).
      page: the file's page N alone ([H, W, C]; see the module's docstring), `pages` aside; a
        file of fewer pages is `pages_changed`.
      max_bytes: a picture whose pixels would take more is `too_large`, before decoding.
    """
    if pages not in PAGES:
        raise ValueError(f"pages must be one of {PAGES}, not {pages!r}")
    with tifffile_log() as logged:
        try:
            return _read(data, max_pixels, pages, max_bytes, page)
        except Reject as reject:
            if not logged:
                raise
            said = Captured("\n".join(logged)).summary()
            raise reject.with_detail(f"{reject.detail} (tifffile: {said})") from None


def _read(data: bytes, max_pixels: int, pages: str, max_bytes: int, page: int | None) -> DeepPicture:
    if not data:
        raise Reject(reasons.EMPTY, "the file has zero bytes")
    if not is_tiff(data):
        if len(data) < 4 and any(magic.startswith(data) for magic in _MAGICS):
            raise Reject(reasons.TRUNCATED, f"TIFF data ends at byte {len(data)}, inside its header")
        raise Reject(reasons.NOT_AN_IMAGE, "not a TIFF: no TIFF or BigTIFF header")
    _walk_ifds(data)  # every table lies inside the data: what tifffile reads next is there
    try:
        tif = tifffile.TiffFile(io.BytesIO(data))
    except Exception as error:
        raise _reject(error, "reading its header") from None
    with tif:
        try:
            if page is None:
                picture, left_out = _picture_series(tif)
                position, count = (0 if pages == "first" else None), 0
            else:
                (picture, position, count), left_out = _page_series(tif, page), 0
            plan = _Plan.of(picture)
            keyframe = picture.keyframe
            _check_header(keyframe, plan, max_pixels, max_bytes, position is not None)
            some = position is not None and plan.complete and plan.pages > 1
            indices = plan.position_pages(position) if some and position is not None else None
            array, axes = _decode(tif, picture, plan, data, indices)
        except Reject:
            raise
        except Exception as error:  # a tag of the wrong type or count, a field out of range
            raise _reject(error, "reading its pages") from None
        facts = _geo_facts(keyframe)
    stack = _arranged(array, axes, plan)
    if pages == "first" and page is None:
        left_out += plan.pages - len(plan.position_pages(0))
    if left_out:
        facts["pages_left_out"] = left_out
    if count:
        facts[PAGES_IN_FILE] = count
    if position is None:
        return DeepPicture(stack[0] if len(stack) == 1 else stack, SOURCE_FORMAT, facts)
    # The pages decoded hold the position's page of the grid, with its slices within a page.
    return DeepPicture(stack[position % plan.inpage_depth if some else position], SOURCE_FORMAT, facts)


def _reject(error: Exception, doing: str) -> Reject:
    """A tifffile or codec error as a reason: `truncated` where it says the data ends, else
    `corrupt` (the structure was checked against the data's length first, so what fails now is
    what the bytes say)."""
    if isinstance(error, Reject):
        return error
    if isinstance(error, MemoryError):
        return Reject(reasons.TOO_LARGE, f"out of memory {doing}")
    message = f"{type(error).__name__}: {error}"[:500]
    lowered = message.lower()
    ends = isinstance(error, EOFError) or "truncated" in lowered or "end of file" in lowered
    return Reject(reasons.TRUNCATED if ends else reasons.CORRUPT, f"{doing}: {message}")


def _walk_ifds(data: bytes) -> None:
    """Follow the chain of image file directories as a reader does, and check that each, and the
    value each of its tags points at, lies inside `data`. tifffile stops at a page that does not,
    with a log line, and returns fewer pages or zeros: a file cut short would pass for a smaller
    one. Cheap: a few struct reads per tag, no pixel."""
    order = "<" if data[:2] == b"II" else ">"
    big = data[2:4] in (b"+\x00", b"\x00+")
    header, count_format, entry, offset_format = (16, "Q", 20, "Q") if big else (8, "H", 12, "I")
    offset_size = struct.calcsize(offset_format)
    count_size = struct.calcsize(count_format)
    size = len(data)
    if size < header:
        raise Reject(reasons.TRUNCATED, f"TIFF data ends at byte {size}, inside its {header}-byte header")
    (offset,) = struct.unpack_from(order + offset_format, data, header - offset_size)
    seen: set[int] = set()
    index = 0
    while offset:
        where = f"the directory of page {index} (byte {offset})"
        if offset in seen:
            raise Reject(reasons.CORRUPT, f"{where} was already read: the page chain loops")
        seen.add(offset)
        if offset + count_size > size:
            raise _past_end(where, offset + count_size, size)
        (entries,) = struct.unpack_from(order + count_format, data, offset)
        end = offset + count_size + entries * entry + offset_size
        if end > size:
            raise _past_end(where, end, size)
        for position in range(offset + count_size, end - offset_size, entry):
            code, kind = struct.unpack_from(order + "HH", data, position)
            # A value count and a value (or where it lies) follow, each as wide as an offset.
            count, value_offset = struct.unpack_from(order + 2 * offset_format, data, position + 4)
            nbytes = count * _TYPE_SIZES.get(kind, 0)
            if nbytes <= offset_size:
                continue  # the value sits in the entry itself
            if value_offset + nbytes > size:
                raise _past_end(f"tag {code} of page {index}", value_offset + nbytes, size)
        (offset,) = struct.unpack_from(order + offset_format, data, end - offset_size)
        index += 1


def _past_end(what: str, end: int, size: int) -> Reject:
    return Reject(
        reasons.TRUNCATED,
        f"{what} needs the data up to byte {end}, and it ends at byte {size} "
        "(cut short, or an offset corrupted past its end)",
    )


def _picture_series(tif: tifffile.TiffFile) -> tuple[tifffile.TiffPageSeries, int]:
    """The series that is the picture (see the module's docstring), and how many pages of
    other series that are not reduced-resolution copies are left out."""
    everything = tif.series
    if not everything:
        raise Reject(reasons.CORRUPT, "no page holds an image")
    full = [series for series in everything if not _reduced(series)]
    picture = full[0] if full else everything[0]
    left_out = sum(len(series.pages) for series in full if series is not picture)
    return picture, left_out


def _page_series(tif: tifffile.TiffFile, page: int) -> tuple[tifffile.TiffPageSeries, int, int]:
    """The series holding the file's page `page` (the positions of its full-resolution series in
    turn), the page's position in it, and the file's page count."""
    everything = tif.series
    if not everything:
        raise Reject(reasons.CORRUPT, "no page holds an image")
    full = [series for series in everything if not _reduced(series)] or everything[:1]
    counts = [_positions(series) for series in full]
    if page >= sum(counts):
        raise Reject(reasons.PAGES_CHANGED, f"it holds {sum(counts)} pages, no page {page}: it changed since")
    for series, count in zip(full, counts, strict=True):
        if page < count:
            return series, page, sum(counts)
        page -= count
    raise AssertionError("unreachable: the page was counted")


def _positions(series: tifffile.TiffPageSeries) -> int:
    """The positions of D a series holds (plan.pages counts the file's pages alike)."""
    axes, shape = series.get_axes(False), series.get_shape(False)
    return math.prod(n for axis, n in zip(axes, shape, strict=True) if axis not in "YX" + _BAND_AXES)


def _reduced(series: tifffile.TiffPageSeries) -> bool:
    keyframe = series.keyframe
    return bool(keyframe.is_reduced or keyframe.is_mask)


@dataclass(frozen=True)
class _Plan:
    """How the series' axes become [D, H, W, C]: `axes` and `shape` are tifffile's unsqueezed
    ones (`ZCYXS`, ...), the first `grid` of them number the pages, the rest lie in a page."""

    axes: str
    shape: tuple[int, ...]
    grid: int
    complete: bool  # whether every page of the grid has its own directory

    @classmethod
    def of(cls, series: tifffile.TiffPageSeries) -> _Plan:
        axes, shape = series.get_axes(False), tuple(series.get_shape(False))
        if len(axes) != len(shape) or "Y" not in axes or "X" not in axes:
            raise Reject(reasons.UNSUPPORTED_FORMAT, f"tifffile reads its axes as {axes!r}, {shape}")
        page_size = series.keyframe.size
        grid = min(axes.index("Y"), axes.index("X"))  # a page holds its rows and columns
        while grid > 0 and math.prod(shape[grid:]) < page_size:
            grid -= 1  # in-page axes are the trailing ones, back to one page's size
        if not math.prod(shape):
            raise Reject(reasons.CORRUPT, f"its picture holds no sample: {axes} {shape}")
        if math.prod(shape[grid:]) != page_size:
            raise Reject(reasons.CORRUPT, f"its pages ({page_size} samples) do not tile its {axes} {shape}")
        complete = len(series.pages) == math.prod(shape[:grid])
        return cls(axes, shape, grid, complete)

    @property
    def pages(self) -> int:
        return math.prod(self.shape[: self.grid])

    @property
    def height(self) -> int:
        return self.shape[self.axes.index("Y")]

    @property
    def width(self) -> int:
        return self.shape[self.axes.index("X")]

    @property
    def bands(self) -> int:
        return math.prod(n for axis, n in zip(self.axes, self.shape, strict=True) if axis in _BAND_AXES)

    @property
    def depth(self) -> int:
        return math.prod(self.shape) // (self.height * self.width * self.bands)

    @property
    def inpage_depth(self) -> int:
        """The positions of D within one page (the slices of a volumetric tile); 1 mostly."""
        inside = zip(self.axes[self.grid :], self.shape[self.grid :], strict=True)
        return math.prod(n for axis, n in inside if axis not in "YX" + _BAND_AXES)

    def position_pages(self, position: int) -> list[int]:
        """The pages (indices in the series) that hold position `position` of the stack: its
        place on every axis of D among the pages, all of the channels."""
        axes, shape = self.axes[: self.grid], self.shape[: self.grid]
        grid = np.arange(self.pages).reshape(shape)
        depth = [n for axis, n in zip(axes, shape, strict=True) if axis not in _BAND_AXES]
        where = iter(np.unravel_index(position // self.inpage_depth, depth) if depth else ())
        index = tuple(slice(None) if axis in _BAND_AXES else int(next(where)) for axis in axes)
        return [int(i) for i in grid[index].ravel()]


def _check_header(keyframe: Any, plan: _Plan, max_pixels: int, max_bytes: int, one: bool) -> None:
    """What the header alone refuses: a sample type tifffile cannot give, too many pixels, a
    codec that is not installed."""
    if keyframe.dtype is None:
        raise Reject(
            reasons.UNSUPPORTED_FORMAT,
            f"samples of format {int(keyframe.sampleformat)} with {keyframe.bitspersample} bits "
            "are not a type tifffile reads",
        )
    height, width = int(keyframe.imagelength), int(keyframe.imagewidth)
    if height * width > max_pixels:
        raise Reject(
            reasons.TOO_LARGE,
            f"a page of {width}x{height} = {height * width} pixels is over max_pixels ({max_pixels})",
        )
    # One position's pages alone are decoded where each page has its directory; else all of it.
    depth = plan.inpage_depth if one and plan.complete else plan.depth
    nbytes = depth * plan.height * plan.width * plan.bands * keyframe.dtype.itemsize
    if nbytes > max_bytes:
        raise Reject(
            reasons.TOO_LARGE,
            f"{depth} x {plan.height} x {plan.width} x {plan.bands} samples of {keyframe.dtype} "
            f"take {nbytes} bytes, over {max_bytes}",
        )
    _check_codec(keyframe)


def _check_codec(keyframe: Any) -> None:
    compression = int(keyframe.compression)
    if compression != 1 and compression not in tifffile.TIFF.DECOMPRESSORS:
        said = _said(tifffile.TIFF.DECOMPRESSORS, compression)
        raise _codec_reject(f"{_compression_name(compression)} compression", said, compression)
    predictor = int(keyframe.predictor)
    if predictor != 1 and predictor not in tifffile.TIFF.UNPREDICTORS:
        said = _said(tifffile.TIFF.UNPREDICTORS, predictor)
        raise _codec_reject(f"predictor {predictor}", said)


def _said(codecs: Any, key: int) -> str:
    """What tifffile says of a codec it cannot give."""
    try:
        codecs[key]
    except KeyError as error:
        return str(error).strip("'\"")
    return ""


def _codec_reject(what: str, said: str, compression: int = 0) -> Reject:
    """`unsupported_format`, naming what to install for a compression or predictor."""
    try:
        import imagecodecs
    except ImportError:
        return Reject(
            reasons.UNSUPPORTED_FORMAT,
            f"{what} needs the imagecodecs package (pip install imagecodecs), not installed ({said})",
        )
    if "not a known" in said or "not supported" in said or "not implemented" in said:
        return Reject(reasons.UNSUPPORTED_FORMAT, f"{what} is not one tifffile decodes ({said})")
    needs = _EXTERNAL_CODECS.get(compression, "an imagecodecs build with its codec")
    version = getattr(imagecodecs, "__version__", "?")
    return Reject(
        reasons.UNSUPPORTED_FORMAT,
        f"{what} needs {needs}; the installed imagecodecs {version} lacks it ({said})",
    )


def _compression_name(compression: int) -> str:
    try:
        return str(tifffile.COMPRESSION(compression).name)
    except ValueError:
        return f"unknown ({compression})"


def _decode(
    tif: tifffile.TiffFile,
    series: tifffile.TiffPageSeries,
    plan: _Plan,
    data: bytes,
    some: list[int] | None,
) -> tuple[np.ndarray, str]:
    """The samples of the pages to decode (`some`: one position's, None: all), and their axes:
    the plan's, or for one position of a stack, its channels' and one page's."""
    indices = some if some is not None else list(range(plan.pages))
    chosen = [series.pages[i] for i in indices] if plan.complete else list(series.pages)
    if any(page is None for page in chosen):
        raise Reject(
            reasons.UNSUPPORTED_FORMAT,
            "its series has planes in other files (a multi-file OME-TIFF): read the files as one dataset",
        )
    _check_segments(chosen, data)
    if some is None and series.dataoffset is not None:
        end = series.dataoffset + series.nbytes
        if end > len(data):
            raise _past_end("the series' contiguous data", end, len(data))
    try:
        if some is not None:
            grid = zip(plan.axes[: plan.grid], plan.shape, strict=False)
            channels = [(axis, n) for axis, n in grid if axis in _BAND_AXES]
            shape = [n for _, n in channels] + list(plan.shape[plan.grid :])
            array = tif.asarray(key=indices, series=series, maxworkers=1).reshape(shape)
            return array, "".join(axis for axis, _ in channels) + plan.axes[plan.grid :]
        return series.asarray(squeeze=False, maxworkers=1).reshape(plan.shape), plan.axes
    except ImportError as error:  # a codec imagecodecs was built without, found on first use
        compression = int(series.keyframe.compression)
        what = f"{_compression_name(compression)} compression"
        raise _codec_reject(what, f"{type(error).__name__}: {error}", compression) from None
    except Exception as error:
        raise _reject(error, "decoding its pixels") from None


def _check_segments(chosen: Sequence[Any], data: bytes) -> None:
    """Every strip or tile of the chosen pages is there: not missing (offset or byte count 0,
    which tifffile fills with zeros) and not past the end of the data."""
    size = len(data)
    for page in chosen:
        offsets, counts = page.dataoffsets, page.databytecounts
        for index, (offset, count) in enumerate(zip(offsets, counts, strict=False)):
            if offset and count and offset + count <= size:
                continue
            where = f"page {_page_name(page)}, {_segment_name(page.keyframe, index)}"
            if not offset or not count:
                raise Reject(
                    reasons.CORRUPT,
                    f"{where} is missing (offset {offset}, {count} bytes): a sparse or unfinished file",
                )
            raise _past_end(where, offset + count, size)
        if len(counts) < len(offsets):
            raise Reject(reasons.CORRUPT, f"page {_page_name(page)} lists fewer byte counts than offsets")


def _page_name(page: Any) -> str:
    index = page.index
    return ".".join(str(i) for i in index) if isinstance(index, tuple) else str(index)


def _segment_name(keyframe: Any, index: int) -> str:
    """`tile 5 (row 1, column 1, band 3)`: where a strip or tile lies, as a person finds it."""
    separate = keyframe.planarconfig == 2 and keyframe.samplesperpixel > 1
    if keyframe.is_tiled:
        across = -(-keyframe.imagewidth // max(keyframe.tilewidth, 1))
        down = -(-keyframe.imagelength // max(keyframe.tilelength, 1))
        deep = -(-keyframe.imagedepth // max(keyframe.tiledepth, 1))
        plane = across * down * deep
        where = f"row {index % (across * down) // across}, column {index % across}"
        if deep > 1:
            where += f", slice {index % plane // (across * down)}"
        kind = "tile"
    else:
        plane = keyframe.imagedepth * -(-keyframe.imagelength // max(keyframe.rowsperstrip, 1))
        where = f"rows from {index % plane * keyframe.rowsperstrip}"
        kind = "strip"
    if separate:
        where += f", band {index // plane}"
    return f"{kind} {index} ({where})"


def _arranged(array: np.ndarray, axes: str, plan: _Plan) -> np.ndarray:
    """[D, H, W, C] in native byte order, C-contiguous; complex samples as (real, imaginary)
    bands."""
    y, x = axes.index("Y"), axes.index("X")
    bands = [i for i, axis in enumerate(axes) if axis in _BAND_AXES]
    depth = [i for i in range(len(axes)) if i not in (y, x, *bands)]
    array = array.transpose([*depth, y, x, *bands])
    array = array.reshape((-1, plan.height, plan.width, plan.bands))
    if not array.dtype.isnative:
        array = array.astype(array.dtype.newbyteorder("="))
    array = np.ascontiguousarray(array)
    if array.dtype.kind == "c":  # (real, imaginary) of each band, side by side
        parts = np.dtype(f"f{array.dtype.itemsize // 2}")
        array = array.view(parts).reshape((*array.shape[:3], 2 * array.shape[3]))
    return array


def _geo_facts(keyframe: Any) -> dict[str, Fact]:
    """`geo_transform` and `crs` from a GeoTIFF's tags, where they are there and make sense."""
    try:
        geo = keyframe.geotiff_tags if keyframe.is_geotiff else None
    except Exception:  # keys that cannot be read place nothing; the picture is still one
        geo = None
    if not geo:
        return {}
    facts: dict[str, Fact] = {}
    transform = _geo_transform(geo)
    if transform is not None:
        facts["geo_transform"] = transform
    crs = _crs(geo)
    if crs is not None:
        facts["crs"] = crs
    return facts


def _geo_transform(geo: dict[str, Any]) -> tuple[float, ...] | None:
    """GDAL's (origin x, pixel width, row rotation, origin y, column rotation, pixel height)."""
    scale, tiepoint = _numbers(geo.get("ModelPixelScale")), _numbers(geo.get("ModelTiepoint"))
    matrix = _numbers(geo.get("ModelTransformation"))
    if scale is not None and len(scale) >= 2 and scale[0] and scale[1] and tiepoint and len(tiepoint) >= 6:
        width, height = scale[0], -abs(scale[1])
        # The tiepoint (I, J, K, X, Y, Z) puts pixel (I, J) at (X, Y): back to pixel (0, 0).
        origin_x, origin_y = tiepoint[3] - tiepoint[0] * width, tiepoint[4] - tiepoint[1] * height
        transform = [origin_x, width, 0.0, origin_y, 0.0, height]
    elif matrix is not None and len(matrix) == 16:
        transform = [matrix[3], matrix[0], matrix[1], matrix[7], matrix[4], matrix[5]]
    else:
        return None  # several tiepoints alone are ground control points, not a transform
    if _code(geo.get("GTRasterTypeGeoKey")) == _PIXEL_IS_POINT:  # values at pixel centres
        transform[0] -= 0.5 * (transform[1] + transform[2])
        transform[3] -= 0.5 * (transform[4] + transform[5])
    if not all(math.isfinite(value) for value in transform):
        return None
    return tuple(float(value) for value in transform)


def _numbers(value: Any) -> list[float] | None:
    """A tag's numbers, flat; None where they are not numbers."""
    if value is None:
        return None
    try:
        return [float(number) for number in np.asarray(value, dtype=float).ravel()]
    except (TypeError, ValueError):
        return None


def _crs(geo: dict[str, Any]) -> str | None:
    for key in ("ProjectedCSTypeGeoKey", "GeographicTypeGeoKey"):
        code = _code(geo.get(key))
        if code is not None and 0 < code < _USER_DEFINED:
            return f"EPSG:{code}"
    return None


def _code(value: Any) -> int | None:
    """A geo key's code (tifffile gives an enum where it knows the code, an int where not)."""
    try:
        return int(value)
    except (TypeError, ValueError):
        return None
