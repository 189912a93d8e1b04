"""DICOM files made by the tests themselves, as pydicom writes them: a `Dataset` with its
`FileMetaDataset`, saved with `dcmwrite` (the File Format's preamble and `DICM` where
`enforce_file_format` asks for it), compressed by `Dataset.compress` (RLE Lossless: pydicom's own
encoder; JPEG 2000 Lossless: pylibjpeg-openjpeg's) or encapsulated by `pydicom.encaps.encapsulate`
from frames another encoder made (JPEG Baseline from Pillow, as ultrasound devices write it; JPEG
Lossless SV1 from imagecodecs' libjpeg-turbo, which no decoder of the `[dicom]` extra reads).
Every function returns the file's bytes; the pixels a reader must give are what pydicom's
`dcmread(...).pixel_array` gives for them."""

from __future__ import annotations

import io

import imagecodecs
import numpy as np
from PIL import Image
from pydicom import Dataset, FileMetaDataset, dcmwrite
from pydicom.encaps import encapsulate
from pydicom.pixels import pack_bits
from pydicom.uid import (
    MPEG4HP41,
    UID,
    CTImageStorage,
    DeflatedExplicitVRLittleEndian,
    EnhancedCTImageStorage,
    ExplicitVRLittleEndian,
    ImplicitVRLittleEndian,
    JPEG2000Lossless,
    JPEGBaseline8Bit,
    JPEGExtended12Bit,
    JPEGLosslessSV1,
    MediaStorageDirectoryStorage,
    MRImageStorage,
    ParametricMapStorage,
    RLELossless,
    RTStructureSetStorage,
    SegmentationStorage,
    UltrasoundImageStorage,
    UltrasoundMultiFrameImageStorage,
    XRayAngiographicImageStorage,
    generate_uid,
)

# Every transfer syntax the CT slice is written in: the three native encodings and the two
# lossless compressions pydicom and the `[dicom]` extra encode.
CT_SYNTAXES = (
    ImplicitVRLittleEndian,
    ExplicitVRLittleEndian,
    DeflatedExplicitVRLittleEndian,
    RLELossless,
    JPEG2000Lossless,
)
_PREFIX = "1.2.826.0.1.3680043.8.498."  # pydicom's root for generated UIDs


def _uid(name: str) -> UID:
    """A UID that is the same on every run, so the same call writes the same bytes."""
    return generate_uid(_PREFIX, entropy_srcs=[name])


def _dataset(sop_class: UID, name: str, modality: str) -> Dataset:
    """The identifying part every object has: its SOP class and instance, a patient, a study."""
    ds = Dataset()
    ds.file_meta = FileMetaDataset()
    ds.file_meta.TransferSyntaxUID = ExplicitVRLittleEndian
    ds.SOPClassUID = sop_class
    ds.SOPInstanceUID = _uid(name)
    ds.Modality = modality
    ds.PatientName = "Test^Phantom"
    ds.PatientID = "0001"
    ds.StudyInstanceUID = _uid("study")
    ds.SeriesInstanceUID = _uid(f"{name} series")
    return ds


def _image(ds: Dataset, pixels: np.ndarray, photometric: str, bits_stored: int | None = None) -> None:
    """The Image Pixel module for `pixels`, [H, W], [H, W, 3], [D, H, W] or [D, H, W, 3], stored
    native (uncompressed) as they are."""
    samples = 3 if photometric.startswith(("RGB", "YBR")) else 1
    frames = pixels.shape[0] if pixels.ndim == (4 if samples == 3 else 3) else None
    if frames is not None:
        ds.NumberOfFrames = frames
    ds.Rows, ds.Columns = pixels.shape[-3:-1] if samples == 3 else pixels.shape[-2:]
    ds.SamplesPerPixel = samples
    ds.PhotometricInterpretation = photometric
    if samples == 3:
        ds.PlanarConfiguration = 0
    ds.BitsAllocated = pixels.dtype.itemsize * 8
    ds.BitsStored = bits_stored or ds.BitsAllocated
    ds.HighBit = ds.BitsStored - 1
    ds.PixelRepresentation = int(pixels.dtype.kind == "i")
    ds.PixelData = np.ascontiguousarray(pixels).tobytes()


def _write(
    ds: Dataset, syntax: UID = ExplicitVRLittleEndian, *, file_format: bool = True, **compress: object
) -> bytes:
    """The file's bytes in `syntax`: a native syntax is how the dataset is encoded, a compressed
    one is `Dataset.compress`'s (pydicom's RLE encoder, pylibjpeg-openjpeg's JPEG 2000)."""
    if syntax.is_compressed:
        ds.compress(syntax, generate_instance_uid=False, **compress)  # type: ignore[arg-type]
    else:
        ds.file_meta.TransferSyntaxUID = syntax
    out = io.BytesIO()
    dcmwrite(out, ds, enforce_file_format=file_format)
    return out.getvalue()


def ct_pixels(height: int = 40, width: int = 48) -> np.ndarray:
    """Stored values of a CT slice, signed: the -2000 of the padding outside the scanner's circle
    (-3024 HU with the intercept), air near 0 (-1024 HU), tissue and bone up to 3000."""
    y, x = np.mgrid[0:height, 0:width]
    body = (x * 61 + y * 37) % 3000
    outside = (y - height / 2) ** 2 + (x - width / 2) ** 2 > (min(height, width) / 2) ** 2
    return np.where(outside, -2000, body).astype(np.int16)


def ct_slice(syntax: UID = ExplicitVRLittleEndian) -> bytes:
    """A 16-bit signed CT slice (Pixel Representation 1) with rescale slope 1 and intercept -1024:
    its values are stored values, Hounsfield units only after the rescale."""
    ds = _dataset(CTImageStorage, "ct", "CT")
    _image(ds, ct_pixels(), "MONOCHROME2")
    ds.RescaleIntercept = -1024
    ds.RescaleSlope = 1
    ds.RescaleType = "HU"
    ds.WindowCenter, ds.WindowWidth = 40, 400  # a display setting that must not touch the values
    return _write(ds, syntax)


def mr_slice(syntax: UID = ExplicitVRLittleEndian) -> bytes:
    """An MR slice of 12 bits stored in 16 (values 0..4095), unsigned, with no rescale."""
    y, x = np.mgrid[0:36, 0:44]
    ds = _dataset(MRImageStorage, "mr", "MR")
    _image(ds, ((x * 97 + y * 131) % 4096).astype(np.uint16), "MONOCHROME2", bits_stored=12)
    return _write(ds, syntax)


def rgb_pixels(frames: int | None = None, height: int = 32, width: int = 40) -> np.ndarray:
    """An ultrasound-like colour picture (or `frames` of them, each different)."""
    y, x = np.mgrid[0:height, 0:width]
    one = [
        np.stack([(x * 6 + k * 40) % 256, (y * 8) % 256, (x + y + k * 20) % 256], -1)
        for k in range(frames or 1)
    ]
    stack = np.stack(one).astype(np.uint8)
    return stack if frames else stack[0]


def ultrasound_rgb(syntax: UID = ExplicitVRLittleEndian) -> bytes:
    """An RGB ultrasound picture, 8 bits a sample, stored native (or RLE)."""
    ds = _dataset(UltrasoundImageStorage, "us", "US")
    _image(ds, rgb_pixels(), "RGB")
    return _write(ds, syntax)


def ultrasound_ybr_full() -> bytes:
    """Native YCbCr samples (YBR_FULL), as some devices store them uncompressed."""
    ds = _dataset(UltrasoundImageStorage, "us-ybr", "US")
    ybr = Image.fromarray(rgb_pixels(), "RGB").convert("YCbCr")
    _image(ds, np.asarray(ybr), "YBR_FULL")
    return _write(ds)


def ultrasound_jpeg(frames: int | None = None) -> bytes:
    """JPEG Baseline frames from Pillow (4:2:0 YCbCr, the JPEG default), encapsulated as an
    ultrasound device writes them: Photometric Interpretation YBR_FULL_422, as DICOM asks of
    subsampled JPEG."""
    pixels = rgb_pixels(frames)
    stack = pixels if frames else pixels[None]
    encoded = []
    for frame in stack:
        out = io.BytesIO()
        Image.fromarray(frame, "RGB").save(out, format="JPEG", quality=90)
        encoded.append(out.getvalue())
    sop_class = UltrasoundMultiFrameImageStorage if frames else UltrasoundImageStorage
    ds = _dataset(sop_class, f"us-jpeg-{frames}", "US")
    _image(ds, pixels, "YBR_FULL_422")
    ds.PixelData = encapsulate(encoded)
    ds.LossyImageCompression = "01"
    ds.file_meta.TransferSyntaxUID = JPEGBaseline8Bit
    ds["PixelData"].VR = "OB"
    out = io.BytesIO()
    dcmwrite(out, ds, enforce_file_format=True)
    return out.getvalue()


def multiframe_pixels(frames: int = 4, height: int = 32, width: int = 36) -> np.ndarray:
    d, y, x = np.mgrid[0:frames, 0:height, 0:width]
    return ((x * 300 + y * 200 + d * 5000) % 65536).astype(np.uint16)


def multiframe(syntax: UID = ExplicitVRLittleEndian, frames: int = 4) -> bytes:
    """An X-ray angiography run of `frames` 16-bit frames (each frame a fragment when compressed)."""
    ds = _dataset(XRayAngiographicImageStorage, f"xa-{frames}", "XA")
    _image(ds, multiframe_pixels(frames), "MONOCHROME2")
    ds.FrameIncrementPointer = 0x00181063  # Frame Time
    ds.FrameTime = 33.3
    return _write(ds, syntax)


def float_map() -> bytes:
    """A parametric map (an ADC map, say) in Float Pixel Data: 32-bit floats, no Bits Stored."""
    y, x = np.mgrid[0:20, 0:24]
    values = (np.sin(x / 3.0) * y - 0.5).astype(np.float32)
    ds = _dataset(ParametricMapStorage, "pmap", "MR")
    ds.Rows, ds.Columns = values.shape
    ds.NumberOfFrames = 1
    ds.SamplesPerPixel = 1
    ds.PhotometricInterpretation = "MONOCHROME2"
    ds.BitsAllocated = 32
    ds.FloatPixelData = values.tobytes()
    return _write(ds)


def without_preamble(*, file_meta: bool = True, implicit: bool = True) -> bytes:
    """A CT slice with no 128-byte preamble and no `DICM`, as old scanners wrote them (often with
    no extension either): starting straight with the File Meta group (0002), or, with no
    `file_meta`, with the dataset's own group 0008 in implicit or explicit VR."""
    ds = _dataset(CTImageStorage, "ct-bare", "CT")
    ds.SpecificCharacterSet = "ISO_IR 100"  # (0008,0005): the first element, as such files start
    _image(ds, ct_pixels(), "MONOCHROME2")
    ds.RescaleIntercept = -1024
    ds.RescaleSlope = 1
    out = io.BytesIO()
    if file_meta:
        ds.file_meta.TransferSyntaxUID = ImplicitVRLittleEndian if implicit else ExplicitVRLittleEndian
        ds.file_meta.MediaStorageSOPClassUID = ds.SOPClassUID
        ds.file_meta.MediaStorageSOPInstanceUID = ds.SOPInstanceUID
        dcmwrite(out, ds, enforce_file_format=False)
    else:
        del ds.file_meta
        dcmwrite(out, ds, implicit_vr=implicit, little_endian=True, enforce_file_format=False)
    return out.getvalue()


def rt_structure_set() -> bytes:
    """An RT Structure Set: contours of organs for a CT series, and no Pixel Data."""
    ds = _dataset(RTStructureSetStorage, "rtstruct", "RTSTRUCT")
    ds.StructureSetLabel = "Organs"
    roi = Dataset()
    roi.ROINumber = 1
    roi.ROIName = "Liver"
    roi.ReferencedFrameOfReferenceUID = _uid("frame of reference")
    ds.StructureSetROISequence = [roi]
    return _write(ds)


def dicomdir() -> bytes:
    """A DICOMDIR: the index of a disc's files (Media Storage Directory Storage), no Pixel Data."""
    ds = Dataset()
    ds.file_meta = FileMetaDataset()
    ds.file_meta.TransferSyntaxUID = ExplicitVRLittleEndian
    ds.file_meta.MediaStorageSOPClassUID = MediaStorageDirectoryStorage
    ds.file_meta.MediaStorageSOPInstanceUID = _uid("dicomdir")
    ds.FileSetID = "DISC1"
    ds.OffsetOfTheFirstDirectoryRecordOfTheRootDirectoryEntity = 0
    ds.OffsetOfTheLastDirectoryRecordOfTheRootDirectoryEntity = 0
    ds.FileSetConsistencyFlag = 0
    ds.DirectoryRecordSequence = []
    out = io.BytesIO()
    dcmwrite(out, ds, enforce_file_format=True)
    return out.getvalue()


def segmentation() -> bytes:
    """A binary Segmentation: one bit a pixel, one frame per segment and slice, masks that label
    another series' pictures."""
    masks = np.zeros((2, 16, 16), np.uint8)
    masks[0, 4:10, 3:12] = 1
    masks[1, 8:14, 6:9] = 1
    ds = _dataset(SegmentationStorage, "seg", "SEG")
    ds.NumberOfFrames = 2
    ds.Rows, ds.Columns = 16, 16
    ds.SamplesPerPixel = 1
    ds.PhotometricInterpretation = "MONOCHROME2"
    ds.BitsAllocated = ds.BitsStored = 1
    ds.HighBit = 0
    ds.PixelRepresentation = 0
    ds.SegmentationType = "BINARY"
    ds.PixelData = pack_bits(masks)
    return _write(ds)


def jpeg_lossless_sv1() -> bytes:
    """A 12-bit MR slice in JPEG Lossless SV1 (process 14, first-order prediction), what CR and MR
    archives often hold: a real SOF3 bitstream from imagecodecs' libjpeg-turbo, encapsulated."""
    y, x = np.mgrid[0:36, 0:44]
    pixels = ((x * 97 + y * 131) % 4096).astype(np.uint16)
    ds = _dataset(MRImageStorage, "mr-ljpeg", "MR")
    _image(ds, pixels, "MONOCHROME2", bits_stored=12)
    ds.PixelData = encapsulate(
        [imagecodecs.jpeg8_encode(pixels, lossless=True, predictor=1, bitspersample=12)]
    )
    ds["PixelData"].VR = "OB"
    ds.file_meta.TransferSyntaxUID = JPEGLosslessSV1
    out = io.BytesIO()
    dcmwrite(out, ds, enforce_file_format=True)
    return out.getvalue()


def huge_header() -> bytes:
    """A header that claims 1000 frames of 65535 x 65535 pixels over a few bytes of data: the size
    must be judged from the header, before anything is decoded or allocated."""
    ds = _dataset(CTImageStorage, "huge", "CT")
    _image(ds, ct_pixels(4, 4), "MONOCHROME2")
    ds.Rows = ds.Columns = 65535
    ds.NumberOfFrames = 1000
    return _write(ds)


def short_pixel_data() -> bytes:
    """A well-formed file whose Pixel Data holds 3 of the 4 frames its header declares."""
    ds = _dataset(XRayAngiographicImageStorage, "xa-short", "XA")
    pixels = multiframe_pixels(4)
    _image(ds, pixels, "MONOCHROME2")
    ds.PixelData = pixels[:3].tobytes()
    return _write(ds)


def palette_color() -> bytes:
    """8-bit indices into a 256-entry palette of 16-bit colours (PALETTE COLOR), as some
    ultrasound and nuclear medicine devices store colour."""
    y, x = np.mgrid[0:24, 0:30]
    ds = _dataset(UltrasoundImageStorage, "us-palette", "US")
    _image(ds, ((x * 8 + y * 3) % 256).astype(np.uint8), "PALETTE COLOR")
    ramp = np.arange(256, dtype=np.uint16)
    for colour, entries in (
        ("Red", ramp * 257),
        ("Green", (255 - ramp) * 257),
        ("Blue", (ramp * 7 % 256) * 257),
    ):
        setattr(ds, f"{colour}PaletteColorLookupTableDescriptor", [256, 0, 16])
        setattr(ds, f"{colour}PaletteColorLookupTableData", entries.astype("<u2").tobytes())
    return _write(ds)


def jpeg_extended_12bit() -> bytes:
    """A 12-bit MR slice in JPEG Extended (process 4), which Pillow's libjpeg reads at 8 bits only:
    lossy DCT at 12 bits from imagecodecs' libjpeg-turbo, encapsulated."""
    y, x = np.mgrid[0:32, 0:40]
    pixels = ((x * 97 + y * 131) % 4096).astype(np.uint16)
    ds = _dataset(MRImageStorage, "mr-jpeg12", "MR")
    _image(ds, pixels, "MONOCHROME2", bits_stored=12)
    ds.PixelData = encapsulate([imagecodecs.jpeg8_encode(pixels, level=95, bitspersample=12)])
    ds["PixelData"].VR = "OB"
    ds.file_meta.TransferSyntaxUID = JPEGExtended12Bit
    out = io.BytesIO()
    dcmwrite(out, ds, enforce_file_format=True)
    return out.getvalue()


def enhanced_ct(frames: int = 3) -> bytes:
    """An Enhanced CT multi-frame: its rescale is not at the top level but in the Shared
    Functional Groups, as enhanced objects keep what every frame shares."""
    ds = _dataset(EnhancedCTImageStorage, "enhanced-ct", "CT")
    _image(ds, np.stack([ct_pixels(32, 32) + k for k in range(frames)]).astype(np.int16), "MONOCHROME2")
    transform = Dataset()
    transform.RescaleSlope = 1
    transform.RescaleIntercept = -1024
    transform.RescaleType = "HU"
    shared = Dataset()
    shared.PixelValueTransformationSequence = [transform]
    ds.SharedFunctionalGroupsSequence = [shared]
    ds.PerFrameFunctionalGroupsSequence = [Dataset() for _ in range(frames)]
    return _write(ds)


def video() -> bytes:
    """An ultrasound clip as MPEG-4 AVC/H.264 (the bytes are a stand-in: no DICOM reader decodes
    video, so only its transfer syntax is read)."""
    ds = _dataset(UltrasoundMultiFrameImageStorage, "us-video", "US")
    _image(ds, rgb_pixels(2), "YBR_PARTIAL_420")
    ds.PixelData = encapsulate([b"\x00\x00\x00\x01\x67" + bytes(59)])
    ds["PixelData"].VR = "OB"
    ds.file_meta.TransferSyntaxUID = MPEG4HP41
    out = io.BytesIO()
    dcmwrite(out, ds, enforce_file_format=True)
    return out.getvalue()
