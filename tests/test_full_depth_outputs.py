"""What the house makes generic, run over trees of pictures past 8 bits (16-bit microscopy TIFFs
and PNGs, a 13-band Sentinel-2 tile set, float32 depth maps, z-stacks, their pages as records of
their own (`--pages each`), DICOM slices): an append
equals a run over every picture and a resumed run keeps its `full_depth` counts, ArrayRecord holds
the TFRecord run's records (Grain and random access read them), a tree in a bucket gives the
local tree's records and gs:// output gets TFDS's features, inspect passes and draws each picture
contrast-stretched (Sentinel-2 as bands 4-3-2), the options that shape records keep the samples'
type, and broken files stay rejects beside good ones."""

from __future__ import annotations

import logging
import shutil
import uuid

import annotationgen as ag
import imagegen
import numpy as np
import pausing
import pytest
import scientificgen
import tensorflow as tf
import tifffile
import tiffgen
from conftest import convert
from gcsemulator import EMULATOR_ENV, Emulator
from outputcheck import rejects, serialized_records, summary
from PIL import Image

from beam_tfrecord import decode_pixels, iter_examples, load_dataset
from beam_tfrecord.read.random_access import RecordArray, record_parser
from pipelines import inspect

SPLITS = ("--splits", "train=0.6,test=0.4")


def _microscopy_tiffs(root):
    scientificgen.nuclei(root, per_class=3)
    return (), ["debris/2.tif", "nuclei/1.tif"]


def _microscopy_pngs(root):
    """16-bit PNGs of two kinds of cells, as Pillow writes a camera's `I;16` frames."""
    rng = np.random.default_rng(16)
    files = {}
    for name in ("nuclei", "debris"):
        for i in range(3):
            frame = Image.fromarray(rng.integers(0, 60_000, (18, 22), dtype=np.uint16))
            files[f"{name}/{i}.png"] = imagegen.encode(frame, "PNG")
    imagegen.write_tree(root, files)
    return (), ["nuclei/2.png"]


def _sentinel2(root):
    scientificgen.eurosat(root, per_class=3)
    return (), ["River/River_3.tif"]


def _depth_maps(root):
    imagegen.write_tree(root, {f"depth/{i}.tif": tiffgen.depth_map(seed=i).data for i in range(5)})
    return ("--label_source", "none"), ["depth/4.tif"]


def _z_stacks(root):
    files = {
        f"{c}/{i}.tif": tiffgen.imagej_zstack(seed=i + 10 * (c == "b")).data for c in "ab" for i in range(3)
    }
    imagegen.write_tree(root, files)
    return (), ["b/2.tif"]


def _z_stack_pages(root):
    """ImageJ z-stacks and plain page sequences, a record a page (`--pages each`)."""
    files = {
        f"{c}/{i}.tif": (tiffgen.imagej_zstack if i % 2 else tiffgen.plain_zstack)(
            seed=i + 10 * (c == "b")
        ).data
        for c in "ab"
        for i in range(3)
    }
    imagegen.write_tree(root, files)
    return ("--pages", "each"), ["b/2.tif"]


def _dicom(root):
    pytest.importorskip("pydicom")  # the [dicom] extra
    import dicomgen

    files = {
        f"ct/{syntax.name.replace(' ', '_')}.dcm": dicomgen.ct_slice(syntax)
        for syntax in dicomgen.CT_SYNTAXES
    }
    imagegen.write_tree(root, files)
    return ("--label_source", "none"), [sorted(files)[-1]]


# name -> builder(root) -> (the command's options, the relpaths a first run leaves out)
TREES = {
    "microscopy_tiff": _microscopy_tiffs,
    "microscopy_png": _microscopy_pngs,
    "sentinel2": _sentinel2,
    "float32_depth": _depth_maps,
    "z_stack": _z_stacks,
    "z_stack_pages": _z_stack_pages,
    "dicom": _dicom,
}
# What summary.json's `full_depth` counts for each tree's pictures.
TOKENS = {
    "microscopy_tiff": "uint16 x1 png",
    "microscopy_png": "uint16 x1 png",
    "sentinel2": "uint16 x13 array",
    "float32_depth": "float32 x1 array",
    "z_stack": "uint16 x1 array stack",
    "z_stack_pages": "uint16 x1 png",
    "dicom": "int16 x1 array +modality,photometric_interpretation,rescale_slope,rescale_intercept,"
    "transfer_syntax,bits_stored",
}


def records(output) -> dict[str, list[bytes]]:
    """Every split's records as stored, sorted (an append's shards order them otherwise)."""
    return {split: sorted(serialized_records(output, split)) for split in summary(output)["splits"]}


def counted(output) -> dict:
    """What summary.json counts of the records, for a run and a grown or resumed one alike."""
    result = summary(output)
    return {
        "records": result["records"],
        "full_depth": result.get("full_depth"),
        "splits": {name: (s["records"], s["digest"]) for name, s in result["splits"].items()},
        "source_formats": result["source_formats"],
        "tfds": result["tfds_metadata"]["written"],
    }


@pytest.fixture(scope="module")
def emulator():
    with Emulator() as emu, pytest.MonkeyPatch.context() as patch:
        patch.setenv(EMULATOR_ENV, emu.url)
        yield emu


# ---- 1. --append, and a resumed run ---------------------------------------------------------------


@pytest.mark.parametrize("tree", sorted(TREES))
def test_an_append_equals_a_run_over_every_picture(tmp_path, tree):
    args, later = TREES[tree](tmp_path / "data")
    first = tmp_path / "first"
    shutil.copytree(tmp_path / "data", first)
    for relpath in later:
        (first / relpath).unlink()
    grown, whole = tmp_path / "grown", tmp_path / "whole"
    assert convert(first, grown, *args, *SPLITS) == 0
    assert convert(tmp_path / "data", grown, *args, *SPLITS, "--append") == 0
    assert convert(tmp_path / "data", whole, *args, *SPLITS) == 0
    assert records(grown) == records(whole)
    assert counted(grown) == counted(whole)
    assert counted(whole)["full_depth"] == {TOKENS[tree]: counted(whole)["records"]}
    assert inspect.run([str(grown), "--pictures", str(tmp_path / "pictures")]) == 0


@pytest.mark.parametrize("tree", ["sentinel2", "microscopy_png", "z_stack_pages"])
def test_a_killed_run_resumes_with_its_full_depth_counts(tmp_path, tree, caplog):
    args, _ = TREES[tree](tmp_path / "data")
    options = (*args, *SPLITS, "--num_shards", "2", "--no_progress")
    whole, out = tmp_path / "whole", tmp_path / "out"
    assert convert(tmp_path / "data", whole, *options) == 0
    pausing.killed_at("finalizing", tmp_path / "data", out, *options)
    assert not (out / "summary.json").exists()
    caplog.set_level(logging.INFO, logger="beam_tfrecord")
    assert convert(tmp_path / "data", out, *options) == 0
    assert "resuming the interrupted run" in caplog.text and summary(out)["resumed"]["shards"] == 4
    assert records(out) == records(whole)
    assert counted(out) == counted(whole)


def test_an_append_at_8_bits_onto_a_full_depth_dataset_is_refused_naming_both(tmp_path, capsys):
    args, later = TREES["microscopy_tiff"](tmp_path / "data")
    first = tmp_path / "first"
    shutil.copytree(tmp_path / "data", first)
    for relpath in later:
        (first / relpath).unlink()
    assert convert(first, tmp_path / "out", *args) == 0
    capsys.readouterr()
    assert convert(tmp_path / "data", tmp_path / "out", *args, "--append", "--bit_depth", "8") == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "--bit_depth is '8', the dataset's 'full'" in err[0], err


# ---- 2. ArrayRecord ------------------------------------------------------------------------------


@pytest.mark.parametrize("tree", sorted(TREES))
def test_array_record_holds_the_tfrecord_run_s_records_and_grain_reads_them(tmp_path, tree):
    import grain

    from beam_tfrecord.read.files import split_files

    args, _ = TREES[tree](tmp_path / "data")
    tfrecord, array = tmp_path / "tfrecord", tmp_path / "array_record"
    assert convert(tmp_path / "data", tfrecord, *args, *SPLITS) == 0
    assert convert(tmp_path / "data", array, *args, *SPLITS, "--file_format", "array_record") == 0
    assert records(array) == records(tfrecord)
    assert counted(array) == counted(tfrecord)
    for split, counts in summary(array)["splits"].items():
        truth = {r["filename"]: r["pixels"] for r in iter_examples(str(tfrecord), split)}
        at_random = RecordArray(str(array), split)
        assert len(at_random) == counts["records"] == len(truth)
        for record in (at_random[i] for i in range(len(at_random))):
            assert_same(record["pixels"], truth[record["filename"]])
        paths = split_files(str(array), split).paths
        dataset = grain.MapDataset.source(grain.sources.ArrayRecordDataSource(paths)).shuffle(seed=3)
        dataset = dataset.map(record_parser(str(array), split))
        seen = [dataset[i] for i in range(len(dataset))]
        assert sorted(r["filename"] for r in seen) == sorted(truth)
        for record in seen:
            assert_same(decode_pixels(record), truth[record["filename"]])
    assert inspect.run([str(array), "--pictures", str(tmp_path / "pictures")]) == 0


def assert_same(seen: np.ndarray, truth: np.ndarray) -> None:
    assert (seen.dtype, seen.shape) == (truth.dtype, truth.shape)
    assert np.array_equal(seen, truth, equal_nan=seen.dtype.kind == "f")


# ---- 3. a bucket ---------------------------------------------------------------------------------


@pytest.mark.parametrize("tree", sorted(TREES))
def test_a_tree_in_a_bucket_gives_the_local_tree_s_records_and_tfds_reads_gs_output(tmp_path, tree, emulator):
    import tensorflow_datasets as tfds
    from apache_beam.io.filesystems import FileSystems

    args, _ = TREES[tree](tmp_path / "data")
    bucket = f"test-{uuid.uuid4().hex[:12]}"
    emulator.client().create_bucket(bucket)
    files = {
        str(path.relative_to(tmp_path / "data")): path.read_bytes()
        for path in (tmp_path / "data").rglob("*")
        if path.is_file()
    }
    emulator.upload_tree(bucket, "data", files)
    local = tmp_path / "local"
    assert convert(tmp_path / "data", local, *args) == 0
    assert convert(f"gs://{bucket}/data", f"gs://{bucket}/out", *args) == 0
    copy = tmp_path / "copy"
    copy.mkdir()
    (listed,) = FileSystems.match([f"gs://{bucket}/out/*"])
    for found in listed.metadata_list:
        with FileSystems.open(found.path) as source:
            (copy / found.path.rsplit("/", 1)[1]).write_bytes(source.read())
    assert records(copy) == records(local)
    assert inspect.run([f"gs://{bucket}/out", "--pictures", str(tmp_path / "pictures")]) == 0
    assert (copy / "features.json").read_text() == (local / "features.json").read_text()
    truth = {r["filename"]: r["pixels"] for r in iter_examples(str(local))}
    builder = tfds.builder_from_directory(str(copy))
    for example in tfds.as_numpy(builder.as_dataset(split="train")):
        image = example["image"]
        assert_same(
            image["encoded"] if "encoded" in image else image["array"], truth[image["filename"].decode()]
        )


# ---- 4. inspect and its contact sheet ------------------------------------------------------------


@pytest.mark.parametrize("tree", sorted(TREES))
def test_inspect_passes_and_draws_each_picture_stretched_to_its_own_range(tmp_path, tree):
    args, _ = TREES[tree](tmp_path / "data")
    out = tmp_path / "out"
    assert convert(tmp_path / "data", out, *args) == 0
    assert inspect.run([str(out), "--pictures", str(tmp_path / "pictures")]) == 0
    with Image.open(tmp_path / "pictures" / "contact_sheet.png") as sheet:
        title = sheet.text["Title"]
        cells = _cells(sheet.convert("RGB"), list(iter_examples(str(out))))
    assert "contrast-stretched" in title and len(cells) == summary(out)["records"]
    assert ("bands 4-3-2 as RGB" in title) == (tree == "sentinel2")
    for filename, (cell, pixels) in cells.items():
        expected = _stretched(pixels, (3, 2, 1) if tree == "sentinel2" else None)
        assert np.array_equal(cell, expected), filename


@pytest.mark.parametrize(
    ("files", "says"),
    [
        ({"a/gray.tif": tiffgen.microscopy_gray16().data, "a/rgb.tif": tiffgen.rgb16().data}, "own range"),
        (
            {
                "a/photo.png": imagegen.png(),
                "a/cells.tif": tiffgen.microscopy_gray16().data,
                "a/depth.tif": tiffgen.depth_map().data,
            },
            "pictures past 8 bits contrast-stretched",
        ),
    ],
    ids=["16-bit gray and RGB", "8-bit, 16-bit and float"],
)
def test_inspect_passes_a_run_of_several_kinds_of_pictures(tmp_path, files, says, capsys):
    """Gray and RGB 16-bit PNGs (load_dataset reads them all as RGB, as 8-bit ones), and a run
    whose pictures no one reader takes (it says so): inspect reads each record by its own keys."""
    imagegen.write_tree(tmp_path / "in", files)
    out = tmp_path / "out"
    assert convert(tmp_path / "in", out) == 0
    capsys.readouterr()
    assert inspect.run([str(out), "--pictures", str(tmp_path / "pictures")]) == 0, capsys.readouterr().err
    with Image.open(tmp_path / "pictures" / "contact_sheet.png") as sheet:
        assert says in sheet.text["Title"]
        cells = _cells(sheet.convert("RGB"), list(iter_examples(str(out))))
    assert len(cells) == 2
    for filename, (cell, pixels) in cells.items():
        assert np.array_equal(cell, _stretched(pixels, None)), filename


def _cells(sheet: Image.Image, found: list[dict]) -> dict[str, tuple[np.ndarray, np.ndarray]]:
    """Each record's cell on the sheet (pictures under 160 pixels are drawn at their size, in the
    order inspect sorts its sample: label, split, file name) beside its samples, for the records
    of pictures past 8 bits among `found` (every record of the output)."""
    pad, cell, caption, columns = 8, 160, 40, 6
    ordered = sorted(found, key=lambda r: (r.get("label_text") or "", "train", r["filename"]))
    header = sheet.height - -(-len(found) // columns) * (cell + caption + pad)
    drawn = np.asarray(sheet)
    cells = {}
    for i, record in enumerate(ordered):
        if "pixels" not in record:  # an 8-bit picture, drawn as stored
            continue
        pixels = record["pixels"]
        height, width = pixels.shape[-3:-1]
        x = pad + (i % columns) * (cell + pad) + (cell - width) // 2
        y = header + (i // columns) * (cell + caption + pad) + (cell - height) // 2
        cells[record["filename"]] = (drawn[y : y + height, x : x + width], pixels)
    return cells


def _stretched(pixels: np.ndarray, bands: tuple[int, ...] | None) -> np.ndarray:
    """The RGB a picture's preview shows: its first page, the bands shown (the first three, or
    the first), its finite range stretched to 0..255 (NaN as its minimum)."""
    if pixels.ndim == 4:
        pixels = pixels[0]
    if bands is None:
        bands = (0, 1, 2) if pixels.shape[-1] >= 3 else (0,)
    values = pixels[..., list(bands)].astype(np.float32)
    finite = np.isfinite(values)
    low, high = values[finite].min(), values[finite].max()
    scaled = (np.where(finite, values, low) - low) * np.float32(255.0) / np.float32(max(high - low, 1e-12))
    shown = np.clip(np.round(scaled), 0, 255).astype(np.uint8)
    return np.repeat(shown, 3, axis=-1) if shown.shape[-1] == 1 else shown


# ---- 5. options that shape records ---------------------------------------------------------------


@pytest.mark.parametrize("mode", ["stretch", "crop", "pad"])
@pytest.mark.parametrize("tree", ["microscopy_tiff", "float32_depth"])
def test_resize_keeps_the_samples_type(tmp_path, tree, mode):
    args, _ = TREES[tree](tmp_path / "data")
    out = tmp_path / "out"
    assert convert(tmp_path / "data", out, *args, "--resize", "12x10", "--resize_mode", mode) == 0
    dtype = "uint16" if tree == "microscopy_tiff" else "float32"
    for record in iter_examples(str(out)):
        assert record["dtype"] == dtype and record["pixels"].shape == (10, 12, 1)
    images = next(iter(load_dataset(str(out), "train", batch_size=None, shuffle=False)))
    image = images[0] if isinstance(images, tuple) else images
    assert image.dtype == tf.as_dtype(dtype) and tuple(image.shape) == (10, 12, 1)
    assert summary(out)["full_depth"] == {TOKENS[tree]: summary(out)["records"]}


def test_the_simple_schema_writes_tfds_features_for_16_bit_pictures_and_says_why_not_for_arrays(tmp_path):
    import tensorflow_datasets as tfds

    args, _ = TREES["microscopy_tiff"](tmp_path / "png16")
    out = tmp_path / "png16_out"
    assert convert(tmp_path / "png16", out, *args, "--schema", "simple") == 0
    assert summary(out)["tfds_metadata"]["written"] and (out / "features.json").exists()
    truth = {r["filename"]: r["pixels"] for r in iter_examples(str(out))}
    seen = list(tfds.as_numpy(tfds.builder_from_directory(str(out)).as_dataset(split="train")))
    assert len(seen) == len(truth)
    for example in seen:  # the simple schema's flat keys
        assert_same(example["image_raw"], truth[example["id"].decode()])

    args, _ = TREES["sentinel2"](tmp_path / "tiles")
    out = tmp_path / "tiles_out"
    assert convert(tmp_path / "tiles", out, *args, "--schema", "simple") == 0
    result = summary(out)
    assert not result["tfds_metadata"]["written"] and not (out / "features.json").exists()
    assert "simple schema" in result["tfds_metadata"]["reason"]
    for record in iter_examples(str(out)):
        assert record["pixels"].shape == (16, 16, 13) and record["dtype"] == "uint16"


@pytest.mark.parametrize("tree", ["microscopy_png", "sentinel2"])
def test_gzip_shards_hold_the_same_records(tmp_path, tree):
    args, _ = TREES[tree](tmp_path / "data")
    plain, gzip = tmp_path / "plain", tmp_path / "gzip"
    assert convert(tmp_path / "data", plain, *args) == 0
    assert convert(tmp_path / "data", gzip, *args, "--compression", "gzip") == 0
    assert records(gzip) == records(plain)
    assert summary(gzip)["full_depth"] == summary(plain)["full_depth"]
    truth = {r["filename"]: r["pixels"] for r in iter_examples(str(plain))}
    for record in iter_examples(str(gzip)):
        assert_same(record["pixels"], truth[record["filename"]])
    found = load_dataset(
        str(gzip), "train", batch_size=None, shuffle=False, features=True, decode_images=True
    )
    for record in found:
        assert_same(record["image"].numpy(), truth[record["image/filename"].numpy().decode()])
    assert inspect.run([str(gzip), "--pictures", str(tmp_path / "pictures")]) == 0


@pytest.mark.parametrize("tree", ["microscopy_tiff", "sentinel2", "z_stack"])
def test_the_pytorch_reader_gives_the_samples_type_channels_first(tmp_path, tree):
    torch = pytest.importorskip("torch")
    from beam_tfrecord.read.pytorch import TorchImages

    args, _ = TREES[tree](tmp_path / "data")
    out = tmp_path / "out"
    assert convert(tmp_path / "data", out, *args) == 0
    truth = {r["filename"]: r["pixels"] for r in iter_examples(str(out))}
    found = [item[0] for item in TorchImages(str(out), "train")]
    assert len(found) == len(truth)
    for image, pixels in zip(found, truth.values(), strict=True):  # both in file order
        assert isinstance(image, torch.Tensor) and str(image.dtype) == f"torch.{pixels.dtype}"
        assert_same(np.moveaxis(image.numpy(), 0, -1), pixels)


def _detection_tree(root, deep: bool) -> None:
    """Four COCO-annotated pictures (48x32) as TIFFs: 16-bit, or 8-bit of the same names."""
    (root / "images").mkdir(parents=True)
    images, boxes = [], []
    rng = np.random.default_rng(4)
    for i in range(4):
        samples = rng.integers(0, 60_000, (32, 48), dtype=np.uint16)
        stored = samples if deep else (samples // 256).astype(np.uint8)
        tifffile.imwrite(root / "images" / f"{i}.tif", stored, compression="zlib")
        images.append(ag.image(i, f"{i}.tif"))
        boxes.append(ag.box(100 + i, i, 17 if i % 2 else 18, [4 + i, 3, 20, 10 + i]))
        boxes.append(ag.box(200 + i, i, 1, [30, 20, 30, 20]))  # partly outside: clipped
    (root / "annotations").mkdir()
    (root / "annotations" / "instances_all.json").write_bytes(ag.instances(images, boxes))


def test_a_detection_run_over_16_bit_pictures_gives_the_boxes_an_8_bit_run_gives(tmp_path):
    targets, found = {}, {}
    for deep in (True, False):
        root, out = tmp_path / f"in{deep}", tmp_path / f"out{deep}"
        _detection_tree(root, deep)
        assert convert(root, out, "--annotations", "coco") == 0
        dataset = load_dataset(str(out), "train", batch_size=None, shuffle=False, image_size=(16, 24))
        targets[deep] = [{k: v.numpy().tolist() for k, v in target.items()} for _, target in dataset]
        found[deep] = {image.dtype for image, _ in dataset}
        assert summary(out)["objects"]["stored"] == 8
        assert summary(out).get("full_depth") == ({"uint16 x1 png": 4} if deep else None)
    assert targets[True] == targets[False]
    assert found == {True: {tf.uint16}, False: {tf.uint8}}
    assert inspect.run([str(tmp_path / "outTrue"), "--pictures", str(tmp_path / "pictures")]) == 0


# ---- 6. broken files beside good ones ------------------------------------------------------------


def test_broken_deep_files_are_rejects_beside_good_pictures(tmp_path):
    pytest.importorskip("pydicom")
    import dicomgen

    made = tiffgen.microscopy_gray16()
    tile = tiffgen.eurosat_tile()
    files = {
        "good/cells.tif": made.data,
        "good/tile.tif": tile.data,
        "good/ct.dcm": dicomgen.ct_slice(),
        "bad/truncated.tif": made.data[: len(made.data) // 2],
        "bad/missing_tile.tif": tiffgen.with_tile(tile.data, 17, offset=0),
        "bad/structures.dcm": dicomgen.rt_structure_set(),
    }
    imagegen.write_tree(tmp_path / "in", files)
    out = tmp_path / "out"
    assert convert(tmp_path / "in", out, "--label_source", "none") == 0
    result = summary(out)
    assert result["inputs"] == result["records"] + result["rejects"] == len(files)
    assert result["records"] == 3 and result["consistent"]
    found = {r["path"]: r["reason"] for r in rejects(out)}
    assert found == {
        "bad/truncated.tif": "truncated",
        "bad/missing_tile.tif": "corrupt",
        "bad/structures.dcm": "no_picture",
    }
    assert result["rejects_per_reason"] == {"corrupt": 1, "no_picture": 1, "truncated": 1}
    kinds = {r["filename"]: r["dtype"] for r in iter_examples(str(out))}
    assert kinds == {"good/cells.tif": "uint16", "good/tile.tif": "uint16", "good/ct.dcm": "int16"}
