"""gs:// for every path, against a real GCS emulator over HTTP on 127.0.0.1.

The emulator runs in its own process (tests/gcsemulator.py); the pipeline reaches it only through
Beam's filesystems, as it reaches GCS. Set-up and read-back use Beam's filesystems too.
"""

from __future__ import annotations

import gzip
import json
import os
import subprocess
import sys
import threading
import uuid
from concurrent.futures import ThreadPoolExecutor

import conftest
import imagegen
import pytest
from apache_beam.io.filesystem import CompressionTypes
from apache_beam.io.filesystems import FileSystems
from apache_beam.options.pipeline_options import PipelineOptions
from gcsemulator import EMULATOR_ENV, Emulator, PermissionProxy
from google.api_core.exceptions import Forbidden
from outputcheck import read_records

from beam_tfrecord import compat, gcs, names
from beam_tfrecord.elements import PlannedInput, RejectLine
from beam_tfrecord.images import inputs as records
from beam_tfrecord.images.options import ImageConfig


@pytest.fixture(scope="module")
def emulator():
    with Emulator() as emu, pytest.MonkeyPatch.context() as patch:
        patch.setenv(EMULATOR_ENV, emu.url)
        yield emu


@pytest.fixture
def bucket(emulator) -> str:
    """A fresh bucket per test, so tests never see each other's objects."""
    name = f"test-{uuid.uuid4().hex[:12]}"
    emulator.client().create_bucket(name)
    return name


REPO = conftest.REPO
convert = conftest.convert


def list_objects(prefix: str) -> list[str]:
    """Object names under a gs:// prefix, relative to it."""
    (result,) = FileSystems.match([prefix.rstrip("/") + "/**"])
    return sorted(m.path[len(prefix.rstrip("/")) + 1 :] for m in result.metadata_list)


def download(prefix: str, destination) -> None:
    """Copy every object under a gs:// prefix to a local directory, through Beam's filesystems."""
    for relpath in list_objects(prefix):
        path = destination / relpath
        path.parent.mkdir(parents=True, exist_ok=True)
        source = f"{prefix.rstrip('/')}/{relpath}"
        with FileSystems.open(source, compression_type=CompressionTypes.UNCOMPRESSED) as handle:
            path.write_bytes(handle.read())


def comparable_summary(path) -> dict:
    summary = json.loads(path.read_text())
    for key in (
        "input",
        "output",
        "options",
        "started_at",
        "wall_time_s",
        "read_threads",  # 8 for gs://, 1 for local input
    ):
        summary.pop(key, None)
    return summary


def test_same_tree_from_disk_and_from_gcs_gives_the_same_output(emulator, bucket, tmp_path):
    tree = imagegen.bad_input_tree()
    imagegen.write_tree(tmp_path / "images", tree)
    emulator.upload_tree(bucket, "images", tree)
    args = ("--splits", "train=0.6,validation=0.4", "--max_pixels", str(imagegen.BAD_INPUT_MAX_PIXELS))

    assert convert(str(tmp_path / "images"), str(tmp_path / "local"), *args) == 0
    assert convert(f"gs://{bucket}/images", f"gs://{bucket}/out", *args) == 0
    download(f"gs://{bucket}/out", tmp_path / "gcs")

    local, remote = tmp_path / "local", tmp_path / "gcs"
    assert sorted(p.name for p in remote.iterdir()) == sorted(p.name for p in local.iterdir())
    for name in ("labels.txt", "rejects.jsonl"):
        assert (remote / name).read_bytes() == (local / name).read_bytes(), name
    assert comparable_summary(remote / "summary.json") == comparable_summary(local / "summary.json")
    for split in ("train", "validation"):
        by_name = {}
        for out in (local, remote):
            records = read_records(out, split)
            by_name[out] = {r["image/filename"]: r for r in records}
        assert by_name[local].keys() == by_name[remote].keys()
        for name, record in by_name[local].items():
            assert record.keys() == by_name[remote][name].keys()
            for key, value in record.items():
                assert by_name[remote][name][key] == value, (name, key)


def test_gcs_output_is_complete_and_readable(emulator, bucket, tmp_path):
    files = {f"{k}/{k}.{i}.jpg": imagegen.jpeg(40, 30, seed=i) for k in ("cat", "dog") for i in range(12)}
    emulator.upload_tree(bucket, "pets", files)
    manifest = "".join(f"{path},{path.split('/')[0]}\n" for path in files)
    with FileSystems.create(f"gs://{bucket}/meta/labels.csv") as handle:
        handle.write(("path,label\n" + manifest).encode())
    output = f"gs://{bucket}/run/out"
    extra = (
        "--num_shards",
        "3",
        "--label_source",
        "manifest",
        "--manifest",
        f"gs://{bucket}/meta/labels.csv",
    )
    assert convert(f"gs://{bucket}/pets", output, *extra) == 0

    # Exactly the three final shards, their indexes and the metadata (TFDS's too): no temp files,
    # no write probe.
    objects = list_objects(output)
    shards = [f"train-{i:05d}-of-00003.tfrecord" for i in range(3)]
    indexes = [f"{name}.idx" for name in shards]
    tfds_files = ["dataset_info.json", "features.json", "image-class-label.labels.txt"]
    metadata = [
        "labels.txt",
        "rejects.jsonl",
        "changes.jsonl",
        "duplicates.jsonl",
        "summary.json",
        names.INDEX_FILE,  # the file index an --append reads (output.file_index)
        *tfds_files,
    ]
    assert objects == sorted([*shards, *indexes, *metadata])

    # Read straight from the bucket, as a training job would: tf.data, no TensorFlow, inspect.
    import beam_tfrecord
    from pipelines import inspect

    dataset = beam_tfrecord.load_dataset(output, "train", features=True, decode_images=True, batch_size=None)
    records = [{k: v.numpy() for k, v in r.items()} for r in dataset]
    assert sorted(r["image/filename"].decode() for r in records) == sorted(files)
    for record in records:
        assert record["image/encoded"] == files[record["image/filename"].decode()]
        assert record["image"].shape == (30, 40, 3)
    images, labels = next(iter(beam_tfrecord.load_dataset(output, "train", image_size=(16, 16))))
    assert images.shape == (24, 16, 16, 3) and sorted(labels.numpy()) == [0] * 12 + [1] * 12
    cached = beam_tfrecord.load_dataset(output, "train", features=True, batch_size=None, cache=True, seed=0)
    passes = [sorted(r["image/filename"].numpy().decode() for r in cached) for _ in range(2)]
    assert passes == [sorted(files)] * 2
    halves = [list(beam_tfrecord.iter_examples(output, "train", shard=(i, 2))) for i in range(2)]
    assert sorted(r["filename"] for half in halves for r in half) == sorted(files)
    assert all(r["image"] == files[r["filename"]] for half in halves for r in half)
    assert inspect.run([output, "--pictures", str(tmp_path)]) == 0
    assert (tmp_path / "contact_sheet.png").exists() and "contact_sheet.png" not in list_objects(output)
    with FileSystems.open(f"{output}/summary.json") as handle:
        summary = json.loads(handle.read())
    assert summary["consistent"] and summary["records"] == 24
    assert summary["splits"]["train"]["files"] == shards

    # A second run into the same place needs --overwrite, and then replaces the shard set.
    assert convert(f"gs://{bucket}/pets", output, *extra) == 2
    assert convert(f"gs://{bucket}/pets", output, "--overwrite", *extra[2:]) == 0
    assert [n for n in list_objects(output) if names.is_shard_name(n)] == ["train-00000-of-00001.tfrecord"]


@pytest.mark.parametrize(
    ("input_path", "output_path", "extra", "message"),
    [
        (
            "gs://nobucket-{u}/images",
            "gs://{b}/out",
            (),
            "bucket gs://nobucket-{u} does not exist",
        ),
        ("gs://{b}/no/such/prefix", "gs://{b}/out", (), "holds no files"),
        (
            "gs://{b}/images",
            "gs://nobucket-{u}/out",
            (),
            "bucket gs://nobucket-{u} does not exist",
        ),
        (
            "gs://{b}/images",
            "gs://{b}/out",
            ("--label_source", "manifest", "--manifest", "gs://{b}/missing.csv"),
            "--manifest gs://{b}/missing.csv does not exist",
        ),
    ],
)
def test_missing_bucket_prefix_or_object_is_a_clear_error(
    emulator, bucket, capsys, input_path, output_path, extra, message
):
    emulator.upload_tree(bucket, "images", {"cat/1.jpg": imagegen.jpeg()})
    fill = {"b": bucket, "u": uuid.uuid4().hex[:8]}
    args = [a.format(**fill) for a in (input_path, output_path, *extra)]
    assert convert(*args) == 2
    err = capsys.readouterr().err
    assert message.format(**fill) in err
    assert "Traceback" not in err and len(err.strip().splitlines()) == 1
    assert list_objects(f"gs://{bucket}/out") == []


def test_permission_denied_is_a_clear_error(emulator, capsys, monkeypatch):
    """IAM is the one thing the emulator lacks: a proxy in front of it answers 403 as GCS does."""
    for name in ("locked", "readonly", "data"):
        if emulator.client().lookup_bucket(name) is None:
            emulator.client().create_bucket(name)
    emulator.upload_tree("locked", "images", {"cat/1.jpg": imagegen.jpeg()})
    emulator.upload_tree("data", "images", {"cat/1.jpg": imagegen.jpeg()})
    emulator.upload_tree("readonly", "old", {"summary.json": b"{}"})
    with PermissionProxy(emulator.url, {"locked": "all", "readonly": "write"}) as proxy:
        monkeypatch.setenv(EMULATOR_ENV, proxy.url)
        assert convert("gs://locked/images", "gs://data/out") == 2
        assert "--input gs://locked/images: permission denied on gs://locked (403)" in capsys.readouterr().err
        for output in ("gs://readonly/out", "gs://readonly/old"):
            assert convert("gs://data/images", output, "--overwrite") == 2
            err = capsys.readouterr().err
            assert f"--output {output}: permission denied on gs://readonly (403)" in err
    monkeypatch.setenv(EMULATOR_ENV, emulator.url)
    assert list_objects("gs://readonly/out") == [] and list_objects("gs://data/out") == []
    assert list_objects("gs://readonly/old") == ["summary.json"]  # --overwrite deleted nothing


@pytest.mark.parametrize(("sink", "temp_prefix"), [("paths", ".temp-beam-tfrecord-"), ("beam", "beam-temp-")])
def test_shards_get_final_names_only_at_finalize(emulator, bucket, monkeypatch, capsys, sink, temp_prefix):
    """Both sinks write temp objects, then copy them to their final names. A run cut off at that
    step (here: every copy refused, as a bucket without the right role does) leaves no shard set
    and no summary; the paths sink says so in one line, naming the object and the refusal, and
    removes its temporary objects."""
    files = {f"cat/{i}.jpg": imagegen.jpeg(seed=i) for i in range(6)}
    emulator.upload_tree(bucket, "images", files)
    output = f"gs://{bucket}/out"
    with PermissionProxy(emulator.url, {bucket: "copy"}) as proxy:
        monkeypatch.setenv(EMULATOR_ENV, proxy.url)
        if sink == "paths":
            assert convert(f"gs://{bucket}/images", output, "--num_shards", "2", "--sink", sink) == 1
            (line,) = capsys.readouterr().err.strip().splitlines()
            assert line.startswith(f"error: could not write {output}/") and "403" in line, line
        else:  # Beam's own WriteToTFRecord renames: its error is Beam's
            with pytest.raises(Exception):  # noqa: B017
                convert(f"gs://{bucket}/images", output, "--num_shards", "2", "--sink", sink)
    monkeypatch.setenv(EMULATOR_ENV, emulator.url)
    objects = list_objects(output)
    if sink == "beam":
        assert any(name.startswith(temp_prefix) for name in objects), objects
    else:
        assert not any(name.startswith(temp_prefix) for name in objects), objects
    assert not [name for name in objects if names.is_shard_name(name.split("/")[-1])]
    assert "summary.json" not in objects


FIRST_CALL = """
import json, sys
import google.auth

real_default, lookups = google.auth.default, []

def counted_default(*args, **kwargs):  # Beam's one way to Application Default Credentials
    lookups.append(kwargs)
    if sys.argv[1] == "plain":  # the control run: answer at once instead of Beam's ~20 s of retries
        from google.auth.credentials import AnonymousCredentials
        return AnonymousCredentials(), None
    return real_default(*args, **kwargs)

google.auth.default = counted_default
if sys.argv[1] == "switch":
    from beam_tfrecord import gcs
from apache_beam.io.filesystems import FileSystems
answer = {"exists": FileSystems.exists(sys.argv[2])}
if sys.argv[1] == "switch":
    answer["read"] = gcs.read_bytes(sys.argv[2]).decode()
answer["lookups"] = len(lookups)
print(json.dumps(answer))
"""


def first_call(emulator: Emulator, mode: str, path: str) -> tuple[dict, str]:
    """What a fresh process's first gs:// calls return, and its stderr."""
    env = {**os.environ, EMULATOR_ENV: emulator.url, "PYTHONPATH": REPO}
    env.pop("GOOGLE_APPLICATION_CREDENTIALS", None)
    out = subprocess.run(
        [sys.executable, "-c", FIRST_CALL, mode, path],
        env=env,
        capture_output=True,
        text=True,
        check=True,
        timeout=120,
    )
    return json.loads(out.stdout.strip().splitlines()[-1]), out.stderr


def test_emulator_runs_skip_beams_credential_retries(emulator, bucket):
    """Without the switch a fresh process's first gs:// call looks up Application Default
    Credentials, which with none configured Beam retries for ~20 s and then warns about. With it
    (importing beam_tfrecord) neither Beam's filesystems nor our reads look any up."""
    emulator.upload_tree(bucket, "", {"x": b"here"})
    path = f"gs://{bucket}/x"
    plain, _ = first_call(emulator, "plain", path)
    assert plain == {"exists": True, "lookups": 1}  # the counter sees Beam's lookup
    switched, stderr = first_call(emulator, "switch", path)
    assert switched == {"exists": True, "read": "here", "lookups": 0}
    assert "Unable to find default credentials" not in stderr


def test_real_runs_keep_application_default_credentials(monkeypatch):
    monkeypatch.delenv(EMULATOR_ENV, raising=False)
    assert gcs.wants_credentials() and not gcs.wants_credentials(False)
    monkeypatch.setenv(EMULATOR_ENV, "http://127.0.0.1:1")
    assert not gcs.wants_credentials()
    assert compat.install_emulator_switch(gcs.wants_credentials) and compat.emulator_switch_installed()


def test_reads_from_several_threads_return_the_bytes_written(emulator, bucket):
    files = {f"cat/{i}.jpg": os.urandom(1000 + 37 * i) for i in range(24)}
    files["cat/packed.jpg.gz"] = gzip.compress(imagegen.jpeg())  # stays gzip: never decompressed
    emulator.upload_tree(bucket, "images", files)
    written = {f"gs://{bucket}/images/{relpath}": data for relpath, data in files.items()}
    with ThreadPoolExecutor(4) as pool:
        read = dict(zip(written, pool.map(records.read_bytes, written), strict=True))
    assert read == written


def test_a_thread_reuses_its_client_and_threads_do_not_share_one(emulator, bucket):
    emulator.upload_tree(bucket, "images", {"a.jpg": b"aa", "b.jpg": b"bb"})
    paths = [f"gs://{bucket}/images/a.jpg", f"gs://{bucket}/images/b.jpg"]
    both_running = threading.Barrier(2, timeout=60)
    seen: dict[str, tuple[object, object, list[bytes]]] = {}

    def two_reads(name: str) -> None:
        first = gcs.thread_client()
        data = [gcs.read_bytes(path) for path in paths]
        both_running.wait()  # both threads alive at once: neither can inherit the other's state
        seen[name] = (first, gcs.thread_client(), data)

    threads = [threading.Thread(target=two_reads, args=(name,)) for name in ("one", "two")]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=120)
    (one_before, one_after, one_data), (two_before, two_after, two_data) = seen["one"], seen["two"]
    assert one_data == two_data == [b"aa", b"bb"]
    assert one_before is one_after and two_before is two_after
    assert one_before is not two_before


def test_a_new_emulator_address_or_new_filesystem_options_get_a_new_client(emulator, bucket, monkeypatch):
    """Tests and the benchmark move STORAGE_EMULATOR_HOST to a proxy, and each Pipeline sets its own
    filesystem options: a thread's cached client must follow both."""
    emulator.upload_tree(bucket, "images", {"a.jpg": b"aa"})
    path = f"gs://{bucket}/images/a.jpg"
    direct = gcs.thread_client()
    with PermissionProxy(emulator.url, {bucket: "all"}) as proxy:
        monkeypatch.setenv(EMULATOR_ENV, proxy.url)
        with pytest.raises(Forbidden):
            gcs.read_bytes(path)
        assert gcs.thread_client() is not direct
    monkeypatch.setenv(EMULATOR_ENV, emulator.url)
    assert gcs.read_bytes(path) == b"aa"

    monkeypatch.setattr(FileSystems, "_pipeline_options", FileSystems._pipeline_options)  # restored after
    before = gcs.thread_client()
    FileSystems.set_options(PipelineOptions(["--project", "another-pipeline"]))
    assert gcs.thread_client() is not before
    assert gcs.read_bytes(path) == b"aa"


def test_a_missing_object_is_an_unreadable_reject(emulator, bucket):
    item = PlannedInput(
        relpath="cat/gone.jpg", path=f"gs://{bucket}/images/cat/gone.jpg", size=9, split="train"
    )
    reject = records.prepare_input(item, ImageConfig())
    assert isinstance(reject, RejectLine)
    assert (reject.path, reject.reason) == ("cat/gone.jpg", "unreadable")
    assert reject.detail.startswith("NotFound: 404")
