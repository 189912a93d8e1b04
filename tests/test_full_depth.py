"""Pictures past 8 bits, converted by the command, read back with every reader: each pixel equals
what tifffile (or Pillow, for a PNG) reads from the source file, in the same shape and dtype.

The trees are written as the instruments' software writes them: tifffile with PackBits and
Deflate (microscopy), 16-bit PNGs of depth in millimetres (Pillow, as RGB-D tools save them),
float and many-band tiles, z-stacks."""

from __future__ import annotations

import io
import json
import os

import dicomgen
import imagegen
import numpy as np
import pytest
import tensorflow as tf
import tensorflow_datasets as tfds
import tifffile
import tiffgen
from conftest import convert
from dicomgen import CT_SYNTAXES
from outputcheck import summary
from PIL import Image

from beam_tfrecord import decode_pixels, iter_examples, load_dataset
from beam_tfrecord.images.normalize import encode_for_tensorflow
from beam_tfrecord.images.options import ImageConfig
from beam_tfrecord.summary import MixedPixels

RNG = np.random.default_rng(58)


def microscopy(root, per_class: int = 3) -> dict[str, np.ndarray]:
    """16-bit nuclei (values up to 44,401) in two class folders, PackBits and Deflate."""
    truth = {}
    for name in ("nuclei", "debris"):
        os.makedirs(root / name, exist_ok=True)
        for i in range(per_class):
            samples = RNG.integers(0, 44_402, (24 + i, 32), dtype=np.uint16)
            path = f"{name}/{i}.tif"
            tifffile.imwrite(root / path, samples, compression="packbits" if i % 2 else "zlib")
            truth[path] = tifffile.imread(root / path)[..., np.newaxis]
    return truth


def depth_pngs(root) -> dict[str, np.ndarray]:
    """Depth in millimetres as 16-bit PNGs (Pillow's I;16, as RGB-D tools write them)."""
    truth = {}
    os.makedirs(root / "depth", exist_ok=True)
    for i in range(3):
        millimetres = RNG.integers(300, 12_000, (20, 30), dtype=np.uint16)
        Image.fromarray(millimetres).save(root / f"depth/{i}.png")
        truth[f"depth/{i}.png"] = millimetres[..., np.newaxis]
    return truth


def tiles(root, dtype: str, bands: int, pages: int = 1) -> dict[str, np.ndarray]:
    """Float or many-band tiles (pages > 1: z-stacks), as tifffile writes them."""
    truth = {}
    os.makedirs(root / "tiles", exist_ok=True)
    for i in range(3):
        shape = ((pages,) if pages > 1 else ()) + (16, 20) + ((bands,) if bands > 1 else ())
        samples = (RNG.random(shape) * 1000).astype(dtype)
        # Bands interleaved (contig) in one page; pages of one band each for a stack.
        planar = {"planarconfig": "contig"} if bands > 1 else {}
        tifffile.imwrite(
            root / f"tiles/{i}.tif", samples, photometric="minisblack", compression="zlib", **planar
        )
        truth[f"tiles/{i}.tif"] = samples if bands > 1 else samples[..., np.newaxis]
    return truth


def every_reader(out, truth: dict[str, np.ndarray]) -> None:
    """TFDS's builder_from_directory, load_dataset and iter_examples each give the source's
    samples exactly."""
    builder = tfds.builder_from_directory(str(out))
    seen = {}
    for example in tfds.as_numpy(builder.as_dataset(split="train")):
        image = example["image"]
        seen[image["filename"].decode()] = image["encoded"] if "encoded" in image else image["array"]
    assert_equal(seen, truth)

    dataset = load_dataset(
        str(out), "train", batch_size=None, shuffle=False, features=True, decode_images=True
    )
    seen = {r["image/filename"].numpy().decode(): r["image"].numpy() for r in dataset}
    assert_equal(seen, truth)

    seen = {r["filename"]: decode_pixels(r) for r in iter_examples(str(out))}
    assert_equal(seen, truth)


def assert_equal(seen: dict[str, np.ndarray], truth: dict[str, np.ndarray]) -> None:
    assert sorted(seen) == sorted(truth)
    for name, samples in truth.items():
        assert (seen[name].dtype, seen[name].shape) == (samples.dtype, samples.shape), name
        assert np.array_equal(seen[name], samples), name


def test_16_bit_microscopy_is_kept_to_the_last_level(tmp_path):
    truth = microscopy(tmp_path / "in")
    assert convert(tmp_path / "in", tmp_path / "out") == 0
    result = summary(tmp_path / "out")
    assert result["full_depth"] == {"uint16 x1 png": 6} and result["tfds_metadata"]["written"]
    assert "high_bit_depth" not in result["changes_per_reason"]
    every_reader(tmp_path / "out", truth)
    images, labels = next(
        iter(load_dataset(str(tmp_path / "out"), "train", batch_size=2, image_size=(12, 16)))
    )
    assert images.dtype == tf.uint16 and images.shape == (2, 12, 16, 1) and labels.shape == (2,)
    assert int(tf.reduce_max(images)) > 255  # resized in its own type, not scaled to 8 bits


def test_16_bit_depth_pngs_keep_their_own_bytes(tmp_path):
    truth = depth_pngs(tmp_path / "in")
    assert convert(tmp_path / "in", tmp_path / "out", "--label_source", "none") == 0
    every_reader(tmp_path / "out", truth)
    for record in iter_examples(str(tmp_path / "out")):
        assert record["image"] == (tmp_path / "in" / record["filename"]).read_bytes()
        assert record["dtype"] == "uint16"
    assert summary(tmp_path / "out")["reencoded"] == 0


@pytest.mark.parametrize(
    ("dtype", "bands", "pages"),
    [
        ("float64", 4, 1),
        ("float32", 1, 1),
        ("uint16", 13, 1),
        ("int16", 2, 1),
        ("uint16", 2, 1),  # TensorFlow decodes no 2-channel PNG (channels=2): an array
        ("uint16", 1, 5),
    ],
    ids=["float64 x4", "float32 depth", "uint16 x13", "int16 x2", "uint16 x2", "z-stack"],
)
def test_float_many_band_and_stacked_pictures_are_arrays_every_reader_restores(tmp_path, dtype, bands, pages):
    truth = tiles(tmp_path / "in", dtype, bands, pages)
    assert convert(tmp_path / "in", tmp_path / "out", "--label_source", "none") == 0
    result = summary(tmp_path / "out")
    stack = " stack" if pages > 1 else ""
    assert result["full_depth"] == {f"{dtype} x{bands} array{stack}": 3}
    every_reader(tmp_path / "out", truth)
    features = json.loads((tmp_path / "out" / "features.json").read_text())
    array = features["featuresDict"]["features"]["image"]["featuresDict"]["features"]["array"]
    assert array["tensor"]["dtype"] == dtype and array["tensor"]["encoding"] == "zlib"


def test_bit_depth_8_scales_as_before_and_says_so(tmp_path):
    microscopy(tmp_path / "in", per_class=1)
    assert convert(tmp_path / "in", tmp_path / "out", "--bit_depth", "8") == 0
    result = summary(tmp_path / "out")
    assert "full_depth" not in result and result["changes_per_reason"]["high_bit_depth"] == 2
    assert result["options"]["bit_depth"] == "8"
    images, _ = next(iter(load_dataset(str(tmp_path / "out"), "train", batch_size=None)))
    assert images.dtype == tf.uint8


def test_a_run_of_8_bit_and_16_bit_pictures_says_readers_need_one_kind(tmp_path):
    microscopy(tmp_path / "in", per_class=1)
    imagegen.write_tree(tmp_path / "in", {"nuclei/photo.png": imagegen.png()})
    assert convert(tmp_path / "in", tmp_path / "out") == 0
    result = summary(tmp_path / "out")
    assert any("several kinds" in warning and "--bit_depth 8" in warning for warning in result["warnings"])
    assert not result["tfds_metadata"]["written"] and "8-bit: 1" in result["tfds_metadata"]["reason"]
    with pytest.raises(MixedPixels, match="--bit_depth 8"):
        load_dataset(str(tmp_path / "out"), "train")
    kinds = {str(decode_pixels(r).dtype) for r in iter_examples(str(tmp_path / "out"))}
    assert kinds == {"uint8", "uint16"}  # read one by one, each in its own type


def test_dicoms_in_five_transfer_syntaxes_give_their_stored_values(tmp_path):
    """A CT slice in each lossless syntax, one file without preamble or extension: every reader
    gives pydicom's `pixel_array` ([H, W, 1], int16), and the records keep rescale and modality."""
    pydicom = pytest.importorskip("pydicom")
    files = {
        f"ct/{str(syntax.name).replace(' ', '_')}.dcm": dicomgen.ct_slice(syntax) for syntax in CT_SYNTAXES
    }
    files["ct/IM000001"] = dicomgen.without_preamble()
    imagegen.write_tree(tmp_path / "in", files)
    truth = {
        name: pydicom.dcmread(tmp_path / "in" / name, force=True).pixel_array[..., np.newaxis]
        for name in files
    }
    assert convert(tmp_path / "in", tmp_path / "out", "--label_source", "none") == 0
    result = summary(tmp_path / "out")
    assert result["source_formats"] == {"DICOM": len(files)} and result["rejects"] == 0
    every_reader(tmp_path / "out", truth)
    records = list(iter_examples(str(tmp_path / "out")))
    slices = [r for r in records if r["filename"].endswith(".dcm")]
    assert {(r["modality"], r["rescale_intercept"], r["rescale_slope"]) for r in slices} == {
        ("CT", -1024.0, 1.0)
    }


def test_a_geotiff_keeps_its_bands_transform_and_crs(tmp_path):
    made = tiffgen.eurosat_tile()  # 13 bands, planar: tifffile reads [13, H, W]
    truth = np.moveaxis(made.array, 0, -1)
    imagegen.write_tree(tmp_path / "in", {"River/River_1.tif": made.data})
    assert convert(tmp_path / "in", tmp_path / "out") == 0
    record = next(iter_examples(str(tmp_path / "out")))
    assert np.array_equal(record["pixels"], truth) and record["pixels"].dtype == np.uint16
    assert record["crs"] == "EPSG:32633" and len(record["geo_transform"].split(",")) == 6
    every_reader(tmp_path / "out", {"River/River_1.tif": truth})


def test_four_8_bit_bands_in_grayscale_photometric_are_kept_every_one(tmp_path):
    """Tools that write bands, not colours (min-is-black, four interleaved samples), make TIFFs
    Pillow cannot open: they are read at full depth, as 8-bit RGB + a band is."""
    samples = RNG.integers(0, 256, (12, 10, 4), dtype=np.uint8)
    os.makedirs(tmp_path / "in" / "tiles")
    tifffile.imwrite(tmp_path / "in/tiles/0.tif", samples, photometric="minisblack", planarconfig="contig")
    assert convert(tmp_path / "in", tmp_path / "out", "--label_source", "none") == 0
    assert summary(tmp_path / "out")["full_depth"] == {"uint8 x4 array": 1}
    every_reader(tmp_path / "out", {"tiles/0.tif": samples})


def test_bit_depth_8_names_a_16_bit_rgb_tiff_that_pillow_reads_at_8_bits():
    """Pillow opens 16-bit RGB TIFF as plain RGB: the change is still named, never silent."""
    samples = RNG.integers(0, 65_535, (8, 9, 3), dtype=np.uint16)
    data = io.BytesIO()
    tifffile.imwrite(data, samples, photometric="rgb")
    assert encode_for_tensorflow(data.getvalue(), ImageConfig(bit_depth="8")).changes == (
        "format",
        "high_bit_depth",
    )
