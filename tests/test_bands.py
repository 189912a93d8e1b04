"""Bands kept in separate files (`--bands`): 38-Cloud's `train_red/red_patch_1.TIF` beside
`train_nir/nir_patch_1.TIF`, Sentinel-2's `..._B02`, stacked into one record each, in the order
the user names, every reader giving exactly the band files' samples."""

from __future__ import annotations

import hashlib
import io
import shutil

import numpy as np
import pytest
import scientificgen
import tifffile
from conftest import convert
from outputcheck import rejects, summary
from PIL import Image
from test_full_depth import every_reader

from beam_tfrecord import iter_examples, load_dataset
from beam_tfrecord.config_base import ConfigError
from beam_tfrecord.elements import BandFile, PlannedInput, ShardTask
from beam_tfrecord.images import bands as image_bands
from beam_tfrecord.images.options import ImageConfig
from beam_tfrecord.output.file_index import load_index
from beam_tfrecord.plan import bands
from beam_tfrecord.plan.annotations.options import AnnotationConfig
from beam_tfrecord.plan.dedupe import content_hash, sources
from beam_tfrecord.plan.listing import InputFile, list_inputs
from beam_tfrecord.plan.source_config import SourceConfig
from beam_tfrecord.reasons import Reject

RGBN = "red,green,blue,nir"
SPELLING = {name: name for name in scientificgen.CLOUD38_BANDS}


def cloud_truth(root, names, order=scientificgen.CLOUD38_BANDS) -> dict[str, np.ndarray]:
    """Each patch's key and its band files stacked in `order`, as tifffile reads them."""
    base = root / "38-Cloud_training"
    return {
        f"38-Cloud_training/train/{name}": np.stack(
            [tifffile.imread(base / f"train_{band}" / f"{band}_{name}.TIF") for band in order], axis=-1
        )
        for name in names
    }


# ---- which files are a picture's bands: plan.bands, from paths alone ---------------------------


@pytest.mark.parametrize(
    ("relpath", "key", "named"),
    [
        ("train_red/red_patch_1.TIF", "train/patch_1", ("red",)),
        (
            "38-Cloud_training/train_nir/nir_patch_192_LC08.TIF",
            "38-Cloud_training/train/patch_192_LC08",
            ("nir",),
        ),
        ("S2/T33UUP_20200101T101031_B02.jp2", "S2/T33UUP_20200101T101031", ("B02",)),
        ("scene-RED.tif", "scene", ("red",)),  # case ignored, the run's spelling kept
        ("a-red_b.tif", "a-b", ("red",)),  # the separator after the word goes with it
        ("scene.green.tif", "scene", ("green",)),
        ("red/red_1.tif", "1", ("red",)),  # one band named twice is still one band
        ("red/nir_1.tif", "1", ("red", "nir")),
        ("redish/predicted_1.tif", "redish/predicted_1", ()),  # words, not substrings
        ("train_gt/gt_patch_1.TIF", "train_gt/gt_patch_1", ()),
    ],
)
def test_a_file_is_the_band_a_word_of_its_path_names(relpath, key, named):
    spelling = {"red": "red", "green": "green", "nir": "nir", "b02": "B02"}
    assert bands.picture_key(relpath, spelling) == (key, named)


def listed(*relpaths: str, base: str = "/data/in") -> list[InputFile]:
    return [InputFile(r, f"{base}/{r}", 10 + i, mtime=float(i)) for i, r in enumerate(relpaths)]


def test_the_files_of_one_key_are_one_input_in_band_order():
    files = listed("train_nir/nir_p1.TIF", "train_red/red_p1.TIF", "train_gt/gt_p1.TIF", ".DS_Store")
    found = {f.relpath: f for f in bands.grouped(files, ("red", "nir"))}
    picture = found["train/p1"]
    assert [(b.band, b.relpath) for b in picture.bands] == [
        ("red", "train_red/red_p1.TIF"),
        ("nir", "train_nir/nir_p1.TIF"),
    ]
    assert (picture.path, picture.size, picture.mtime, picture.problem) == (
        "/data/in/train_red/red_p1.TIF", 21, 1.0, None,
    )  # fmt: skip
    assert found["train_gt/gt_p1.TIF"].problem == ("skipped", "names none of the bands red, nir (--bands)")
    assert found[".DS_Store"].problem is None  # clutter: the labels step skips it, as always
    assert bands.grouped(list(found.values()), ("red", "nir")) == sorted(found.values())  # grouped twice


def test_a_key_missing_a_band_or_claimed_twice_is_a_reject_known_from_the_listing():
    files = listed(
        "red/a.tif", "green/a.tif",  # a: both bands
        "red/b.tif",  # b: no green
        "red/c.tif", "green/c.tif", "c_green.tif",  # c: two files say green
        "red/d_green.tif", "green/d.tif",  # d: a file names two bands
    )  # fmt: skip
    found = {f.relpath: f.problem for f in bands.grouped(files, ("red", "green"))}
    assert found["a"] is None
    assert found["b"] == ("band_missing", "no file of band green; found red red/b.tif")
    assert found["c"] == ("band_ambiguous", "green/c.tif and c_green.tif both are band green")
    assert found["d"] == ("band_ambiguous", "red/d_green.tif names red and green: which band is it?")


def test_a_band_files_listing_problem_is_its_pictures():
    files = [*listed("red/a.tif"), InputFile("nir/a.tif", "/data/in/nir/a.tif", 0, ("unreadable", "broken"))]
    (picture,) = bands.grouped(files, ("red", "nir"))
    assert picture.problem == ("unreadable", "band nir (nir/a.tif): broken")


def test_a_path_of_band_words_only_is_the_input_folders_picture():
    (picture,) = bands.grouped(listed("red.tif", "nir.tif", base="/data/scene_7"), ("red", "nir"))
    assert picture.relpath == "scene_7" and len(picture.bands) == 2


@pytest.mark.parametrize(
    ("relpaths", "message"),
    [
        (("a.tif", "b.tif"), "no file under --input has one"),
        (("red/a.tif", "gren/a.tif"), "names nir, and no file under --input has it"),
    ],
)
def test_bands_no_file_names_fail_in_one_line(relpaths, message):
    with pytest.raises(ConfigError, match=message):
        bands.grouped(listed(*relpaths), ("red", "nir"))


@pytest.mark.parametrize(
    ("value", "message"),
    [(("red", "RED"), "one band twice"), (("red_1",), "no word of a path"), ((), "at least one band")],
)
def test_band_names_are_words_of_a_path(value, message):
    with pytest.raises(ConfigError, match=message):
        SourceConfig(input="in", bands=value)


def test_bands_and_annotations_are_refused_together():
    with pytest.raises(ConfigError, match="bands"):
        SourceConfig(input="in", bands=("red",), annotations=AnnotationConfig("coco"))


def test_a_planned_pictures_band_files_are_staged_and_read_back():
    band_files = (
        BandFile("red", "red/a.tif", "/in/red/a.tif", 5),
        BandFile("nir", "nir/a.tif", "/in/nir/a.tif", 6),
    )
    item = PlannedInput("a", "/in/red/a.tif", 11, "train", bands=band_files)
    task = ShardTask("train", 0, 1, (item, PlannedInput("b.tif", "/in/b.tif", 3, "train")))
    assert ShardTask.from_json(task.to_json()).inputs == task.inputs


# ---- the worker: each band's file read at full depth, checked, stacked ------------------------


def tiff(samples: np.ndarray) -> bytes:
    out = io.BytesIO()
    tifffile.imwrite(out, samples)
    return out.getvalue()


def png(samples: np.ndarray) -> bytes:
    out = io.BytesIO()
    Image.fromarray(samples).save(out, format="PNG")
    return out.getvalue()


def band(name: str) -> BandFile:
    return BandFile(name, f"{name}/a.tif", f"/in/{name}/a.tif", 0)


@pytest.mark.parametrize(
    ("second", "reason", "said"),
    [
        (
            tiff(np.zeros((8, 9), np.uint16)),
            "bands_differ",
            "red (red/a.tif) is 10x8 uint16, band nir (nir/a.tif) is 9x8",
        ),
        (tiff(np.zeros((8, 10), np.float32)), "bands_differ", "is 10x8 float32"),
        (
            png(np.zeros((8, 10, 3), np.uint8)),
            "band_not_single",
            "nir (nir/a.tif) holds uint8 x3, not one band",
        ),
        (tiff(np.zeros((2, 8, 10), np.uint16)), "band_not_single", "2 pages of uint16 x1"),
        (tiff(np.zeros((8, 10), np.uint16))[:200], "truncated", "band nir (nir/a.tif): "),
        (b"", "empty", "band nir (nir/a.tif): the file has zero bytes"),
    ],
    ids=["size", "dtype", "rgb", "pages", "cut", "empty"],
)
def test_a_band_file_that_is_not_one_band_of_the_pictures_kind_is_a_reject(second, reason, said):
    first = tiff(np.ones((8, 10), np.uint16))
    with pytest.raises(Reject) as raised:
        image_bands.encode_bands([(band("red"), first), (band("nir"), second)], ImageConfig())
    assert raised.value.reason == reason and said in raised.value.detail


def test_8_bit_bands_of_grayscale_or_rgb_are_stored_as_a_photograph_is():
    planes = [np.full((6, 7), value, np.uint8) for value in (10, 20, 30)]
    files = [(band(n), png(p)) for n, p in zip(("r", "g", "b"), planes, strict=True)]
    image = image_bands.encode_bands(files, ImageConfig())
    assert (image.format, image.depth, image.channels, image.source_format) == ("png", None, 3, "PNG")
    assert np.array_equal(np.asarray(Image.open(io.BytesIO(image.data))), np.stack(planes, axis=-1))


# ---- the command, end to end --------------------------------------------------------------------


def test_38_cloud_bands_become_one_record_each_as_every_reader_reads_them(tmp_path):
    names = scientificgen.cloud38(tmp_path / "in", patches=4)
    base = tmp_path / "in" / "38-Cloud_training"
    (base / "train_nir" / f"nir_{names[-1]}.TIF").unlink()  # a patch whose nir file is gone
    args = ("--bands", RGBN, "--label_source", "none")
    assert convert(tmp_path / "in", tmp_path / "out", *args) == 0
    truth = cloud_truth(tmp_path / "in", names[:-1])
    every_reader(tmp_path / "out", truth)
    result = summary(tmp_path / "out")
    assert result["full_depth"] == {"uint16 x4 png": 3} and result["options"]["bands"] == list(
        RGBN.split(",")
    )
    assert result["inputs"] == result["records"] + result["rejects"] == 4
    assert result["skipped"] == 4 + 1  # train_gt's masks and the CSV list: no band of the picture
    (reject,) = [line for line in rejects(tmp_path / "out") if line["reason"] != "skipped"]
    assert reject["path"] == f"38-Cloud_training/train/{names[-1]}" and reject["reason"] == "band_missing"
    assert "no file of band nir; found red 38-Cloud_training/train_red/red_" in reject["detail"]
    for record in iter_examples(str(tmp_path / "out")):  # the band files' bytes, in band order
        files = [
            base / f"train_{b}" / f"{b}_{record['filename'].split('/')[-1]}.TIF" for b in RGBN.split(",")
        ]
        assert record["sha256"] == hashlib.sha256(b"".join(f.read_bytes() for f in files)).hexdigest()


def test_the_bands_are_stacked_in_the_order_named(tmp_path):
    names = scientificgen.cloud38(tmp_path / "in", patches=2)
    args = ("--bands", "nir,red", "--label_source", "none", "--splits", "train=1")
    assert convert(tmp_path / "in", tmp_path / "out", *args) == 0
    every_reader(tmp_path / "out", cloud_truth(tmp_path / "in", names, order=("nir", "red")))
    assert summary(tmp_path / "out")["full_depth"] == {"uint16 x2 array": 2}


def test_8_bit_bands_in_class_folders_are_labelled_by_their_keys_folder(tmp_path):
    """Sentinel-2's band naming (`..._B04.png`) in class folders: the key keeps the folder, so
    the class is the folder's, and 8-bit RGB is stored as a photograph is (uint8, a PNG)."""
    rng = np.random.default_rng(2)
    truth = {}
    for name in ("Forest", "River"):
        (tmp_path / "in" / name).mkdir(parents=True)
        for i in range(2):
            scene = f"{name}/T33UUP_2020010{i}T101031"
            planes = {b: rng.integers(0, 256, (12, 14), dtype=np.uint8) for b in ("B02", "B03", "B04")}
            for b, plane in planes.items():
                Image.fromarray(plane).save(tmp_path / "in" / f"{scene}_{b}.png")
            truth[scene] = np.stack([planes["B04"], planes["B03"], planes["B02"]], axis=-1)
    assert convert(tmp_path / "in", tmp_path / "out", "--bands", "B04,B03,B02") == 0
    result = summary(tmp_path / "out")
    assert "full_depth" not in result and result["source_formats"] == {"PNG": 4}
    every_reader(tmp_path / "out", truth)
    labelled = {r["filename"]: r["label_text"] for r in iter_examples(str(tmp_path / "out"))}
    assert labelled == {scene: scene.split("/")[0] for scene in truth}
    images, labels = next(iter(load_dataset(str(tmp_path / "out"), "train", batch_size=4)))
    assert images.dtype.name == "uint8" and images.shape == (4, 12, 14, 3) and labels.shape == (4,)


def test_sentinel_2_safe_products_10_m_bands_make_one_record_a_tile(tmp_path):
    """Each 10 m band a 16-bit JPEG 2000 of its own; the aerosol and water-vapour maps, the
    true-colour preview and the XML name no band and are skipped."""
    folders = scientificgen.sentinel2_safe(tmp_path / "in", dates=2)
    args = ("--bands", "B04,B03,B02,B08", "--label_source", "none")
    assert convert(tmp_path / "in", tmp_path / "out", *args) == 0
    truth = {}
    for folder in folders:
        files = {p.name.split("_")[2]: p for p in folder.iterdir()}
        key = str(files["B02"].relative_to(tmp_path / "in")).replace("_B02_10m.jp2", "_10m")
        truth[key] = np.stack(
            [np.asarray(Image.open(files[b])) for b in ("B04", "B03", "B02", "B08")], axis=-1
        )
    every_reader(tmp_path / "out", truth)
    result = summary(tmp_path / "out")
    assert result["source_formats"] == {"JPEG2000": 2} and result["full_depth"] == {"uint16 x4 png": 2}
    assert result["inputs"] == 2 and result["skipped"] == 2 * 4


def test_identical_pictures_of_bands_are_copies_with_dedupe(tmp_path):
    scientificgen.cloud38(tmp_path / "in", patches=1)
    shutil.copytree(tmp_path / "in" / "38-Cloud_training", tmp_path / "in" / "copy")
    listing = bands.grouped(list_inputs(str(tmp_path / "in")), RGBN.split(","))
    hashes = {content_hash(sources(f)) for f in listing if f.bands}
    assert len(hashes) == 1  # the two pictures' band files hold the same bytes
    args = ("--bands", RGBN, "--label_source", "none", "--dedupe")
    assert convert(tmp_path / "in", tmp_path / "out", *args) == 0
    (duplicate,) = [line for line in rejects(tmp_path / "out") if line["reason"] == "duplicate"]
    assert duplicate["path"].startswith("copy/train/patch_1")
    (record,) = iter_examples(str(tmp_path / "out"))
    assert record["sha256"] in hashes  # what the plan compared is what the record holds


def test_a_run_where_no_file_names_a_band_fails_in_one_line(tmp_path, capsys):
    scientificgen.cloud38(tmp_path / "in", patches=1)
    assert convert(tmp_path / "in", tmp_path / "out", "--bands", "B02,B03", "--label_source", "none") == 2
    err = capsys.readouterr().err
    assert "--bands" in err and "no file under --input has one as a word of its path" in err
    assert not (tmp_path / "out").exists()


def test_an_append_converts_the_new_pictures_of_bands_only(tmp_path):
    names = scientificgen.cloud38(tmp_path / "all", patches=3)
    base, later = tmp_path / "in" / "38-Cloud_training", names[-1]
    shutil.copytree(tmp_path / "all" / "38-Cloud_training", base, ignore=shutil.ignore_patterns(f"*{later}*"))
    args = ("--bands", RGBN, "--label_source", "none")
    assert convert(tmp_path / "in", tmp_path / "out", *args) == 0
    for band in RGBN.split(","):  # the third patch's band files arrive
        name = f"train_{band}/{band}_{later}.TIF"
        shutil.copy(tmp_path / "all" / "38-Cloud_training" / name, base / name)
    assert convert(tmp_path / "in", tmp_path / "out", *args, "--append") == 0
    every_reader(tmp_path / "out", cloud_truth(tmp_path / "in", names))
    index = {entry.relpath: entry.sha256 for entry in load_index(str(tmp_path / "out"))}
    assert all(index[f"38-Cloud_training/train/{name}"] for name in names)
    first, grown = summary(tmp_path / "out")["history"]
    assert (first["records"], grown["inputs"], grown["records"]) == (2, 1, 1)  # the new picture alone
