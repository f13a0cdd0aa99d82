"""Relaxed tie-aware AP (seed 003, Eq. 13) bin by bin with mpmath, from the printed formula.

Independent of gradlab: mpmath at 40 digits, Python loops. The harmonic stand-ins are the ones
gradlab documents (the printed ``ln b - ln a`` continued below one item by its tangent ``x - 1``;
the midpoint rule; digamma), and ``A_d = (c+_d - 1)/(c_d - 1)`` clamped to ``[0, 1]``, and 0 for
``c_d <= 1`` (a bin of at most one item holds no other item: the convention at the pole).
"""

from __future__ import annotations

from collections.abc import Sequence

import mpmath

DIGITS = 40
"""Working precision of the reference, set locally (mpmath.workdps) so it does not leak."""


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
                share = 0 if c <= 1 else min(max((c_plus - 1) / (c - 1), 0), 1)
                bracket = share * c + (
                    positives_before + 1 - share * (before + 1)
                ) * harmonic_stand_in(before, before + c, method)
                value += c_plus / (c * total) * bracket
            before += c
            positives_before += c_plus
        return float(value)
