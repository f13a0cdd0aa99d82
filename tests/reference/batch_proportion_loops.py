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


def entry_shares(embeddings: Sequence[Sequence[float]], tau: float, eps: float) -> dict[str, float]:
    """Batch means of the operating-region shares of each query's ``m x m`` matrix (the query
    its own candidate, self-score 1): ``p_seed_definition`` (all ``m^2`` entries),
    ``p_off_diagonal`` (the ``m(m - 1)`` entries off the diagonal), ``p_query_column`` (the
    query against each other candidate) and ``p_without_query`` (two distinct other
    candidates)."""
    score = cosine_scores(embeddings)
    m = len(score)
    sums = dict.fromkeys(("p_seed_definition", "p_off_diagonal", "p_query_column",
                          "p_without_query"), 0.0)  # fmt: skip
    for q in range(m):
        row = score[q]
        counts = {key: [0, 0] for key in sums}
        for i in range(m):
            for j in range(m):
                inside = slope(row[j] - row[i], tau) > eps
                keys = ["p_seed_definition"]
                if i != j:
                    keys.append("p_off_diagonal")
                    keys.append("p_query_column" if i == q else
                                "p_without_query" if j != q else "")  # fmt: skip
                for key in filter(None, keys):
                    counts[key][0] += inside
                    counts[key][1] += 1
        for key, (inside, total) in counts.items():
            sums[key] += inside / total if total else math.nan
    return {key: total / m for key, total in sums.items()}
