"""A write that fails (a full disk, a quota, a permission) is one clear line: which file and why,
what was kept, the temporary files removed so the space is free again, what to do; exit 1. The
injected failure is the error a full disk raises (fault_injection.fail_point); a real 3 MB filesystem
proves the same where this machine lets a test mount one."""

from __future__ import annotations

import errno
import os
import subprocess
import sys

import imagegen
import pytest

from beam_tfrecord import fault_injection
from beam_tfrecord.output import outputs
from beam_tfrecord.write_failures import WriteFailed, find
from pipelines.convert import run

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


@pytest.fixture
def tree(tmp_path):
    root = tmp_path / "in"
    imagegen.write_tree(root, {f"{c}/{i}.png": imagegen.png(64, 64, seed=i) for c in "ab" for i in range(6)})
    return root


def command(tree, out, *extra: str) -> list[str]:
    return ["--input", str(tree), "--output", str(out), "--no_progress", *extra]


@pytest.mark.parametrize("point", ["writing", "metadata"])
def test_a_full_disk_is_one_line_with_the_file_what_was_kept_and_what_to_do(
    tree, tmp_path, capsys, monkeypatch, point
):
    monkeypatch.setattr(fault_injection, "FAIL_AT", point)
    out = tmp_path / "out"
    assert run(command(tree, out)) == 1
    (line,) = capsys.readouterr().err.strip().splitlines()
    assert line.startswith("error: could not write ") and "No space left on device" in line
    assert "temporary files were removed" in line and "free space" in line
    assert outputs.leftover_temp(str(out)) == []  # the space is free again
    assert not (out / "summary.json").exists()
    if point == "writing":  # nothing final: the rerun needs nothing but space
        assert "Nothing final was written" in line and ".temp-beam-tfrecord-" in line
        assert outputs.existing_outputs(str(out)) == []
    else:  # the shards were in place: they stay, named as no finished output
        assert "without summary.json it is no finished output" in line and "--overwrite" in line
    monkeypatch.setattr(fault_injection, "FAIL_AT", None)
    assert run(command(tree, out, "--overwrite")) == 0  # and then the same command completes


def test_a_failure_crossing_processes_is_found_in_the_runners_message():
    failure = WriteFailed(
        "/out/.temp-x/train-00000-of-00001.tfrecord.ab", "No space left on device", errno.ENOSPC
    )
    carried = RuntimeError(
        f"beam_tfrecord.write_failures.WriteFailed: {failure} [while running 'Write/WriteShardFiles']"
    )
    found = find(carried)
    assert (found.path, found.reason, found.code) == (failure.path, failure.reason, errno.ENOSPC)
    assert find(RuntimeError("ValueError: something else")) is None


def _small_filesystem(path) -> bool:
    """Mount a 3 MB tmpfs at `path` when this machine allows it (root, mount available)."""
    path.mkdir()
    done = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=3m", "tmpfs", str(path)], capture_output=True)
    return done.returncode == 0


# The ArrayRecord writer opens its own local files: its full disk comes back as the same one line.
@pytest.mark.parametrize("file_format", ["tfrecord", "array_record"])
def test_a_real_full_disk_with_worker_processes_is_one_line_and_frees_the_space(tmp_path, file_format):
    small = tmp_path / "small"
    if not _small_filesystem(small):
        pytest.skip("this machine lets no test mount a small filesystem (the injected test covers it)")
    try:
        root = tmp_path / "in"
        imagegen.write_tree(root, {f"a/{i}.png": imagegen.png(300, 300, seed=i) for i in range(40)})
        args = command(root, small / "out", "--label_source", "none", "--file_format", file_format)
        args += ["--direct_num_workers", "2", "--direct_running_mode", "multi_processing"]
        done = subprocess.run(
            [sys.executable, "-m", "pipelines.convert", *args],
            cwd=REPO,
            capture_output=True,
            text=True,
            timeout=300,
        )
        assert done.returncode == 1
        ours = [line for line in done.stderr.splitlines() if line.startswith(("error", "Traceback", "ERROR"))]
        assert len(ours) == 1 and ours[0].startswith("error: could not write "), done.stderr[-3000:]
        assert "No space left on device" in ours[0]
        assert os.statvfs(small).f_bfree == os.statvfs(small).f_blocks  # every byte free again
    finally:
        subprocess.run(["umount", str(small)], check=False)
