"""Processes under a test's subprocess, read from /proc (Linux), so that none outlives a test."""

from __future__ import annotations

import contextlib
import signal
from pathlib import Path


def descendants(pid: int) -> list[int]:
    """The processes under ``pid`` (children, theirs, ...) as /proc lists them now."""
    found: list[int] = []
    with contextlib.suppress(OSError):
        for task in Path(f"/proc/{pid}/task").iterdir():
            for child in (task / "children").read_text().split():
                found += [int(child), *descendants(int(child))]
    return found


def sigint_as_at_a_terminal() -> None:
    """For ``subprocess.Popen(preexec_fn=...)``: the child starts with SIGINT's default action,
    so its Python raises KeyboardInterrupt on Ctrl-C even when this process runs with SIGINT
    ignored (a background job of a non-interactive shell starts so, and children inherit it)."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)
