"""Thin ``nn.Module`` wrappers: validate in ``__init__``, forward is one call into functional."""

from __future__ import annotations

import torch
from torch import nn

from gradlab._validation import (
    check_non_negative_finite,
    check_positive_finite,
    check_positive_int,
)
from gradlab.errors import GradlabError
from gradlab.functional.blackbox_ap import blackbox_ap_loss
from gradlab.functional.fappy import fappy_deltas, fappy_loss
from gradlab.functional.losses import fastap_loss, smooth_ap_loss


class SmoothAPLoss(nn.Module):
    """``1 - mean smooth AP`` (Brown et al., ECCV 2020; seed 000 Eq. 1, seed 002 Table S1).

    Call it two ways:

    * ``loss(embeddings, labels)``: in-batch retrieval with cosine similarity; every item
      queries all the others (see :mod:`gradlab.functional.layouts` for ``include_query``).
    * ``loss(queries, candidates, positives)``: cross-modal retrieval with a ``[Q, C]`` bool
      positive mask.

    Queries without a positive (a singleton class, a caption with no image) are left out of
    the mean; a batch in which no query has a positive gives a loss of 0 with zero gradients.

    Args:
        tau: sigmoid temperature, positive and finite (the paper uses 0.01).
        include_query: in-batch only; count the query as its own candidate and positive, as
            the official Smooth-AP code and pytorch-metric-learning do.

    Example:
        >>> loss_fn = SmoothAPLoss(tau=0.01)
        >>> emb = torch.tensor([[1.0, 0.1], [0.9, 0.0], [0.0, 1.0], [0.1, 0.9]])
        >>> round(loss_fn(emb, torch.tensor([0, 0, 1, 1])).item(), 4)
        0.0
    """

    def __init__(self, tau: float = 0.01, include_query: bool = False) -> None:
        super().__init__()
        self.tau = check_positive_finite("tau", tau)
        if not isinstance(include_query, bool):
            raise GradlabError(f"include_query must be a bool; got {include_query!r}")
        self.include_query = include_query

    def forward(self, *tensors: torch.Tensor) -> torch.Tensor:
        return smooth_ap_loss(*tensors, tau=self.tau, include_query=self.include_query)

    def extra_repr(self) -> str:
        return f"tau={self.tau}, include_query={self.include_query}"


class FAPPYLoss(nn.Module):
    """FAPPY, the multi-scale false-positive-probability loss (seed 004, Algorithm 1).

    ``loss(embeddings, labels)``; cosine similarities, scales 2.0 halving down to ``delta_min``.

    Example:
        >>> FAPPYLoss(delta_min=0.01).deltas[:3]
        [2.0, 1.0, 0.5]
    """

    def __init__(self, delta_min: float = 0.01) -> None:
        super().__init__()
        self.delta_min = check_positive_finite("delta_min", delta_min)
        self.deltas = fappy_deltas(self.delta_min)

    def forward(self, embeddings: torch.Tensor, labels: torch.Tensor) -> torch.Tensor:
        return fappy_loss(embeddings, labels, self.delta_min)

    def extra_repr(self) -> str:
        return f"delta_min={self.delta_min}"


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
