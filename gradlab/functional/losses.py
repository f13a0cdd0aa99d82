"""Loss values from embeddings: the one call each ``nn.Module`` wrapper in gradlab.losses makes.

**Recording.** Inside ``with recording() as records:``, each SmoothAP loss call appends a
:class:`LossRecord`: the ``[Q, C]`` score matrix it differentiated (still in the autograd graph,
so a hook on it reads ``dL/dS``), its masks, and the ranks ``A`` and ``C`` its forward computed.
The Monitor enters it on logged steps and reuses those values instead of recomputing them
(docs/design.md, "Performance model"). Outside the context nothing is kept and nothing is paid.
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
from gradlab.functional.precision import outside_autocast, scores_made_from
from gradlab.functional.smooth_ap import (
    DEFAULT_CHUNK_ELEMENTS,
    PositiveGroup,
    check_smooth_ap_inputs,
    smooth_ap_checked,
)
from gradlab.validation import (
    check_bool,
    check_optional_callable,
    check_real_device,
    check_same_device,
    check_shape,
    check_temperature,
    check_tensor,
    count_noun,
)


class SmoothAPForward(NamedTuple):
    """What SmoothAP's forward computed, detached: groups and the ranks of every positive.

    Attributes:
        groups: the :class:`~gradlab.functional.smooth_ap.PositiveGroup` list of the call.
        ranks: one ``(A, C)`` pair of ``[G, n]`` tensors per group: ``A_i = R(i, S_P)`` and
            ``C_i = R(i, S_Omega) - A_i`` (Bleeker & de Rijke 2022, App. A, Eq. 1-2).
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
        labels: in-batch, the ``[B]`` labels tensor the call was given (the object itself,
            not a copy: a reader holding the same object may take ``positives`` and
            ``candidate_mask`` as its masks of those labels); ``None`` cross-modal.
        embeddings: the embeddings (queries) tensor the call was given, the object itself: a
            reader holding it knows that ``scores`` are its cosine scores (a loss that calls
            SmoothAP on a projection of its input records the projection's).
        candidates: cross-modal, the candidates tensor the call was given; ``None`` in-batch.
    """

    scores: torch.Tensor
    positives: torch.Tensor
    candidate_mask: torch.Tensor | None
    tau: float
    include_query: bool
    in_batch: bool
    forward: SmoothAPForward | None
    labels: torch.Tensor | None = None
    embeddings: torch.Tensor | None = None
    candidates: torch.Tensor | None = None


_RECORDS: ContextVar[list[LossRecord] | None] = ContextVar("gradlab_loss_records", default=None)


@contextmanager
def recording() -> Iterator[list[LossRecord]]:
    """Collect a :class:`LossRecord` for every gradlab loss call made inside the block.

    Blocks nest: an outer block also receives the records of an inner one when it ends (two
    Monitors watching one loss, one through the other, both read its call).

    Example:
        >>> emb = torch.tensor([[1.0, 0.1], [0.9, 0.0], [0.0, 1.0], [0.1, 0.9]])
        >>> with recording() as records:
        ...     loss = smooth_ap_loss(emb, torch.tensor([0, 0, 1, 1]))
        >>> len(records), records[0].scores.shape, len(records[0].forward.groups)
        (1, torch.Size([4, 4]), 1)
    """
    records: list[LossRecord] = []
    outer = _RECORDS.get()
    token = _RECORDS.set(records)
    try:
        yield records
    finally:
        _RECORDS.reset(token)
        if outer is not None:
            outer.extend(records)


def mean_ap_loss(
    ap: torch.Tensor, reference: torch.Tensor, defined: torch.Tensor | None = None
) -> torch.Tensor:
    """``1 - mean AP`` over the queries that have a positive.

    ``defined`` is the ``[Q]`` bool mask of the queries that have a positive. Give it whenever
    it is known: a query that has a positive but a NaN AP (a NaN embedding under
    ``validate=False``, an overflow) then makes the loss NaN instead of leaving the mean
    silently. ``None`` takes the queries whose AP is not NaN (NaN marks "no positive").

    When no query has a positive the loss is a zero attached to ``reference``'s graph, so
    ``backward()`` works and every gradient is zero. No value is read back to the host (no
    masked indexing, no ``bool()``): the mean is a masked sum over a count, on the device.

    Example:
        >>> import torch
        >>> from gradlab.functional import mean_ap_loss
        >>> ap = torch.tensor([0.5, float("nan"), 1.0])
        >>> mean_ap_loss(ap, torch.zeros(1))
        tensor(0.2500)
        >>> mean_ap_loss(ap, torch.zeros(1), defined=torch.tensor([True, True, True]))
        tensor(nan)

    Raises:
        GradlabError: ``ap`` not a 1-D floating tensor, ``reference`` not a tensor, or
            ``defined`` not a bool tensor of ``ap``'s shape on its device (no value is read).
    """
    check_tensor("ap", ap, ndims=(1,), kind="float")
    if not isinstance(reference, torch.Tensor):
        raise GradlabError("reference must be a torch.Tensor (a zero loss joins its graph); got "
                           f"{type(reference).__name__}")  # fmt: skip
    if defined is not None:
        check_tensor("defined", defined, ndims=(1,), kind="bool")
        check_shape("defined", defined, ap.shape, "[Q], one flag per AP")
        check_same_device(ap=ap, defined=defined)
    return _mean_ap_loss(ap, reference, defined)


def _mean_ap_loss(
    ap: torch.Tensor, reference: torch.Tensor, defined: torch.Tensor | None
) -> torch.Tensor:
    """:func:`mean_ap_loss` of the losses' own tensors, unchecked (each call of a loss would
    pay the checks again)."""
    if defined is None:
        defined = ~torch.isnan(ap)
    count = defined.sum()
    total = torch.where(defined, ap, torch.zeros_like(ap)).sum()
    loss = torch.where(count > 0, 1.0 - total / count.clamp(min=1), torch.zeros_like(total))
    if not loss.requires_grad and reference.requires_grad:
        loss = loss + reference.flatten()[:0].sum()  # 0 on the graph, whatever its values
    return loss


CROSS_MODAL_CALL = "loss(queries, candidates=candidates, positives=positives)"
"""The cross-modal keyword form, as error messages show it."""


def check_call_form(
    name: str,
    labels: object,
    extra: tuple,
    candidates: object,
    positives: object,
    cross_modal: bool = True,
) -> bool:
    """Which form a loss was called in: ``True`` in-batch, ``False`` cross-modal; else raise.

    The in-batch form is ``loss(embeddings, labels)``; the cross-modal form passes
    ``candidates`` and ``positives`` by keyword (never a third positional argument).

    Args:
        name: the loss's name, for the message.
        labels: the second positional argument (``None`` when not given).
        extra: positional arguments after the second.
        candidates: the ``candidates`` keyword (``None`` when not given).
        positives: the ``positives`` keyword (``None`` when not given).
        cross_modal: whether the loss has a cross-modal form.

    Raises:
        GradlabError: naming what was passed and the forms that are allowed.

    Example:
        >>> check_call_form("SmoothAPLoss", torch.zeros(2), (), None, None)
        True
        >>> check_call_form("SmoothAPLoss", None, (), torch.zeros(2, 3), torch.eye(2) > 0)
        False
    """
    forms = "loss(embeddings, labels)" + (f" or {CROSS_MODAL_CALL}" if cross_modal else "")
    if extra:
        count = count_noun(2 + len(extra), "positional argument")
        hint = (" (cross-modal: pass candidates and positives by keyword)" if cross_modal
                else "")  # fmt: skip
        raise GradlabError(f"{name} takes {forms}; got {count}{hint}")
    keywords = [key for key, value in (("candidates", candidates), ("positives", positives))
                if value is not None]  # fmt: skip
    if not keywords:
        if labels is None:
            raise GradlabError(f"{name} takes {forms}; labels is missing")
        if isinstance(labels, torch.Tensor) and labels.dim() == 2:  # another form's tensors
            if labels.dtype == torch.bool:
                raise GradlabError(
                    f"{name} takes {forms}; got a [Q, C] bool mask where labels go: it takes "
                    "embeddings, not a score matrix and its positives (gradlab's losses on a "
                    "score matrix, such as NTXentLoss, take those)"
                )
            if labels.is_floating_point():
                hint = (" (cross-modal: pass candidates and positives by keyword)" if cross_modal
                        else ": it has no cross-modal form (its functional core is in-batch "
                        "retrieval)")  # fmt: skip
                raise GradlabError(f"{name} takes {forms}; got a [C, d] float tensor where "
                                   f"labels go{hint}")  # fmt: skip
        return True
    if not cross_modal:
        raise GradlabError(
            f"{name} takes {forms}: it has no cross-modal form (its functional core is "
            f"in-batch retrieval); got {' and '.join(keywords)}"
        )
    if labels is not None:
        raise GradlabError(
            f"{name} takes labels (in-batch) or candidates and positives (cross-modal), not "
            f"both; got labels and {' and '.join(keywords)}"
        )
    if len(keywords) == 1:
        missing = "positives" if keywords == ["candidates"] else "candidates"
        raise GradlabError(f"{name}'s cross-modal form {CROSS_MODAL_CALL} needs {missing} too")
    return False


def has_ranking_signal(labels: torch.Tensor) -> torch.Tensor:
    """0-d bool on ``labels``' device: some item has both a positive and a negative in-batch.

    An item has a positive when another item shares its label and a negative when some item
    does not; reads nothing back (the caller puts the flag into its one host read).

    Example:
        >>> has_ranking_signal(torch.tensor([0, 0, 1])), has_ranking_signal(torch.arange(3))
        (tensor(True), tensor(False))
    """
    counts = (labels.unsqueeze(0) == labels.unsqueeze(1)).sum(dim=1)
    return ((counts >= 2) & (counts < labels.shape[0])).any()


@outside_autocast
def smooth_ap_loss(
    embeddings: torch.Tensor,
    labels: torch.Tensor | None = None,
    *extra: object,
    candidates: torch.Tensor | None = None,
    positives: torch.Tensor | None = None,
    tau: float = 0.01,
    include_query: bool = False,
    validate: bool = True,
    on_degenerate: Callable[[], None] | None = None,
    name: str = "smooth_ap_loss",
) -> torch.Tensor:
    """``1 - mean smooth AP``, in-batch or cross-modal (Brown et al., 2020, Eq. 1).

    ``smooth_ap_loss(embeddings, labels)`` ranks every item of the batch against the others;
    ``smooth_ap_loss(queries, candidates=candidates, positives=positives)`` ranks ``queries
    [Q, d]`` against ``candidates [C, d]`` with a ``[Q, C]`` bool positive mask (by keyword
    only). In-batch, each item is left out of its own ranking (Brown et al., 2020, Eq. 1);
    ``include_query=True`` keeps it as a candidate and as its own positive, as the official
    Smooth-AP code and pytorch-metric-learning do.

    One host synchronisation per call (the group sizes); ``validate`` checks that the
    embeddings are finite within it (``False`` skips the check). ``on_degenerate`` is called
    when no query has both a positive (besides itself with ``include_query``) and a negative:
    the loss is then constant (0) with zero gradients, except with ``include_query`` on a batch
    of one item per class, where each query's one positive is itself, ranked against the others
    (a loss and a gradient that pull no two items together). The group sizes already on the
    host tell it, so it costs no synchronisation. ``name`` names the caller in error messages.

    Raises:
        GradlabError: on a call in neither form (``labels`` together with ``candidates`` or
            ``positives``, one of ``candidates`` and ``positives`` without the other, or none
            of the three), bad tensors, or ``include_query=True`` in a cross-modal call (its
            queries are no candidates).

    Example:
        >>> import torch
        >>> from gradlab.functional import smooth_ap_loss
        >>> emb = torch.tensor([[1.0, 0.1], [0.9, 0.0], [0.0, 1.0], [0.1, 0.9]])
        >>> round(smooth_ap_loss(emb, torch.tensor([0, 0, 1, 1])).item(), 4)
        0.0
        >>> images, captions = emb[:2], emb[2:]  # image 0 ranks its caption second: AP 1/2
        >>> round(smooth_ap_loss(images, candidates=captions, positives=torch.eye(2) > 0).item(), 4)
        0.25
    """
    include_query = check_bool("include_query", include_query)
    validate = check_bool("validate", validate)
    tau = check_temperature("tau", tau)  # before the scores are made: a [Q, C] product
    check_optional_callable("on_degenerate", on_degenerate)
    if extra and isinstance(extra[0], (int, float)) and not isinstance(extra[0], bool):
        raise GradlabError(  # smooth_ap(scores, positives, tau) takes it third
            f"{name} takes tau by keyword: {name}(embeddings, labels, tau={extra[0]!r}); got "
            f"{count_noun(2 + len(extra), 'positional argument')}, the third {extra[0]!r}")
    in_batch = check_call_form(name, labels, extra, candidates, positives)
    if include_query and not in_batch:  # no query is a candidate of its own there
        raise GradlabError(
            f"{name}: include_query=True applies only to the in-batch form, loss(embeddings, "
            "labels), where each query is one of its own candidates; the cross-modal form "
            "ranks queries against separate candidates: pass include_query=False for it"
        )
    check_real_device(embeddings=embeddings, labels=labels, candidates=candidates,
                      positives=positives)  # fmt: skip
    if in_batch:
        scores, positives, candidate_mask = in_batch_layout(
            embeddings, labels, include_query=include_query, validate=False
        )
        finite = {"embeddings": embeddings}
    else:
        scores = cross_modal_layout(embeddings, candidates, positives, validate=False)
        candidate_mask = None
        finite = {"queries": embeddings, "candidates": candidates}
    tau = check_smooth_ap_inputs(scores, positives, candidate_mask, tau)
    records = _RECORDS.get()
    stash: list = []  # the groups (always: they give the queries that have a positive)
    with scores_made_from(" and ".join(finite)):  # a half refusal names what was passed
        ap = smooth_ap_checked(
            scores,
            positives,
            tau,
            candidate_mask,
            budget=DEFAULT_CHUNK_ELEMENTS,
            finite=finite if validate else None,
            stash=stash,
            ranks_needed=records is not None,
            averaged=True,
        )
    groups = stash[0][0]
    if records is not None:
        # positives are candidates already: in-batch without the query, in_batch_layout leaves
        # the diagonal (the one entry not a candidate) out of both masks
        forward = SmoothAPForward(*stash[0])
        records.append(LossRecord(scores, positives, candidate_mask, tau, include_query,
                                  in_batch, forward, labels if in_batch else None, embeddings,
                                  None if in_batch else candidates))  # fmt: skip
    if on_degenerate is not None:
        query_is_positive = include_query and in_batch
        per_query = scores.shape[1] - int(in_batch and not include_query)
        if no_ranking_signal(groups, per_query, query_is_positive):
            on_degenerate()
    has_positive = torch.zeros(scores.shape[0], dtype=torch.bool, device=scores.device)
    for group in groups:  # O(Q): no second [Q, C] mask; a fill, not a copy of a host True
        has_positive.index_fill_(0, group.queries, True)
    return _mean_ap_loss(ap, scores, has_positive)


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


@outside_autocast
def fastap_loss(
    embeddings: torch.Tensor, labels: torch.Tensor, num_bins: int = 10, *, validate: bool = True
) -> torch.Tensor:
    """``1 - mean FastAP`` of in-batch retrieval (see :func:`gradlab.functional.fastap`).

    Example:
        >>> import torch
        >>> from gradlab.functional import fastap_loss
        >>> emb = torch.tensor([[1.0, 0.0], [0.9, 0.1], [0.0, 1.0], [0.1, 0.9]])
        >>> fastap_loss(emb, torch.tensor([0, 0, 1, 1]))
        tensor(0.)
    """
    ap = fastap(embeddings, labels, num_bins, validate=validate)
    # a query with a positive and a negative: one of a batch of one class has no negative (its
    # AP is 1 up to the histogram's rounding, not exactly: the loss of such a batch is 0)
    counts = (labels.unsqueeze(0) == labels.unsqueeze(1)).sum(1)
    return _mean_ap_loss(ap, embeddings, (counts > 1) & (counts < labels.shape[0]))
