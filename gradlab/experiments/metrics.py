"""Retrieval metrics the studies need beyond :mod:`gradlab.functional.retrieval_metrics`."""

from __future__ import annotations

import torch

from gradlab.validation import check_shape, check_tensor


def map_at_r(scores: torch.Tensor, relevant: torch.Tensor) -> float:
    """MAP@R (Musgrave et al., "A Metric Learning Reality Check", ECCV 2020, Sec. 3.2).

    For a query with ``R`` relevant candidates, ``(1/R) sum_{i <= R} P(i) rel(i)``: the precision
    at each of the first ``R`` positions that holds a relevant item, divided by ``R``. Averaged
    over queries with ``R >= 1``. Ties in score are broken by candidate index (stable sort).

    Example:
        >>> scores = torch.tensor([[0.9, 0.8, 0.7, 0.1]])
        >>> map_at_r(scores, torch.tensor([[True, False, True, False]]))
        0.5
    """
    check_tensor("scores", scores, ndims=(2,), kind="float")
    check_tensor("relevant", relevant, ndims=(2,), kind="bool")
    check_shape("relevant", relevant, scores.shape, "one flag per score")
    order = torch.sort(scores, dim=1, descending=True, stable=True).indices
    ranked = relevant.gather(1, order)
    count = relevant.sum(dim=1)
    # Only a relevant item's position has a term, P(i) = (relevant items up to i) / i: the
    # terms go at their positions in a [Q, C] row of zeros, so that each row's sum adds the
    # same numbers in the same order as a sum over every position would.
    query, rank = ranked.nonzero(as_tuple=True)  # each query's relevant items, in rank order
    hits = torch.ones_like(query).cumsum(dim=0) - (count.cumsum(dim=0) - count)[query]
    position = rank + 1
    kept = position <= count[query]  # within the first R
    terms = scores.new_zeros(scores.shape, dtype=torch.float64)
    terms[query[kept], rank[kept]] = hits[kept].to(torch.float64) / position[kept]
    per_query = terms.sum(dim=1) / count.clamp(min=1)
    return per_query[count > 0].mean().item()
