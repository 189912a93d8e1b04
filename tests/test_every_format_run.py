"""A folder holding every format, misnamed files and an oversized one, converted by the command:
every input is one record or one reject, every record decodes with TensorFlow, and every change
is named in changes.jsonl and counted in the summary table."""

from __future__ import annotations

import contextlib
import json
import os
import re
import threading
import time

import imagegen
import pytest
from conftest import convert
from outputcheck import all_inputs, read_records, rejects, summary
from test_formats import GOOD, REFUSED

from beam_tfrecord.elements import PlannedInput, RejectLine
from beam_tfrecord.images.inputs import prepare_input, read_bytes
from beam_tfrecord.images.options import ImageConfig
from beam_tfrecord.write.records import change_line, convert_input

BIG = 3_000_000  # bytes of a file over --max_file_mb 2 (the largest picture, the ICNS, is 1 MB)


def test_every_format_in_one_run(tmp_path, capsys):
    """Every format at 8 bits, as a run of photographs takes them (`--bit_depth 8`: the default
    keeps the float SPIDER and the multi-page TIFF whole, tests/test_full_depth.py)."""
    tree = {f"gallery/{name}": data for name, data in imagegen.every_format().items()}
    tree |= {f"odd/{name}": data for name, data in imagegen.chatty_tiffs().items()}
    tree |= {
        "odd/png_named.jpg": imagegen.png(),
        "odd/bmp_named.jpg": imagegen.bmp(),
        "odd/movie.mp4": b"\x00" * BIG,
    }
    imagegen.write_tree(tmp_path / "in", tree)
    out = tmp_path / "out"
    assert (
        convert(tmp_path / "in", out, "--label_source", "none", "--max_file_mb", "2", "--bit_depth", "8") == 0
    )

    records = read_records(out, "train", labeled=False)  # every image decoded by TensorFlow
    written = {r["image/filename"].decode() for r in records}
    rejected = {r["path"]: (r["reason"], r["detail"]) for r in rejects(out)}
    assert written | set(rejected) == all_inputs(tmp_path / "in") and not written & set(rejected)
    assert {f"gallery/{name}" for name in GOOD} <= written
    for name, why in REFUSED.items():
        assert (
            rejected[f"gallery/{name}"][0] == "unsupported_format" and why in rejected[f"gallery/{name}"][1]
        )
    assert rejected["odd/movie.mp4"] == ("too_large", "3.0 MB is over max_file_mb (2 MB)")
    assert rejected["odd/broken_deflate.tif"][0] == "corrupt"

    changes = {
        line["path"]: line for line in map(json.loads, (out / "changes.jsonl").read_text().splitlines())
    }
    expected = {f"gallery/{name}": reasons for name, (_, _, reasons) in GOOD.items() if reasons}
    assert {path: changes[path]["reasons"] for path in expected} == {p: list(r) for p, r in expected.items()}
    assert changes["odd/png_named.jpg"] == {
        "path": "odd/png_named.jpg",
        "source_format": "PNG",
        "mode": "RGB",
        "reencoded": False,  # named wrong, but TensorFlow decodes its bytes: kept
        "reasons": ["wrong_extension"],
    }
    assert changes["odd/bmp_named.jpg"]["reasons"] == ["format", "wrong_extension"]
    assert changes["gallery/spider.spider"]["mode"] == "F"

    result = summary(out)
    frames = sum("frames_dropped" in reasons for _, _, reasons in GOOD.values())
    assert result["consistent"] and result["frames_dropped"] == frames == 6
    assert result["changes_per_reason"]["wrong_extension"] == 2
    assert result["reencoded"] == sum(line["reencoded"] for line in changes.values())
    table = capsys.readouterr().out
    assert re.search(rf"^  frames_dropped +{frames}$", table, re.MULTILINE), table


def test_a_file_over_max_file_mb_is_rejected_before_it_is_read(tmp_path):
    """The listed size decides: the path below does not exist, so reading it would fail."""
    options = ImageConfig(max_file_mb=1)
    missing = PlannedInput("a.tif", str(tmp_path / "gone.tif"), size=2_000_001, split="train")
    assert prepare_input(missing, options) == RejectLine(
        "a.tif", "too_large", "2.0 MB is over max_file_mb (1 MB)"
    )
    grown = tmp_path / "grown.jpg"  # listed small, larger by the time it is read
    grown.write_bytes(imagegen.jpeg() + b"\0" * 1_000_000)
    late = prepare_input(PlannedInput("grown.jpg", str(grown), size=10, split="train"), options)
    assert isinstance(late, RejectLine) and late.reason == "too_large"


def test_what_an_option_does_to_every_record_is_counted_but_makes_no_line(tmp_path):
    """With --resize every record is `resized`: a line each would say nothing."""
    options = ImageConfig(resize=(16, 16))
    outcomes = {}
    for name, data in {"a.jpg": imagegen.jpeg(), "b.jpg": imagegen.cmyk_jpeg()}.items():
        (tmp_path / name).write_bytes(data)
        item = PlannedInput(name, str(tmp_path / name), len(data), "train")
        outcomes[name] = convert_input(item, "tfds", options)
    assert outcomes["a.jpg"].changes == ("resized",) and change_line(outcomes["a.jpg"]) is None
    assert outcomes["b.jpg"].changes == ("cmyk", "resized")
    assert change_line(outcomes["b.jpg"]).reasons == ("cmyk", "resized")


@pytest.mark.parametrize("size", [0, 1, 99, 100, 101, 3_000_000])
def test_a_local_file_is_read_whole_or_to_a_byte_past_the_limit(tmp_path, size):
    data = bytes(range(256)) * (size // 256) + bytes(size % 256)
    path = tmp_path / "f.bin"
    path.write_bytes(data)
    assert read_bytes(str(path)) == data
    assert read_bytes(str(path), limit=100) == data[:101]  # the caller sees it is over the limit


def test_a_file_that_arrives_in_pieces_is_read_to_its_end(tmp_path):
    """A pipe reads short, as a network filesystem may: every piece is read, and only a byte
    past the limit when there is one."""
    pieces = [b"a" * 70_000, b"b" * 5, b"c" * 200_000]
    for limit, expected in ((None, b"".join(pieces)), (70_003, (b"a" * 70_000 + b"b" * 4))):
        fifo = tmp_path / f"pipe-{limit}"
        os.mkfifo(fifo)

        def write_slowly(path=fifo) -> None:
            with contextlib.suppress(BrokenPipeError), open(path, "wb", buffering=0) as handle:
                for piece in pieces:  # the reader stops past the limit: the pipe breaks
                    handle.write(piece)
                    time.sleep(0.05)

        writer = threading.Thread(target=write_slowly)
        writer.start()
        try:
            assert read_bytes(str(fifo), limit=limit) == expected
        finally:
            writer.join()
