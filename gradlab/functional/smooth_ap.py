"""Smooth average precision (SmoothAP) with an exact, memory-bounded backward.

Bleeker & de Rijke (2022), appendix A, Eq. 1 (Eq. 5 of the long version), and the Smooth-AP
paper (Brown et al. 2020, suppl., Table S1). For one query with candidate scores ``s`` and
positive set ``P`` (negatives ``N``):

    AP = 1/|P| * sum_{i in P} A_i / R_i
    A_i = 1 + sum_{j in P, j != i} G(D_ij)          (R(i, S_P), the smoothed rank among positives)
    C_i =     sum_{j in N}         G(D_ij)
    R_i = A_i + C_i                                  (R(i, S_Omega), the smoothed rank among all)

**Sign convention.** ``D_ij = s_j - s_i``: the score of candidate ``j`` minus that of positive
``i``, so ``G(D_ij)`` is close to 1 when ``j`` is ranked above ``i`` and ``R_i`` is a rank
(1 + the smoothed number of candidates scored above ``i``). The papers print ``D_ij = s_i - s_j``
next to a rank-counting ``G(D_ij)``; the two cannot both hold (see ``gradlab audit``).

**Cost.** Only the positive rows of each query's difference matrix enter AP, so forward and
backward evaluate ``sum_q |P_q| * C`` sigmoids, processed in chunks of at most
``max_chunk_elements`` entries; the dense ``Q * C * C`` tensor of the official code is never built.
Each pass writes its chunks into one preallocated block (:func:`block_buffer`) and the ranks into
preallocated tensors, so its extra memory is one block plus ``O(sum_q |P_q|)``, whatever the label
layout. A query without negatives (a one-class batch) has AP exactly 1 and a zero gradient; its
blocks are skipped.

The backward is the closed form of ``d AP / d s`` (the score-space version of the
``AD - CB`` decomposition, Eq. 13 of Bleeker & de Rijke 2022):

    dAP/ds_j  =  1/|P| sum_{i in P, i != j} (pos_j / R_i - A_i / R_i^2) G'(D_ij)
    dAP/ds_i +=  -1/|P| sum_{j != i}          (pos_j / R_i - A_i / R_i^2) G'(D_ij)    (i in P)
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import ExitStack, contextmanager
from contextvars import ContextVar
from dataclasses import dataclass

import torch

from gradlab.errors import GradlabError
from gradlab.functional.precision import gradient_overflow_message, outside_autocast
from gradlab.validation import (
    candidate_mask_hint,
    check_bool,
    check_positive_int,
    check_real_device,
    check_same_device,
    check_shape,
    check_temperature,
    check_tensor,
    finite_flag,
    non_finite_message,
    value_checks_enabled,
)

DEFAULT_CHUNK_ELEMENTS = 1 << 20
"""Entries of the ``[queries, positives, candidates]`` block processed at once (4 MiB in fp32).

Measured on a 2-core Xeon (2 MiB L2 per core): 1M entries ran B = 4096 in 0.20 s against
0.24 s for 4M and 0.39 s for 64K; small enough that the passes over a block hit the cache.
"""


@dataclass(frozen=True)
class PositiveGroup:
    """Queries that share one number of positives, with the column index of each positive.

    Attributes:
        queries: ``[G]`` row indices of the queries in this group.
        positive_columns: ``[G, n]`` candidate index of each positive, ascending per row.
        has_negatives: whether some query of the group has a negative candidate. When none
            has, every AP of the group is exactly 1 with a zero gradient (``C_i = 0``).
    """

    queries: torch.Tensor
    positive_columns: torch.Tensor
    has_negatives: bool = True

    @property
    def num_positives(self) -> int:
        return self.positive_columns.shape[1]


def group_by_positive_count(
    positives: torch.Tensor,
    *,
    finite: dict[str, torch.Tensor] | None = None,
    candidate_mask: torch.Tensor | None = None,
    bounds: dict[str, tuple[float, str]] | None = None,
) -> list[PositiveGroup]:
    """Split the queries of a ``[Q, C]`` mask into groups of equal positive count.

    Queries without positives belong to no group. Grouping lets every block be a dense
    ``[G, n, C]`` tensor with no padding, so the work is exactly ``sum_q |P_q| * C``.

    **One host synchronisation.** The group sizes (a histogram of the positive counts) are the
    only values read back to the host; the queries of each group are a slice of one stable
    sort of the counts, and the columns of the positives come from a static-size ``nonzero``
    whose size the transferred counts give, so nothing else has a data-dependent shape.
    ``finite`` names tensors whose finiteness is checked in the same transfer (no extra
    synchronisation), as is whether each group has a negative (``has_negatives``): a column
    is a candidate where ``candidate_mask`` (``[Q, C]`` bool, ``None``: every column) says so.
    ``bounds`` gives a tensor of ``finite`` a ``(largest |entry|, why)`` too, checked in the
    same reduction (:func:`~gradlab.validation.finite_flag`).

    Raises:
        GradlabError: when a tensor of ``finite`` holds NaN or infinite entries, or entries
            beyond its bound.

    Example:
        >>> mask = torch.tensor([[True, False, True], [False, True, False], [True, True, False]])
        >>> [(g.queries.tolist(), g.positive_columns.tolist()) for g in
        ...  group_by_positive_count(mask)]
        [([1], [[1]]), ([0, 2], [[0, 2], [0, 1]])]
    """
    num_candidates = positives.shape[1]
    device = positives.device
    counts = positives.sum(dim=1)
    sizes = torch.zeros((2, num_candidates + 1), dtype=torch.long, device=device)
    sizes[0].index_add_(0, counts, torch.ones_like(counts))
    candidates = num_candidates if candidate_mask is None else candidate_mask.sum(dim=1)
    sizes[1].index_add_(0, counts, (counts < candidates).long())  # queries with a negative
    names = list(finite or {})
    bounds = bounds or {}
    flags = [finite_flag(finite[name], bounds.get(name, (None,))[0]).long().reshape(1)
             for name in names]  # fmt: skip
    host = torch.cat([sizes.flatten(), *flags]).tolist()  # the one transfer
    for name, flag in zip(names, host[2 * (num_candidates + 1) :], strict=True):
        if not flag:
            tensor = finite[name]
            if name not in bounds or not bool(finite_flag(tensor)):
                raise GradlabError(non_finite_message(name, tensor))
            largest, why = bounds[name]
            raise GradlabError(
                f"{name} must lie in [-{largest:.3g}, {largest:.3g}] ({why}); got an entry of "
                f"magnitude {float(tensor.detach().abs().max()):.3g}"
            )
    host_sizes = host[: num_candidates + 1]
    with_negatives = host[num_candidates + 1 : 2 * (num_candidates + 1)]
    present = [count for count in range(1, num_candidates + 1) if host_sizes[count]]
    if not present:
        return []
    order = torch.argsort(counts, stable=True)  # queries by count; ascending index within
    # Every positive, row-major: the total is known on the host now, so the static-size
    # nonzero needs no synchronisation, and memory stays O(sum_q |P_q|), not O(Q C).
    total = sum(count * host_sizes[count] for count in present)
    columns = torch.nonzero_static(positives, size=total)[:, 1]
    row_start = counts.cumsum(dim=0) - counts  # index of each row's first positive in columns
    groups, start = [], host_sizes[0]
    for count in present:
        queries = order[start : start + host_sizes[count]]
        within = torch.arange(count, device=device)
        positive_columns = columns[row_start[queries].unsqueeze(1) + within]
        groups.append(PositiveGroup(queries, positive_columns, bool(with_negatives[count])))
        start += host_sizes[count]
    return groups


def chunk_slices(group: PositiveGroup, num_candidates: int, budget: int) -> Iterator[slice]:
    """Slices of ``group``'s queries whose ``[k, n, C]`` blocks hold at most ``budget`` entries.

    A query whose block alone exceeds the budget gets a slice of its own.

    Args:
        group: queries sharing one positive count ``n``.
        num_candidates: ``C``, the columns of the score matrix.
        budget: the most entries of one block (``k * n * C``).

    Example:
        >>> group = group_by_positive_count(torch.eye(4, dtype=torch.bool))[0]
        >>> list(chunk_slices(group, num_candidates=4, budget=8))
        [slice(0, 2, None), slice(2, 4, None)]
    """
    per_query = max(1, group.num_positives * num_candidates)
    step = max(1, budget // per_query)
    for start in range(0, len(group.queries), step):
        yield slice(start, start + step)


def sigmoid_block(
    rows: torch.Tensor, columns: torch.Tensor, tau: float, out: torch.Tensor | None = None
) -> torch.Tensor:
    """``G(D_ij)`` for score rows ``[k, C]`` and the positives' ``columns`` ``[k, n]``.

    ``D_ij = (s_j - s_i) / tau`` (the module's sign convention) for positive ``i`` and every
    candidate ``j``; no mask is applied here (see :func:`rank_weights`). ``out`` (outside
    autograd only) is a buffer of at least ``k * n * C`` entries that receives the block: a
    loop over chunks then reuses one allocation instead of making one per chunk (see
    :func:`block_buffer`).

    Returns:
        ``[k, n, C]`` with the ``j == i`` entries set to zero.

    Example:
        >>> sigmoid_block(torch.tensor([[0.0, 1.0]]), torch.tensor([[0]]), tau=1.0)
        tensor([[[0.0000, 0.7311]]])
    """
    scaled = rows / tau
    anchors = scaled.gather(1, columns)
    diagonal = columns.unsqueeze(2)
    if scaled.requires_grad:  # the autograd path: sigmoid's backward needs its output intact
        differences = scaled.unsqueeze(1) - anchors.unsqueeze(2)
        return torch.sigmoid(differences).scatter(2, diagonal, 0.0)
    shape = (rows.shape[0], columns.shape[1], rows.shape[1])
    if out is None:
        differences = scaled.unsqueeze(1) - anchors.unsqueeze(2)
    else:
        differences = out[: shape[0] * shape[1] * shape[2]].view(shape)
        torch.sub(scaled.unsqueeze(1), anchors.unsqueeze(2), out=differences)
    # No graph is recorded: work in place on the one [k, n, C] buffer.
    return differences.sigmoid_().scatter_(2, diagonal, 0.0)


def block_buffer(
    groups: list[PositiveGroup], num_candidates: int, budget: int, like: torch.Tensor
) -> torch.Tensor:
    """One flat buffer that holds the largest ``[k, n, C]`` block of any chunk of ``groups``.

    The chunked passes write every block into it, so a pass allocates one block in all, not
    one per chunk. Allocating a fresh multi-megabyte block per chunk, with the chunk's small
    results allocated in between, fragmented glibc's heap (a one-class batch of 1024 kept
    about 3.4 GB resident for a 4 MB block).

    Example:
        >>> groups = group_by_positive_count(torch.ones(3, 4, dtype=torch.bool))
        >>> block_buffer(groups, 4, budget=20, like=torch.zeros(1)).shape  # one query: 4 * 4
        torch.Size([16])
    """
    return like.new_empty(block_size(groups, num_candidates, budget))


def block_size(groups: list[PositiveGroup], num_candidates: int, budget: int) -> int:
    """Entries of the largest ``[k, n, C]`` block of any chunk of ``groups`` (the size of
    :func:`block_buffer`).

    Example:
        >>> block_size(group_by_positive_count(torch.ones(3, 4, dtype=torch.bool)), 4, 20)
        16
    """
    largest = 0
    for group in groups:
        per_query = group.num_positives * num_candidates
        queries = min(len(group.queries), max(1, budget // max(1, per_query)))
        largest = max(largest, queries * per_query)
    return largest


def rank_sums(block: torch.Tensor, weights: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """``(sum over positives, sum over negatives)`` of a block ``[k, n, C]`` along candidates.

    ``weights`` is ``[k, C, 2]`` holding the positive and the negative indicator of each
    candidate (:func:`rank_weights`); one batched matrix product reads the block once.

    Example:
        >>> block = torch.tensor([[[0.0, 0.5, 0.25]]])
        >>> weights = rank_weights(torch.tensor([[True, True, False]]), None, torch.float32)
        >>> rank_sums(block, weights)
        (tensor([[0.5000]]), tensor([[0.2500]]))
    """
    sums = torch.bmm(block, weights)
    return sums[..., 0], sums[..., 1]


def rank_weights(
    positives_rows: torch.Tensor, candidate_rows: torch.Tensor | None, dtype: torch.dtype
) -> torch.Tensor:
    """``[k, C, 2]`` positive and negative indicators (a transposed view of ``[k, 2, C]``).

    A column that is not a candidate of its query (``False`` in ``candidate_rows``) is neither
    positive nor negative.

    Example:
        >>> rank_weights(torch.tensor([[True, False, False]]),
        ...              torch.tensor([[True, True, False]]), torch.float32)[0].T
        tensor([[1., 0., 0.],
                [0., 1., 0.]])
    """
    weights = torch.empty(
        (positives_rows.shape[0], 2, positives_rows.shape[1]),
        dtype=dtype,
        device=positives_rows.device,
    )
    # From bytes: a bool -> float copy is ~5x slower than the same copy from uint8.
    weights[:, 0] = positives_rows.view(torch.uint8)
    negatives = ~positives_rows
    if candidate_rows is not None:
        negatives &= candidate_rows
    weights[:, 1] = negatives.view(torch.uint8)
    return weights.transpose(1, 2)


def mask_rows(mask: torch.Tensor | None, queries: torch.Tensor) -> torch.Tensor | None:
    """The rows ``queries`` of an optional mask (``None`` stays ``None``).

    Example:
        >>> mask_rows(None, torch.tensor([0])) is None
        True
    """
    return None if mask is None else mask[queries]


def column_weights(
    slope: torch.Tensor,
    weights: torch.Tensor,
    columns: torch.Tensor,
    slope_sums: tuple[torch.Tensor, torch.Tensor],
    ranks: tuple[torch.Tensor, torch.Tensor],
) -> tuple[torch.Tensor, torch.Tensor]:
    """The candidate weights ``gA`` and ``gC`` of one chunk (Bleeker & de Rijke 2022, App. A,
    Eq. 13 in score space): ``dAP_q/ds_qj = gA_qj - gC_qj``.

    With ``a_i = A_i / R_i^2``, ``c_i = C_i / R_i^2`` and ``sim = G (1 - G)`` (``slope``,
    ``[k, n, C]``, zero at ``j == i``):

        gA_qj = [j = i] a_i sum_{k in N} sim_ik  -  [j in N] sum_i a_i sim_ij
        gC_qj = [j = i] c_i sum_{k in P} sim_ik  -  [j in P] sum_i c_i sim_ij

    Args:
        slope: ``[k, n, C]`` sigmoid slopes of the chunk's positive rows.
        weights: ``[k, C, 2]`` positive and negative indicators (:func:`rank_weights`).
        columns: ``[k, n]`` the positives' columns.
        slope_sums: ``(sum over positives, sum over negatives)`` of ``slope``
            (:func:`rank_sums`).
        ranks: ``(A, C)``, ``[k, n]`` each.

    Returns:
        ``(gA, gC)``, ``[k, C]`` each, before the factor ``1 / (|P| tau)``, which
        :func:`write_column_weights` applies as it writes them (one pass).

    Example:
        >>> scores, positives = torch.tensor([[0.3, 0.1, 0.2]]), torch.tensor([[1, 0, 1]]) > 0
        >>> columns, weights = torch.tensor([[0, 2]]), rank_weights(positives, None, torch.float32)
        >>> block = sigmoid_block(scores, columns, tau=0.1)
        >>> sums = rank_sums(block, weights)
        >>> ranks = (1.0 + sums[0], sums[1])
        >>> slope = block.addcmul_(block, block, value=-1.0)
        >>> g_a, g_c = column_weights(slope, weights, columns, rank_sums(slope, weights), ranks)
        >>> g_a.shape, g_c.shape
        (torch.Size([1, 3]), torch.Size([1, 3]))
    """
    slope_positive, slope_negative = slope_sums
    rank_a, rank_c = ranks
    squared = (rank_a + rank_c) ** 2
    coef_a, coef_c = rank_a / squared, rank_c / squared
    column_sums = torch.bmm(torch.stack((coef_a, coef_c), dim=1), slope)  # [k, 2, C]
    g_a = (-weights[..., 1] * column_sums[:, 0]).scatter_add_(1, columns, coef_a * slope_negative)
    g_c = (-weights[..., 0] * column_sums[:, 1]).scatter_add_(1, columns, coef_c * slope_positive)
    return g_a, g_c


def write_column_weights(
    split: torch.Tensor,
    queries: torch.Tensor | slice,
    whole: bool,
    g_a: torch.Tensor,
    g_c: torch.Tensor,
    scale: float,
) -> None:
    """``split[0, queries] = gA * scale`` and ``split[1, queries] = gC * scale`` (in place into
    row slices when one group holds every query, ``whole``).

    Example:
        >>> split = torch.zeros(2, 1, 2)
        >>> write_column_weights(split, slice(0, 1), True, torch.ones(1, 2), torch.ones(1, 2), 2.0)
        >>> split.flatten().tolist()
        [2.0, 2.0, 2.0, 2.0]
    """
    if whole:  # written in place into the rows (a slice)
        torch.mul(g_a, scale, out=split[0, queries])
        torch.mul(g_c, scale, out=split[1, queries])
    else:
        split[0, queries] = g_a * scale
        split[1, queries] = g_c * scale


def covers_every_query(groups: list[PositiveGroup], num_queries: int) -> bool:
    """Whether ``groups`` is one group of every query, in order (its chunks are row slices).

    Example:
        >>> covers_every_query(group_by_positive_count(torch.eye(3) > 0), 3)
        True
    """
    return len(groups) == 1 and groups[0].queries.shape[0] == num_queries


@dataclass
class RecordedColumnWeights:
    """The ``[2, Q, C]`` candidate weights ``(gA, gC)`` (:func:`column_weights`) of one SmoothAP
    call, filled by its exact backward inside :func:`recording_column_weights`.

    ``split`` stays ``None`` until the backward ran (and when it took the differentiable path
    or a group had no negative); it is then what
    :func:`gradlab.functional.diagnostics.smooth_ap_terms` computes from the same scores,
    groups and ranks, bit for bit (the same operations on the same chunks), so a caller passes
    it there instead of evaluating the sigmoid block a second time.

    Attributes:
        tau: the call's temperature.
        budget: its ``max_chunk_elements``.
        split: ``[2, Q, C]`` (``gA``, ``gC``), rows of queries without positives zero.
        buffer: ``buffer(name, shape, dtype)`` that gives ``split`` its memory (e.g. a buffer
            kept from one step to the next); ``None``: a fresh tensor. Dropped once used.
    """

    tau: float
    budget: int
    split: torch.Tensor | None = None
    buffer: Callable[[str, tuple[int, ...], torch.dtype], torch.Tensor] | None = None


_COLUMN_WEIGHTS: ContextVar[list[RecordedColumnWeights] | None] = ContextVar(
    "gradlab_smooth_ap_column_weights", default=None
)


@contextmanager
def recording_column_weights() -> Iterator[list[RecordedColumnWeights]]:
    """Inside the block, each recorded SmoothAP loss call (one that keeps its ranks, as
    :func:`gradlab.functional.losses.smooth_ap_loss` does) appends a
    :class:`RecordedColumnWeights` that its exact backward fills: the candidate weights of the
    ``AD - CB`` decomposition at the cost of one more ``[k, 2, n] x [k, n, C]`` product per
    chunk, on the sigmoid block the backward evaluates anyway. Blocks nest: an outer block
    also receives the weights of an inner one when it ends.

    Example:
        >>> from gradlab.functional.losses import smooth_ap_loss
        >>> emb = torch.randn(6, 3, requires_grad=True)
        >>> with recording_column_weights() as weights:
        ...     loss = smooth_ap_loss(emb, torch.tensor([0, 0, 1, 1, 2, 2]))
        >>> loss.backward()
        >>> weights[0].split.shape
        torch.Size([2, 6, 6])
    """
    weights: list[RecordedColumnWeights] = []
    outer = _COLUMN_WEIGHTS.get()
    with ExitStack() as restore:  # the previous list (or none) again on the way out
        if outer is not None:  # blocks nest: the outer one receives the inner one's weights
            restore.callback(outer.extend, weights)
        restore.callback(_COLUMN_WEIGHTS.reset, _COLUMN_WEIGHTS.set(weights))
        yield weights


def smooth_ap_with_ranks(
    scores: torch.Tensor,
    groups: list[PositiveGroup],
    tau: float,
    budget: int,
    positives: torch.Tensor,
    candidate_mask: torch.Tensor | None,
    ranks_needed: bool = True,
) -> tuple[torch.Tensor, list[tuple[torch.Tensor, torch.Tensor]]]:
    """Per-query AP (NaN without positives) and the ``(A, C)`` of every group.

    Arguments as in :func:`smooth_ap_checked`, already checked; ``groups`` from
    :func:`group_by_positive_count` of ``positives``. Written with differentiable torch
    operations, so that the same code serves as the plain autograd path (``backward="autograd"``)
    and, under ``no_grad``, as the forward of the exact backward. On the autograd path the
    result is on the graph of ``scores`` even without any group, and ``A / R`` is differentiated
    as :func:`_differentiable_ratio` (an exactly zero gradient without negatives). Outside
    autograd, with ``ranks_needed=False``, a group without negatives (``has_negatives``; a
    one-class batch) is not computed: its AP is exactly 1 (NaN on a row with a non-finite
    score) at ``O(G C)`` cost, and its ``(A, C)`` are placeholders (ones and zeros).

    Example:
        >>> scores = torch.tensor([[0.9, 0.8, 0.1]])
        >>> positives = torch.tensor([[True, False, True]])
        >>> ap, ranks = smooth_ap_with_ranks(
        ...     scores, group_by_positive_count(positives), 0.01, 1024, positives, None)
        >>> ap, ranks[0][0]  # A_i of the two positives: ranks 1 and 2 among positives
        (tensor([0.8333]), tensor([[1., 2.]]))
    """
    num_queries, num_candidates = scores.shape
    ap = torch.full((num_queries,), float("nan"), dtype=scores.dtype, device=scores.device)
    saved = []
    if scores.requires_grad and torch.is_grad_enabled():  # the plain autograd path
        # On the graph even where no group is (no positive anywhere, Q = 0 or C = 0): a sum
        # over no column is 0 with a zero gradient, whatever the scores hold.
        ap = ap + scores[:, :0].sum(dim=1)
        for group in groups:
            ranks_a, ranks_c = [], []
            for part in chunk_slices(group, num_candidates, budget):
                queries = group.queries[part]
                block = sigmoid_block(scores[queries], group.positive_columns[part], tau)
                candidate_rows = mask_rows(candidate_mask, queries)
                weights = rank_weights(positives[queries], candidate_rows, scores.dtype)
                positive_sum, negative_sum = rank_sums(block, weights)
                ranks_a.append(1.0 + positive_sum)
                ranks_c.append(negative_sum)
            a, c = torch.cat(ranks_a), torch.cat(ranks_c)
            ap = ap.index_put((group.queries,), _differentiable_ratio(a, c).mean(dim=1))
            saved.append((a, c))
        return ap, saved
    # No graph: one block buffer for every chunk, each group's ranks written in place.
    computed = [group for group in groups if group.has_negatives or ranks_needed]
    buffer = block_buffer(computed, num_candidates, budget, scores)
    for group in groups:
        if not (group.has_negatives or ranks_needed):  # C_i = 0: A_i / R_i = 1 exactly
            ap[group.queries] = 1.0 + 0.0 * scores[group.queries].sum(dim=1)
            ones = scores.new_ones(group.positive_columns.shape)
            saved.append((ones, torch.zeros_like(ones)))
            continue
        a = scores.new_empty(group.positive_columns.shape)
        c = scores.new_empty(group.positive_columns.shape)
        for part in chunk_slices(group, num_candidates, budget):
            queries = group.queries[part]
            block = sigmoid_block(scores[queries], group.positive_columns[part], tau, out=buffer)
            candidate_rows = mask_rows(candidate_mask, queries)
            weights = rank_weights(positives[queries], candidate_rows, scores.dtype)
            positive_sum, negative_sum = rank_sums(block, weights)
            torch.add(positive_sum, 1.0, out=a[part])
            c[part] = negative_sum
        ap[group.queries] = (a / (a + c)).mean(dim=1)
        saved.append((a, c))
    return ap, saved


def _differentiable_ratio(ranks_a: torch.Tensor, ranks_c: torch.Tensor) -> torch.Tensor:
    """``A_i / R_i`` with ``R_i = A_i + C_i``, differentiated as ``1 - C_i / R_i``.

    The value is ``A / (A + C)`` bit for bit, as the forward without a graph computes it; the
    gradient is that of ``-C / R``, the same function up to the constant 1. Autograd of
    ``A / R`` itself leaves a rounding residue (``1 / R - A / R^2``, about ``5e-8`` in float32)
    where ``C = 0`` exactly, a positive without negatives; ``C / R`` sends ``A`` exactly
    ``C / R^2 = 0`` there and ``C`` nothing that reaches a score (no negative carries it), so
    such a query's gradient is exactly 0, as the closed-form backward gives it.

    Example:
        >>> a = torch.tensor([2.0, 3.0], requires_grad=True)
        >>> ratio = _differentiable_ratio(a, torch.zeros(2))
        >>> ratio.tolist(), torch.autograd.grad(ratio.sum(), a)[0].tolist()
        ([1.0, 1.0], [0.0, 0.0])
    """
    shortfall = ranks_c / (ranks_a + ranks_c)
    return (ranks_a / (ranks_a + ranks_c)).detach() + (shortfall.detach() - shortfall)


class _SmoothAPExact(torch.autograd.Function):
    """SmoothAP with the closed-form backward, chunked over positive rows.

    Under ``create_graph=True`` (grad mode is on inside ``backward`` exactly then) the closed
    form, a constant to autograd, would make every second derivative silently wrong; the
    backward then differentiates the plain chunked forward instead, with a graph, so second
    derivatives are exact (at the autograd path's memory cost).
    """

    @staticmethod
    def forward(ctx, scores, positives, candidate_mask, tau, budget, groups, stash, ranks_needed):  # type: ignore[override]
        ap, saved = smooth_ap_with_ranks(
            scores, groups, tau, budget, positives, candidate_mask, ranks_needed
        )
        ctx.column_weights = None
        if stash is not None:  # a recording caller keeps the ranks (see gradlab.functional.losses)
            stash.append(saved)
            listening = _COLUMN_WEIGHTS.get()
            if listening is not None:  # the backward fills them (recording_column_weights)
                ctx.column_weights = RecordedColumnWeights(tau, budget)
                listening.append(ctx.column_weights)
        ctx.groups, ctx.tau, ctx.budget = groups, tau, budget
        ctx.has_candidates = candidate_mask is not None
        flat = [t for pair in saved for t in pair]
        extra = (candidate_mask,) if candidate_mask is not None else ()
        ctx.save_for_backward(scores, positives, *extra, *flat)
        return ap

    @staticmethod
    def backward(ctx, grad_ap):  # type: ignore[override]
        scores, positives, *flat = ctx.saved_tensors
        candidate_mask = flat.pop(0) if ctx.has_candidates else None
        tau, budget = ctx.tau, ctx.budget
        if torch.is_grad_enabled():  # create_graph=True: a differentiable backward
            return (
                _differentiable_backward(scores, positives, candidate_mask, tau, budget,
                                         ctx.groups, grad_ap),
                None, None, None, None, None, None, None,
            )  # fmt: skip
        num_candidates = scores.shape[1]
        grad_scores = torch.zeros_like(scores)
        computed = [group for group in ctx.groups if group.has_negatives]
        buffer = block_buffer(computed, num_candidates, budget, scores)
        split, whole = _column_weights_split(ctx, scores, computed)
        for index, group in enumerate(ctx.groups):
            if not group.has_negatives:  # C_i = 0 and no negative: the gradient is exactly 0
                continue
            ranks_a, ranks_c = flat[2 * index], flat[2 * index + 1]
            upstream = grad_ap[group.queries].unsqueeze(1) / (group.num_positives * tau)
            scale = 1.0 / (group.num_positives * tau)
            # d(A_i / R_i) = (C_i dA_i - A_i dC_i) / R_i^2: positives j enter A_i with weight
            # C_i / R_i^2, negatives enter C_i with weight -A_i / R_i^2 (the AD - CB form).
            squared_rank = (ranks_a + ranks_c) ** 2
            coef_positive = upstream * ranks_c / squared_rank
            coef_negative = upstream * ranks_a / squared_rank
            for part in chunk_slices(group, num_candidates, budget):
                queries = group.queries[part]
                columns = group.positive_columns[part]
                block = sigmoid_block(scores[queries], columns, tau, out=buffer)
                slope = block.addcmul_(block, block, value=-1.0)  # G (1 - G) in place; 0 at j == i
                weights = rank_weights(
                    positives[queries], mask_rows(candidate_mask, queries), scores.dtype
                )
                coefs = torch.stack((coef_positive[part], coef_negative[part]), dim=1)
                column_sums = torch.bmm(coefs, slope)  # [k, 2, C]
                slope_positive, slope_negative = rank_sums(slope, weights)  # [k, n] each
                if split is not None:  # the decomposition's weights, as smooth_ap_terms has them
                    rows = part if whole else queries
                    g_a, g_c = column_weights(slope, weights, columns,
                                              (slope_positive, slope_negative),
                                              (ranks_a[part], ranks_c[part]))  # fmt: skip
                    write_column_weights(split, rows, whole, g_a, g_c, scale)
                grad_rows = (
                    weights[..., 0] * column_sums[:, 0] - weights[..., 1] * column_sums[:, 1]
                )
                anchor_grad = (
                    coef_positive[part] * slope_positive - coef_negative[part] * slope_negative
                )
                grad_rows = grad_rows.scatter_add(1, columns, -anchor_grad)
                grad_scores[queries] = grad_rows  # each query lies in one chunk of one group
        if split is not None:
            ctx.column_weights.split, ctx.column_weights = split, None
        return grad_scores, None, None, None, None, None, None, None


def _column_weights_split(
    ctx, scores: torch.Tensor, computed: list[PositiveGroup]
) -> tuple[torch.Tensor | None, bool]:
    """The ``[2, Q, C]`` tensor the backward writes the recorded column weights into (zeroed
    unless one group covers every row), or ``None`` when none are recorded or a group has no
    negative (its blocks are skipped here; ``smooth_ap_terms`` computes them)."""
    recorded = ctx.column_weights
    if recorded is None or len(computed) != len(ctx.groups):
        return None, False
    whole = covers_every_query(ctx.groups, scores.shape[0])
    shape = (2, *scores.shape)
    buffer, recorded.buffer = recorded.buffer, None  # nothing of the caller's kept past here
    if buffer is None:
        split = scores.new_empty(shape)
    else:
        split = buffer("recorded column weights", shape, scores.dtype)
    if not whole:
        split.zero_()
    return split, whole


def _differentiable_backward(
    scores: torch.Tensor,
    positives: torch.Tensor,
    candidate_mask: torch.Tensor | None,
    tau: float,
    budget: int,
    groups: list[PositiveGroup],
    grad_ap: torch.Tensor,
) -> torch.Tensor:
    """``d(grad_ap . AP)/d scores`` with a graph: autograd of the plain chunked forward."""
    if not groups:
        return torch.zeros_like(scores)
    ap, _ = smooth_ap_with_ranks(scores, groups, tau, budget, positives, candidate_mask)
    (grad,) = torch.autograd.grad(ap, scores, grad_ap, create_graph=True)
    return grad


def check_smooth_ap_inputs(
    scores: object, positives: object, candidate_mask: object, tau: object
) -> float:
    """Check :func:`smooth_ap`'s arguments; return ``tau`` as a float.

    Shapes, dtypes, devices and ``tau``: metadata only, no value is read (no sync).

    Raises:
        GradlabError: naming the argument that is not allowed.

    Example:
        >>> check_smooth_ap_inputs(torch.zeros(2, 3), torch.ones(2, 3, dtype=torch.bool), None, 1)
        1.0
    """
    check_tensor("scores", scores, ndims=(2,), kind="float")
    check_tensor("positives", positives, ndims=(2,), kind="bool")
    check_shape("positives", positives, scores.shape, "one flag per score")
    check_same_device(scores=scores, positives=positives)
    check_real_device(scores=scores)  # its kernels read values (a CPU pass goes through NumPy)
    if candidate_mask is not None:
        check_tensor("candidate_mask", candidate_mask, ndims=(2,), kind="bool")
        check_shape("candidate_mask", candidate_mask, scores.shape, "one flag per score")
        check_same_device(scores=scores, candidate_mask=candidate_mask)
    return check_temperature("tau", tau)


@outside_autocast
def smooth_ap(
    scores: torch.Tensor,
    positives: torch.Tensor,
    tau: float = 0.01,
    *,
    candidate_mask: torch.Tensor | None = None,
    backward: str = "exact",
    max_chunk_elements: int = DEFAULT_CHUNK_ELEMENTS,
    validate: bool = True,
) -> torch.Tensor:
    """Smooth average precision of each query (Bleeker & de Rijke 2022, Eq. 1; long version Eq. 5).

    Args:
        scores: ``[Q, C]`` float tensor, query ``q``'s score for candidate ``c`` (larger ranks
            higher). float16/bfloat16 are computed in float32 and returned in their own dtype.
            AP and its gradient do not change when a constant is added to a row, but ``s /
            tau`` is rounded at the scores' magnitude: float32 rows that share a large offset
            (raw dot products near 1000, spread 0.05) lose the low digits of their
            differences. Subtract each row's mean first (``scores - scores.mean(dim=1,
            keepdim=True)``) to keep them.
        positives: ``[Q, C]`` bool tensor, ``True`` where candidate ``c`` is relevant to ``q``.
        tau: temperature of the sigmoid ``G``, finite and at least ``1e-30``
            (:data:`gradlab.validation.SMALLEST_TEMPERATURE`: ``1/tau`` must fit float32).
        candidate_mask: optional ``[Q, C]`` bool mask; ``False`` marks a column that is not a
            candidate of that query (neither positive nor negative, zero gradient; a positive
            there is not counted, so a query whose positives are all masked has no AP). In-batch
            retrieval uses it to leave the query out of its own ranking without copying the
            ``[B, B]`` score matrix. ``None``: every column is a candidate.
        backward: ``"exact"`` (closed-form backward, memory bounded by the chunk size) or
            ``"autograd"`` (torch differentiates the same chunked forward; a reference path
            that keeps every block alive for the backward).
        max_chunk_elements: entries of the ``[queries, positives, candidates]`` block computed
            at once; bounds the extra memory.
        validate: check that ``scores`` is finite. The check rides on the call's one host
            synchronisation (the group sizes, see :func:`group_by_positive_count`), so it costs
            one reduction and no extra sync; ``False`` skips it (internal callers that checked
            already).

    Returns:
        ``[Q]`` smooth AP per query. A query with no positive has no AP: its entry is NaN and
        receives zero gradient. A query whose candidates are all positive has AP exactly 1 and
        a gradient of exactly 0. Empty input is legal: no query (``Q = 0``) gives an empty
        ``[0]``; no candidate (``C = 0``) leaves every query without a positive, so every entry
        is NaN (the score losses, whose softmax or hinge needs a candidate, refuse such a
        matrix). Both backwards, and ``torch.func.grad`` of ``backward="autograd"``, treat these
        cases alike: the result stays on the graph of ``scores`` even when no query has a
        positive, and such rows get a zero gradient.

    Raises:
        GradlabError: on a non-tensor, wrong shape, dtype or device, non-finite scores, a
            ``tau`` outside ``[1e-30, inf)``, or float16 scores that require a gradient which
            could pass float16's largest value (``1.25 / tau`` above 65504).

    Example:
        >>> import torch
        >>> from gradlab.functional import smooth_ap
        >>> scores = torch.tensor([[0.9, 0.8, 0.1], [0.2, 0.5, 0.4]])
        >>> positives = torch.tensor([[True, False, True], [False, False, False]])
        >>> smooth_ap(scores, positives, tau=0.01)
        tensor([0.8333,    nan])
    """
    tau = check_smooth_ap_inputs(scores, positives, candidate_mask, tau)
    budget = check_positive_int("max_chunk_elements", max_chunk_elements)
    if backward not in ("exact", "autograd"):
        raise GradlabError(f"backward must be 'exact' or 'autograd'; got {backward!r}")
    validate = check_bool("validate", validate)
    finite = {"scores": scores} if validate else None
    with candidate_mask_hint(scores):
        return smooth_ap_checked(scores, positives, tau, candidate_mask, backward, budget, finite)


GRADIENT_PER_TAU = 1.25
"""``|dAP_q / dS_qj| <= 1.25 / tau`` for every query ``q`` and score ``S_qj``. With ``R`` a
positive's smoothed rank and ``R+`` its rank among the positives, ``S_qj`` enters, as a
candidate, ``R+ / R`` of each positive ``i`` through ``sigma'(D_ij / tau) / tau <= 0.25 /
tau`` times ``|[j positive] R - R+| / R^2 <= 1 / R <= 1``: at most ``0.25 / tau`` over the
mean of the positives; and, when ``j`` is a positive, its own ``R+ / R`` through ``sum_k
sigma'(D_jk / tau) / tau / R < (R - 1) / (R tau) < 1 / tau`` (``sigma' <= sigma``, ``R = 1 +
sum_k sigma``), divided by the number of positives."""


def check_half_gradient(tau: float, groups: list[PositiveGroup], averaged: bool) -> None:
    """Refuse float16 scores whose SmoothAP gradient could pass float16's largest value.

    ``dAP / dS`` is computed in float32 and returned in float16: with tied scores it reaches
    ``0.25 / tau`` and more, ``inf`` in float16 below ``tau`` of about ``2e-5`` (NaN then in
    the embeddings' gradient). The bound is :data:`GRADIENT_PER_TAU` ``/ tau``, over the
    queries with a positive when the APs are ``averaged`` (the losses' mean); ``groups`` give
    that number from the host (no device read).

    Raises:
        GradlabError: the bound passes float16's largest value (65504).

    Example:
        >>> group = PositiveGroup(torch.arange(4), torch.zeros(4, 1, dtype=torch.long))
        >>> check_half_gradient(1e-3, [group], averaged=False)  # 1250: within float16
        >>> try:
        ...     check_half_gradient(1e-5, [group], averaged=True)  # 1.25e5 / 4 = 31250: within
        ...     check_half_gradient(1e-6, [group], averaged=True)
        ... except GradlabError as error:
        ...     print(str(error)[:66])
        scores must keep the gradient within torch.float16's largest value
    """
    largest = torch.finfo(torch.float16).max
    queries = sum(int(group.queries.numel()) for group in groups) if averaged else 1
    bound = GRADIENT_PER_TAU / tau / max(1, queries)
    if bound > largest:
        over = f" over the {queries} queries with a positive" if averaged else ""
        raise GradlabError(gradient_overflow_message(
            torch.float16,
            f"at tau={tau:g} SmoothAP's |dAP/dS| can reach {GRADIENT_PER_TAU} / tau{over}, "
            f"{bound:.3g}",
            "pass float32 or bfloat16 {inputs}, or a larger tau",
        ))  # fmt: skip


def smooth_ap_checked(
    scores: torch.Tensor,
    positives: torch.Tensor,
    tau: float,
    candidate_mask: torch.Tensor | None,
    backward: str = "exact",
    budget: int = DEFAULT_CHUNK_ELEMENTS,
    finite: dict[str, torch.Tensor] | None = None,
    stash: list | None = None,
    ranks_needed: bool = True,
    averaged: bool = False,
) -> torch.Tensor:
    """:func:`smooth_ap` on arguments already checked; one host synchronisation.

    ``finite`` names tensors checked for NaN/inf in that synchronisation; ``stash`` (a list)
    receives ``(groups, [(A, C) per group])`` of the forward, for callers that reuse the ranks.
    A caller that wants only the groups passes ``ranks_needed=False``: groups without a
    negative then skip their ``O(G n C)`` blocks (see :func:`smooth_ap_with_ranks`).
    With ``finite`` (validated calls), float16 scores whose gradient could pass float16 are
    refused when a gradient is computed (they require it, with grad mode on;
    :func:`check_half_gradient`; ``averaged``: the caller means the APs over the queries with a
    positive, as the losses do).
    """
    compute_dtype = torch.float32 if scores.dtype in (torch.float16, torch.bfloat16) else None
    work = scores.to(compute_dtype) if compute_dtype is not None else scores
    if candidate_mask is not None:
        positives = positives & candidate_mask
    bounds = None
    if finite is not None and "scores" in finite:  # raw scores (cosines need no bound)
        largest = torch.finfo(work.dtype).max / 2
        bounds = {"scores": (tau * largest, f"|score| / tau at most {largest:.3g}, half of "
                             f"{work.dtype}'s largest value, so that the sigmoid's arguments "
                             "(s_j - s_i) / tau stay finite")}  # fmt: skip
    groups = group_by_positive_count(positives, finite=finite, candidate_mask=candidate_mask,
                                     bounds=bounds)  # fmt: skip
    if (finite is not None and scores.dtype == torch.float16 and value_checks_enabled()
            and scores.requires_grad and torch.is_grad_enabled()):  # no gradient: no overflow
        check_half_gradient(tau, groups, averaged)
    saved: list | None = [] if stash is not None else None
    if backward == "exact":
        ranks_needed = ranks_needed and stash is not None
        ap = _SmoothAPExact.apply(
            work, positives, candidate_mask, tau, budget, groups, saved, ranks_needed
        )
    else:
        ap, ranks = smooth_ap_with_ranks(work, groups, tau, budget, positives, candidate_mask)
        if saved is not None:
            saved.append(ranks)
    if stash is not None:
        stash.append((groups, [(a.detach(), c.detach()) for a, c in saved[0]]))
    return ap.to(scores.dtype)
