"""``SigLIPLoss``: the sigmoid loss of SigLIP as a gradlab score-matrix loss (Zhai et al., 2023).

Called as ``loss(scores, positives)`` like :class:`gradlab.NTXentLoss`; a
:class:`gradlab.Monitor` that watches it reads ``dL/dS`` of the whole matrix, rows as one
direction's queries and columns as the other's (the loss has no direction). The formula:
:func:`gradlab.functional.siglip.sigmoid_pair_loss`.
"""

from __future__ import annotations

import torch

from gradlab.functional.siglip import (
    SIGLIP_BIAS,
    SIGLIP_SCALE,
    check_siglip_options,
    sigmoid_pair_loss,
)
from gradlab.losses import SoftmaxLogits, _ScoreMatrixLoss

__all__ = ["SigLIPLoss"]


class SigLIPLoss(_ScoreMatrixLoss):
    """SigLIP's sigmoid loss on a score matrix (Zhai et al. 2023, Eq. 1), several positives.

    ``loss(scores, positives)``: see :func:`gradlab.functional.siglip.sigmoid_pair_loss`.
    Plain autograd: second derivatives are exact.

    Args:
        scale: ``t``, a number in ``(0, 1e30]`` (SigLIP starts at 10).
        bias: ``b``, a number in ``[-1e30, 1e30]`` (SigLIP starts at -10). SigLIP learns
            both: pass ``scale=1.0, bias=0.0`` and the logits ``t * scores + b``.
        reduction: ``"mean"`` (the sum over pairs divided by the number of rows) or ``"sum"``.
        validate: refuse NaN/inf scores, and scores large enough that the summed pair
            losses would overflow the dtype they are computed in (or, for half-precision
            scores, the dtype they are returned in), in one host read; the bound is
            :func:`gradlab.functional.sigmoid_pair_loss`'s. ``False`` reads nothing back.

    Raises:
        GradlabError: a bad option, naming it and the value.

    Example:
        >>> import torch
        >>> from gradlab import SigLIPLoss
        >>> loss_fn = SigLIPLoss(scale=1.0, bias=0.0)
        >>> scores = torch.tensor([[1.0, 0.0], [0.0, 1.0]])
        >>> round(loss_fn(scores, torch.eye(2, dtype=torch.bool)).item(), 4)
        1.0064
    """

    def __init__(
        self,
        scale: float = SIGLIP_SCALE,
        bias: float = SIGLIP_BIAS,
        reduction: str = "mean",
        validate: bool = True,
    ) -> None:
        self.scale, self.bias = check_siglip_options(scale, bias, reduction)
        super().__init__("both", reduction, validate)

    def forward(
        self, scores: torch.Tensor, positives: torch.Tensor | None = None, *extra: object
    ) -> torch.Tensor:
        """``loss(scores [Q, C], positives [Q, C] bool)``."""
        self._check_call(positives, extra)
        return sigmoid_pair_loss(
            scores, positives, self.scale, self.bias, reduction=self.reduction,
            on_scores=self.score_recorder, validate=self.validate,
        )  # fmt: skip

    @property
    def softmax_logits(self) -> SoftmaxLogits:
        """Its logits are ``t * S + b`` (Zhai et al. 2023, Eq. 1), a sigmoid of each pair and
        no softmax (:class:`~gradlab.losses.SoftmaxLogits`): the scale is ``t``.

        Example:
            >>> from gradlab import SigLIPLoss
            >>> SigLIPLoss(scale=10.0).softmax_logits
            SoftmaxLogits(scale=10.0, direction='both', terms=1, info_nce=False, logits=False)
        """
        return SoftmaxLogits(self.scale, self.direction, info_nce=False)

    def extra_repr(self) -> str:
        return f"scale={self.scale}, bias={self.bias}, reduction={self.reduction!r}"
