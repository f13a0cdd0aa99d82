"""Audit of Hashing as Tie-Aware Learning to Rank (He et al. 2018, suppl.), Eq. 1-21, 26, 34, the
remarks of Sec. B-C (no ties, the tightened Eq. 11), footnote 1 and the table of Sec. D.

The printed summands and closed forms are SymPy expressions; the procedures that use them
(sums over ties, over bins) lambdify them, and the truth is brute force over every tie-consistent
ordering, exact rational sums, or mpmath. Approximations are held to derived bounds: the
trapezoid bound of a convex discount (:func:`discount_tolerance`) per bin, the next
Euler-Maclaurin term, the error's own size over bins whose ratio ``n_d / N_(d-1)`` varies over
decades. Eq. 22-37 and "N+ is unaffected by the relaxation" are in :mod:`minibatch_claims`.
"""

from __future__ import annotations

import cmath
import functools
import itertools
import math
from collections.abc import Callable, Sequence
from fractions import Fraction
from typing import Any

import mpmath
import numpy as np
import sympy as sp

from gradlab.symbolic.claims import (
    PRINTED_RESULTS_ONLY,
    Claim,
    Form,
    Verdict,
    all_hold,
    decide,
    mutant,
    negated,
    numeric_agreement,
    scaled,
    substituted,
    symbolic_equality,
    undecided,
    with_parameters,
)

SEED = "003_9ae9ec3ce43e30ad"

n, n_pos, N_prev, N_pos_prev, t, a, b = sp.symbols("n n_pos N_prev N_pos_prev t a b", positive=True)
N_plus, j_, N_d, c, c_pos, C_prev, C_pos_prev = sp.symbols(
    "N_plus j N_d c c_pos C_prev C_pos_prev", positive=True
)
C_d = sp.Symbol("C_d", positive=True)
share = (n_pos - 1) / (n - 1)
log2 = sp.log(2)


# --- transcriptions that take the printed pieces -------------------------------------------


def tie_groups(scores: Sequence[float]) -> list[list[int]]:
    """The ties of a ranking: item indices grouped by equal score, highest score first.

    Args:
        scores: one score per item.

    Returns:
        One list of indices per distinct score, each in item order.

    Example:
        >>> tie_groups([1, 3, 1, 2, 3])
        [[1, 4], [3], [0, 2]]
    """
    groups = {}
    for index, score in enumerate(scores):
        groups.setdefault(score, []).append(index)
    return [groups[s] for s in sorted(groups, reverse=True)]


def tie_ap(summand: sp.Expr, scores: Sequence[float], relevant: Sequence[bool],
           cutoff: int) -> float:  # fmt: skip
    """Sum of the printed per-item summand over the ties (He et al., 2018, Eq. 1-3), items up to
    ``cutoff``: the tie-aware AP@k that a summand in ``n_pos, n, N_pos_prev, N_prev, j_, N_plus``
    gives, evaluated in float64 ``math``.

    In a tie of one item, ``(n+ - 1)/(n - 1)`` is 0/0 (times ``j - N_prev - 1 = 0``); there the
    summand is the mean of its values at ``n = 1 -+ 1e-7`` (error O(1e-14), the limit).

    Example:
        >>> precision = (N_pos_prev + (j_ - N_prev - 1) * share + 1) / j_  # tie-aware, Eq. 2
        >>> round(tie_ap(n_pos / n * precision / N_plus, (1, 1, 0), [True, False, True], 3), 12)
        0.708333333333
    """
    return _tie_ap_of(summand)(scores, relevant, cutoff)


def _tie_ap_of(summand: sp.Expr) -> Callable[[Sequence[float], Sequence[bool], int], float]:
    """:func:`tie_ap` with the summand lambdified once (a check sums it over many cases)."""
    raw = sp.lambdify((n_pos, n, N_pos_prev, N_prev, j_, N_plus), summand, "math")

    def function(pos, size, *rest):
        if size != 1:
            return raw(pos, size, *rest)
        return (raw(pos, 1 - 1e-7, *rest) + raw(pos, 1 + 1e-7, *rest)) / 2

    def summed(scores, relevant, cutoff):
        total, position, positives_before = 0.0, 0, 0
        plus = sum(relevant)
        for group in tie_groups(scores):
            size, pos = len(group), sum(relevant[i] for i in group)
            for j in range(position + 1, min(position + size, cutoff) + 1):
                total += function(pos, size, positives_before, position, j, plus)
            position += size
            positives_before += pos
        return total

    return summed


def brute_force_tie_average(metric: Callable[[tuple[int, ...], Any, int], float],
                            scores: Sequence[float], labels: Any, cutoff: int) -> float:  # fmt: skip
    """The mean of ``metric(order, labels, cutoff)`` over every tie-consistent order (brute force).

    An order is tie-consistent when it ranks the items by descending score, ties in any order;
    every permutation is tried (for a handful of items only). This is the tie-aware truth of
    He et al. (2018), Eq. 1, that the printed tie-wise sums are checked against.

    Args:
        metric: ``metric(order, labels, cutoff)``, e.g. :func:`ap_at` or :func:`dcg_at`.
        scores: one score per item.
        labels: passed to ``metric`` (relevance or gains).
        cutoff: passed to ``metric``.

    Example:
        >>> brute_force_tie_average(ap_at, (1, 1, 0), [True, False, True], 3)  # 17/24
        0.7083333333333333
    """
    values = []
    for order in itertools.permutations(range(len(scores))):
        if all(scores[order[k]] >= scores[order[k + 1]] for k in range(len(order) - 1)):
            values.append(metric(order, labels, cutoff))
    return sum(values) / len(values)


def ap_at(order: Sequence[int], relevant: Sequence[bool], cutoff: int) -> float:
    """AP@k of one order: precision at each relevant item's rank up to ``cutoff``, over ``N+``.

    Example:
        >>> ap_at((2, 0, 1, 3), [True, False, False, True], 4)  # hits at ranks 2 and 4
        0.5
    """
    hits, total = 0, 0.0
    for rank, item in enumerate(order, start=1):
        if relevant[item]:
            hits += 1
            if rank <= cutoff:
                total += hits / rank
    return total / sum(relevant)


def dcg_at(order: Sequence[int], gains: Sequence[float], cutoff: int) -> float:
    """DCG@k of one order: ``sum_(rank <= cutoff) gain / log2(rank + 1)``.

    Example:
        >>> dcg_at((1, 0), (3, 1), 2)  # gain 1 at rank 1, gain 3 at rank 2
        2.8927892607143724
    """
    return sum(gains[item] / math.log2(rank + 1) for rank, item in enumerate(order, start=1)
               if rank <= cutoff)  # fmt: skip


@functools.lru_cache(maxsize=8)
def tie_cases(seed: int = 0, count: int = 10, size: int = 6) -> tuple[tuple, ...]:
    """The tie-aware checks' random cases, each with its brute-force truths.

    Per case, drawn from ``numpy.random.default_rng(seed)`` in this order: scores in {0, 1, 2}
    (ties), relevance (item 0 always relevant), gains in {0, 1, 2}, a cutoff in 1..size.

    Returns:
        ``count`` tuples ``(scores, relevant, gains, cutoff, AP@cutoff, AP, DCG@cutoff, DCG)``,
        the last four by :func:`brute_force_tie_average`.

    Example:
        >>> case = tie_cases(0)[0]
        >>> case[4] == brute_force_tie_average(ap_at, case[0], case[1], case[3])
        True
    """
    rng = np.random.default_rng(seed)
    cases = []
    for _ in range(count):
        scores = tuple(rng.integers(0, 3, size).tolist())
        relevant = [bool(v) for v in rng.random(size) < 0.5]
        relevant[0] = True
        gains = tuple(rng.integers(0, 3, size).tolist())
        cutoff = int(rng.integers(1, size + 1))
        cases.append((scores, tuple(relevant), gains, cutoff,
                      brute_force_tie_average(ap_at, scores, relevant, cutoff),
                      brute_force_tie_average(ap_at, scores, relevant, size),
                      brute_force_tie_average(dcg_at, scores, gains, cutoff),
                      brute_force_tie_average(dcg_at, scores, gains, size)))  # fmt: skip
    return tuple(cases)


gain_sum, level_sum, disc = sp.symbols("sum_G sum_v_G_n_dv sum_D")
jj = sp.Symbol("j", positive=True, integer=True)
t_tie, t_next, k_cut = sp.symbols("t_d t_(d+1) k", integer=True, nonnegative=True)
"""The tie vector's ``t_d`` (ranks before tie d) and ``t_(d+1)``, and the cutoff ``k`` (Eq. 4)."""
N_before, N_through = sp.symbols("N_(d-1) N_d", integer=True, nonnegative=True)
"""``t_d = N_(d-1)`` and ``t_(d+1) = N_d`` after Eq. 5's substitution (k = |S|)."""


def tie_dcg(form: Form, scores: Sequence[float], gains: Sequence[float], cutoff: int) -> float:
    """Sum over ties of the printed tie value, the discount ``D(j)`` summed over the printed ranks.

    Args:
        form: pieces ``"tie value"`` (in ``gain_sum, level_sum, n, disc``), ``"D(j)"`` (in
            ``jj``) and the discount sum's ranks ``"first rank"`` and ``"last rank"`` (in
            ``t_tie, t_next, k_cut`` or ``N_before, N_through``), as He et al. (2018), Eq. 4-7
            print them: ``sum_(j=t_d+1)^(min(t_(d+1), k)) D(j)``.
        scores, gains, cutoff: one ranking with ties, its gains, and k of DCG@k.

    Example:
        >>> pieces = {"tie value": gain_sum / n * disc, "D(j)": 1 / sp.log(jj + 1, 2),
        ...           "first rank": t_tie + 1, "last rank": sp.Min(t_next, k_cut)}
        >>> round(tie_dcg(Form(pieces), (1, 1), (3, 1), 2), 12)  # (3 + 1) / 2 * (1 + 1/log2 3)
        3.261859507143
    """
    return _tie_dcg_of(form)(scores, gains, cutoff)


def _tie_dcg_of(form: Form) -> Callable[[Sequence[float], Sequence[float], int], float]:
    """:func:`tie_dcg` with the pieces lambdified once (a check sums them over many cases)."""
    discount = sp.lambdify(jj, form.value["D(j)"], "math")
    value = sp.lambdify((gain_sum, level_sum, n, disc), form.value["tie value"], "math")
    ranks = (t_tie, t_next, k_cut, N_before, N_through)
    first = sp.lambdify(ranks, form.value["first rank"], "math")
    last = sp.lambdify(ranks, form.value["last rank"], "math")

    def summed(scores, gains, cutoff):
        total, position = 0.0, 0
        for group in tie_groups(scores):
            levels = {}
            for i in group:
                levels[gains[i]] = levels.get(gains[i], 0) + 1
            by_level = sum(g * count for g, count in levels.items())
            end = position + len(group)
            bounds = (position, end, cutoff, position, end)
            discounts = sum(discount(k) for k in range(int(first(*bounds)), int(last(*bounds)) + 1))
            total += value(sum(gains[i] for i in group), by_level, len(group), discounts)
            position = end
        return total

    return summed


# --- checks ----------------------------------------------------------------------------------


def _form_errors_fail(check: Callable[[Form], Verdict]) -> Callable[[Form], Verdict]:
    """A form that cannot be evaluated on a check's cases (a log of a negative number, a division
    by zero, a complex value, an infinity SymPy cannot print as code) fails that check, its detail
    naming the error; the references the checks compare with are defined on every case, so the
    error is the form's."""

    @functools.wraps(check)
    def guarded(form: Form) -> Verdict:
        try:
            return check(form)
        except (ArithmeticError, ValueError, TypeError, KeyError) as error:  # Key: zoo in lambdify
            failure = f"{type(error).__name__}: {error}"
        # no value at a case where the references have one: undefined there
        return decide(not failure, "", f"the form does not evaluate on the check's cases ({failure}).",
                      failure="undefined")

    return guarded


@_form_errors_fail
def check_ap_at_k(form: Form) -> Verdict:
    summed = _tie_ap_of(form.value)
    return numeric_agreement(lambda c: summed(c[0], c[1], c[3]), lambda c: c[4],
                             tie_cases(), tolerance=1e-12)  # fmt: skip


@_form_errors_fail
def check_ap_full(form: Form) -> Verdict:
    summed = _tie_ap_of(form.value)
    return numeric_agreement(lambda c: summed(c[0], c[1], len(c[0])), lambda c: c[5],
                             tie_cases(1), tolerance=1e-12)  # fmt: skip


@_form_errors_fail
def check_dcg_at_k(form: Form) -> Verdict:
    summed = _tie_dcg_of(form)
    return numeric_agreement(lambda c: summed(c[0], c[2], c[3]), lambda c: c[6],
                             tie_cases(2), tolerance=1e-12)  # fmt: skip


@_form_errors_fail
def check_dcg_full(form: Form) -> Verdict:
    summed = _tie_dcg_of(form)
    return numeric_agreement(lambda c: summed(c[0], c[2], len(c[0])), lambda c: c[7],
                             tie_cases(3), tolerance=1e-12)  # fmt: skip


affinities = sp.symbols("a1:5", integer=True)
"""The affinity levels ``A(j)`` of a tie's four items (Eq. 6's check)."""
v_level = sp.Symbol("v", integer=True)
"""The affinity level ``v`` that Eq. 6 sums over."""
gain = sp.Function("G")
"""The gain ``G`` of an affinity level (any function; the check takes ``G(v) = v^2 + 1``)."""


@_form_errors_fail
def check_level_regrouping(form: Form) -> Verdict:
    """Eq. 6: sum_j G(A(j)) over a tie of 4 = sum_v G(v) n_(d,v), every affinity assignment."""
    levels = (0, 1, 2)
    worst = 0
    concrete = form.value.replace(gain, lambda u: u**2 + 1).replace(
        sp.KroneckerDelta, lambda x, y: sp.Piecewise((1, sp.Eq(x, y)), (0, True)))
    summand = sp.lambdify((*affinities, v_level), concrete, "math")
    for assignment in itertools.product(levels, repeat=4):
        printed = sum(summand(*assignment, v) for v in levels)
        truth = sum(u**2 + 1 for u in assignment)
        worst = max(worst, abs(int(printed) - truth))
    return decide(worst == 0, "sum_v G(v) n_(d,v) = sum_(j in R^(d)) G(A(j)) for all 81 assignments "
                  "of 3 levels to a tie of 4 (G(v) = v^2 + 1).",
                  f"differs by up to {worst} over the 81 assignments.")  # fmt: skip


@_form_errors_fail
def check_split(form: Form) -> Verdict:
    beta = (N_pos_prev + (t - N_prev - 1) * share + 1) / t
    return symbolic_equality(form.value, beta, [n, n_pos, N_prev, N_pos_prev, t])


@_form_errors_fail
def check_eq9(form: Form) -> Verdict:
    beta = sp.Symbol("beta_d(t)")
    eq3_summand = n_pos / n * (N_pos_prev + (t - N_prev - 1) * share + 1) / t / N_plus
    printed = form.value.subs(beta, (N_pos_prev + (t - N_prev - 1) * share + 1) / t)
    return symbolic_equality(printed, eq3_summand, [n, n_pos, N_prev, N_pos_prev, t, N_plus])


A_s, B_s = sp.symbols("A B")


@_form_errors_fail
def check_harmonic_closed_form(form: Form) -> Verdict:
    k = sp.Symbol("k", integer=True, positive=True)
    verdicts = []
    for before, size in ((0, 1), (3, 4), (7, 2), (10, 11)):
        summed = sp.summation(A_s + B_s / k, (k, before + 1, before + size))
        printed = form.value.subs({N_prev: before, n: size, N_d: before + size})
        verdicts.append(symbolic_equality(printed, summed, [A_s, B_s]))
    return all_hold(verdicts, "sum_(t=N_(d-1)+1)^(N_d) (A + B/t) in exact rationals for "
                    "(N_(d-1), n_d) in (0,1), (3,4), (7,2), (10,11): ")  # fmt: skip


def harmonic_partial_sum(before: int, size: int) -> float:
    """``H(before + size) - H(before) = sum_(k = before + 1)^(before + size) 1/k`` (mpmath).

    Example:
        >>> round(harmonic_partial_sum(1, 2), 12)  # 1/2 + 1/3
        0.833333333333
    """
    return float(mpmath.harmonic(before + size) - mpmath.harmonic(before))


def log_gap_tolerance(before: int, size: int) -> float:
    """How far Eq. 11's approximation of ``H(N_d) - H(N_(d-1))`` may be off on one bin.

    For ``N_(d-1) >= 1`` the trapezoid bound: ``1/x`` is convex, so on each cell
    ``0 < ln(t / (t-1)) - 1/t <= (1/(t-1) - 1/t) / 2``, and summed over ``t = N_(d-1)+1..N_d``
    this telescopes to ``0 < ln(N_d / N_(d-1)) - (H(N_d) - H(N_(d-1))) <= (1/N_(d-1) - 1/N_d) / 2``:
    the logarithm's own error, Eq. 20's order with the constant 1 (He et al., 2018, suppl.). At
    the first bin (``N_(d-1) = 0``) that bound is infinite; there the tolerance is 1/2, its
    supremum over every later bin (``N_(d-1) = 1``, ``N_d -> oo``).

    Args:
        before: ``N_(d-1)``, the items ranked before the bin (>= 0).
        size: ``n_d``, the items in the bin (>= 1).

    Example:
        >>> log_gap_tolerance(1, 1), log_gap_tolerance(0, 5)  # (1 - 1/2) / 2; the first bin
        (0.25, 0.5)
    """
    if before == 0:
        return 0.5
    return (1 / before - 1 / (before + size)) / 2


def discount_tolerance(discount: Callable[[float], float], before: int, size: int) -> float:
    """How far a relaxed discount sum may be off on one bin: :func:`log_gap_tolerance` for any
    convex decreasing discount ``D`` (``1/t`` of Eq. 11, ``1/log2(t+1)`` of Eq. 14).

    The trapezoid bound ``0 <= int_(N_(d-1))^(N_d) D - sum_(t=N_(d-1)+1)^(N_d) D(t) <=
    (D(N_(d-1)) - D(N_d)) / 2`` for ``N_(d-1) >= 1``; at the first bin ``D(1) / 2``, its supremum
    over the later bins.

    Example:
        >>> discount_tolerance(lambda t: 1 / t, 1, 1) == log_gap_tolerance(1, 1)
        True
        >>> round(discount_tolerance(lambda t: 1 / math.log2(t + 1), 0, 3), 6)  # D(1)/2 = 1/2
        0.5
    """
    if before == 0:
        return discount(1) / 2
    return (discount(before) - discount(before + size)) / 2


LOG_GAP_BINS = tuple((x, y) for x in (0, 1, 2, 5, 20, 100, 1000) for y in (1, 2, 5, 50, 1000))
"""The bins ``(N_(d-1), n_d)`` on which Eq. 11's approximation is checked: both the position
and the ratio ``n_d / N_(d-1)`` vary over decades."""


def _log_gap_errors(form: Form) -> dict[tuple[int, int], tuple[float, float, bool]]:
    """Per bin of :data:`LOG_GAP_BINS`: (|approximation - harmonic gap|, tolerance, whether the
    approximation is a finite number there)."""
    approx = sp.lambdify((N_prev, N_d), form.value, "mpmath")
    errors = {}
    for before, size in LOG_GAP_BINS:
        try:
            value = complex(approx(mpmath.mpf(before), mpmath.mpf(before + size)))
        except (ZeroDivisionError, ValueError):
            value = complex(math.inf)
        error = abs(value - harmonic_partial_sum(before, size)) if value.imag == 0 else math.inf
        errors[(before, size)] = (error, log_gap_tolerance(before, size), cmath.isfinite(value))
    return errors


@_form_errors_fail
def check_log_approximation(form: Form) -> Verdict:
    """Eq. 11 on every bin, the first (N_(d-1) = 0) included, within :func:`log_gap_tolerance`.

    Example:
        >>> check_log_approximation(Form(sp.harmonic(N_d) - sp.harmonic(N_prev))).verdict
        'holds'
    """
    errors = _log_gap_errors(form)
    over = {bin_: e for bin_, (e, tol, _) in errors.items() if not e <= tol}
    worst = max(errors, key=lambda k: errors[k][0] / errors[k][1])
    first_bin = max(e for (before, _), (e, _, _) in errors.items() if before == 0)
    # undefined when it has no finite value on every bin it misses: a wrong number is none
    undefined = all(not errors[bin_][2] for bin_ in over)
    later = [bin_ for bin_ in over if bin_[0] > 0]
    rule = ("tolerance per bin (1/N_(d-1) - 1/N_d)/2, the trapezoid bound of the logarithm's "
            "own error (1/t convex; Eq. 20's order), and 1/2 at the first bin N_(d-1) = 0")  # fmt: skip
    if not over:
        return decide(not over, f"|approximation - harmonic gap| is within the {rule} on all "
                      f"{len(errors)} bins (N_(d-1) up to 1000, n_d up to 1000); at the first bin "
                      f"it is {first_bin:.3g}.", "")  # fmt: skip
    shown = worst if worst in over else next(iter(over))
    return decide(not over, "", f"|approximation - harmonic gap| exceeds the {rule} on {len(over)} "
                  f"of {len(errors)} bins: {errors[shown][0]:.3g} at (N_(d-1), n_d) = {shown} "
                  f"(tolerance {errors[shown][1]:.3g}); "
                  + (f"{len(later)} of them with N_(d-1) >= 1." if later
                     else "only at the first bin, where it is "
                     f"{first_bin:.3g}; every bin with N_(d-1) >= 1 is within its bound."),
                  failure="undefined" if undefined else "wrong-value")  # fmt: skip


@_form_errors_fail
def check_quadrature_rule(form: Form) -> Verdict:
    """Which rule is Eq. 11's sum? Nodes of the printed rule vs the sum's nodes t, cells [t-1, t]."""
    offset = sp.lambdify((), form.value["node offset from the cell's right edge"], "math")()
    width = sp.lambdify((), form.value["cell width"], "math")()
    cases = [(x, y) for x in range(1, 40, 3) for y in range(1, 40, 5)]
    return numeric_agreement(
        lambda cs: sum(width / (k - offset) for k in range(cs[0] + 1, cs[0] + cs[1] + 1)),
        lambda cs: harmonic_partial_sum(*cs),
        cases,
        tolerance=1e-12,
    )


@_form_errors_fail
def check_eq12(form: Form) -> Verdict:
    """Eq. 12 is Eq. 10 with the harmonic gap replaced by Eq. 11's logarithm."""
    harmonic = sp.Symbol("H_gap")
    eq10 = n_pos / (n * N_plus) * (share * n + (N_pos_prev + 1 - share * (N_prev + 1)) * harmonic)
    truth = eq10.subs(harmonic, sp.log(N_d) - sp.log(N_prev))
    return symbolic_equality(form.value, truth, [n, n_pos, N_prev, N_pos_prev, N_plus, N_d])


def _eq13(log_term):
    return (c_pos * (c_pos - 1) / ((c - 1) * N_plus)
            + c_pos / (c * N_plus) * (C_pos_prev + 1 - (c_pos - 1) / (c - 1) * (C_prev + 1)) * log_term)  # fmt: skip


@_form_errors_fail
def check_eq13_algebra(form: Form) -> Verdict:
    log_term = sp.log(N_d / N_prev)
    eq12 = n_pos / (n * N_plus) * (share * n + (N_pos_prev + 1 - share * (N_prev + 1)) * log_term)
    relaxed = eq12.subs({n_pos: c_pos, n: c, N_pos_prev: C_pos_prev, N_prev: C_prev,
                         N_d: C_prev + c})  # fmt: skip
    printed = form.value.subs(N_d, C_prev + c)
    return symbolic_equality(printed, relaxed, [c, c_pos, C_prev, C_pos_prev, N_plus])


RELAXED_BINS = tuple((before, size, pos, pos_before) for before in (1, 4, 20) for size in (2, 5)
                     for pos in (0, 1, 2) for pos_before in (0, 1))  # fmt: skip
"""Integer bins ``(C_(d-1), c_d, c+_d, C+_(d-1))`` on which a relaxed AP_r must be AP_T up to Eq. 11's
error; ``N+ = C+_(d-1) + c+_d + 2``. Bins after the first with two or more items: the first bin and
bins of one or no item are the other claims' own subject."""


def _exact_tie_term(before: int, size: int, pos: int, pos_before: int, plus: int) -> Fraction:
    """AP_T(R^(d)) of one tie by Eq. 3's sum, in exact rationals."""
    share_ = Fraction(pos - 1, size - 1)
    return sum((Fraction(pos, size) * (pos_before + (j - before - 1) * share_ + 1) / j / plus
                for j in range(before + 1, before + size + 1)), Fraction(0))  # fmt: skip


def relaxation_check(form: Form) -> Verdict:
    """Is the form (an AP_r of one tie, He et al. 2018, Eq. 13) AP_T at integer counts, up to the
    error Eq. 11 allows? ``|form - Eq. 3's sum| <= |B| tol`` on :data:`RELAXED_BINS`, where ``B`` is
    the factor of the harmonic gap in Eq. 10 and ``tol`` is :func:`log_gap_tolerance`. The form is
    in ``c, c_pos, C_prev, C_pos_prev, N_plus`` and ``N_d = C_prev + c`` (and ``rho = c+ / c``).

    Example:
        >>> exact = _eq13(sp.harmonic(N_d) - sp.harmonic(C_prev))  # the exact harmonic gap
        >>> relaxation_check(Form(exact)).verdict, relaxation_check(Form(2 * exact)).verdict
        ('holds', 'fails')
    """
    rho = sp.Symbol("rho")
    value = sp.lambdify((c, c_pos, C_prev, C_pos_prev, N_plus, N_d, rho), form.value, "mpmath")
    worst, where = 0.0, None
    for before, size, pos, pos_before in RELAXED_BINS:
        plus = pos_before + pos + 2
        share_ = Fraction(pos - 1, size - 1)
        factor = Fraction(pos, size * plus) * (pos_before + 1 - share_ * (before + 1))
        allowed = abs(float(factor)) * log_gap_tolerance(before, size) + 1e-12
        got = complex(value(mpmath.mpf(size), mpmath.mpf(pos), mpmath.mpf(before), mpmath.mpf(pos_before),
                            mpmath.mpf(plus), mpmath.mpf(before + size), mpmath.mpf(pos) / size))  # fmt: skip
        exact = _exact_tie_term(before, size, pos, pos_before, plus)
        excess = abs(got - float(exact)) / allowed if got.imag == 0 else math.inf
        if math.isnan(excess):  # NaN is no agreement; as inf it is kept, not overwritten
            excess = math.inf
        if not excess <= worst:
            worst, where = excess, (before, size, pos, pos_before, got.real, float(exact))
    failure = ""
    if worst > 1:
        before, size, pos, pos_before, got, exact = where
        failure = (f"at integer counts it is not AP_T(R^(d)): {got:.6g} against Eq. 3's {exact:.6g} "
                   f"at C_(d-1) = {before}, c_d = {size}, c+_d = {pos}, C+_(d-1) = {pos_before}, "
                   f"{worst:.3g} times Eq. 11's allowance.")  # fmt: skip
    return decide(worst <= 1, f"At integer counts it is AP_T(R^(d)) (Eq. 3's sum) within Eq. 11's "
                  f"allowance on {len(RELAXED_BINS)} bins.", failure)  # fmt: skip


def _both(first: Verdict, second: Verdict) -> Verdict:
    """Holds when both hold (both details shown), else the first that does not."""
    together = first.verdict == second.verdict == "holds"
    return decide(together, f"{first.detail} {second.detail}", "") if together else all_hold([first, second])


def first_bin_limit(form: Form) -> Verdict:
    """Is the term finite as ``C_(d-1) -> 0+`` (first bin), c = 3, c+ = 1/2, N+ = 2?

    Example:
        >>> first_bin_limit(Form(sp.log(N_d / C_prev))).detail
        'the term tends to oo as C_(d-1) -> 0+ (first bin).'
    """
    term = form.value.subs({c: 3, c_pos: sp.Rational(1, 2), C_pos_prev: 0, N_plus: 2})
    term = term.subs(N_d, C_prev + 3)
    limit = sp.limit(term, C_prev, 0, "+")
    if limit.is_finite is None and limit is not sp.nan:  # an unevaluated limit, a free symbol
        return undecided(f"SymPy cannot tell whether the term's limit at the first bin, "
                         f"{limit}, is finite.")  # fmt: skip
    return decide(limit.is_finite is True, f"the term tends to {limit} at the first bin.",
                  f"the term tends to {limit} as C_(d-1) -> 0+ (first bin).",
                  failure="undefined" if limit.is_finite is False or limit is sp.nan
                  else "wrong-value")  # fmt: skip


def one_item_bin_growth(form: Form) -> Verdict:
    """Is the term bounded as ``c_d -> 1`` (a bin of one item), c+ = 1/2, C_(d-1) = 3?

    Example:
        >>> one_item_bin_growth(Form(1 / (c - 1))).verdict
        'fails'
    """
    term = form.value.subs({c_pos: sp.Rational(1, 2), C_prev: 3, C_pos_prev: 1, N_plus: 2})
    term = term.subs(N_d, 3 + c)
    function = sp.lambdify(c, term, "mpmath")
    with mpmath.workdps(40):  # local: a global precision would change later claims' numbers
        values = [abs(function(1 + mpmath.mpf(10) ** -k)) for k in (6, 12, 18)]
    growth = float(values[-1] / values[0])
    # a term that grows without bound as c -> 1 has no value at c = 1: undefined there
    return decide(growth < 10, f"|term| stays {float(values[-1]):.4g} as c -> 1 (growth {growth:.3g}).",
                  f"|term| grows by {growth:.3g} from c = 1 + 1e-6 to 1 + 1e-18: a pole at a bin "
                  "of one item.", failure="undefined")  # fmt: skip


def empty_bin_value(form: Form) -> Verdict:
    """Is the term defined (a finite number) at an empty bin c_d = c+_d = 0, C_(d-1) = 3?

    A form that is 0/0 there fails as printed (code that evaluates it gets NaN); the detail
    then says whether the 0/0 is removable: whether the term tends to one finite value as
    c_d -> 0+ for every share c+_d = rho c_d of relevant items (rho = 0 included).

    Example:
        >>> empty_bin_value(Form(c_pos / c)).detail
        'substituting c_d = c+_d = 0 gives nan: undefined as printed (the term tends to rho as c_d -> 0+ with c+_d = rho c_d: no one value).'
        >>> empty_bin_value(Form(c_pos * sp.log(1 + c) / c)).detail
        'substituting c_d = c+_d = 0 gives nan: undefined as printed (a removable 0/0: the term tends to 0 as c_d -> 0+ for every share c+_d = rho c_d).'
    """
    term = form.value.subs({C_prev: 3, C_pos_prev: 1, N_plus: 2, sp.Symbol("rho"): sp.Rational(1, 2)})
    term = term.subs(N_d, 3 + c)
    value = term.xreplace({c_pos: sp.Integer(0), c: sp.Integer(0)})
    if value.is_finite is None and value is not sp.nan:  # a free symbol left: no number
        return undecided(f"SymPy cannot tell whether the term at c_d = c+_d = 0, {value}, is "
                         "finite.")
    failing = f"substituting c_d = c+_d = 0 gives {value}: undefined as printed"
    if value is sp.nan:
        failing += f" ({_limit_at_an_empty_bin(term)})"
    return decide(value.is_finite is True, f"the term is {value} at c_d = c+_d = 0.",
                  f"{failing}.", failure="undefined" if value.is_finite is False or value is sp.nan
                  else "wrong-value")  # fmt: skip


def _limit_at_an_empty_bin(term: sp.Expr) -> str:
    """What a 0/0 at an empty bin tends to as c_d -> 0+ along c+_d = rho c_d, every rho."""
    share = sp.Symbol("rho", nonnegative=True)
    along_share = sp.limit(term.subs(c_pos, share * c), c, 0, "+")
    if along_share == sp.limit(term.subs(c_pos, 0), c, 0, "+") and along_share.is_finite:
        return (f"a removable 0/0: the term tends to {along_share} as c_d -> 0+ for every share "
                "c+_d = rho c_d")
    return f"the term tends to {along_share} as c_d -> 0+ with c+_d = rho c_d: no one value"


@_form_errors_fail
def check_first_bin(form: Form) -> Verdict:
    """:func:`first_bin_limit`, and the form is AP_r (:func:`relaxation_check`)."""
    return _both(first_bin_limit(form), relaxation_check(form))


@_form_errors_fail
def check_one_item_bin(form: Form) -> Verdict:
    """:func:`one_item_bin_growth`, and the form is AP_r (:func:`relaxation_check`)."""
    return _both(one_item_bin_growth(form), relaxation_check(form))


@_form_errors_fail
def check_empty_bin(form: Form) -> Verdict:
    """:func:`empty_bin_value`, and the form is AP_r (:func:`relaxation_check`)."""
    return _both(empty_bin_value(form), relaxation_check(form))


@_form_errors_fail
def check_eq14(form: Form) -> Verdict:
    lower = sp.lambdify((a,), form.value["lower"], "math")
    upper = sp.lambdify((b,), form.value["upper"], "math")
    factor = float(form.value["factor"])
    cases = [(x, x + y) for x in (1.5, 3.0, 10.0) for y in (0.5, 2.0, 7.0)]
    return numeric_agreement(
        lambda cs: factor * float(mpmath.quad(lambda u: 1 / mpmath.log(u), [lower(cs[0]), upper(cs[1])])),
        lambda cs: float(mpmath.quad(lambda u: 1 / mpmath.log(u + 1, 2), [cs[0], cs[1]])),
        cases, tolerance=1e-10,
    )  # fmt: skip


@_form_errors_fail
def check_eq15(form: Form) -> Verdict:
    """At integer counts Eq. 15 is Eq. 7 with Eq. 14's integral for the discount sum.

    The form holds the factor and the integral's limits (``lower``, ``upper``, in ``C_prev``
    and ``C_d``), which the printed side integrates over: what is displayed is what is
    checked."""
    factor = float(form.value["factor"])
    limits = sp.lambdify((C_prev, C_d), (form.value["lower"], form.value["upper"]), "mpmath")
    rng = np.random.default_rng(11)
    cases = []
    for _ in range(8):
        counts = rng.integers(0, 4, 3)  # c_(d,v) for v = 0, 1, 2
        counts[1] += 1
        cases.append((int(rng.integers(1, 9)), tuple(int(x) for x in counts)))

    def printed(case):
        before, counts = case
        total = sum(counts)
        lower, upper = limits(before, before + total)
        integral = mpmath.quad(lambda u: 1 / mpmath.log(u), [lower, upper])
        return factor * sum(v * k / total for v, k in enumerate(counts)) * float(integral)

    def eq7_with_eq14(case):
        before, counts = case
        total = sum(counts)
        integral = mpmath.quad(lambda u: 1 / mpmath.log(u + 1, 2), [before, before + total])
        return sum(v * k for v, k in enumerate(counts)) / total * float(integral)

    return numeric_agreement(printed, eq7_with_eq14, cases, tolerance=1e-10)


@_form_errors_fail
def check_li(form: Form) -> Verdict:
    difference = sp.lambdify((a, b), form.value, "mpmath")
    cases = [(x, x + y) for x in (0.5, 1.0, 3.0, 10.0) for y in (0.5, 2.0, 7.0)]
    return numeric_agreement(
        lambda cs: float(difference(cs[0], cs[1])),
        lambda cs: float(mpmath.quad(lambda u: 1 / mpmath.log(u), [cs[0] + 1, cs[1] + 1])),
        cases, tolerance=1e-10,
    )  # fmt: skip


def li_first_bin_value(form: Form) -> Verdict:
    """Is the Li difference (in ``a = C_(d-1)``, ``b = C_d``) finite at the first bin?

    Example:
        >>> li_first_bin_value(Form(sp.li(b + 1) - sp.li(a + 1))).verdict
        'fails'
    """
    difference = sp.lambdify((a, b), form.value, "mpmath")
    values = [difference(mpmath.mpf(0), mpmath.mpf(size)) for size in (1, 2, 5)]
    finite = all(mpmath.isfinite(v) for v in values)
    # it fails only where a value is not finite: undefined there
    return decide(finite, f"finite at C_(d-1) = 0: {[float(v) for v in values]} for C_d = 1, 2, 5.",
                  f"at C_(d-1) = 0 the printed difference is {values[0]} (Li(1) = -inf).",
                  failure="undefined")  # fmt: skip


def log_discount(t: float) -> float:
    """The logarithmic discount of DCG over ``ln 2``: ``1 / ln(t + 1)`` (He et al., 2018, Eq. 14).

    Example:
        >>> round(log_discount(1) * math.log(2), 12)  # 1/log2(2)
        1.0
    """
    return 1 / math.log(t + 1)


def discount_relaxation_check(form: Form) -> Verdict:
    """Does the form (in ``a = C_(d-1)``, ``b = C_d``) relax ``sum_(t=a+1)^b 1/ln(t+1)`` (Eq. 14's
    discount sum over ``ln 2``) within :func:`discount_tolerance` on every bin of
    :data:`LOG_GAP_BINS`, the first included?

    Example:
        >>> discount_relaxation_check(Form(sp.li(b + 1) - sp.li(a + 1))).verdict  # Li(1) = -oo
        'fails'
    """
    relaxed = sp.lambdify((a, b), form.value, "mpmath")
    over, numbers = [], False  # numbers: a bin it misses with a finite value, a wrong one
    for before, size in LOG_GAP_BINS:
        value = complex(relaxed(mpmath.mpf(before), mpmath.mpf(before + size)))
        exact = math.fsum(log_discount(t) for t in range(before + 1, before + size + 1))
        error = abs(value - exact) if value.imag == 0 else math.inf
        if not error <= discount_tolerance(log_discount, before, size):
            over.append(f"{error:.3g} at (C_(d-1), c_d) = ({before}, {size})")
            numbers = numbers or cmath.isfinite(value)
    # undefined when it has no finite value on every bin it misses (Li(1) = -inf at the first)
    return decide(not over, f"It relaxes sum_t 1/ln(t+1) within the trapezoid bound "
                  f"(D(C_(d-1)) - D(C_d))/2 on all {len(LOG_GAP_BINS)} bins (D(1)/2 at the first).",
                  f"|relaxation - sum_t 1/ln(t+1)| exceeds the trapezoid bound on {len(over)} of "
                  f"{len(LOG_GAP_BINS)} bins: " + "; ".join(over[:3]) + ".",
                  failure="wrong-value" if numbers else "undefined")  # fmt: skip


@_form_errors_fail
def check_li_first_bin(form: Form) -> Verdict:
    """:func:`li_first_bin_value`, and the form relaxes the discount sum
    (:func:`discount_relaxation_check`)."""
    return _both(li_first_bin_value(form), discount_relaxation_check(form))


@_form_errors_fail
def check_expansion(form: Form) -> Verdict:
    """``H(N) - expansion`` is the order term's size: the order term is positive and vanishes, and
    ``|remainder / order term|`` settles within 10 % of 1 (the paper writes the next term's
    constant inside O(.), 1/(12 N^2), so the check holds it to that size)."""
    symbol = sorted(form.value["expansion"].free_symbols, key=str)[0]
    expansion = sp.lambdify(symbol, form.value["expansion"], "mpmath")
    order = sp.lambdify(symbol, form.value["order"], "mpmath")
    with mpmath.workdps(40):  # local: a global precision would change later claims' numbers
        terms = [order(mpmath.mpf(big)) for big in (10**3, 10**4, 10**5)]
        ratios = [float((mpmath.harmonic(big) - expansion(mpmath.mpf(big))) / term)
                  for big, term in zip((10**3, 10**4, 10**5), terms, strict=True)]  # fmt: skip
    magnitude = all(term > 0 for term in terms) and terms[-1] < terms[0]
    settled = abs(ratios[-1] - ratios[-2]) < 1e-3 * max(1.0, abs(ratios[-1]))
    sized = abs(abs(ratios[-1]) - 1) <= 0.1
    return decide(magnitude and settled and sized,
                  f"(H(N) - expansion) / order term -> {ratios[-1]:.6f} (N = 1e3..1e5, mpmath 40 "
                  "digits): the order term is the remainder's size.",
                  f"(H(N) - expansion) / order term = {ratios} at N = 1e3, 1e4, 1e5"
                  + ("" if magnitude else ", the order term not a positive vanishing magnitude")
                  + ": not of that order.")  # fmt: skip


ERROR_BINS = tuple((before, ratio) for before in (10, 100, 1000, 10000)
                   for ratio in (sp.Rational(1, 10), sp.Integer(1), sp.Integer(10), sp.Integer(1000)))  # fmt: skip
"""The bins of the error checks (Eq. 20, 21): ``N_(d-1)`` over four decades and, at each, the ratio
``n_d / N_(d-1)`` in {1/10, 1, 10, 1000}, so no bound can lean on a fixed ratio."""


def _error_ratios(term: sp.Expr) -> dict[tuple, float]:
    """``(ln gap - harmonic gap) / term`` on :data:`ERROR_BINS`, ``term`` in ``N_prev, N_d``."""
    order = sp.lambdify((N_prev, N_d), term, "mpmath")
    ratios = {}
    with mpmath.workdps(30):  # local: a global precision would change later claims' numbers
        for before, ratio in ERROR_BINS:
            size = int(before * ratio)
            error = (mpmath.log(mpmath.mpf(before + size) / before)
                     - (mpmath.harmonic(before + size) - mpmath.harmonic(before)))  # fmt: skip
            value = complex(order(mpmath.mpf(before), mpmath.mpf(before + size)))
            ratios[(before, ratio)] = float(error / value.real) if value.imag == 0 else math.nan
    return ratios


def _error_order_problems(term: sp.Expr) -> tuple[list[str], dict]:
    """Where ``term`` is not the size of Eq. 11's error: the ratio of the error to it must be
    within 10 % of 1 at N_(d-1) = 10^4 for every ratio n_d / N_(d-1) (the constants inside the
    paper's O(.) state the error's size, so they are held to it)."""
    ratios = _error_ratios(term)
    largest = max(before for before, _ in ERROR_BINS)
    problems = [f"{ratios[(largest, r)]:.4g} at n_d / N_(d-1) = {r}"
                for b_, r in ERROR_BINS if b_ == largest and not abs(ratios[(b_, r)] - 1) <= 0.1]  # fmt: skip
    return problems, {r: ratios[(largest, r)] for b_, r in ERROR_BINS if b_ == largest}


@_form_errors_fail
def check_eq20(form: Form) -> Verdict:
    """The printed term is the size of ln(N_d/N_(d-1)) - (H(N_d) - H(N_(d-1))) on every bin ratio.

    Example:
        >>> check_eq20(Form((N_d - N_prev) / (2 * N_prev**2))).verdict  # Eq. 21's last step
        'fails'
    """
    problems, at_largest = _error_order_problems(form.value)
    shown = ", ".join(f"{v:.6f} (n_d / N_(d-1) = {r})" for r, v in at_largest.items())
    return decide(not problems,
                  f"(ln gap - harmonic gap) / printed term at N_(d-1) = 10^4: {shown}; within 10 % "
                  "of 1 for every ratio n_d / N_(d-1) from 1/10 to 1000 (mpmath, 30 digits).",
                  "(ln gap - harmonic gap) / printed term at N_(d-1) = 10^4 is "
                  + "; ".join(problems) + ": not the size of the error for every ratio "
                  "n_d / N_(d-1).")  # fmt: skip


@_form_errors_fail
def check_eq21(form: Form) -> Verdict:
    """The O-chain starts at Eq. 20's term, and each term is the size of Eq. 11's error on every
    bin ratio (Eq. 20's test).

    Example:
        >>> check_eq21(Form((1 / (2 * a) - 1 / (2 * b), n / (2 * a * b)))).verdict
        'holds'
    """
    problems = []
    start = sp.sympify(form.value[0]) - (1 / (2 * a) - 1 / (2 * b))
    if sp.simplify(start) != 0:  # as a function of N_(d-1) = a and N_d = b, as Eq. 20 prints it
        problems.append(f"term 1, O({sp.sstr(form.value[0])}), is not Eq. 20's "
                        "1/(2 N_(d-1)) - 1/(2 N_d) in N_(d-1) and N_d")  # fmt: skip
    for index, term in enumerate(form.value, start=1):
        wrong, _ = _error_order_problems(term.subs(b, N_d).subs(a, N_prev).subs(n, N_d - N_prev))
        if wrong:
            problems.append(f"term {index}, O({sp.sstr(term)}): error / term = " + ", ".join(wrong))
    return decide(not problems,
                  f"each of the {len(form.value)} terms is the size of ln gap - harmonic gap "
                  "(ratio within 10 % of 1 at N_(d-1) = 10^4, n_d / N_(d-1) from 1/10 to 1000).",
                  "not an equality of orders: " + "; ".join(problems) + ".")  # fmt: skip


TIGHTENED_BINS = tuple((before, size) for before in (1, 2, 10, 100, 1000) for size in (1, 2, 10, 100, 10**4))
"""Bins ``(N_(d-1), n_d)`` after the first on which the tightened Eq. 11 is checked."""


@_form_errors_fail
def check_tightened(form: Form) -> Verdict:
    """Eq. 11 with the 1/(2N) terms of Eq. 17: closer to the harmonic gap than Eq. 11 on every bin
    after the first, and within the next Euler-Maclaurin term ``1/(12 N_(d-1)^2) - 1/(12 N_d^2)
    + 1/(120 N_d^4)`` (``H(N) = gamma + ln N + 1/(2N) - 1/(12N^2) + e``, ``0 < e < 1/(120N^4)``).

    Example:
        >>> check_tightened(Form(sp.log(N_d / N_prev))).verdict  # Eq. 11 itself is not tighter
        'fails'
    """
    tightened = sp.lambdify((N_prev, N_d), form.value, "mpmath")
    problems = []
    with mpmath.workdps(30):  # local: a global precision would change later claims' numbers
        for before, size in TIGHTENED_BINS:
            low, high = mpmath.mpf(before), mpmath.mpf(before + size)
            gap = mpmath.harmonic(high) - mpmath.harmonic(low)
            value = complex(tightened(low, high))
            error = abs(value - gap) if value.imag == 0 else mpmath.inf
            plain = abs(mpmath.log(high / low) - gap)
            bound = 1 / (12 * low**2) - 1 / (12 * high**2) + 1 / (120 * high**4)
            if not (error < plain and error <= bound):
                missed = ("not closer than Eq. 11" if not error < plain
                          else "closer than Eq. 11 but above the next term")  # fmt: skip
                problems.append(f"(N_(d-1), n_d) = ({before}, {size}): {missed} (error "
                                f"{float(error):.3g}, Eq. 11's {float(plain):.3g}, next term "
                                f"{float(bound):.3g})")  # fmt: skip
    return decide(not problems, f"closer to H(N_d) - H(N_(d-1)) than Eq. 11 and within the next "
                  f"term of Eq. 17 on all {len(TIGHTENED_BINS)} bins with N_(d-1) >= 1 (n_d up to "
                  "10^4; mpmath, 30 digits).",
                  f"not Eq. 17's tightening (closer than Eq. 11 and within the next "
                  f"Euler-Maclaurin term) on {len(problems)} of {len(TIGHTENED_BINS)} bins, e.g. "
                  + "; ".join(problems[:2]) + ".")  # fmt: skip


@_form_errors_fail
def check_linear_discount(form: Form) -> Verdict:
    """Footnote 1: the integral relaxation for ``D(t)``: the relaxed sum is ``int_a^b D`` (its
    derivatives in the limits are ``D(b)`` and ``-D(a)``, zero at ``a = b``) and relaxes
    ``sum_(t=a+1)^b D(t)`` within :func:`discount_tolerance` on the bins after the first.

    Example:
        >>> t = sp.Symbol("t", positive=True)
        >>> check_linear_discount(Form({"D(t)": 1 / t, "relaxed sum": sp.log(b / a)})).verdict
        'holds'
    """
    discount, relaxed = sp.sympify(form.value["D(t)"]), sp.sympify(form.value["relaxed sum"])
    t_ = sp.Symbol("t", positive=True)
    as_integral = [sp.simplify(sp.diff(relaxed, b) - discount.subs(t_, b)) == 0,
                   sp.simplify(sp.diff(relaxed, a) + discount.subs(t_, a)) == 0,
                   sp.simplify(relaxed.subs(b, a)) == 0]  # fmt: skip
    function = sp.lambdify(t_, discount, "math")
    value = sp.lambdify((a, b), relaxed, "mpmath")
    over = []
    for before, size in LOG_GAP_BINS:
        if before == 0:
            continue  # D(0) is infinite for 1/t as for 1/log2(t+1): eq11, claim-eq16-first-bin
        exact = math.fsum(function(u) for u in range(before + 1, before + size + 1))
        got = complex(value(mpmath.mpf(before), mpmath.mpf(before + size)))
        error = abs(got - exact) if got.imag == 0 else math.inf
        if not error <= discount_tolerance(function, before, size):
            over.append(f"{error:.3g} at (N_(d-1), n_d) = ({before}, {size})")
    integral = all(as_integral)
    return decide(integral and not over,
                  "the relaxed sum is int_(N_(d-1))^(N_d) D(t) dt (derivatives D(N_d), -D(N_(d-1))) and "
                  "relaxes sum_t D(t) within the trapezoid bound (D(N_(d-1)) - D(N_d))/2 on every bin "
                  "after the first, as Eq. 14 does for the logarithmic discount.",
                  "; ".join([*([] if integral else
                                 ["the relaxed sum is not int_(N_(d-1))^(N_d) D(t) dt"]),
                               *([f"|relaxed - sum_t D(t)| exceeds the trapezoid bound: "
                                  f"{'; '.join(over[:3])}"] if over else [])]) + ".")  # fmt: skip


@_form_errors_fail
def check_table_d(form: Form) -> Verdict:
    """The table of Sec. D as printed: every entry an AP_T in [0, 1], and the alpha -> oo row above
    the alpha = 40 row at every bit length.

    Example:
        >>> check_table_d(Form({"alpha = 40": (0.7, 0.8, 0.8, 0.8),
        ...                     "alpha -> oo": (0.8, 0.9, 0.9, 0.9)})).verdict
        'holds'
    """
    fixed, continued = form.value["alpha = 40"], form.value["alpha -> oo"]
    bits = (12, 24, 32, 48)
    entries = [float(x) for x in (*fixed, *continued)]
    in_range = len(fixed) == len(continued) == len(bits) and all(0 <= x <= 1 for x in entries)
    behind = [f"{n_bits} bits ({float(y)} vs {float(x)})" for n_bits, x, y
              in zip(bits, fixed, continued, strict=False) if not float(y) > float(x)]  # fmt: skip
    gains = [round(float(y) - float(x), 3) for x, y in zip(fixed, continued, strict=False)]
    return decide(in_range and not behind,
                  f"every entry is an AP_T in [0, 1] and alpha -> oo is higher at 12, 24, 32 and 48 "
                  f"bits, by {gains} (the table's own numbers).",
                  "; ".join([*([] if in_range else ["the table's entries are not four AP_T "
                                                    "values per row in [0, 1]"]),
                             *([f"alpha -> oo is not higher at {', '.join(behind)}"]
                               if behind else [])]) + ".")  # fmt: skip


N_d_index = sp.Symbol("N_d", integer=True, positive=True)
"""``N_d`` as an integer (the no-ties sums are exact)."""


@_form_errors_fail
def check_no_ties(form: Form) -> Verdict:
    """With n_d in {0, 1} the sum of Eq. 11 is evaluated directly: 0, or 1/N_d, exactly?

    Example:
        >>> check_no_ties(Form({"n_d = 0": sp.Integer(0), "n_d = 1": 1 / N_d_index})).verdict
        'holds'
    """
    wrong = []
    for before in range(0, 60):
        for size, key in ((0, "n_d = 0"), (1, "n_d = 1")):
            exact = sum((sp.Rational(1, t) for t in range(before + 1, before + size + 1)), sp.Integer(0))
            printed = sp.sympify(form.value[key]).xreplace({N_d_index: before + size})
            if printed != exact and not abs(complex((printed - exact).evalf(30))) < 1e-25:
                wrong.append(f"{key}, N_(d-1) = {before}: printed {printed}, exact {exact}")
    first = wrong[0] if wrong else ""
    return decide(not wrong, "sum_(t=N_(d-1)+1)^(N_d) 1/t is 0 for n_d = 0 and 1/N_d for n_d = 1, "
                  "exactly, for N_(d-1) = 0..59 (the first bin included).",
                  f"{len(wrong)} of 120 bins differ from the exact sum, e.g. {first}.")  # fmt: skip


phi_i, phi_j = sp.symbols("p1:4"), sp.symbols("r1:4")


@_form_errors_fail
def check_distance_gradient(form: Form) -> Verdict:
    distance = (3 - sum(p * r for p, r in zip(phi_i, phi_j, strict=True))) / 2
    pi, pj = sp.Symbol("phi_i"), sp.Symbol("phi_j")
    return all_hold([
        symbolic_equality(form.value.subs({pi: phi_i[k], pj: phi_j[k]}), sp.diff(distance, phi_j[k]),
                          [*phi_i, *phi_j]) for k in range(3)
    ], "d(phi_i, phi_j) = (b - phi_i . phi_j)/2, each component: ")  # fmt: skip


@_form_errors_fail
def check_sum_index(form: Form) -> Verdict:
    d = sp.Symbol("d", nonnegative=True)  # as in the form (no integer assumption: see claims())
    term = sp.Function("T")
    return symbolic_equality(form.value.doit(), sp.summation(term(d), (d, 0, 3)).doit(), [d])


# --- the claims ------------------------------------------------------------------------------


def claims() -> list[Claim]:
    """The audited claims of He et al. (2018, suppl.): Eq. 1-21, 26 and 34, Sec. B-C's remarks,
    footnote 1 and Sec. D's table."""
    ap_summand = n_pos / n * (N_pos_prev + (j_ - N_prev - 1) * share + 1) / j_ / N_plus
    eq1 = Form(ap_summand, lhs="term j of AP_T@k (t_i = N_(i-1))")
    eq2 = Form(ap_summand, lhs="term j of AP_T, k = |S|")
    eq3 = Form(ap_summand, lhs="term j of AP_T(R^(d))")
    shifted = {j_: j_ + 1}
    discount = 1 / sp.log(jj + 1, 2)
    eq4 = Form({"tie value": gain_sum / n * disc, "D(j)": discount, "first rank": t_tie + 1,
                "last rank": sp.Min(t_next, k_cut)},
               context="DCG_T@k = sum_d tie value, sum_D = sum_(j = first rank)^(last rank) D(j)")
    full_ranks = {"first rank": N_before + 1, "last rank": N_through}
    eq5 = Form({"tie value": gain_sum / n * disc, "D(j)": discount, **full_ranks},
               context="DCG_T(R^(d)) with k = |S|, sum_D = sum_(j = first rank)^(last rank) D(j)")
    eq7 = Form({"tie value": level_sum / n * disc, "D(j)": discount, **full_ranks},
               context="DCG_T(R^(d)) = 1/n_d sum_v G(v) n_(d,v) sum_D, "
               "sum_D = sum_(j = first rank)^(last rank) D(j)")  # fmt: skip
    eq6 = Form(gain(v_level) * sum(sp.KroneckerDelta(v_level, x) for x in affinities),
               lhs="summand over v of Eq. 6 (tie of 4, n_(d,v) = sum_j 1[v = A(j)])")
    eq8 = Form(share + (N_pos_prev + 1 - share * (N_prev + 1)) / t, lhs="beta_d(t)")
    beta = sp.Symbol("beta_d(t)")
    eq9 = Form(n_pos / (n * N_plus) * beta, lhs="summand of AP_T(R^(d)) over t")
    eq10 = Form(A_s * n + B_s * (sp.harmonic(N_d) - sp.harmonic(N_prev)), lhs="sum_t (A + B/t)")
    eq11 = Form(sp.log(N_d) - sp.log(N_prev), lhs="sum_(t=N_(d-1)+1)^(N_d) 1/t ~")
    midpoint = Form({"node offset from the cell's right edge": sp.Rational(1, 2), "cell width": 1},
                    context="Eq. 11 as the midpoint rule: sum_t 1/t = sum over the cells "
                    "[t - 1, t] of cell width / (right edge - offset)")  # fmt: skip
    eq12 = Form(n_pos / (n * N_plus) * (share * n + (N_pos_prev + 1 - share * (N_prev + 1))
                                        * sp.log(N_d / N_prev)), lhs="AP_T(R^(d)) ~")  # fmt: skip
    eq13 = Form(_eq13(sp.log(N_d / C_prev)), lhs="AP_r(R^(d)), C_d = C_(d-1) + c_d")
    midpoint_log = sp.log((N_d + sp.Rational(1, 2)) / (C_prev + sp.Rational(1, 2)))
    exact_gap = sp.harmonic(N_d) - sp.harmonic(C_prev)
    rho = sp.Symbol("rho")
    eq13_share = _eq13(sp.log(N_d / C_prev)).subs(c_pos, rho * c)
    eq14 = Form({"factor": log2, "lower": a + 1, "upper": b + 1},
                context="int_a^b dt / log2(t+1) = factor * int_lower^upper dt / ln t")  # fmt: skip
    eq15 = Form({"factor": log2, "lower": C_prev + 1, "upper": C_d + 1},
                context="DCG_r = factor sum_v G(v) c_(d,v)/c_d int_lower^upper dt/ln t")
    eq16 = Form(sp.li(b + 1) - sp.li(a + 1), lhs="int_(a+1)^(b+1) dt / ln t")
    first_bin_li = Form(sp.li(b + 1) - sp.li(a + 1), lhs="Li(C_d + 1) - Li(C_(d-1) + 1), C_(d-1) = 0")
    N = sp.Symbol("N", positive=True)

    def expansion(symbol, label):
        return Form({"expansion": sp.EulerGamma + sp.log(symbol) + 1 / (2 * symbol),
                     "order": 1 / (12 * symbol**2)}, context=f"{label}, remainder O(order)")  # fmt: skip

    eq17, eq18, eq19 = expansion(N, "H(N)"), expansion(N_d, "H(N_d)"), expansion(N_prev, "H(N_(d-1))")

    def weaker_order(form):
        symbol = sorted(form.value["expansion"].free_symbols, key=str)[0]
        return with_parameters(form, "order 1/(12 N)", order=1 / (12 * symbol))

    def dropped_half(form):
        symbol = sorted(form.value["expansion"].free_symbols, key=str)[0]
        return with_parameters(form, "1/(2N) dropped", expansion=sp.EulerGamma + sp.log(symbol))

    def flipped_half(form):
        symbol = sorted(form.value["expansion"].free_symbols, key=str)[0]
        return with_parameters(form, "1/(2N) sign flipped",
                               expansion=sp.EulerGamma + sp.log(symbol) - 1 / (2 * symbol))  # fmt: skip

    # the error as the text reads it after Eq. 20 ("the approximation error is O(...)"): the
    # log gap (the relaxation) minus the harmonic gap, whose size and sign the term states
    eq20 = Form(1 / (2 * N_prev) - 1 / (2 * N_d),
                lhs="ln(N_d/N_(d-1)) - (H(N_d) - H(N_(d-1))) = O(.)")  # fmt: skip
    chain = (1 / (2 * a) - 1 / (2 * b), n / (2 * a * b), n / (2 * a * (a + n)), n / (2 * a**2))
    eq21 = Form(chain, context="O-chain with N_(d-1) = a, N_d = b = a + n_d",
                render=lambda terms: " = ".join(f"O({sp.sstr(x)})" for x in terms))  # fmt: skip
    no_ties = Form({"n_d = 0": sp.Integer(0), "n_d = 1": 1 / N_d_index},
                   context="sum_(t=N_(d-1)+1)^(N_d) 1/t evaluated directly when n_d in {0, 1}")
    tightened = Form(sp.log(N_d) - sp.log(N_prev) + 1 / (2 * N_d) - 1 / (2 * N_prev),
                     lhs="sum_(t=N_(d-1)+1)^(N_d) 1/t ~")
    t_ = sp.Symbol("t", positive=True)
    linear = Form({"D(t)": 1 / t_, "relaxed sum": sp.log(b) - sp.log(a)},
                  context="linear discount, sum_(t=N_(d-1)+1)^(N_d) D(t) ~ relaxed sum, "
                  "a = N_(d-1), b = N_d")  # fmt: skip
    table = Form({"alpha = 40": (0.732, 0.789, 0.800, 0.826), "alpha -> oo": (0.751, 0.804, 0.813, 0.830)},
                 context="TALR-AP, AP_T on CIFAR-10 (setting 1) at 12, 24, 32, 48 bits")  # fmt: skip
    pi, pj = sp.Symbol("phi_i"), sp.Symbol("phi_j")
    eq26 = Form(-pi / 2, lhs="d d(x_i, x_j) / d phi(x_j)")
    # summation indices without the integer assumption: the shift operator moves the bounds of a
    # Sum, and substituting d + 1 for a bound index is no form
    ell, d = sp.Symbol("l", nonnegative=True), sp.Symbol("d", nonnegative=True)
    T = sp.Function("T")
    eq34 = Form(sp.Sum(T(d), (ell, 0, 3)), lhs="outer sum of Eq. 34 (b = 3)")
    return [
        Claim(SEED, "eq1", "tie-aware AP at cutoff k (McSherry & Najork)", eq1, check_ap_at_k,
              "float64 vs brute force over tie-consistent orders, random k",
              mutants=(substituted(eq1, shifted, "index j shifted by one"),
                       mutant(eq1, ap_summand.subs(N_pos_prev, N_pos_prev - 1), "+1 dropped"))),
        Claim(SEED, "eq2", "tie-aware AP (k = |S|)", eq2, check_ap_full, "float64 vs brute force",
              mutants=(substituted(eq2, shifted, "index j shifted by one"), scaled(eq2, 2))),
        Claim(SEED, "eq3", "AP_T decomposes over ties", eq3, check_ap_full,
              "sum over ties of the per-tie form vs brute force",
              mutants=(substituted(eq3, {N_prev: N_prev + 1}, "N_(d-1) shifted"),)),
        Claim(SEED, "eq4", "tie-aware DCG at cutoff k", eq4, check_dcg_at_k, "float64 vs brute force",
              mutants=(with_parameters(eq4, "1/n_d dropped", **{"tie value": gain_sum * disc}),
                       with_parameters(eq4, "discount index shifted", **{"D(j)": 1 / sp.log(jj + 2, 2)}),
                       with_parameters(eq4, "cutoff k + 1", **{"last rank": sp.Min(t_next, k_cut + 1)}),
                       with_parameters(eq4, "cutoff ignored", **{"last rank": t_next}))),
        Claim(SEED, "eq5", "DCG_T of one tie (k = |S|)", eq5, check_dcg_full, "float64 vs brute force",
              mutants=(with_parameters(eq5, "1/n_d dropped", **{"tie value": gain_sum * disc}),)),
        Claim(SEED, "eq6", "the tie's gains regrouped by affinity level", eq6,
              check_level_regrouping, "exact, every assignment of levels",
              mutants=(substituted(eq6, {v_level: v_level + 1}, "level index shifted in the indicator"),)),
        Claim(SEED, "eq7", "tie-aware DCG by affinity level", eq7, check_dcg_full,
              "float64 vs brute force",
              mutants=(with_parameters(eq7, "1/n_d dropped", **{"tie value": level_sum * disc}),)),
        Claim(SEED, "eq8", "the A + B/t split", eq8, check_split, "sympy.simplify",
              mutants=(substituted(eq8, {N_prev: N_prev - 1}, "N_(d-1) + 1 -> N_(d-1)"), negated(eq8))),
        Claim(SEED, "eq9", "AP_T of a tie as a sum of beta", eq9, check_eq9, "sympy.simplify",
              mutants=(scaled(eq9, n), scaled(eq9, N_plus))),
        Claim(SEED, "eq10", "the harmonic closed form", eq10, check_harmonic_closed_form,
              "sympy.summation",
              mutants=(substituted(eq10, {N_d: N_d - 1}, "upper limit shifted"),
                       mutant(eq10, A_s * (n - 1) + B_s * (sp.harmonic(N_d) - sp.harmonic(N_prev)),
                              "A n_d -> A (n_d - 1)"))),
        Claim(SEED, "eq11", "the harmonic partial sum by a logarithm, for every bin", eq11,
              check_log_approximation, "mpmath on a grid of bins, first bin included",
              correction=mutant(eq11, sp.log((N_d + sp.Rational(1, 2)) / (N_prev + sp.Rational(1, 2))), "corrected"),
              mutants=(mutant(eq11, sp.log((N_d + sp.Rational(1, 2)) / N_prev), "only the upper limit moved"),
                       mutant(eq11, sp.log((N_d + 1) / (N_prev + 1)), "limits moved by 1, not 1/2")),
              note="For N_(d-1) >= 1 the log overestimates by at most (1/N_(d-1) - 1/N_d)/2 = "
              "n_d/(2 N_(d-1) N_d); at the first bin ln(N_d/0) diverges.",
              cause="first bin: the relaxation integrates from N_(d-1) = 0"),
        Claim(SEED, "claim-midpoint-rule", "Eq. 11 is the midpoint rule applied in reverse",
              midpoint, check_quadrature_rule, "mpmath, the rule's nodes against the sum",
              correction=with_parameters(midpoint, "corrected", **{"node offset from the cell's right edge": 0}),
              mutants=(with_parameters(midpoint, "left-endpoint rule",
                                       **{"node offset from the cell's right edge": 1}),
                       with_parameters(midpoint, "cells of width 1/2", **{"cell width": sp.Rational(1, 2)})),
              note="The sum over t = N_(d-1)+1..N_d is the right-endpoint Riemann sum of "
              "int_(N_(d-1))^(N_d) dt/t (an underestimate); the midpoint rule would integrate from "
              "N_(d-1) + 1/2 to N_d + 1/2.",
              cause="the harmonic sum is the right-endpoint rule, not the midpoint rule"),
        Claim(SEED, "eq12", "Eq. 10 with Eq. 11's logarithm", eq12, check_eq12, "sympy.simplify",
              mutants=(substituted(eq12, {N_d: N_prev, N_prev: N_d}, "log ratio inverted"),)),
        Claim(SEED, "eq13", "the relaxed AP_r (algebra from Eq. 12)", eq13, check_eq13_algebra,
              "sympy.simplify", mutants=(scaled(eq13, c), substituted(eq13, {C_prev: C_prev + 1}, "C_(d-1) shifted"))),
        Claim(SEED, "claim-eq13-first-bin", "AP_r is finite at the first bin (C_(d-1) = 0)",
              Form(_eq13(sp.log(N_d / C_prev)), lhs="AP_r(R^(d))"), check_first_bin,
              "sympy.limit; against Eq. 3's sum at integer counts (exact rationals)",
              correction=Form(_eq13(midpoint_log), lhs="AP_r(R^(d))", name="corrected"),
              mutants=(Form(_eq13(sp.log((N_d + sp.Rational(1, 2)) / C_prev)), lhs="AP_r(R^(d))",
                            name="only the upper limit moved"),),
              cause="first bin: the relaxation integrates from N_(d-1) = 0"),
        Claim(SEED, "claim-eq13-one-item-bin", "AP_r is finite at a bin of one item (c_d -> 1)",
              Form(_eq13(sp.log(N_d / C_prev)), lhs="AP_r(R^(d))"), check_one_item_bin,
              "mpmath, 40 digits, c = 1 + 1e-6 .. 1 + 1e-18; against Eq. 3's sum at integer counts",
              correction=Form(_eq13(exact_gap), lhs="AP_r(R^(d))", name="corrected"),
              mutants=(Form(_eq13(sp.harmonic(N_d) - sp.harmonic(C_prev + 1)), lhs="AP_r(R^(d))",
                            name="harmonic gap from C_(d-1) + 1"),),
              note="With ln the (c+ - 1)/(c - 1) factor has a pole at c = 1; with the exact "
              "harmonic gap (digamma) the singularity is removable. gradlab clamps the factor.",
              cause="(c+ - 1)/(c - 1) has a pole at a bin of one item"),
        Claim(SEED, "claim-eq13-empty-bin", "AP_r is defined at an empty bin (c_d = 0)",
              Form(_eq13(sp.log(N_d / C_prev)), lhs="AP_r(R^(d))"), check_empty_bin,
              "sympy.subs; against Eq. 3's sum at integer counts (exact rationals)",
              correction=Form(eq13_share, lhs="AP_r(R^(d)), c+ = rho c", name="corrected"),
              mutants=(Form(eq13_share.subs(rho, 1 - rho), lhs="AP_r(R^(d)), c+ = rho c",
                            name="the irrelevant share for rho"),),
              note="As printed c+_d / c_d is 0/0 at an empty bin; written through the share rho = "
              "c+/c the term is 0 there (gradlab.functional.relaxed_tie_aware_ap does so).",
              cause="c+/c is 0/0 at an empty bin"),
        Claim(SEED, "eq14", "the discount sum as an integral (substitution)", eq14, check_eq14,
              "mpmath.quad", mutants=(with_parameters(eq14, "limits not shifted", lower=a, upper=b),
                                      with_parameters(eq14, "ln 2 dropped", factor=1))),
        Claim(SEED, "eq15", "the relaxed DCG_r", eq15, check_eq15, "mpmath.quad at integer counts",
              mutants=(with_parameters(eq15, "ln 2 dropped", factor=1),
                       with_parameters(eq15, "limits not shifted", lower=C_prev, upper=C_d),
                       with_parameters(eq15, "upper limit C_d", upper=C_d))),
        Claim(SEED, "eq16", "DCG_r via the logarithmic integral", eq16, check_li,
              "mpmath.li vs quadrature",
              mutants=(mutant(eq16, sp.li(b) - sp.li(a), "arguments not shifted"), negated(eq16))),
        Claim(SEED, "claim-eq16-first-bin", "DCG_r is finite at the first bin", first_bin_li,
              check_li_first_bin, "mpmath.li; float64 discount sums on 35 bins",
              correction=mutant(first_bin_li, sp.li(b + sp.Rational(3, 2)) - sp.li(a + sp.Rational(3, 2)), "corrected"),
              mutants=(mutant(first_bin_li, sp.li(b + 1) - sp.li(a + sp.Rational(3, 2)),
                              "only the lower limit moved"),),
              note="Li(1) = -inf; integrating from a + 1/2 (the midpoint rule) keeps it finite.",
              cause="first bin: the relaxation integrates from N_(d-1) = 0"),
        Claim(SEED, "eq17", "asymptotic expansion of H(N)", eq17, check_expansion, "mpmath",
              mutants=(dropped_half(eq17), flipped_half(eq17), weaker_order(eq17))),
        Claim(SEED, "eq18", "the expansion at N_d", eq18, check_expansion, "mpmath",
              mutants=(dropped_half(eq18), weaker_order(eq18))),
        Claim(SEED, "eq19", "the expansion at N_(d-1)", eq19, check_expansion, "mpmath",
              mutants=(dropped_half(eq19), weaker_order(eq19))),
        Claim(SEED, "eq20", "the error of the log replacement", eq20, check_eq20,
              "mpmath, 30 digits: N_(d-1) = 10 .. 10^4, n_d / N_(d-1) from 1/10 to 1000",
              note="Eq. 20 itself writes the harmonic gap as the log gap plus O(1/(2N_(d-1)) - "
              "1/(2N_d)), whose sign inside O(.) is not a claim; the term is checked as the size "
              "and sign of the relaxation's error, the log gap minus the harmonic gap.",
              mutants=(mutant(eq20, 1 / (2 * N_prev) + 1 / (2 * N_d), "sign of 1/(2N_d) flipped"),
                       scaled(eq20, 2),
                       mutant(eq20, (N_d - N_prev) / (2 * N_prev**2), "n_d/(2 N_(d-1)^2), Eq. 21's last step"))),
        Claim(SEED, "eq21", "the error bound as a chain of equal orders", eq21, check_eq21,
              "mpmath: each term against ln gap - harmonic gap, N_(d-1) = 10^4, n_d / N_(d-1) from "
              "1/10 to 1000; term 1 against Eq. 20 (sympy.simplify)",
              correction=mutant(eq21, chain[:3], "corrected"),
              mutants=(mutant(eq21, (chain[0], chain[1], chain[3]), "n_d/(2 N_(d-1)^2) as the last step"),),
              note="1/(2N_(d-1)) - 1/(2N_d) = n_d/(2 N_(d-1) N_d) exactly; n_d/(2 N_(d-1)^2) is an "
              "upper bound, not the same order when n_d / N_(d-1) grows. Read as one-way O-bounds "
              "the chain holds; the text reads its last term as the error's order (\"The error "
              "is proportional to n_d\"), which it is not: the error tends to 1/(2N_(d-1)) as n_d "
              "grows.",
              cause="n_d/(2 N_(d-1)^2) bounds the error, it is not of its order"),
        Claim(SEED, "claim-no-ties", "with no ties (n_d in {0, 1}) the sum in Eq. 11 is 0 or "
              "1/N_d, evaluated directly: no approximation error", no_ties, check_no_ties,
              "exact rational sums, N_(d-1) = 0..59",
              mutants=(with_parameters(no_ties, "1/N_(d-1) for the one-item bin",
                                       **{"n_d = 1": 1 / (N_d_index - 1)}),
                       with_parameters(no_ties, "ln(N_d/N_(d-1)) for the one-item bin",
                                       **{"n_d = 1": sp.log(N_d_index / (N_d_index - 1))})),
              note="The sentence is about evaluating the sum, and that is exact. The relaxed AP_r "
              "(Eq. 13) uses ln(C_d/C_(d-1)) on every bin, since a continuous count cannot switch to "
              "1/N_d; its behaviour at one-item bins is claim-eq13-one-item-bin's."),
        Claim(SEED, "claim-eq11-tightened", "(11) can be tightened by including the 1/(2N) term",
              tightened, check_tightened, "mpmath, 30 digits, bins N_(d-1) >= 1 with n_d up to 10^4",
              mutants=(mutant(tightened, sp.log(N_d) - sp.log(N_prev) - 1 / (2 * N_d) + 1 / (2 * N_prev),
                              "1/(2N) terms with the wrong sign"),
                       mutant(tightened, sp.log(N_d) - sp.log(N_prev) + 1 / N_d - 1 / N_prev, "1/N for 1/(2N)")),
              note="At the first bin (N_(d-1) = 0) the 1/(2N_(d-1)) term diverges as ln N_(d-1) does; "
              "that bin is eq11's."),
        Claim(SEED, "claim-footnote-linear-discount", "the relaxation also applies to the linear "
              "discount D(t) = 1/t (footnote 1)", linear, check_linear_discount,
              "sympy.diff for the integral, float64 sums on bins N_(d-1) >= 1",
              mutants=(with_parameters(linear, "relaxed sum of 1/log2(t+1) kept",
                                       **{"relaxed sum": sp.log(2) * (sp.li(b + 1) - sp.li(a + 1))}),
                       with_parameters(linear, "limits shifted as in Eq. 14",
                                       **{"relaxed sum": sp.log(b + 1) - sp.log(a + 1)})),
              note="With D(t) = 1/t the relaxed sum is Eq. 11's ln(N_d/N_(d-1)), which diverges at the "
              "first bin as the logarithmic discount's Li(1) does (eq11, claim-eq16-first-bin); the "
              "footnote adds no problem of its own."),
        Claim(SEED, "claim-table-d-continuation", "the Sec. D table shows alpha -> oo above alpha = 40 "
              "at every bit length", table, check_table_d,
              "the printed table's own numbers (the experiment itself is not testable here)",
              mutants=(with_parameters(table, "rows swapped", **{"alpha = 40": table.value["alpha -> oo"],
                                                                 "alpha -> oo": table.value["alpha = 40"]}),
                       with_parameters(table, "48 bits read as 0.820",
                                       **{"alpha -> oo": (0.751, 0.804, 0.813, 0.820)})),
              note="Only the table's arithmetic is checked: every entry an AP_T and the continuation "
              "row higher in each column, its margin shrinking from 0.019 at 12 bits to 0.004 at 48. "
              "Whether the continuation method reproduces these gains needs CIFAR-10 (setting 1) and "
              f"the authors' TALR-AP training: not testable here. {PRINTED_RESULTS_ONLY}"),
        Claim(SEED, "eq26", "gradient of the relaxed distance", eq26, check_distance_gradient,
              "sympy.diff", mutants=(negated(eq26), mutant(eq26, -pj / 2, "phi_i -> phi_j"))),
        Claim(SEED, "eq34", "reordering the sums (outer index)", eq34, check_sum_index,
              "sympy.summation",
              correction=mutant(eq34, sp.Sum(T(d), (d, 0, 3)), "corrected"),
              mutants=(mutant(eq34, sp.Sum(T(d), (d, 1, 3)), "outer sum from d = 1"),),
              note="Eq. 34 sums over l while its summand is indexed by d; read sum_(d=0)^b as in "
              "Eq. 33 and 37.",
              cause="outer summation index printed as l"),
    ]  # fmt: skip
