"""Processes under a test's subprocess, read from /proc (Linux), so that none outlives a test."""

from __future__ import annotations

import contextlib
from pathlib import Path


def descendants(pid: int) -> list[int]:
    """The processes under ``pid`` (children, theirs, ...) as /proc lists them now."""
    found: list[int] = []
    with contextlib.suppress(OSError):
        for task in Path(f"/proc/{pid}/task").iterdir():
            for child in (task / "children").read_text().split():
                found += [int(child), *descendants(int(child))]
    return found
