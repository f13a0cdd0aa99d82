"""P of a batch (Brown et al., 2020, Smooth-AP supplementary, Eq. 1), its close-pair splits and
its four additive parts, by visiting every entry of every query's ``m x m`` difference matrix in
float64 Python loops (no torch arithmetic)."""

from __future__ import annotations

import math
from collections.abc import Sequence

from tests.reference.smooth_ap_loops import slope

KEYS = ("P", "P_positive_negative", "P_negative_negative", "P_diagonal", "P_own_row_column",
        "P_positive_rows", "P_negative_rows")  # fmt: skip
"""The order of :func:`batch_proportions`' values."""


def cosine_scores(embeddings: Sequence[Sequence[float]]) -> list[list[float]]:
    """``[m][m]`` cosine similarities of the rows of ``embeddings``, in float64."""
    unit = []
    for row in embeddings:
        norm = math.sqrt(sum(float(v) * float(v) for v in row))
        unit.append([float(v) / norm for v in row])
    return [[sum(a * b for a, b in zip(x, y, strict=True)) for y in unit] for x in unit]


def batch_proportions(
    embeddings: Sequence[Sequence[float]], labels: Sequence[int], tau: float, eps: float
) -> list[float]:
    """Batch means, in :data:`KEYS`' order: P (every entry of each query's matrix, the query
    its own candidate), P over (other positive, negative) pairs and over pairs of two distinct
    negatives (the query left out), and P's parts: diagonal, the query's own row and column,
    rows of the query's other positives, rows of negatives (each over ``m^2``)."""
    score = cosine_scores(embeddings)
    m = len(labels)
    sums = [0.0] * 7
    for q in range(m):
        row = score[q]

        def inside(i: int, j: int, row: list[float] = row) -> bool:
            return slope(row[j] - row[i], tau) > eps

        parts = [0, 0, 0, 0]
        for i in range(m):
            for j in range(m):
                if not inside(i, j):
                    continue
                if i == j:
                    parts[0] += 1
                elif q in (i, j):
                    parts[1] += 1
                elif labels[i] == labels[q]:
                    parts[2] += 1
                else:
                    parts[3] += 1
        positives = [i for i in range(m) if i != q and labels[i] == labels[q]]
        negatives = [j for j in range(m) if labels[j] != labels[q]]
        pos_neg = [inside(i, j) for i in positives for j in negatives]
        neg_neg = [inside(i, j) for i in negatives for j in negatives if i != j]
        values = [sum(parts) / m**2, sum(pos_neg) / len(pos_neg), sum(neg_neg) / len(neg_neg),
                  *(part / m**2 for part in parts)]  # fmt: skip
        sums = [total + value for total, value in zip(sums, values, strict=True)]
    return [total / m for total in sums]
