"""The sigmoid loss of SigLIP on a score matrix (Zhai et al., 2023).

Zhai, Mustafa, Kolesnikov & Beyer, "Sigmoid Loss for Language Image Pre-Training" (ICCV 2023),
Eq. 1 and Algorithm 1: every pair of a ``[Q, C]`` score matrix is its own binary problem,
with label ``z = +1`` for a positive pair and ``-1`` otherwise, on the logit
``scale x S + bias``:

    L = -1/Q sum_{q, c} log sigmoid( z_qc (scale S_qc + bias) ).

The gradient is ``dL/dS_qc = -z_qc scale sigmoid(-z_qc (scale S_qc + bias)) / Q``: no softmax
couples the pairs, so a negative receives gradient in proportion to how far its logit sits on
the positive side, whatever the other negatives do. The paper's initialisation is
``scale = 10`` (``t' = log 10``) and ``bias = -10``. The loss has no direction: rows and columns
are read alike (``on_scores`` is called once, with ``"both"``).

Conventions as for :mod:`gradlab.functional.score_losses`: ``positives`` is a ``[Q, C]`` bool
mask or ``[B]`` labels of a square paired batch; an empty matrix and (``validate``) NaN,
infinite or overflowing scores raise a :class:`GradlabError`, in one host read.
"""

from __future__ import annotations

import numbers

import torch
import torch.nn.functional as F

from gradlab.errors import GradlabError
from gradlab.functional.precision import outside_autocast
from gradlab.functional.score_losses import (
    HALF_DTYPES,
    REDUCTIONS,
    ScoreCallback,
    _loss_mask,
    _one_sync,
    _returned_loss_fits,
    computed_dtype,
    score_bound,
    widened,
)
from gradlab.validation import check_in_range, refuse_learnable

__all__ = ["SIGLIP_BIAS", "SIGLIP_SCALE", "sigmoid_pair_loss"]

SIGLIP_SCALE = 10.0
"""SigLIP's initial scale ``t = exp(t')``, ``t' = log 10`` (Zhai et al., 2023, Algorithm 1)."""

SIGLIP_BIAS = -10.0
"""SigLIP's initial bias ``b`` (Zhai et al., 2023, Algorithm 1)."""

LARGEST_BIAS = 1e30
"""The largest ``|bias|`` accepted (larger ones overflow float32 next to the scores)."""

LARGEST_SCALE = 1e30
"""The largest ``scale`` accepted: larger ones overflow float32 next to cosine scores (a scale
beyond float32's range is ``inf`` there, and ``inf x 0`` a NaN logit)."""


LEARNABLE_SIGLIP = ("pass scale=1.0, bias=0.0 and the logits, loss(t * scores + b, positives), "
                    "as SigLIP learns t and b")
"""How a learnable SigLIP scale or bias is used (the refusal of a tensor says it)."""


def check_siglip_options(scale: object, bias: object, reduction: object) -> tuple[float, float]:
    """``scale`` (in ``(0, 1e30]``), ``bias`` (finite, ``|bias| <= 1e30``) and ``reduction``.

    Example:
        >>> check_siglip_options(10, -10, "mean")
        (10.0, -10.0)
    """
    for name, value in (("scale", scale), ("bias", bias)):
        refuse_learnable(name, value, LEARNABLE_SIGLIP)
    allowed = (f"scale must be a positive finite number at most {LARGEST_SCALE:g} (larger "
               f"scales overflow float32 next to the scores); got {scale!r}")  # fmt: skip
    if isinstance(scale, bool) or not isinstance(scale, numbers.Real):
        raise GradlabError(allowed)
    if not 0 < float(scale) <= LARGEST_SCALE:  # False for NaN too
        raise GradlabError(allowed)
    scale = float(scale)
    bias = check_in_range("bias", bias, -LARGEST_BIAS, LARGEST_BIAS)
    if reduction not in REDUCTIONS:
        raise GradlabError(f"reduction must be one of {REDUCTIONS}; got {reduction!r}")
    return scale, bias


def _sigmoid_loss_value(
    scores: torch.Tensor, mask: torch.Tensor, scale: float, bias: float, reduction: str
) -> torch.Tensor:
    """:func:`sigmoid_pair_loss` in float32, detached: the value a half-precision call must fit
    (a bound such as ``|t s + b| + ln 2`` per pair is loose by the many negatives' logits)."""
    logits = scores.detach().float() * scale + bias
    total = F.softplus(torch.where(mask, -logits, logits)).sum()  # -log sigmoid(z x)
    return total if reduction == "sum" else total / scores.shape[0]


@outside_autocast
def sigmoid_pair_loss(
    scores: torch.Tensor,
    positives: torch.Tensor,
    scale: float = SIGLIP_SCALE,
    bias: float = SIGLIP_BIAS,
    *,
    reduction: str = "mean",
    on_scores: ScoreCallback | None = None,
    validate: bool = True,
) -> torch.Tensor:
    """SigLIP's sigmoid loss on a score matrix (Zhai et al. 2023, Eq. 1).

    Args:
        scores: ``[Q, C]`` float scores ``S`` (cosine similarities for the usual scale).
        positives: ``[Q, C]`` bool mask (``z = +1``), or ``[B]`` labels of a square batch.
        scale: ``t`` in the paper, in ``(0, 1e30]``.
        bias: ``b`` in the paper, finite.
        reduction: ``"mean"`` divides the sum over all pairs by ``Q`` (the paper's ``1/|B|``),
            ``"sum"`` does not.
        on_scores: optional ``(direction, alias, mask)`` callback, called with ``"both"``.
        validate: refuse NaN/inf scores and scores whose summed logits overflow the dtype
            they are computed in: every ``|s|`` must be at most ``(max / (4 Q C) - |b|) / t``,
            ``max`` the largest finite value of that dtype (float32 for half-precision scores),
            so that the sum of the ``Q C`` pairs' losses stays within half of it (a bias that
            alone reaches ``max / (4 Q C)`` is refused by name). Half-precision
            scores (the loss is computed in float32 and returned in their dtype) must also keep
            the loss within their dtype (checked in the same host read).

    Returns:
        A 0-d tensor.

    Raises:
        GradlabError: a bad argument, an empty score matrix, or (``validate``) bad scores.

    Example:
        >>> import torch
        >>> from gradlab.functional import sigmoid_pair_loss
        >>> scores = torch.tensor([[1.0, 0.0], [0.0, 1.0]])
        >>> eye = torch.eye(2, dtype=torch.bool)
        >>> loss = sigmoid_pair_loss(scores, eye, scale=1.0, bias=0.0)  # log(1 + e^-1) + log 2
        >>> round(loss.item(), 4)
        1.0064
    """
    mask = _loss_mask(scores, positives)
    scale, bias = check_siglip_options(scale, bias, reduction)
    if on_scores is not None and not callable(on_scores):
        raise GradlabError(f"on_scores must be None or a callable; got {on_scores!r}")
    computed_in = computed_dtype(scores.dtype)  # half precision: the logits are float32's
    bound = score_bound(computed_in, scores.shape[0] * scores.shape[1], abs(bias), scale,
                        "|bias|", f"the sum over every pair of |scale x s + bias| must fit "
                        f"{computed_in}")  # fmt: skip
    fits = None
    if scores.dtype in HALF_DTYPES:  # computed in float32, returned in the scores' dtype
        weight = 1.0 if reduction == "sum" else 1.0 / max(1, scores.shape[0])
        fits = _returned_loss_fits(
            scores, lambda: _sigmoid_loss_value(scores, mask, scale, bias, reduction),
            f"the loss itself in float32, reduction={reduction!r}",
            # |dL/dS| = scale x sigmoid(-z (t s + b)) x weight <= scale x weight
            lambda: torch.tensor(scale * weight, dtype=torch.float32, device=scores.device),
            "scale" + (" / the rows" if reduction == "mean" else ""),
        )  # fmt: skip
    _one_sync(scores, mask, "both", validate, False,
              bound, fits)  # fmt: skip
    dtype, scores = scores.dtype, widened(scores)  # half precision: computed in float32
    alias = scores.view_as(scores)  # always made: the same graph with and without on_scores
    if on_scores is not None:
        on_scores("both", alias, mask)
    signs = torch.where(mask, 1.0, -1.0)  # +-1 in any dtype: promotion does the rest
    total = -F.logsigmoid(signs * (scale * alias + bias)).sum()
    return (total if reduction == "sum" else total / scores.shape[0]).to(dtype)
