"""A deadline for code that could loop or wait forever: the test fails instead of hanging."""

from __future__ import annotations

import signal
from collections.abc import Iterator
from contextlib import contextmanager


class DeadlineError(Exception):
    """Raised in the main thread when the code under test has not returned in time."""


@contextmanager
def deadline(seconds: float, message: str) -> Iterator[None]:
    """Raise :class:`DeadlineError` (``message``) in the main thread after ``seconds`` of wall
    time (a ``SIGALRM`` timer; nothing where the platform has none, as on Windows). A guard
    against hanging, not a check of speed: the deadline is far above the time the code takes."""
    if not hasattr(signal, "setitimer"):
        yield
        return

    def expire(signum, frame):
        raise DeadlineError(message)

    previous = signal.signal(signal.SIGALRM, expire)
    signal.setitimer(signal.ITIMER_REAL, seconds)
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)
