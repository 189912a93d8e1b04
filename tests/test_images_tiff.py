"""TIFF and GeoTIFF at full depth (images/tiff.py): every kind of file tests/tiffgen.py writes as
real tools write it reads back as exactly what tifffile reads (shape in the documented
[H, W, C] / [D, H, W, C] arrangement, sample type, every value), a GeoTIFF says where it lies,
and a broken or oversized file is a reject with its reason, never a crash or a smaller picture."""

from __future__ import annotations

import logging
import os
import subprocess
import sys
from collections.abc import Callable

import numpy as np
import pytest
import tiffgen
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from beam_tfrecord import reasons
from beam_tfrecord.images.tiff import is_tiff, read_tiff
from beam_tfrecord.reasons import Reject

MAX_PIXELS = 10_000_000


def read(data: bytes, **options) -> np.ndarray:
    return read_tiff(data, max_pixels=MAX_PIXELS, **options).samples


def rejected(data: bytes, **options) -> Reject:
    options.setdefault("max_pixels", MAX_PIXELS)
    with pytest.raises(Reject) as caught:
        read_tiff(data, **options)
    return caught.value


def one_band(array: np.ndarray) -> np.ndarray:
    return array[..., None]


def bands_last(array: np.ndarray) -> np.ndarray:
    return np.moveaxis(array, 0, -1)


def real_and_imaginary(array: np.ndarray) -> np.ndarray:
    """SYX complex -> [H, W, 2S]: each band's real part, then its imaginary part."""
    planes = [part for band in array for part in (band.real, band.imag)]
    return np.stack(planes, axis=-1)


# Each kind of file, and where tifffile's array goes in [H, W, C] or [D, H, W, C].
KINDS: dict[str, tuple[Callable[[], tiffgen.Made], Callable[[np.ndarray], np.ndarray]]] = {
    "microscopy 16-bit, PackBits": (lambda: tiffgen.microscopy_gray16("packbits"), one_band),
    "microscopy 16-bit, Deflate": (lambda: tiffgen.microscopy_gray16("zlib"), one_band),
    "RGB 16-bit, LZW": (tiffgen.rgb16, lambda a: a),
    "EuroSAT 13 bands, planar, tiled": (tiffgen.eurosat_tile, bands_last),
    "4-band float64": (tiffgen.float64_tile, lambda a: a),
    "SAR complex64, 2 bands": (tiffgen.sar_complex64, real_and_imaginary),
    "SAR complex int16": (tiffgen.sar_cint16, lambda a: real_and_imaginary(a[None])),
    "depth map float32 with NaN": (tiffgen.depth_map, one_band),
    # T, Z -> D (6 positions); C, the channels, -> bands.
    "ImageJ TZCYX hyperstack": (
        tiffgen.imagej_hyperstack,
        lambda a: a.transpose(0, 1, 3, 4, 2).reshape(6, 12, 15, 2),
    ),
    "ImageJ z-stack": (tiffgen.imagej_zstack, one_band),
    "plain page sequence": (tiffgen.plain_zstack, one_band),
    "OME ZCYX": (tiffgen.ome_stack, lambda a: a.transpose(0, 2, 3, 1)),
    "GDAL overviews": (tiffgen.gdal_overviews, one_band),
    "pyramid in SubIFDs and a thumbnail": (tiffgen.pyramid_with_thumbnail, lambda a: a),
    "thumbnail first": (tiffgen.thumbnail_first, one_band),
    "pages of two sizes": (tiffgen.pages_of_two_sizes, one_band),
    "BigTIFF big-endian int16": (tiffgen.bigtiff_big_endian, one_band),
    "1-bit": (tiffgen.bilevel, one_band),
}


@pytest.mark.parametrize("kind", KINDS)
def test_every_kind_reads_as_tifffile_reads_it(kind):
    make, arrange = KINDS[kind]
    made = make()
    picture = read_tiff(made.data, max_pixels=MAX_PIXELS)
    expected = arrange(made.array)
    if made.array.dtype.kind == "c":
        expected = expected.astype(made.array.real.dtype)
    assert picture.source_format == "TIFF"
    assert picture.samples.shape == expected.shape
    assert picture.samples.dtype == expected.dtype.newbyteorder("=")
    np.testing.assert_array_equal(picture.samples, expected)  # NaN where NaN
    assert picture.samples.dtype.isnative and picture.samples.flags.c_contiguous
    assert is_tiff(made.data)


def test_what_a_user_wrote_comes_back_at_its_depth():
    """Not just tifffile's word: the microscope's 16-bit values, the 13 bands and the depths in
    metres are the ones written, never scaled to 8 bits."""
    gray = tiffgen.microscopy_gray16()
    assert read(gray.data).max() > 40_000 and np.array_equal(read(gray.data)[..., 0], gray.written)
    eurosat = read(tiffgen.eurosat_tile().data)
    assert eurosat.shape[-1] == 13 and eurosat.dtype == np.uint16
    assert np.array_equal(eurosat[..., 12], tiffgen.eurosat_tile().written[12])
    depth = tiffgen.depth_map()
    np.testing.assert_array_equal(read(depth.data)[..., 0], depth.written)
    slc = tiffgen.sar_cint16()
    assert np.array_equal(read(slc.data)[..., 0], slc.written.real)  # the int16 values, exactly


def test_a_stack_keeps_its_channels_as_bands_and_its_other_axes_as_pages():
    stack = tiffgen.imagej_hyperstack().written  # T=2, Z=3, C=2
    pixels = read(tiffgen.imagej_hyperstack().data)
    assert pixels.shape == (6, 12, 15, 2)
    assert np.array_equal(pixels[4, :, :, 1], stack[1, 1, 1])  # t=1, z=1 is the 5th page; channel 1


def test_first_keeps_the_first_position_and_counts_the_pages_left_out():
    made = tiffgen.imagej_hyperstack()
    picture = read_tiff(made.data, max_pixels=MAX_PIXELS, pages="first")
    assert np.array_equal(picture.samples, made.written[0, 0].transpose(1, 2, 0))
    assert picture.facts["pages_left_out"] == 10  # 12 pages, the first position's 2 kept
    assert "pages_left_out" not in read_tiff(made.data, max_pixels=MAX_PIXELS).facts


def test_pages_of_another_size_are_counted_as_left_out_and_reduced_copies_are_not():
    assert read_tiff(tiffgen.pages_of_two_sizes().data, max_pixels=MAX_PIXELS).facts == {"pages_left_out": 1}
    for make in (tiffgen.gdal_overviews, tiffgen.thumbnail_first, tiffgen.pyramid_with_thumbnail):
        assert "pages_left_out" not in read_tiff(make().data, max_pixels=MAX_PIXELS).facts


def test_a_geotiff_says_where_it_lies_as_gdal_does():
    eurosat = read_tiff(tiffgen.eurosat_tile().data, max_pixels=MAX_PIXELS)
    x0, y0 = tiffgen.EUROSAT_ORIGIN
    assert eurosat.facts == {"geo_transform": (x0, 10.0, 0.0, y0, 0.0, -10.0), "crs": "EPSG:32633"}
    # A ModelTransformation in longitude/latitude, values at pixel centres: GDAL moves the
    # origin half a pixel to the corner.
    tile = read_tiff(tiffgen.float64_tile().data, max_pixels=MAX_PIXELS)
    assert tile.facts["crs"] == "EPSG:4326"
    assert tile.facts["geo_transform"] == pytest.approx((14.4995, 0.001, 0.0, 46.1005, 0.0, -0.001))
    assert read_tiff(tiffgen.depth_map().data, max_pixels=MAX_PIXELS).facts == {}


def test_tifffiles_complaints_stay_off_the_terminal(caplog, capfd):
    made = tiffgen.imagej_claiming_more_slices()  # (tifffile logs as the generator reads it back)
    caplog.clear()
    capfd.readouterr()
    with caplog.at_level(logging.DEBUG):
        pixels = read(made.data)
    assert np.array_equal(pixels[..., 0], made.written)  # the 5 pages there are, as a sequence
    assert not [r for r in caplog.records if r.name.startswith("tifffile")]
    assert capfd.readouterr().err == ""


def test_a_reject_carries_what_tifffile_logged():
    made = tiffgen.imagej_claiming_more_slices()
    reject = rejected(tiffgen.with_tile(made.data, 0, count=0, page=2))
    assert reject.reason == reasons.CORRUPT.code
    assert "page 2, strip 0" in reject.detail and "ImageJ series metadata invalid" in reject.detail


def test_every_cut_of_a_small_stack_is_truncated_never_fewer_pages():
    """tifffile alone stops at a page whose directory is cut and reads the pages before it: a
    stack cut short would pass for a shorter stack."""
    data = tiffgen.plain_zstack().data
    whole = read(data)
    for cut in range(1, len(data)):
        try:
            pixels = read(data[:cut])
        except Reject as reject:
            assert reject.reason == reasons.TRUNCATED.code, (cut, reject)
        else:  # only bytes nothing points at were cut
            assert np.array_equal(pixels, whole), cut


@pytest.mark.parametrize(
    "make",
    [
        tiffgen.eurosat_tile,
        tiffgen.microscopy_gray16,
        tiffgen.ome_stack,
        tiffgen.bigtiff_big_endian,
        tiffgen.rgb16,
    ],
)
def test_cuts_through_header_directory_and_pixels_are_truncated(make):
    data = make().data
    cuts = {3, 7, 12, 40, len(data) // 3, len(data) // 2, len(data) - 100, len(data) - 1}
    for cut in sorted(cuts):
        reject = rejected(data[:cut])
        assert reject.reason == reasons.TRUNCATED.code, (cut, reject)


def test_a_cut_says_what_is_missing():
    data = tiffgen.eurosat_tile().data
    detail = rejected(data[: len(data) - 10]).detail
    assert (
        "page 0, tile 155 (row 2, column 3, band 12)" in detail and f"ends at byte {len(data) - 10}" in detail
    )


@pytest.mark.parametrize(("change", "reason"), [({"offset": 0}, "corrupt"), ({"count": 0}, "corrupt")])
def test_a_missing_tile_is_a_reject_naming_page_and_tile(change, reason):
    """GDAL's sparse files and interrupted writers leave a tile's offset or size 0; tifffile
    would fill it with zeros, which a training set must not take for data."""
    data = tiffgen.with_tile(tiffgen.eurosat_tile().data, 17, **change)
    reject = rejected(data)
    assert reject.reason == reason
    assert "page 0, tile 17 (row 1, column 1, band 1) is missing" in reject.detail


def test_a_tile_past_the_end_is_truncated_naming_page_and_tile():
    data = tiffgen.with_tile(tiffgen.eurosat_tile().data, 30, offset=10_000_000)
    reject = rejected(data)
    assert reject.reason == reasons.TRUNCATED.code
    assert "page 0, tile 30 (row 1, column 2, band 2)" in reject.detail


def test_a_page_over_max_pixels_is_too_large_from_its_header():
    made = tiffgen.eurosat_tile()  # 56 x 40
    reject = rejected(made.data, max_pixels=56 * 40 - 1)
    assert reject.reason == reasons.TOO_LARGE.code and "56x40" in reject.detail
    assert read_tiff(made.data, max_pixels=56 * 40).height == 40
    # A header claiming 8 billion pixels before 64 bytes of data: refused, never allocated.
    huge = rejected(tiffgen.huge_page(), max_pixels=MAX_PIXELS)
    assert huge.reason == reasons.TOO_LARGE.code and "100000x80000" in huge.detail


def test_a_stack_over_max_bytes_is_too_large_before_decoding_and_first_fits():
    data = tiffgen.imagej_hyperstack().data  # 6 x 12 x 15 x 2 uint16 = 4320 bytes
    assert rejected(data, max_bytes=4319).reason == reasons.TOO_LARGE.code
    assert read(data, max_bytes=4320).shape == (6, 12, 15, 2)
    assert read(data, max_bytes=720, pages="first").shape == (12, 15, 2)


def test_a_codec_imagecodecs_was_built_without_names_what_to_install():
    data = tiffgen.with_compression(tiffgen.microscopy_gray16().data, 48124)  # JETRAW
    reject = rejected(data)
    assert reject.reason == reasons.UNSUPPORTED_FORMAT.code
    assert "JETRAW" in reject.detail and "jetraw" in reject.detail


def test_an_unknown_compression_is_unsupported():
    reject = rejected(tiffgen.with_compression(tiffgen.microscopy_gray16().data, 12345))
    assert reject.reason == reasons.UNSUPPORTED_FORMAT.code and "12345" in reject.detail


def test_without_imagecodecs_an_lzw_tiff_asks_for_it(tmp_path):
    """A worker image built without imagecodecs: the reject says what to install. The child
    process runs with the package unimportable, as if it were not installed."""
    path = tmp_path / "rgb16.tif"
    path.write_bytes(tiffgen.rgb16().data)
    script = (
        "import sys; sys.modules['imagecodecs'] = None\n"
        "from beam_tfrecord.images.tiff import read_tiff\n"
        "from beam_tfrecord.reasons import Reject\n"
        "try:\n"
        f"    read_tiff(open({str(path)!r}, 'rb').read(), max_pixels=10**6)\n"
        "except Reject as reject:\n"
        "    print(reject.reason, reject.detail)\n"
    )
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    env = {**os.environ, "PYTHONPATH": root}
    done = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, env=env, timeout=120
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith("unsupported_format ") and "pip install imagecodecs" in done.stdout
    assert "LZW" in done.stdout


def test_what_is_not_a_tiff():
    assert not is_tiff(b"\x89PNG\r\n\x1a\n") and not is_tiff(b"II") and not is_tiff(b"")
    assert all(is_tiff(magic + b"\0" * 12) for magic in (b"II*\0", b"MM\0*", b"II+\0", b"MM\0+"))
    assert rejected(b"").reason == reasons.EMPTY.code
    assert rejected(b"GIF89a" + b"\0" * 20).reason == reasons.NOT_AN_IMAGE.code
    assert rejected(b"MM").reason == reasons.TRUNCATED.code
    with pytest.raises(ValueError, match="pages"):
        read_tiff(tiffgen.plain_zstack().data, max_pixels=MAX_PIXELS, pages="all")


def test_a_looping_page_chain_is_corrupt():
    data = bytearray(tiffgen.microscopy_gray16().data)
    first = int.from_bytes(data[4:8], "little")
    entries = int.from_bytes(data[first : first + 2], "little")
    next_at = first + 2 + 12 * entries
    data[next_at : next_at + 4] = first.to_bytes(4, "little")  # the page's next page is itself
    assert rejected(bytes(data)).reason == reasons.CORRUPT.code


SEEDS = {
    name: make().data
    for name, make in {
        "stack": tiffgen.plain_zstack,
        "eurosat": tiffgen.eurosat_tile,
        "hyperstack": tiffgen.imagej_hyperstack,
        "ome": tiffgen.ome_stack,
        "cint16": tiffgen.sar_cint16,
        "bigtiff": tiffgen.bigtiff_big_endian,
        "pyramid": tiffgen.pyramid_with_thumbnail,
        "lzw": tiffgen.rgb16,
        "float": tiffgen.float64_tile,
    }.items()
}


@st.composite
def mutated(draw) -> bytes:
    """A generated TIFF with a few bytes replaced, most of them in its directories (where the
    sizes, counts and offsets are), and maybe cut short."""
    data = bytearray(SEEDS[draw(st.sampled_from(sorted(SEEDS)))])
    for _ in range(draw(st.integers(1, 6))):
        end = len(data) if draw(st.booleans()) else min(len(data), 600)
        data[draw(st.integers(0, end - 1))] = draw(st.integers(0, 255))
    if draw(st.integers(0, 3)) == 0:
        data = data[: draw(st.integers(0, len(data)))]
    return bytes(data)


@settings(max_examples=400, derandomize=True, deadline=None, suppress_health_check=list(HealthCheck))
@given(mutated())
def test_mutated_tiffs_only_ever_reject(data):
    """Whatever the bytes, a picture of the documented shape or a reject, never another error."""
    try:
        picture = read_tiff(data, max_pixels=1_000_000, max_bytes=50_000_000)
    except Reject as reject:
        assert reject.reason in reasons.codes("reject") and reject.detail
        return
    assert picture.samples.ndim in (3, 4) and picture.samples.flags.c_contiguous
