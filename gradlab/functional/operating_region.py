"""The sigmoid operating region of SmoothAP and the proportion P of score differences inside it.

Brown et al. (2020), Smooth-AP supplementary material, Section 3, Eq. 1: P is the proportion of
the entries of a query's ``m x m`` difference matrix whose sigmoid slope exceeds a threshold,

    P = sum_{i, j} [ |dG(D_ij)/dD_ij| > eps ] / m^2,      eps = 0.005, tau = 0.01.

The slope ``G(1 - G)/tau`` (Bleeker & de Rijke 2022, Eq. 7) falls strictly as ``|D|`` grows, so
the region is an interval: ``|dG/dD| > eps`` exactly when ``|D| < w`` with

    w = tau * ln((1 + r) / (1 - r)) = 2 tau artanh(r),      r = sqrt(1 - 4 eps tau),

and it is empty when the largest slope, ``1 / (4 tau)`` at ``D = 0``, is not above ``eps``:
``eps * tau >= 1/4``. Counting ``|s_i - s_j| < w`` for sorted scores is a window count, so P costs
``O(C log C)`` per query instead of ``O(C^2)``. Entries at exactly ``|D| = w`` are decided up to
floating-point rounding.

Gradient counts follow Bleeker & de Rijke (2022): per query, the number of (positive ``i``,
candidate ``j != i``) entries whose slope, optionally divided by ``R(i, S_Omega)^2`` (the factor
in front of every term of their Eq. 13), exceeds a threshold, and the queries with none.
"""

from __future__ import annotations

import math
import sys
from typing import NamedTuple

import torch

from gradlab.errors import GradlabError
from gradlab.functional.smooth_ap import (
    DEFAULT_CHUNK_ELEMENTS,
    group_by_positive_count,
    smooth_ap_with_ranks,
)
from gradlab.validation import (
    candidate_mask_hint,
    check_bool,
    check_non_negative_finite,
    check_positive_finite,
    check_positive_int,
    check_same_device,
    check_shape,
    check_tensor,
    renamed_keyword,
    value_checks_enabled,
)

PAIR_SETS = ("all", "positive-rows", "positive-negative")
"""Which entries of the difference matrix :func:`operating_region_proportion` counts."""


_SMALLEST_NORMAL = sys.float_info.min
"""Below this ``p = eps tau`` (about 2.2e-308) the product loses digits or is 0, where
``sqrt(1 - 4p)`` is 1 and ``w = 2 tau artanh(sqrt(1 - 4p)) = -tau ln p`` to float64
precision: the widths take ``ln p = ln eps + ln tau`` from the two logarithms instead of
dividing by ``sqrt(p)`` (a ``ZeroDivisionError`` or an infinite width)."""


def operating_region_width(tau: float = 0.01, eps: float = 0.005) -> float:
    """Half-width ``w`` of the operating region: ``|dG/dD| > eps`` exactly when ``|D| < w``.

    Args:
        tau: sigmoid temperature, positive and finite.
        eps: slope threshold, positive and finite (Brown et al. 2020 use 0.005).

    Returns:
        ``w = 2 tau artanh(sqrt(1 - 4 eps tau))``; ``0.0`` when the region is empty, which
        happens exactly when ``eps * tau >= 1/4`` (the peak slope ``1/(4 tau)`` is not above
        ``eps``).

    Example:
        >>> from gradlab.functional import operating_region_width
        >>> round(operating_region_width(0.01, 0.005), 6)
        0.099034
        >>> operating_region_width(tau=100.0, eps=0.005)
        0.0
    """
    tau = check_positive_finite("tau", tau)
    eps = check_positive_finite("eps", eps)
    # The formula of operating_region_widths in Python floats: no tensor, nothing to read back.
    product = eps * tau
    if product >= 0.25:
        return 0.0
    if product < _SMALLEST_NORMAL:  # eps tau underflows: w = -tau ln(eps tau), from the logs
        return -tau * (math.log(eps) + math.log(tau))
    root = math.sqrt(1.0 - 4.0 * product)
    return 2.0 * tau * math.log((1.0 + root) / (2.0 * math.sqrt(product)))



def operating_region_widths(tau: float, thresholds: torch.Tensor) -> torch.Tensor:
    """Operating-region half-widths for a tensor of slope thresholds (float64).

    ``w = 2 tau artanh(r)`` written as ``2 tau ln((1 + r) / (2 sqrt(p)))`` with ``p = eps tau``
    and ``r = sqrt(1 - 4p)`` (using ``1 - r = 4p / (1 + r)``), which does not cancel for small p.
    A threshold with ``p >= 1/4`` has no region (width 0). The tensor form of
    :func:`operating_region_width`, for per-pair thresholds.

    Args:
        tau: sigmoid temperature, positive and finite.
        thresholds: slope thresholds, a real tensor of any shape, each positive and finite
            (read back once to check, except inside
            :func:`gradlab.validation.skip_value_checks`).

    Raises:
        GradlabError: ``tau`` or ``thresholds`` outside its range, naming it.

    Example:
        >>> import torch
        >>> from gradlab.functional import operating_region_widths
        >>> operating_region_widths(0.01, torch.tensor([0.005, 100.0]))
        tensor([0.0990, 0.0000], dtype=torch.float64)
    """
    tau = check_positive_finite("tau", tau)
    check_tensor("thresholds", thresholds, ndims=range(9), kind="any_real")
    if value_checks_enabled() and thresholds.numel() and not thresholds.is_meta and not bool(
            (thresholds > 0).logical_and_(thresholds < math.inf).all()):  # fmt: skip
        bad = thresholds[~((thresholds > 0) & (thresholds < math.inf))][0].item()
        raise GradlabError(f"thresholds must be positive and finite; got {bad!r} among them")
    thresholds = thresholds.to(torch.float64)
    product = thresholds * tau
    root = torch.sqrt(torch.clamp(1.0 - 4.0 * product, min=0.0))
    width = 2.0 * tau * torch.log((1.0 + root) / (2.0 * torch.sqrt(product)))
    underflow = -tau * (torch.log(thresholds) + math.log(tau))  # see _SMALLEST_NORMAL
    width = torch.where(product < _SMALLEST_NORMAL, underflow, width)
    return torch.where(product >= 0.25, torch.zeros_like(width), width)


def operating_region_is_empty(tau: float = 0.01, eps: float = 0.005) -> bool:
    """Whether no score difference has slope above ``eps``: ``eps * tau >= 1/4``.

    Example:
        >>> from gradlab.functional import operating_region_is_empty
        >>> operating_region_is_empty(0.01, 0.005), operating_region_is_empty(50.0, 0.005)
        (False, True)
    """
    return operating_region_width(tau, eps) == 0.0


def bound_past_centre(bound: torch.Tensor, centre: torch.Tensor, toward: float) -> torch.Tensor:
    """A window's bound ``centre +- width``, moved past the centre where it rounded back onto it.

    Next to a large centre ``centre +- width`` can round back to the centre (a width under half
    an ulp: scores beyond about 3e6 in float32 at tau = 0.05), and the window would lose the
    centre and its ties. No float lies strictly between the centre and such a bound, so the
    bound moves to the centre's neighbouring float toward ``toward`` (``+inf`` for an upper
    bound, ``-inf`` for a lower one); every other bound is kept. Every window count of gradlab
    (P, the gradient counts, the Monitor's) decides its bounds this way.

    Args:
        bound: ``centre + width`` or ``centre - width``, shaped like ``centre``.
        centre: the window's centres.
        toward: ``math.inf`` or ``-math.inf``, the side of the centre the bound lies on.

    Returns:
        The bounds, the rounded-back ones moved to the neighbouring float.

    Example:
        >>> centre = torch.tensor([2.0**30, 1.0])
        >>> bound_past_centre(centre + 0.25, centre, math.inf).tolist()  # 2^30 + 0.25 is 2^30
        [1073741952.0, 1.25]
    """
    neighbour = torch.nextafter(centre, centre.new_full((), toward))
    return torch.where(bound == centre, neighbour, bound)


def _window_counts(
    sorted_values: torch.Tensor, centres: torch.Tensor, width: float | torch.Tensor
) -> torch.Tensor:
    """For each centre, how many sorted values lie strictly within ``width`` of it.

    ``width`` is one number or a tensor shaped like ``centres``; an empty window (width 0)
    holds nothing, not even the centre itself. Bounds that round back onto their centre move
    past it (:func:`bound_past_centre`).
    """
    width = torch.as_tensor(width, dtype=centres.dtype, device=centres.device)
    high = bound_past_centre(centres + width, centres, math.inf)
    low = bound_past_centre(centres - width, centres, -math.inf)
    # a sort of a transposed matrix keeps its strides: searchsorted wants rows in memory order
    # (it copies, and warns, otherwise); contiguous() is free for a contiguous tensor
    sorted_values = sorted_values.contiguous()
    above = torch.searchsorted(sorted_values, high.contiguous(), side="left")
    below = torch.searchsorted(sorted_values, low.contiguous(), side="right")
    return torch.where(width > 0, above - below, 0)


def operating_region_proportion(
    scores: torch.Tensor,
    tau: float = 0.01,
    eps: float = 0.005,
    include_diagonal: bool = True,
    *,
    pairs: str = "all",
    positives: torch.Tensor | None = None,
) -> torch.Tensor:
    """Proportion P of a query's difference-matrix entries inside the operating region.

    Brown et al. (2020, suppl.), Eq. 1, evaluated per query by sorting (``O(C log C)``).

    Args:
        scores: ``[C]`` one query's candidate scores or ``[Q, C]`` a batch. A 1-D tensor is
            always read as ONE query (not as a batch of 1-candidate queries) and gives a 0-d
            result, the value of ``scores[None]``'s single entry.
        tau: sigmoid temperature (Brown et al. 2020: 0.01).
        eps: slope threshold (Brown et al. 2020: 0.005).
        include_diagonal: count the ``j == i`` entries, as Eq. 1 does (they are always inside
            a non-empty region, so alone they contribute ``1/C``). ``False`` gives the
            off-diagonal proportion. ``pairs="positive-negative"`` has no diagonal entry, so
            it reads neither value.
        pairs: ``"all"`` (all ``C x C`` entries, Eq. 1); ``"positive-rows"`` (rows of positive
            ``i`` against every candidate: the entries SmoothAP differentiates);
            ``"positive-negative"`` (positive ``i`` against negative ``j`` only, no diagonal).
        positives: ``[Q, C]`` bool mask, or ``[C]`` shared by every query, required unless
            ``pairs="all"`` (and refused with it).

    Returns:
        ``[Q]`` (or a 0-d tensor for ``[C]`` input) of float64 proportions; NaN for a query
        with no entry of the requested kind (no positive, or no negative).

    Raises:
        GradlabError: bad shapes or dtypes, NaN/inf scores, an empty candidate set, a bad
            ``pairs``, a missing ``positives`` or ``positives`` with ``pairs="all"``.

    Example:
        >>> import torch
        >>> from gradlab.functional import operating_region_proportion
        >>> operating_region_proportion(torch.tensor([0.0, 0.05, 0.5]))
        tensor(0.5556, dtype=torch.float64)
    """
    tau = check_positive_finite("tau", tau)
    eps = check_positive_finite("eps", eps)
    check_tensor("scores", scores, ndims=(1, 2), kind="float", finite=True)
    if scores.shape[-1] == 0:
        raise GradlabError("scores must hold at least one candidate per query; got 0")
    if pairs not in PAIR_SETS:
        raise GradlabError(f"pairs must be one of {PAIR_SETS}; got {pairs!r}")
    if pairs == "all" and positives is not None:  # it would be ignored
        raise GradlabError("positives applies only with pairs='positive-rows' or "
                           "'positive-negative'; got positives with pairs='all', which counts "
                           "every entry: pass pairs too, or leave positives out")  # fmt: skip
    check_bool("include_diagonal", include_diagonal)
    single = scores.dim() == 1
    rows = scores.unsqueeze(0) if single else scores
    rows = rows.to(torch.float64)
    width = operating_region_width(tau, eps)
    num_candidates = rows.shape[1]
    sorted_rows = rows.sort(dim=1).values

    if pairs == "all":
        inside = _window_counts(sorted_rows, rows, width).sum(dim=1).to(torch.float64)
        total = float(num_candidates**2)
        if not include_diagonal:
            inside = inside - (num_candidates if width > 0 else 0)
            total = float(num_candidates * (num_candidates - 1))
        result = inside / total if total > 0 else torch.full_like(inside, math.nan)
        return result[0] if single else result

    if positives is None:
        raise GradlabError(f"positives is required when pairs={pairs!r}")
    check_tensor("positives", positives, ndims=(1, 2), kind="bool")
    if positives.dim() == 1:  # one mask shared by every query
        check_shape("positives", positives, rows.shape[1:], "one flag per candidate")
        mask = positives.unsqueeze(0).expand(rows.shape)
    else:
        check_shape("positives", positives, rows.shape, "one flag per score")
        mask = positives
    check_same_device(scores=scores, positives=positives)
    num_positive = mask.sum(dim=1).to(torch.float64)
    if pairs == "positive-rows":
        counts = _window_counts(sorted_rows, rows, width).to(torch.float64)
        inside = (counts * mask).sum(dim=1)
        total = num_positive * num_candidates
        if not include_diagonal:
            inside = inside - (num_positive if width > 0 else 0)
            total = num_positive * (num_candidates - 1)
    else:  # positive-negative: positives against the sorted negatives of the same query
        negatives_sorted = rows.masked_fill(mask, math.inf).sort(dim=1).values
        counts = _window_counts(negatives_sorted, rows, width).to(torch.float64)
        inside = (counts * mask).sum(dim=1)
        total = num_positive * (num_candidates - num_positive)
    result = torch.where(total > 0, inside / total.clamp(min=1), math.nan)
    return result[0] if single else result


def expected_operating_region_proportion(
    spread: float,
    tau: float = 0.01,
    eps: float = 0.005,
    num_candidates: int | None = None,
    include_diagonal: bool = True,
) -> float:
    """Expected P when a query's scores are i.i.d. Gaussian with standard deviation ``spread``.

    For ``i != j``, ``D_ij ~ N(0, 2 spread^2)``, so ``Pr(|D_ij| < w) = erf(w / (2 spread))``.
    With the diagonal (Eq. 1 of Brown et al. 2020) and ``C`` candidates,
    ``E[P] = 1/C + (1 - 1/C) erf(w / (2 spread))``; without it, or with ``num_candidates=None``
    (the large-batch limit), ``E[P] = erf(w / (2 spread))``. One candidate without the
    diagonal has no pair to count: NaN, as :func:`operating_region_proportion` measures it.
    ``spread = 0`` (a collapsed model: every score alike) puts every pair at ``D_ij = 0``,
    inside any non-empty region: its limit, 1 (0 for an empty region).

    Example:
        >>> from gradlab.functional import expected_operating_region_proportion
        >>> round(expected_operating_region_proportion(spread=0.1), 4)
        0.5162
    """
    spread = check_non_negative_finite("spread", spread)
    include_diagonal = check_bool("include_diagonal", include_diagonal)
    if num_candidates is not None:  # checked whether or not the diagonal is included
        num_candidates = check_positive_int("num_candidates", num_candidates)
    width = operating_region_width(tau, eps)
    if spread == 0.0:  # every difference 0: inside a region of any positive half-width
        off_diagonal = 1.0 if width > 0 else 0.0
    else:
        off_diagonal = math.erf(width / (2.0 * spread))
    if num_candidates == 1 and not include_diagonal:  # no pair j != i: P is 0 / 0
        return math.nan
    if num_candidates is None or not include_diagonal:
        return off_diagonal
    diagonal_share = (1.0 if width > 0 else 0.0) / num_candidates
    return diagonal_share + (1.0 - 1.0 / num_candidates) * off_diagonal


class GradientCountSummary(NamedTuple):
    """Per-query gradient counts (Bleeker & de Rijke) and their summary.

    Attributes:
        per_query: ``[Q]`` int64, entries (positive ``i``, candidate ``j != i``) whose slope is
            above ``eps``.
        queries_without_gradient: how many queries that have a positive count zero entries.
        queries_with_positive: how many queries have at least one positive.

    Example:
        >>> import torch
        >>> from gradlab.functional import gradient_counts
        >>> scores = torch.tensor([[0.9, 0.1, 0.5], [0.5, 0.501, 0.2]])
        >>> positives = torch.tensor([[True, False, False], [True, False, False]])
        >>> summary = gradient_counts(scores, positives, tau=0.01)
        >>> summary.per_query.tolist()  # only 0.5 vs 0.501 lies inside the operating region
        [0, 1]
        >>> summary.queries_without_gradient, summary.queries_with_positive
        (1, 2)
    """

    per_query: torch.Tensor
    queries_without_gradient: int
    queries_with_positive: int


@renamed_keyword("threshold", "eps")
def gradient_counts(
    scores: torch.Tensor,
    positives: torch.Tensor,
    tau: float = 0.01,
    eps: float = 0.005,
    *,
    weighted: bool = False,
    candidate_mask: torch.Tensor | None = None,
) -> GradientCountSummary:
    """Count, per query, the SmoothAP entries that still carry gradient.

    An entry is a pair (positive ``i``, candidate ``j != i``). It counts when its sigmoid slope
    ``G'(D_ij) = G(1 - G)/tau`` exceeds ``eps``; with ``weighted=True`` the slope is first
    divided by ``R(i, S_Omega)^2``, the factor of Bleeker & de Rijke's Eq. 13. Either way the test
    is a window ``|D_ij| < w`` (``w`` from :func:`operating_region_width`, per row when
    weighted), so counting costs ``O(C log C)`` per positive row after the ranks (``O(|P| C)``)
    are known. The count reads the slopes only: a query whose every candidate is a positive
    has AP 1 whatever its scores, so no gradient, yet its entries inside the window count
    (the Monitor's :class:`~gradlab.monitor.GradientCounts` summarises only the queries that
    have a positive and a negative).

    Args:
        scores: ``[Q, C]`` scores.
        positives: ``[Q, C]`` bool relevance mask.
        tau: sigmoid temperature.
        eps: slope threshold, positive (Brown et al. 2020: 0.005), as in
            :func:`operating_region_proportion`. Called ``threshold`` in gradlab 0.2.0; that
            keyword is still read, with a ``FutureWarning``.
        weighted: divide the slope by ``R(i, S_Omega)^2``.
        candidate_mask: optional ``[Q, C]`` bool mask of the columns that are candidates (see
            :func:`gradlab.functional.smooth_ap`).

    Returns:
        :class:`GradientCountSummary`. A query without positives counts 0 and is not among
        ``queries_without_gradient``.

    Example:
        >>> import torch
        >>> from gradlab.functional import gradient_counts
        >>> scores = torch.tensor([[0.50, 0.52, 0.90], [0.1, 0.9, 0.5]])
        >>> positives = torch.tensor([[True, False, False], [True, False, False]])
        >>> gradient_counts(scores, positives).per_query.tolist()
        [1, 0]
    """
    tau = check_positive_finite("tau", tau)
    eps = check_positive_finite("eps", eps)
    with candidate_mask_hint(scores):
        check_tensor("scores", scores, ndims=(2,), kind="float", finite=True)
    check_tensor("positives", positives, ndims=(2,), kind="bool")
    check_shape("positives", positives, scores.shape, "one flag per score")
    check_same_device(scores=scores, positives=positives)
    check_bool("weighted", weighted)
    if candidate_mask is not None:
        check_tensor("candidate_mask", candidate_mask, ndims=(2,), kind="bool")
        check_shape("candidate_mask", candidate_mask, scores.shape, "one flag per score")
        check_same_device(scores=scores, candidate_mask=candidate_mask)
        positives = positives & candidate_mask
    rows = scores.detach().to(torch.float64)
    # Non-candidates are moved out of every window.
    candidate_scores = (
        rows if candidate_mask is None else rows.masked_fill(~candidate_mask, math.inf)
    )
    sorted_rows = candidate_scores.sort(dim=1).values
    # The positives of each query packed into [Q, max |P_q|] (padding: width 0, counts nothing),
    # so windows are searched for the positive rows only.
    query_index, positive_index = torch.nonzero(positives, as_tuple=True)
    per_row = positives.sum(dim=1)
    slot = (
        torch.arange(len(query_index), device=rows.device)
        - (per_row.cumsum(0) - per_row)[query_index]
    )
    shape = (rows.shape[0], max(1, int(per_row.max())) if per_row.numel() else 1)
    anchors = torch.zeros(shape, dtype=rows.dtype, device=rows.device)
    widths = torch.zeros_like(anchors)
    anchors[query_index, slot] = rows[query_index, positive_index]
    if weighted:
        ranks = _ranks_of_positives(rows, positives, candidate_mask, tau)
        widths[query_index, slot] = operating_region_widths(tau, eps * ranks**2)
    else:
        widths[query_index, slot] = operating_region_width(tau, eps)
    # A non-empty window holds the anchor itself (j == i): remove it.
    inside = _window_counts(sorted_rows, anchors, widths) - (widths > 0).long()
    per_query = inside.sum(dim=1)
    has_positive = positives.any(dim=1)
    without = int((has_positive & (per_query == 0)).sum())
    return GradientCountSummary(per_query, without, int(has_positive.sum()))


def _ranks_of_positives(
    scores: torch.Tensor,
    positives: torch.Tensor,
    candidate_mask: torch.Tensor | None,
    tau: float,
) -> torch.Tensor:
    """``R(i, S_Omega)`` of every positive, in row-major order of the mask (``O(|P| C)``)."""
    groups = group_by_positive_count(positives)
    with torch.no_grad():
        _, saved = smooth_ap_with_ranks(
            scores, groups, tau, DEFAULT_CHUNK_ELEMENTS, positives, candidate_mask
        )
    ranks = torch.empty(positives.shape, dtype=scores.dtype, device=scores.device)
    for group, (rank_positive, rank_negative) in zip(groups, saved, strict=True):
        ranks[group.queries.unsqueeze(1), group.positive_columns] = rank_positive + rank_negative
    return ranks[positives]
