"""Blackbox AP (Rolinek et al., CVPR 2020): exact ranks forward, interpolated ranks backward.

Forward: exact AP of each query from its exact ranks, after the *margin* shifts positive scores
down by ``margin`` (a positive must beat a negative by the margin to rank above it).
Backward: ranks are piecewise constant (true gradient zero almost everywhere), so the rank
function is differentiated by blackbox interpolation (Vlastelica et al., ICLR 2020): given the
incoming gradient ``g`` with respect to the ranks, the scores are perturbed to
``s' = s + lambda g`` and the returned gradient is ``-(rank(s) - rank(s')) / lambda``: the
gradient of a piecewise-linear interpolation of the loss, *not* of the forward function.

Ranks are computed by sorting, ``O(C log C)`` per query (Brown et al. 2020, suppl., Table S2:
``O(n log n)``).

**Second derivatives are refused.** The backward is not the derivative of the forward, so a
second derivative has no meaning: ``torch.autograd.grad(..., create_graph=True)`` through Blackbox
AP raises a :class:`GradlabError` naming ``create_graph`` (first derivatives are unaffected).
"""

from __future__ import annotations

import math
from collections.abc import Callable

import torch

from gradlab.errors import GradlabError
from gradlab.functional.precision import (
    gradient_overflow_message,
    outside_autocast,
    scores_made_from,
)
from gradlab.functional.score_losses import check_margin
from gradlab.validation import (
    check_bool,
    check_interpolation,
    check_optional_callable,
    check_real_device,
    check_same_device,
    check_shape,
    check_tensor,
    finite_flag,
    non_finite_message,
    refused_by_caller_name,
    value_checks_enabled,
)


def descending_ranks(scores: torch.Tensor) -> torch.Tensor:
    """1-based rank of each entry along the last axis, larger scores first (ties by index).

    Args:
        scores: a real tensor of at least one dimension, without NaN (a NaN has no rank; read
            back once to check, except inside :func:`gradlab.validation.skip_value_checks`).
            ``-inf`` and ``inf`` rank last and first.

    Returns:
        The ranks in ``scores``' shape: in its dtype for float32 and float64 scores, int64 for
        integer scores and float32 for float16 and bfloat16 ones (whose dtypes cannot count
        past 255 or 2048 exactly).

    Example:
        >>> import torch
        >>> from gradlab.functional import descending_ranks
        >>> descending_ranks(torch.tensor([0.1, 0.9, 0.5]))
        tensor([3., 1., 2.])
    """
    check_tensor("scores", scores, ndims=range(9), kind="any_real")
    if scores.dim() == 0:
        raise GradlabError("scores must have at least one dimension (the ranks run along the "
                           "last); got a 0-d tensor")  # fmt: skip
    check_real_device(scores=scores)
    if (value_checks_enabled() and scores.is_floating_point() and scores.numel()
            and bool(scores.isnan().any())):  # fmt: skip
        raise GradlabError("scores must not be NaN (a NaN has no rank); got NaN at "
                           f"{scores.isnan().nonzero()[0].tolist()}")  # fmt: skip
    # in a dtype that counts every position exactly (int8 stops at 127, float16 at 2048)
    wide = (scores.long() if not scores.is_floating_point()
            else scores.float() if scores.element_size() < 4 else scores)  # fmt: skip
    return _descending_ranks(wide)


def _descending_ranks(scores: torch.Tensor) -> torch.Tensor:
    """:func:`descending_ranks` of scores already checked (Blackbox AP's own)."""
    order = scores.argsort(dim=-1, descending=True, stable=True)
    ranks = torch.empty_like(scores)
    positions = torch.arange(1, scores.shape[-1] + 1, dtype=scores.dtype, device=scores.device)
    return ranks.scatter_(-1, order, positions.expand_as(scores).contiguous())


class BlackboxRanks(torch.autograd.Function):
    """Exact ranks forward; ``-(rank(s) - rank(s + lambda g)) / lambda`` backward.

    Example:
        >>> import torch
        >>> from gradlab.functional import BlackboxRanks
        >>> scores = torch.tensor([[0.2, 0.9, 0.5]], requires_grad=True)
        >>> ranks = BlackboxRanks.apply(scores, 4.0)
        >>> ranks.tolist()
        [[3.0, 1.0, 2.0]]
        >>> ranks[0, 0].backward()  # s + 4 g = [4.2, 0.9, 0.5] ranks [1, 2, 3]
        >>> scores.grad.tolist()  # -([3, 1, 2] - [1, 2, 3]) / 4
        [[-0.5, 0.25, 0.25]]
    """

    @staticmethod
    def forward(ctx, scores, interpolation):  # type: ignore[override]
        ranks = _descending_ranks(scores)
        ctx.interpolation = interpolation
        ctx.save_for_backward(scores, ranks)
        return ranks

    @staticmethod
    def backward(ctx, grad_ranks):  # type: ignore[override]
        if torch.is_grad_enabled():  # inside backward, grad mode is on exactly with create_graph
            raise GradlabError(
                "Blackbox AP has no second derivative: its backward is the blackbox "
                "interpolation (Vlastelica et al., 2020), not the derivative of a function, so "
                "torch.autograd.grad(..., create_graph=True) through it is refused; use "
                "create_graph=False, or SmoothAP or FastAP, whose second derivatives are exact"
            )
        scores, ranks = ctx.saved_tensors
        perturbed = _descending_ranks(scores + ctx.interpolation * grad_ranks)
        return -(ranks - perturbed) / ctx.interpolation, None


@outside_autocast
def blackbox_ap(
    scores: torch.Tensor,
    positives: torch.Tensor,
    interpolation: float = 4.0,
    margin: float = 0.02,
    *,
    candidate_mask: torch.Tensor | None = None,
) -> torch.Tensor:
    """Per-query AP with blackbox-differentiated ranks (defaults interpolation 4, margin 0.02).

    ``interpolation`` perturbs the scores for ranks counted ``1..C``. The authors' code
    (blackbox-backprop's ``TrueRanker``, used by Rolinek et al. 2020) ranks over ``C``,
    normalised to ``(0, 1]``: its ``lambda`` is ``interpolation = lambda * C`` here (``lambda = 4``
    on rows of 128 candidates: 512). The default 4 is ``lambda = 4 / C`` on the authors' scale.

    Args:
        scores: ``[Q, C]`` scores (larger ranks higher).
        positives: ``[Q, C]`` bool relevance.
        interpolation: lambda for integer ranks (the authors' lambda times ``C``), positive.
        margin: subtracted from positive scores before ranking, in ``[0, 1e30]`` (larger
            margins overflow float32).
        candidate_mask: optional ``[Q, C]`` bool; ``False`` leaves a column out of that
            query's ranking (neither positive nor negative, zero gradient), as a score of
            ``-inf`` does.

    Ties rank by column (the first column first), as the ranks of a sort do: with
    ``margin=0`` the AP of tied scores depends on their order in the row (one positive tied
    with three negatives: 1 in the first column, 1/4 in the last); the tie-aware AP
    (:func:`gradlab.functional.tie_aware_ap`, 0.52 there) is its expectation over the orders.

    Float16 and bfloat16 scores are ranked and differentiated in float32 (the same numbers,
    the same ranks; the backward's perturbed scores ``s + lambda g`` would round in half
    precision, to a zero gradient at small ``interpolation``) and the AP returned in their
    dtype. Float16 scores that require a gradient are refused when ``2 (C - 1) /
    interpolation``, the most ``|dAP/dS|`` can reach (tied scores), passes float16's 65504.

    Returns:
        ``[Q]`` AP (NaN for a query without positives). Its backward is the blackbox gradient;
        a query without negatives (every candidate positive; ``-inf`` marks a non-candidate)
        has AP 1 and a zero gradient. A non-candidate is neither positive nor negative, also
        where ``positives`` is ``True`` (as a ``False`` of ``candidate_mask`` is elsewhere).

    Example:
        >>> import torch
        >>> from gradlab.functional import blackbox_ap
        >>> s = torch.tensor([[0.9, 0.5, 0.7]])
        >>> blackbox_ap(s, torch.tensor([[True, False, True]]))
        tensor([1.])
    """
    check_tensor("scores", scores, ndims=(2,), kind="float")
    check_tensor("positives", positives, ndims=(2,), kind="bool")
    check_shape("positives", positives, scores.shape, "one flag per score")
    check_same_device(scores=scores, positives=positives)
    if candidate_mask is not None:
        check_tensor("candidate_mask", candidate_mask, ndims=(2,), kind="bool")
        check_shape("candidate_mask", candidate_mask, scores.shape, "one flag per score")
        check_same_device(scores=scores, candidate_mask=candidate_mask)
    interpolation = check_interpolation(interpolation)
    margin = check_margin(margin)
    check_real_device(scores=scores)  # the NaN check below reads values
    if bool(torch.isnan(scores).any()) or bool((scores == math.inf).any()):
        named = scores.detach().masked_fill(scores.detach() == -math.inf, 0.0)  # -inf is allowed
        raise GradlabError(non_finite_message("scores", named, " or -inf (a non-candidate)"))
    given = scores.dtype
    if given in (torch.float16, torch.bfloat16):  # exactly the same numbers, ranked alike
        if given == torch.float16 and scores.requires_grad and torch.is_grad_enabled():
            _check_half_gradient(interpolation, scores.shape[1])
        scores = scores.float()  # the backward's s + lambda g and its ranks in float32
    if candidate_mask is not None:  # a non-candidate is a -inf score (no gradient reaches it)
        scores = scores.masked_fill(~candidate_mask, -math.inf)
    # a -inf score marks a non-candidate: no positive (it tied with the negatives' -inf
    # placeholders below and ranked among them by column, an AP of 1/2 for 1/4)
    positives = positives & (scores > -math.inf)
    shifted = scores - margin * positives.to(scores.dtype)
    rank_all = BlackboxRanks.apply(shifted, interpolation)
    # Rank among positives: negatives at -inf rank below every positive, and stay there when
    # the backward perturbs the scores by lambda * g.
    positive_scores = torch.where(positives, shifted, -math.inf)
    rank_positive = BlackboxRanks.apply(positive_scores, interpolation)
    precision = torch.where(positives, rank_positive / rank_all, 0.0)
    counts = positives.sum(dim=1).to(scores.dtype)
    ap = torch.where(counts > 0, precision.sum(dim=1) / counts.clamp(min=1.0), math.nan)
    # A query without negatives has AP 1 whatever the scores: its true gradient is 0, but the
    # two interpolated ranks would not cancel, so it is held constant.
    has_negative = (~positives & (scores > -math.inf)).any(dim=1)
    return torch.where(has_negative | (counts == 0), ap, 1.0).to(given)


def _check_half_gradient(interpolation: float, columns: int) -> None:
    """Refuse float16 scores whose Blackbox AP gradient could pass float16's largest value:
    each of the two rankings moves an entry by at most ``C - 1`` ranks, so ``|dAP/dS|`` is at
    most ``2 (C - 1) / interpolation`` (reached by tied scores, which any perturbation
    reorders), whatever the incoming gradient."""
    bound = 2 * (columns - 1) / interpolation
    if bound > torch.finfo(torch.float16).max:
        raise GradlabError(gradient_overflow_message(
            torch.float16,
            f"at interpolation={interpolation:g} Blackbox AP's |dAP/dS| can reach "
            f"2 (C - 1) / interpolation, {bound:.3g} (C = {columns} columns)",
            "pass float32 or bfloat16 {inputs}, or a larger interpolation",
        ))  # fmt: skip


@outside_autocast
def blackbox_ap_loss(
    embeddings: torch.Tensor,
    labels: torch.Tensor | None = None,
    interpolation: float = 4.0,
    margin: float = 0.02,
    *,
    candidates: torch.Tensor | None = None,
    positives: torch.Tensor | None = None,
    validate: bool = True,
    on_degenerate: Callable[[], None] | None = None,
    name: str = "blackbox_ap_loss",
) -> torch.Tensor:
    """``1 - mean blackbox AP`` (cosine scores), in-batch or cross-modal.

    ``blackbox_ap_loss(embeddings, labels)`` ranks every item of the batch against the others
    (the query is not its own candidate); ``blackbox_ap_loss(queries, candidates=candidates,
    positives=positives)`` ranks ``queries [Q, d]`` against ``candidates [C, d]`` with a
    ``[Q, C]`` bool positive mask (by keyword only), as :class:`gradlab.BlackboxAPLoss` does.

    Args:
        embeddings: ``[B, d]`` floating (``[Q, d]`` queries in the cross-modal form).
        labels: ``[B]`` integer classes (in-batch form only).
        interpolation: of :func:`blackbox_ap` (the authors' lambda times the candidates of a
            query, ``B - 1`` in-batch).
        margin: margin of :func:`blackbox_ap`.
        candidates: ``[C, d]`` floating, by keyword (cross-modal form).
        positives: ``[Q, C]`` bool, by keyword (cross-modal form).
        validate: refuse NaN/inf embeddings (one host read); ``False`` skips that check, but
            the ranking refuses them still (a NaN has no rank), naming the argument. With
            ``on_degenerate``, the same read tells whether some query has both a positive and
            a negative.
        on_degenerate: called (with ``validate``) when no query has both: the loss is then 0
            with zero gradients.
        name: names the caller in error messages.

    Raises:
        GradlabError: a call in neither form (see
            :func:`gradlab.functional.losses.check_call_form`) or bad tensors.

    Example:
        >>> import torch
        >>> from gradlab.functional import blackbox_ap_loss
        >>> emb = torch.tensor([[1.0, 0.1], [0.9, 0.0], [0.0, 1.0], [0.1, 0.9]])
        >>> blackbox_ap_loss(emb, torch.tensor([0, 0, 1, 1]))
        tensor(0.)
        >>> images, captions = emb[:2], emb[2:]  # image 0 ranks its caption second: AP 1/2
        >>> blackbox_ap_loss(images, candidates=captions, positives=torch.eye(2) > 0)
        tensor(0.2500)
    """
    from gradlab.functional.layouts import cross_modal_layout, in_batch_layout
    from gradlab.functional.losses import (
        _mean_ap_loss,
        check_call_form,
        has_ranking_signal,
    )

    checks = check_bool("validate", validate) and value_checks_enabled()
    check_optional_callable("on_degenerate", on_degenerate)
    in_batch = check_call_form(name, labels, (), candidates, positives)
    interpolation = check_interpolation(interpolation)  # before the scores are made
    margin = check_margin(margin)
    if in_batch:
        layout = in_batch_layout(embeddings, labels, validate=validate)
        if checks and on_degenerate is not None and not bool(has_ranking_signal(labels)):
            on_degenerate()
        scores = layout.scores.masked_fill(~layout.candidate_mask, -math.inf)  # the query last
        with (refused_by_caller_name(embeddings=embeddings),  # validate=False: not "scores"
              scores_made_from("embeddings")):  # fmt: skip
            ap = blackbox_ap(scores, layout.positives, interpolation, margin)
        return _mean_ap_loss(ap, embeddings, layout.positives.any(dim=1))
    check_real_device(queries=embeddings, candidates=candidates, positives=positives)
    scores = cross_modal_layout(embeddings, candidates, positives, validate=False)
    if checks:
        counts = positives.sum(dim=1)
        signal = ((counts > 0) & (counts < positives.shape[1])).any()
        finite = finite_flag(embeddings) & finite_flag(candidates)
        flags = torch.stack((finite, signal)).tolist()  # the one host read
        if not flags[0]:
            bad = "queries" if not bool(finite_flag(embeddings)) else "candidates"
            raise GradlabError(non_finite_message(bad, embeddings if bad == "queries"
                                                  else candidates))  # fmt: skip
        if not flags[1] and on_degenerate is not None:
            on_degenerate()
    with (refused_by_caller_name(queries=embeddings, candidates=candidates),  # not "scores"
          scores_made_from("queries and candidates")):  # fmt: skip
        ap = blackbox_ap(scores, positives, interpolation, margin)
    return _mean_ap_loss(ap, scores, positives.any(dim=1))
