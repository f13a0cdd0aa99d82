"""Loss values from embeddings: the one call each ``nn.Module`` wrapper in gradlab.losses makes.

**Recording.** Inside ``with recording() as records:``, each SmoothAP loss call appends a
:class:`LossRecord`: the ``[Q, C]`` score matrix it differentiated (still in the autograd graph,
so a hook on it reads ``dL/dS``), its masks, and the ranks ``A`` and ``C`` its forward computed.
The Monitor enters it on logged steps and reuses those values instead of recomputing them
(DESIGN.md, "Performance model"). Outside the context nothing is kept and nothing is paid.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from typing import NamedTuple

import torch

from gradlab.errors import GradlabError
from gradlab.functional.fastap import fastap
from gradlab.functional.layouts import cross_modal_layout, in_batch_layout
from gradlab.functional.smooth_ap import (
    DEFAULT_CHUNK_ELEMENTS,
    PositiveGroup,
    check_smooth_ap_inputs,
    smooth_ap_checked,
)
from gradlab.validation import count_noun


class SmoothAPForward(NamedTuple):
    """What SmoothAP's forward computed, detached: groups and the ranks of every positive.

    Attributes:
        groups: the :class:`~gradlab.functional.smooth_ap.PositiveGroup` list of the call.
        ranks: one ``(A, C)`` pair of ``[G, n]`` tensors per group: ``A_i = R(i, S_P)`` and
            ``C_i = R(i, S_Omega) - A_i`` (seed 000, Eq. 1-2).
    """

    groups: list[PositiveGroup]
    ranks: list[tuple[torch.Tensor, torch.Tensor]]


class LossRecord(NamedTuple):
    """One recorded loss call.

    Attributes:
        scores: ``[Q, C]`` the score matrix the loss differentiated, in the autograd graph.
        positives: ``[Q, C]`` bool, relevant candidates (the query itself excluded in-batch).
        candidate_mask: ``[Q, C]`` bool or ``None`` (see :mod:`gradlab.functional.layouts`).
        tau: the loss's temperature.
        include_query: in-batch layout with the query as its own candidate.
        in_batch: ``True`` for ``(embeddings, labels)``, ``False`` for cross-modal calls.
        forward: :class:`SmoothAPForward` (``None`` for a loss that has no ranks).
    """

    scores: torch.Tensor
    positives: torch.Tensor
    candidate_mask: torch.Tensor | None
    tau: float
    include_query: bool
    in_batch: bool
    forward: SmoothAPForward | None


_RECORDS: ContextVar[list[LossRecord] | None] = ContextVar("gradlab_loss_records", default=None)


@contextmanager
def recording() -> Iterator[list[LossRecord]]:
    """Collect a :class:`LossRecord` for every gradlab loss call made inside the block.

    Example:
        >>> emb = torch.tensor([[1.0, 0.1], [0.9, 0.0], [0.0, 1.0], [0.1, 0.9]])
        >>> with recording() as records:
        ...     loss = smooth_ap_loss(emb, torch.tensor([0, 0, 1, 1]))
        >>> len(records), records[0].scores.shape, len(records[0].forward.groups)
        (1, torch.Size([4, 4]), 1)
    """
    records: list[LossRecord] = []
    token = _RECORDS.set(records)
    try:
        yield records
    finally:
        _RECORDS.reset(token)


def mean_ap_loss(ap: torch.Tensor, reference: torch.Tensor) -> torch.Tensor:
    """``1 - mean AP`` over the queries that have a positive (AP not NaN).

    When no query has a positive the loss is a zero attached to ``reference``'s graph, so
    ``backward()`` works and every gradient is zero. No value is read back to the host (no
    masked indexing, no ``bool()``): the mean is a masked sum over a count, on the device.

    Example:
        >>> mean_ap_loss(torch.tensor([0.5, float("nan"), 1.0]), torch.zeros(1))
        tensor(0.2500)
    """
    defined = ~torch.isnan(ap)
    count = defined.sum()
    total = torch.where(defined, ap, torch.zeros_like(ap)).sum()
    loss = torch.where(count > 0, 1.0 - total / count.clamp(min=1), torch.zeros_like(total))
    if not loss.requires_grad and reference.requires_grad:
        loss = loss + reference.sum() * 0.0
    return loss


def smooth_ap_loss(
    *tensors: torch.Tensor,
    tau: float = 0.01,
    include_query: bool = False,
    validate: bool = True,
    on_degenerate: Callable[[], None] | None = None,
) -> torch.Tensor:
    """``1 - mean smooth AP`` of ``(embeddings, labels)`` or ``(queries, candidates, positives)``.

    See :mod:`gradlab.functional.layouts` for both layouts and ``include_query``. One host
    synchronisation per call (the group sizes); ``validate`` checks that the embeddings are
    finite within it (``False`` skips the check). ``on_degenerate`` is called when no query
    has both a positive (besides itself with ``include_query``) and a negative: the loss is
    then constant (0) with zero gradients. The group sizes already on the host tell it, so it
    costs no synchronisation.

    Example:
        >>> emb = torch.tensor([[1.0, 0.1], [0.9, 0.0], [0.0, 1.0], [0.1, 0.9]])
        >>> round(smooth_ap_loss(emb, torch.tensor([0, 0, 1, 1])).item(), 4)
        0.0
    """
    if len(tensors) == 2:
        in_batch = True
        scores, positives, candidate_mask = in_batch_layout(
            *tensors, include_query=include_query, validate=False
        )
        finite = {"embeddings": tensors[0]}
    elif len(tensors) == 3:
        in_batch = False
        scores = cross_modal_layout(*tensors, validate=False)
        positives, candidate_mask = tensors[2], None
        finite = {"queries": tensors[0], "candidates": tensors[1]}
    else:
        raise GradlabError(
            "SmoothAPLoss takes (embeddings, labels) or (queries, candidates, positives); "
            f"got {count_noun(len(tensors), 'argument')}"
        )
    tau = check_smooth_ap_inputs(scores, positives, candidate_mask, tau)
    records = _RECORDS.get()
    stash: list | None = [] if records is not None or on_degenerate is not None else None
    ap = smooth_ap_checked(
        scores,
        positives,
        tau,
        candidate_mask,
        budget=DEFAULT_CHUNK_ELEMENTS,
        finite=finite if validate else None,
        stash=stash,
    )
    if records is not None:
        if candidate_mask is not None:
            positives = positives & candidate_mask
        forward = SmoothAPForward(*stash[0])
        records.append(
            LossRecord(scores, positives, candidate_mask, tau, include_query, in_batch, forward)
        )
    if on_degenerate is not None:
        query_is_positive = include_query and in_batch
        per_query = scores.shape[1] - int(in_batch and not include_query)
        if no_ranking_signal(stash[0][0], per_query, query_is_positive):
            on_degenerate()
    return mean_ap_loss(ap, scores)


def no_ranking_signal(
    groups: list[PositiveGroup], candidates_per_query: int, query_is_positive: bool = False
) -> bool:
    """Whether no query has both a positive and a negative (AP is then constant: no gradient).

    ``groups`` are SmoothAP's queries grouped by positive count
    (:func:`~gradlab.functional.smooth_ap.group_by_positive_count`); a query has no positive
    when its count is 0 (1 with ``query_is_positive``: in-batch ``include_query=True``, where
    the query is its own positive) and no negative when its count is ``candidates_per_query``.
    Host-side: the groups' sizes are already known (no synchronisation).

    Example:
        >>> from gradlab.functional.smooth_ap import group_by_positive_count
        >>> eye = torch.eye(3, dtype=torch.bool)
        >>> no_ranking_signal(group_by_positive_count(torch.zeros(3, 4, dtype=torch.bool)), 4)
        True
        >>> no_ranking_signal(group_by_positive_count(eye), 3, query_is_positive=True)
        True
        >>> no_ranking_signal(group_by_positive_count(eye), 3)
        False
        >>> no_ranking_signal(group_by_positive_count(torch.ones(3, 2, dtype=torch.bool)), 2)
        True
    """
    useless = (int(query_is_positive), candidates_per_query)
    return all(
        group.num_positives <= useless[0] or group.num_positives >= useless[1] for group in groups
    )


def fastap_loss(embeddings: torch.Tensor, labels: torch.Tensor, num_bins: int = 10) -> torch.Tensor:
    """``1 - mean FastAP`` of in-batch retrieval (see :func:`gradlab.functional.fastap`)."""
    return mean_ap_loss(fastap(embeddings, labels, num_bins), embeddings)
