"""Exact tie-aware AP and DCG (McSherry & Najork 2008; He et al. (2018, suppl.), Eq. 1-7).

Scores may tie (integer Hamming distances, histogram bins). The tie-aware value is the
expectation of AP (or DCG) over every ordering of the tied items, uniformly at random, and it
has a closed form per tie group. For a group ``g`` of ``n_g`` items holding ``n+_g`` relevant
ones, that starts after ``N_{g-1}`` items of which ``N+_{g-1}`` are relevant (He et al.
2018, suppl., Eq. 3 and 8-10):

    AP_T  = 1/N+ sum_g (n+_g / n_g) [ A_g n_g + B_g (H(N_g) - H(N_{g-1})) ]
    A_g   = (n+_g - 1) / (n_g - 1)   (0 when n_g = 1, where it multiplies zero)
    B_g   = N+_{g-1} + 1 - A_g (N_{g-1} + 1)
    DCG_T = sum_g mean(gain in g) * sum_{t = N_{g-1}+1}^{N_g} 1 / log2(t + 1)      (Eq. 4-7)

**Convention.** A larger score ranks higher. Pass distances negated (``-hamming``): only the
order and the ties matter. Each query is sorted once, so the cost is ``O(C log C)`` per query.
"""

from __future__ import annotations

import math

import torch

from gradlab.errors import GradlabError
from gradlab.validation import (
    check_real_device,
    check_same_device,
    check_shape,
    check_signed_scores,
    check_tensor,
    non_finite_message,
    value_checks_enabled,
)


def harmonic_number(n: torch.Tensor) -> torch.Tensor:
    """``H(n) = sum_{k=1}^n 1/k`` for non-negative (real) ``n``, as ``psi(n + 1) - psi(1)``.

    Subtracting ``psi(1) = -gamma`` as computed (not the constant) makes ``H(0)`` exactly 0.
    NaN passes (its H is NaN), as in :func:`gradlab.functional.harmonic_gap`.

    Raises:
        GradlabError: ``n`` not a real tensor, or negative somewhere (below 0 the digamma has
            poles at -1, -2, ...; between them its values are no sum of ``1/k``).

    Example:
        >>> import torch
        >>> from gradlab.functional import harmonic_number
        >>> [round(h, 4) for h in harmonic_number(torch.tensor([0.0, 1.0, 3.0])).tolist()]
        [0.0, 1.0, 1.8333]
    """
    check_tensor("n", n, ndims=tuple(range(9)), kind="any_real")
    check_real_device(n=n)  # its sign is read
    if n.numel() and value_checks_enabled() and bool((n < 0).any()):
        raise GradlabError(f"n must be a count, at least 0, for harmonic_number; got "
                           f"{float(n.min()):g}")  # fmt: skip
    return _harmonic(n)


def _harmonic(n: torch.Tensor) -> torch.Tensor:
    """:func:`harmonic_number` unchecked (counts the caller made)."""
    return torch.digamma(n + 1.0) - torch.digamma(torch.ones_like(n))


class TieGroups:
    """Tie groups of each query, in rank order (best first), padded to ``C`` groups.

    Attributes:
        sizes: ``[Q, C]`` items per group (0 for padding).
        before: ``[Q, C]`` items in the groups ranked above (``N_{g-1}``).
        order: ``[Q, C]`` candidate indices sorted by decreasing score.
        group_of_rank: ``[Q, C]`` group index of each rank.
    """

    def __init__(self, scores: torch.Tensor) -> None:
        sorted_scores, self.order = scores.sort(dim=1, descending=True, stable=True)
        starts = torch.ones_like(sorted_scores, dtype=torch.bool)
        starts[:, 1:] = sorted_scores[:, 1:] != sorted_scores[:, :-1]
        self.group_of_rank = starts.long().cumsum(dim=1) - 1
        ones = torch.ones_like(sorted_scores, dtype=torch.float64)
        self.sizes = self.group_sum(ones)
        self.before = self.sizes.cumsum(dim=1) - self.sizes

    def group_sum(self, values: torch.Tensor) -> torch.Tensor:
        """Sum per group of per-candidate ``values`` ``[Q, C]`` (given in candidate order)."""
        ranked = values.to(torch.float64).gather(1, self.order)
        out = torch.zeros_like(ranked)
        return out.scatter_add_(1, self.group_of_rank, ranked)


def _check_scores_and_labels(scores: object, labels: object, name: str, kind: str) -> bool:
    check_signed_scores("scores", scores, ndims=(1, 2))  # -distance in uint8: -1 is 255
    check_tensor(name, labels, ndims=(1, 2), kind=kind)
    check_shape(name, labels, scores.shape, "one value per score")
    check_same_device(scores=scores, **{name: labels})
    return scores.dim() == 1


def tie_aware_ap(
    scores: torch.Tensor,
    positives: torch.Tensor,
    *,
    candidate_mask: torch.Tensor | None = None,
) -> torch.Tensor:
    """Tie-aware average precision per query (He et al. 2018, suppl., Eq. 2-3; McSherry & Najork).

    Args:
        scores: ``[C]`` or ``[Q, C]`` real or signed integer scores; larger ranks higher,
            equal scores are tied. Pass ``-distance`` for distances, in a signed dtype
            (unsigned scores are refused: negated unsigned distances wrap around, ``-1`` is
            255 in ``uint8``, 65535 in ``uint16``).
        positives: bool tensor of the same shape, ``True`` where an item is relevant.
        candidate_mask: optional bool tensor of the same shape, ``False`` where an entry is
            no candidate of its query: left out of the ranking (not above, not tied with any
            candidate) and not relevant whatever ``positives`` says. For a batch scored
            against itself, ``~torch.eye(B, dtype=torch.bool)`` leaves each query out of its
            own ranking. ``None``: every entry is a candidate.

    Returns:
        float64 ``[Q]`` (0-d for ``[C]`` input): the expected AP over all tie-consistent
        orderings. NaN for a query without positives (among its candidates). Without ties
        it is ordinary AP.

    Raises:
        GradlabError: scores that are not finite real or signed integer ``[C]`` or ``[Q, C]``
            tensors, or ``positives`` / ``candidate_mask`` not bool tensors of their shape and
            device.

    Example:
        >>> import torch
        >>> from gradlab.functional import tie_aware_ap
        >>> tie_aware_ap(torch.tensor([2, 1, 1]), torch.tensor([False, True, False]))
        tensor(0.4167, dtype=torch.float64)
        >>> scores = torch.tensor([[1.0, 0.9, 0.2], [0.9, 1.0, 0.1], [0.2, 0.1, 1.0]])
        >>> same_class = torch.tensor([[True, True, False], [True, True, False],
        ...                            [False, False, True]])
        >>> tie_aware_ap(scores, same_class)  # each query its own top positive
        tensor([1., 1., 1.], dtype=torch.float64)
        >>> tie_aware_ap(scores, same_class, candidate_mask=~torch.eye(3, dtype=torch.bool))
        tensor([1., 1., nan], dtype=torch.float64)
    """
    single = _check_scores_and_labels(scores, positives, "positives", "bool")
    if candidate_mask is not None:
        check_tensor("candidate_mask", candidate_mask, ndims=(1, 2), kind="bool")
        check_shape("candidate_mask", candidate_mask, scores.shape, "one flag per score")
        check_same_device(scores=scores, candidate_mask=candidate_mask)
        positives = positives & candidate_mask  # no candidate, no positive
    rows, rel = (scores.unsqueeze(0), positives.unsqueeze(0)) if single else (scores, positives)
    # Only the groups that hold a positive have a term. Their counts are integers (exact),
    # read from each row's sort; their terms are placed at their group's index in a [Q, C]
    # row of zeros, so that each row's sum adds the same numbers in the same order as a sum
    # over every group would.
    size = rows.shape[1]
    sorted_scores, order = rows.sort(dim=1, descending=True, stable=True)
    outside = None
    if candidate_mask is not None:  # the entries that are no candidates after all the others
        kept = (candidate_mask.unsqueeze(0) if single else candidate_mask).gather(1, order)
        _, last = (~kept).to(torch.uint8).sort(dim=1, stable=True)
        order = order.gather(1, last)
        sorted_scores = rows.gather(1, order)
        outside = ~kept.gather(1, last)
    ranked = rel.gather(1, order)
    starts = torch.ones_like(ranked)  # rank r opens a tie group
    starts[:, 1:] = sorted_scores[:, 1:] != sorted_scores[:, :-1]
    if outside is not None:  # each its own group: tied with no candidate
        starts |= outside
    query, rank = ranked.nonzero(as_tuple=True)  # each query's positives, in rank order
    if bool(starts.all()):  # no ties: every group is one item, group = rank
        group, opened, closed = rank, None, None
    else:
        ends = torch.ones_like(ranked)  # rank r closes a tie group
        ends[:, :-1] = starts[:, 1:]
        position = torch.ones_like(ranked, dtype=torch.long).cumsum(dim=1) - 1
        opened = torch.where(starts, position, 0).cummax(dim=1).values  # N_{g-1} at a rank
        closed = torch.where(ends, position, size).flip(1).cummin(dim=1).values.flip(1) + 1
        group = (starts.long().cumsum(dim=1) - 1)[query, rank]
    _, in_group = torch.unique_consecutive(query * max(1, size) + group, return_counts=True)
    first = in_group.cumsum(dim=0) - in_group  # a group's first positive in that list
    query, group, rank = query[first], group[first], rank[first]
    row_first = rel.sum(dim=1).cumsum(dim=0) - rel.sum(dim=1)  # a query's first positive
    in_groups_before = (first - row_first[query]).to(torch.float64)  # N+_{g-1}
    in_group = in_group.to(torch.float64)  # n+
    if opened is None:
        before = rank.to(torch.float64)
        n = torch.ones_like(before)
    else:
        before = opened[query, rank].to(torch.float64)
        n = closed[query, rank].to(torch.float64) - before
    share = torch.where(n > 1, (in_group - 1.0) / (n - 1.0).clamp(min=1.0), 0.0)
    offset = in_groups_before + 1.0 - share * (before + 1.0)
    # a group of one (no tie): 1 / (N + 1) in one division, as classic AP's precision has it
    # (the difference of two harmonic numbers rounds: a perfect ranking came out at 1 + 2 ulp)
    harmonic = torch.where(n == 1, 1.0 / (before + 1.0), _harmonic(before + n) - _harmonic(before))
    per_group = torch.zeros_like(ranked, dtype=torch.float64)
    per_group[query, group] = torch.where(
        in_group > 0, in_group / n.clamp(min=1.0) * (share * n + offset * harmonic), 0.0
    )
    total = rel.sum(dim=1).to(torch.float64)
    ap = torch.where(total > 0, per_group.sum(dim=1) / total.clamp(min=1.0), math.nan)
    return ap[0] if single else ap


def tie_aware_ap_at_positives(
    scores: torch.Tensor,
    positive_scores: torch.Tensor,
    candidate_mask: torch.Tensor | None = None,
) -> torch.Tensor:
    """Tie-aware AP per query from its positives' scores, without sorting (He et al. 2018, Eq. 3).

    The same value as :func:`tie_aware_ap` (up to float64 rounding), computed per positive
    instead of per tie group: positive ``i`` of a query lies in a tie group of
    ``n = #{c: s_c = s_i}`` candidates holding ``n+ = #{positives k: s_k = s_i}`` positives,
    after ``N_{g-1} = #{c: s_c > s_i}`` candidates of which ``N+_{g-1}`` are positives. Each
    of the group's ``n+`` positives carries ``1 / n+`` of the group's term of Eq. 3, so

        AP_T = 1/|P| sum_{i in P} [ A_g + B_g (H(N_{g-1} + n) - H(N_{g-1})) / n ]

    with ``A_g`` and ``B_g`` of the module docstring. The counts are comparisons of each
    positive's score with the query's row, ``O(Q g C)`` for ``g`` positives per query (the cost
    of SmoothAP's own positive rows), against ``O(Q C log C)`` for a sort of every row: cheaper
    while ``g`` is below ``log2 C`` or so.

    Args:
        scores: ``[Q, C]`` finite real or signed integer scores; larger ranks higher, equal
            scores are tied (unsigned scores are refused, as by :func:`tie_aware_ap`).
        positive_scores: ``[Q, g]`` the scores of each query's ``g`` relevant candidates, each
            relevant candidate exactly once (``scores.gather(1, positive_columns)``), ``g >= 1``.
            Every query has the same number of positives: group queries by it.
        candidate_mask: optional ``[Q, C]`` bool, the entries that are candidates (the
            positives among them); ``None``: all are.

    Returns:
        float64 ``[Q]``: tie-aware AP of each query.

    Raises:
        GradlabError: wrong types, shapes or devices, or non-finite scores.

    Example:
        >>> scores = torch.tensor([[2.0, 1.0, 1.0]])
        >>> tie_aware_ap_at_positives(scores, scores[:, 1:2])  # as tie_aware_ap's example
        tensor([0.4167], dtype=torch.float64)
    """
    check_signed_scores("scores", scores, ndims=(2,))
    check_signed_scores("positive_scores", positive_scores, ndims=(2,))
    if positive_scores.shape[0] != scores.shape[0] or positive_scores.shape[1] == 0:
        raise GradlabError(
            f"positive_scores must be [Q, g] with Q = {scores.shape[0]} (the rows of scores) "
            f"and g >= 1; got shape {tuple(positive_scores.shape)}"
        )
    check_same_device(scores=scores, positive_scores=positive_scores)
    if positive_scores.dtype != scores.dtype:
        positive_scores = positive_scores.to(scores.dtype)
    floating = scores.is_floating_point()
    if candidate_mask is not None:
        check_tensor("candidate_mask", candidate_mask, ndims=(2,), kind="bool")
        check_shape("candidate_mask", candidate_mask, scores.shape, "one flag per score")
        check_same_device(scores=scores, candidate_mask=candidate_mask)
        if floating:  # below every (finite) positive: never above it, never tied with it
            scores = scores.masked_fill(~candidate_mask, -math.inf)
    rows, anchors = scores.unsqueeze(1), positive_scores.unsqueeze(2)  # [Q, 1, C], [Q, g, 1]
    above, level = rows > anchors, rows == anchors  # [Q, g, C]
    if candidate_mask is not None and not floating:
        above &= candidate_mask.unsqueeze(1)
        level &= candidate_mask.unsqueeze(1)
    return tie_aware_ap_from_counts(positive_scores, above.sum(dim=2), level.sum(dim=2))


def tie_aware_ap_from_counts(
    positive_scores: torch.Tensor, above: torch.Tensor, tied: torch.Tensor
) -> torch.Tensor:
    """Tie-aware AP per query from how many candidates score above / level with each positive.

    The closed form of :func:`tie_aware_ap_at_positives` once the counts are known (e.g. from
    a search of sorted rows): ``above`` ``[Q, g]`` is ``N_{g-1} = #{candidates c: s_c > s_i}``
    and ``tied`` ``[Q, g]`` is ``n = #{candidates c: s_c = s_i}`` (positive ``i`` included, so
    ``n >= 1``) for each of the ``g`` positives whose scores are ``positive_scores`` ``[Q, g]``.
    He et al. (2018, suppl.), Eq. 3 (module docstring). No argument checks: the callers' counts
    are trusted.

    Example:
        >>> tie_aware_ap_from_counts(torch.tensor([[1.0]]), torch.tensor([[1]]),
        ...                          torch.tensor([[2]]))
        tensor([0.4167], dtype=torch.float64)
    """
    before = above.to(torch.float64)  # N_{g-1}
    size = tied.to(torch.float64)  # n
    anchors, among = positive_scores.unsqueeze(2), positive_scores.unsqueeze(1)
    positives_before = (among > anchors).sum(dim=2).to(torch.float64)  # N+_{g-1}
    positives_tied = (among == anchors).sum(dim=2).to(torch.float64)  # n+
    share = torch.where(size > 1, (positives_tied - 1.0) / (size - 1.0).clamp(min=1.0), 0.0)
    offset = positives_before + 1.0 - share * (before + 1.0)
    # a positive tied with nothing: its precision (N+ + 1) / (N + 1) in one division, as
    # classic AP has it (the difference of two harmonic numbers rounds: a perfect ranking
    # came out at 1 + 2 ulp)
    harmonic = torch.where(size == 1, 1.0 / (before + 1.0),
                           (_harmonic(before + size) - _harmonic(before)) / size)  # fmt: skip
    return (share + offset * harmonic).mean(dim=1)


def tie_aware_dcg(scores: torch.Tensor, gains: torch.Tensor) -> torch.Tensor:
    """Tie-aware DCG per query with the discount ``1/log2(rank + 1)`` (He et al. 2018, Eq. 4-7).

    Args:
        scores: ``[C]`` or ``[Q, C]`` real or signed integer scores; larger ranks higher,
            equal scores are tied (unsigned scores are refused, as by :func:`tie_aware_ap`).
        gains: float tensor of the same shape, the gain of each candidate (e.g. ``2^rel - 1``).

    Returns:
        float64 ``[Q]``: the expected DCG over all tie-consistent orderings (scikit-learn's
        ``dcg_score(..., ignore_ties=False)`` computes the same).

    Example:
        >>> import torch
        >>> from gradlab.functional import tie_aware_dcg
        >>> round(tie_aware_dcg(torch.tensor([1, 1]), torch.tensor([1.0, 0.0])).item(), 4)
        0.8155
    """
    single = _check_scores_and_labels(scores, gains, "gains", "float")
    if not bool(torch.isfinite(gains).all()):
        raise GradlabError(non_finite_message("gains", gains))
    rows, gain_rows = (scores.unsqueeze(0), gains.unsqueeze(0)) if single else (scores, gains)
    groups = TieGroups(rows)
    ranks = torch.arange(1, rows.shape[1] + 1, dtype=torch.float64, device=rows.device)
    discount = (1.0 / torch.log2(ranks + 1.0)).expand(rows.shape[0], -1)
    discount_per_group = torch.zeros_like(groups.sizes).scatter_add_(
        1, groups.group_of_rank, discount.contiguous()
    )
    mean_gain = groups.group_sum(gain_rows) / groups.sizes.clamp(min=1.0)
    dcg = (mean_gain * discount_per_group).sum(dim=1)
    return dcg[0] if single else dcg


def tie_aware_ndcg(scores: torch.Tensor, gains: torch.Tensor) -> torch.Tensor:
    """Tie-aware DCG divided by the ideal DCG (gains sorted, no ties; He et al. 2018, Eq. 4-7).

    Args:
        scores: ``[C]`` or ``[Q, C]``; larger ranks higher, equal scores are tied.
        gains: finite float tensor of the same shape (negative gains are gains too).

    Returns:
        float64 ``[Q]`` (0-d for ``[C]`` input); NaN for a query whose ideal DCG is not
        positive (every gain 0, or the gains' ideal order summing below 0).

    Raises:
        GradlabError: bad tensors (see :func:`tie_aware_dcg`).

    Example:
        >>> import torch
        >>> from gradlab.functional import tie_aware_ndcg
        >>> round(tie_aware_ndcg(torch.tensor([1, 1]), torch.tensor([1.0, 0.0])).item(), 4)
        0.8155
    """
    dcg = tie_aware_dcg(scores, gains)
    single = gains.dim() == 1
    gain_rows = gains.unsqueeze(0) if single else gains
    ideal_gains = gain_rows.to(torch.float64).sort(dim=1, descending=True).values
    ranks = torch.arange(1, gain_rows.shape[1] + 1, dtype=torch.float64, device=gains.device)
    ideal = (ideal_gains / torch.log2(ranks + 1.0)).sum(dim=1)
    ideal = ideal[0] if single else ideal
    return torch.where(ideal > 0, dcg / torch.where(ideal > 0, ideal, 1.0), math.nan)
