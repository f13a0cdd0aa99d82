"""Anatomy quantities: which pairs the trained loss gives gradient to (Bleeker & de Rijke, 2022).

The Monitor captures the score matrix ``S`` a watched loss differentiated and reads ``dL/dS`` with
a hook (never changing it, see :meth:`gradlab.Monitor.watch`); :class:`Anatomy` summarises
:func:`gradlab.functional.gradient_anatomy` of it over the queries of the step. Where the loss
exposes no score matrix the quantity logs nothing and the run header says why.
Under ``torch.distributed`` it describes the writing rank's own batch (score matrices and
their gradients are not gathered).

Logged keys (``anatomy_`` + direction + statistic; the direction is empty for in-batch
retrieval, ``i2t_`` for rows as queries and ``t2i_`` for columns as queries of a cross-modal
batch). Only queries with a positive and a negative are summarised:

* ``active_negatives_{mean,q10,q50,q90}``: negatives per query with non-negligible ``|dL/dS|``;
* ``active_negative_share``: the same over the query's number of negatives (mean);
* ``active_positives``: positives with non-negligible gradient (mean);
* ``hardest_1pct_share`` / ``hardest_10pct_share``: share of the negatives' gradient mass on the
  hardest 1 % / 10 % of negatives by score (mean over the queries whose negatives get any);
* ``active_rank_depth``: mean over queries of ``(r - 1) / (N - 1)`` for ``r`` the mean rank of
  the query's active negatives and ``N`` its number of negatives (0: only the hardest gets
  gradient; about 0.5: spread over the whole ranking; comparable across directions whose ``N``
  differ);
* ``deepest_active_rank``: the same for the deepest active rank;
* ``queries_without_gradient``: share of the queries that receive no gradient at all.
"""

from __future__ import annotations

import math
import struct
from typing import NamedTuple

import numpy as np
import torch

from gradlab.functional.gradient_anatomy import (
    DEFAULT_ABSOLUTE_THRESHOLD,
    DEFAULT_RELATIVE_THRESHOLD,
    HARD_DIVISORS,
    RELATIVE_THRESHOLD_RANGE,
    gradient_anatomy,
    hardest_count,
)
from gradlab.monitor.batch import BatchView, ScoreCapture
from gradlab.monitor.quantity import Plot, Quantity, _row_any, _row_counts
from gradlab.monitor.schedules import Schedule
from gradlab.validation import check_in_range, check_non_negative_finite, skip_value_checks

Values = dict[str, torch.Tensor]


def _masked_means(rows: torch.Tensor, keep: torch.Tensor) -> torch.Tensor:
    """``[k]``: mean of each row of ``rows`` ``[k, Q]`` where ``keep`` and finite; NaN where
    none (no host sync). One pass for every mean of a direction."""
    keep = keep & torch.isfinite(rows)
    count = keep.sum(dim=1)
    total = torch.where(keep, rows, 0.0).sum(dim=1)
    return torch.where(count > 0, total / count.clamp(min=1), math.nan)


def _masked_quantiles(values: torch.Tensor, keep: torch.Tensor) -> torch.Tensor:
    """10/50/90 % quantiles of ``values`` where ``keep`` (NaN if none), without a host sync."""
    masked = torch.where(keep, values, math.nan)
    if masked.numel() == 0:
        masked = torch.full((1,), math.nan, dtype=values.dtype, device=values.device)
    levels = torch.linspace(0.1, 0.9, 3, dtype=values.dtype, device=values.device)  # no copy
    return torch.nanquantile(masked, levels)


class _PerQuery(NamedTuple):
    """The per-query statistics the logged summary reads (fields of GradientAnatomy)."""

    active_positives: torch.Tensor
    active_negatives: torch.Tensor
    num_positives: torch.Tensor
    num_negatives: torch.Tensor
    active_negative_rank_mean: torch.Tensor
    active_negative_rank_max: torch.Tensor
    hardest_1pct_share: torch.Tensor
    hardest_10pct_share: torch.Tensor
    without_gradient: torch.Tensor


def _plain(device: torch.device):
    """A ``buffer(name, shape, dtype)`` that allocates (no workspace)."""
    return lambda name, shape, dtype: torch.empty(shape, dtype=dtype, device=device)


def _activity_floor(absolute_threshold: float, dtype: torch.dtype) -> float | None:
    """The smallest ``x`` of ``dtype`` with ``x > absolute_threshold`` as torch compares them
    (float32 / float64; None for other dtypes): ``|G| > a`` is then ``|G| >= floor``, and the
    two tests of an active entry become one, against a per-row threshold. Plain Python: torch
    compares a float32 tensor with ``a`` rounded to float32, a float64 one with ``a`` itself.

    Example:
        >>> _activity_floor(1e-10, torch.float32) > 1e-10, _activity_floor(0.5, torch.float64)
        (True, 0.5000000000000001)
    """
    absolute_threshold = abs(absolute_threshold)  # -0.0 (>= 0) is 0.0: no sign bit below
    if dtype == torch.float64:
        return math.nextafter(absolute_threshold, math.inf)
    if dtype != torch.float32:
        return None
    if absolute_threshold > _FLOAT32_MAX:  # rounds to inf: no finite |G| is above it
        return math.inf
    (bits,) = struct.unpack("<I", struct.pack("<f", absolute_threshold))  # nearest float32
    return struct.unpack("<f", struct.pack("<I", bits + 1))[0]  # the next one up (a >= 0)


_FLOAT32_MAX = float(torch.finfo(torch.float32).max)


def _per_query_from_order(
    score_grad: torch.Tensor,
    scores: torch.Tensor,
    positives: torch.Tensor,
    candidates: torch.Tensor | None,
    order: torch.Tensor,
    absolute_threshold: float,
    relative_threshold: float,
    buffer=None,
) -> _PerQuery:
    """:func:`gradient_anatomy`'s per-query statistics from a sort the step already made.

    ``order`` ``[Q, C]``, C >= 1: every column of each row by descending score, ties by column
    index (``BatchView.descending_order``). Every statistic is per row, so the rows are read in that
    order: ``dL/dS`` and the masks are gathered once, a negative's rank is then the running
    count of negatives up to its position, and the hardest ``k`` negatives are the positions
    up to the ``k``-th one (a prefix: its mass is read off a running sum). No sort of its own;
    same definitions and NaN rules (:func:`gradient_anatomy`'s docstring); finite
    ``-inf``-free scores, as the Monitor's. ``buffer(name, shape, dtype)`` gives the ``[Q, C]``
    work buffers (:meth:`BatchView.buffer`: reused across steps on a CPU).
    """
    buffer = buffer or _plain(order.device)
    shape = tuple(order.shape)
    magnitude = torch.gather(score_grad.detach(), 1, order,
                             out=buffer("anatomy |G|", shape, score_grad.dtype))  # fmt: skip
    magnitude.abs_().nan_to_num_(nan=0.0)  # finite from here: a 0/1 factor is exact
    if candidates is None:
        positive = torch.gather(positives, 1, order, out=buffer("anatomy P", shape, torch.bool))
        negative = torch.bitwise_not(positive, out=buffer("anatomy N", shape, torch.bool))
    else:
        # both masks in one byte (1: positive, 2: candidate), gathered once: a gather reads
        # the whole [Q, C] int64 order, byte ops (shift, and, xor) a fraction of that
        kind = torch.add(positives.view(torch.uint8), candidates.view(torch.uint8), alpha=2,
                         out=buffer("anatomy kinds", shape, torch.uint8))  # fmt: skip
        kind = torch.gather(kind, 1, order, out=buffer("anatomy kinds sorted", shape,
                                                         torch.uint8))  # fmt: skip
        candidate = torch.bitwise_right_shift(kind, 1, out=buffer("anatomy C", shape,
                                                                  torch.uint8))  # fmt: skip
        positive = torch.bitwise_and(kind, candidate, out=buffer("anatomy P", shape, torch.uint8))
        negative = torch.bitwise_xor(candidate, positive, out=buffer("anatomy N", shape,
                                                                     torch.uint8))  # fmt: skip
        positive, negative = positive.view(torch.bool), negative.view(torch.bool)  # 0 or 1
        magnitude.mul_(candidate)  # non-candidates: 0, never active
    largest = magnitude.amax(dim=1, keepdim=True)
    floor = _activity_floor(absolute_threshold, magnitude.dtype)
    active = buffer("anatomy active", shape, torch.bool)
    if floor is None:  # two tests (half precision: the relative threshold in float32)
        torch.gt(magnitude, absolute_threshold, out=active)
        active &= magnitude >= relative_threshold * largest.float()
        any_active = _row_any(active)
    else:  # one test: |G| >= max(floor, relative threshold x the row's largest)
        threshold = torch.clamp(relative_threshold * largest, min=floor)
        torch.ge(magnitude, threshold, out=active)
        any_active = (largest >= threshold).squeeze(1)
    both = buffer("anatomy active and", shape, torch.bool)
    active_positives = _row_counts(torch.bitwise_and(active, positive, out=both))
    active_negative = torch.bitwise_and(active, negative, out=both)
    active_negatives = _row_counts(active_negative)
    num_negatives = _row_counts(negative)
    if candidates is None:
        without = ~any_active
    else:
        without = _row_any(candidates) & ~any_active
    unranked = _unranked(scores, candidates, buffer)

    # At each position, the negatives up to it (int32 from bytes: a bool cumsum is ~10x slower).
    rank = torch.cumsum(negative.view(torch.uint8), dim=1, dtype=torch.int32,
                        out=buffer("anatomy rank", shape, torch.int32))  # fmt: skip
    active_ranks = torch.mul(rank, active_negative.view(torch.uint8),
                             out=buffer("anatomy ranks", shape, torch.int32))  # fmt: skip
    count = active_negatives.to(torch.float64)
    ranked = (count > 0) & ~unranked
    # At most 1 + 2 + ... + C: an int32 sum while that fits (~25x faster than through int64).
    exact_in = torch.int32 if shape[1] < 1 << 16 else torch.int64
    rank_sum = active_ranks.sum(dim=1, dtype=exact_in).to(torch.float64)
    rank_mean = torch.where(ranked, rank_sum / count.clamp(min=1), math.nan)
    rank_max = torch.where(ranked, active_ranks.amax(dim=1).to(torch.float64), math.nan)

    mass = magnitude.mul_(negative.view(torch.uint8))  # the negatives' |G| (bytes: a bool
    # factor is converted ~10x slower); magnitude is not read below
    wide = buffer("anatomy mass", shape, torch.float64)
    wide.copy_(mass)  # summed in float64
    running = torch.cumsum(wide, dim=1, out=buffer("anatomy running", shape, torch.float64))
    total = running[:, -1]  # C >= 1: anatomy_values sends [Q, 0] to gradient_anatomy
    defined = (total > 0) & ~unranked
    shares = []
    for divisor in HARD_DIVISORS:  # two fixed fractions, not a loop over queries
        hardest = hardest_count(num_negatives, divisor).to(rank.dtype)
        # the positions whose rank is at most ``hardest``: a prefix of the row
        inside = torch.searchsorted(rank, hardest.unsqueeze(1), right=True)
        top = running.gather(1, (inside - 1).clamp(min=0)).squeeze(1)
        top = torch.where(inside.squeeze(1) > 0, top, 0.0)
        shares.append(torch.where(defined, top / total, math.nan))  # total > 0 there
    return _PerQuery(
        active_positives=active_positives,
        active_negatives=active_negatives,
        num_positives=_row_counts(positive),
        num_negatives=num_negatives,
        active_negative_rank_mean=rank_mean,
        active_negative_rank_max=rank_max,
        hardest_1pct_share=shares[0],
        hardest_10pct_share=shares[1],
        without_gradient=without,
    )


def _unranked(
    scores: torch.Tensor, candidates: torch.Tensor | None, buffer
) -> torch.Tensor:
    """``[Q]`` bool: rows with a NaN score among their candidates (their ranks are undefined).

    On a CPU (float32/float64) the rows' largest scores come first (NaN propagates into them:
    one reduction, no ``[Q, C]`` mask); a matrix without NaN then has no such row. Otherwise,
    and elsewhere, the mask of NaN candidates is made and each row searched.
    """
    if _screens_nan_on_host(scores) and not np.from_dlpack(
        torch.isnan(scores.amax(dim=1)).any()
    ):  # read in place on the host (a 0-d bool): the CPU path waits for no device
        return torch.zeros(scores.shape[0], dtype=torch.bool, device=scores.device)
    nan = torch.ne(scores, scores, out=buffer("anatomy NaN", tuple(scores.shape), torch.bool))
    if candidates is not None:
        nan &= candidates
    return _row_any(nan)


def _screens_nan_on_host(scores: torch.Tensor) -> bool:
    """Whether :func:`_unranked` reads a NaN flag of ``scores`` first: float32/float64 entries
    on a CPU (the read is no device synchronisation there); half precision and other devices
    build the mask."""
    return (scores.device.type == "cpu" and scores.numel() > 0
            and scores.dtype in (torch.float32, torch.float64))  # fmt: skip


LOGGED = ("active_negatives_mean", "active_negatives_q10", "active_negatives_q50",
          "active_negatives_q90", "active_negative_share", "active_positives",
          "hardest_1pct_share", "hardest_10pct_share", "active_rank_depth",
          "deepest_active_rank", "queries_without_gradient")  # fmt: skip
"""The statistics each direction logs (after its prefix), in the order they are logged."""

DIRECTION_PREFIXES = ("", "i2t_", "t2i_")
"""In-batch retrieval (no prefix), rows as queries, columns as queries of a cross-modal batch."""


def anatomy_values(
    prefix: str,
    score_grad: torch.Tensor,
    scores: torch.Tensor,
    positives: torch.Tensor,
    candidates: torch.Tensor | None = None,
    absolute_threshold: float = DEFAULT_ABSOLUTE_THRESHOLD,
    relative_threshold: float = DEFAULT_RELATIVE_THRESHOLD,
    order: torch.Tensor | None = None,
    buffer=None,
) -> Values:
    """The logged summary of one direction's anatomy (rows are queries), keys ``prefix + ...``.

    ``order``: the rows' columns by descending score, ties by column index, when the step has
    sorted ``scores`` already (then no sort here; see :func:`_per_query_from_order`, which
    takes its work buffers from ``buffer(name, shape, dtype)`` when given). Rows without
    candidates (``[Q, 0]``: a cross-modal batch without candidates) take
    :func:`gradient_anatomy`'s definition: no query has a positive and a negative, every
    statistic is NaN.
    """
    if order is None or scores.shape[1] == 0:
        with skip_value_checks():  # the step's own tensors, checked: nothing to read back
            anatomy = gradient_anatomy(score_grad, scores, positives, candidate_mask=candidates,
                                       absolute_threshold=absolute_threshold,
                                       relative_threshold=relative_threshold)  # fmt: skip
    else:
        anatomy = _per_query_from_order(score_grad, scores, positives, candidates, order,
                                        absolute_threshold, relative_threshold,
                                        buffer)  # fmt: skip
    keep = (anatomy.num_positives > 0) & (anatomy.num_negatives > 0)
    active = anatomy.active_negatives.to(torch.float64)
    negatives = anatomy.num_negatives.to(torch.float64).clamp(min=1)
    span = (negatives - 1).clamp(min=1)  # ranks 1..N onto 0..1
    quantiles = _masked_quantiles(active, keep)
    rows = torch.stack([
        active,
        active / negatives,
        anatomy.active_positives.to(torch.float64),
        anatomy.hardest_1pct_share,
        anatomy.hardest_10pct_share,
        (anatomy.active_negative_rank_mean - 1) / span,
        (anatomy.active_negative_rank_max - 1) / span,
        anatomy.without_gradient.to(torch.float64),
    ])  # fmt: skip
    means = _masked_means(rows, keep.unsqueeze(0))
    # The rows of ``means``, then the three quantiles.
    names = ("active_negatives_mean", "active_negative_share", "active_positives",
             "hardest_1pct_share", "hardest_10pct_share", "active_rank_depth",
             "deepest_active_rank", "queries_without_gradient", "active_negatives_q10",
             "active_negatives_q50", "active_negatives_q90")  # fmt: skip
    # unbind makes every 0-d view in one call (a select per value costs microseconds).
    scalars = dict(zip(names, torch.cat((means, quantiles)).unbind(), strict=True))
    return {f"{prefix}{name}": scalars[name] for name in LOGGED}


class Anatomy(Quantity):
    """Which pairs the watched loss gives gradient to (Bleeker & de Rijke, 2022).

    :func:`gradlab.functional.gradient_anatomy` of the step's ``dL/dS``, summarised over the
    queries; the Monitor page's "Gradient anatomy" section says what each key means.

    Args:
        schedule: ``step -> bool``.
        absolute_threshold: see :func:`gradlab.functional.gradient_anatomy`.
        relative_threshold: see :func:`gradlab.functional.gradient_anatomy`.

    Raises:
        GradlabError: a threshold out of range.

    Example:
        >>> from gradlab.monitor import Anatomy
        >>> Anatomy(relative_threshold=0.05).relative_threshold
        0.05
    """

    name = "anatomy"
    # descending_order: reads the step's sort with ties in column order
    needs = frozenset({"score_grad", "descending_order"})
    keys = tuple(f"anatomy_{direction}{statistic}"
                 for direction in DIRECTION_PREFIXES for statistic in LOGGED)  # fmt: skip
    plots = (
        Plot("anatomy_active_negatives", "Negatives receiving gradient per query (mean)",
             "negatives", (
                 ("anatomy_active_negatives_mean", "negatives with gradient (mean per query)"),
                 ("anatomy_i2t_active_negatives_mean", "rows as queries (i2t)"),
                 ("anatomy_t2i_active_negatives_mean", "columns as queries (t2i)")),
             zero_based=True,
             reading=("How many negatives per query receive dL/dS above the anatomy's "
                      "thresholds.")),
        Plot("anatomy_hardness", "Hardness of the negatives receiving gradient: share of their "
             "gradient on the hardest 10 %, relative rank depth", "share / depth", (
                 ("anatomy_hardest_10pct_share", "share on the hardest 10 %"),
                 ("anatomy_i2t_hardest_10pct_share",
                  "share on the hardest 10 % (rows as queries, i2t)"),
                 ("anatomy_t2i_hardest_10pct_share",
                  "share on the hardest 10 % (columns as queries, t2i)"),
                 ("anatomy_active_rank_depth", "relative rank depth"),
                 ("anatomy_i2t_active_rank_depth", "relative rank depth (rows as queries, i2t)"),
                 ("anatomy_t2i_active_rank_depth",
                  "relative rank depth (columns as queries, t2i)")),
             reading=("Whether the gradient goes to the hardest negatives: their top 10 %'s "
                      "share of it, and how deep in the ranking the negatives with gradient lie "
                      "(relative rank depth).")),
        Plot("anatomy_without_gradient", "Queries receiving no gradient (anatomy)",
             "share of queries", (
                 ("anatomy_queries_without_gradient",
                  "queries with no dL/dS above the thresholds (share)"),
                 ("anatomy_i2t_queries_without_gradient",
                  "queries with no dL/dS above the thresholds (rows as queries, i2t)"),
                 ("anatomy_t2i_queries_without_gradient",
                  "queries with no dL/dS above the thresholds (columns as queries, t2i)")),
             zero_based=True,
             reading=("The share of queries whose dL/dS stays below the anatomy's thresholds "
                      "everywhere.")),
    )  # fmt: skip

    def __init__(
        self,
        schedule: Schedule | None = None,
        absolute_threshold: float = DEFAULT_ABSOLUTE_THRESHOLD,
        relative_threshold: float = DEFAULT_RELATIVE_THRESHOLD,
    ) -> None:
        super().__init__(schedule)
        self.absolute_threshold = check_non_negative_finite("absolute_threshold",
                                                            absolute_threshold)  # fmt: skip
        self.relative_threshold = check_in_range("relative_threshold", relative_threshold, 0.0,
                                                 1.0, RELATIVE_THRESHOLD_RANGE)  # fmt: skip

    def compute(self, batch: BatchView) -> Values:
        values: Values = {}
        for capture in batch.score_captures:
            grad, scores = capture.grad, capture.scores
            if grad is None and capture.smooth_ap_tau is not None:
                # gradlab's SmoothAP without a recorded graph: its exact dL/dS from the step's
                # shared sigmoid block (no recomputation, no host sync).
                include_query = capture.direction == "in_batch" and capture.candidates is None
                grad = batch.smooth_ap_loss_grad(capture.smooth_ap_tau, include_query)
                scores = batch.scores
            if grad is None:
                continue
            views = {
                "in_batch": (("", False),),
                "i2t": (("i2t_", False),),
                "t2i": (("t2i_", True),),
                "both": (("i2t_", False), ("t2i_", True)),
            }[capture.direction]
            # Rows of the step's own score matrix: ranked by the step's one sort.
            shared = (batch.ties_by_column and "layout" in batch.__dict__
                      and _same_matrix(scores, batch.scores))  # fmt: skip
            for name, transpose in views:
                order = batch.descending_order if shared and not transpose else None
                values.update(self._values(f"anatomy_{name}", capture, grad, scores, transpose,
                                           order, batch.buffer))  # fmt: skip
        return values

    def _values(self, prefix: str, capture: ScoreCapture, grad, scores, transpose, order, buffer):
        def oriented(matrix):
            return None if matrix is None else (matrix.T if transpose else matrix)

        return anatomy_values(prefix, oriented(grad), oriented(scores),
                              oriented(capture.positives), oriented(capture.candidates),
                              self.absolute_threshold, self.relative_threshold,
                              order, buffer)  # fmt: skip


def _same_matrix(first: torch.Tensor, second: torch.Tensor) -> bool:
    """Whether two tensors are views of the same memory with the same layout (no value read)."""
    return (first.data_ptr() == second.data_ptr() and first.shape == second.shape
            and first.stride() == second.stride() and first.dtype == second.dtype)  # fmt: skip
