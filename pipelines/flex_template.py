"""The Flex Template launcher's entry point (deploy/Dockerfile): `pipelines.convert`, submitting
without waiting, because the launcher must exit once the job is submitted; the job writes
summary.json when it ends. The template's parameters arrive as `--name=value` options."""

from __future__ import annotations

import sys

from pipelines import interrupts

if __name__ == "__main__":
    interrupts.block()  # before any import starts a thread, as pipelines/convert.py does
from pipelines.convert import main

__all__ = []

if __name__ == "__main__":
    main(["--no_wait=true", *sys.argv[1:]])
