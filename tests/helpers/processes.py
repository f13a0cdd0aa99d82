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


TIME_BOX_S = 60
"""Seconds two spawned ranks may run before a test calls them hung."""


def run_two_ranks(worker, args: tuple, what: str = "") -> None:
    """Run ``worker(rank, 2, *args)`` on two spawned processes; fail the test if a rank still
    runs after :data:`TIME_BOX_S` (a hang), killing what is left either way."""
    import time

    import pytest
    import torch
    import torch.multiprocessing as mp

    if not torch.distributed.is_available():
        pytest.skip("torch.distributed is not available")
    context = mp.start_processes(worker, args=(2, *args), nprocs=2, join=False,
                                 start_method="spawn")  # fmt: skip
    deadline = time.monotonic() + TIME_BOX_S
    try:
        while not context.join(timeout=1):
            if time.monotonic() > deadline:
                said = f"{what}: " if what else ""
                pytest.fail(f"{said}a rank still runs after {TIME_BOX_S} s (hung)")
    finally:
        for process in context.processes:
            if process.is_alive():
                process.kill()
