"""Schedules: plain ``step -> bool`` callables, counted in optimizer steps (from 0)."""

from __future__ import annotations

from collections.abc import Callable

from gradlab._validation import check_positive_int

Schedule = Callable[[int], bool]


def every(n: int) -> Schedule:
    """Steps 0, n, 2n, ...

    Example:
        >>> [s for s in range(10) if every(4)(s)]
        [0, 4, 8]
    """
    n = check_positive_int("n", n)
    return lambda step: step % n == 0


def log_spaced(base: float = 2.0) -> Schedule:
    """Steps 0, 1, 2, 4, 8, ... (rounded powers of ``base``): dense early, sparse late.

    Example:
        >>> [s for s in range(40) if log_spaced()(s)]
        [0, 1, 2, 4, 8, 16, 32]
    """
    points: set[int] = {0}
    value = 1.0
    while value < 1e12:
        points.add(round(value))
        value *= base
    return lambda step: step in points


def dense_warmup(warmup: int = 100, then_every: int = 50) -> Schedule:
    """Every step during ``warmup`` steps, then every ``then_every``.

    Example:
        >>> [s for s in range(12) if dense_warmup(3, 5)(s)]
        [0, 1, 2, 5, 10]
    """
    warmup = check_positive_int("warmup", warmup)
    then_every = check_positive_int("then_every", then_every)
    return lambda step: step < warmup or step % then_every == 0


def never(step: int) -> bool:
    """A quantity that is switched off."""
    return False
