"""Shared settings of the studies: CPU threads, seeds."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator

import torch


@contextlib.contextmanager
def study_threads(device: str, threads: int = 1) -> Iterator[None]:
    """Run a study's small CPU kernels on ``threads`` intra-op threads, then restore the setting.

    The studies' networks are tiny: on a shared 2-core machine, torch's default of one thread
    per core made a training step 5-70x slower (measured: 0.01 s with one thread, 0.23-0.69 s
    with two while other processes ran). On other devices this does nothing.

    Example:
        >>> before = torch.get_num_threads()
        >>> with study_threads("cpu"):
        ...     torch.get_num_threads()
        1
        >>> torch.get_num_threads() == before
        True
    """
    if not str(device).startswith("cpu"):
        yield
        return
    before = torch.get_num_threads()
    torch.set_num_threads(threads)
    try:
        yield
    finally:
        torch.set_num_threads(before)
