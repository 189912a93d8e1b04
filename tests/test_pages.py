"""`--pages`: what a file of several pages becomes. `each` makes every page of an ImageJ z-stack or
hyperstack, an OME-TIFF, a plain page sequence, a scanned document and a multi-frame DICOM a
record of its own, named after its file (`zstack.tif#3`), whose samples every reader gives as
that page; a file's pages are labelled, split and sharded with it, and `inputs = records +
rejects` counts pages; a file whose pages cannot be counted is one input still. `first` keeps the
first page and says `frames_dropped`; `stack`, the default, is what every run made before."""

from __future__ import annotations

import io
import json
from collections import defaultdict

import annotationgen
import dicomgen
import imagegen
import numpy as np
import pytest
import tensorflow as tf
import tifffile
import tiffgen
from conftest import convert
from outputcheck import rejects, serialized_records, shard_files, summary
from PIL import Image
from test_full_depth import every_reader

from beam_tfrecord import decode_pixels, iter_examples, names
from beam_tfrecord.config_base import ConfigError
from beam_tfrecord.elements import Page, PlannedInput, RejectLine
from beam_tfrecord.images.inputs import prepare_input
from beam_tfrecord.images.options import ImageConfig
from beam_tfrecord.images.pages import RecentFiles
from beam_tfrecord.plan import pages
from beam_tfrecord.plan.listing import list_inputs
from beam_tfrecord.read.examples import decode_image

pydicom = pytest.importorskip("pydicom")  # the [dicom] extra
SPLITS = ("--splits", "train=0.5,test=0.5")


def stack_of(made: tiffgen.Made) -> np.ndarray:
    """tifffile's picture as `each` numbers its pages: [D, H, W, C], channels as bands."""
    array, axes = made.array, made.axes
    if "C" in axes:
        array = np.moveaxis(array, axes.index("C"), -1)
        return array.reshape(-1, *array.shape[-3:])
    return array.reshape(-1, *array.shape[-2:])[..., np.newaxis]


def frames_of(data: bytes) -> np.ndarray:
    """pydicom's pixel_array of a multi-frame DICOM, [D, H, W, C]."""
    pixels = pydicom.dcmread(io.BytesIO(data)).pixel_array
    return pixels if pixels.ndim == 4 else pixels[..., np.newaxis]


def scanned_pages(data: bytes) -> list[np.ndarray]:
    """Each page of a TIFF as tifffile reads it alone, [H, W, 1]."""
    with tifffile.TiffFile(io.BytesIO(data)) as tif:
        return [page.asarray()[..., np.newaxis] for page in tif.pages]


def named(relpath: str, found: list[np.ndarray] | np.ndarray) -> dict[str, np.ndarray]:
    """relpath -> samples of each page, under the names `each` gives them."""
    width = len(str(len(found) - 1))
    return {f"{relpath}#{i:0{width}d}": page for i, page in enumerate(found)}


def mixed_tree(root) -> dict[str, np.ndarray]:
    """Stacks of every kind beside files of one page, in two class folders; returns the name of
    each record `each` makes -> its page's samples."""
    files, truth = {}, {}
    for i in range(3):
        zstack, plain = tiffgen.imagej_zstack(seed=20 + i), tiffgen.plain_zstack(seed=30 + i)
        files[f"cells/zstack_{i}.tif"], files[f"debris/plain_{i}.tif"] = zstack.data, plain.data
        truth |= named(f"cells/zstack_{i}.tif", stack_of(zstack))
        truth |= named(f"debris/plain_{i}.tif", stack_of(plain))
    hyper, ome = tiffgen.imagej_hyperstack(), tiffgen.ome_stack()
    run = dicomgen.multiframe(dicomgen.RLELossless, frames=12)  # each frame a fragment of its own
    scan = tiffgen.pages_of_two_sizes().data
    files |= {"cells/hyper.tif": hyper.data, "debris/ome.ome.tif": ome.data, "cells/run.dcm": run}
    files["debris/scan.tif"] = scan
    truth |= named("cells/hyper.tif", stack_of(hyper)) | named("debris/ome.ome.tif", stack_of(ome))
    truth |= named("cells/run.dcm", frames_of(run)) | named("debris/scan.tif", scanned_pages(scan))
    single, photo = tiffgen.microscopy_gray16(), imagegen.png(20, 16)
    files |= {"cells/single.tif": single.data, "debris/photo.png": photo}
    truth["cells/single.tif"] = single.array[..., np.newaxis]
    truth["debris/photo.png"] = np.asarray(Image.open(io.BytesIO(photo)))
    imagegen.write_tree(root, files)
    return truth


def samples(record: dict) -> np.ndarray:
    """A record's picture in its own type and bands (an 8-bit one gray or RGB as stored)."""
    if "pixels" in record:
        return decode_pixels(record)
    with Image.open(io.BytesIO(record["image"])) as image:
        return decode_image(record["image"], channels=len(image.getbands()))


def by_name(out) -> dict[str, dict]:
    return {r["filename"]: r for split in summary(out)["splits"] for r in iter_examples(str(out), split)}


def names_in(shard: str) -> list[str]:
    """The `image/filename` of each record of one shard file, in order."""
    found = []
    for raw in tf.data.TFRecordDataset(shard):
        feature = tf.train.Example.FromString(raw.numpy()).features.feature["image/filename"]
        found.append(feature.bytes_list.value[0].decode())
    return found


def file_of(name: str) -> str:
    return name.rsplit("#", 1)[0]


# ---- each: a record a page -----------------------------------------------------------------------


@pytest.mark.parametrize(
    "make",
    [
        lambda: {
            **{f"z/{i}.tif": tiffgen.imagej_zstack(seed=i) for i in range(2)},
            **{f"p/{i}.tif": tiffgen.plain_zstack(seed=i) for i in range(2)},
        },
        lambda: {
            "h/hyper.tif": tiffgen.imagej_hyperstack(),
            "h/other.tif": tiffgen.imagej_hyperstack(seed=3),
        },
        lambda: {
            "xa/run.dcm": dicomgen.multiframe(frames=5),
            "xa/rle.dcm": dicomgen.multiframe(dicomgen.RLELossless),
        },
    ],
    ids=["z-stacks", "hyperstacks", "multi-frame DICOM"],
)
def test_each_makes_a_record_a_page_that_every_reader_gives_as_that_page(tmp_path, make):
    made = make()
    imagegen.write_tree(tmp_path / "in", {k: getattr(m, "data", m) for k, m in made.items()})
    truth = {}
    for relpath, one in made.items():
        truth |= named(relpath, stack_of(one) if isinstance(one, tiffgen.Made) else frames_of(one))
    assert convert(tmp_path / "in", tmp_path / "out", "--pages", "each", "--label_source", "none") == 0
    result = summary(tmp_path / "out")
    assert result["inputs"] == result["records"] == len(truth) and result["rejects"] == 0
    assert result["options"]["pages"] == "each"
    every_reader(tmp_path / "out", truth)


def test_a_folder_of_stacks_and_single_pages_gives_each_page_labelled_split_and_sharded_with_its_file(
    tmp_path,
):
    truth = mixed_tree(tmp_path / "in")
    out, stacks = tmp_path / "each", tmp_path / "stack"
    assert convert(tmp_path / "in", out, "--pages", "each", *SPLITS, "--num_shards", "2") == 0
    assert convert(tmp_path / "in", stacks, *SPLITS, "--num_shards", "2") == 0
    result = summary(out)
    assert result["inputs"] == result["records"] + result["rejects"] == len(truth)
    assert result["rejects"] == 0
    # The pages of each file are a group: the hash draws 10 stacks and 2 files of one page.
    assert result["groups"] == {
        "source": "pages",
        "groups": 10,
        "grouped_files": len(truth) - 2,
        "without_group": 2,
    }
    records = by_name(out)
    assert sorted(records) == sorted(truth)
    for name, record in records.items():
        seen = samples(record)
        assert (seen.dtype, seen.shape) == (truth[name].dtype, truth[name].shape), name
        assert np.array_equal(seen, truth[name]), name
        assert record["label_text"] == name.split("/")[0]  # the file's folder
    # A file's pages sit in the split its stack's record is in, and in one shard, in page order.
    split_of = {
        r["filename"]: split for split in summary(stacks)["splits"] for r in iter_examples(str(stacks), split)
    }
    for split in result["splits"]:
        for name in (r["filename"] for r in iter_examples(str(out), split)):
            assert split_of[file_of(name)] == split, name
    shards_of = defaultdict(set)
    for split in result["splits"]:
        for path in shard_files(out, split):
            names = names_in(path)
            for name in names:
                shards_of[file_of(name)].add(path)
            for file in {file_of(n) for n in names if "#" in n}:
                pages_here = [n for n in names if file_of(n) == file]
                assert pages_here == sorted(pages_here), pages_here
    assert all(len(found) == 1 for found in shards_of.values()), shards_of


def test_first_keeps_the_first_page_and_says_frames_dropped(tmp_path):
    truth = mixed_tree(tmp_path / "in")
    out = tmp_path / "out"
    assert convert(tmp_path / "in", out, "--pages", "first") == 0
    records = by_name(out)
    files = sorted({file_of(name) for name in truth})
    assert sorted(records) == files
    for name, record in records.items():
        first = truth.get(name) if name in truth else truth[min(n for n in truth if file_of(n) == name)]
        assert np.array_equal(samples(record), first), name
    with open(out / "changes.jsonl", encoding="utf-8") as handle:
        dropped = {line["path"] for line in map(json.loads, handle) if "frames_dropped" in line["reasons"]}
    assert dropped == {file for file in files if f"{file}#0" in truth or f"{file}#00" in truth}
    result = summary(out)
    assert (
        result["changes_per_reason"]["frames_dropped"] == len(dropped)
        and result["options"]["pages"] == "first"
    )


def test_stack_is_every_run_before_it_and_is_not_recorded(tmp_path):
    mixed_tree(tmp_path / "in")
    assert convert(tmp_path / "in", tmp_path / "default", *SPLITS) == 0
    assert convert(tmp_path / "in", tmp_path / "stack", *SPLITS, "--pages", "stack") == 0
    for split in summary(tmp_path / "default")["splits"]:
        assert sorted(serialized_records(tmp_path / "stack", split)) == sorted(
            serialized_records(tmp_path / "default", split)
        )
    assert "pages" not in summary(tmp_path / "stack")["options"]
    stacked = {name: samples(record).shape for name, record in by_name(tmp_path / "stack").items()}
    assert stacked["cells/hyper.tif"] == (6, 12, 15, 2) and stacked["cells/run.dcm"] == (12, 32, 36, 1)


# ---- the accounting: every file one input or its pages, never lost -------------------------------


def test_a_broken_header_is_one_reject_beside_the_pages_of_good_stacks(tmp_path):
    good = tiffgen.imagej_zstack()
    broken = good.data[:4] + b"\xff" * 60  # a TIFF's magic, then a first directory past the end
    files = {"a/good.tif": good.data, "a/broken.tif": broken, "a/empty.tif": b""}
    imagegen.write_tree(tmp_path / "in", files)
    assert convert(tmp_path / "in", tmp_path / "out", "--pages", "each") == 0
    assert convert(tmp_path / "in", tmp_path / "stack") == 0
    result = summary(tmp_path / "out")
    assert (result["inputs"], result["records"], result["rejects"]) == (7, 5, 2)
    lines = {line["path"]: (line["reason"], line["detail"]) for line in rejects(tmp_path / "out")}
    assert lines == {line["path"]: (line["reason"], line["detail"]) for line in rejects(tmp_path / "stack")}
    assert sorted(lines) == ["a/broken.tif", "a/empty.tif"]  # as without the option: its reader's reason


def test_a_file_gone_before_its_pages_are_counted_is_one_unreadable_reject(tmp_path):
    imagegen.write_tree(
        tmp_path / "in", {"a.tif": tiffgen.plain_zstack().data, "b.tif": tiffgen.imagej_zstack().data}
    )
    listing = list_inputs(str(tmp_path / "in"))
    (tmp_path / "in" / "b.tif").unlink()
    found = pages.expanded(listing, each=True)
    assert [f.relpath for f in found] == ["a.tif#0", "a.tif#1", "a.tif#2", "a.tif#3", "b.tif"]
    (gone,) = [f for f in found if f.problem is not None]
    assert gone.problem[0] == "unreadable" and "FileNotFoundError" in gone.problem[1]
    assert pages.expanded(found, each=True) == found  # counted once: nothing is read again


def test_a_file_that_holds_other_pages_than_were_counted_is_pages_changed(tmp_path):
    path = tmp_path / "stack.tif"
    path.write_bytes(tiffgen.imagej_zstack().data)  # 5 pages
    options = ImageConfig()
    item = PlannedInput("stack.tif#2", str(path), path.stat().st_size, "train", page=Page(2, 7))
    found = prepare_input(item, options)
    assert isinstance(found, RejectLine) and found.reason == "pages_changed" and "7" in found.detail
    beyond = PlannedInput("stack.tif#6", str(path), path.stat().st_size, "train", page=Page(6, 7))
    assert prepare_input(beyond, options).reason == "pages_changed"
    path.write_bytes(imagegen.png())
    assert prepare_input(item, options).reason == "pages_changed"


def test_a_page_named_as_a_listed_file_and_pages_of_annotated_pictures_fail_in_one_line(tmp_path, capsys):
    imagegen.write_tree(tmp_path / "in", {"a.tif": tiffgen.plain_zstack().data, "a.tif#1": imagegen.png()})
    with pytest.raises(ConfigError, match=r"a\.tif#1"):
        pages.expanded(list_inputs(str(tmp_path / "in")), each=True)
    capsys.readouterr()
    assert convert(tmp_path / "in", tmp_path / "out", "--pages", "each") == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "--pages each names a page 'a.tif#1'" in err[0], err
    annotationgen.labelimg_pair(tmp_path / "voc")
    assert convert(tmp_path / "voc", tmp_path / "out", "--annotations", "voc", "--pages", "each") == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "--pages each makes a record of every page" in err[0], err


def test_dedupe_finds_the_pages_of_a_copied_stack_and_never_a_file_s_own_pages(tmp_path):
    data = tiffgen.plain_zstack().data
    imagegen.write_tree(tmp_path / "in", {"a/stack.tif": data, "b/copy.tif": data})
    assert convert(tmp_path / "in", tmp_path / "out", "--pages", "each", "--dedupe") == 0
    lines = rejects(tmp_path / "out")
    assert sorted(line["path"] for line in lines) == [f"b/copy.tif#{i}" for i in range(4)]
    assert all(line["detail"].startswith(f"same bytes as a/stack.tif#{line['path'][-1]}") for line in lines)
    assert sorted(by_name(tmp_path / "out")) == [f"a/stack.tif#{i}" for i in range(4)]


def test_a_file_s_pages_are_read_once_a_shard_task():
    recent, reads = RecentFiles(keep=1), []

    def read(name: str) -> bytes:
        reads.append(name)
        return name.encode()

    for name in ["a", "a", "a", "b", "b", "a"]:
        assert recent.read(name, lambda name=name: read(name))[0] == name.encode()
    assert reads == ["a", "b", "a"]


def test_a_page_is_named_after_its_file_and_staged_with_the_plan():
    page = Page(7, 12)
    assert page.name("z/stack.tif") == "z/stack.tif#07" and page.file_of("z/stack.tif#07") == "z/stack.tif"
    assert Page(0, 1).name("one.tif") == "one.tif" and Page(3, 4).name("a#b.tif") == "a#b.tif#3"
    assert Page(3, 4).file_of("a#b.tif#3") == "a#b.tif"
    item = PlannedInput("z/stack.tif#07", "/d/z/stack.tif", 1200, "train", 1, "z", page=page)
    assert PlannedInput.from_row(json.loads(json.dumps(item.to_row()))) == item
    assert item.file_relpath == "z/stack.tif" and item.weight == 100
    assert Page(1, 4).sha256("ab") != Page(2, 4).sha256("ab") and Page(0, 1).sha256("ab") == "ab"


# ---- --append ------------------------------------------------------------------------------------


def pages_tiff(count: int, seed: int = 0) -> bytes:
    """A page sequence of `count` 16-bit pages, as tifffile writes a stack."""
    out = io.BytesIO()
    stack = np.random.default_rng(seed).integers(0, 60_000, (count, 8, 10), dtype=np.uint16)
    tifffile.imwrite(out, stack, photometric="minisblack")
    return out.getvalue()


def test_an_append_converts_new_stacks_page_by_page_and_never_a_changed_one(tmp_path):
    """A stack that gained pages since it was converted, or whose pages are named anew (12 pages:
    two digits), is changed: none of its pages is converted again, its old pages are listed in
    changed_since_converted.jsonl, never called gone; a new stack's pages are appended."""
    data = tmp_path / "data"
    imagegen.write_tree(data, {"a/grows.tif": pages_tiff(4), "a/renamed.tif": pages_tiff(5, 1)})
    out = tmp_path / "out"
    assert convert(data, out, "--pages", "each") == 0
    imagegen.write_tree(
        data,
        {"a/grows.tif": pages_tiff(6, 2), "a/renamed.tif": pages_tiff(12, 3), "b/new.tif": pages_tiff(3, 4)},
    )
    assert convert(data, out, "--pages", "each", "--append") == 0
    result = summary(out)
    old = [f"a/grows.tif#{i}" for i in range(4)] + [f"a/renamed.tif#{i}" for i in range(5)]
    assert sorted(by_name(out)) == sorted([*old, "b/new.tif#0", "b/new.tif#1", "b/new.tif#2"])
    lines = [json.loads(line) for line in (out / names.CHANGED_SINCE_FILE).read_text().splitlines()]
    assert sorted(line["path"] for line in lines) == sorted(old)
    assert {line["change"] for line in lines} == {"changed"}
    assert result["history"][-1]["changed_since_converted"] == 9 and result["history"][-1]["gone"] == 0
    assert result["inputs"] == result["records"] + result["rejects"]


@pytest.mark.parametrize("bit_depth", ["full", "8"])
@pytest.mark.parametrize("dtype", ["uint16", "uint8"])
def test_a_page_is_stored_as_a_file_of_that_one_page_is(tmp_path, bit_depth, dtype):
    """Each page's record holds what a one-page TIFF of its samples gives: a 16-bit PNG, or at
    `--bit_depth 8` an 8-bit one; an 8-bit page a PNG as photographs are."""
    high = 60_000 if dtype == "uint16" else 250
    stack = np.random.default_rng(5).integers(0, high, (4, 9, 11), dtype=dtype)
    out = io.BytesIO()
    tifffile.imwrite(out, stack, photometric="minisblack")
    imagegen.write_tree(tmp_path / "stacks", {"s.tif": out.getvalue()})
    singles = {}
    for i, page in enumerate(stack):
        one = io.BytesIO()
        tifffile.imwrite(one, page, photometric="minisblack")
        singles[f"s.tif#{i}"] = one.getvalue()
    imagegen.write_tree(tmp_path / "singles", singles)
    options = ("--label_source", "none", "--bit_depth", bit_depth)
    assert convert(tmp_path / "stacks", tmp_path / "pages", "--pages", "each", *options) == 0
    assert convert(tmp_path / "singles", tmp_path / "files", *options) == 0
    pages_, files = by_name(tmp_path / "pages"), by_name(tmp_path / "files")
    assert sorted(pages_) == sorted(files)
    for name, record in pages_.items():
        assert record["image"] == files[name]["image"], name
        assert record.get("dtype") == files[name].get("dtype"), name
    changes = [summary(tmp_path / run)["changes_per_reason"] for run in ("pages", "files")]
    assert changes[0] == changes[1]


TIFFS = [
    tiffgen.imagej_hyperstack,
    tiffgen.imagej_zstack,
    tiffgen.plain_zstack,
    tiffgen.ome_stack,
    tiffgen.imagej_claiming_more_slices,
    tiffgen.gdal_overviews,
    tiffgen.pyramid_with_thumbnail,
    tiffgen.thumbnail_first,
    tiffgen.pages_of_two_sizes,
    tiffgen.eurosat_tile,
    tiffgen.bigtiff_big_endian,
]


@pytest.mark.parametrize("make", TIFFS, ids=[make.__name__ for make in TIFFS])
def test_the_planner_counts_the_pages_the_tiff_reader_reads(tmp_path, make):
    """The count made from the header while planning is the reader's: each page of the picture
    is the `stack` record's position, and pages of other series (a thumbnail not marked reduced,
    a document's page of another size) follow; overviews and pyramid levels are no pages."""
    from beam_tfrecord.images.deep import PAGES_IN_FILE
    from beam_tfrecord.images.tiff import read_tiff

    data = make().data
    (tmp_path / "f.tif").write_bytes(data)
    count = pages.page_count(str(tmp_path / "f.tif"))
    whole = read_tiff(data, max_pixels=10**8).samples
    stack = whole if whole.ndim == 4 else whole[np.newaxis]
    with tifffile.TiffFile(io.BytesIO(data)) as tif:
        full = [s for s in tif.series if not (s.keyframe.is_reduced or s.keyframe.is_mask)]
    assert count == len(stack) + sum(len(s.pages) for s in full[1:])  # the picture is the first
    for index in range(count):
        page = read_tiff(data, max_pixels=10**8, page=index)
        assert page.facts[PAGES_IN_FILE] == count and page.samples.ndim == 3
        if index < len(stack):
            assert np.array_equal(page.samples, stack[index]), index
