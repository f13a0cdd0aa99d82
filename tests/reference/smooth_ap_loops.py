"""Brute-force SmoothAP written with Python loops, straight from the seed definitions.

Independent of gradlab: plain floats, ``math`` only. Seed 000 Eq. 1-2 (seed 001 Eq. 2 and 5) with
the rank convention of seed 001 Eq. 2: candidate ``j`` counts against positive ``i`` when
``s_j > s_i``, smoothed as ``G(s_j - s_i)``.
"""

from __future__ import annotations

import math
from collections.abc import Sequence


def sigmoid(x: float, tau: float) -> float:
    z = x / tau
    if z >= 0:
        return 1.0 / (1.0 + math.exp(-z))
    e = math.exp(z)
    return e / (1.0 + e)


def slope(x: float, tau: float) -> float:
    return sigmoid(x, tau) * sigmoid(-x, tau) / tau


def smooth_ap_one_query(scores: Sequence[float], positives: Sequence[bool], tau: float) -> float:
    """Smooth AP of one query; NaN when it has no positive."""
    pos = [i for i, p in enumerate(positives) if p]
    if not pos:
        return math.nan
    total = 0.0
    for i in pos:
        rank_positive, rank_all = 1.0, 1.0
        for j, score in enumerate(scores):
            if j == i:
                continue
            g = sigmoid(score - scores[i], tau)
            rank_all += g
            if positives[j]:
                rank_positive += g
        total += rank_positive / rank_all
    return total / len(pos)


def smooth_ap_one_query_gradient(
    scores: Sequence[float], positives: Sequence[bool], tau: float
) -> list[float]:
    """``d AP / d s_k`` of :func:`smooth_ap_one_query`, by the quotient rule over loops.

    ``A_i = 1 + sum_{j in P, j != i} G(s_j - s_i)``, ``R_i = 1 + sum_{j != i} G(s_j - s_i)``;
    ``G(s_j - s_i)`` moves with ``s_j`` by ``+G'`` and with ``s_i`` by ``-G'``. All zeros for a
    query without positives (its AP is NaN and takes no gradient).
    """
    pos = [i for i, p in enumerate(positives) if p]
    gradient = [0.0] * len(scores)
    for i in pos:
        rank_positive, rank_all = 1.0, 1.0
        d_positive, d_all = [0.0] * len(scores), [0.0] * len(scores)
        for j, score in enumerate(scores):
            if j == i:
                continue
            g, weight = sigmoid(score - scores[i], tau), slope(score - scores[i], tau)
            rank_all += g
            d_all[j] += weight
            d_all[i] -= weight
            if positives[j]:
                rank_positive += g
                d_positive[j] += weight
                d_positive[i] -= weight
        for k in range(len(scores)):
            quotient = (d_positive[k] * rank_all - rank_positive * d_all[k]) / rank_all**2
            gradient[k] += quotient / len(pos)
    return gradient


def cosine(a: Sequence[float], b: Sequence[float]) -> float:
    dot = math.fsum(x * y for x, y in zip(a, b, strict=True))
    return dot / (math.sqrt(math.fsum(x * x for x in a)) * math.sqrt(math.fsum(y * y for y in b)))


def in_batch_smooth_ap(
    embeddings: Sequence[Sequence[float]], labels: Sequence[int], tau: float, include_query: bool
) -> list[float]:
    """Per-query smooth AP for in-batch retrieval: every item queries the others."""
    result = []
    for q, label in enumerate(labels):
        candidates = [c for c in range(len(labels)) if include_query or c != q]
        scores = [cosine(embeddings[q], embeddings[c]) for c in candidates]
        positives = [labels[c] == label for c in candidates]
        result.append(smooth_ap_one_query(scores, positives, tau))
    return result


def cross_modal_smooth_ap(
    queries: Sequence[Sequence[float]],
    candidates: Sequence[Sequence[float]],
    positives: Sequence[Sequence[bool]],
    tau: float,
) -> list[float]:
    """Per-query smooth AP of queries against candidates of another modality."""
    return [
        smooth_ap_one_query([cosine(q, c) for c in candidates], positives[k], tau)
        for k, q in enumerate(queries)
    ]


def loss_from_aps(aps: Sequence[float]) -> float:
    """``1 - mean AP`` over queries with a defined AP; 0 when there is none."""
    defined = [a for a in aps if not math.isnan(a)]
    return 1.0 - math.fsum(defined) / len(defined) if defined else 0.0


def decomposition_one_pair(
    query: Sequence[float],
    candidates: Sequence[Sequence[float]],
    positives: Sequence[bool],
    i: int,
    tau: float,
) -> dict[str, object]:
    """The seeds' A, C, R, B, D for positive ``i`` (seed 000, Eq. 8-10 and 13), by loops."""
    dims = len(query)
    scores = [math.fsum(a * b for a, b in zip(query, v, strict=True)) for v in candidates]
    A, C = 1.0, 0.0
    B = [0.0] * dims
    D = [0.0] * dims
    for j, v in enumerate(candidates):
        if j == i:
            continue
        difference = scores[j] - scores[i]
        weight = slope(difference, tau)
        delta = [candidates[i][k] - v[k] for k in range(dims)]
        if positives[j]:
            A += sigmoid(difference, tau)
            B = [B[k] + weight * delta[k] for k in range(dims)]
        else:
            C += sigmoid(difference, tau)
            D = [D[k] + weight * delta[k] for k in range(dims)]
    return {"A": A, "C": C, "R": A + C, "B": B, "D": D}
