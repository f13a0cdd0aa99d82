"""Float64 loop references of the studies' retrieval metrics, written from the papers'
definitions, never from gradlab's code."""

from __future__ import annotations


def map_at_r(scores, relevant) -> float:
    """MAP@R (Musgrave et al. 2020, Sec. 3.2) over lists: per query with R >= 1 relevant, the
    precision at each relevant one of the first R positions (ties broken by candidate index),
    summed and divided by R; then the mean over those queries."""
    values = []
    for row, flags in zip(scores.tolist(), relevant.tolist(), strict=True):
        r = sum(flags)
        if r == 0:
            continue
        order = sorted(range(len(row)), key=lambda j: (-row[j], j))
        hits, total = 0, 0.0
        for position, j in enumerate(order[:r], start=1):
            if flags[j]:
                hits += 1
                total += hits / position
        values.append(total / r)
    return sum(values) / len(values)


def recall_at_k(scores, relevant, k) -> float:
    """Share of queries (rows) with a relevant candidate among their ``k`` highest scores, ties
    broken by column order, one Python loop per query."""
    hits = 0
    for row, flags in zip(scores.tolist(), relevant.tolist(), strict=True):
        top = sorted(range(len(row)), key=lambda j: (-row[j], j))[:k]
        hits += any(flags[j] for j in top)
    return hits / len(scores)
