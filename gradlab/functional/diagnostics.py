"""Batch-level diagnostics of SmoothAP built from the functional pieces.

Everything here composes :mod:`gradlab.functional` (no new math): the decomposition of an
in-batch retrieval problem, and per-query summaries of its ``A*D`` and ``C*B`` terms.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F

from gradlab._validation import check_same_device, check_shape, check_tensor
from gradlab.functional.decomposition import SmoothAPDecomposition, smooth_ap_decomposition


def in_batch_decomposition(
    embeddings: torch.Tensor,
    labels: torch.Tensor,
    tau: float = 0.01,
    include_query: bool = False,
) -> SmoothAPDecomposition:
    """The ``AD - CB`` decomposition of every in-batch query (cosine scores).

    Queries and candidates are the L2-normalized embeddings; each query's gradient is taken
    with the candidates held fixed, as in seed 000. Without ``include_query`` a query is not
    its own candidate.

    Example:
        >>> emb = torch.randn(6, 4, dtype=torch.float64)
        >>> parts = in_batch_decomposition(emb, torch.tensor([0, 0, 1, 1, 2, 2]), tau=0.1)
        >>> parts.grad.shape
        torch.Size([6, 4])
    """
    check_tensor("embeddings", embeddings, ndims=(2,), kind="float", finite=True)
    check_tensor("labels", labels, ndims=(1,), kind="integer")
    check_shape("labels", labels, embeddings.shape[:1], "one label per embedding")
    check_same_device(embeddings=embeddings, labels=labels)
    normalized = F.normalize(embeddings, dim=1)
    positives = labels.unsqueeze(0) == labels.unsqueeze(1)
    mask = None
    if not include_query:
        mask = ~torch.eye(len(labels), dtype=torch.bool, device=labels.device)
    return smooth_ap_decomposition(normalized, normalized, positives, tau, candidate_mask=mask)


def decomposition_norms(parts: SmoothAPDecomposition) -> dict[str, torch.Tensor]:
    """Per-query norms of the two terms of ``dAP/dq`` and how they relate.

    Returns ``[Q]`` tensors (queries without positives dropped): ``ad_norm``, ``cb_norm``,
    ``grad_norm``, ``ad_share`` (``|AD| / (|AD| + |CB|)``, NaN when both vanish), ``ratio``
    (``|AD| / |CB|``) and ``cosine`` (between the two terms, NaN when either vanishes).

    Example:
        >>> emb = torch.randn(6, 4, dtype=torch.float64)
        >>> parts = in_batch_decomposition(emb, torch.tensor([0, 0, 1, 1, 2, 2]))
        >>> norms = decomposition_norms(parts)
        >>> sorted(norms)
        ['ad_norm', 'ad_share', 'cb_norm', 'cosine', 'grad_norm', 'ratio']
    """
    ad, cb, grad = parts.ad_term, parts.cb_term, parts.grad
    if ad.dim() == 1:
        ad, cb, grad = ad.unsqueeze(0), cb.unsqueeze(0), grad.unsqueeze(0)
    defined = ~torch.isnan(grad).any(dim=1)
    ad, cb, grad = ad[defined], cb[defined], grad[defined]
    ad_norm, cb_norm = ad.norm(dim=1), cb.norm(dim=1)
    both = ad_norm * cb_norm
    nan = torch.full_like(ad_norm, float("nan"))
    return {
        "ad_norm": ad_norm,
        "cb_norm": cb_norm,
        "grad_norm": grad.norm(dim=1),
        "ad_share": torch.where(ad_norm + cb_norm > 0, ad_norm / (ad_norm + cb_norm), nan),
        "ratio": torch.where(cb_norm > 0, ad_norm / cb_norm, nan),
        "cosine": torch.where(both > 0, (ad * cb).sum(dim=1) / both, nan),
    }
