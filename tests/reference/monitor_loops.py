"""Brute-force float64 loops for what the Monitor logs over a small batch.

Plain Python over lists of floats, built on the other oracles of this folder; nothing here calls
gradlab. ``per_query_values`` gives, per query, P (three diagonal conventions), the plain and
weighted gradient counts, smooth and exact AP and the norms of the two terms of the SmoothAP
gradient decomposition (Brown et al., 2020); ``anatomy_summary`` the logged summary of per-query
anatomy records; ``quantiles`` the 10/50/90 % levels the Monitor's summaries report.
"""

from __future__ import annotations

import math

from tests.reference.operating_region_loops import gradient_count, proportion
from tests.reference.smooth_ap_loops import cosine, decomposition_one_pair, smooth_ap_one_query
from tests.reference.tie_aware_loops import average_precision


def quantiles(values):
    """10/50/90 % quantiles with linear interpolation (numpy's default), on a plain list."""
    ordered = sorted(values)
    result = []
    for level in (0.1, 0.5, 0.9):
        position = level * (len(ordered) - 1)
        low = math.floor(position)
        high = min(low + 1, len(ordered) - 1)
        result.append(ordered[low] + (ordered[high] - ordered[low]) * (position - low))
    return result


def per_query_values(embeddings, labels, tau, eps=0.005):
    """Per query (NaN dropped), the values the shared-path quantities summarise."""
    vectors = [[x / math.sqrt(math.fsum(y * y for y in row)) for x in row] for row in embeddings]
    size = len(labels)
    rows = [[cosine(embeddings[q], embeddings[c]) for c in range(size)] for q in range(size)]
    out = {"p_seed": [], "p_off_diagonal": [], "p_without_query": [], "counts": [],
           "weighted": [], "smooth": [], "exact": [], "ad": [], "cb": [], "grad": [],
           "ad_share": [], "ratio": [], "cosine": []}  # fmt: skip
    for q in range(size):
        out["p_seed"].append(proportion(rows[q], tau, eps))
        out["p_off_diagonal"].append(proportion(rows[q], tau, eps, include_diagonal=False))
        others = [s for c, s in enumerate(rows[q]) if c != q]
        out["p_without_query"].append(proportion(others, tau, eps, include_diagonal=False))
        positives = [labels[c] == labels[q] and c != q for c in range(size)]
        keep = [c != q for c in range(size)]
        for key, weighted in (("counts", False), ("weighted", True)):
            out[key].append(gradient_count(rows[q], positives, tau, eps, weighted, keep))
        candidates = [c for c in range(size) if c != q]
        relevant = [labels[c] == labels[q] for c in candidates]
        if not any(relevant):
            continue
        out["smooth"].append(smooth_ap_one_query([rows[q][c] for c in candidates], relevant, tau))
        order = sorted(range(len(candidates)), key=lambda k: -rows[q][candidates[k]])
        out["exact"].append(average_precision(order, relevant))
        ad, cb = [0.0] * len(vectors[0]), [0.0] * len(vectors[0])
        others_vectors = [vectors[c] for c in candidates]
        for i, is_positive in enumerate(relevant):
            if not is_positive:
                continue
            parts = decomposition_one_pair(vectors[q], others_vectors, relevant, i, tau)
            scale = 1.0 / (sum(relevant) * parts["R"] ** 2)
            ad = [a + scale * parts["A"] * d for a, d in zip(ad, parts["D"], strict=True)]
            cb = [b - scale * parts["C"] * v for b, v in zip(cb, parts["B"], strict=True)]
        norm_ad = math.sqrt(math.fsum(a * a for a in ad))
        norm_cb = math.sqrt(math.fsum(b * b for b in cb))
        out["ad"].append(norm_ad)
        out["cb"].append(norm_cb)
        out["grad"].append(math.sqrt(math.fsum((a + b) ** 2 for a, b in zip(ad, cb, strict=True))))
        both = norm_ad * norm_cb  # a query with one positive has B = 0: no ratio, no cosine
        dot = math.fsum(a * b for a, b in zip(ad, cb, strict=True))
        out["ad_share"].append(norm_ad / (norm_ad + norm_cb))
        out["ratio"].append(norm_ad / norm_cb if norm_cb > 0 else math.nan)
        out["cosine"].append(dot / both if both > 0 else math.nan)
    return {key: [v for v in values if not math.isnan(v)] for key, values in out.items()}


def anatomy_summary(kept):
    """The logged anatomy summary (keys without prefix) of the loop records of kept queries."""

    def mean(values):
        finite = [v for v in values if math.isfinite(v)]
        return math.fsum(finite) / len(finite) if finite else math.nan

    def span(a):
        return max(a["num_negatives"] - 1, 1)

    active = [a["active_negatives"] for a in kept]
    expected = {
        "active_negatives_mean": mean(active),
        "active_negative_share": mean([a["active_negatives"] / a["num_negatives"] for a in kept]),
        "active_positives": mean([a["active_positives"] for a in kept]),
        "hardest_1pct_share": mean([a["share_1"] for a in kept]),
        "hardest_10pct_share": mean([a["share_10"] for a in kept]),
        "active_rank_depth": mean([(a["rank_mean"] - 1) / span(a) for a in kept]),
        "deepest_active_rank": mean([(a["rank_max"] - 1) / span(a) for a in kept]),
        "queries_without_gradient": mean([float(a["without"]) for a in kept]),
    }
    expected.update(zip(("active_negatives_q10", "active_negatives_q50", "active_negatives_q90"),
                        quantiles(active), strict=True))  # fmt: skip
    return expected
