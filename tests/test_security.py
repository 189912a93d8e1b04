"""What a run may touch: it reads only the inputs (and the manifest), writes only under --output,
never follows a manifest outside --input, and never runs or unpickles anything from an input.

Proved with Python's audit hooks (PEP 578), which see every open, rename, delete and process
start in the interpreter, so the DirectRunner's in-process workers are watched too."""

from __future__ import annotations

import contextlib
import os
import struct
import sys

import imagegen
import pytest
from outputcheck import read_records, summary

from beam_tfrecord.images.normalize import Reject, encode_for_tensorflow
from pipelines.convert import run

_events: list[tuple[str, tuple]] | None = None


def _hook(event: str, args: tuple) -> None:
    if _events is not None and (event in WATCHED or event.startswith(("os.exec", "os.posix_spawn"))):
        _events.append((event, args))


WATCHED = {
    "open",
    "os.rename",
    "os.remove",
    "os.rmdir",
    "os.mkdir",
    "shutil.rmtree",
    "os.truncate",
    "subprocess.Popen",
    "os.system",
    "os.spawn",
    "pickle.find_class",
    "os.replace",
}
TRUSTED_MODULES = {
    "apache_beam",
    "beam_tfrecord",
    "pipelines",
    "builtins",
    "collections",
    "copyreg",
    "logging",
}
sys.addaudithook(_hook)  # hooks cannot be removed; it records only inside `watching`


class watching:
    """Record the watched audit events raised inside the `with` block."""

    def __enter__(self) -> list[tuple[str, tuple]]:
        global _events
        _events = []
        return _events

    def __exit__(self, *exc: object) -> None:
        global _events
        _events = None


def opened(events, within: str) -> tuple[set[str], set[str]]:
    """(paths read, paths written or changed) under `within`, from recorded events."""
    reads, writes = set(), set()
    for event, args in events:
        if event == "open" and isinstance(args[0], str | bytes | os.PathLike):
            path = os.path.abspath(os.fsdecode(args[0]))
            mode, flags = args[1], args[2]
            writing = (mode and any(c in str(mode) for c in "wax+")) or (
                isinstance(flags, int) and flags & (os.O_WRONLY | os.O_RDWR | os.O_CREAT)
            )
            (writes if writing else reads).add(path)
        elif event in ("os.rename", "os.replace", "os.remove", "os.rmdir", "os.mkdir", "shutil.rmtree"):
            writes.update(os.path.abspath(os.fsdecode(a)) for a in args[:2] if isinstance(a, str | bytes))
    return {p for p in reads if p.startswith(within)}, {p for p in writes if p.startswith(within)}


def test_a_run_reads_only_inputs_and_writes_only_under_output(tmp_path):
    root = tmp_path / "in"
    imagegen.write_tree(root, {"cat/1.jpg": imagegen.jpeg(seed=1), "dog/2.jpg": imagegen.jpeg(seed=2)})
    imagegen.write_tree(tmp_path, {"outside.jpg": imagegen.jpeg(seed=3), "secret/x.jpg": imagegen.jpeg()})
    manifest = tmp_path / "labels.csv"
    outside = tmp_path / "outside.jpg"
    manifest.write_text(
        "path,label\n"
        "cat/1.jpg,cat\n"
        "dog/2.jpg,dog\n"
        f"../outside.jpg,cat\n"  # traversal
        f"{outside},dog\n"  # an absolute path
        "../secret/x,cat\n"  # an id without extension, outside
        "cat/../../outside.jpg,cat\n"
    )
    out = tmp_path / "out"
    with watching() as events:
        code = run(
            [
                "--input",
                str(root),
                "--output",
                str(out),
                "--no_progress",
                "--label_source",
                "manifest",
                "--manifest",
                str(manifest),
                # Audit hooks see this process only: one in-process worker (Beam's worker
                # processes, the default for larger inputs, run the same code on the same paths).
                "--direct_num_workers=1",
            ]
        )
    assert code == 0
    reads, writes = opened(events, str(tmp_path))
    assert reads <= {str(root / "cat" / "1.jpg"), str(root / "dog" / "2.jpg"), str(manifest)} | {
        p for p in reads if p.startswith(str(out))
    }, reads
    assert {str(root / "cat" / "1.jpg"), str(root / "dog" / "2.jpg"), str(manifest)} <= reads
    assert str(outside) not in reads and not any("secret" in p for p in reads)
    assert writes and all(p.startswith(str(out) + os.sep) or p == str(out) for p in writes), writes
    assert sorted(r["image/filename"].decode() for r in read_records(out, "train")) == [
        "cat/1.jpg",
        "dog/2.jpg",
    ]
    assert summary(out)["manifest_rows_without_file"] == 4
    assert [e for e in events if e[0] in ("subprocess.Popen", "os.system", "os.spawn")] == []
    # Beam pickles its own graph (DoFns, coders) between stages; never a class from elsewhere.
    modules = {args[0].split(".")[0] for event, args in events if event == "pickle.find_class"}
    assert modules <= TRUSTED_MODULES, modules


def eps() -> bytes:
    return (
        b"%!PS-Adobe-3.0 EPSF-3.0\n%%BoundingBox: 0 0 8 8\n%%EndComments\n"
        b"(/etc/passwd) (r) file pop\nshowpage\n%%EOF\n"
    )


def psd() -> bytes:
    """A 4x4 RGB Photoshop file, uncompressed."""
    header = b"8BPS" + struct.pack(">H6xHIIHH", 1, 3, 4, 4, 8, 3)
    return header + b"\x00" * 12 + struct.pack(">H", 0) + b"\x80" * 48


def iptc_wrapping(payload: bytes) -> bytes:
    """An IPTC/NAA file whose image data is `payload`: Pillow opens that with every plugin."""

    def field(record: int, tag: int, data: bytes) -> bytes:
        return bytes([0x1C, record, tag]) + len(data).to_bytes(2, "big") + data

    layout = field(3, 60, b"\x01\x00") + field(3, 20, b"\x00\x08") + field(3, 30, b"\x00\x08")
    return layout + field(3, 120, b"\x05") + field(8, 10, payload)


def test_an_eps_wrapped_in_iptc_never_reaches_ghostscript():
    """Pillow's IPTC plugin would open the wrapped EPS with every plugin: IPTC is refused."""
    with watching() as events, pytest.raises(Reject) as raised:
        encode_for_tensorflow(iptc_wrapping(eps()))
    assert raised.value.reason == "unsupported_format" and "IPTC" in raised.value.detail
    assert not [e for e in events if e[0] in ("subprocess.Popen", "os.system", "os.spawn")]


def test_the_readers_decode_only_the_formats_records_hold():
    """A foreign record whose image is an EPS never reaches Ghostscript when read back."""
    from beam_tfrecord.read.examples import decode_image

    with watching() as events, pytest.raises(Exception, match="cannot identify"):
        decode_image(eps())
    assert not [e for e in events if e[0] in ("subprocess.Popen", "os.system", "os.spawn")]


def test_eps_is_identified_never_decoded_and_psd_is_decoded_in_process():
    """EPS would run Ghostscript: refused from its header. PSD is decoded by Pillow itself."""
    with watching() as events:
        with pytest.raises(Reject) as raised:
            encode_for_tensorflow(eps())
        assert (encode_for_tensorflow(psd()).height, encode_for_tensorflow(psd()).width) == (4, 4)
    assert raised.value.reason == "unsupported_format" and "Ghostscript" in raised.value.detail
    started = [e for e in events if e[0] in ("subprocess.Popen", "os.system", "os.spawn")]
    assert started == [] and not [e for e in events if e[0].startswith(("os.exec", "os.posix_spawn"))]
    assert not [e for e in events if e[0] == "pickle.find_class"]


def test_decoding_images_starts_no_process_and_unpickles_nothing():
    inputs = {**imagegen.bad_input_tree(), **imagegen.every_format(), **imagegen.chatty_tiffs()}
    with watching() as events:
        for data in inputs.values():
            with contextlib.suppress(Reject):
                encode_for_tensorflow(data)
    assert [e[0] for e in events if e[0] != "open"] == []
