"""Retrieval evaluation: Recall@K and mean (tie-aware) AP, in-batch or cross-modal.

Scores are cosine similarities; in-batch every item queries all the others (never itself).
Relevance is a ``[Q, C]`` bool mask (shared labels in-batch).
"""

from __future__ import annotations

from collections.abc import Sequence

import torch
import torch.nn.functional as F

from gradlab.functional.layouts import drop_diagonal
from gradlab.functional.tie_aware import tie_aware_ap
from gradlab.validation import check_positive_int, check_shape, check_tensor


def recall_at_k(
    scores: torch.Tensor, positives: torch.Tensor, ks: Sequence[int] = (1, 2, 4, 8)
) -> dict[int, float]:
    """Share of queries with a positives item among their ``k`` best (queries with none skipped).

    Example:
        >>> scores = torch.tensor([[0.9, 0.1, 0.5], [0.2, 0.8, 0.3]])
        >>> positives = torch.tensor([[False, False, True], [False, True, False]])
        >>> recall_at_k(scores, positives, ks=(1, 2))
        {1: 0.5, 2: 1.0}
    """
    check_tensor("scores", scores, ndims=(2,), kind="float", finite=True)
    check_tensor("positives", positives, ndims=(2,), kind="bool")
    check_shape("positives", positives, scores.shape, "one flag per score")
    for k in ks:
        check_positive_int("k", k)
    has_positive = positives.any(dim=1)
    order = scores.argsort(dim=1, descending=True)
    ranked = positives.gather(1, order)[has_positive]
    return {k: ranked[:, :k].any(dim=1).double().mean().item() for k in ks}


def in_batch_retrieval(
    embeddings: torch.Tensor, labels: torch.Tensor
) -> tuple[torch.Tensor, torch.Tensor]:
    """``[N, N - 1]`` cosine scores and positives, each item querying all the others.

    Example:
        >>> scores, positives = in_batch_retrieval(torch.eye(3), torch.tensor([0, 0, 1]))
        >>> positives
        tensor([[ True, False],
                [ True, False],
                [False, False]])
    """
    check_tensor("embeddings", embeddings, ndims=(2,), kind="float", finite=True)
    check_shape("labels", labels, embeddings.shape[:1], "one label per embedding")
    normalized = F.normalize(embeddings.to(torch.float64), dim=1)
    scores = normalized @ normalized.T
    same = labels.unsqueeze(0) == labels.unsqueeze(1)
    return drop_diagonal(scores), drop_diagonal(same)


def retrieval_report(
    scores: torch.Tensor, positives: torch.Tensor, ks: Sequence[int] = (1, 2, 4, 8)
) -> dict:
    """Recall@K for each ``k`` and mAP (tie-aware AP averaged over queries with a positive).

    Example:
        >>> scores = torch.tensor([[0.9, 0.1, 0.5], [0.2, 0.8, 0.3]])
        >>> positives = torch.tensor([[False, False, True], [False, True, False]])
        >>> report = retrieval_report(scores, positives, ks=(1,))
        >>> {key: round(value, 4) for key, value in report.items()}
        {'recall@1': 0.5, 'mAP': 0.75}
    """
    recalls = recall_at_k(scores, positives, ks)
    ap = tie_aware_ap(scores, positives)
    return {**{f"recall@{k}": value for k, value in recalls.items()}, "mAP": ap.nanmean().item()}
