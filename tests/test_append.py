"""`--append` (issue 29): a dataset grown by new files holds what a from-scratch run over the
union holds (each file in the same split, with the same label id), keeps every old label id,
reports copies of old records, and is refused in one line when a record-shaping option differs."""

from __future__ import annotations

import dataclasses
import json
import logging
import shutil
import subprocess

import pausing
import pytest
from conftest import convert
from imagegen import jpeg, write_tree

from beam_tfrecord import names
from beam_tfrecord.output.file_index import load_index
from beam_tfrecord.output.outputs import complete_summary
from beam_tfrecord.read.examples import iter_examples

SPLITS = ("--splits", "train=0.7,validation=0.3")


def _first(root) -> None:
    write_tree(
        root,
        {
            f"{c}/{i}.jpg": jpeg(20 + i, 20, seed=i * 11 + ord(c[0]))
            for c in ("cat", "dog")
            for i in range(10)
        },
    )


def _more(root) -> None:
    files = {f"cat/new{i}.jpg": jpeg(30 + i, 25, seed=1000 + i) for i in range(5)}
    files.update({f"bird/{i}.jpg": jpeg(26, 30 + i, seed=2000 + i) for i in range(4)})
    write_tree(root, files)
    shutil.copy(root / "dog" / "3.jpg", root / "dog" / "copy3.jpg")


def _records(output) -> dict[str, tuple[str, str, int]]:
    """relpath -> (split, class name, label id), read back through iter_examples."""
    found = {}
    for split in complete_summary(str(output)).splits:
        for example in iter_examples(str(output), split):
            found[example["filename"]] = (split, example["label_text"], int(example["label"]))
    return found


# Facts of the runs rather than of the records: how many shards, when, where, the first run's options.
RUN_KEYS = (
    "history",
    "options",
    "input",
    "output",
    "started_at",
    "wall_time_s",
    "workers",
    "read_threads",
    "resumed",
)
SHARD_KEYS = ("shards", "planned_shards", "files")


def _comparable(output) -> dict:
    data = json.loads((output / "summary.json").read_text())
    for key in RUN_KEYS:
        data.pop(key, None)
    for split in data["splits"].values():
        for key in SHARD_KEYS:
            split.pop(key)
    return data


def _by_name(records: dict[str, tuple[str, str, int]]) -> dict[str, tuple[str, str]]:
    return {path: (split, name) for path, (split, name, _) in records.items()}


def test_append_equals_a_run_over_the_union(tmp_path):
    images, out, scratch = tmp_path / "in", tmp_path / "out", tmp_path / "scratch"
    _first(images)
    assert convert(images, out, *SPLITS) == 0
    old_records = _records(out)
    _more(images)
    assert convert(images, out, *SPLITS, "--append") == 0
    assert convert(images, scratch, *SPLITS) == 0
    # Each file in the same split with the same class as a from-scratch run (whose ids are the
    # sorted names: bird is 0 there, 2 here).
    assert _by_name(_records(out)) == _by_name(_records(scratch))
    assert complete_summary(str(scratch)).class_names == ["bird", "cat", "dog"]
    # With the ids the append kept (old ones unchanged, the new class next), the from-scratch run
    # writes the same records: same split digests (order-free sums of record hashes).
    shutil.rmtree(scratch)
    assert convert(images, scratch, *SPLITS, "--class_names", "cat,dog,bird") == 0
    grown, whole = complete_summary(str(out)), complete_summary(str(scratch))
    assert grown.class_names == ["cat", "dog", "bird"]
    assert _records(out) == _records(scratch)
    assert {k: v for k, v in _records(out).items() if k in old_records} == old_records
    # Its summary counts what the from-scratch run's does: shards, run facts and history aside.
    assert _comparable(out) == _comparable(scratch)
    assert {n: s.digest for n, s in grown.splits.items()} == {n: s.digest for n, s in whole.splits.items()}
    assert grown.records == whole.records == 30 and grown.consistent
    assert grown.history[-1]["new_classes"] == ["bird"] and len(grown.history) == 2
    groups = [json.loads(line) for line in (out / "duplicates.jsonl").read_text().splitlines()]
    assert any({c["path"] for c in g["copies"]} == {"dog/3.jpg", "dog/copy3.jpg"} for g in groups)
    assert len(load_index(str(out))) == 30
    # Every shard name keeps TFDS's template: one count per split.
    for split in grown.splits.values():
        assert all(f.endswith(f"-of-{len(split.files):05d}.tfrecord") for f in split.files)


def test_append_with_dedupe_rejects_copies_of_old_records(tmp_path):
    images, out = tmp_path / "in", tmp_path / "out"
    _first(images)
    assert convert(images, out, *SPLITS, "--dedupe") == 0
    _more(images)
    assert convert(images, out, *SPLITS, "--dedupe", "--append") == 0
    rejects = [json.loads(line) for line in (out / "rejects.jsonl").read_text().splitlines()]
    copy = [r for r in rejects if r["path"] == "dog/copy3.jpg"]
    assert copy and copy[0]["reason"] == "duplicate" and "dog/3.jpg" in copy[0]["detail"]


def test_append_refused_when_an_option_differs_or_nothing_is_new(tmp_path, capsys):
    images, out = tmp_path / "in", tmp_path / "out"
    _first(images)
    assert convert(images, out, *SPLITS) == 0
    assert convert(images, out, *SPLITS, "--append") == 2
    assert "holds no file the dataset lacks" in capsys.readouterr().err
    (images / ".DS_Store").write_bytes(b"\0")  # new, but no picture: nothing to add either
    assert convert(images, out, *SPLITS, "--append") == 2
    assert "holds no picture the dataset lacks: 1 new file, none a picture (e.g. .DS_Store" in (
        capsys.readouterr().err
    )
    _more(images)
    assert convert(images, out, "--splits", "train=0.5,validation=0.5", "--resize", "16x16", "--append") == 2
    err = capsys.readouterr().err
    assert "--splits" in err and "--resize" in err
    assert convert(images, tmp_path / "empty", "--append") == 2
    assert "needs a finished dataset" in capsys.readouterr().err


def _killed_at(point: str, images, out, *extra: str) -> None:
    """An append (or a run) SIGKILLed at `point`, without the progress line (tests/pausing.py)."""
    pausing.killed_at(point, images, out, "--no_progress", *extra)


@pytest.fixture(scope="module")
def appended(tmp_path_factory):
    """The records and summary of an append that ran to its end."""
    root = tmp_path_factory.mktemp("appended")
    images, out = root / "in", root / "out"
    _first(images)
    assert convert(images, out, *SPLITS) == 0
    _more(images)
    assert convert(images, out, *SPLITS, "--append") == 0
    return _records(out), _comparable(out)


# The new files' conversion in the work folder (a shard half written; shards renamed into place;
# every shard written, its metadata not), then the merge (old shards linked to their new names,
# new ones moved in; every side file written, summary.json not yet replaced).
@pytest.mark.parametrize(
    "point", ["writing", "finalizing", "metadata", "append_marked", "append_linked", "append_metadata"]
)
def test_killed_append_leaves_the_old_dataset_readable_and_a_rerun_completes(
    tmp_path, appended, caplog, point
):
    images, out = tmp_path / "in", tmp_path / "out"
    _first(images)
    assert convert(images, out, *SPLITS) == 0
    before, old_summary = _records(out), _comparable(out)
    _more(images)
    _killed_at(point, images, out, *SPLITS, "--append")
    # Readers see the old dataset whole (an append's extra files do not make it look unfinished).
    assert _records(out) == before and _comparable(out) == old_summary
    caplog.set_level(logging.INFO, logger="beam_tfrecord")
    assert convert(images, out, *SPLITS, "--append") == 0
    if point in ("finalizing", "metadata"):  # every shard task was done: the rerun keeps them all
        assert "resuming the interrupted run" in caplog.text
    records, summary = appended
    assert _records(out) == records
    assert _comparable(out) == summary
    assert not (out / names.APPEND_MARKER).exists() and not (out / names.APPEND_DIR).exists()


def test_every_reader_sees_every_record_after_an_append(tmp_path):
    """load_dataset, iter_examples, TorchImages, inspect (every shard framed, CRC-checked and
    counted against summary.json), TFDS's builder_from_directory and the .idx files."""
    import tensorflow_datasets as tfds

    import beam_tfrecord
    from beam_tfrecord.read.files import read_index, split_files
    from pipelines.inspect import run as inspect

    images, out = tmp_path / "in", tmp_path / "out"
    _first(images)
    assert convert(images, out, *SPLITS) == 0
    _more(images)
    assert convert(images, out, *SPLITS, "--append") == 0
    summary = complete_summary(str(out))
    assert inspect([str(out), "--sample", "0", "--pictures", str(tmp_path)]) == 0
    builder = tfds.builder_from_directory(str(out))
    assert builder.info.features["image"]["class"]["label"].names == ["cat", "dog", "bird"]
    for name, split in summary.splits.items():
        assert split.records == sum(1 for _ in iter_examples(str(out), name))
        assert split.records == sum(1 for _ in beam_tfrecord.load_dataset(str(out), name, batch_size=None))
        assert split.records == builder.info.splits[name].num_examples
        assert split.records == sum(1 for _ in builder.as_dataset(split=name))
        assert split.records == sum(len(read_index(path)) for path in split_files(str(out), name).paths)
        if _has_torch():
            assert split.records == sum(1 for _ in beam_tfrecord.TorchImages(str(out), name))


def _has_torch() -> bool:
    try:
        import torch  # noqa: F401
    except ImportError:
        return False
    return True


def test_changed_and_gone_files_are_listed_never_converted_again(tmp_path):
    images, out = tmp_path / "in", tmp_path / "out"
    _first(images)
    assert convert(images, out, *SPLITS) == 0
    before = _records(out)
    (images / "cat" / "2.jpg").write_bytes(jpeg(50, 50, seed=77))  # changed since converted
    (images / "dog" / "5.jpg").unlink()  # gone
    write_tree(images, {"dog/new.jpg": jpeg(33, 21, seed=4242)})
    assert convert(images, out, *SPLITS, "--append") == 0
    lines = [json.loads(line) for line in (out / names.CHANGED_SINCE_FILE).read_text().splitlines()]
    assert [(line["path"], line["change"]) for line in lines] == [
        ("cat/2.jpg", "changed"),
        ("dog/5.jpg", "gone"),
    ]
    after = _records(out)
    # The changed file keeps its old record (converted once); the gone one's record stays too.
    assert {k: v for k, v in after.items() if k != "dog/new.jpg"} == before and "dog/new.jpg" in after
    assert complete_summary(str(out)).history[-1]["changed_since_converted"] == 1


def test_a_new_file_of_a_known_group_goes_to_that_groups_split(tmp_path):
    images, out = tmp_path / "in", tmp_path / "out"
    args = (*SPLITS, "--label_source", "none", "--group_pattern", r"^(g\d+)_")
    write_tree(
        images, {f"g{g}_{i}.jpg": jpeg(20, 20 + i, seed=g * 10 + i) for g in range(8) for i in range(2)}
    )
    assert convert(images, out, *args) == 0
    group_split = {name.split("_")[0]: split for name, (split, _, _) in _records_unlabeled(out).items()}
    write_tree(images, {f"g{g}_new.jpg": jpeg(24, 24, seed=500 + g) for g in range(8)})
    assert convert(images, out, *args, "--append") == 0
    after = _records_unlabeled(out)
    assert all(after[f"g{g}_new.jpg"][0] == group_split[f"g{g}"] for g in range(8))
    assert len(set(group_split.values())) == 2  # both splits hold groups: the check could fail
    # Each group gained a file and is still one group (found in review: they were added up, 16),
    # and the splits' expected deviation is a from-scratch run's over the same files.
    grown = complete_summary(str(out))
    assert (grown.groups.groups, grown.groups.grouped_files, grown.groups.without_group) == (8, 24, 0)
    scratch = tmp_path / "scratch"
    assert convert(images, scratch, *args) == 0
    again = complete_summary(str(scratch))
    assert grown.groups == again.groups
    assert {n: s.expected_deviation for n, s in grown.splits.items()} == {
        n: s.expected_deviation for n, s in again.splits.items()
    }


def _records_unlabeled(output) -> dict[str, tuple[str, None, None]]:
    return {
        e["filename"]: (split, None, None)
        for split in complete_summary(str(output)).splits
        for e in iter_examples(str(output), split)
    }


def test_overwrite_clears_what_a_killed_append_left(tmp_path):
    images, out = tmp_path / "in", tmp_path / "out"
    _first(images)
    assert convert(images, out, *SPLITS) == 0
    _more(images)
    _killed_at("append_linked", images, out, *SPLITS, "--append")
    assert (out / names.APPEND_MARKER).exists()
    assert convert(images, out, *SPLITS, "--overwrite") == 0
    assert not (out / names.APPEND_MARKER).exists() and not (out / names.APPEND_DIR).exists()
    assert len(_records(out)) == 30


def test_append_with_a_manifest_counts_its_rows_against_every_file(tmp_path):
    """The old files' manifest rows are matched (found in review): an append warned that each of
    them named no listed file, and kept the first run's count of rows a later file matches."""
    root, output = tmp_path / "in", tmp_path / "out"
    write_tree(root, {f"img{i}.jpg": jpeg(20 + i, 20, seed=i) for i in range(6)})
    manifest = tmp_path / "labels.csv"
    rows = "path,label\n" + "".join(f"img{i}.jpg,{'ab'[i % 2]}\n" for i in range(6))
    manifest.write_text(rows + "img6.jpg,a\nstray.jpg,b\n")
    args = ("--label_source", "manifest", "--manifest", str(manifest))
    assert convert(root, output, *args) == 0
    assert json.loads((output / "summary.json").read_text())["manifest_rows_without_file"] == 2
    write_tree(root, {"img6.jpg": jpeg(27, 20, seed=6)})
    assert convert(root, output, *args, "--append") == 0
    summary = json.loads((output / "summary.json").read_text())
    assert summary["records"] == 7
    assert summary["manifest_rows_without_file"] == 1
    assert [w for w in summary["warnings"] if "manifest" in w] == [
        "1 manifest rows name no listed file (see manifest_rows_without_file.txt)"
    ]
    assert (output / names.MANIFEST_UNMATCHED_FILE).read_text() == "stray.jpg\n"


def test_files_of_another_runs_input_are_never_called_gone(tmp_path):
    """A dataset grown from a second folder (found in review): a later append from that folder
    listed every file of the first run's folder as gone."""
    first, more, output = tmp_path / "a", tmp_path / "b", tmp_path / "out"
    write_tree(first, {f"c/{i}.jpg": jpeg(20 + i, 20, seed=i) for i in range(4)})
    assert convert(first, output) == 0
    write_tree(more, {f"c/n{i}.jpg": jpeg(30 + i, 20, seed=50 + i) for i in range(2)})
    assert convert(more, output, "--append") == 0
    write_tree(more, {f"c/m{i}.jpg": jpeg(30 + i, 24, seed=70 + i) for i in range(2)})
    assert convert(more, output, "--append") == 0
    summary = json.loads((output / "summary.json").read_text())
    assert summary["records"] == 8
    assert [h.get("gone") for h in summary["history"]] == [None, 0, 0]
    assert (output / names.CHANGED_SINCE_FILE).read_text() == ""


def test_a_run_resumed_from_a_plan_without_a_listing_leaves_no_index(tmp_path):
    """A run staged before the file index existed, resumed after (found in review): it wrote an
    empty index, so an append took every old file for new and converted it twice."""
    images, out = tmp_path / "in", tmp_path / "out"
    _first(images)
    _killed_at("metadata", images, out, *SPLITS)
    (listing,) = out.glob(f"**/{names.PLAN_LISTING_FILE}")
    listing.unlink()  # as a plan staged by the version before the index
    assert convert(images, out, *SPLITS) == 0
    assert load_index(str(out)) is None
    _more(images)
    assert convert(images, out, *SPLITS, "--append") == 2  # refused in one line, nothing doubled
    assert len(_records(out)) == 20


def test_an_index_that_lacks_files_is_refused(tmp_path, capsys):
    """An index shorter than the dataset's listing would make an append convert old files again."""
    images, out = tmp_path / "in", tmp_path / "out"
    _first(images)
    assert convert(images, out, *SPLITS) == 0
    index = out / names.INDEX_FILE
    index.write_text("".join(index.read_text().splitlines(keepends=True)[:5]))
    _more(images)
    capsys.readouterr()
    assert convert(images, out, *SPLITS, "--append") == 2
    assert "lists 5 of the dataset's 20 files" in capsys.readouterr().err
    assert len(_records(out)) == 20


def test_a_same_named_file_of_another_folder_is_another_picture(tmp_path):
    """A camera folder per day, each with its IMG_0001.jpg (found in review): the second day's
    was called changed and never converted, and the merged index kept one entry of the two."""
    day1, day2, output = tmp_path / "day1", tmp_path / "day2", tmp_path / "out"
    broken = b"\xff\xd8 not a picture"
    write_tree(day1, {f"c/IMG_000{i}.jpg": jpeg(20 + i, 20, seed=i) for i in range(1, 4)})
    (day1 / "c" / "broken.jpg").write_bytes(broken)
    assert convert(day1, output, "--dedupe") == 0
    write_tree(day2, {f"c/IMG_000{i}.jpg": jpeg(30 + i, 24, seed=90 + i) for i in (1, 4)})
    shutil.copy(day1 / "c" / "IMG_0002.jpg", day2 / "c" / "IMG_0002.jpg")  # the same picture again
    (day2 / "c" / "broken.jpg").write_bytes(broken)  # the same reject line as day 1's
    assert convert(day2, output, "--dedupe", "--append") == 0
    summary = json.loads((output / "summary.json").read_text())
    names_held = sorted(e["filename"] for s in summary["splits"] for e in iter_examples(str(output), s))
    assert names_held == [
        "c/IMG_0001.jpg",
        "c/IMG_0001.jpg",
        "c/IMG_0002.jpg",
        "c/IMG_0003.jpg",
        "c/IMG_0004.jpg",
    ]
    assert (output / names.CHANGED_SINCE_FILE).read_text() == ""
    assert summary["history"][-1]["changed_since_converted"] == 0
    rejects = [json.loads(line) for line in (output / "rejects.jsonl").read_text().splitlines()]
    assert len(rejects) == summary["rejects"] == 3  # both broken.jpg lines, and the copy
    assert [r["path"] for r in rejects if r["reason"] == "duplicate"] == ["c/IMG_0002.jpg"]
    index = load_index(str(output))
    assert len(index) == summary["inputs_listed"] == 8
    assert sorted((e.relpath, e.input) for e in index if e.relpath == "c/IMG_0001.jpg") == [
        ("c/IMG_0001.jpg", 0),
        ("c/IMG_0001.jpg", 1),
    ]
    # Each folder is compared with its own entries: a third day's file of day 2 and one of day 1.
    write_tree(day2, {"c/IMG_0005.jpg": jpeg(33, 27, seed=95)})
    assert convert(day2, output, "--dedupe", "--append") == 0
    write_tree(day1, {"c/IMG_0006.jpg": jpeg(23, 29, seed=96)})
    assert convert(day1, output, "--dedupe", "--append") == 0
    summary = json.loads((output / "summary.json").read_text())
    assert summary["records"] == 7 and summary["inputs_listed"] == 10
    assert [
        (h.get("inputs"), h.get("changed_since_converted"), h.get("gone")) for h in summary["history"]
    ] == [
        (4, None, None),
        (4, 0, 0),
        (1, 0, 0),
        (1, 0, 0),
    ]
    assert [e.input for e in load_index(str(output)) if e.relpath == "c/IMG_0006.jpg"] == [0]
    # Day 1's folder reached by another path: the same files (path, size and time), none new.
    (tmp_path / "again").symlink_to(day1)
    assert convert(tmp_path / "again", output, "--dedupe", "--append") == 2


def test_a_merge_run_again_keeps_each_reject_line_once(tmp_path):
    """rejects.jsonl holds the old lines then the new run's, the same text twice where two
    folders' files met the same fate; a merge killed after writing it and run again neither
    doubles the new lines nor drops the repeated one (the marker keeps how many were old)."""
    day1, day2, output = tmp_path / "day1", tmp_path / "day2", tmp_path / "out"
    for day, seed in ((day1, 0), (day2, 50)):
        write_tree(day, {f"c/IMG_000{i}.jpg": jpeg(20 + i, 21, seed=seed + i) for i in range(1, 3)})
        (day / "c" / "broken.jpg").write_bytes(b"\xff\xd8 not a picture")
    assert convert(day1, output) == 0
    _killed_at("append_metadata", day2, output, "--append")
    assert convert(day2, output, "--append") == 0
    summary = json.loads((output / "summary.json").read_text())
    lines = (output / "rejects.jsonl").read_text().splitlines()
    assert len(lines) == summary["rejects"] == 2 and lines[0] == lines[1]
    assert summary["records"] == 4


def test_a_manifest_groups_are_counted_over_the_grown_dataset(tmp_path):
    """A manifest's `group` column (found in review): a group that gained files in an append was
    counted twice. The index keeps each file's group, and a new file of a known group goes to
    that group's split."""
    images, output, scratch = tmp_path / "in", tmp_path / "out", tmp_path / "scratch"
    manifest = tmp_path / "labels.csv"
    first = {f"p{g}_{i}.jpg": jpeg(20, 20 + i, seed=g * 10 + i) for g in range(8) for i in range(2)}
    write_tree(images, {**first, "solo.jpg": jpeg(21, 21, seed=99)})
    rows = [f"p{g}_{i}.jpg,{'ab'[g % 2]},pet{g}" for g in range(8) for i in range(2)] + ["solo.jpg,a,"]
    manifest.write_text("path,label,group\n" + "\n".join(rows) + "\n")
    args = (*SPLITS, "--label_source", "manifest", "--manifest", str(manifest))
    assert convert(images, output, *args) == 0
    group_split = {name.split("_")[0]: split for name, (split, _, _) in _records(output).items()}
    write_tree(images, {f"p{g}_new.jpg": jpeg(24, 24, seed=500 + g) for g in range(8)})
    manifest.write_text(
        "path,label,group\n"
        + "\n".join(rows + [f"p{g}_new.jpg,{'ab'[g % 2]},pet{g}" for g in range(8)])
        + "\n"
    )
    assert convert(images, output, *args, "--append") == 0
    after = _records(output)
    assert all(after[f"p{g}_new.jpg"][0] == group_split[f"p{g}"] for g in range(8))
    assert len({group_split[f"p{g}"] for g in range(8)}) == 2  # both splits hold groups: the check could fail
    grown = complete_summary(str(output))
    assert (grown.groups.source, grown.groups.groups, grown.groups.grouped_files) == ("manifest", 8, 24)
    assert grown.groups.without_group == 1
    assert convert(images, scratch, *args) == 0
    again = complete_summary(str(scratch))
    assert grown.groups == again.groups
    assert {n: s.expected_deviation for n, s in grown.splits.items()} == {
        n: s.expected_deviation for n, s in again.splits.items()
    }


def _immutable(paths, on: bool) -> bool:
    """ext4's immutable flag (chattr +i): not even root may hard-link such a file, nor create a
    name in such a folder, a real filesystem refusing as a FUSE mount, FAT or Linux's
    protected_hardlinks do. False where the flag cannot be set (not root, another filesystem)."""
    done = subprocess.run(
        ["chattr", "+i" if on else "-i", *map(str, paths)], capture_output=True, check=False
    )
    return done.returncode == 0


def _error_lines(err: str) -> list[str]:
    return [line for line in err.splitlines() if line.startswith("error:")]


def test_old_shards_that_cannot_be_hard_linked_are_copied(tmp_path, appended, caplog, capsys):
    """A failed hard link in the merge was a traceback (found in review): now the shard is
    copied, the log says so once, and what is left (here: the immutable old names, which cannot be
    removed either) is one line that a rerun of the same --append finishes."""
    images, out = tmp_path / "in", tmp_path / "out"
    _first(images)
    assert convert(images, out, *SPLITS) == 0
    _more(images)
    shards = sorted(out.glob("*.tfrecord"))
    if not _immutable(shards, True):
        pytest.skip("chattr +i is refused here (it needs root, on ext4, xfs or btrfs)")
    try:
        caplog.set_level(logging.WARNING, logger="beam_tfrecord")
        capsys.readouterr()
        assert convert(images, out, *SPLITS, "--append") == 1
        (line,) = _error_lines(capsys.readouterr().err)
        assert "could not remove the old shard names" in line and "is whole" in line
        assert line.endswith("run the same command with --append again to finish it")
        copying = [r for r in caplog.records if "copying them instead" in r.getMessage()]
        assert len(copying) == 1  # said once, for every shard of every split that grew
        records, summary = appended
        assert _records(out) == records  # the grown dataset, readable as it stands
    finally:
        _immutable(shards, False)
    assert convert(images, out, *SPLITS, "--append") == 0
    assert _records(out) == records and _comparable(out) == summary
    assert not (out / names.APPEND_MARKER).exists() and not (out / names.APPEND_DIR).exists()


def test_a_merge_that_can_neither_link_nor_copy_leaves_the_old_dataset_whole(tmp_path, appended, capsys):
    """Where the copy fails too (here the work folder takes no new name), one line says what
    failed, that the old dataset is whole, and that the same --append again finishes it."""
    images, out = tmp_path / "in", tmp_path / "out"
    _first(images)
    assert convert(images, out, *SPLITS) == 0
    before, old_summary = _records(out), _comparable(out)
    _more(images)
    _killed_at("append_marked", images, out, *SPLITS, "--append")  # the new files converted
    frozen = [*sorted(out.glob("*.tfrecord")), out / names.APPEND_DIR]
    if not _immutable(frozen, True):
        pytest.skip("chattr +i is refused here (it needs root, on ext4, xfs or btrfs)")
    try:
        capsys.readouterr()
        assert convert(images, out, *SPLITS, "--append") == 1
        (line,) = _error_lines(capsys.readouterr().err)
        assert "(by a hard link, nor by a copy): Operation not permitted" in line
        assert "is still whole as it was" in line
        assert line.endswith("run the same command with --append again to finish it")
        assert _records(out) == before and _comparable(out) == old_summary
    finally:
        _immutable(frozen, False)
    assert convert(images, out, *SPLITS, "--append") == 0
    records, summary = appended
    assert _records(out) == records and _comparable(out) == summary


@pytest.mark.parametrize("point", ["append_marked", "append_linked"])
def test_a_converted_append_is_finished_only_from_its_own_input(tmp_path, capsys, point):
    """An append from a second folder killed before its merge ended, run again from the first
    folder (found in review): it merged the second folder's files as the first's (history, index
    input numbers), so a later append from the first folder called them gone. Now it is refused
    in one line naming the input that finishes it, and that input's rerun merges it as its own."""
    first, more, output = tmp_path / "a", tmp_path / "b", tmp_path / "out"
    write_tree(first, {f"c/{i}.jpg": jpeg(20 + i, 20, seed=i) for i in range(4)})
    assert convert(first, output) == 0
    before = _records(output)
    write_tree(more, {f"c/n{i}.jpg": jpeg(30 + i, 20, seed=50 + i) for i in range(2)})
    _killed_at(point, more, output, "--append")
    write_tree(first, {"c/4.jpg": jpeg(25, 20, seed=4)})  # the first folder has a new file too
    capsys.readouterr()
    assert convert(first, output, "--append") == 2
    (line,) = _error_lines(capsys.readouterr().err)
    assert f"run the same command with --input {more} to finish it first" in line
    assert _records(output) == before
    assert convert(more, output, "--append") == 0
    summary = json.loads((output / "summary.json").read_text())
    assert [h["input"] for h in summary["history"]] == [str(first), str(more)]
    assert sorted((e.relpath, e.input) for e in load_index(str(output)) if e.relpath.startswith("c/n")) == [
        ("c/n0.jpg", 1),
        ("c/n1.jpg", 1),
    ]
    assert convert(first, output, "--append") == 0
    assert (output / names.CHANGED_SINCE_FILE).read_text() == ""
    assert json.loads((output / "summary.json").read_text())["records"] == 7


def test_a_group_keeps_a_rejected_picture_when_it_grows(tmp_path):
    """A group pattern's groups were counted over the records' paths alone (found in review): a
    picture a worker rejected, which a run's plan counts in its group, was left out of the grown
    dataset's count, so it and its splits' expected deviation differed from a from-scratch run's."""
    images, out, scratch = tmp_path / "in", tmp_path / "out", tmp_path / "scratch"
    args = (*SPLITS, "--label_source", "none", "--group_pattern", r"^(g\d+)_")
    write_tree(
        images, {f"g{g}_{i}.jpg": jpeg(20, 20 + i, seed=g * 10 + i) for g in range(4) for i in range(2)}
    )
    (images / "g1_broken.jpg").write_bytes(b"\xff\xd8 not a picture")
    assert convert(images, out, *args) == 0
    write_tree(images, {f"g{g}_new.jpg": jpeg(24, 24, seed=500 + g) for g in range(4)})
    assert convert(images, out, *args, "--append") == 0
    assert convert(images, scratch, *args) == 0
    grown, whole = complete_summary(str(out)), complete_summary(str(scratch))
    assert (whole.groups.groups, whole.groups.grouped_files, whole.rejects) == (4, 13, 1)
    assert grown.groups == whole.groups
    assert {n: s.expected_deviation for n, s in grown.splits.items()} == {
        n: s.expected_deviation for n, s in whole.splits.items()
    }


def test_a_folder_inside_or_around_an_earlier_input_adds_only_its_new_files(tmp_path):
    """An append from a day's folder inside the first run's input, then from a folder that holds
    that input (found in review): the converted files there have other relative paths, so they
    were taken for new and converted a second time. The same file at the same place, with its
    size and time, is converted once."""
    around, output = tmp_path / "all", tmp_path / "out"
    root = around / "photos"
    args = ("--label_source", "none")
    write_tree(root, {f"day1/{i}.jpg": jpeg(20 + i, 20, seed=i) for i in range(4)})
    assert convert(root, output, *args) == 0
    write_tree(root, {"day1/new.jpg": jpeg(33, 20, seed=77)})
    assert convert(root / "day1", output, *args, "--append") == 0
    write_tree(root, {"day2/0.jpg": jpeg(34, 21, seed=78)})
    assert convert(around, output, *args, "--append") == 0
    summary = json.loads((output / "summary.json").read_text())
    assert [h["inputs"] for h in summary["history"]] == [4, 1, 1]
    assert summary["records"] == 6 and summary.get("duplicate_records", 0) == 0
    assert [h.get("gone") for h in summary["history"]] == [None, 0, 0]


def test_an_append_left_to_its_job_is_merged_by_the_next_append_run(tmp_path, appended):
    """`--no_wait --append` (the Flex Template's way): the launcher hands its claim to the job,
    and no command waits to merge. Once the job has converted the new pictures (its work
    folder's summary.json), the next `--append` takes the claim over and merges them, rather
    than finding the output locked for good."""
    import time

    from beam_tfrecord.output import claim as claims

    images, out = tmp_path / "in", tmp_path / "out"
    _first(images)
    assert convert(images, out, *SPLITS) == 0
    handed_at = time.time()  # after the dataset's summary.json: only the append's job writes later
    _more(images)
    _killed_at("append_marked", images, out, *SPLITS, "--append")  # the job's part done, no merge
    job = claims.ClaimRecord("0job0run0id", "a-dataflow-launcher", 7, handed_at, handed_at)
    job = dataclasses.replace(job, job_id="2026-11-28_10_00_00-42", detached=True)
    (out / names.CLAIM_FILE).write_bytes(job.to_bytes())
    assert convert(images, out, *SPLITS, "--append") == 0
    records, summary = appended
    assert _records(out) == records and _comparable(out) == summary
    assert not (out / names.CLAIM_FILE).exists() and not (out / names.APPEND_DIR).exists()


def test_classes_without_a_record_are_one_warning_line_before_and_after_an_append(tmp_path):
    """A run given 40 class names whose pictures hold two of them warns once, listing a few of
    the 38 and counting the rest; an append recounts that line, never keeps the old one beside."""
    images, out = tmp_path / "in", tmp_path / "out"
    _first(images)
    names = ["cat", "dog", *(f"unseen{i:02d}" for i in range(38))]
    given = ("--class_names", ",".join(names))
    assert convert(images, out, *SPLITS, *given) == 0
    expected = (
        "classes with no valid image (38 of 40): " + ", ".join(repr(n) for n in names[2:12]) + " and 28 more"
    )
    warnings = complete_summary(str(out)).warnings
    assert [w for w in warnings if "no valid image" in w] == [expected]
    write_tree(images, {"cat/new.jpg": jpeg(31, 24, seed=77)})
    assert convert(images, out, *SPLITS, *given, "--append") == 0
    warnings = complete_summary(str(out)).warnings
    assert [w for w in warnings if "no valid image" in w] == [expected]
