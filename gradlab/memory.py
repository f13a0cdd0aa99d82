"""Memory a device can still give, and whether an error is an allocation that failed.

Long commands (``gradlab plan``, ``gradlab check-equivalence``) compare what a run will need
with :func:`available_bytes` before they allocate anything, and turn an allocation that fails
anyway (:func:`out_of_memory`) into one line naming the option to lower, instead of a
traceback or the operating system's out-of-memory killer.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator
from contextlib import contextmanager

import torch

from gradlab.errors import GradlabError

__all__ = ["available_bytes", "out_of_memory", "refuse_beyond_free", "refused_when_out_of_memory"]


def available_bytes(device: str) -> int | None:
    """Memory the device can still give: CUDA's free memory (``torch.cuda.mem_get_info``), a
    CPU's ``MemAvailable`` (Linux's ``/proc/meminfo``; else the free physical pages); None
    where neither is known.

    Example:
        >>> available_bytes("cpu") is None or available_bytes("cpu") > 0
        True
    """
    if torch.device(device).type == "cuda":
        return int(torch.cuda.mem_get_info(torch.device(device))[0])
    try:
        with open("/proc/meminfo") as handle:
            for line in handle:
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) * 1024  # kB
    except OSError:
        pass
    try:
        return os.sysconf("SC_AVPHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")
    except (AttributeError, ValueError, OSError):
        return None


def refuse_beyond_free(need: int, device: str, refusal: Callable[[str, str], str]) -> None:
    """Refuse, before any allocation, work that needs more than ``device`` has free
    (:func:`available_bytes`; nothing is refused where that is unknown).

    Args:
        need: the bytes the work needs at least.
        device: where it would allocate them.
        refusal: ``(need, free) -> message``, both sizes given in GiB to one decimal.

    Raises:
        GradlabError: ``refusal``'s message, when ``need`` exceeds the free memory.

    Example:
        >>> try:
        ...     refuse_beyond_free(2**80, "cpu", lambda need, free: f"{need} GiB > {free} GiB")
        ... except GradlabError as error:
        ...     print(str(error).split(" > ")[0])
        1125899906842624.0 GiB
    """
    free = available_bytes(device)
    if free is not None and need > free:
        raise GradlabError(refusal(f"{need / 2**30:.1f}", f"{free / 2**30:.1f}"))


def out_of_memory(error: BaseException) -> bool:
    """Whether ``error`` is an allocation that failed (CUDA's or the CPU allocator's).

    Example:
        >>> out_of_memory(MemoryError()), out_of_memory(RuntimeError("shape mismatch"))
        (True, False)
    """
    failed = (torch.cuda.OutOfMemoryError, MemoryError)  # torch.OutOfMemoryError from 2.5 on
    return isinstance(error, failed) or (
        isinstance(error, RuntimeError) and "can't allocate memory" in str(error)
    )


@contextmanager
def refused_when_out_of_memory(message: str) -> Iterator[None]:
    """Turn an allocation that fails inside the block (:func:`out_of_memory`) into a
    :class:`GradlabError` with ``message`` (one line for a command, no traceback); any other
    error passes unchanged.

    Example:
        >>> try:
        ...     with refused_when_out_of_memory("too large; try a smaller --batch-size"):
        ...         raise MemoryError()
        ... except GradlabError as error:
        ...     print(error)
        too large; try a smaller --batch-size
    """
    try:
        yield
    except (RuntimeError, MemoryError) as error:
        if not out_of_memory(error):
            raise
        raise GradlabError(message) from None
