"""Thin ``nn.Module`` wrappers: validate in ``__init__``, forward is one call into functional."""

from __future__ import annotations

import warnings

import torch
from torch import nn

from gradlab.errors import GradlabError
from gradlab.functional.blackbox_ap import blackbox_ap_loss
from gradlab.functional.fappy import check_normalization, fappy_deltas, fappy_loss
from gradlab.functional.losses import fastap_loss, smooth_ap_loss
from gradlab.functional.score_losses import (
    DIRECTIONS,
    REDUCTIONS,
    max_violation_triplet_loss,
    nt_xent_loss,
)
from gradlab.validation import (
    ScoreRecorderSlot,
    check_non_negative_finite,
    check_positive_finite,
    check_positive_int,
)


class DegenerateBatchWarning(UserWarning):
    """A loss got a batch in which no query has a positive: its value is 0, its gradient 0."""


class _WarnsOnDegenerateBatch(nn.Module):
    """Counts batches without ranking signal in ``degenerate_batches``; warns on the first.

    The one mechanism of every gradlab loss module: the functional loss calls
    ``self._on_degenerate`` from its single host read (no extra synchronisation), and the first
    call per instance raises a :class:`DegenerateBatchWarning` with ``_DEGENERATE_MESSAGE``.
    """

    _DEGENERATE_MESSAGE = (
        "no query in this batch has both a positive and a negative, so the loss has no ranking "
        "signal; check the sampler or the positive mask. Warned once per loss instance; "
        "loss.degenerate_batches counts such batches."
    )

    def __init__(self) -> None:
        super().__init__()
        self.degenerate_batches = 0

    def _on_degenerate(self) -> None:
        self.degenerate_batches += 1
        if self.degenerate_batches == 1:
            warnings.warn(
                f"{type(self).__name__}: {self._DEGENERATE_MESSAGE}",
                DegenerateBatchWarning,
                stacklevel=6,  # the caller's line (functional loss, forward, nn.Module.__call__)
            )


class SmoothAPLoss(_WarnsOnDegenerateBatch):
    """``1 - mean smooth AP`` (Brown et al., ECCV 2020; seed 000 Eq. 1, seed 002 Table S1).

    Call it two ways:

    * ``loss(embeddings, labels)``: in-batch retrieval with cosine similarity; every item
      queries all the others (see :mod:`gradlab.functional.layouts` for ``include_query``).
    * ``loss(queries, candidates, positives)``: cross-modal retrieval with a ``[Q, C]`` bool
      positive mask.

    Queries without a positive (a singleton class, a caption with no image) are left out of
    the mean. A batch in which no query has both a positive and a negative (an empty batch,
    all-singleton labels, a single-class batch) gives a loss of 0 with zero gradients. That is
    usually a sampler bug, so the first such batch raises a :class:`DegenerateBatchWarning`
    (a ``UserWarning``, once per loss instance; silence it with
    ``warnings.filterwarnings("ignore", category=DegenerateBatchWarning)``) and every such
    batch is counted in ``loss.degenerate_batches``, which a :class:`gradlab.Monitor` logs.

    Args:
        tau: sigmoid temperature, positive and finite (the paper uses 0.01).
        include_query: in-batch only; count the query as its own candidate and positive, as
            the official Smooth-AP code and pytorch-metric-learning do.
        validate: refuse NaN/inf embeddings. The check shares the call's single host
            synchronisation (the group sizes), so it costs no extra sync; ``False`` skips it.

    Example:
        >>> loss_fn = SmoothAPLoss(tau=0.01)
        >>> emb = torch.tensor([[1.0, 0.1], [0.9, 0.0], [0.0, 1.0], [0.1, 0.9]])
        >>> round(loss_fn(emb, torch.tensor([0, 0, 1, 1])).item(), 4)
        0.0
    """

    def __init__(
        self, tau: float = 0.01, include_query: bool = False, validate: bool = True
    ) -> None:
        super().__init__()
        self.tau = check_positive_finite("tau", tau)
        if not isinstance(include_query, bool):
            raise GradlabError(f"include_query must be a bool; got {include_query!r}")
        if not isinstance(validate, bool):
            raise GradlabError(f"validate must be a bool; got {validate!r}")
        self.include_query = include_query
        self.validate = validate

    def forward(self, *tensors: torch.Tensor) -> torch.Tensor:
        return smooth_ap_loss(
            *tensors, tau=self.tau, include_query=self.include_query, validate=self.validate,
            on_degenerate=self._on_degenerate,
        )  # fmt: skip

    _DEGENERATE_MESSAGE = (
        "no query in this batch has both a positive and a negative (an empty batch, one item "
        "per class, or a single class), so the loss has no ranking signal (0, with a zero "
        "gradient); check the sampler (a batch needs two or more items of a class and another "
        "class). Warned once per loss instance; loss.degenerate_batches counts such batches."
    )

    def extra_repr(self) -> str:
        return f"tau={self.tau}, include_query={self.include_query}"


class FAPPYLoss(nn.Module):
    """FAPPY, the multi-scale false-positive-probability loss (seed 004, Algorithm 1).

    ``loss(embeddings, labels)``; cosine similarities, scales 2.0 halving down to ``delta_min``.
    ``normalization="paper"`` (default) divides each scale's sum by all positive pairs as
    Algorithm 1 prints it; ``"official"`` divides the running loss by the scale's active pairs as
    the authors' Caffe layer does.

    Example:
        >>> FAPPYLoss(delta_min=0.01).deltas[:3]
        [2.0, 1.0, 0.5]
    """

    def __init__(self, delta_min: float = 0.01, normalization: str = "paper") -> None:
        super().__init__()
        self.delta_min = check_positive_finite("delta_min", delta_min)
        self.deltas = fappy_deltas(self.delta_min)
        self.normalization = check_normalization(normalization)

    def forward(self, embeddings: torch.Tensor, labels: torch.Tensor) -> torch.Tensor:
        return fappy_loss(embeddings, labels, self.delta_min, self.normalization)

    def extra_repr(self) -> str:
        return f"delta_min={self.delta_min}, normalization={self.normalization!r}"


class FastAPLoss(nn.Module):
    """``1 - mean FastAP`` (Cakir et al., CVPR 2019) with ``num_bins`` distance bins.

    Example:
        >>> FastAPLoss(num_bins=10)
        FastAPLoss(num_bins=10)
    """

    def __init__(self, num_bins: int = 10) -> None:
        super().__init__()
        self.num_bins = check_positive_int("num_bins", num_bins)

    def forward(self, embeddings: torch.Tensor, labels: torch.Tensor) -> torch.Tensor:
        return fastap_loss(embeddings, labels, self.num_bins)

    def extra_repr(self) -> str:
        return f"num_bins={self.num_bins}"


class BlackboxAPLoss(nn.Module):
    """``1 - mean AP`` with blackbox-differentiated ranks (Rolinek et al., CVPR 2020).

    Defaults from seed 002: ``interpolation`` (lambda) 4, ``margin`` 0.02.

    Example:
        >>> BlackboxAPLoss()
        BlackboxAPLoss(interpolation=4.0, margin=0.02)
    """

    def __init__(self, interpolation: float = 4.0, margin: float = 0.02) -> None:
        super().__init__()
        self.interpolation = check_positive_finite("interpolation", interpolation)
        self.margin = check_non_negative_finite("margin", margin)

    def forward(self, embeddings: torch.Tensor, labels: torch.Tensor) -> torch.Tensor:
        return blackbox_ap_loss(embeddings, labels, self.interpolation, self.margin)

    def extra_repr(self) -> str:
        return f"interpolation={self.interpolation}, margin={self.margin}"


class _ScoreMatrixLoss(ScoreRecorderSlot, _WarnsOnDegenerateBatch):
    """Base of the losses called as ``loss(scores, positives)`` on a ``[Q, C]`` score matrix.

    ``score_recorder`` is ``None`` or a ``(direction, scores_alias, positives_mask)`` callable;
    a :class:`gradlab.Monitor` that watches the loss sets it on logged steps to read each
    direction's ``dL/dS`` (see :mod:`gradlab.functional.score_losses`). It never changes the
    loss value or its gradients.

    As with :class:`SmoothAPLoss`, a batch in which no query has both a positive and a negative
    raises a :class:`DegenerateBatchWarning` once per instance and is counted in
    ``degenerate_batches``; NaN/inf scores and an empty score matrix raise a
    :class:`GradlabError`. The finiteness check and the count share the call's one host read.
    Unlike SmoothAP these losses need no host read of their own, so ``validate=False`` makes
    the call read nothing back at all (for GPU pipelines): no finiteness check, and no
    degenerate-batch warning or count.
    """

    _recorder_signature = " (direction, scores, positives)"

    def __init__(self, direction: str, reduction: str, validate: bool = True) -> None:
        super().__init__()
        if direction not in DIRECTIONS:
            raise GradlabError(f"direction must be one of {DIRECTIONS}; got {direction!r}")
        if reduction not in REDUCTIONS:
            raise GradlabError(f"reduction must be one of {REDUCTIONS}; got {reduction!r}")
        self._set_validate(validate)
        self.direction = direction
        self.reduction = reduction
        self.score_recorder = None


class MaxViolationTripletLoss(_ScoreMatrixLoss):
    """VSE++'s max-violation triplet loss on a score matrix (Faghri et al. 2018, Eq. 5).

    ``loss(scores, positives)``: see :func:`gradlab.functional.max_violation_triplet_loss`.

    Example:
        >>> loss_fn = MaxViolationTripletLoss(margin=0.2)
        >>> scores = torch.tensor([[0.9, 0.8], [0.1, 0.5]])
        >>> round(loss_fn(scores, torch.eye(2, dtype=torch.bool)).item(), 4)
        0.3
    """

    def __init__(
        self,
        margin: float = 0.2,
        direction: str = "both",
        reduction: str = "mean",
        validate: bool = True,
    ) -> None:
        super().__init__(direction, reduction, validate)
        self.margin = check_non_negative_finite("margin", margin)

    def forward(self, scores: torch.Tensor, positives: torch.Tensor) -> torch.Tensor:
        return max_violation_triplet_loss(
            scores, positives, self.margin, direction=self.direction,
            reduction=self.reduction, on_scores=self.score_recorder, validate=self.validate,
            on_degenerate=self._on_degenerate if self.validate else None,
        )  # fmt: skip

    def extra_repr(self) -> str:
        return f"margin={self.margin}, direction={self.direction!r}, reduction={self.reduction!r}"


class NTXentLoss(_ScoreMatrixLoss):
    """NT-Xent / InfoNCE on a score matrix (Oord et al. 2018; SimCLR Eq. 1), several positives.

    ``loss(scores, positives)``: see :func:`gradlab.functional.nt_xent_loss`.

    Example:
        >>> loss_fn = NTXentLoss(temperature=1.0, direction="i2t")
        >>> scores = torch.tensor([[1.0, 0.0], [0.0, 1.0]])
        >>> round(loss_fn(scores, torch.eye(2, dtype=torch.bool)).item(), 4)
        0.3133
    """

    def __init__(
        self,
        temperature: float = 0.1,
        direction: str = "both",
        reduction: str = "mean",
        validate: bool = True,
    ) -> None:
        super().__init__(direction, reduction, validate)
        self.temperature = check_positive_finite("temperature", temperature)

    def forward(self, scores: torch.Tensor, positives: torch.Tensor) -> torch.Tensor:
        return nt_xent_loss(
            scores, positives, self.temperature, direction=self.direction,
            reduction=self.reduction, on_scores=self.score_recorder, validate=self.validate,
            on_degenerate=self._on_degenerate if self.validate else None,
        )  # fmt: skip

    def extra_repr(self) -> str:
        return (
            f"temperature={self.temperature}, direction={self.direction!r}, "
            f"reduction={self.reduction!r}"
        )
