"""The ``AD - CB`` decomposition of the SmoothAP gradient with respect to the query.

Bleeker & de Rijke (2022), appendix A, Eq. 8-14 (Eq. 12-18 of the long version). With raw
dot-product scores ``s_j = q . v_j`` and the rank convention ``D_ij = s_j - s_i`` (see
:mod:`gradlab.functional.smooth_ap`), for each positive ``i`` of query ``q``:

    A_i = R(i, S_P)     = 1 + sum_{j in P, j != i} G(D_ij)
    C_i                 =     sum_{j in N}         G(D_ij)
    R_i = R(i, S_Omega) = A_i + C_i
    B_i = sum_{j in P, j != i} sim(D_ij) (v_i - v_j)
    D_i = sum_{j in N}         sim(D_ij) (v_i - v_j)

and ``dAP_q/dq = 1/|P| sum_i (A_i D_i - C_i B_i) / R_i^2`` (Bleeker & de Rijke 2022, Eq. 13).

The vectors ``B_i`` and ``D_i`` carry ``(v_i - v_j)`` as the papers print them. Under the rank
convention ``dD_ij/dq = v_j - v_i = -(v_i - v_j)``, so ``dA_i/dq = -B_i`` and
``dC_i/dq = -D_i``; the quotient rule then gives ``(A_i D_i - C_i B_i) / R_i^2``. The papers reach
the same final form through two compensating slips (a sign in Eq. 4/8 and the order of the
quotient rule in Eq. 11/15); ``gradlab audit`` reports them step by step.
"""

from __future__ import annotations

import math
from typing import NamedTuple

import torch

from gradlab.errors import GradlabError
from gradlab.functional.score_losses import widened
from gradlab.functional.sigmoid import sigmoid_slope, tempered_sigmoid
from gradlab.validation import (
    check_same_device,
    check_shape,
    check_temperature,
    check_tensor,
)


class SmoothAPDecomposition(NamedTuple):
    """Per-positive terms of ``dAP/dq`` and their aggregates.

    Per-positive fields are flat over all (query, positive) pairs, in row-major order of the
    positive mask; ``query_index`` and ``positive_index`` say which pair each row is.
    Per-query fields have a leading ``[Q]`` dimension (dropped for a single ``[d]`` query).

    Attributes:
        query_index: ``[M]`` query of each pair.
        positive_index: ``[M]`` candidate index ``i`` of each pair.
        A: ``[M]`` ``R(i, S_P)``, the smoothed rank among positives.
        C: ``[M]`` the summed negative sigmoids.
        rank_all: ``[M]`` ``R(i, S_Omega) = A + C``.
        B: ``[M, d]`` ``sum_{j in P, j != i} sim(D_ij) (v_i - v_j)``.
        D: ``[M, d]`` ``sum_{j in N} sim(D_ij) (v_i - v_j)``.
        ap: ``[Q]`` smooth AP (NaN for a query without positives).
        ad_term: ``[Q, d]`` ``1/|P| sum_i A_i D_i / R_i^2``.
        cb_term: ``[Q, d]`` ``-1/|P| sum_i C_i B_i / R_i^2`` (the minus sign included).
        grad: ``[Q, d]`` ``dAP/dq = ad_term + cb_term`` (NaN for a query without positives).

    Example:
        >>> import torch
        >>> from gradlab.functional import smooth_ap_decomposition
        >>> q = torch.tensor([1.0, 0.0], dtype=torch.float64)
        >>> v = torch.tensor([[0.9, 0.1], [0.8, 0.3], [0.85, 0.0]], dtype=torch.float64)
        >>> parts = smooth_ap_decomposition(q, v, torch.tensor([True, False, True]), tau=0.1)
        >>> parts.positive_index.tolist(), bool(torch.equal(parts.rank_all, parts.A + parts.C))
        ([0, 2], True)
    """

    query_index: torch.Tensor
    positive_index: torch.Tensor
    A: torch.Tensor
    C: torch.Tensor
    rank_all: torch.Tensor
    B: torch.Tensor
    D: torch.Tensor
    ap: torch.Tensor
    ad_term: torch.Tensor
    cb_term: torch.Tensor
    grad: torch.Tensor


def smooth_ap_decomposition(
    queries: torch.Tensor,
    candidates: torch.Tensor,
    positives: torch.Tensor,
    tau: float = 0.01,
    *,
    candidate_mask: torch.Tensor | None = None,
) -> SmoothAPDecomposition:
    """Decompose ``dAP/dq`` into the papers' ``A``, ``B``, ``C``, ``D`` terms.

    Scores are raw dot products ``s_j = q . v_j`` (normalize the inputs first for cosine), so
    ``dD_ij/dq = v_j - v_i`` holds exactly.

    Args:
        queries: ``[Q, d]`` query embeddings, or ``[d]`` for one query; float16 and bfloat16
            are computed in float32 and the result returned in their dtype.
        candidates: ``[C, d]`` candidate embeddings ``v_j``.
        positives: ``[C]`` (shared by all queries) or ``[Q, C]`` bool relevance mask.
        tau: sigmoid temperature, finite and at least ``1e-30``, as for
            :func:`gradlab.functional.smooth_ap` (``1/tau`` must fit float32).
        candidate_mask: optional ``[C]`` or ``[Q, C]`` bool mask; ``False`` leaves a candidate
            out of that query's ranking (in-batch retrieval: the query itself), as in
            :func:`gradlab.functional.smooth_ap`.

    Returns:
        A :class:`SmoothAPDecomposition`. Cost ``O(sum_q |P_q| * C * d)`` time and
        ``O(sum_q |P_q| * (C + d))`` memory: a diagnostic, not a training path. A query
        without a positive has no AP: its ``grad`` is NaN while its ``ad_term`` and
        ``cb_term`` are 0 (empty sums), so ``grad = ad_term + cb_term`` holds on the other
        queries only.

    Raises:
        GradlabError: on bad shapes, dtypes, devices, non-finite input or ``tau``.

    Example:
        >>> import torch
        >>> from gradlab.functional import smooth_ap_decomposition
        >>> q = torch.tensor([1.0, 0.0], dtype=torch.float64)
        >>> v = torch.tensor([[0.9, 0.1], [0.8, 0.3], [0.85, 0.0]], dtype=torch.float64)
        >>> parts = smooth_ap_decomposition(q, v, torch.tensor([True, False, True]), tau=0.1)
        >>> bool(torch.allclose(parts.ad_term + parts.cb_term, parts.grad))
        True
    """
    tau = check_temperature("tau", tau)
    check_tensor("queries", queries, ndims=(1, 2), kind="float", finite=True)
    check_tensor("candidates", candidates, ndims=(2,), kind="float", finite=True)
    check_tensor("positives", positives, ndims=(1, 2), kind="bool")
    check_same_device(queries=queries, candidates=candidates, positives=positives)
    if queries.dtype != candidates.dtype:
        raise GradlabError(
            f"queries and candidates must share a dtype; got {queries.dtype} and {candidates.dtype}"
        )
    single = queries.dim() == 1
    if single:
        queries = queries.unsqueeze(0)
    if queries.shape[1] != candidates.shape[1]:
        raise GradlabError(
            "queries and candidates must share their embedding size; got "
            f"{queries.shape[1]} and {candidates.shape[1]}"
        )
    mask = (
        positives.unsqueeze(0).expand(queries.shape[0], -1) if positives.dim() == 1 else positives
    )
    check_shape("positives", mask, (queries.shape[0], candidates.shape[0]), "[C] or [Q, C]")
    if candidate_mask is not None:
        check_tensor("candidate_mask", candidate_mask, ndims=(1, 2), kind="bool")
        expected = mask.shape[1:] if candidate_mask.dim() == 1 else mask.shape
        check_shape("candidate_mask", candidate_mask, expected, "[C] or [Q, C]")
        check_same_device(queries=queries, candidate_mask=candidate_mask)
        keep = candidate_mask.expand_as(mask) if candidate_mask.dim() == 1 else candidate_mask
        mask = mask & keep
    else:
        keep = torch.ones_like(mask)
    # half precision: computed in float32 (a sum of sigmoids over a row in float16 is off by
    # up to 100 %), returned in the inputs' dtype
    parts = _decomposed(widened(queries), widened(candidates), mask, keep, tau, single)
    return _in_dtype(parts, queries.dtype)


def _in_dtype(parts: SmoothAPDecomposition, dtype: torch.dtype) -> SmoothAPDecomposition:
    """``parts`` with every floating field in ``dtype`` (the indices kept as they are)."""
    if parts.grad.dtype == dtype:
        return parts
    return SmoothAPDecomposition(*(field.to(dtype) if field.is_floating_point() else field
                                   for field in parts))  # fmt: skip


def _decomposed(
    queries: torch.Tensor,
    candidates: torch.Tensor,
    mask: torch.Tensor,
    keep: torch.Tensor,
    tau: float,
    single: bool,
) -> SmoothAPDecomposition:
    """:func:`smooth_ap_decomposition` of checked ``[Q, d]`` queries (``mask``: the positives
    that are candidates, ``keep``: the candidates)."""
    scores = queries @ candidates.T
    query_index, positive_index = torch.nonzero(mask, as_tuple=True)
    rows = scores[query_index]
    differences = rows - scores[query_index, positive_index].unsqueeze(1)  # D_ij = s_j - s_i
    is_self = torch.zeros_like(mask[query_index])
    is_self.scatter_(1, positive_index.unsqueeze(1), True)
    pos = (mask[query_index] & ~is_self).to(scores.dtype)
    neg = (~mask[query_index] & keep[query_index]).to(scores.dtype)

    step = tempered_sigmoid(differences, tau)
    slope = sigmoid_slope(differences, tau)  # sim(D_ij; tau), Bleeker & de Rijke Eq. 7
    A = 1.0 + (step * pos).sum(dim=1)
    C = (step * neg).sum(dim=1)
    rank_all = A + C
    anchors = candidates[positive_index]
    B = _weighted_differences(slope * pos, anchors, candidates)
    D = _weighted_differences(slope * neg, anchors, candidates)

    counts = mask.sum(dim=1).to(scores.dtype)
    weight = 1.0 / (counts[query_index] * rank_all**2)
    ad_term = _sum_per_query((weight * A).unsqueeze(1) * D, query_index, queries.shape[0])
    cb_term = -_sum_per_query((weight * C).unsqueeze(1) * B, query_index, queries.shape[0])
    ap = _sum_per_query(A / rank_all, query_index, queries.shape[0]) / counts
    grad = ad_term + cb_term
    defined = counts > 0
    finite = torch.stack([torch.isfinite(grad[defined]).all(), torch.isfinite(ap[defined]).all(),
                          torch.isfinite(B).all(), torch.isfinite(D).all()]).all()  # fmt: skip
    if not bool(finite):  # a diagnostic: one more host read, and no NaN handed back in silence
        largest = float(scores.abs().max())
        where = (f"its scores q . v_j reach {largest:.3g} at tau {tau:g}" if math.isfinite(largest)
                 else "its scores q . v_j themselves are not finite")  # fmt: skip
        raise GradlabError(
            f"smooth_ap_decomposition overflows {scores.dtype} on these inputs ({where}): its "
            "terms are not finite; scale the embeddings down (normalise them for cosine "
            "scores) or pass float64 tensors"
        )
    grad[~defined] = float("nan")
    if single:
        ap, ad_term, cb_term, grad = ap[0], ad_term[0], cb_term[0], grad[0]
    return SmoothAPDecomposition(
        query_index, positive_index, A, C, rank_all, B, D, ap, ad_term, cb_term, grad
    )


def _weighted_differences(
    weights: torch.Tensor, anchors: torch.Tensor, candidates: torch.Tensor
) -> torch.Tensor:
    """``sum_j w_ij (v_i - v_j)`` for every row: ``(sum_j w_ij) v_i - W V``."""
    return weights.sum(dim=1, keepdim=True) * anchors - weights @ candidates


def _sum_per_query(
    values: torch.Tensor, query_index: torch.Tensor, num_queries: int
) -> torch.Tensor:
    out = torch.zeros((num_queries, *values.shape[1:]), dtype=values.dtype, device=values.device)
    return out.index_add_(0, query_index, values)
