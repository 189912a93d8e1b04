"""DICOM read at full depth (beam_tfrecord/images/dicom.py), without Beam: every file
tests/dicomgen.py writes gives pydicom's own `pixel_array` (same values, same sample type, its
frames and bands as [H, W, C] or [D, H, W, C]) and the facts its header states, or a reject whose
detail says what a user can do about it. Lossless files also give back the very values written."""

from __future__ import annotations

import io
import subprocess
import sys
import textwrap
from collections.abc import Callable

import dicomgen
import imagecodecs
import imagegen
import numpy as np
import pydicom
import pytest
from pydicom.encaps import generate_frames
from pydicom.pixels import apply_color_lut
from pydicom.uid import (
    DeflatedExplicitVRLittleEndian,
    ExplicitVRLittleEndian,
    ImplicitVRLittleEndian,
    JPEG2000Lossless,
    RLELossless,
)

from beam_tfrecord import reasons
from beam_tfrecord.images.deep import DeepPicture
from beam_tfrecord.images.dicom import is_dicom, read_dicom
from beam_tfrecord.reasons import Reject

MAX_PIXELS = 100_000_000
LOSSLESS = [ExplicitVRLittleEndian, RLELossless, JPEG2000Lossless]


def read(data: bytes, max_pixels: int = MAX_PIXELS) -> DeepPicture:
    return read_dicom(data, max_pixels=max_pixels)


def rejected(data: bytes, max_pixels: int = MAX_PIXELS) -> Reject:
    with pytest.raises(Reject) as raised:
        read(data, max_pixels)
    return raised.value


def pydicom_pixels(data: bytes) -> np.ndarray:
    """The reference: what `dcmread(...).pixel_array` gives (force: a file with no preamble)."""
    ds = pydicom.dcmread(io.BytesIO(data), force=True)
    if "TransferSyntaxUID" not in ds.file_meta:  # no File Meta: pydicom asks to be told
        implicit, _ = ds.original_encoding
        ds.file_meta.TransferSyntaxUID = ImplicitVRLittleEndian if implicit else ExplicitVRLittleEndian
    return ds.pixel_array


def assert_is_pixel_array(picture: DeepPicture, data: bytes, *, frames: int, bands: int) -> None:
    """Same values and sample type as pydicom's array, in [H, W, C] or [D, H, W, C]."""
    reference = pydicom_pixels(data)
    expected_shape = ((frames,) if frames > 1 else ()) + reference.shape[frames > 1 :][:2] + (bands,)
    assert picture.samples.shape == expected_shape
    assert picture.samples.dtype == reference.dtype
    assert picture.samples.flags.c_contiguous and picture.samples.dtype.isnative
    np.testing.assert_array_equal(picture.samples.reshape(reference.shape), reference)
    assert picture.source_format == "DICOM"


# ---- pictures: pydicom's pixel_array, arranged, and the header's facts ------------------------------


@pytest.mark.parametrize("syntax", dicomgen.CT_SYNTAXES, ids=lambda uid: uid.name)
def test_a_ct_slice_is_its_signed_stored_values_in_every_transfer_syntax(syntax):
    data = dicomgen.ct_slice(syntax)
    picture = read(data)
    assert_is_pixel_array(picture, data, frames=1, bands=1)
    assert picture.samples.dtype == np.int16
    # The values written, not Hounsfield units and not windowed: -2000 is the padding's stored value.
    np.testing.assert_array_equal(picture.samples[..., 0], dicomgen.ct_pixels())
    assert picture.samples.min() == -2000
    assert picture.facts == {
        "modality": "CT",
        "photometric_interpretation": "MONOCHROME2",
        "rescale_slope": 1.0,
        "rescale_intercept": -1024.0,
        "transfer_syntax": syntax.name,
        "bits_stored": 16,
    }


@pytest.mark.parametrize("syntax", LOSSLESS, ids=lambda uid: uid.name)
def test_a_12_bit_mr_is_uint16_with_its_bits_stored(syntax):
    data = dicomgen.mr_slice(syntax)
    picture = read(data)
    assert_is_pixel_array(picture, data, frames=1, bands=1)
    assert picture.samples.dtype == np.uint16 and picture.samples.max() == 4094
    assert picture.facts == {
        "modality": "MR",
        "photometric_interpretation": "MONOCHROME2",
        "transfer_syntax": syntax.name,
        "bits_stored": 12,
    }  # no rescale in the file: none in the facts


@pytest.mark.parametrize("syntax", [ExplicitVRLittleEndian, RLELossless], ids=lambda uid: uid.name)
def test_an_rgb_ultrasound_is_three_uint8_bands(syntax):
    data = dicomgen.ultrasound_rgb(syntax)
    picture = read(data)
    assert_is_pixel_array(picture, data, frames=1, bands=3)
    np.testing.assert_array_equal(picture.samples, dicomgen.rgb_pixels())
    assert picture.facts["photometric_interpretation"] == "RGB"
    assert picture.facts["modality"] == "US"


@pytest.mark.parametrize("frames", [None, 3], ids=["one frame", "three frames"])
def test_jpeg_baseline_ultrasound_is_rgb_as_pydicom_gives_it(frames):
    """Pillow's JPEG frames, encapsulated, YBR_FULL_422 in the header: given as RGB (pydicom's
    default and what a viewer shows), close to the RGB that was encoded, the fact saying RGB."""
    data = dicomgen.ultrasound_jpeg(frames)
    picture = read(data)
    assert_is_pixel_array(picture, data, frames=frames or 1, bands=3)
    error = np.abs(picture.samples.astype(int) - dicomgen.rgb_pixels(frames).astype(int))
    assert error.mean() < 4  # RGB again, not YCbCr (whose bands would differ by ~100)
    assert picture.facts["photometric_interpretation"] == "RGB"
    assert picture.facts["transfer_syntax"] == "JPEG Baseline (Process 1)"


def test_native_ybr_full_is_given_as_rgb():
    data = dicomgen.ultrasound_ybr_full()
    picture = read(data)
    assert_is_pixel_array(picture, data, frames=1, bands=3)
    assert np.abs(picture.samples.astype(int) - dicomgen.rgb_pixels().astype(int)).max() <= 3
    assert picture.facts["photometric_interpretation"] == "RGB"


@pytest.mark.parametrize("syntax", LOSSLESS, ids=lambda uid: uid.name)
def test_a_multi_frame_is_a_stack_of_frames(syntax):
    data = dicomgen.multiframe(syntax)
    picture = read(data)
    assert_is_pixel_array(picture, data, frames=4, bands=1)
    assert picture.stacked and picture.samples.shape == (4, 32, 36, 1)
    np.testing.assert_array_equal(picture.samples[..., 0], dicomgen.multiframe_pixels())
    assert picture.facts["modality"] == "XA"


def test_an_enhanced_multi_frame_s_rescale_comes_from_its_shared_functional_groups():
    data = dicomgen.enhanced_ct()
    picture = read(data)
    assert_is_pixel_array(picture, data, frames=3, bands=1)
    assert picture.facts["rescale_slope"] == 1.0 and picture.facts["rescale_intercept"] == -1024.0


def test_float_pixel_data_is_float32():
    data = dicomgen.float_map()
    picture = read(data)
    assert_is_pixel_array(picture, data, frames=1, bands=1)
    assert picture.samples.dtype == np.float32 and picture.samples.min() < 0
    assert picture.facts["bits_stored"] == 32  # Bits Allocated: a float has no Bits Stored


def test_a_palette_picture_is_given_through_its_palette():
    """Indices mean nothing without the palette, which no record keeps: 16-bit RGB, as its
    entries are, equal to pydicom's own `apply_color_lut` of the indices."""
    data = dicomgen.palette_color()
    picture = read(data)
    ds = pydicom.dcmread(io.BytesIO(data))
    expected = apply_color_lut(ds.pixel_array, ds)
    assert picture.samples.shape == (24, 30, 3) and picture.samples.dtype == expected.dtype == np.uint16
    np.testing.assert_array_equal(picture.samples, expected)
    assert picture.facts["photometric_interpretation"] == "RGB" and picture.facts["bits_stored"] == 16


@pytest.mark.parametrize(
    ("file_meta", "implicit"),
    [(True, True), (True, False), (False, True), (False, False)],
    ids=["meta implicit", "meta explicit", "bare implicit", "bare explicit"],
)
def test_a_file_without_preamble_is_read(file_meta, implicit):
    """Old scanners' files: no preamble, no `DICM`, often no extension, starting with the File Meta
    group or straight with the dataset's group 0008 (its transfer syntax then found by pydicom)."""
    data = dicomgen.without_preamble(file_meta=file_meta, implicit=implicit)
    assert data[128:132] != b"DICM" and data[:2] == (b"\x02\x00" if file_meta else b"\x08\x00")
    assert is_dicom(data)
    picture = read(data)
    assert_is_pixel_array(picture, data, frames=1, bands=1)
    np.testing.assert_array_equal(picture.samples[..., 0], dicomgen.ct_pixels())
    syntax = ImplicitVRLittleEndian if implicit else ExplicitVRLittleEndian
    assert picture.facts["transfer_syntax"] == syntax.name
    assert picture.facts["rescale_intercept"] == -1024.0


def test_max_pixels_counts_every_frame_and_allows_exactly_its_value():
    data = dicomgen.multiframe()  # 4 frames of 36x32
    assert read(data, max_pixels=4 * 36 * 32).samples.shape == (4, 32, 36, 1)
    reject = rejected(data, max_pixels=4 * 36 * 32 - 1)
    assert reject.reason == "too_large"
    assert "36x32 x 4 frames = 4608 pixels" in reject.detail and "max_pixels (4607)" in reject.detail


# ---- is_dicom ------------------------------------------------------------------------------------


def every_picture() -> dict[str, bytes]:
    return {
        "ct": dicomgen.ct_slice(),
        "jpeg baseline": dicomgen.ultrasound_jpeg(),
        "rtstruct": dicomgen.rt_structure_set(),
        "dicomdir": dicomgen.dicomdir(),
        **{
            f"no preamble {meta} {vr}": dicomgen.without_preamble(file_meta=meta, implicit=vr)
            for meta in (True, False)
            for vr in (True, False)
        },
    }


def test_is_dicom_knows_every_dicom_file_and_no_other():
    for name, data in every_picture().items():
        assert is_dicom(data), name
    others = {
        **imagegen.every_format(),
        "empty": b"",
        "short": b"\x08\x00\x05\x00",
        "text": b"(0008,0005) is how DICOM tags are written in text\n",
        "random": np.random.default_rng(0).bytes(4096),
        # Group 0008 first, then bytes that are no element: a length past the end, then a tag that
        # does not ascend.
        "past the end": b"\x08\x00\x05\x00CS\xff\x7f" + bytes(64),
        "descending": b"\x08\x00\x16\x00UI\x04\x001.2\x00\x08\x00\x05\x00CS\x02\x00AB",
    }
    for name, data in others.items():
        assert not is_dicom(data), name


def test_is_dicom_and_the_module_need_no_pydicom():
    """Without the extra the module imports and `is_dicom` answers; a DICOM file is then a
    reject that names the extra. A fresh interpreter in which importing pydicom fails, as it does
    where it is not installed."""
    code = textwrap.dedent(
        """
        import sys
        class NoPydicom:
            def find_spec(self, name, path=None, target=None):
                if name == "pydicom" or name.startswith(("pydicom.", "pylibjpeg", "openjpeg", "rle")):
                    raise ModuleNotFoundError(f"No module named {name!r}")
        sys.meta_path.insert(0, NoPydicom())
        from beam_tfrecord.images.dicom import is_dicom, read_dicom
        from beam_tfrecord.reasons import Reject
        data = sys.stdin.buffer.read()
        assert is_dicom(data)
        try:
            read_dicom(data, max_pixels=10**8)
        except Reject as reject:
            print(reject.reason, reject.detail, sep="\\n")
        assert "pydicom" not in sys.modules
        """
    )
    done = subprocess.run(
        [sys.executable, "-c", code], input=dicomgen.ct_slice(), capture_output=True, check=True
    )
    reason, detail = done.stdout.decode().strip().split("\n")
    assert reason == "codec_missing"
    assert "pip install 'beam-tfrecord[dicom]'" in detail


# ---- rejects: the reason, and a detail that says what to do ---------------------------------------


@pytest.mark.parametrize(
    ("make", "sop_class"),
    [
        (dicomgen.rt_structure_set, "RT Structure Set Storage"),
        (dicomgen.dicomdir, "Media Storage Directory Storage"),
        (dicomgen.segmentation, "Segmentation Storage"),
    ],
    ids=["rtstruct", "dicomdir", "segmentation"],
)
def test_an_object_that_holds_no_picture_is_no_picture_naming_its_sop_class(make, sop_class):
    reject = rejected(make())
    assert reject.reason == "no_picture"
    assert sop_class in reject.detail


def test_a_segmentation_has_pixel_data_and_is_still_no_picture():
    data = dicomgen.segmentation()
    assert pydicom_pixels(data).shape == (2, 16, 16)  # pydicom decodes its masks
    assert "2 frames are masks that label other pictures" in rejected(data).detail


@pytest.mark.parametrize("make", [dicomgen.jpeg_lossless_sv1, dicomgen.jpeg_extended_12bit])
def test_a_jpeg_no_installed_decoder_reads_is_codec_missing_naming_what_to_install(make):
    """JPEG Lossless SV1 and 12-bit JPEG Extended: real bitstreams (libjpeg-turbo decodes them)
    that pydicom reads only with pylibjpeg-libjpeg (GPL-3.0, left out of the extra) or GDCM."""
    data = make()
    ds = pydicom.dcmread(io.BytesIO(data))
    frame = imagecodecs.jpeg8_decode(next(generate_frames(ds.PixelData)))
    assert frame.shape == (ds.Rows, ds.Columns) and frame.dtype == np.uint16
    with pytest.raises(RuntimeError):  # pydicom itself cannot either
        ds.pixel_array  # noqa: B018
    reject = rejected(data)
    assert reject.reason == "codec_missing"
    assert ds.file_meta.TransferSyntaxUID.name in reject.detail
    assert "pip install pylibjpeg-libjpeg (GPL-3.0" in reject.detail and "python-gdcm (BSD)" in reject.detail


def test_video_is_an_unsupported_format_naming_its_transfer_syntax():
    reject = rejected(dicomgen.video())
    assert reject.reason == "unsupported_format"
    assert "MPEG-4 AVC/H.264" in reject.detail


def test_too_large_is_judged_from_the_header_before_anything_is_decoded():
    """1000 frames of 65535 x 65535 declared over 32 bytes of Pixel Data: the size is over,
    whatever the data holds."""
    reject = rejected(dicomgen.huge_header())
    assert reject.reason == "too_large"
    assert "65535x65535 x 1000 frames" in reject.detail and f"max_pixels ({MAX_PIXELS})" in reject.detail


def test_pixel_data_shorter_than_its_frames_is_truncated():
    reject = rejected(dicomgen.short_pixel_data())
    assert reject.reason == "truncated"
    assert "6912 bytes of the 9216" in reject.detail and "4 frames" in reject.detail


CUT_FILES: dict[str, Callable[[], bytes]] = {
    "explicit": dicomgen.ct_slice,
    "deflated": lambda: dicomgen.ct_slice(DeflatedExplicitVRLittleEndian),
    "jpeg 2000": lambda: dicomgen.ct_slice(JPEG2000Lossless),
    "jpeg frames": lambda: dicomgen.ultrasound_jpeg(3),
    "rle frames": lambda: dicomgen.multiframe(RLELossless),
}


@pytest.mark.parametrize("name", sorted(CUT_FILES))
def test_a_file_cut_anywhere_is_truncated(name):
    """Every prefix past the preamble (every third byte, and the last eight), in the File Meta, in
    a header, in the Pixel Data, in a fragment: pydicom reads most of them without a word, and each
    is a reject, `truncated`. Only the length of encapsulated Pixel Data's closing delimiter may
    go: every frame is whole then."""
    data = CUT_FILES[name]()
    whole = read(data).samples
    encapsulated = pydicom.dcmread(io.BytesIO(data)).file_meta.TransferSyntaxUID.is_encapsulated
    for cut in sorted({*range(133, len(data), 3), *range(len(data) - 8, len(data))}):
        if encapsulated and cut >= len(data) - 4:
            np.testing.assert_array_equal(read(data[:cut]).samples, whole)
            continue
        with pytest.raises(Reject) as raised:
            read(data[:cut])
        assert raised.value.reason == "truncated", (cut, raised.value.detail)


def test_not_dicom_is_not_an_image():
    assert rejected(imagegen.png()).reason == "not_an_image"


def test_every_reason_the_reader_gives_is_declared():
    for code in ("codec_missing", "no_picture", "truncated", "too_large", "unsupported_format"):
        assert reasons.get(code).kind == "reject"
