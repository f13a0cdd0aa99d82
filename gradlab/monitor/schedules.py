"""Schedules: plain ``step -> bool`` callables, counted in optimizer steps (from 0).

The package's schedules are small objects rather than closures, so that a Monitor's options
and the callbacks holding them can be pickled (Lightning's ``ddp_spawn`` pickles callbacks);
each reads as the call that made it.
"""

from __future__ import annotations

import ast
import math
from collections.abc import Callable

from gradlab.errors import GradlabError
from gradlab.validation import check_positive_int

Schedule = Callable[[int], bool]


class Every:
    """The schedule of :func:`every`: steps 0, n, 2n, ...

    Example:
        >>> schedule = Every(4)
        >>> schedule, [s for s in range(10) if schedule(s)]
        (every(4), [0, 4, 8])
    """

    def __init__(self, n: int) -> None:
        self.n = check_positive_int("n", n)

    def __call__(self, step: int) -> bool:
        return step % self.n == 0

    def __repr__(self) -> str:
        return f"every({self.n!r})"


def every(n: int) -> Schedule:
    """Steps 0, n, 2n, ...

    Example:
        >>> from gradlab.monitor import every
        >>> [s for s in range(10) if every(4)(s)]
        [0, 4, 8]
    """
    return Every(n)


def log_spaced(base: float = 2.0) -> Schedule:
    """Steps 0, 1, 2, 4, 8, ... (rounded powers of ``base``): dense early, sparse late.

    Raises:
        GradlabError: ``base`` is not a finite number > 1 (1 or less would never grow), or is so
            close to 1 that its powers need more than 100000 steps to pass 1e12.

    Example:
        >>> from gradlab.monitor import log_spaced
        >>> [s for s in range(40) if log_spaced()(s)]
        [0, 1, 2, 4, 8, 16, 32]
    """
    return LogSpaced(base)


class LogSpaced:
    """The schedule of :func:`log_spaced`: step 0 and the rounded powers of ``base`` below 1e12.

    Pickled as its base (the steps are worked out again when it is loaded).

    Example:
        >>> schedule = LogSpaced(3)
        >>> schedule, [s for s in range(40) if schedule(s)]
        (log_spaced(3.0), [0, 1, 3, 9, 27])
    """

    def __init__(self, base: float) -> None:
        self.base = _check_base(base)
        points: set[int] = {0}
        value = 1.0
        while value < 1e12:
            points.add(round(value))
            value *= self.base
        self.points = frozenset(points)

    def __call__(self, step: int) -> bool:
        return step in self.points

    def __reduce__(self) -> tuple:
        return (type(self), (self.base,))

    def __repr__(self) -> str:
        return f"log_spaced({self.base!r})"


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
        >>> from gradlab.monitor import dense_warmup
        >>> [s for s in range(12) if dense_warmup(3, 5)(s)]
        [0, 1, 2, 5, 10]
    """
    return DenseWarmup(warmup, then_every)


class DenseWarmup:
    """The schedule of :func:`dense_warmup`: every step during ``warmup``, then every
    ``then_every``.

    Example:
        >>> schedule = DenseWarmup(3, 5)
        >>> schedule, [s for s in range(12) if schedule(s)]
        (dense_warmup(warmup=3, then_every=5), [0, 1, 2, 5, 10])
    """

    def __init__(self, warmup: int, then_every: int) -> None:
        self.warmup = check_positive_int("warmup", warmup)
        self.then_every = check_positive_int("then_every", then_every)

    def __call__(self, step: int) -> bool:
        return step < self.warmup or step % self.then_every == 0

    def __repr__(self) -> str:
        return f"dense_warmup(warmup={self.warmup!r}, then_every={self.then_every!r})"


def default_schedule(warmup: int = 10, early_every: int = 10, early: int = 200,
                     then_every: int = 50) -> Schedule:
    """The Monitor's default: every step of the first ``warmup``, every ``early_every`` up to
    ``early``, then every ``then_every``; a 30-step smoke run logs 12 points (13 with the last
    step, which :meth:`gradlab.Monitor.close` adds).

    Example:
        >>> from gradlab.monitor import default_schedule
        >>> [s for s in range(260) if default_schedule()(s)][8:]
        [8, 9, 10, 20, 30, 40, 50, 60, 70, 80, 90, 100, 110, 120, 130, 140, 150, 160, 170, 180, 190, 200, 250]
    """  # noqa: E501
    return DefaultSchedule(warmup, early_every, early, then_every)


class DefaultSchedule:
    """The schedule of :func:`default_schedule`: every step of the first ``warmup``, every
    ``early_every`` up to ``early``, then every ``then_every``.

    Example:
        >>> schedule = DefaultSchedule(2, 3, 10, 7)
        >>> schedule, [s for s in range(22) if schedule(s)]  # doctest: +NORMALIZE_WHITESPACE
        (default_schedule(warmup=2, early_every=3, early=10, then_every=7),
         [0, 1, 3, 6, 7, 9, 14, 21])
    """

    def __init__(self, warmup: int, early_every: int, early: int, then_every: int) -> None:
        self.warmup = check_positive_int("warmup", warmup)
        self.early_every = check_positive_int("early_every", early_every)
        self.early = check_positive_int("early", early)
        self.then_every = check_positive_int("then_every", then_every)

    def __call__(self, step: int) -> bool:
        return (
            step < self.warmup
            or (step < self.early and step % self.early_every == 0)
            or step % self.then_every == 0
        )

    def __repr__(self) -> str:
        return (f"default_schedule(warmup={self.warmup!r}, early_every={self.early_every!r}, "
                f"early={self.early!r}, then_every={self.then_every!r})")  # fmt: skip


def never(step: int) -> bool:
    """A quantity that is switched off.

    Example:
        >>> from gradlab.monitor import never
        >>> from gradlab.monitor import Loss
        >>> Loss(never).should_compute(0)
        False
    """
    return False


def refuse_schedule_maker(name: str, value: object) -> None:
    """Refuse one of the functions that make a schedule given where a schedule goes (``every=
    log_spaced``): called with a step it would read the step as its own argument (``base=0``)
    and fail with a message about that argument.

    Raises:
        GradlabError: ``value`` is :func:`every`, :func:`log_spaced`, :func:`dense_warmup` or
            :func:`default_schedule` itself.

    Example:
        >>> refuse_schedule_maker("every", log_spaced())  # a schedule: accepted
        >>> try:
        ...     refuse_schedule_maker("every", log_spaced)
        ... except GradlabError as error:
        ...     print(str(error)[:60])
        every must be a schedule; got the function log_spaced, which
    """
    calls = ((every, "every(n)"), (log_spaced, "log_spaced()"), (dense_warmup, "dense_warmup()"),
             (default_schedule, "default_schedule()"))  # fmt: skip
    for maker, call in calls:
        if value is maker:
            raise GradlabError(f"{name} must be a schedule; got the function {maker.__name__}, "
                               f"which makes one: call it ({call})")  # fmt: skip


def recorded_schedule(schedule: object) -> str | None:
    """``schedule`` as the run header records it (``"schedules"``): the call that makes it, for
    gradlab's schedules, whose steps :func:`schedule_from_record` works out again; None for
    any other callable (a function of your own, whose steps cannot be written down).

    Example:
        >>> recorded_schedule(dense_warmup(3, 5)), recorded_schedule(never)
        ('dense_warmup(warmup=3, then_every=5)', 'never')
        >>> recorded_schedule(lambda step: step % 3 == 0) is None
        True
    """
    if type(schedule) in (Every, LogSpaced, DenseWarmup, DefaultSchedule):
        return repr(schedule)
    return "never" if schedule is never else None


_RECORDED_MAKERS: dict[str, Callable[..., Schedule]] = {
    "every": every, "log_spaced": log_spaced, "dense_warmup": dense_warmup,
    "default_schedule": default_schedule,
}  # fmt: skip
"""The schedule makers whose calls :func:`recorded_schedule` writes."""


def schedule_from_record(recorded: object) -> Schedule | None:
    """The schedule that :func:`recorded_schedule` recorded as ``recorded``, or None when it is
    not such a record (a header of an earlier gradlab or of another program, a damaged one).
    Nothing is evaluated: only a call of one of gradlab's schedule makers with number
    arguments is read.

    Example:
        >>> schedule = schedule_from_record("default_schedule(warmup=2, early_every=3, "
        ...                                 "early=10, then_every=7)")
        >>> [step for step in range(22) if schedule(step)]
        [0, 1, 3, 6, 7, 9, 14, 21]
        >>> schedule_from_record("__import__('os')"), schedule_from_record("every(0)")
        (None, None)
    """
    if recorded == "never":
        return never
    if not isinstance(recorded, str) or len(recorded) > 200:
        return None
    try:
        call = ast.parse(recorded, mode="eval").body
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        return None
    if not (isinstance(call, ast.Call) and isinstance(call.func, ast.Name)
            and call.func.id in _RECORDED_MAKERS):  # fmt: skip
        return None
    given = [*call.args, *(keyword.value for keyword in call.keywords)]
    if any(keyword.arg is None for keyword in call.keywords) or not all(
        isinstance(value, ast.Constant) and type(value.value) in (int, float) for value in given
    ):
        return None
    args = [value.value for value in call.args]
    named = {keyword.arg: keyword.value.value for keyword in call.keywords}
    try:
        return _RECORDED_MAKERS[call.func.id](*args, **named)
    except (GradlabError, TypeError):
        return None
