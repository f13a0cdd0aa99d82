"""A loss as a function of the score matrix, split by direction (rows or columns as queries).

The built-in steps compute the score matrix themselves (:func:`~gradlab.equivalence.problem.
cosine_scores`) and need the loss written on it, one direction at a time: a process that owns
some queries computes their rows (image -> caption, ``i2t``) and, for a loss that also ranks
images for each caption (``t2i``), their columns. :func:`score_objective` turns gradlab's losses
and any ``(scores, positives) -> loss`` callable into that form.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from functools import partial

import torch

from gradlab.errors import GradlabError
from gradlab.functional.losses import mean_ap_loss
from gradlab.functional.score_losses import max_violation_triplet_loss, nt_xent_loss
from gradlab.functional.siglip import sigmoid_pair_loss
from gradlab.functional.smooth_ap import smooth_ap
from gradlab.losses import MaxViolationTripletLoss, NTXentLoss, SmoothAPLoss
from gradlab.siglip_loss import SigLIPLoss

__all__ = ["ScoreObjective", "score_objective"]


def _smooth_ap_rows(scores: torch.Tensor, positives: torch.Tensor, tau: float) -> torch.Tensor:
    """``1 - mean smooth AP`` of the rows (Brown et al., 2020, Eq. 1), as ``SmoothAPLoss``'s
    cross-modal form computes it from the cosine scores."""
    return mean_ap_loss(smooth_ap(scores, positives, tau), scores, positives.any(dim=1))


@dataclass(frozen=True)
class ScoreObjective:
    """A loss on a ``[Q, C]`` score matrix: ``row_loss`` for rows as queries, and directions.

    Attributes:
        name: the loss, for tables.
        row_loss: ``(scores, positives) -> loss`` with the rows as queries.
        directions: ``("i2t",)``, ``("t2i",)`` or ``("i2t", "t2i")``; ``t2i`` is ``row_loss``
            on the transposed matrix.
        reduction: ``"mean"`` (over the queries or pairs of a direction) or ``"sum"``.
    """

    name: str
    row_loss: Callable[[torch.Tensor, torch.Tensor], torch.Tensor]
    directions: tuple[str, ...] = ("i2t",)
    reduction: str = "mean"

    def __call__(self, scores: torch.Tensor, positives: torch.Tensor) -> torch.Tensor:
        """The whole loss: the sum of its directions."""
        total = None
        for direction in self.directions:
            term = (
                self.row_loss(scores, positives)
                if direction == "i2t"
                else self.row_loss(scores.T, positives.T)
            )
            _check_value(self.name, term)
            total = term if total is None else total + term
        return total


def _check_value(name: str, value: object) -> None:
    """Refuse a loss value that cannot be back-propagated as one loss: not a tensor, or not a
    single floating-point value (a loss per query left unreduced)."""
    if isinstance(value, torch.Tensor) and value.dim() == 0 and value.is_floating_point():
        return
    if isinstance(value, torch.Tensor):
        got = f"a {value.dtype} tensor of shape {tuple(value.shape)}" + (
            " (a value per query or pair: reduce it, e.g. .mean())" if value.dim() else "")
    else:
        got = f"{type(value).__name__} {value!r} (compute the loss with torch operations)"
    raise GradlabError(f"the loss {name} must return one floating-point value, a 0-d tensor; "
                       f"got {got}")  # fmt: skip


def score_objective(loss: object) -> ScoreObjective:
    """The :class:`ScoreObjective` of a loss.

    * :class:`gradlab.SmoothAPLoss`: rows as queries (its cross-modal form, on cosine scores);
    * :class:`gradlab.NTXentLoss`, :class:`gradlab.MaxViolationTripletLoss`: their
      ``direction`` and ``reduction``;
    * :class:`gradlab.siglip_loss.SigLIPLoss`: rows as queries only (Zhai et al., 2023, Eq. 1
      sums every pair of the matrix once; a ``t2i`` direction would count each pair twice),
      its ``scale``, ``bias`` and ``reduction`` (``"mean"`` divides by the rows, so a process's
      local loss of ``B / N`` rows is ``N`` times its share and DDP's average is exact);
    * any other callable ``loss(scores, positives)``: taken as a loss whose queries are the
      rows, reduced by a mean (``reduction="sum"`` when it has that attribute).

    Raises:
        GradlabError: ``loss`` is not callable.

    Example:
        >>> import gradlab
        >>> objective = score_objective(gradlab.NTXentLoss(temperature=0.5))
        >>> objective.directions, objective.reduction
        (('i2t', 't2i'), 'mean')
        >>> score_objective(gradlab.SmoothAPLoss(tau=0.01)).directions
        ('i2t',)
        >>> score_objective(SigLIPLoss(scale=10.0, bias=-10.0)).directions
        ('i2t',)
    """
    both = {"both": ("i2t", "t2i"), "i2t": ("i2t",), "t2i": ("t2i",)}
    if isinstance(loss, SmoothAPLoss):
        return ScoreObjective("SmoothAPLoss", partial(_smooth_ap_rows, tau=loss.tau))
    if isinstance(loss, NTXentLoss):
        row = partial(nt_xent_loss, temperature=loss.temperature, direction="i2t",
                      reduction=loss.reduction, validate=loss.validate)  # fmt: skip
        return ScoreObjective("NTXentLoss", row, both[loss.direction], loss.reduction)
    if isinstance(loss, MaxViolationTripletLoss):
        row = partial(max_violation_triplet_loss, margin=loss.margin, direction="i2t",
                      reduction=loss.reduction, validate=loss.validate)  # fmt: skip
        return ScoreObjective("MaxViolationTripletLoss", row, both[loss.direction], loss.reduction)
    if isinstance(loss, SigLIPLoss):  # no direction: every pair once, as the rows' loss
        row = partial(sigmoid_pair_loss, scale=loss.scale, bias=loss.bias,
                      reduction=loss.reduction, validate=loss.validate)  # fmt: skip
        return ScoreObjective("SigLIPLoss", row, ("i2t",), loss.reduction)
    if not callable(loss):
        raise GradlabError(
            "loss must be a gradlab loss (SmoothAPLoss, NTXentLoss, MaxViolationTripletLoss, "
            "SigLIPLoss) or a callable loss(scores, positives); got "
            f"{type(loss).__name__} {loss!r}"
        )
    reduction = getattr(loss, "reduction", "mean")
    name = getattr(loss, "__name__", type(loss).__name__)
    return ScoreObjective(name, loss, ("i2t",), "sum" if reduction == "sum" else "mean")
