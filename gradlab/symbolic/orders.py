"""Orders of growth checked against counted operations, log factors included.

A printed cost ``O(g)`` is checked against the operations a transcribed procedure actually
performs on a grid of sizes. A spread of ``count / g`` alone cannot see a log factor over a
short grid (from M = 8 to 512, ``log M`` grows by a factor 3), so :func:`order_check` asks a
sharper question: which of the candidate orders ``g``, ``g * v^p`` (``p`` in :data:`POWERS`) and
``g * log(v)^q`` (``q`` in :data:`LOG_POWERS`), for each grid variable ``v``, follows the counts
best on ``v``'s last step, from its second-largest to its largest grid value, where lower-order
terms weigh least. The printed order holds only if it is that best candidate on every variable
(no power and no log factor of any variable fits better) and ``count / g`` stays within a factor
:data:`ORDER_SPREAD` over the whole grid.

The criterion, on one step from ``v0`` to ``v1`` with the other variables fixed: with
``r = count / g``, the candidate ``(p, q)`` leaves the residual
``ln(r1 / r0) - p ln(v1 / v0) - q ln(ln v1 / ln v0)`` (the change of ``count / candidate`` over
the step, in log); the best candidate has the smallest ``|residual|`` (the simpler one wins a
tie). Steps keep the other variables fixed; a variable that never moves alone (a total ``M``
beside the two counts it adds up) is stepped with as few others moving as the grid has.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Mapping

import sympy as sp

from gradlab.errors import GradlabError
from gradlab.symbolic.claims import Verdict, decide, point_text

ORDER_SPREAD = 3.0
"""``count / order`` may vary by at most this factor over a grid (an order is tight, up to a
constant)."""

POWERS = (-1, 1)
"""The powers ``p`` of a grid variable that the candidate orders ``g v^p`` try."""

LOG_POWERS = (-2, -1, 1, 2)
"""The powers ``q`` of ``log v`` that the candidate orders ``g log^q v`` try."""

CANDIDATES = ((0, 0), *((a, 0) for a in POWERS), *((0, b) for b in LOG_POWERS))
"""``(p, q)`` of every candidate order ``g v^p log^q v``: ``g`` itself, one power of ``v`` more or
less, or up to two log factors more or less (not both: a power and a log factor together
can mimic a small change, e.g. ``v^-1 log^2 v`` on a step from 4 to 32)."""


def _grid(measured: Mapping) -> tuple[list[str], list[tuple[dict, float]]]:
    """The variable names and ``(point, count)`` rows of a measured grid, validated."""
    if not isinstance(measured, Mapping) or len(measured) < 2:
        raise GradlabError("measured must map at least two grid points to counts, e.g. {(('M', "
                           f"8),): 64, (('M', 64),): 4096}}; got {measured!r}")  # fmt: skip
    rows = []
    names = None
    for point, count in measured.items():
        values = dict(point)
        if names is None:
            names = sorted(values)
        if sorted(values) != names:
            raise GradlabError(f"every grid point of measured must name the variables {names}; "
                               f"got {point!r}")  # fmt: skip
        if any(not isinstance(v, (int, float)) or isinstance(v, bool) or not v >= 1
               for v in values.values()):  # fmt: skip
            raise GradlabError(f"grid values in measured must be numbers >= 1; got {point!r}")
        number = isinstance(count, (int, float)) and not isinstance(count, bool)
        try:
            value = float(count) if number else math.nan
        except OverflowError:  # an int beyond the largest float
            value = math.inf
        if not 0 < value < math.inf:
            raise GradlabError(f"counts in measured must be positive finite numbers; got {count!r} "
                               f"at {point!r}")  # fmt: skip
        rows.append((values, value))
    return names, rows


def _last_steps(names: list[str], rows: list[tuple[dict, float]]) -> dict[str, list[tuple]]:
    """Per variable, the row pairs of its last step: its second-largest -> largest value, with
    as few other variables moving as the grid allows (none, unless the variable never moves
    alone, like ``M = p + n``)."""
    steps = {}
    for name in names:
        values = sorted({point[name] for point, _ in rows})
        if len(values) < 2:
            continue
        low, high = values[-2], values[-1]
        moved = {}
        for (i, (first, _)), (j, (second, _)) in itertools.permutations(enumerate(rows), 2):
            if first[name] == low and second[name] == high:
                moved[(i, j)] = sum(first[k] != second[k] for k in names if k != name)
        fewest = min(moved.values())
        steps[name] = [pair for pair, count in moved.items() if count == fewest]
    return steps


def _moved(name: str, before: float, after: float) -> str:
    return f"{name} = {before}" + (f" -> {after}" if after != before else "")


def _best_candidate(change: float, low: float, high: float) -> tuple[int, int, float]:
    """``(p, q, |residual|)`` of the candidate ``v^p log^q v`` that best explains ``change``."""
    span = math.log(high / low)
    log_span = math.log(math.log(high) / math.log(low)) if low > 1 else math.nan
    best = None
    for a, b in CANDIDATES:
        if b and not math.isfinite(log_span):
            continue  # log v is 0 at v = 1: no log candidate on this step
        residual = abs(change - a * span - (b * log_span if b else 0.0))
        key = (residual, abs(a) + abs(b))
        if best is None or key < best[0]:
            best = (key, a, b)
    return best[1], best[2], best[0][0]


def order_check(order: sp.Expr, measured: Mapping) -> Verdict:
    """Is ``order`` the order of growth of counted operations (log factors told apart)?

    ``holds`` if, on the last step of every grid variable, ``order`` is the best of the
    candidate orders ``order * v^p`` and ``order * log(v)^q`` (module docstring: the criterion), and
    ``count / order`` stays within a factor :data:`ORDER_SPREAD` over the grid; else
    ``fails``, naming the step and the candidate that fits better. An order that is not
    positive and finite at every grid point fails.

    Args:
        order: a SymPy expression in (some of) the grid's variables, e.g. ``M**2``, or an
            ``O(...)`` of one (SymPy's ``Order``, which absorbs constant factors).
        measured: grid point -> count; a grid point is a tuple of ``(name, value)`` pairs with
            the same names at every point, values >= 1 (``(("M", 8),)``), counts positive.

    Returns:
        The verdict, its detail giving the spread and, on failure, the better candidate.

    Raises:
        GradlabError: if ``measured`` is not such a grid, ``order`` has a symbol the grid
            does not name or cannot be evaluated in floats (a function Python's ``math``
            lacks), or a count and the order are too far apart for a float ratio.

    Example:
        >>> import sympy as sp
        >>> M = sp.Symbol("M", positive=True)
        >>> counts = {(("M", m),): m * m for m in (8, 64, 512)}
        >>> order_check(M**2, counts).verdict, order_check(M**2 * sp.log(M), counts).verdict
        ('holds', 'fails')
    """
    names, rows = _grid(measured)
    if not isinstance(order, sp.Expr):
        raise GradlabError(f"order must be a SymPy expression; got {order!r}")
    if isinstance(order, sp.Order):  # O(g): a magnitude; SymPy writes log M as log(1/M) in it
        order = sp.expand_log(order.expr, force=True)
        order = -order if order.could_extract_minus_sign() else order
    symbols = sorted(order.free_symbols, key=str)
    unknown = [str(s) for s in symbols if str(s) not in names]
    if unknown:
        raise GradlabError(f"order {order} uses {unknown}, which the grid does not name ({names})")
    cost = sp.lambdify(symbols, order, "math")
    ratios = []
    for point, count in rows:
        try:
            value = complex(cost(*(point[str(s)] for s in symbols)))
        except OverflowError:  # math.exp(1000), or an int beyond the largest float
            value = complex(math.inf)
        except (ZeroDivisionError, ValueError):
            value = complex(math.nan)
        except (NameError, TypeError, AttributeError) as error:  # e.g. a function math lacks
            raise GradlabError(f"order {order} cannot be evaluated in floats at "
                               f"{point_text(point)} ({type(error).__name__}: {error})"
                               ) from error  # fmt: skip
        if value.imag != 0 or not 0 < value.real < math.inf:
            shown = value.real if value.imag == 0 else value
            problem = (f"{order} is {shown} at {point_text(point)}: not a cost (positive, "
                       "finite) on the grid.")  # fmt: skip
            return decide(not problem, "", problem)
        ratio = count / value.real
        if not 0 < ratio < math.inf:
            raise GradlabError(f"count / order is {ratio} at {point_text(point)} (count "
                               f"{count}, {order} = {value.real}): too far apart for floats"
                               )  # fmt: skip
        ratios.append(ratio)
    spread = max(ratios) / min(ratios)
    grid = f"{len(rows)} grid points"
    problems = []
    if spread > ORDER_SPREAD:
        problems.append(f"counted operations / {order} varies by a factor {spread:.3g} over {grid}")
    steps = _last_steps(names, rows)
    for name, pairs in steps.items():
        for i, j in pairs:
            low, high = rows[i][0][name], rows[j][0][name]
            a, b, _ = _best_candidate(math.log(ratios[j] / ratios[i]), low, high)
            if (a, b) != (0, 0):
                v = next((s for s in symbols if str(s) == name), sp.Symbol(name, positive=True))
                better = sp.powsimp(order * v**a * sp.log(v) ** b)
                first, second = rows[i][0], rows[j][0]
                where = ", ".join(_moved(k, first[k], second[k]) for k in names if k != name)
                problems.append(f"from {name} = {low} to {high}{f' ({where})' if where else ''} "
                                f"count / {order} changes by a factor {ratios[j] / ratios[i]:.3g}, "
                                f"which {better} follows better")  # fmt: skip
                break
    stepped = ", ".join(f"{name} {sorted({p[name] for p, _ in rows})[-2]} -> "
                        f"{sorted({p[name] for p, _ in rows})[-1]}" for name in steps)  # fmt: skip
    return decide(
        not problems,
        f"counted operations / {order} stays within a factor {spread:.2f} over {grid}, and on the "
        f"last step of each variable ({stepped}) no order {order} * v^p (p in {list(POWERS)}) or "
        f"{order} * log(v)^q (q in {list(LOG_POWERS)}) follows the counts better.",
        "; ".join(problems) + ": not the order of the count.",
    )
