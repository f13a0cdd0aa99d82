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


PRELOADED = ("torch", "torch.distributed", "gradlab.losses", "gradlab.models", "gradlab.monitor",
             "tests.helpers.distributed_faults", "tests.helpers.ranks_agree",
             "tests.helpers.disabled_notes_ranks")  # fmt: skip
"""What the fork server of :func:`run_two_ranks` imports once per test process: each rank then
starts by a fork of it, instead of a fresh interpreter that spends about 3 CPU-seconds on
importing torch and gradlab (two ranks of each of some 40 tests of ``make test``)."""


def rank_start_method() -> str:
    """``"forkserver"``, or ``"spawn"`` under mutation testing: mutmut chooses the mutant of a
    run through its environment (``MUTANT_UNDER_TEST``), which a fork server started earlier,
    by another run, would not pass on to the ranks (they would run the unmutated code)."""
    import os

    return "spawn" if "MUTANT_UNDER_TEST" in os.environ else "forkserver"


def run_two_ranks(worker, args: tuple, what: str = "") -> None:
    """Run ``worker(rank, 2, *args)`` on two processes started from a fork server that has
    imported :data:`PRELOADED` (:func:`rank_start_method`); fail the test if a rank still runs
    after :data:`TIME_BOX_S` (a hang), killing what is left either way. A rank that raises
    fails the test with its traceback (``torch.multiprocessing.ProcessRaisedException``).

    A rank sees the environment and working folder of the test process as they were when the
    fork server started (its first use by this process): pass paths as arguments, and set what
    the environment must hold in the worker itself."""
    import multiprocessing
    import time

    import pytest
    import torch
    import torch.multiprocessing as mp

    if not torch.distributed.is_available():
        pytest.skip("torch.distributed is not available")
    method = rank_start_method()
    if method == "forkserver":
        multiprocessing.set_forkserver_preload(list(PRELOADED))  # no effect once it runs
    context = mp.start_processes(worker, args=(2, *args), nprocs=2, join=False,
                                 start_method=method)  # fmt: skip
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
