"""Brute-force operating-region counts, literally as seed 002 Eq. 1 and seed 001 define them."""

from __future__ import annotations

import math
from collections.abc import Sequence

from tests.reference.smooth_ap_loops import sigmoid, slope


def proportion(
    scores: Sequence[float],
    tau: float,
    eps: float,
    include_diagonal: bool = True,
    pairs: str = "all",
    positives: Sequence[bool] | None = None,
) -> float:
    """Count entries of the C x C difference matrix whose slope |dG/dD| exceeds eps."""
    count = inside = 0
    for i, s_i in enumerate(scores):
        for j, s_j in enumerate(scores):
            if i == j and (not include_diagonal or pairs == "positive-negative"):
                continue
            if pairs == "positive-rows" and not positives[i]:
                continue
            if pairs == "positive-negative" and not (positives[i] and not positives[j]):
                continue
            count += 1
            inside += slope(s_i - s_j, tau) > eps
    return inside / count if count else math.nan


def gradient_count(
    scores: Sequence[float],
    positives: Sequence[bool],
    tau: float,
    threshold: float,
    weighted: bool,
    candidates: Sequence[bool] | None = None,
) -> int:
    """Entries (positive i, candidate j != i) whose slope (over R_i^2 if weighted) > threshold."""
    keep = candidates or [True] * len(scores)
    total = 0
    for i, s_i in enumerate(scores):
        if not (positives[i] and keep[i]):
            continue
        rank = 1.0 + sum(
            sigmoid(s_j - s_i, tau) for j, s_j in enumerate(scores) if j != i and keep[j]
        )
        for j, s_j in enumerate(scores):
            if j == i or not keep[j]:
                continue
            value = slope(s_j - s_i, tau) / (rank**2 if weighted else 1.0)
            total += value > threshold
    return total
