"""Schedules: plain ``step -> bool`` callables, counted in optimizer steps (from 0)."""

from __future__ import annotations

import math
from collections.abc import Callable

from gradlab.errors import GradlabError
from gradlab.validation import check_positive_int

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

    Raises:
        GradlabError: ``base`` is not a finite number > 1 (1 or less would never grow), or is so
            close to 1 that its powers need more than 100000 steps to pass 1e12.

    Example:
        >>> [s for s in range(40) if log_spaced()(s)]
        [0, 1, 2, 4, 8, 16, 32]
    """
    base = _check_base(base)
    points: set[int] = {0}
    value = 1.0
    while value < 1e12:
        points.add(round(value))
        value *= base
    return lambda step: step in points


_MAX_POINTS = 100_000


def _check_base(base: object) -> float:
    """``base`` as a float if it is a finite real number > 1 whose powers reach 1e12 in at most
    ``_MAX_POINTS`` steps (``base`` >= about 1.00028); else a :class:`GradlabError`."""
    if isinstance(base, bool) or not isinstance(base, (int, float)) or not math.isfinite(base) \
            or base <= 1:  # fmt: skip
        raise GradlabError(f"base must be a finite number > 1; got {base!r}")
    if math.log(1e12) / math.log(base) > _MAX_POINTS:
        raise GradlabError(
            f"base must be a finite number > 1 far enough from 1 that its powers reach 1e12 in "
            f"at most {_MAX_POINTS} steps (base >= {math.exp(math.log(1e12) / _MAX_POINTS):.5f}); "
            f"got {base!r} (for every step, use every(1))"
        )
    return float(base)


def dense_warmup(warmup: int = 100, then_every: int = 50) -> Schedule:
    """Every step during ``warmup`` steps, then every ``then_every``.

    Example:
        >>> [s for s in range(12) if dense_warmup(3, 5)(s)]
        [0, 1, 2, 5, 10]
    """
    warmup = check_positive_int("warmup", warmup)
    then_every = check_positive_int("then_every", then_every)
    return lambda step: step < warmup or step % then_every == 0


def default_schedule(warmup: int = 10, early_every: int = 10, early: int = 200,
                     then_every: int = 50) -> Schedule:
    """The Monitor's default: every step of the first ``warmup``, every ``early_every`` up to
    ``early``, then every ``then_every``; a 30-step smoke run logs 12 points (13 with the last
    step, which :meth:`gradlab.Monitor.close` adds).

    Example:
        >>> [s for s in range(260) if default_schedule()(s)][8:]
        [8, 9, 10, 20, 30, 40, 50, 60, 70, 80, 90, 100, 110, 120, 130, 140, 150, 160, 170, 180, 190, 200, 250]
    """  # noqa: E501
    warmup = check_positive_int("warmup", warmup)
    early_every = check_positive_int("early_every", early_every)
    early = check_positive_int("early", early)
    then_every = check_positive_int("then_every", then_every)
    return lambda step: (
        step < warmup
        or (step < early and step % early_every == 0)
        or step % then_every == 0
    )


def never(step: int) -> bool:
    """A quantity that is switched off.

    Example:
        >>> from gradlab.monitor import Loss
        >>> Loss(never).should_compute(0)
        False
    """
    return False
