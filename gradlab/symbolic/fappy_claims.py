"""Audit of FAPPY (Zhong, Li & Li): Eq. 1-7, Lemma 1 and its appendix, Fig. 2 and 4, Algorithm 1,
Tables 1-2.

The printed Eq. 3 kernel is one SymPy ``Piecewise``; every transcription below (Eq. 1-7 with
loops) lambdifies it. Gradients are central finite differences of that transcription (the
estimate is piecewise linear, so away from bin edges they are exact to rounding), not gradlab's
implementation.
"""

from __future__ import annotations

import functools
import itertools
import math
from collections.abc import Callable, Sequence
from dataclasses import replace

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
    numeric_agreement,
    symbolic_equality,
    undecided,
    with_parameters,
)

SEED = "004_e426679a66883031"

s, lo, mid, hi, width = sp.symbols("s b_(t-1) b_t b_(t+1) Delta", real=True)
EQ3 = sp.Piecewise(((s - lo) / width, (s >= lo) & (s <= mid)), ((hi - s) / width, (s >= mid) & (s <= hi)),
                   (0, True))  # fmt: skip
_weight_of = sp.lambdify((s, lo, mid, hi, width), EQ3, "math")
Nn, h_left, h_right, S_t, S_t1 = sp.symbols("|N| h_left h_right S_t S_(t+1)", positive=True)
EQ7_SIDE = h_left * S_t + h_right * S_t1  # per negative set: h_left sum_(u>=t) + h_right sum_(u>=t+1)
POSITIVE_WIDTH = sp.Symbol("Delta_(>0)", positive=True)
BINS = {lo: mid - POSITIVE_WIDTH, hi: mid + POSITIVE_WIDTH, width: POSITIVE_WIDTH}
"""The bins' definition (b_u = -1 + u Delta, Delta > 0) as substitutions: under it the audit proves
a mutant of Eq. 3 or of the appendix's gradient equal to the accepted form (a strict bound where
the kernel is continuous, or where an earlier piece already applies), so it is dropped, not killed."""


def kernel_weight(similarity: float, u: int, delta: float,
                  kernel: Callable[..., float] = _weight_of) -> float:  # fmt: skip
    """The weight of ``similarity`` on bin ``u`` (boundary ``b_u = -1 + u Delta``), Eq. 3.

    Args:
        similarity: a cosine in [-1, 1].
        u: the bin index, ``0..2/delta``.
        delta: the bin width Delta.
        kernel: ``kernel(s, b_(u-1), b_u, b_(u+1), Delta)``; Eq. 3's triangle by default.

    Example:
        >>> kernel_weight(0.1, 2, 0.5)  # b_2 = 0: 1 - 0.1 / 0.5
        0.8
    """
    return kernel(similarity, -1 + (u - 1) * delta, -1 + u * delta, -1 + (u + 1) * delta, delta)


def pair_bin(s_ij: float, delta: float) -> tuple[int, int]:
    """``(t, bins)``: the bin ``t`` with ``b_t <= s_ij < b_(t+1)`` (``s_ij = 1`` in the last
    cell) and the number of boundaries ``2/Delta + 1``.

    Example:
        >>> pair_bin(-0.5, 0.25), pair_bin(1.0, 0.25)
        ((2, 9), (7, 9))
    """
    bins = round(2 / delta) + 1
    return min(math.floor((s_ij + 1) / delta), bins - 2), bins


def negative_histogram(negatives: Sequence[float], delta: float,
                       normalizer: Callable[[int], float] | None = None,
                       kernel: Callable[..., float] = _weight_of) -> list[float]:  # fmt: skip
    """The histogram ``h^u`` of a negative set on the boundaries ``b_u`` (Eq. 4-5).

    Args:
        negatives: the negatives' similarities to the anchor.
        delta: the bin width Delta.
        normalizer: ``|N| -> scale`` (``1/|N|`` by default, a distribution).
        kernel: as in :func:`kernel_weight`.

    Example:
        >>> negative_histogram([-1.0, 0.5], 1.0)  # boundaries -1, 0, 1
        [0.5, 0.25, 0.25]
    """
    bins = round(2 / delta) + 1
    scale = (1 / len(negatives)) if normalizer is None else normalizer(len(negatives))
    return [scale * sum(kernel_weight(x, u, delta, kernel) for x in negatives) for u in range(bins)]


@functools.lru_cache(maxsize=64)
def _combiner(side: sp.Expr) -> Callable[..., float]:
    """Eq. 7's ``side`` lambdified once per expression (every call of a check reuses it)."""
    return sp.lambdify((h_left, h_right, S_t, S_t1), side, "math")


def pair_probability(s_ij, negatives_i, negatives_j, delta, side=EQ7_SIDE, normalizer=None,
                     heights=(0, 1), t=None):  # fmt: skip
    """``P_ij`` of Eq. 7 (the pair's heights times the negatives' mass at or above them, summed
    over the negative sets of i and of j): Eq. 1-7 transcribed.

    Args:
        s_ij: the pair's similarity.
        negatives_i, negatives_j: the similarities of the negatives of i and of j.
        delta: the bin width Delta.
        side: Eq. 7's combination of ``h_left, h_right, S_t, S_(t+1)`` for one negative set.
        normalizer: as in :func:`negative_histogram`.
        heights: the bins ``t + offset`` that carry ``h_left`` and ``h_right``.
        t: the pair's bin (``s_ij`` in ``[b_t, b_(t+1)]``, the lemma's assumption, both ends
            included); by default :func:`pair_bin`'s.

    Example:
        >>> pair_probability(0.1, [1.0, 1.0], [1.0], 0.25)  # every negative above the pair
        2.0
    """
    combine = _combiner(side)
    t = pair_bin(s_ij, delta)[0] if t is None else t
    left, right = kernel_weight(s_ij, t + heights[0], delta), kernel_weight(s_ij, t + heights[1], delta)
    total = 0.0
    for negatives in (negatives_i, negatives_j):
        h = negative_histogram(negatives, delta, normalizer)
        total += combine(left, right, sum(h[t:]), sum(h[t + 1 :]))
    return total


def negative_gradient(s_ij, s_ik, delta, count, step=1e-7):
    """dP_ij/ds_ik for one negative of i (the others far below), central differences.

    Args:
        s_ij: the pair's similarity.
        s_ik: the negative's similarity.
        delta: the bin width Delta.
        count: ``|N|``, the size of each negative set (the others sit at -0.999).
        step: the finite-difference step.

    Example:
        >>> round(negative_gradient(-0.675, -0.6, 0.25, 4), 6)  # h_right / (|N| Delta)
        0.3
    """
    others = [-0.999] * (count - 1)
    plus = pair_probability(s_ij, [s_ik + step, *others], [-0.999] * count, delta)
    minus = pair_probability(s_ij, [s_ik - step, *others], [-0.999] * count, delta)
    return (plus - minus) / (2 * step)


# --- checks ----------------------------------------------------------------------------------


def check_kernel(form: Form) -> Verdict:
    """Eq. 3: the weights of every s in [-1, 1] over all bins sum to 1 and reproduce s."""
    kernel = sp.lambdify((s, lo, mid, hi, width), form.value, "math")
    worst = 0.0
    for delta in (2.0, 0.5, 0.125):
        bins = round(2 / delta) + 1
        for x in np.linspace(-1, 1, 101):
            weights = [kernel_weight(x, u, delta, kernel) for u in range(bins)]
            worst = max(worst, abs(sum(weights) - 1),
                        abs(sum(w * (-1 + u * delta) for u, w in enumerate(weights)) - x))  # fmt: skip
    return decide(worst < 1e-12, f"the weights of every s sum to 1 and their mean boundary is s "
                  f"(max error {worst:.1e}, Delta = 2, 1/2, 1/8).",
                  f"the weights miss partition of unity or the mean by {worst:.3g}.")  # fmt: skip


def check_heights(form: Form) -> Verdict:
    """Eq. 1-2: the pair's heights on b_t, b_(t+1) sum to 1 and put its mean at s_ij."""
    worst = 0.0
    for delta in (0.5, 0.25):
        for x in np.linspace(-0.99, 0.99, 37):
            t, _ = pair_bin(x, delta)
            bins = [sp.sympify(form.value[key]).subs(sp.Symbol("t"), t) for key in ("h_left bin", "h_right bin")]
            indices = all(b.is_integer for b in bins)
            if not indices:
                return decide(indices, "", f"the heights' bins {bins} at t = {t} are not bin indices.")
            left, right = kernel_weight(x, int(bins[0]), delta), kernel_weight(x, int(bins[1]), delta)
            worst = max(worst, abs(left + right - 1), abs(left * (-1 + t * delta) + right * (-1 + (t + 1) * delta) - x))
    return decide(worst < 1e-12, f"h_left + h_right = 1 and h_left b_t + h_right b_(t+1) = s_ij (max error {worst:.1e}).",
                  f"the heights miss s_ij's mass or mean by {worst:.3g}.")  # fmt: skip


def check_negative_histogram(
    form: Form, histogram: Callable[..., list[float]] = negative_histogram
) -> Verdict:
    """Eq. 4-5: each negative histogram is a distribution whose mean is the negatives' mean.

    Args:
        form: the printed normaliser, in ``Nn``.
        histogram: ``histogram(negatives, delta, normalizer)``, :func:`negative_histogram` by
            default (the check of another histogram's mass and mean).

    Example:
        >>> check_negative_histogram(Form(1 / Nn)).verdict
        'holds'
    """
    normalizer = sp.lambdify(Nn, form.value, "math")
    rng = np.random.default_rng(4)
    worst = 0.0
    for _ in range(10):
        negatives = rng.uniform(-1, 1, int(rng.integers(1, 9))).tolist()
        h = histogram(negatives, 0.25, normalizer)
        worst = max(worst, abs(sum(h) - 1), abs(sum(w * (-1 + u * 0.25) for u, w in enumerate(h)) - np.mean(negatives)))
    return decide(worst < 1e-12, f"sum_u h^u = 1 and sum_u h^u b_u = mean s over N_ij (max error {worst:.1e}).",
                  f"the histogram misses mass or mean by {worst:.3g}.")  # fmt: skip


def check_probability_definition(form: Form) -> Verdict:
    """Eq. 6 defines a probability: is it in [0, 1] for every configuration?"""
    value = sp.lambdify(sp.symbols("P_i P_j"), form.value, "math")
    rng = np.random.default_rng(6)
    largest = 0.0
    for _ in range(200):
        s_ij = rng.uniform(-1, 1)
        neg_i, neg_j = rng.uniform(-1, 1, 7), rng.uniform(-1, 1, 7)
        largest = max(largest, value(np.mean(neg_i >= s_ij), np.mean(neg_j >= s_ij)))
    return decide(largest <= 1.0, f"in [0, 1] on 200 random configurations (max {largest:.3f}).",
                  f"reaches {largest:.3f} > 1 on 200 random configurations: a sum of two "
                  "probabilities, not a probability.")  # fmt: skip


def discrete_truth(s_ij, negatives, delta):
    """P(neg >= pair) for the kernel-discretised pair and negatives, by a double loop.

    Example:
        >>> discrete_truth(0.0, [0.5], 1.0)  # pair on b_1 = 0, the negative half on b_1, b_2
        1.0
    """
    t, bins = pair_bin(s_ij, delta)
    pair = {t: kernel_weight(s_ij, t, delta), t + 1: kernel_weight(s_ij, t + 1, delta)}
    h = negative_histogram(negatives, delta)
    return sum(p * h[u] for a, p in pair.items() for u in range(bins) if u >= a)


def check_eq7(form: Form) -> Verdict:
    """Eq. 7: the discrete P(neg >= pair) at Delta = 1/4, and Eq. 6 as Delta -> 0."""
    rng = np.random.default_rng(0)
    cases = [(rng.uniform(-0.9, 0.9), rng.uniform(-1, 1, 5).tolist(), rng.uniform(-1, 1, 5).tolist())
             for _ in range(15)]  # fmt: skip
    exact = numeric_agreement(
        lambda c: pair_probability(c[0], c[1], c[2], 0.25, form.value),
        lambda c: discrete_truth(c[0], c[1], 0.25) + discrete_truth(c[0], c[2], 0.25),
        cases, tolerance=1e-12)  # fmt: skip
    return all_hold([exact, eq6_limit(form.value, rng)], "discrete P(s_neg >= s_pair) at Delta = 1/4, "
                    "then Delta = 2^-8 against the empirical Eq. 6: ")  # fmt: skip


def eq6_limit(side, rng) -> Verdict:
    """Eq. 7 with ``side`` at Delta = 2^-8 against the empirical Eq. 6 (the shares of negatives
    at or above s_ij) on 5 cases of 30 + 30 negatives drawn from ``rng``, within 0.04.

    Example:
        >>> import numpy as np
        >>> eq6_limit(EQ7_SIDE, np.random.default_rng(0)).verdict
        'holds'
    """
    fine = [(rng.uniform(-0.9, 0.9), rng.uniform(-1, 1, 30), rng.uniform(-1, 1, 30)) for _ in range(5)]
    return numeric_agreement(
        lambda c: pair_probability(c[0], c[1].tolist(), c[2].tolist(), 2.0 / 2**9, side),
        lambda c: np.mean(c[1] >= c[0]) + np.mean(c[2] >= c[0]), fine, tolerance=0.04)  # fmt: skip


def support_mismatches(form: Form, delta: float = 0.25, count: int = 3,
                       gradient: Callable[[float, float, float, int], float] = negative_gradient,
                       ) -> list[tuple[int, float, bool]]:  # fmt: skip
    """Where the printed support of dP/ds_ik disagrees with ``gradient``.

    ``s_ij`` sits in bin ``t = 4`` (0.3 of the way up); ``s_ik`` is sampled at 0.2 and 0.7 of the
    bins ``t + offset``, offsets -3..3, inside (-1, 1). A gradient counts as non-zero above 1e-6.

    Args:
        form: pieces ``"from bin"``, ``"to bin"``: the printed support is offsets in
            ``[from, to)``.
        delta: the bin width Delta.
        count: ``|N|``, passed to ``gradient``.
        gradient: ``gradient(s_ij, s_ik, delta, count)``, :func:`negative_gradient` by default.

    Returns:
        ``(offset, position in bin, gradient non-zero)`` wherever they disagree.

    Example:
        >>> support_mismatches(Form({"from bin": -1, "to bin": 1}))
        []
    """
    s_ij = -1 + 4 * delta + 0.3 * delta  # inside bin t = 4, h_left and h_right both > 0
    lower, upper = form.value["from bin"], form.value["to bin"]
    mismatches = []
    for offset in range(-3, 4):
        for fraction in (0.2, 0.7):
            s_ik = -1 + (4 + offset + fraction) * delta
            if not -1 < s_ik < 1:
                continue
            nonzero = abs(gradient(s_ij, s_ik, delta, count)) > 1e-6
            claimed = lower <= offset < upper
            if nonzero != claimed:
                mismatches.append((offset, fraction, nonzero))
    return mismatches


def check_support(
    form: Form, gradient: Callable[[float, float, float, int], float] = negative_gradient
) -> Verdict:
    """The appendix's support of dP/ds_ik (bins ``[from, to)`` around the pair's) against
    ``gradient`` (:func:`negative_gradient` by default) at Delta = 1/4, ``|N| = 3``.

    Example:
        >>> check_support(Form({"from bin": -1, "to bin": 1})).verdict
        'holds'
    """
    mismatches = support_mismatches(form, gradient=gradient)
    return decide(not mismatches,
                  "dP/ds_ik != 0 exactly on the printed bins (finite differences, Delta = 1/4, |N| = 3).",
                  "finite differences disagree with the printed support at (bin offset from b_t, "
                  f"position in bin, gradient non-zero) = {mismatches}.")  # fmt: skip


S_IJ, S_IK = sp.symbols("s_ij s_ik", real=True)
STRICT_CORRECTED = sp.Or(sp.And(S_IK >= mid, S_IK <= hi, S_IJ > mid),
                         sp.And(S_IK >= lo, S_IK <= mid, S_IJ < hi))  # fmt: skip
"""Where ``P_ij^Delta`` moves with ``s_ik``, given ``s_ij`` in ``[b_t, b_(t+1)]`` (the lemma's
premise): the pair's bin while ``h_right > 0``, the bin below while ``h_left > 0``, both ends of
each included."""


def moves_with_negative(s_ij: float, s_ik: float, t: int, delta: float, count: int = 3,
                        step: float = 1e-7) -> bool:  # fmt: skip
    """Does Eq. 7 (pair in bin ``t``) change with ``s_ik`` on either side of it?

    One-sided differences of :func:`pair_probability` with the pair's bin fixed at ``t``:
    at a bin boundary (a kink of the piecewise-linear estimate) ``dP/ds_ik`` does not exist,
    and ``P`` moves with ``s_ik`` when either one-sided slope exceeds 1e-6. The other
    ``count - 1`` negatives of i and all of j sit at -0.999.

    Example:
        >>> moves_with_negative(0.0, 0.0, 4, 0.25)  # h_right = 0, but the bin below moves
        True
        >>> moves_with_negative(0.25, -0.1, 4, 0.25)  # s_ij = b_(t+1): h_left = 0
        False
    """
    others, far = [-0.999] * (count - 1), [-0.999] * count

    def value(x: float) -> float:
        return pair_probability(s_ij, [x, *others], far, delta, t=t)

    centre = value(s_ik)
    return max(abs(value(s_ik + step) - centre), abs(centre - value(s_ik - step))) / step > 1e-6


def strict_mismatches(form: Form, delta: float = 0.125) -> list[tuple[float, float, bool]]:
    """Where the condition ``form.value`` (in ``s_ij, s_ik, b_(t-1), b_t, b_(t+1)``) disagrees
    with :func:`moves_with_negative`.

    The pair's bin is ``t = 10`` (``b_t = 1/4`` at Delta = 1/8: no boundary of the condition is
    0, so a sign slip shows); ``s_ij`` sits at 0, 0.3, 0.7 and 1 of it (both ends: the lemma
    assumes ``s_ij`` in ``[b_t, b_(t+1)]``), ``s_ik`` at 0, 0.2 and 0.7 of the bins
    ``t - 3 .. t + 3`` (every boundary a kink).

    Returns:
        ``(s_ij, s_ik, P moves)`` wherever they disagree (a condition that does not evaluate to
        true or false disagrees everywhere).

    Example:
        >>> strict_mismatches(Form(STRICT_CORRECTED))
        []
    """
    t = 10
    bounds = {lo: -1 + (t - 1) * delta, mid: -1 + t * delta, hi: -1 + (t + 1) * delta}
    mismatches = []
    for f_ij in (0.0, 0.3, 0.7, 1.0):
        s_ij = bounds[mid] + f_ij * delta
        for offset in range(-3, 4):
            for f_ik in (0.0, 0.2, 0.7):
                s_ik = -1 + (t + offset + f_ik) * delta
                moves = moves_with_negative(s_ij, s_ik, t, delta)
                claimed = sp.sympify(form.value).subs({**bounds, S_IJ: s_ij, S_IK: s_ik})
                if claimed not in (sp.true, sp.false) or bool(claimed) != moves:
                    mismatches.append((round(s_ij, 6), round(s_ik, 6), moves))
    return mismatches


def check_strict_condition(form: Form) -> Verdict:
    """The appendix's "strictly speaking" condition, its interval ends included: where does
    ``P_ij^Delta`` move with ``s_ik``?

    Example:
        >>> check_strict_condition(Form(STRICT_CORRECTED)).verdict
        'holds'
    """
    mismatches = strict_mismatches(form)
    return decide(not mismatches,
                  "P_ij^Delta moves with s_ik exactly where the condition holds, at every bin "
                  "boundary and inside every bin (one-sided differences, Delta = 1/8, |N| = 3, "
                  "s_ij at both ends of its bin and inside it).",
                  f"one-sided differences disagree at {len(mismatches)} of 84 points, e.g. "
                  f"(s_ij, s_ik, P moves) = {mismatches[:4]}.")  # fmt: skip


def _gradient_cases(offsets: Sequence[float]) -> list[tuple]:
    """``(s_ij, s_ik, Delta, |N|, t)`` for s_ik at ``offsets`` (in bins) from the pair's bin
    start, three pairs at each of (Delta, |N|) = (1/2, 3), (1/4, 5), inside (-1, 1)."""
    cases = []
    for delta, count in ((0.5, 3), (0.25, 5)):
        for s_ij in (0.1, 0.62, -0.4):
            t, _ = pair_bin(s_ij, delta)
            for offset in offsets:
                s_ik = -1 + (t + offset) * delta
                if -1 < s_ik < 1:
                    cases.append((s_ij, s_ik, delta, count, t))
    return cases


def check_gradient_value(form: Form) -> Verdict:
    """The appendix's dP/ds_ik against finite differences, |N| Delta != 1."""
    value = sp.lambdify((s, mid, h_left, h_right, width, Nn), form.value, "math")
    cases = _gradient_cases((-0.7, -0.2, 0.3, 0.8, 1.4))

    def printed(c):
        s_ij, s_ik, delta, count, t = c
        b_t = -1 + t * delta
        right = (s_ij - b_t) / delta
        return value(s_ik, b_t, 1 - right, right, delta, count)

    return numeric_agreement(printed, lambda c: negative_gradient(*c[:4]), cases, tolerance=1e-6)


def check_pair_gradient(
    form: Form, probability: Callable[..., float] = pair_probability
) -> Verdict:
    """The appendix's dP_ij/ds_ij in ``h_i^t, h_j^t, Delta`` against central differences of
    ``probability`` (:func:`pair_probability` by default) at 8 drawn pairs.

    Example:
        >>> hi, hj = sp.symbols("h_i^t h_j^t")
        >>> check_pair_gradient(Form(-(hi + hj) / width)).verdict
        'holds'
    """
    value = sp.lambdify(sp.symbols("h_i^t h_j^t Delta"), form.value, "math")
    rng = np.random.default_rng(2)
    cases = []
    for delta in (0.25, 0.5):
        for _ in range(4):
            cases.append((rng.uniform(-0.8, 0.8), rng.uniform(-1, 1, 4).tolist(),
                          rng.uniform(-1, 1, 4).tolist(), delta))  # fmt: skip

    def measured(c):
        s_ij, neg_i, neg_j, delta = c
        step = 1e-7
        return (probability(s_ij + step, neg_i, neg_j, delta)
                - probability(s_ij - step, neg_i, neg_j, delta)) / (2 * step)  # fmt: skip

    def printed(c):
        s_ij, neg_i, neg_j, delta = c
        t, _ = pair_bin(s_ij, delta)
        return value(negative_histogram(neg_i, delta)[t], negative_histogram(neg_j, delta)[t], delta)

    return numeric_agreement(printed, measured, cases, tolerance=1e-6)


def check_l2(form: Form) -> Verdict:
    x = sp.symbols("x1:4", real=True)
    y = sp.symbols("y1:4", real=True)
    nx, ny = sp.sqrt(sum(v**2 for v in x)), sp.sqrt(sum(v**2 for v in y))
    squared = sum((a / nx - b / ny) ** 2 for a, b in zip(x, y, strict=True))
    cosine = sum(a * b for a, b in zip(x, y, strict=True)) / (nx * ny)
    return symbolic_equality(form.value.subs(s, cosine) ** 2, squared, [*x, *y])


def check_delta_l2(form: Form) -> Verdict:
    derivative = sp.diff(form.value.subs(hi, mid + width), width)
    values = [derivative.subs({mid: sp.Rational(k, 10) - 1, width: sp.Rational(1, 10)}) for k in range(0, 19)]
    return decide(all(v > 0 for v in values), "dDelta^L2/dDelta > 0 at every b_t on a grid of [-1, 0.8].",
                  f"dDelta^L2/dDelta is not positive on the grid (min {min(float(v) for v in values):.3g}).")  # fmt: skip


def check_caption(form: Form) -> Verdict:
    """Fig. 4: s_ij in [b_t, b_(t+1)] must map into [d_(t+1), d_t] with d_t - d_(t+1) = Delta^L2 > 0."""
    d_t = sp.lambdify((mid, hi), form.value["d_t"], "math")
    d_t1 = sp.lambdify((mid, hi), form.value["d_(t+1)"], "math")
    problems = []
    for b_t in (-0.75, -0.25, 0.25):
        b_t1 = b_t + 0.25
        upper, lower = d_t(b_t, b_t1), d_t1(b_t, b_t1)
        delta_l2 = math.sqrt(2 - 2 * b_t) - math.sqrt(2 - 2 * b_t1)  # the appendix's Delta^L2
        if lower > upper + 1e-12:  # ends swapped: no distance lies in it, said once
            problems.append(f"at b_t = {b_t:g} the printed [d_(t+1), d_t] = [{lower:.3f}, "
                            f"{upper:.3f}] is empty (its ends in reverse order): s = {b_t:.3f} -> "
                            f"d = {math.sqrt(2 - 2 * b_t):.3f} and s = {b_t1:.3f} -> d = "
                            f"{math.sqrt(2 - 2 * b_t1):.3f} lie outside it")  # fmt: skip
        for x in np.linspace(b_t, b_t1, 5) if lower <= upper + 1e-12 else ():
            d = math.sqrt(2 - 2 * x)
            if not lower - 1e-12 <= d <= upper + 1e-12:
                problems.append(f"s = {x:.3f} -> d = {d:.3f} not in [d_(t+1), d_t] = "
                                f"[{lower:.3f}, {upper:.3f}]")  # fmt: skip
        if abs((upper - lower) - delta_l2) > 1e-12:
            problems.append(f"d_t - d_(t+1) = {upper - lower:.3f}, Delta^L2 = {delta_l2:.3f}")
    return decide(not problems, "every s_ij in [b_t, b_(t+1)] maps into [d_(t+1), d_t], and "
                  "d_t - d_(t+1) is the appendix's Delta^L2.",
                  "; ".join(problems[:3]) + ".")  # fmt: skip


L_run, L_scale, pairs_all, pairs_active = sp.symbols("L L_Delta count_positive_pairs count_active")


def run_recurrence(recurrence: sp.Expr, scale_sums: Sequence[float],
                   active_counts: Sequence[int], positive_pairs: int) -> float:  # fmt: skip
    """Algorithm 1's loss recurrence over the scales: ``L <- recurrence(L, L_Delta, pairs,
    active)`` from ``L = 0``, one step per scale.

    Example:
        >>> run_recurrence((L_run + L_scale) / 2, [1.0, 2.0], [1, 1], 4)  # (0 + 1)/2, then (0.5 + 2)/2
        1.25
    """
    step = sp.lambdify((L_run, L_scale, pairs_all, pairs_active), recurrence, "math")
    loss = 0.0
    for total, active in zip(scale_sums, active_counts, strict=True):
        loss = step(loss, total, positive_pairs, active)
    return loss


def check_fusion_weights(form: Form) -> Verdict:
    weights = []
    for index in range(4):
        sums = [1.0 if k == index else 0.0 for k in range(4)]
        weights.append(run_recurrence(form.value, sums, [1] * 4, 1))
    ratios = [weights[k + 1] / weights[k] for k in range(3)]
    return decide(all(abs(r - 2.0) < 1e-12 for r in ratios),
                  f"Delta = 2, 1, 1/2, 1/4 get the weights {weights}: each doubling of Delta halves it.",
                  f"Delta = 2, 1, 1/2, 1/4 get the weights {weights} (ratios {ratios}).")  # fmt: skip


def _batch():
    """One batch: 8 random unit vectors in 3-d (4 classes), their cosines and positive pairs."""
    rng = np.random.default_rng(8)
    labels = [0, 0, 0, 1, 1, 2, 2, 3]
    vectors = rng.normal(size=(8, 3))
    vectors /= np.linalg.norm(vectors, axis=1, keepdims=True)
    sims = vectors @ vectors.T
    pairs = [(i, j) for i in range(8) for j in range(i + 1, 8) if labels[i] == labels[j]]
    return labels, sims, pairs


def _batch_scales():  # not cached: a cache filled before a mutation run forks hides _batch
    """Per-scale sums of P over active pairs, active counts and P per pair, for one batch."""
    labels, sims, pairs = _batch()
    deltas = [2.0, 1.0, 0.5, 0.25, 0.125]
    per_pair, sums, active = {}, [], []
    for delta in deltas:
        total, count = 0.0, 0
        for i, j in pairs:
            negatives = [k for k in range(8) if labels[k] != labels[i]]
            p = pair_probability(sims[i, j], sims[i, negatives].tolist(), sims[j, negatives].tolist(), delta)
            on = 1.0 - sims[i, j] >= delta
            per_pair[(i, j, delta)] = p * on
            total += p * on
            count += on
        sums.append(total)
        active.append(count)
    return pairs, deltas, per_pair, sums, active


def check_normalization(form: Form) -> Verdict:
    """"The average loss on each positive pair": mean over pairs of sum_Delta alpha_Delta P."""
    pairs, deltas, per_pair, sums, active = _batch_scales()
    got = run_recurrence(form.value, sums, active, len(pairs))
    alpha = {delta: 0.5 * deltas[-1] / delta for delta in deltas}  # smallest 1/2, halving
    truth = sum(alpha[d] * per_pair[(i, j, d)] for i, j in pairs for d in deltas) / len(pairs)
    return decide(abs(got - truth) < 1e-12,
                  f"the recurrence gives {got:.6f} = the mean fused loss over the {len(pairs)} positive "
                  f"pairs ({truth:.6f}; active pairs per scale {active}).",
                  f"the recurrence gives {got:.6f}, the mean fused loss over the {len(pairs)} positive "
                  f"pairs is {truth:.6f} (active pairs per scale {active}).")  # fmt: skip


def check_guard(form: Form) -> Verdict:
    """Algorithm 1's first scale: which ``s_ij`` pass line 5 at ``Delta_cur``, and what it adds.

    ``form.value``: ``"guard"`` (a relation in ``s`` and ``Delta``), ``"Delta_cur"`` and
    ``"only s_ij"``. Holds when the guard at ``Delta_cur`` admits exactly ``s_ij = only s_ij``
    on [-1, 1] (a null set: no positive pair of a batch of random unit vectors passes, so the
    scale adds 0), while the next three scales ``Delta_cur / 2, / 4, / 8`` admit sets of
    positive length. Only cosines in [-1, 1] count: what the guard admits above 1 does not.

    Raises:
        ValueError: the guard has symbols other than ``s`` and ``Delta`` (a claim's record
            rejects such a form as not evaluable).

    Example:
        >>> check_guard(Form({"guard": 1 - s >= width, "Delta_cur": 2, "only s_ij": -1})).verdict
        'holds'
    """
    guard, first = form.value["guard"], sp.sympify(form.value["Delta_cur"])
    extra = guard.free_symbols - {s, width}
    if extra:
        raise ValueError(f"the guard has symbols other than s and Delta: {sorted(map(str, extra))}")
    admitted = {d: sp.solveset(guard.subs(width, d), s, sp.Interval(-1, 1))
                for d in (first, first / 2, first / 4, first / 8)}  # fmt: skip
    lengths = {str(d): a.measure for d, a in admitted.items()}
    _, sims, pairs = _batch()
    passes = sp.lambdify((s, width), guard, "math")
    active = sum(bool(passes(float(sims[i, j]), float(first))) for i, j in pairs)
    single = admitted[first] == sp.FiniteSet(form.value["only s_ij"])
    later = all(length > 0 for d, length in lengths.items() if d != str(first))
    return decide(single and later and active == 0,
                  f"at Delta_cur = {first} line 5 admits only s_ij = {form.value['only s_ij']}, a "
                  f"null set ({active} of the {len(pairs)} positive pairs of a batch of 8 random "
                  "unit vectors pass), so that scale adds 0 to L; the next scales admit s_ij in "
                  f"sets of length {', '.join(str(v) for d, v in lengths.items() if d != str(first))}.",
                  f"line 5 admits {admitted[first]} at Delta_cur = {first} ({active} of "
                  f"{len(pairs)} positive pairs of the batch), not only s_ij = "
                  f"{form.value['only s_ij']}; admitted lengths per Delta_cur: {lengths}.")  # fmt: skip


def edge_values(normalizer: Callable[[int], float]) -> list[float]:
    """Eq. 7 with ``normalizer`` at the corners: ``s_ij`` in (-1, -0.99, 0.999, 1), one negative
    at -1, 0 or 1 in each set, Delta in (2, 1/4); NaN where the normaliser divides by zero.

    Example:
        >>> len(edge_values(lambda n: 1 / n))
        24
    """
    values = []
    for s_ij, negative, delta in itertools.product((-1.0, -0.99, 0.999, 1.0), (-1.0, 0.0, 1.0), (2.0, 0.25)):
        try:
            values.append(pair_probability(s_ij, [negative], [negative], delta, normalizer=normalizer))
        except ZeroDivisionError:
            values.append(math.nan)
    return values


def check_edges(form: Form) -> Verdict:
    normalizer = sp.lambdify(Nn, form.value, "math")
    values = edge_values(normalizer)
    good = all(math.isfinite(v) and 0.0 <= v <= 2.0 for v in values)
    out_of_range = any(math.isfinite(v) and not 0.0 <= v <= 2.0 for v in values)
    return decide(good, f"Eq. 1-7 stay finite and in [0, 2] at s_ij in {{-1, -0.99, 0.999, 1}}, one negative, "
                  f"all other bins empty ({len(values)} cases).",
                  f"non-finite or out-of-range values at the edges: {values[:6]}...",
                  failure="wrong-value" if out_of_range else "undefined")  # fmt: skip


def check_empty_negative_set(form: Form) -> Verdict:
    """Eq. 4-5's normaliser and Algorithm 1's division, for a batch of one class (no negatives)
    and one without positive pairs; a division undefined there gives NaN. Each is read with the
    other's symbols at values of their own (|N| = 3, L_Delta = 0.7, 3 positive pairs)."""
    arguments = (Nn, L_scale, pairs_all)
    normalizer = sp.lambdify(arguments, form.value["h normaliser"], "math")
    division = sp.lambdify(arguments, form.value["line 10"], "math")
    outcomes = []
    for call in (lambda: normalizer(0, 0.7, 3) * 0.0, lambda: division(3, 0.0, 0)):
        try:
            outcomes.append(float(call()))
        except (ArithmeticError, ValueError):  # a division by zero, a log of zero
            outcomes.append(math.nan)
    # it fails only where a division gives no finite number: undefined there
    return decide(all(math.isfinite(v) for v in outcomes),
                  f"defined with |N_ij| = 0 and no positive pairs: {outcomes}.",
                  f"with |N_ij| = 0 (one class) or no positive pairs (singletons) the printed divisions "
                  f"give {outcomes}.", failure="undefined")  # fmt: skip


Delta_min = sp.Symbol("Delta_min", positive=True)
FIG5_RINGS = {"near": 0.2, "far": -0.6}
"""Fig. 5's rings as two negatives of a pair at s_ij = 0.3: one inside the finest scale's
support, one reached only by Delta = 1 and 2 (the easier hard level)."""


def ring_weights(alpha: sp.Expr, s_ij: float = 0.3, finest: float = 0.25) -> dict[str, float]:
    """The fused loss's gradient weight on each of :data:`FIG5_RINGS`: ``sum_Delta alpha(Delta)
    |dP^Delta/ds_ik|`` over Delta = 2, 1, 1/2, 1/4 (Delta_min = 1/4), 3 negatives per side.

    Example:
        >>> weights = ring_weights(Delta_min / (2 * width))
        >>> weights["near"] > weights["far"]
        True
    """
    weight = sp.lambdify((width, Delta_min), alpha, "math")
    deltas = [finest * 2**k for k in range(4)]
    return {ring: sum(weight(d, finest) * abs(negative_gradient(s_ij, s_ik, d, 3)) for d in deltas)
            for ring, s_ik in FIG5_RINGS.items()}  # fmt: skip


def check_fig5(form: Form) -> Verdict:
    """Fig. 5's caption: which ring of negatives the fused loss weighs most.

    ``form.value``: ``"alpha"`` (a scale's weight in ``Delta`` and ``Delta_min``) and
    ``"farther ring heavier"`` (+1 if the farthest ring gets the most weight, -1 if the nearest).
    Holds when ``alpha`` gives Algorithm 1's weights (lines 10-11 run on one-hot scale sums)
    and the sign is that of :func:`ring_weights`' far minus near.

    Example:
        >>> check_fig5(Form({"alpha": Delta_min / (2 * width), "farther ring heavier": -1})).verdict
        'holds'
    """
    weight = sp.lambdify((width, Delta_min), form.value["alpha"], "math")
    deltas = [2.0, 1.0, 0.5, 0.25]
    algorithm = [run_recurrence((L_run + L_scale / pairs_all) / 2,
                                [1.0 if k == index else 0.0 for k in range(4)], [1] * 4, 1)
                 for index in range(4)]  # fmt: skip
    stated = [float(weight(d, 0.25)) for d in deltas]
    gap = max(abs(a - b) for a, b in zip(stated, algorithm, strict=True))
    if gap > 1e-15:
        return decide(gap <= 1e-15, "", f"alpha gives the weights {stated} to Delta = 2 .. 1/4; "
                      f"Algorithm 1 gives {algorithm}.")  # fmt: skip
    rings = {1: "farthest", -1: "nearest"}
    heavier = form.value["farther ring heavier"]
    if heavier not in rings:
        return decide(heavier in rings, "", f"'farther ring heavier' is {heavier}, not +1 (the "
                      "farthest ring weighs most) or -1 (the nearest).")  # fmt: skip
    weights = ring_weights(form.value["alpha"])
    sign = 1 if weights["far"] > weights["near"] else -1
    text = (f"with Algorithm 1's weights {algorithm} (Delta = 2 .. 1/4) a negative at s_ik = "
            f"{FIG5_RINGS['near']} of a pair at s_ij = 0.3 gets the gradient weight "
            f"{weights['near']:.3f}, one at s_ik = {FIG5_RINGS['far']} (reached only by Delta = 1, "
            f"2) {weights['far']:.3f}: the {rings[sign]} ring weighs most")
    return decide(heavier == sign, text + ".", text + f", not the {rings[heavier]}.")


# --- second conditions: what the checks above do not pin, so that slips of a form are rejected --


def check_pooled_rate(form: Form) -> Verdict:
    """Eq. 6 (corrected) as the false positive rate of the pair: the share of its 7 + 7 pooled
    negatives at or above s_ij, on 200 random configurations (NumPy's ``default_rng(6)`` draws,
    per configuration, s_ij and then the 7 negatives of i and the 7 of j, all uniform on
    [-1, 1]).

    Example:
        >>> check_pooled_rate(Form((sp.Symbol("P_i") + sp.Symbol("P_j")) / 2)).verdict
        'holds'
    """
    value = sp.lambdify(sp.symbols("P_i P_j"), form.value, "math")
    rng = np.random.default_rng(6)
    cases = []
    for _ in range(200):
        s_ij = rng.uniform(-1, 1)
        cases.append((s_ij, rng.uniform(-1, 1, 7), rng.uniform(-1, 1, 7)))
    return numeric_agreement(lambda c: value(np.mean(c[1] >= c[0]), np.mean(c[2] >= c[0])),
                             lambda c: np.mean(np.concatenate([c[1], c[2]]) >= c[0]), cases,
                             tolerance=1e-12)  # fmt: skip


def check_distance_sign(form: Form) -> Verdict:
    """d_xy^L2 is a distance: non-negative at every cosine s in [-1, 1] (9 points).

    Example:
        >>> check_distance_sign(Form(sp.sqrt(2 - 2 * s))).verdict
        'holds'
    """
    value = sp.lambdify(s, form.value, "math")
    lowest = min(float(value(x)) for x in np.linspace(-1, 1, 9))
    return decide(lowest >= 0, f"non-negative on [-1, 1] (min {lowest:.3g}).",
                  f"negative on [-1, 1] (min {lowest:.3g}): not a distance.")  # fmt: skip


def check_delta_l2_vectors(form: Form) -> Verdict:
    """Delta^L2 against the distances of real unit vectors: ``|u - v(b_t)| - |u - v(b_(t+1))|``
    with ``cos(u, v(b)) = b``, float64, at 8 bins: ``b_t = -0.9, -0.5, 0, 0.4`` with
    ``b_(t+1) = b_t + 0.05`` and ``b_t + 0.3``.

    Example:
        >>> check_delta_l2_vectors(Form(sp.sqrt(2 - 2 * mid) - sp.sqrt(2 - 2 * hi))).verdict
        'holds'
    """
    value = sp.lambdify((mid, hi), form.value, "math")

    def distance(b: float) -> float:
        return float(np.linalg.norm(np.array([1.0, 0.0]) - np.array([b, math.sqrt(1 - b * b)])))

    cases = [(b, b + d) for b in (-0.9, -0.5, 0.0, 0.4) for d in (0.05, 0.3)]
    return numeric_agreement(lambda c: value(*c), lambda c: distance(c[0]) - distance(c[1]),
                             cases, tolerance=1e-12)  # fmt: skip


def check_fusion_average(form: Form) -> Verdict:
    """Lines 10-11 per positive pair: one-hot scale sums over 1 and over 3 positive pairs get
    the weights 1/16, 1/8, 1/4, 1/2 (Delta = 2 .. 1/4) divided by the pair count (one active
    pair per scale, so the active count does not enter).

    Example:
        >>> check_fusion_average(Form((L_run + L_scale / pairs_all) / 2)).verdict
        'holds'
    """
    worst = 0.0
    for count in (1, 3):
        for index in range(4):
            sums = [1.0 if k == index else 0.0 for k in range(4)]
            got = run_recurrence(form.value, sums, [1] * 4, count)
            worst = max(worst, abs(got - 2.0 ** (index - 4) / count))
    return decide(worst < 1e-15, "the finest scale weighs 1/2 and each coarser one half as much, "
                  "per positive pair.",
                  f"the weights per positive pair miss 2^-(4 - k) / pairs by {worst:.3g}.")  # fmt: skip


def check_bottom_corner(form: Form) -> Verdict:
    """At s_ij = -1 every negative is at or above the pair: Eq. 7 with the form's normaliser is
    2 (1 per side) for 1, 2 and 3 negatives per side.

    Example:
        >>> check_bottom_corner(Form(1 / Nn)).verdict
        'holds'
    """
    normalizer = sp.lambdify(Nn, form.value, "math")
    values = [pair_probability(-1.0, [-0.3, 0.2, 0.9][:n], [0.6, -0.7, 0.1][:n], 0.25,
                               normalizer=normalizer) for n in (1, 2, 3)]  # fmt: skip
    return decide(all(abs(v - 2) < 1e-12 for v in values),
                  "P_ij = 2 at s_ij = -1 for 1, 2 and 3 negatives per side.",
                  f"P_ij at s_ij = -1 for 1, 2, 3 negatives per side: {values}, not 2.")  # fmt: skip


def check_divisions_elsewhere(form: Form) -> Verdict:
    """The guarded divisions of Eq. 4-5 and line 10: the mean where there is something to
    average (|N| = 1..5; 1..4 positive pairs with scale totals 0.7 and 2.5), 0 where there is
    nothing (the normaliser times a sum of no terms; a division left unguarded, undefined
    there, misses it). Each division is read
    with the other's symbols set to values of their own (|N| = 3, L_Delta = 0.7 and 3 positive
    pairs), so a form that mixes them up misses the mean rather than going unevaluated.

    Example:
        >>> check_divisions_elsewhere(Form({"h normaliser": 1 / sp.Max(Nn, 1),
        ...                                 "line 10": L_scale / sp.Max(pairs_all, 1)})).verdict
        'holds'
        >>> check_divisions_elsewhere(Form({"h normaliser": 1 / sp.Max(Nn, 1),
        ...                                 "line 10": L_scale / sp.Max(Nn, 1)})).verdict
        'fails'
    """
    arguments = (Nn, L_scale, pairs_all)
    normalizer = sp.lambdify(arguments, form.value["h normaliser"], "math")
    division = sp.lambdify(arguments, form.value["line 10"], "math")
    errors = [abs(normalizer(n, 0.7, 3) * n - 1) for n in range(1, 6)]
    errors += [abs(division(3, total, c) * c - total) for total in (0.7, 2.5) for c in range(1, 5)]
    worst = max(errors)
    if not worst < 1e-12:  # no mean where there is something to average
        return decide(worst < 1e-12, "", f"the divisions miss the mean by {worst:.3g}.")
    try:
        worst = max(abs(normalizer(0, 0.7, 3) * 0), abs(division(3, 0.0, 0)))  # 0 terms
        missed = f"the divisions give {worst:.3g}, not 0, for none."
    except (ArithmeticError, ValueError) as error:  # unguarded: no value where there is none
        worst, missed = math.nan, ("the divisions are undefined for no negative or no positive "
                                   f"pair ({type(error).__name__}: {error}).")  # fmt: skip
    return decide(worst < 1e-12, "the mean over |N| negatives and over the positive pairs, 0 for "
                  "none.", missed, failure="wrong-value" if math.isfinite(worst) else "undefined")  # fmt: skip


def check_gradient_at_kinks(form: Form) -> Verdict:
    """dP/ds_ik on the bin boundaries, where Eq. 7 has kinks: the printed value against the
    right one-sided difference (the convention of bins ``[b_u, b_(u+1))``), |N| = 3, 5, with
    ``s_ik`` on the boundaries ``b_(t-2) .. b_(t+2)`` that lie inside (-1, 1).

    Example:
        >>> corrected = sp.Piecewise((h_right / (Nn * width), (s >= mid) & (s < mid + width)),
        ...                          (h_left / (Nn * width), (s >= mid - width) & (s < mid)),
        ...                          (0, True))
        >>> check_gradient_at_kinks(Form(corrected)).verdict
        'holds'
    """
    value = sp.lambdify((s, mid, h_left, h_right, width, Nn), form.value, "math")
    cases = _gradient_cases((-2, -1, 0, 1, 2))

    def printed(c):
        s_ij, s_ik, delta, count, t = c
        b_t = -1 + t * delta
        right = (s_ij - b_t) / delta
        return value(s_ik, b_t, 1 - right, right, delta, count)

    def right_slope(c, step=1e-7):
        s_ij, s_ik, delta, count, _ = c
        others, far = [-0.999] * (count - 1), [-0.999] * count
        ahead = pair_probability(s_ij, [s_ik + step, *others], far, delta)
        return (ahead - pair_probability(s_ij, [s_ik, *others], far, delta)) / step

    return numeric_agreement(printed, right_slope, cases, tolerance=1e-6)


def _evaluable(check: Callable[[Form], Verdict]) -> Callable[[Form], Verdict]:
    """``check``, with a form it cannot evaluate (a root or log of a negative number, a division
    by zero, a symbol left over) rejected with the error as its reason."""

    @functools.wraps(check)
    def checked(form: Form) -> Verdict:
        try:
            return check(form)
        except (ArithmeticError, ValueError, TypeError, SyntaxError, NameError) as error:
            return undecided("the form cannot be evaluated where the check needs it "
                             f"({type(error).__name__}: {error}).")  # fmt: skip

    return checked


def _both(*checks: Callable[[Form], Verdict]) -> Callable[[Form], Verdict]:
    """One check from several: the first verdict that does not hold, else the first."""

    def combined(form: Form) -> Verdict:
        return all_hold([_evaluable(check)(form) for check in checks])

    combined.__name__ = "_and_".join(check.__name__ for check in checks)
    return combined


TABLE1 = {  # CUB-200-2011 K = 1..32, Stanford Online Products K = 1..1000
    "Contrastive": ([26.4, 37.7, 49.8, 62.3, 76.4, 85.3], [42.0, 58.2, 73.8, 89.1]),
    "Triplet": ([36.1, 48.6, 59.3, 70.0, 80.2, 88.4], [42.1, 63.5, 82.5, 94.8]),
    "LiftStruct": ([47.2, 58.9, 70.2, 80.2, 89.3, 93.2], [62.1, 79.8, 91.3, 97.4]),
    "Histogram": ([50.3, 61.9, 72.6, 82.4, 88.8, 93.7], [63.9, 81.7, 92.2, 97.7]),
    "Ours 0.01": ([50.4, 62.6, 74.8, 84.0, 90.5, 94.9], [63.3, 80.8, 91.7, 97.4]),
    "Ours 0.001": ([50.5, 62.6, 74.9, 84.0, 90.7, 95.0], [63.5, 80.7, 91.6, 97.2]),
    "Ours 0.0001": ([50.6, 62.4, 74.9, 83.8, 90.3, 95.0], [63.4, 80.8, 91.7, 97.3]),
}
TABLE2 = {  # small, medium, large: top 1, top 5
    "Triplet": [40.4, 61.7, 35.4, 54.6, 31.9, 50.3], "CCL": [43.6, 64.2, 37.0, 57.1, 32.9, 53.3],
    "Histogram": [49.3, 70.9, 43.7, 65.1, 39.5, 59.9],
    "Ours 0.01": [53.1, 77.9, 46.9, 71.9, 42.4, 66.2], "Ours 0.001": [53.3, 78.6, 47.5, 72.6, 43.0, 66.7],
    "Ours 0.0001": [53.5, 78.5, 47.3, 72.2, 42.8, 66.6],
}  # fmt: skip


def check_stability(form: Form) -> Verdict:
    bound = float(form.value["bound (points)"])
    ours = [row for name, row in TABLE1.items() if name.startswith("Ours")]
    spreads = [max(col) - min(col) for part in (0, 1) for col in zip(*(row[part] for row in ours), strict=True)]
    worst = round(max(spreads), 6)
    return decide(bound - 0.5 <= worst < bound,
                  f"the largest change across Delta_min in Table 1 is {worst} points: below "
                  f"{bound}, the tightest bound at the printed half-point resolution.",
                  f"the largest change across Delta_min in Table 1 is {worst} points, not in "
                  f"[{bound - 0.5:g}, {bound}) (below the bound, and the bound the tightest at "
                  "half-point resolution).")  # fmt: skip


def check_table1_comparison(form: Form) -> Verdict:
    problems = []
    for part, name in ((0, "CUB-200-2011"), (1, "Stanford Online Products")):
        ours = [r[part] for n, r in TABLE1.items() if n.startswith("Ours")]
        best_ours = [max(col) for col in zip(*ours, strict=True)]
        rival = TABLE1[form.value[f"{name} rival"]][part]
        signs = {int(np.sign(round(o - b, 6))) for o, b in zip(best_ours, rival, strict=True)}
        if signs != {int(form.value[name])}:
            problems.append(f"{name}: signs of best FAPPY - {form.value[f'{name} rival']} per K are {sorted(signs)}")
    return decide(not problems, "best FAPPY row beats the state of the art at every K on CUB and trails "
                  "the histogram loss at every K on SOP.", "; ".join(problems) + ".")  # fmt: skip


def check_table2(form: Form) -> Verdict:
    margin = float(form.value["margin (points)"])
    ours = [r for n, r in TABLE2.items() if n.startswith("Ours")]
    others = [r for n, r in TABLE2.items() if not n.startswith("Ours")]
    gaps = [min(col_o) - max(col_b) for col_o, col_b in
            zip(zip(*ours, strict=True), zip(*others, strict=True), strict=True)]  # fmt: skip
    smallest = round(min(gaps), 6)
    return decide(margin <= smallest < margin + 0.1,
                  f"the worst FAPPY row beats the best other method by >= {smallest} points in "
                  "every column of Table 2.",
                  f"the smallest gap is {smallest} points, not the stated {margin:g} (at the "
                  "table's 0.1-point resolution).")  # fmt: skip


def check_fig2(form: Form) -> Verdict:
    printed = float(form.value["printed percent"])
    counts = sp.sympify(form.value["closer"]), sp.sympify(form.value["negatives"])
    valid = all(c.is_integer and c >= 0 for c in counts) and counts[0] <= counts[1]
    if not valid:
        return decide(bool(valid), "", f"{counts[0]} of {counts[1]} negatives is not a count of negatives.")
    exact = 100 * form.value["closer"] / form.value["negatives"]
    return decide(abs(round(exact, 1) - printed) < 1e-9, f"{form.value['closer']}/{form.value['negatives']} = {exact:.4f}% "
                  f"rounds to {printed}%.", f"{form.value['closer']}/{form.value['negatives']} = {exact:.4f}%, printed {printed}%.")  # fmt: skip


def check_table2_stability(form: Form) -> Verdict:
    """Table 2's "pretty stable": the largest spread of a column across the three Delta_min rows,
    and the smallest lead of the worst FAPPY row over the best other method, from the table.

    ``form.value``: ``"largest spread (points)"`` and ``"smallest lead (points)"``, as the
    numbers show them; holds when both are the table's and the spread is below the lead.

    Example:
        >>> check_table2_stability(Form({"largest spread (points)": sp.Rational(7, 10),
        ...                              "smallest lead (points)": sp.Rational(29, 10)})).verdict
        'holds'
    """
    ours = [r for n, r in TABLE2.items() if n.startswith("Ours")]
    others = [r for n, r in TABLE2.items() if not n.startswith("Ours")]
    spread = round(max(max(col) - min(col) for col in zip(*ours, strict=True)), 6)
    lead = round(min(min(o) - max(b) for o, b in
                     zip(zip(*ours, strict=True), zip(*others, strict=True), strict=True)), 6)  # fmt: skip
    stated = (float(form.value["largest spread (points)"]), float(form.value["smallest lead (points)"]))
    right = abs(stated[0] - spread) < 1e-9 and abs(stated[1] - lead) < 1e-9
    return decide(right and spread < lead,
                  f"across Delta_min = 0.01, 0.001, 0.0001 a column of Table 2 moves by at most "
                  f"{spread} points, less than FAPPY's smallest lead over the other methods "
                  f"({lead} points).",
                  f"Table 2 gives a largest spread of {spread} and a smallest lead of {lead} "
                  f"points; the form states {stated[0]:g} and {stated[1]:g}.")  # fmt: skip


DATASETS = {  # Section 4.1 as printed: (classes, images) of the whole set, train and test
    "CUB-200-2011": {"all": (200, 11788), "train": (100, 5864), "test": (100, 5924)},
    "Stanford Online Products": {"all": (22634, 120053), "train": (11318, 59551),
                                 "test": (11316, 60502)},
    "VehicleID": {"all": (26267, 221763), "train": (13134, 110178), "test": (13133, 111585),
                  "small test": (800, 7332), "medium test": (1600, 12995),
                  "large test": (2400, 20038)},
}  # fmt: skip


def check_datasets(form: Form) -> Verdict:
    """Section 4.1's split arithmetic: train + test = the whole set (classes and images), each
    VehicleID test split within the test set and within the next larger split.

    ``form.value``: ``{"<dataset> <part> classes" | "<dataset> <part> images": count}``.

    Example:
        >>> printed = {f"{d} {p} {k}": v for d, parts in DATASETS.items()
        ...            for p, pair in parts.items() for k, v in zip(("classes", "images"), pair)}
        >>> check_datasets(Form(printed)).verdict
        'holds'
    """
    value = {key: int(v) for key, v in form.value.items()}
    problems = []
    for name in DATASETS:
        for kind in ("classes", "images"):
            whole, train, test = (value[f"{name} {part} {kind}"] for part in ("all", "train", "test"))
            if train + test != whole:
                problems.append(f"{name}: {train} + {test} training and test {kind} != {whole}")
    splits = [value[f"VehicleID {size} test {kind}"] for size in ("small", "medium", "large")
              for kind in ("classes", "images")]  # fmt: skip
    bound = (value["VehicleID test classes"], value["VehicleID test images"])
    if not (splits[0] < splits[2] < splits[4] <= bound[0] and splits[1] < splits[3] < splits[5] <= bound[1]):
        problems.append(f"VehicleID test splits (vehicles, images) {splits} not nested in the test set {bound}")
    return decide(not problems, "training + test = the whole set in classes and images for all three "
                  "datasets, and VehicleID's small < medium < large test splits lie within its test set.",
                  "; ".join(problems) + ".")  # fmt: skip


def check_fig2_eq6(form: Form) -> Verdict:
    """Fig. 2's rate against Eq. 6: with ``n_i`` of ``N`` negatives at or above the pair on i's
    side and ``n_j`` on j's, Eq. 6 is ``n_i/N + n_j/N``; is ``form.value`` that, for every count?

    Example:
        >>> n_i, n_j, n = sp.symbols("n_i n_j N", positive=True)
        >>> check_fig2_eq6(Form(n_i / n)).verdict
        'fails'
    """
    n_i, n_j, n = sp.symbols("n_i n_j N", positive=True)
    equation6 = sp.Symbol("P_i") + sp.Symbol("P_j")
    truth = equation6.subs({sp.Symbol("P_i"): n_i / n, sp.Symbol("P_j"): n_j / n})

    def counts(generator):  # a legal point: whole counts of at most N negatives on each side
        negatives = generator.randint(1, 30)
        return {n: negatives, n_i: generator.randint(0, negatives),
                n_j: generator.randint(0, negatives)}

    return symbolic_equality(form.value, truth, [n_i, n_j, n], sampler=counts)


def check_bin_count(form: Form) -> Verdict:
    count = sp.lambdify(width, form.value, "math")
    wrong = [(d, len(np.arange(-1, 1 + d / 2, d)), count(d)) for d in (2.0, 1.0, 0.5, 0.25, 0.01)
             if len(np.arange(-1, 1 + d / 2, d)) != round(count(d))]  # fmt: skip
    return decide(not wrong, "boundaries -1, -1 + Delta, ..., +1 number 2/Delta + 1 for Delta = 2 .. 0.01.",
                  f"(Delta, boundaries, printed n) = {wrong}.")  # fmt: skip


def claims() -> list[Claim]:
    """The audited claims of Zhong et al.."""
    t = sp.Symbol("t")
    eq1 = Form({"h_left bin": t, "h_right bin": t + 1}, context="h_left = w^(h_left bin) (Eq. 1)")
    eq2 = Form({"h_left bin": t, "h_right bin": t + 1}, context="h_right = w^(h_right bin) (Eq. 2)")
    eq3 = Form(EQ3, lhs="w^t(s)")
    eq4 = Form(1 / Nn, lhs="normaliser of h_i^u (Eq. 4)")
    eq5 = Form(1 / Nn, lhs="normaliser of h_j^u (Eq. 5)")
    eq6 = Form(sp.Symbol("P_i") + sp.Symbol("P_j"), lhs="P_ij, P_i = P(s_ik >= s_ij), P_j = P(s_jl >= s_ij)")
    eq7 = Form(EQ7_SIDE, lhs="P_ij^Delta per negative set, S_t = sum_(u>=t) h^u")
    support = Form({"from bin": 0, "to bin": 1}, context="dP/ds_ik != 0 <=> s_ik in [b_(t + from bin), b_(t + to bin))")
    lemma_value = Form(sp.Piecewise((-h_right, (s >= mid) & (s <= mid + width)), (0, True)),
                       lhs="dP/ds_ik (appendix, b_(t+1) = b_t + Delta)")  # fmt: skip
    corrected_value = sp.Piecewise((h_right / (Nn * width), (s >= mid) & (s < mid + width)),
                                   (h_left / (Nn * width), (s >= mid - width) & (s < mid)), (0, True))  # fmt: skip
    hi_t, hj_t = sp.symbols("h_i^t h_j^t")
    pair = Form(hi_t + hj_t, lhs="dP/ds_ij")
    strict = Form(sp.And(S_IK > mid, S_IK <= hi, S_IJ > mid, S_IJ <= hi),
                  context="P_ij^Delta moves with s_ik (dP/ds_ik != 0) exactly where")
    l2 = Form(sp.sqrt(2 - 2 * s), lhs="d_xy^L2 (s = cos)")
    delta_l2 = Form(sp.sqrt(2 - 2 * mid) - sp.sqrt(2 - 2 * hi), lhs="Delta^L2")
    caption = Form({"d_t": sp.sqrt(2 - 2 * hi), "d_(t+1)": sp.sqrt(2 - 2 * mid)},
                   context="the ring [d_(t+1), d_t] of s_ij in [b_t, b_(t+1)]")  # fmt: skip
    fusion = Form((L_run + L_scale / pairs_all) / 2, lhs="L after a scale (lines 10-11)")
    guard = Form({"guard": 1 - s >= width, "Delta_cur": 2, "only s_ij": -1},
                 context="Algorithm 1 line 5 at its first scale")
    normalization = Form((L_run + L_scale / pairs_all) / 2, lhs="L after a scale (Algorithm 1 as printed)")
    official = (L_run + L_scale) / sp.Max(pairs_active, 1) / 2
    edges = Form(1 / Nn, lhs="normaliser of Eq. 4-5")
    empty = Form({"h normaliser": 1 / Nn, "line 10": L_scale / pairs_all},
                 context="the divisions of Eq. 4-5 and Algorithm 1 line 10")  # fmt: skip
    stability = Form({"bound (points)": sp.Rational(1, 2)}, context="Recall@K changes less than 0.5% across Delta_min")
    comparison = Form({"CUB-200-2011": 1, "CUB-200-2011 rival": "Histogram", "Stanford Online Products": -1,
                       "Stanford Online Products rival": "Histogram"},
                      context="Table 1: sign of best FAPPY - rival at every K")  # fmt: skip
    table2 = Form({"margin (points)": sp.Rational(29, 10)},
                  context="Table 2: FAPPY outperforms the other methods in every column by at least")
    fig2 = Form({"closer": 5, "negatives": 7, "printed percent": sp.Rational(714, 10)}, context="Fig. 2: 5/7 ~ 71.4%")
    bins = Form(2 / width + 1, lhs="n")
    fig5 = Form({"alpha": Delta_min / (2 * width), "farther ring heavier": 1},
                context="Fig. 5: the scale of width Delta weighs alpha; farther ring heavier = 1 when "
                "the ring of negatives farthest from the positive gets the most weight, -1 when the "
                "nearest does")  # fmt: skip
    table2_spread = Form({"largest spread (points)": sp.Rational(7, 10), "smallest lead (points)": sp.Rational(29, 10)},
                         context="Table 2 across Delta_min")  # fmt: skip
    datasets = Form({f"{d} {part} {kind}": v for d, parts in DATASETS.items() for part, pair in parts.items()
                     for kind, v in zip(("classes", "images"), pair, strict=True)},
                    context="Section 4.1's splits")  # fmt: skip
    n_i, n_j, n_neg = sp.symbols("n_i n_j N", positive=True)
    fig2_eq6 = Form(n_i / n_neg, lhs="P_ij of Fig. 2 (n_i = 5 of N = 7 negatives closer on i's side)")
    records = [
        Claim(SEED, "eq1", "h_left is the pair's weight on bin b_t", eq1, check_heights,
              "float64: heights sum to 1 and reproduce s_ij",
              mutants=(with_parameters(eq1, "h_left from bin t - 1", **{"h_left bin": t - 1}),)),
        Claim(SEED, "eq2", "h_right is the pair's weight on bin b_(t+1)", eq2, check_heights,
              "float64: heights sum to 1 and reproduce s_ij",
              mutants=(with_parameters(eq2, "h_right from bin t + 2", **{"h_right bin": t + 2}),)),
        Claim(SEED, "eq3", "triangular weights", eq3, check_kernel,
              "float64: partition of unity and mean over all bins", domain=BINS,
              mutants=(mutant(eq3, EQ3.subs(width, 2 * width), "Delta doubled"),
                       mutant(eq3, sp.Piecewise(((hi - s) / width, (s >= lo) & (s <= mid)),
                                                ((s - lo) / width, (s >= mid) & (s <= hi)), (0, True)),
                              "pieces swapped"))),
        Claim(SEED, "eq4", "h_i, the negatives' histogram around i", eq4, check_negative_histogram,
              "float64: mass and mean", mutants=(mutant(eq4, 1 / (Nn + 1), "1/(|N| + 1)"),)),
        Claim(SEED, "eq5", "h_j, the negatives' histogram around j", eq5, check_negative_histogram,
              "float64: mass and mean", mutants=(mutant(eq5, 2 / Nn, "2/|N|"),)),
        Claim(SEED, "eq6", "P_ij is a (false positive) probability", eq6, check_probability_definition,
              "float64 on random configurations",
              correction=mutant(eq6, (sp.Symbol("P_i") + sp.Symbol("P_j")) / 2, "corrected"),
              note="Eq. 6 adds the false positive rates of i and of j, so it ranges over [0, 2]; "
              "Eq. 7 estimates this sum (see eq7). Halving it changes the loss by a constant factor.",
              cause=CAUSE_EQ6),
        Claim(SEED, "eq7", "the histogram estimate of P_ij", eq7, check_eq7,
              "float64: double loop over bins, and Delta -> 0 vs Eq. 6",
              mutants=(mutant(eq7, h_left * S_t1 + h_right * S_t, "S_t and S_(t+1) swapped"),
                       mutant(eq7, h_left * S_t + h_right * S_t, "S_(t+1) -> S_t"),
                       mutant(eq7, sp.Rational(99, 100) * EQ7_SIDE, "1% too small"))),
        Claim(SEED, "lemma1", "gradient support of P_ij with respect to a negative", support,
              check_support, "float64 central differences of Eq. 1-7",
              correction=with_parameters(support, "corrected", **{"from bin": -1}),
              note="The support is two bins, [b_(t-1), b_(t+1)), when h_left, h_right > 0.",
              cause=CAUSE_LEMMA1),
        Claim(SEED, "claim-lemma1-value", "the gradient with respect to a negative (appendix)",
              lemma_value, check_gradient_value,
              "float64 central differences of Eq. 1-7, |N| Delta = 1.5 and 1.25",
              correction=mutant(lemma_value, corrected_value, "corrected"),
              domain={width: POSITIVE_WIDTH},
              cause=CAUSE_LEMMA1),
        Claim(SEED, "claim-pair-gradient", "the gradient with respect to the pair (appendix)", pair,
              check_pair_gradient, "float64 central differences of Eq. 1-7, Delta = 1/4, 1/2",
              correction=mutant(pair, -(hi_t + hj_t) / width, "corrected"),
              cause=CAUSE_PAIR_GRADIENT),
        Claim(SEED, "claim-strict-condition",
              "the appendix's strict condition: dP/ds_ik != 0 iff s_ik, s_ij in (b_t, b_(t+1)]",
              strict, check_strict_condition,
              "float64 one-sided differences of Eq. 1-7 at every bin boundary and inside each bin",
              correction=mutant(strict, STRICT_CORRECTED, "corrected"),
              mutants=(mutant(strict, STRICT_CORRECTED.xreplace({S_IJ > mid: S_IJ >= mid}),
                              "s_ij = b_t allowed on the pair's bin"),
                       mutant(strict, STRICT_CORRECTED.xreplace({S_IK >= mid: S_IK > mid, S_IK <= hi: S_IK < hi}),
                              "s_ik's ends open on the pair's bin"),
                       mutant(strict, STRICT_CORRECTED.xreplace({S_IJ < hi: S_IJ <= hi}),
                              "the bin below with s_ij = b_(t+1)")),
              note="Corrected (s_ij in [b_t, b_(t+1)], the lemma's premise): P_ij^Delta moves with "
              "s_ik (a one-sided derivative is non-zero) iff s_ik in [b_t, b_(t+1)] with s_ij > "
              "b_t (h_right > 0), or s_ik in [b_(t-1), b_t] with s_ij < b_(t+1) (h_left > 0). The "
              "printed condition has "
              "the right ends for s_ij on the pair's bin; it misses the bin below (as lemma1 does) "
              "and s_ik = b_t, where P has a kink.",
              cause=CAUSE_LEMMA1),
        Claim(SEED, "claim-l2-equivalence", "cosine and L2 distance (appendix)", l2, check_l2,
              "sympy.simplify", mutants=(mutant(l2, sp.sqrt(2 - s), "factor 2 dropped"),)),
        Claim(SEED, "claim-delta-l2", "Delta^L2 grows with Delta (appendix)", delta_l2,
              check_delta_l2, "sympy.diff on a grid",
              mutants=(mutant(delta_l2, sp.sqrt(2 - 2 * hi) - sp.sqrt(2 - 2 * mid), "b_t and b_(t+1) swapped"),)),
        Claim(SEED, "claim-fig4-caption",
              "Fig. 4's caption maps the cosine bin to the L2 ring (d_t <-> b_(t+1), d_(t+1) <-> b_t)",
              caption, check_caption, "float64 on three bins",
              correction=with_parameters(caption, "corrected", d_t=sp.sqrt(2 - 2 * mid),
                                         **{"d_(t+1)": sp.sqrt(2 - 2 * hi)}),
              note="The caption swaps b_t and b_(t+1) relative to the appendix (d_t = sqrt(2 - 2 b_t)).",
              cause=CAUSE_FIG4),
        Claim(SEED, "claim-fusion-weights", "Algorithm 1 halves the weight as Delta doubles", fusion,
              check_fusion_weights, "the recurrence executed on one-hot scale sums",
              mutants=(mutant(fusion, L_run + L_scale / pairs_all, "halving dropped"),
                       mutant(fusion, (L_run + L_scale / pairs_all) / 4, "quartered"))),
        Claim(SEED, "claim-algorithm1-guard",
              "an edge case of Algorithm 1: at Delta_cur = 2 only s_ij = -1 passes line 5, so that "
              "scale adds 0", guard, check_guard,
              "sympy.solveset on [-1, 1]; line 5 on a batch of 8 random unit vectors",
              mutants=(with_parameters(guard, "guard 1 - s_ij > Delta_cur", guard=1 - s > width),
                       with_parameters(guard, "first scale Delta_cur = 1", Delta_cur=1),
                       with_parameters(guard, "s_ij = 0 passes", **{"only s_ij": 0})),
              note="The paper does not claim that every scale admits pairs: this records what its "
              "guard does. The authors' Caffe layer uses the same guard. The other scales keep "
              "their weights; the widest scale's weight is spent on nothing."),
        Claim(SEED, "claim-algorithm1-normalization",
              "Algorithm 1 returns the average fused loss over all positive pairs", normalization,
              check_normalization, "the recurrence on per-scale sums of Eq. 7 (loops) vs the mean",
              mutants=(mutant(normalization, official, "official: running loss / active pairs"),),
              note="The paper prints L_Delta / count_positive_pairs (FAPPYLoss normalization='paper', "
              "the default); the authors' Caffe layer divides the running loss by the active pairs "
              "(normalization='official'), which is not this mean."),
        Claim(SEED, "claim-edges", "Eq. 7 at the first and last bins, one negative, empty bins", edges,
              check_edges, "float64 transcription", mutants=(mutant(edges, 1 / (Nn - 1), "1/(|N| - 1)"),)),
        Claim(SEED, "claim-empty-negative-set", "Eq. 4-5 and Algorithm 1 are defined for every batch",
              empty, check_empty_negative_set, "the printed divisions evaluated",
              correction=mutant(empty, {"h normaliser": 1 / sp.Max(Nn, 1), "line 10": L_scale / sp.Max(pairs_all, 1)},
                                "corrected"),
              note="gradlab returns P = 0 for a pair without negatives and a loss of 0 for a batch "
              "without positive pairs.",
              cause=CAUSE_EMPTY),
        Claim(SEED, "claim-fig2-rate", "Fig. 2: 5 of 7 negatives closer is 71.4%", fig2, check_fig2,
              "arithmetic", mutants=(with_parameters(fig2, "5/6", negatives=6),)),
        Claim(SEED, "claim-fig5-caption",
              "Fig. 5's caption: the fused loss gives the most weight to the ring of negatives "
              "farthest from the positive (the easier hard level)", fig5, check_fig5,
              "lines 10-11 run for the weights; finite differences of Eq. 1-7 per scale",
              correction=with_parameters(fig5, "corrected", **{"farther ring heavier": -1}),
              mutants=(with_parameters(fig5, "weights doubling with Delta",
                                       alpha=width / 4, **{"farther ring heavier": -1}),
                       with_parameters(fig5, "equal weights", alpha=sp.Rational(1, 2),
                                       **{"farther ring heavier": -1})),
              note="Algorithm 1 halves a scale's weight as Delta doubles, and a scale's gradient "
              "on a negative is h/(|N| Delta): the finest scales, which weigh most, reach only "
              "negatives near the pair's similarity, so the nearest ring weighs most, as the "
              "text's 'greater importance to the easier hard level' (the smallest Delta) says "
              "and the caption's darkest far ring does not.",
              cause=CAUSE_FIG5),
        Claim(SEED, "claim-bin-count", "n = 2/Delta + 1 boundaries from -1 to +1", bins, check_bin_count,
              "counting", mutants=(mutant(bins, 2 / width, "+1 dropped"),)),
        Claim(SEED, "claim-table1-stability", "Recall@K changes less than 0.5% across Delta_min",
              stability, check_stability, "arithmetic on Table 1",
              mutants=(with_parameters(stability, "bound 0.3", **{"bound (points)": sp.Rational(3, 10)}),),
              note=PRINTED_RESULTS_ONLY),
        Claim(SEED, "claim-table1-comparison",
              "better than the state of the art on CUB, slightly below the histogram loss on SOP",
              comparison, check_table1_comparison, "arithmetic on Table 1",
              mutants=(with_parameters(comparison, "better on SOP too", **{"Stanford Online Products": 1}),),
              note=PRINTED_RESULTS_ONLY),
        Claim(SEED, "claim-table2-stable",
              "Table 2's match rates are 'pretty stable' across Delta_min (what the numbers show)",
              table2_spread, check_table2_stability, "arithmetic on Table 2",
              mutants=(with_parameters(table2_spread, "spread 0.5 (Table 1's bound)",
                                       **{"largest spread (points)": sp.Rational(1, 2)}),
                       with_parameters(table2_spread, "lead 3.8 (small gallery, top 1)",
                                       **{"smallest lead (points)": sp.Rational(38, 10)})),
              note=PRINTED_RESULTS_ONLY),
        Claim(SEED, "claim-datasets", "Section 4.1's train and test splits add up to the datasets",
              datasets, check_datasets, "arithmetic on Section 4.1",
              mutants=(with_parameters(datasets, "CUB test 5,942 images", **{"CUB-200-2011 test images": 5942}),
                       with_parameters(datasets, "SOP 11,316 training classes",
                                       **{"Stanford Online Products train classes": 11316}),
                       with_parameters(datasets, "VehicleID medium split of 16,000 vehicles",
                                       **{"VehicleID medium test classes": 16000}))),
        Claim(SEED, "claim-fig2-eq6", "Fig. 2's false positive probability 5/7 is Eq. 6's P_ij",
              fig2_eq6, check_fig2_eq6, "sympy: Eq. 6 with n_i, n_j of N negatives on each side",
              correction=mutant(fig2_eq6, (n_i + n_j) / n_neg, "corrected"),
              mutants=(mutant(fig2_eq6, (n_i + n_j) / (2 * n_neg), "the two sides averaged"),
                       mutant(fig2_eq6, n_j / n_neg, "j's side only")),
              note="Fig. 2 counts the negatives on one side; Eq. 6 adds the shares of i's and j's "
              "sides, (5 + n_j)/7 for Fig. 2's pair, which is 5/7 only when no negative is at or "
              "above the pair on j's side (halved as eq6's correction does, it is (5 + n_j)/14).",
              cause=CAUSE_EQ6),
        Claim(SEED, "claim-table2-outperforms", "FAPPY outperforms the others on VehicleID (Table 2)",
              table2, check_table2, "arithmetic on Table 2",
              mutants=(with_parameters(table2, "by 5 points", **{"margin (points)": 5}),),
              note=PRINTED_RESULTS_ONLY),
    ]  # fmt: skip
    return [replace(claim, check=_both(claim.check, SECOND_CHECKS[claim.label][0]),
                    method=f"{claim.method}; {SECOND_CHECKS[claim.label][1]}")
            if claim.label in SECOND_CHECKS else replace(claim, check=_evaluable(claim.check))
            for claim in records]  # fmt: skip


CAUSE_LEMMA1 = "Lemma 1: dP/ds_ik taken on the pair's bin only, as -h_right"
"""The appendix's derivative in s_ik, behind lemma1, its value and the strict condition."""
CAUSE_EQ6 = "Eq. 6: the two sides' false positive rates added"
"""Eq. 6's sum of two rates, behind eq6 and Fig. 2's one-sided 5/7."""
CAUSE_PAIR_GRADIENT = "dP/ds_ij printed without its minus sign and its 1/Delta"
"""What is wrong with the appendix's gradient with respect to the pair."""
CAUSE_FIG4 = "Fig. 4's caption swaps the ends of the L2 ring (b_t and b_(t+1))"
"""What is wrong with Fig. 4's caption: its ring [d_t, d_(t+1)] is empty."""
CAUSE_EMPTY = ("Eq. 4-5 and Algorithm 1 divide by zero for a pair without negatives or a batch "
               "without positive pairs")
"""What is wrong with the printed divisions of Eq. 4-5 and Algorithm 1 line 10."""
CAUSE_FIG5 = "Fig. 5's caption: the nearest ring of negatives weighs most, not the farthest"
"""What is wrong with Fig. 5's caption, against Algorithm 1's weights."""

SECOND_CHECKS = {
    "eq6": (check_pooled_rate, "the share of the pooled negatives at or above s_ij"),
    "claim-l2-equivalence": (check_distance_sign, "non-negative on [-1, 1]"),
    "claim-delta-l2": (check_delta_l2_vectors, "float64 distances of unit vectors"),
    "claim-fusion-weights": (check_fusion_average, "weights per positive pair"),
    "claim-edges": (check_bottom_corner, "P_ij = 2 at s_ij = -1"),
    "claim-lemma1-value": (check_gradient_at_kinks, "right one-sided differences at the bin "
                           "boundaries (bins [b_u, b_(u+1)))"),
    "claim-empty-negative-set": (check_divisions_elsewhere, "the mean where counts are positive"),
}
"""Label -> a second check (and its method) that pins what the record's first check leaves
open, so that slips of the accepted form are rejected."""
