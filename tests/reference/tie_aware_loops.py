"""Brute-force tie-aware metrics: average over every ordering consistent with the ties."""

from __future__ import annotations

import itertools
import math
from collections.abc import Sequence
from fractions import Fraction


def _tie_consistent_orders(scores: Sequence[float]):
    """Every permutation that lists the candidates by non-increasing score."""
    candidates = range(len(scores))
    for order in itertools.permutations(candidates):
        if all(scores[order[k]] >= scores[order[k + 1]] for k in range(len(order) - 1)):
            yield order


def average_precision(order: Sequence[int], relevant: Sequence[bool]) -> float:
    hits, total = 0, 0.0
    for rank, item in enumerate(order, start=1):
        if relevant[item]:
            hits += 1
            total += hits / rank
    return total / sum(relevant)


def dcg(order: Sequence[int], gains: Sequence[float]) -> float:
    return sum(gains[item] / math.log2(rank + 1) for rank, item in enumerate(order, start=1))


def expected_over_ties(metric, scores: Sequence[float], labels: Sequence) -> float:
    values = [metric(order, labels) for order in _tie_consistent_orders(scores)]
    return sum(values) / len(values)


def ap_of_one_tie(before: int, size: int, pos: int, pos_before: int, plus: int) -> Fraction:
    """AP_T of one tie by brute force over the tie's orders (He et al., 2018, Eq. 1's
    tie-aware mean): ``size`` items after ``before`` others, ``pos`` of them relevant,
    ``pos_before`` relevant before the tie, divided by ``plus``; exact."""
    total = Fraction(0)
    orders = list(itertools.permutations([True] * pos + [False] * (size - pos)))
    for order in orders:
        hits = pos_before
        for rank, relevant in enumerate(order, start=before + 1):
            if relevant:
                hits += 1
                total += Fraction(hits, rank)
    return total / len(orders) / plus
