"""FAPPY, FastAP and Blackbox AP forward values by loops, straight from their definitions."""

from __future__ import annotations

import math
from collections.abc import Sequence


def _cosine_matrix(embeddings: Sequence[Sequence[float]]) -> list[list[float]]:
    """Cosines in [-1, 1]: the quotient of the sums can round past +-1 by an ulp (opposite
    vectors give -1 - 2^-52), where a bin index of -1 would wrap to the last boundary."""
    norms = [math.sqrt(math.fsum(x * x for x in row)) for row in embeddings]
    return [
        [
            min(1.0, max(-1.0, math.fsum(a * b for a, b in zip(u, v, strict=True)) / (nu * nv)))
            for v, nv in zip(embeddings, norms, strict=True)
        ]
        for u, nu in zip(embeddings, norms, strict=True)
    ]


def fappy_weight(similarity: float, boundaries: list[float], u: int, delta: float) -> float:
    """Seed 004 Eq. 3: the triangular weight of bin ``u`` (boundaries indexed from 0)."""
    b = boundaries
    if u - 1 >= 0 and b[u - 1] <= similarity <= b[u]:
        return (similarity - b[u - 1]) / delta
    if u + 1 < len(b) and b[u] <= similarity <= b[u + 1]:
        return (b[u + 1] - similarity) / delta
    return 0.0


def fappy_pair(similarities, labels, i: int, j: int, delta: float) -> float:
    """Seed 004 Eq. 1-7 for the positive pair (i, j), by loops over bins and negatives."""
    n = round(2.0 / delta) + 1
    boundaries = [-1.0 + m * delta for m in range(n)]
    s_ij = similarities[i][j]
    t = min(math.floor((s_ij + 1.0) / delta), n - 2)
    h_left = (boundaries[t + 1] - s_ij) / delta  # Eq. 1 with Eq. 3
    h_right = (s_ij - boundaries[t]) / delta  # Eq. 2 with Eq. 3
    negatives = [k for k in range(len(labels)) if labels[k] != labels[i]]
    if not negatives:
        return 0.0
    total = 0.0
    for anchor in (i, j):
        h = [
            math.fsum(
                fappy_weight(similarities[anchor][k], boundaries, u, delta) for k in negatives
            )
            / len(negatives)
            for u in range(n)
        ]  # Eq. 4-5
        total += h_left * math.fsum(h[t:]) + h_right * math.fsum(h[t + 1 :])  # Eq. 7
    return total


def fappy_algorithm1(embeddings, labels, delta_min: float) -> float:
    """Seed 004 Algorithm 1, line by line."""
    similarities = _cosine_matrix(embeddings)
    pairs = [
        (i, j)
        for i in range(len(labels))
        for j in range(i + 1, len(labels))
        if labels[i] == labels[j]
    ]
    loss, delta = 0.0, 2.0
    while True:
        scale = 0.0
        for i, j in pairs:
            if 1.0 - similarities[i][j] >= delta:
                scale += fappy_pair(similarities, labels, i, j, delta)
        loss += scale / max(1, len(pairs))
        loss /= 2.0
        delta /= 2.0
        if delta < delta_min:
            return loss


def fastap_query(embeddings, labels, q: int, num_bins: int) -> float:
    """FastAP of query q: soft histograms of squared distances, cumulative precision per bin."""
    similarities = _cosine_matrix(embeddings)
    width = 4.0 / num_bins
    others = [c for c in range(len(labels)) if c != q]
    positives = [c for c in others if labels[c] == labels[q]]
    if not positives:
        return math.nan
    h_pos = [0.0] * (num_bins + 1)
    h_all = [0.0] * (num_bins + 1)
    for c in others:
        distance = max(0.0, 2.0 - 2.0 * similarities[q][c])
        for level in range(num_bins + 1):
            weight = max(0.0, 1.0 - abs(distance - level * width) / width)
            h_all[level] += weight
            if labels[c] == labels[q]:
                h_pos[level] += weight
    total, cumulative_pos, cumulative_all = 0.0, 0.0, 0.0
    for level in range(num_bins + 1):
        cumulative_pos += h_pos[level]
        cumulative_all += h_all[level]
        if cumulative_all > 0:
            total += h_pos[level] * cumulative_pos / cumulative_all
    return total / len(positives)


def ranked_ap(scores: Sequence[float], positives: Sequence[bool], margin: float) -> float:
    """Exact AP after lowering positive scores by the margin (ties broken by index)."""
    shifted = [s - margin if p else s for s, p in zip(scores, positives, strict=True)]
    order = sorted(range(len(scores)), key=lambda c: (-shifted[c], c))
    hits, total = 0, 0.0
    for rank, c in enumerate(order, start=1):
        if positives[c]:
            hits += 1
            total += hits / rank
    return total / hits if hits else math.nan


def fappy_scale_sums(embeddings, labels, delta_min: float):
    """Per scale of Algorithm 1: ``(Delta, sum of P over active pairs, #active, #pairs)``."""
    similarities = _cosine_matrix(embeddings)
    pairs = [
        (i, j)
        for i in range(len(labels))
        for j in range(i + 1, len(labels))
        if labels[i] == labels[j]
    ]
    scales, delta = [], 2.0
    while True:
        active = [(i, j) for i, j in pairs if 1.0 - similarities[i][j] >= delta]
        total = math.fsum(fappy_pair(similarities, labels, i, j, delta) for i, j in active)
        scales.append((delta, total, len(active), len(pairs)))
        delta /= 2.0
        if delta < delta_min:
            return scales


def fappy_official(embeddings, labels, delta_min: float) -> float:
    """The authors' Caffe recurrence from the per-scale sums: the running loss over the active
    pairs of each scale, then halved (``L <- (L + L_Delta) / max(1, #active) / 2``)."""
    loss = 0.0
    for _, total, active, _ in fappy_scale_sums(embeddings, labels, delta_min):
        loss = (loss + total) / max(1, active) / 2.0
    return loss
