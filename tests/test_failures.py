"""A failed worker step never loses an input silently. Decoder errors become rejects with a
reason (see test_images, test_fuzz_images); any other exception in a DoFn fails the whole job
loudly, and then no summary.json and no final shard is written, so nothing looks complete."""

from __future__ import annotations

import os

import imagegen
import pytest

from beam_tfrecord.images import inputs as records
from beam_tfrecord.output import outputs
from pipelines.convert import run


@pytest.mark.parametrize("sink", ["paths", "beam"])
def test_an_unexpected_error_in_a_worker_fails_the_job(tmp_path, monkeypatch, sink):
    root = tmp_path / "in"
    imagegen.write_tree(root, {f"a/{i}.jpg": imagegen.jpeg(seed=i) for i in range(6)})
    real = records.encode_for_tensorflow

    def buggy(data, options, **kwargs):
        if data == imagegen.jpeg(seed=3):
            raise RuntimeError("a bug, not a bad image")
        return real(data, options, **kwargs)

    monkeypatch.setattr(records, "encode_for_tensorflow", buggy)
    out = tmp_path / "out"
    # One in-process worker: the monkeypatched bug lives in this process, not in worker processes.
    args = ["--input", str(root), "--output", str(out), "--no_progress", "--sink", sink, "--num_shards", "2"]
    args += ["--direct_num_workers=1"]
    with pytest.raises(Exception, match="a bug, not a bad image"):
        run(args)
    assert not (out / "summary.json").exists()
    assert [n for n in os.listdir(out) if ".tfrecord" in n and not n.startswith((".temp", "beam-temp"))] == []

    monkeypatch.setattr(records, "encode_for_tensorflow", real)
    assert run(args) == 0  # the next run clears what the failed one left
    assert outputs.leftover_temp(str(out)) == []
    assert sorted(outputs.complete_shards(str(out))) == ["train"]
