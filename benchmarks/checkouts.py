"""Running this project's code from another checkout beside this one (`--baseline ROOT` of
benchmarks/peers.py and benchmarks/read.py): which commit it is, the environment and folder that
make a process import ROOT's `beam_tfrecord` and `pipelines`, and the check that it does.

Imports nothing of this project: a measuring process that imports this module still imports the
checkout its environment names.
"""

from __future__ import annotations

import os
import subprocess


def checkout_name(root: str) -> str:
    """`root`'s short commit (with `+` when its tracked files differ from it), or its folder's
    name when it is no git checkout."""
    commit = subprocess.run(
        ["git", "-C", root, "rev-parse", "--short", "HEAD"], capture_output=True, text=True
    ).stdout.strip()
    if not commit:
        return os.path.basename(os.path.normpath(root))
    changed = subprocess.run(
        ["git", "-C", root, "status", "--porcelain", "--untracked-files=no"], capture_output=True, text=True
    ).stdout.strip()
    return commit + ("+" if changed else "")


def same_folder(a: str, b: str) -> bool:
    return os.path.realpath(a) == os.path.realpath(b)


def under(path: str, root: str) -> bool:
    root = os.path.realpath(root)
    return os.path.commonpath([os.path.realpath(path), root]) == root


def pythonpath_first(root: str, *others: str) -> dict[str, str]:
    """The environment change that puts `root` first on PYTHONPATH and leaves the `others`
    checkouts off it (a process run in `root` with `python -m` or `-c` imports from there first
    anyway; a script imports from its own folder, then PYTHONPATH, then the installed packages)."""
    kept = [
        path
        for path in os.environ.get("PYTHONPATH", "").split(os.pathsep)
        if path and not any(same_folder(path, other) for other in (root, *others))
    ]
    return {"PYTHONPATH": os.pathsep.join([os.path.abspath(root), *kept])}


PACKAGES = ("beam_tfrecord", "pipelines")


def compile_packages(python: str, root: str, packages: tuple[str, ...] = PACKAGES) -> None:
    """Write the bytecode of `root`'s packages now, so that no measured run pays for it (a checkout
    just made has none)."""
    subprocess.run([python, "-m", "compileall", "-q", *packages], cwd=root, check=True)


_WHERE = "import beam_tfrecord, pipelines; print(beam_tfrecord.__file__); print(pipelines.__file__)"


def imported_from(python: str, cwd: str, env: dict[str, str]) -> list[str]:
    """The files of `beam_tfrecord` and `pipelines` that `python`, run in `cwd` with `env` over
    this process's environment, imports."""
    done = subprocess.run(
        [python, "-c", _WHERE], cwd=cwd, env={**os.environ, **env}, capture_output=True, text=True
    )
    if done.returncode != 0:
        raise RuntimeError(f"cannot import this project's packages in {cwd}:\n{done.stderr[-3000:]}")
    return done.stdout.splitlines()
