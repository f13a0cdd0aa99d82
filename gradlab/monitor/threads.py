"""How many CPU threads the Monitor's own computation of a logged step uses.

A logged step of a small batch is a few hundred small tensor operations. On a CPU, an
operation above torch's grain size (a sort, a search, an index, an MKL matrix product) opens a
parallel region over every intra-op thread; for a ``[112, 112]`` score matrix that costs more
than it saves, and when another process holds one of the cores (a DataLoader worker, another
job) the region waits for it. Below :data:`ONE_THREAD_BELOW` score-matrix entries the Monitor
therefore computes a logged step's quantities with one intra-op thread and gives the training
loop its thread count back when they are done (an exception included); larger steps, whose
sorts and searches gain from threads, keep them. The loss, its backward and the training step
around the Monitor are never touched. ``benchmarks/bench_monitor_threads.py`` measures
``monitor.step()`` both ways at several batch sizes
(``benchmarks/results/monitor_threads.json``).

torch gives a thread the count current at its first parallel operation: a thread of the
program whose first such operation falls inside a logged step's window starts with one.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

import torch

__all__ = ["ONE_THREAD_BELOW", "threads_for_step"]

ONE_THREAD_BELOW = 1 << 16
"""Score-matrix entries (queries x candidates) below which a CPU step is computed with one
intra-op thread (65,536: in-batch, B = 256 and smaller)."""


@contextmanager
def threads_for_step(device: torch.device, entries: int) -> Iterator[None]:
    """One intra-op thread inside the block for a small CPU step; the caller's number after it.

    Args:
        device: the device of the step's tensors (other devices are left alone: their work
            is queued kernels, not CPU threads).
        entries: the step's score-matrix entries (queries x candidates, the largest matrix).

    Example:
        >>> before = torch.get_num_threads()
        >>> with threads_for_step(torch.device("cpu"), 112 * 112):
        ...     torch.get_num_threads()
        1
        >>> torch.get_num_threads() == before
        True
    """
    threads = torch.get_num_threads()
    if device.type != "cpu" or threads == 1 or entries >= ONE_THREAD_BELOW:
        yield
        return
    torch.set_num_threads(1)
    try:
        yield
    finally:
        torch.set_num_threads(threads)
