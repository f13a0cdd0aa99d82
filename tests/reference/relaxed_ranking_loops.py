"""Relaxed tie-aware AP and DCG (seed 003, Eq. 13, 16) bin by bin with mpmath, as printed.

Independent of gradlab: mpmath at 40 digits, Python loops. The harmonic stand-ins are the ones
gradlab documents (the printed ``ln b - ln a`` continued below one item by its tangent ``x - 1``;
the midpoint rule; digamma; for the discount the printed ``ln2 li`` form, the midpoint rule and
the linear interpolation of the exact sums), and ``A_d = (c+_d - 1)/(c_d - 1)`` clamped to
``[0, 1]``, and 0 for ``c_d <= 1`` or ``|c_d - 1| < 1e-9`` (a bin of at most about one item holds
no other item: the documented convention at the pole).
"""

from __future__ import annotations

from collections.abc import Sequence

import mpmath

DIGITS = 40
"""Working precision of the reference, set locally (mpmath.workdps) so it does not leak."""
NEAR_ONE = 1e-9
"""A bin whose count is this close to one item is a one-item bin (gradlab's documented band)."""


def _log_antiderivative(x):
    return mpmath.log(x) if x >= 1 else x - 1


def harmonic_stand_in(a, b, method: str):
    """The stand-in for ``H(b) - H(a)`` of each method, at mpmath precision."""
    with mpmath.workdps(DIGITS):
        a, b = mpmath.mpf(a), mpmath.mpf(b)
        if method == "log":
            return _log_antiderivative(b) - _log_antiderivative(a)
        if method == "midpoint":
            return mpmath.log((b + 0.5) / (a + 0.5))
        return mpmath.digamma(b + 1) - mpmath.digamma(a + 1)


def relaxed_ap(positive_counts: Sequence[float], counts: Sequence[float], method: str) -> float:
    """Eq. 13 for one query: ``sum_d c+_d/(c_d N+) [A_d c_d + B_d L(C_{d-1}, C_d)]``."""
    with mpmath.workdps(DIGITS):
        total = mpmath.fsum(positive_counts)
        if total == 0:
            return float("nan")
        value, before, positives_before = mpmath.mpf(0), mpmath.mpf(0), mpmath.mpf(0)
        for c_plus, c in zip(positive_counts, counts, strict=True):
            c_plus, c = mpmath.mpf(c_plus), mpmath.mpf(c)
            if c > 0:
                one_item = c <= 1 or abs(c - 1) < NEAR_ONE
                share = 0 if one_item else min(max((c_plus - 1) / (c - 1), 0), 1)
                bracket = share * c + (
                    positives_before + 1 - share * (before + 1)
                ) * harmonic_stand_in(before, before + c, method)
                value += c_plus / (c * total) * bracket
            before += c
            positives_before += c_plus
        return float(value)


def discount_stand_in(a, b, method: str):
    """The stand-in for ``sum_{t=a+1}^{b} 1/log2(t+1)`` of each method, at mpmath precision."""
    with mpmath.workdps(DIGITS):
        a, b = mpmath.mpf(a), mpmath.mpf(b)
        ln2 = mpmath.log(2)
        if method == "midpoint":
            return ln2 * (mpmath.li(b + 1.5) - mpmath.li(a + 1.5))
        if method == "log":  # ln2 li(x + 1), continued below one item by its tangent at 1
            printed = {x: ln2 * mpmath.li(x + 1) if x >= 1 else ln2 * mpmath.li(2) + x - 1
                       for x in (a, b)}  # fmt: skip
            return printed[b] - printed[a]
        # exact: the partial sums at the integers, linear in between
        ends = []
        for x in (a, b):
            floor = int(x)
            ends.append(
                mpmath.fsum(1 / mpmath.log(t + 1, 2) for t in range(1, floor + 1))
                + (x - floor) / mpmath.log(floor + 2, 2)
            )
        return ends[1] - ends[0]


def relaxed_dcg(level_counts: Sequence[Sequence[float]], gains: Sequence[float], method: str):
    """Eq. 16 for one query: ``sum_d (sum_v G(v) c_{d,v}) / c_d  D(C_{d-1}, C_d)``."""
    with mpmath.workdps(DIGITS):
        value, before = mpmath.mpf(0), mpmath.mpf(0)
        for per_level in level_counts:
            c = mpmath.fsum(per_level)
            if c > 0:
                gain_mass = mpmath.fsum(
                    g * mpmath.mpf(n) for g, n in zip(gains, per_level, strict=True)
                )
                value += gain_mass / c * discount_stand_in(before, before + c, method)
            before += c
        return float(value)
