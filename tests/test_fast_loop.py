"""The Makefile's recipes. `make test-fast`, the inner loop: ruff's lint and `pytest --fast`, which
leaves out the files tests/conftest.py names in PROCESS_FILES. A renamed file would quietly come
back into the fast loop, so every name must be a test file that is there. And the interpreter
`.venv` is made with."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

from conftest import LONGEST_FILES, PROCESS_FILES

TESTS = Path(__file__).resolve().parent


def test_every_file_the_fast_loop_leaves_out_or_deals_first_is_there():
    present = {path.name for path in TESTS.glob("test_*.py")}
    assert set(PROCESS_FILES) <= present and set(LONGEST_FILES) <= present


def test_make_test_fast_lints_and_runs_pytest_fast_and_make_test_runs_everything():
    def recipe(target: str) -> str:
        make = ["make", "-n", "-s", "-f", str(TESTS.parent / "Makefile"), target, "VENV=.venv"]
        done = subprocess.run(make, cwd=TESTS.parent, capture_output=True, text=True)
        assert done.returncode == 0, done.stderr
        return done.stdout

    fast, whole = recipe("test-fast"), recipe("test")
    assert "-m ruff check ." in fast and "-m pytest" in fast and "--fast" in fast
    assert "-m pytest" in whole and "--fast" not in whole
    assert "-m mypy" in whole  # the type check runs in `make test` (lint), with pyproject.toml's settings


def test_the_venv_is_made_with_the_systems_python_where_it_can_else_the_one_on_path(tmp_path):
    """Debian's and Ubuntu's /usr/bin/python3.11 are built with profile-guided and link-time
    optimization, pyenv's (first on PATH on the project's machine) by default not."""

    def venv_command(*settings: str) -> str:
        make = ["make", "-n", "-s", "-f", str(TESTS.parent / "Makefile"), "demo", f"VENV={tmp_path / 'v'}"]
        done = subprocess.run([*make, *settings], cwd=TESTS.parent, capture_output=True, text=True)
        assert done.returncode == 0, done.stderr
        return next(line for line in done.stdout.splitlines() if " -m venv " in line)

    on_path = shutil.which("python3.11") or shutil.which("python3")
    system = Path("/usr/bin/python3.11")
    probe = [str(system), "-c", "import ensurepip; ensurepip.version()"]
    usable = system.exists() and subprocess.run(probe, capture_output=True).returncode == 0
    assert f"|| {system if usable else on_path} -m venv " in venv_command()
    assert f"|| {on_path} -m venv " in venv_command("SYSTEM_PYTHON=")  # no usable system one
