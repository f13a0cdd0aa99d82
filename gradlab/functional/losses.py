"""Loss values from embeddings: the one call each ``nn.Module`` wrapper in gradlab.losses makes."""

from __future__ import annotations

import torch

from gradlab.errors import GradlabError
from gradlab.functional.fastap import fastap
from gradlab.functional.layouts import cross_modal_layout, in_batch_layout
from gradlab.functional.smooth_ap import smooth_ap


def mean_ap_loss(ap: torch.Tensor, reference: torch.Tensor) -> torch.Tensor:
    """``1 - mean AP`` over the queries that have a positive (AP not NaN).

    When no query has a positive the loss is a zero attached to ``reference``'s graph, so
    ``backward()`` works and every gradient is zero.

    Example:
        >>> mean_ap_loss(torch.tensor([0.5, float("nan"), 1.0]), torch.zeros(1))
        tensor(0.2500)
    """
    defined = ~torch.isnan(ap)
    if not bool(defined.any()):
        return reference.sum() * 0.0
    return 1.0 - ap[defined].mean()


def smooth_ap_loss(
    *tensors: torch.Tensor, tau: float = 0.01, include_query: bool = False
) -> torch.Tensor:
    """``1 - mean smooth AP`` of ``(embeddings, labels)`` or ``(queries, candidates, positives)``.

    See :mod:`gradlab.functional.layouts` for both layouts and ``include_query``.

    Example:
        >>> emb = torch.tensor([[1.0, 0.1], [0.9, 0.0], [0.0, 1.0], [0.1, 0.9]])
        >>> round(smooth_ap_loss(emb, torch.tensor([0, 0, 1, 1])).item(), 4)
        0.0
    """
    if len(tensors) == 2:
        scores, positives, candidates = in_batch_layout(*tensors, include_query=include_query)
    elif len(tensors) == 3:
        scores, positives, candidates = cross_modal_layout(*tensors), tensors[2], None
    else:
        raise GradlabError(
            "SmoothAPLoss takes (embeddings, labels) or (queries, candidates, positives); "
            f"got {len(tensors)} arguments"
        )
    return mean_ap_loss(smooth_ap(scores, positives, tau, candidates=candidates), scores)


def fastap_loss(embeddings: torch.Tensor, labels: torch.Tensor, num_bins: int = 10) -> torch.Tensor:
    """``1 - mean FastAP`` of in-batch retrieval (see :func:`gradlab.functional.fastap`)."""
    return mean_ap_loss(fastap(embeddings, labels, num_bins), embeddings)
