"""Retrieval evaluation: Recall@K and mean (tie-aware) AP, in-batch or cross-modal.

Scores are cosine similarities; in-batch every item queries all the others (never itself).
Relevance is a ``[Q, C]`` bool mask (shared labels in-batch).
"""

from __future__ import annotations

from collections.abc import Sequence

import torch

from gradlab.functional.layouts import drop_diagonal, unit_rows
from gradlab.functional.tie_aware import tie_aware_ap
from gradlab.validation import (
    check_bool,
    check_embeddings_and_labels,
    check_ks,
    check_same_device,
    check_shape,
    check_signed_scores,
    check_tensor,
)


def recall_at_k(
    scores: torch.Tensor, positives: torch.Tensor, ks: Sequence[int] = (1, 2, 4, 8)
) -> dict[int, float]:
    """Share of queries with a positive among their ``k`` best candidates, for each ``k``.

    Tied scores are ranked as :func:`~gradlab.functional.tie_aware_ap` ranks them: the value is
    the expectation over every ordering of the tied candidates (McSherry & Najork 2008), so a
    tie group that straddles the ``k``-th place counts a query by the probability that one of
    its positives lands in the group's first places (the hypergeometric ``1 - C(n - n+, m) /
    C(n, m)`` for ``m`` of its ``n`` places within the first ``k``, ``n+`` of them positive).
    Without ties this is the usual Recall@K; with them it neither depends on the sort's order
    of equal scores nor favours the lower columns (a collapsed model, every score equal, gets
    the chance value ``1 - C(C - n+, k) / C(C, k)``, not the luck of the column order).

    Args:
        scores: ``[Q, C]`` finite real or signed integer scores (larger ranks higher), as
            :func:`~gradlab.functional.tie_aware_ap` takes them (``-hamming`` distances, in a
            signed dtype: unsigned scores are refused, a negated ``uint8`` distance wraps
            around).
        positives: ``[Q, C]`` bool mask of the relevant candidates.
        ks: the ``k`` of each Recall@K, a non-empty sequence of positive integers (a ``k``
            at or beyond ``C`` sees every candidate).

    Returns:
        ``{k: recall}``, each a mean over the queries that have a positive (NaN when none
        has). The probabilities of a tie group come from ``lgamma`` in float64 (exact
        without ties).

    Raises:
        GradlabError: a bad tensor (unsigned scores included), shape or ``ks`` (before any
            work).

    Example:
        >>> import torch
        >>> from gradlab.functional import recall_at_k
        >>> scores = torch.tensor([[0.9, 0.1, 0.5], [0.2, 0.8, 0.3]])
        >>> positives = torch.tensor([[False, False, True], [False, True, False]])
        >>> recall_at_k(scores, positives, ks=(1, 2))
        {1: 0.5, 2: 1.0}
        >>> tied = recall_at_k(torch.zeros(1, 4), torch.tensor([[True, False, False, False]]))
        >>> round(tied[1], 12), round(tied[2], 12)  # one positive among 4 tied candidates
        (0.25, 0.5)
    """
    check_signed_scores("scores", scores, ndims=(2,))  # -distance in uint8: -1 is 255
    check_tensor("positives", positives, ndims=(2,), kind="bool")
    check_shape("positives", positives, scores.shape, "one flag per score")
    check_same_device(scores=scores, positives=positives)
    ks = check_ks(ks)
    has_positive = positives.any(dim=1)
    rows, flags = scores[has_positive], positives[has_positive]
    columns = rows.shape[1]
    ordered = rows.sort(dim=1, descending=True).values
    recalls = {}
    for k in ks:
        if k >= columns:  # every candidate is among the first k
            every = torch.ones(rows.shape[0], dtype=torch.float64, device=rows.device)
            recalls[k] = every.mean().item()  # NaN when no query has a positive
            continue
        kth = ordered[:, k - 1 : k]
        above, level = rows > kth, rows == kth
        places = (k - above.sum(dim=1)).to(torch.float64)  # the tie group's places within k
        tied = level.sum(dim=1).to(torch.float64)
        free = tied - (flags & level).sum(dim=1).to(torch.float64)  # its negatives
        # P(the first `places` of the group hold none of its positives) = C(free, places) /
        # C(tied, places), 0 when the group has fewer negatives than places
        enough = free >= places
        free = torch.where(enough, free, places)
        log_miss = (torch.lgamma(free + 1) - torch.lgamma(tied + 1)
                    + torch.lgamma(tied - places + 1)
                    - torch.lgamma(free - places + 1))  # fmt: skip
        in_group = torch.where(enough, -torch.expm1(log_miss), 1.0)  # 1 - miss, no cancellation
        hit = torch.where((flags & above).any(dim=1), 1.0, in_group)
        recalls[k] = hit.mean().item()
    return recalls


SCORE_GRID = 2.0**-36
"""The grid :func:`in_batch_retrieval` rounds its float64 cosines to: far above their rounding
(about ``d x 1.1e-16``), far below the differences a model's ranking rests on."""


def in_batch_retrieval(
    embeddings: torch.Tensor, labels: torch.Tensor, *, rounded: bool = True
) -> tuple[torch.Tensor, torch.Tensor]:
    """``[N, N - 1]`` cosine scores and positives, each item querying all the others.

    The cosines are computed in float64 and, for ranking, rounded to multiples of
    :data:`SCORE_GRID` (``2^-36``, about 1.5e-11): a product's rounding differs with the
    entry's place in the matrix and with the rows' norms, so rows pointing the same way (or
    orthogonal ones) got cosines some 1e-16 apart, whose order, not the model, decided their
    ranks (a collapsed model scored above chance). That rounding, at most about
    ``d x 1.1e-16`` for unit rows, lies far below the grid: such cosines tie, and the
    tie-aware metrics give the chance value, while cosines that differ by more than the grid
    (angles above about 5e-6 rad near a cosine of 1) keep their order. A true cosine within
    rounding of a point halfway between two grid values can still fall either way (the grid's
    own points, 0 and +-1 among them, are safe).

    Args:
        embeddings: ``[N, d]`` finite floating embeddings (``d >= 1``).
        labels: ``[N]`` integer labels (the glossary's): two items are positives of each
            other when their labels are equal.
        rounded: round to the grid (ranking); False: the exact float64 cosines, for what is
            no ranking (the batch's geometry, a loss's gradient).

    Returns:
        ``(scores, positives)``, float64 cosines (on the grid when ``rounded``) and their bool
        mask, the diagonal dropped.

    Raises:
        GradlabError: a bad tensor, shape, dtype or device, NaN/inf embeddings, or a
            ``rounded`` that is no bool (before any work).

    Example:
        >>> import torch
        >>> from gradlab.functional import in_batch_retrieval
        >>> scores, positives = in_batch_retrieval(torch.eye(3), torch.tensor([0, 0, 1]))
        >>> positives
        tensor([[ True, False],
                [ True, False],
                [False, False]])
    """
    check_embeddings_and_labels(embeddings, labels, finite=True)
    rounded = check_bool("rounded", rounded)
    normalized = unit_rows(embeddings.to(torch.float64))
    scores = normalized @ normalized.T
    if rounded:
        scores = torch.round(scores / SCORE_GRID) * SCORE_GRID  # exact: a power of 2
    same = labels.unsqueeze(0) == labels.unsqueeze(1)
    return drop_diagonal(scores), drop_diagonal(same)


def retrieval_report(
    scores: torch.Tensor, positives: torch.Tensor, ks: Sequence[int] = (1, 2, 4, 8)
) -> dict:
    """Recall@K for each ``k`` and mAP, both tie-aware (:func:`recall_at_k`,
    :func:`~gradlab.functional.tie_aware_ap`), averaged over the queries with a positive.

    Example:
        >>> import torch
        >>> from gradlab.functional import retrieval_report
        >>> scores = torch.tensor([[0.9, 0.1, 0.5], [0.2, 0.8, 0.3]])
        >>> positives = torch.tensor([[False, False, True], [False, True, False]])
        >>> report = retrieval_report(scores, positives, ks=(1,))
        >>> {key: round(value, 4) for key, value in report.items()}
        {'recall@1': 0.5, 'mAP': 0.75}
    """
    recalls = recall_at_k(scores, positives, ks)
    ap = tie_aware_ap(scores, positives)
    return {**{f"recall@{k}": value for k, value in recalls.items()}, "mAP": ap.nanmean().item()}
