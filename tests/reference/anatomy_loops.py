"""The gradient anatomy's definitions as Python loops over plain floats (one query at a time).

Independent of gradlab: sorted(), math.ceil and comparisons only, from the definitions in the
docstring of :mod:`gradlab.functional.gradient_anatomy`.
"""

from __future__ import annotations

import math


def anatomy_one_query(grad, scores, positives, candidate_mask, absolute, relative):
    """A dict of the anatomy statistics of one query (lists of floats/bools in)."""
    columns = [c for c in range(len(grad)) if candidate_mask[c]]
    magnitude = {c: (0.0 if math.isnan(grad[c]) else abs(grad[c])) for c in columns}
    largest = max(magnitude.values(), default=0.0)
    active = {c for c in columns if magnitude[c] > absolute and magnitude[c] >= relative * largest}
    negatives = [c for c in columns if not positives[c]]
    by_score = sorted(negatives, key=lambda c: (-scores[c], c))
    rank = {c: position + 1 for position, c in enumerate(by_score)}
    active_negatives = [c for c in negatives if c in active]
    ranks = [rank[c] for c in active_negatives]
    total = sum(magnitude[c] for c in negatives)
    shares = []
    for fraction in (0.01, 0.1):
        hardest = by_score[: math.ceil(len(negatives) * fraction)]
        shares.append(sum(magnitude[c] for c in hardest) / total if total > 0 else math.nan)
    return {
        "active_positives": sum(1 for c in columns if positives[c] and c in active),
        "active_negatives": len(active_negatives),
        "num_positives": sum(1 for c in columns if positives[c]),
        "num_negatives": len(negatives),
        "rank": [rank.get(c, 0) for c in range(len(grad))],
        "rank_mean": sum(ranks) / len(ranks) if ranks else math.nan,
        "rank_max": float(max(ranks)) if ranks else math.nan,
        "share_1": shares[0],
        "share_10": shares[1],
        "without": bool(columns) and not active,
    }
