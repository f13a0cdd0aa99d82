"""Anatomy quantities: which pairs the trained loss gives gradient to (seed 001).

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

import torch

from gradlab._validation import check_non_negative_finite
from gradlab.errors import GradlabError
from gradlab.functional.gradient_anatomy import (
    DEFAULT_ABSOLUTE_THRESHOLD,
    DEFAULT_RELATIVE_THRESHOLD,
    gradient_anatomy,
)
from gradlab.monitor.batch import BatchView, ScoreCapture
from gradlab.monitor.quantities import Quantity  # quantities imports this module at its end
from gradlab.monitor.schedules import Schedule

Values = dict[str, torch.Tensor]


def _masked_mean(values: torch.Tensor, keep: torch.Tensor) -> torch.Tensor:
    """Mean of ``values`` where ``keep`` and finite; NaN if none (no host sync)."""
    keep = keep & torch.isfinite(values)
    count = keep.sum()
    total = torch.where(keep, values, 0.0).sum()
    return torch.where(count > 0, total / count.clamp(min=1), math.nan)


def _masked_quantiles(values: torch.Tensor, keep: torch.Tensor) -> torch.Tensor:
    """10/50/90 % quantiles of ``values`` where ``keep`` (NaN if none), without a host sync."""
    masked = torch.where(keep, values, math.nan)
    if masked.numel() == 0:
        masked = torch.full((1,), math.nan, dtype=values.dtype, device=values.device)
    levels = torch.linspace(0.1, 0.9, 3, dtype=values.dtype, device=values.device)  # no copy
    return torch.nanquantile(masked, levels)


def anatomy_values(
    prefix: str,
    score_grad: torch.Tensor,
    scores: torch.Tensor,
    positives: torch.Tensor,
    candidates: torch.Tensor | None = None,
    absolute_threshold: float = DEFAULT_ABSOLUTE_THRESHOLD,
    relative_threshold: float = DEFAULT_RELATIVE_THRESHOLD,
) -> Values:
    """The logged summary of one direction's anatomy (rows are queries), keys ``prefix + ...``."""
    anatomy = gradient_anatomy(score_grad, scores, positives, candidates,
                               absolute_threshold=absolute_threshold,
                               relative_threshold=relative_threshold)  # fmt: skip
    keep = (anatomy.num_positives > 0) & (anatomy.num_negatives > 0)
    active = anatomy.active_negatives.to(torch.float64)
    negatives = anatomy.num_negatives.to(torch.float64).clamp(min=1)
    span = (negatives - 1).clamp(min=1)  # ranks 1..N onto 0..1
    quantiles = _masked_quantiles(active, keep)
    return {
        f"{prefix}active_negatives_mean": _masked_mean(active, keep),
        f"{prefix}active_negatives_q10": quantiles[0],
        f"{prefix}active_negatives_q50": quantiles[1],
        f"{prefix}active_negatives_q90": quantiles[2],
        f"{prefix}active_negative_share": _masked_mean(active / negatives, keep),
        f"{prefix}active_positives": _masked_mean(
            anatomy.active_positives.to(torch.float64), keep
        ),
        f"{prefix}hardest_1pct_share": _masked_mean(anatomy.hardest_1pct_share, keep),
        f"{prefix}hardest_10pct_share": _masked_mean(anatomy.hardest_10pct_share, keep),
        f"{prefix}active_rank_depth": _masked_mean(
            (anatomy.active_negative_rank_mean - 1) / span, keep
        ),
        f"{prefix}deepest_active_rank": _masked_mean(
            (anatomy.active_negative_rank_max - 1) / span, keep
        ),
        f"{prefix}queries_without_gradient": _masked_mean(
            anatomy.without_gradient.to(torch.float64), keep
        ),
    }


class Anatomy(Quantity):
    """Which pairs of the watched loss's score matrix receive gradient (module docstring).

    Args:
        schedule: ``step -> bool``.
        absolute_threshold: see :func:`gradlab.functional.gradient_anatomy`.
        relative_threshold: see :func:`gradlab.functional.gradient_anatomy`.

    Raises:
        GradlabError: a threshold out of range.

    Example:
        >>> Anatomy(relative_threshold=0.05).relative_threshold
        0.05
    """

    name = "anatomy"
    needs_grad = True
    needs_score_grad = True

    def __init__(
        self,
        schedule: Schedule | None = None,
        absolute_threshold: float = DEFAULT_ABSOLUTE_THRESHOLD,
        relative_threshold: float = DEFAULT_RELATIVE_THRESHOLD,
    ) -> None:
        super().__init__(schedule)
        self.absolute_threshold = check_non_negative_finite("absolute_threshold",
                                                            absolute_threshold)  # fmt: skip
        self.relative_threshold = check_non_negative_finite("relative_threshold",
                                                            relative_threshold)  # fmt: skip
        if self.relative_threshold > 1:
            raise GradlabError(
                f"relative_threshold must lie in [0, 1]; got {relative_threshold!r}"
            )

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
            for name, transpose in views:
                values.update(self._values(f"anatomy_{name}", capture, grad, scores, transpose))
        return values

    def _values(self, prefix: str, capture: ScoreCapture, grad, scores, transpose) -> Values:
        def oriented(matrix):
            return None if matrix is None else (matrix.T if transpose else matrix)

        return anatomy_values(prefix, oriented(grad), oriented(scores),
                              oriented(capture.positives), oriented(capture.candidates),
                              self.absolute_threshold, self.relative_threshold)  # fmt: skip
