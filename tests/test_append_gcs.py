"""`--append` on gs://, against the real GCS emulator over HTTP on 127.0.0.1: the dataset grown in
a bucket holds the records the same append makes on local disk, and its readers see them all."""

from __future__ import annotations

import json
import uuid

import pytest
from apache_beam.io.filesystem import CompressionTypes
from apache_beam.io.filesystems import FileSystems
from conftest import convert
from gcsemulator import EMULATOR_ENV, Emulator, PermissionProxy
from imagegen import jpeg, write_tree
from pausing import killed_at

from beam_tfrecord.output.outputs import complete_summary
from beam_tfrecord.read.examples import iter_examples

SPLITS = ("--splits", "train=0.7,validation=0.3")
FIRST = {f"{c}/{i}.jpg": jpeg(20 + i, 20, seed=i * 11 + ord(c[0])) for c in ("cat", "dog") for i in range(6)}
MORE = {f"cat/new{i}.jpg": jpeg(30 + i, 25, seed=1000 + i) for i in range(3)}
MORE |= {f"bird/{i}.jpg": jpeg(26, 30 + i, seed=2000 + i) for i in range(2)} | {
    "dog/copy3.jpg": FIRST["dog/3.jpg"]
}


@pytest.fixture(scope="module")
def emulator():
    with Emulator() as emu, pytest.MonkeyPatch.context() as patch:
        patch.setenv(EMULATOR_ENV, emu.url)
        yield emu


def _records(output: str) -> dict[str, tuple[str, str, int]]:
    return {
        e["filename"]: (split, e["label_text"], int(e["label"]))
        for split in complete_summary(output).splits
        for e in iter_examples(output, split)
    }


def _objects(prefix: str) -> list[str]:
    (found,) = FileSystems.match([prefix + "/**"])
    return sorted(m.path[len(prefix) + 1 :] for m in found.metadata_list)


def test_append_in_a_bucket_matches_the_same_append_on_disk(emulator, tmp_path):
    bucket = f"test-{uuid.uuid4().hex[:12]}"
    emulator.client().create_bucket(bucket)
    images, out, remote = tmp_path / "in", tmp_path / "out", f"gs://{bucket}/out"
    write_tree(images, FIRST)
    emulator.upload_tree(bucket, "in", FIRST)
    assert convert(images, out, *SPLITS) == 0
    assert convert(f"gs://{bucket}/in", remote, *SPLITS) == 0
    write_tree(images, MORE)
    emulator.upload_tree(bucket, "in", MORE)
    assert convert(images, out, *SPLITS, "--append") == 0
    assert convert(f"gs://{bucket}/in", remote, *SPLITS, "--append") == 0
    assert _records(remote) == _records(str(out))
    summary = complete_summary(remote)
    # Read straight from the bucket, as a training job would: tf.data, and inspect's full check.
    import beam_tfrecord
    from pipelines.inspect import run as inspect

    assert inspect([remote, "--sample", "0", "--pictures", str(tmp_path)]) == 0
    for name, split in summary.splits.items():
        assert split.records == sum(1 for _ in beam_tfrecord.load_dataset(remote, name, batch_size=None))
    assert summary.class_names == ["cat", "dog", "bird"] and summary.records == 18
    with FileSystems.open(f"{remote}/duplicates.jsonl", compression_type=CompressionTypes.UNCOMPRESSED) as f:
        groups = [json.loads(line) for line in f.read().decode().splitlines()]
    assert any({c["path"] for c in g["copies"]} == {"dog/3.jpg", "dog/copy3.jpg"} for g in groups)
    # Nothing of the append is left: no work folder, no marker, no shard under an old name.
    listed = {n for s in summary.splits.values() for n in s.files}
    left = [n for n in _objects(remote) if ".tfrecord" in n and n.removesuffix(".idx") not in listed]
    assert not left and not [n for n in _objects(remote) if n.startswith(".beam-tfrecord-append")]


def test_an_append_whose_copies_are_refused_leaves_the_old_dataset_whole(emulator, tmp_path, capsys):
    """The merge's server-side copies refused (IAM without copy rights, through the test proxy):
    one line that says so and that the dataset is whole as it was; the same --append then
    finishes once copies are allowed."""
    bucket = f"test-{uuid.uuid4().hex[:12]}"
    emulator.client().create_bucket(bucket)
    remote, source = f"gs://{bucket}/out", f"gs://{bucket}/in"
    emulator.upload_tree(bucket, "in", FIRST)
    assert convert(source, remote, *SPLITS) == 0
    before = _records(remote)
    emulator.upload_tree(bucket, "in", MORE)
    killed_at(
        "append_marked", source, remote, *SPLITS, "--append", marker_dir=tmp_path
    )  # new files converted
    with PermissionProxy(emulator.url, {bucket: "copy"}) as proxy, pytest.MonkeyPatch.context() as patch:
        patch.setenv(EMULATOR_ENV, proxy.url)
        capsys.readouterr()
        assert convert(source, remote, *SPLITS, "--append") == 1
        (line,) = [x for x in capsys.readouterr().err.splitlines() if x.startswith("error:")]
    assert "(by a server-side copy)" in line and "is still whole as it was" in line
    assert _records(remote) == before
    assert convert(source, remote, *SPLITS, "--append") == 0
    assert complete_summary(remote).records == 18 and len(_records(remote)) == 18


def test_a_dry_run_of_an_append_that_waits_to_merge_writes_nothing(emulator, tmp_path, capsys):
    """An append whose new pictures are converted but not merged (its launcher stopped): a
    Dataflow dry run of the same command says so and leaves every object as it was."""
    bucket = f"test-{uuid.uuid4().hex[:12]}"
    emulator.client().create_bucket(bucket)
    remote, source = f"gs://{bucket}/out", tmp_path / "in"  # a dry run lists a local input
    write_tree(source, FIRST)
    assert convert(source, remote, *SPLITS) == 0
    write_tree(source, MORE)
    killed_at("append_marked", source, remote, *SPLITS, "--append", marker_dir=tmp_path)

    def objects() -> dict[str, tuple[int, object]]:
        return {b.name: (b.size, b.generation) for b in emulator.client().list_blobs(bucket, prefix="out/")}

    before = objects()
    dataflow = ["--runner=DataflowRunner", "--project=my-project", "--region=europe-west4"]
    dataflow += [f"--temp_location=gs://{bucket}/tmp", "--setup_file=./setup.py", "--dry_run=true"]
    capsys.readouterr()
    assert convert(source, remote, *SPLITS, "--append", *dataflow) == 0
    assert "without --dry_run merges them" in capsys.readouterr().out
    assert objects() == before
    assert convert(source, remote, *SPLITS, "--append") == 0  # the merge, by a real run
    assert complete_summary(remote).records == 18
