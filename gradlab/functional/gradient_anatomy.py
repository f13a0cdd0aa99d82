"""Gradient anatomy: which (query, candidate) pairs of a score matrix receive gradient.

Bleeker & de Rijke (2022, Sec. 5 and appendix B) ask, for the loss being trained, how many pairs
per query actually receive gradient, how hard they are, and whether image->caption and
caption->image queries differ. Their counts are SmoothAP-specific (entries of the difference
matrix, :func:`gradlab.functional.gradient_counts`); the anatomy asks the same question of any
loss written on a score matrix ``S`` ``[Q, C]`` by reading ``G = dL/dS`` directly.

Per query ``q`` (a row), with negatives ``N(q)`` = candidates that are not positives:

* an entry ``(q, c)`` is **active** when ``|G[q, c]| > absolute_threshold`` **and**
  ``|G[q, c]| >= relative_threshold * max_c' |G[q, c']|`` (the query's largest entry, over its
  candidates). The absolute threshold removes numerical zeros; the relative one removes entries
  that are negligible next to the query's own largest one, which does not depend on how the loss
  is scaled (a mean over ``Q`` queries, a temperature, a learning-rate-like factor);
* the **hardness share** ``h_f`` is the share of the negatives' gradient mass
  ``sum_{c in N(q)} |G[q, c]|`` carried by the hardest ``ceil(f |N(q)|)`` negatives by score
  (``f`` = 1 % and 10 %); NaN when that mass is 0;
* the **rank** of a negative is its 1-based position among the query's negatives by descending
  score (1 = the hardest); the ranks of the active negatives say how deep into the ranking the
  gradient reaches. Negatives with equal scores are ranked by column index, not by their
  expectation over the orders of the tie: where many negatives tie (an untrained or collapsed
  model, half precision), the hardness shares and ranks depend on the columns' order;
* a query **receives no gradient** when it has at least one candidate and no active entry.

Non-finite input (documented, not refused, since refusing would need a host read):

* a NaN entry of ``score_grad`` is never active and carries no gradient mass (a loss may
  legitimately report a NaN gradient; the anatomy counts what is finite);
* the scores order the negatives, so a query with a NaN score among its candidates has no
  ranking: its ``negative_rank`` row is all 0 and its rank statistics and hardness shares are
  NaN (its activity counts, which read only ``score_grad``, are kept). ``+-inf`` scores rank
  normally (first / last). NaN scores of non-candidates are ignored.

Everything is computed on ``score_grad``'s device with tensor operations over all queries at
once: no host synchronisation and no Python loop over queries. The cost is one row sort of the
scores (``O(Q C log C)``) and a few masked passes over ``[Q, C]``; the thresholds are applied in
``score_grad``'s dtype and the gradient masses are summed in float64. Ties in score are broken
by column index (stable sort).
"""

from __future__ import annotations

import math
from typing import NamedTuple

import torch

from gradlab.validation import (
    check_in_range,
    check_non_negative_finite,
    check_real_device,
    check_same_device,
    check_shape,
    check_tensor,
    positional_candidate_mask,
    value_checks_enabled,
)

DEFAULT_ABSOLUTE_THRESHOLD = 1e-10
"""|dL/dS| at or below this is treated as zero: far below float32's resolution (about 1e-7
relative) of the O(1) gradients of a loss averaged over a batch, well above float64 noise."""

DEFAULT_RELATIVE_THRESHOLD = 1e-2
"""An entry below 1 % of its query's largest |dL/dS| is negligible next to it."""

RELATIVE_THRESHOLD_RANGE = "a share of the query's largest |dL/dS|"
"""Why ``relative_threshold`` lies in [0, 1] (said when a value is refused)."""

HALF_DTYPES = (torch.float16, torch.bfloat16)
"""Gradients whose relative threshold ``relative_threshold * max |G|`` is computed in float32."""

HARD_FRACTIONS = (0.01, 0.1)
"""Fractions of the hardest negatives whose share of the negative gradient mass is reported."""

HARD_DIVISORS = tuple(round(1 / fraction) for fraction in HARD_FRACTIONS)
""":data:`HARD_FRACTIONS` as ``1 / k``: a share reads the hardest ``ceil(N / k)`` of a query's
``N`` negatives (:func:`hardest_count`)."""


def hardest_count(num_negatives: torch.Tensor, divisor: int) -> torch.Tensor:
    """``ceil(N / divisor)`` of each query's number of negatives ``N``: how many of its hardest
    negatives a share of :data:`HARD_DIVISORS` reads. Counted in integers (in the dtype of
    ``num_negatives``), exact for every count, where a float32 product rounds past 13 million.

    Example:
        >>> hardest_count(torch.tensor([0, 1, 10, 11, 100, 101]), 10).tolist()
        [0, 1, 1, 2, 10, 11]
    """
    return (num_negatives + (divisor - 1)) // divisor


class GradientAnatomy(NamedTuple):
    """Per-query anatomy of ``dL/dS``, as :func:`gradient_anatomy` returns it (its thresholds
    say which entries are active).

    Attributes:
        active: ``[Q, C]`` bool, entries above both thresholds (candidates only).
        active_positives: ``[Q]`` int64, active entries among the positives.
        active_negatives: ``[Q]`` int64, active entries among the negatives.
        num_positives: ``[Q]`` int64, positives among the candidates.
        num_negatives: ``[Q]`` int64, negatives among the candidates.
        negative_rank: ``[Q, C]`` int64, 1-based rank of each negative among the query's
            negatives by descending score; 0 for positives and non-candidates.
        active_negative_rank_mean: ``[Q]`` float64, mean rank of the active negatives (NaN if
            none).
        active_negative_rank_max: ``[Q]`` float64, deepest rank that is active (NaN if none).
        hardest_1pct_share: ``[Q]`` float64, share of the negative gradient mass on the hardest
            ``ceil(|N| / 100)`` negatives (NaN when the negatives carry no gradient).
        hardest_10pct_share: ``[Q]`` float64, the same for the hardest ``ceil(|N| / 10)``.
        without_gradient: ``[Q]`` bool, queries with a candidate and no active entry.

    Example:
        >>> import torch
        >>> from gradlab.functional import gradient_anatomy
        >>> anatomy = gradient_anatomy(torch.tensor([[-1.0, 0.5, 0.0]]),
        ...                            torch.tensor([[0.9, 0.8, 0.1]]),
        ...                            torch.tensor([[True, False, False]]))
        >>> anatomy.num_positives.tolist(), anatomy.num_negatives.tolist()
        ([1], [2])
        >>> anatomy.without_gradient.tolist()  # the positive and one negative get gradient
        [False]
    """

    active: torch.Tensor
    active_positives: torch.Tensor
    active_negatives: torch.Tensor
    num_positives: torch.Tensor
    num_negatives: torch.Tensor
    negative_rank: torch.Tensor
    active_negative_rank_mean: torch.Tensor
    active_negative_rank_max: torch.Tensor
    hardest_1pct_share: torch.Tensor
    hardest_10pct_share: torch.Tensor
    without_gradient: torch.Tensor


@positional_candidate_mask(3)
def gradient_anatomy(
    score_grad: torch.Tensor,
    scores: torch.Tensor,
    positives: torch.Tensor,
    *,
    candidate_mask: torch.Tensor | None = None,
    absolute_threshold: float = DEFAULT_ABSOLUTE_THRESHOLD,
    relative_threshold: float = DEFAULT_RELATIVE_THRESHOLD,
) -> GradientAnatomy:
    """Which pairs of a ``[Q, C]`` score matrix receive gradient, per query (rows are queries).

    For the other retrieval direction of a cross-modal batch pass the transposes
    (``score_grad.T, scores.T, positives.T``): columns become queries.

    Args:
        score_grad: ``[Q, C]`` float, ``dL/dS`` of the loss with respect to ``scores``.
        scores: ``[Q, C]`` float scores (larger ranks higher), for hardness and ranks.
        positives: ``[Q, C]`` bool relevance mask.
        candidate_mask: optional ``[Q, C]`` bool mask of the entries that are candidates (e.g.
            ``False`` on the diagonal of in-batch retrieval); ``None``: all are.
        absolute_threshold: ``>= 0``; an entry is active only if ``|G| >`` this
            (default :data:`DEFAULT_ABSOLUTE_THRESHOLD` = 1e-10).
        relative_threshold: in ``[0, 1]``; an entry is active only if ``|G| >=`` this times
            the query's largest ``|G|`` (default :data:`DEFAULT_RELATIVE_THRESHOLD` = 0.01),
            a product taken in float32 for half-precision gradients.

    Returns:
        :class:`GradientAnatomy`. NaN entries of ``score_grad`` are never active, so an
        all-NaN gradient reads as no gradient at all, and an infinite entry is its row's
        largest, so it alone is active and holds all of the row's mass: the function reads no
        value (no host synchronisation), so check ``torch.isfinite(score_grad).all()`` first
        where either is possible (the Monitor does, and logs NaN for such a step). A query
        with a NaN score among its candidates has no ranks (0) and NaN rank and hardness
        statistics: a ranking with a NaN in it is undefined. Negatives that tie in score are
        ranked by column index, so the hardest-share and rank statistics of a query whose
        negatives tie (half-precision scores, an untrained or collapsed model) depend on
        which columns hold the gradient; the counts of active entries do not.

    Raises:
        GradlabError: non-tensor or wrongly shaped/typed arguments, tensors on different
            devices or on the ``"meta"`` device (shapes without values; accepted inside
            :func:`gradlab.validation.skip_value_checks`, as the Monitor calls it), or
            thresholds out of range.

    Example:
        >>> import torch
        >>> from gradlab.functional import gradient_anatomy
        >>> grad = torch.tensor([[-1.0, 0.5, 0.0, 0.001]])
        >>> scores = torch.tensor([[0.9, 0.8, 0.1, 0.5]])
        >>> positives = torch.tensor([[True, False, False, False]])
        >>> anatomy = gradient_anatomy(grad, scores, positives)
        >>> anatomy.active_positives.tolist(), anatomy.active_negatives.tolist()
        ([1], [1])
        >>> anatomy.negative_rank.tolist()
        [[0, 1, 3, 2]]
    """
    check_tensor("score_grad", score_grad, ndims=(2,), kind="float")
    check_tensor("scores", scores, ndims=(2,), kind="float")
    check_tensor("positives", positives, ndims=(2,), kind="bool")
    if scores.shape != score_grad.shape and positives.shape == score_grad.shape:
        check_shape("scores", scores, score_grad.shape, "the shape of score_grad and positives")
    check_shape("score_grad", score_grad, scores.shape, "the shape of scores")
    check_shape("positives", positives, scores.shape, "one flag per score")
    check_same_device(score_grad=score_grad, scores=scores, positives=positives)
    if candidate_mask is not None:
        check_tensor("candidate_mask", candidate_mask, ndims=(2,), kind="bool")
        check_shape("candidate_mask", candidate_mask, score_grad.shape, "one flag per score")
        check_same_device(score_grad=score_grad, candidate_mask=candidate_mask)
    absolute_threshold = check_non_negative_finite("absolute_threshold", absolute_threshold)
    relative_threshold = check_in_range("relative_threshold", relative_threshold, 0.0, 1.0,
                                        RELATIVE_THRESHOLD_RANGE)  # fmt: skip
    if value_checks_enabled():  # a shape without values has no anatomy, as the metrics refuse it
        check_real_device(score_grad=score_grad, scores=scores, positives=positives,
                          candidate_mask=candidate_mask)  # fmt: skip

    if candidate_mask is not None:
        positives = positives & candidate_mask
        negatives = candidate_mask & ~positives
    else:
        candidate_mask = torch.ones_like(positives)
        negatives = ~positives
    num_queries, num_candidates = score_grad.shape
    if num_candidates == 0:  # no candidate at all: nothing is active, every statistic is NaN
        return _empty_anatomy(positives, num_queries)
    # In score_grad's dtype; masks, not multiplications, so no [Q, C] type conversion.
    magnitude = score_grad.detach().abs().nan_to_num(nan=0.0).masked_fill_(~candidate_mask, 0.0)
    largest = magnitude.amax(dim=1, keepdim=True)
    # the relative threshold of half precision in float32: rounded to float16 it loses up to
    # half of its value where it is subnormal (a largest |G| below 6e-3)
    wide = largest.float() if largest.dtype in HALF_DTYPES else largest
    active = (magnitude > absolute_threshold) & (magnitude >= relative_threshold * wide)
    active &= candidate_mask
    active_negative = active & negatives
    active_negatives = active_negative.sum(dim=1)
    num_negatives = negatives.sum(dim=1)

    # Negatives by descending score, ties by column index, the others last: the one sort,
    # ascending on the negated scores with NaN in the others' places (NaN sorts after every
    # number, +inf included: a negative scoring -inf still ranks before them).
    keyed = scores.detach().neg().masked_fill_(~negatives, math.nan)
    order = torch.sort(keyed, dim=1, stable=True).indices
    positions = torch.arange(1, num_candidates + 1, device=order.device).expand_as(order)
    negative_rank = torch.empty_like(order).scatter_(1, order, positions)
    # A NaN score among a query's candidates leaves it without a ranking (no host read).
    unranked = (torch.isnan(scores.detach()) & candidate_mask).any(dim=1)
    negative_rank.masked_fill_(~negatives | unranked.unsqueeze(1), 0)

    active_ranks = negative_rank.masked_fill(~active_negative, 0)
    count = active_negatives.to(torch.float64)
    rank_sum = active_ranks.sum(dim=1).to(torch.float64)
    ranked = (count > 0) & ~unranked
    rank_mean = torch.where(ranked, rank_sum / count.clamp(min=1), math.nan)
    rank_max = torch.where(ranked, active_ranks.amax(dim=1).to(torch.float64), math.nan)

    negative_mass = magnitude.masked_fill_(~negatives, 0.0)  # magnitude is not used below
    cumulative = torch.gather(negative_mass, 1, order).cumsum(dim=1, dtype=torch.float64)
    total = cumulative[:, -1]
    shares = []
    for divisor in HARD_DIVISORS:  # two fixed fractions, not a loop over queries
        hardest = hardest_count(num_negatives, divisor)
        mass = torch.gather(cumulative, 1, (hardest - 1).clamp(min=0).unsqueeze(1)).squeeze(1)
        defined = (total > 0) & ~unranked
        # total > 0 wherever the share is defined: no floor (a float64 mass below 1e-300
        # is still a mass, and its share is a ratio like any other)
        shares.append(torch.where(defined, mass / total, math.nan))
    without = candidate_mask.any(dim=1) & ~active.any(dim=1)
    return GradientAnatomy(
        active=active,
        active_positives=(active & positives).sum(dim=1),
        active_negatives=active_negatives,
        num_positives=positives.sum(dim=1),
        num_negatives=num_negatives,
        negative_rank=negative_rank,
        active_negative_rank_mean=rank_mean,
        active_negative_rank_max=rank_max,
        hardest_1pct_share=shares[0],
        hardest_10pct_share=shares[1],
        without_gradient=without,
    )


def _empty_anatomy(positives: torch.Tensor, num_queries: int) -> GradientAnatomy:
    """The anatomy of a ``[Q, 0]`` matrix: no candidate, nothing active, NaN statistics."""
    zeros = torch.zeros(num_queries, dtype=torch.long, device=positives.device)
    nan = torch.full((num_queries,), math.nan, dtype=torch.float64, device=positives.device)
    return GradientAnatomy(
        active=positives.clone(),
        active_positives=zeros,
        active_negatives=zeros,
        num_positives=zeros,
        num_negatives=zeros,
        negative_rank=torch.zeros_like(positives, dtype=torch.long),
        active_negative_rank_mean=nan,
        active_negative_rank_max=nan,
        hardest_1pct_share=nan,
        hardest_10pct_share=nan,
        without_gradient=torch.zeros_like(zeros, dtype=torch.bool),
    )
