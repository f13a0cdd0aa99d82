"""Losses written on a score matrix: VSE++ max-violation triplet and NT-Xent / InfoNCE.

These are the losses of the image-caption comparison in Bleeker & de Rijke (2022,
appendix
B: VSE++ and VSRN trained with the max-violation triplet loss, against SmoothAP). Both take the
``[Q, C]`` score matrix of a cross-modal batch, not embeddings, so that the gradient anatomy
(:func:`gradlab.functional.gradient_anatomy`) can read ``dL/dS`` directly.

Conventions (stated, not implied):

* ``scores[q, c]`` is the similarity of query-side item ``q`` (an image) and candidate-side item
  ``c`` (a caption); a larger score ranks higher.
* ``positives`` is a ``[Q, C]`` bool mask of the relevant pairs (an image with its 5 captions),
  or a ``[B]`` integer label tensor for a square, paired batch (``positives[q, c] =
  labels[q] == labels[c]``; the diagonal pairs are positives).
* ``direction="i2t"`` treats rows as queries (image -> caption), ``"t2i"`` columns as queries
  (caption -> image), ``"both"`` is the sum of the two, computed as ``i2t + t2i``.
* A query (row for i2t, column for t2i) without a positive contributes nothing; a query without
  a negative contributes nothing to the triplet loss. When nothing contributes, the loss is a
  zero attached to ``scores``' graph (``backward`` gives zero gradients).
* A batch in which no query (of the computed directions) has both a positive and a negative has
  no ranking signal: the triplet loss is 0, NT-Xent is 0 without positives and otherwise only
  spreads the softmax over the positives. ``on_degenerate()`` is then called (the modules warn
  once with :class:`gradlab.losses.DegenerateBatchWarning` and count it, as ``SmoothAPLoss``
  does).
* A score matrix with no rows or no columns (an empty batch) is refused with a
  :class:`GradlabError`, as are NaN/inf scores (``validate=True``, the default).
* Host synchronisation: at most one per call. The finiteness flag (``validate``) and the
  degenerate-batch flag (``on_degenerate``) travel in that single transfer; with
  ``validate=False`` and no ``on_degenerate`` (or inside
  :func:`gradlab.validation.skip_value_checks` and no ``on_degenerate``) nothing is read back.
* Each direction is computed from its own alias of ``scores`` (``scores.view_as(scores)``), and
  ``on_scores(direction, alias, mask)`` is called with it when given: a hook on the alias reads
  that direction's ``dL/dS`` alone (the Monitor's anatomy uses this). The alias is always made,
  so values and gradients are the same with and without ``on_scores``.
"""

from __future__ import annotations

import math
from collections.abc import Callable

import torch

from gradlab.errors import GradlabError
from gradlab.functional.precision import gradient_overflow_message, outside_autocast
from gradlab.validation import (
    check_bool,
    check_in_range,
    check_real_device,
    check_same_device,
    check_shape,
    check_temperature,
    check_tensor,
    finite_flag,
    non_finite_message,
    refuse_learnable,
    value_checks_enabled,
)

ScoreCallback = Callable[[str, torch.Tensor, torch.Tensor], None]
"""``(direction, scores_alias, positives_mask) -> None``: called once per computed direction
(``"i2t"``, ``"t2i"``) with the alias of ``scores`` that direction is computed from, so that a
hook on it reads that direction's ``dL/dS`` alone (the Monitor's anatomy does); the alias is
made with or without a callback, so values and gradients do not change."""

DIRECTIONS = ("both", "i2t", "t2i")
"""Retrieval directions of the score-matrix losses."""

REDUCTIONS = ("mean", "sum")
"""How the per-pair (triplet) or per-query (NT-Xent) terms are combined."""


def score_positives(scores: torch.Tensor, positives: torch.Tensor) -> torch.Tensor:
    """Check ``scores``; turn ``positives`` (a bool mask or paired labels) into a ``[Q, C]`` mask.

    Example:
        >>> score_positives(torch.zeros(2, 2), torch.tensor([3, 3])).tolist()
        [[True, True], [True, True]]
    """
    check_tensor("scores", scores, ndims=(2,), kind="float")
    check_tensor("positives", positives, ndims=(1, 2), kind="any")
    check_real_device(scores=scores, positives=positives)
    check_same_device(scores=scores, positives=positives)
    if positives.dim() == 2:
        if positives.dtype != torch.bool:
            raise GradlabError(
                f"positives must be a [Q, C] bool mask or [B] integer labels; got a 2-D "
                f"{positives.dtype} tensor (a 0/1 mask: pass positives.bool(), or build it as "
                "torch.eye(B, dtype=torch.bool))"
            )
        check_shape("positives", positives, scores.shape, "one flag per score")
        return positives
    if positives.is_floating_point() or positives.is_complex() or positives.dtype == torch.bool:
        raise GradlabError(
            f"positives must be a [Q, C] bool mask or [B] integer labels; got a 1-D "
            f"{positives.dtype} tensor"
        )
    check_tensor("positives", positives, ndims=(1,), kind="integer")  # labels' dtype rule
    if scores.shape[0] != scores.shape[1]:
        raise GradlabError(
            "positives given as labels needs a square, paired score matrix [B, B]; got scores "
            f"of shape {tuple(scores.shape)} (these losses take a score matrix such as "
            "z @ z.T of unit rows, not the embeddings; for a rectangular one pass a [Q, C] bool "
            "mask)"
        )
    check_shape("positives", positives, scores.shape[:1], "one label per row")
    return positives.unsqueeze(1) == positives.unsqueeze(0)


def _loss_mask(scores: torch.Tensor, positives: torch.Tensor) -> torch.Tensor:
    """:func:`score_positives`, and refuse an empty score matrix (no query or no candidate)."""
    mask = score_positives(scores, positives)
    if scores.shape[0] == 0 or scores.shape[1] == 0:
        raise GradlabError(
            "scores must have at least one row (query) and one column (candidate); got shape "
            f"{tuple(scores.shape)} (an empty batch)"
        )
    return mask


def _one_sync(
    scores: torch.Tensor,
    mask: torch.Tensor,
    direction: str,
    validate: bool,
    degenerate: bool,
    bound: tuple[float, str],
    fits: tuple[Callable[[], torch.Tensor], Callable[[], str]] | None = None,
) -> bool:
    """The call's only host read: the finiteness flag and/or the no-ranking-signal flag.

    Returns whether no query of ``direction`` has both a positive and a negative (``False``
    when ``degenerate`` is not asked for). Reads nothing when neither flag is wanted.
    ``bound`` is ``(largest |score|, why)``: larger finite scores overflow the dtype the loss
    is computed in. ``fits`` (validated calls only) is ``(flag, message)``: a 0-d bool tensor
    that travels in the same transfer, and the refusal's text when it is False.
    """
    validate = check_bool("validate", validate) and value_checks_enabled()
    if not (validate or degenerate):
        return False
    flags = [finite_flag(scores, bound[0])] if validate else []
    if validate and fits is not None:
        flags.append(fits[0]())
    if degenerate:
        signal = torch.zeros((), dtype=torch.bool, device=mask.device)
        for dim, name in ((1, "i2t"), (0, "t2i")):
            if direction in (name, "both"):
                signal = signal | (mask.any(dim=dim) & ~mask.all(dim=dim)).any()
        flags.append(~signal)
    host = torch.stack(flags).tolist()  # the one transfer
    if validate and not host[0]:
        if not bool(finite_flag(scores)):
            hint = ("; to leave an entry out, fill it with a large negative finite score "
                    "(scores.masked_fill(mask, -1e4): in a softmax its exponential underflows "
                    "to exactly 0)") if bool(scores.detach().isneginf().any()) else ""  # fmt: skip
            raise GradlabError(non_finite_message("scores", scores) + hint)
        raise GradlabError(
            f"scores must lie in [-{bound[0]:.3g}, {bound[0]:.3g}] ({bound[1]}); got a score of "
            f"magnitude {float(scores.detach().abs().max()):.3g}"
        )
    if validate and fits is not None and not host[1]:
        raise GradlabError(fits[1]())
    return bool(host[-1]) if degenerate else False


def score_bound(
    computed_in: torch.dtype, terms: int, offset: float, scale: float, name: str, why: str
) -> tuple[float, str]:
    """``_one_sync``'s ``bound``: the largest ``|s|`` whose ``terms`` summed terms, each at most
    ``2 (scale |s| + offset)``, keep the loss within half of ``computed_in``'s largest value:
    ``scale |s| + offset <= max / (4 terms)``. Refuses ``name`` (the offset: a margin, a bias)
    when it alone reaches that budget, naming the batch's size. A static bound: no value read.

    Example:
        >>> largest, _ = score_bound(torch.float32, 1, 0.0, 1.0, "bias", "")
        >>> largest == torch.finfo(torch.float32).max / 4
        True
    """
    budget = torch.finfo(computed_in).max / (4 * max(terms, 1))
    if offset >= budget:
        raise GradlabError(
            f"{name} must be below {budget:.3g} for a loss that sums {terms} terms in "
            f"{computed_in} ({why}); got {offset:.3g}"
        )
    return (budget - offset) / scale, why


def _check_options(
    direction: str, reduction: str, on_scores: object, on_degenerate: object = None
) -> None:
    if direction not in DIRECTIONS:
        raise GradlabError(f"direction must be one of {DIRECTIONS}; got {direction!r}")
    if reduction not in REDUCTIONS:
        raise GradlabError(f"reduction must be one of {REDUCTIONS}; got {reduction!r}")
    if on_scores is not None and not callable(on_scores):
        raise GradlabError(f"on_scores must be None or a callable; got {on_scores!r}")
    if on_degenerate is not None and not callable(on_degenerate):
        raise GradlabError(f"on_degenerate must be None or a callable; got {on_degenerate!r}")


HALF_DTYPES = (torch.float16, torch.bfloat16)
"""Input dtypes the score losses compute in float32 (their result is cast back)."""


def computed_dtype(dtype: torch.dtype) -> torch.dtype:
    """The dtype the losses compute ``dtype`` inputs in: float32 for float16 and bfloat16, else
    ``dtype`` itself.

    Example:
        >>> computed_dtype(torch.bfloat16), computed_dtype(torch.float64)
        (torch.float32, torch.float64)
    """
    return torch.float32 if dtype in HALF_DTYPES else dtype


def widened(scores: torch.Tensor) -> torch.Tensor:
    """``scores`` in float32 when they are float16 or bfloat16 (a softmax or a sum over a row
    in half precision loses several per cent of a gradient), else as they are.

    Example:
        >>> widened(torch.zeros(2, dtype=torch.bfloat16)).dtype, widened(torch.zeros(2)).dtype
        (torch.float32, torch.float32)
    """
    return scores.float() if scores.dtype in HALF_DTYPES else scores


def _by_direction(row_loss, scores, mask, direction, on_scores, *options) -> torch.Tensor:
    """``row_loss`` on the rows (i2t) and/or the columns (t2i), each from its own alias, in
    float32 for half-precision scores (the loss cast back to their dtype)."""
    dtype, scores = scores.dtype, widened(scores)
    total = None
    for name in ("i2t", "t2i") if direction == "both" else (direction,):
        alias = scores.view_as(scores)
        if on_scores is not None:
            on_scores(name, alias, mask)
        term = (
            row_loss(alias, mask, *options)
            if name == "i2t"
            else row_loss(alias.T, mask.T, *options)
        )
        total = term if total is None else total + term
    return total.to(dtype)


LARGEST_MARGIN = 1e30
"""The largest triplet margin accepted (larger ones overflow float32 next to the scores)."""


LEARNABLE_TEMPERATURE = ("pass temperature=1.0 and the scaled scores, "
                         "loss(logit_scale.exp() * scores, positives), as CLIP learns its scale")
"""How a learnable temperature is used with NT-Xent (the refusal of a tensor says it)."""


def check_margin(margin: object) -> float:
    """``margin`` as a float if it is finite and in ``[0, 1e30]``.

    Example:
        >>> check_margin(0.2)
        0.2
    """
    return check_in_range(
        "margin", margin, 0.0, LARGEST_MARGIN, reason="larger margins overflow float32"
    )


def _row_max_violation(
    scores: torch.Tensor, positives: torch.Tensor, margin: float, reduction: str
) -> torch.Tensor:
    """Rows as queries: ``sum_{(q, p) positive} [margin - s_qp + max_{n negative} s_qn]_+``."""
    hardest = scores.masked_fill(positives, -torch.inf).max(dim=1, keepdim=True).values
    cost = torch.relu(margin - scores + hardest).masked_fill(~positives, 0.0)
    total = cost.sum()
    if reduction == "sum":
        return total
    return total / positives.sum().clamp(min=1)


@outside_autocast
def max_violation_triplet_loss(
    scores: torch.Tensor,
    positives: torch.Tensor,
    margin: float = 0.2,
    *,
    direction: str = "both",
    reduction: str = "mean",
    on_scores: ScoreCallback | None = None,
    validate: bool = True,
    on_degenerate: Callable[[], None] | None = None,
) -> torch.Tensor:
    """VSE++'s max-violation (hardest-negative) triplet loss on a score matrix.

    Faghri et al., VSE++ (BMVC 2018), Eq. 5, the loss of Bleeker & de Rijke (2022), appendix B:
    for every positive pair ``(q, p)`` and the hardest negative of the query,

        i2t:  [margin - S[q, p] + max_{c not in P(q)} S[q, c]]_+
        t2i:  [margin - S[q, p] + max_{r not in P(p)} S[r, p]]_+     (columns as queries)

    Only the hardest negative receives gradient, and only while its margin is violated; ties for
    the hardest are broken by ``torch.max`` (one of them receives all of it).

    Args:
        scores: ``[Q, C]`` float scores (images x captions).
        positives: ``[Q, C]`` bool mask, or ``[B]`` integer labels of a square paired batch.
        margin: the margin ``alpha``, in ``[0, 1e30]`` (VSE++ uses 0.2).
        direction: ``"both"`` (i2t + t2i, VSE++), ``"i2t"`` or ``"t2i"``.
        reduction: ``"mean"`` over the positive pairs (per direction; a pair whose query has
            no negative counts, with a hinge of 0) or ``"sum"`` (VSE++'s code sums over the
            batch).
        on_scores: optional ``(direction, alias, mask)`` callback (:data:`ScoreCallback`).
        validate: refuse NaN/inf scores and scores past ``max / (4 Q C) - margin`` per
            direction summed (:func:`score_bound`, ``max`` the largest value of the dtype the
            loss is computed in: the sum of the hinges stays finite) and, for half-precision
            scores, scores whose loss
            could exceed their dtype (it is computed in float32 and returned in theirs: an
            upper bound, ``margin + largest score - lowest positive score`` per positive, is
            checked); one host read, shared with ``on_degenerate``.
        on_degenerate: called with no argument when no query has both a positive and a negative.

    Returns:
        A 0-d tensor; 0 (with zero gradient) when no positive pair has a negative.

    Raises:
        GradlabError: bad arguments, an empty score matrix, or (``validate``) NaN/inf scores.

    Example:
        >>> import torch
        >>> from gradlab.functional import max_violation_triplet_loss
        >>> scores = torch.tensor([[0.9, 0.8], [0.1, 0.5]])
        >>> round(max_violation_triplet_loss(scores, torch.eye(2, dtype=torch.bool)).item(), 4)
        0.3
    """
    mask = _loss_mask(scores, positives)
    margin = check_margin(margin)
    _check_options(direction, reduction, on_scores, on_degenerate)
    computed_in = computed_dtype(scores.dtype)
    terms = scores.shape[0] * scores.shape[1] * (2 if direction == "both" else 1)
    bound = score_bound(computed_in, terms, margin, 1.0, "margin",
                        f"the sum of margin - s_qp + s_qn over every positive and direction "
                        f"must fit {computed_in}")  # fmt: skip
    fits = None
    if scores.dtype in HALF_DTYPES:  # computed in float32, returned in the scores' dtype
        fits = _returned_loss_fits(
            scores, lambda: _triplet_bound(scores, mask, margin, direction, reduction),
            "margin + largest score - lowest positive score per positive, "
            f"reduction={reduction!r}",
        )  # fmt: skip
    if _one_sync(scores, mask, direction, validate, on_degenerate is not None, bound, fits):
        on_degenerate()
    return _by_direction(_row_max_violation, scores, mask, direction, on_scores, margin, reduction)


def _row_info_nce(
    scores: torch.Tensor, positives: torch.Tensor, temperature: float, reduction: str
) -> torch.Tensor:
    """Rows as queries: ``-1/|P(q)| sum_{p in P(q)} log softmax(S[q] / temperature)_p``."""
    log_probabilities = (scores / temperature).log_softmax(dim=1)
    per_positive = log_probabilities.masked_fill(~positives, 0.0)
    num_positives = positives.sum(dim=1)
    per_query = -per_positive.sum(dim=1) / num_positives.clamp(min=1)
    total = per_query.sum()
    if reduction == "sum":
        return total
    return total / (num_positives > 0).sum().clamp(min=1)


@outside_autocast
def nt_xent_loss(
    scores: torch.Tensor,
    positives: torch.Tensor,
    temperature: float = 0.1,
    *,
    direction: str = "both",
    reduction: str = "mean",
    on_scores: ScoreCallback | None = None,
    validate: bool = True,
    on_degenerate: Callable[[], None] | None = None,
) -> torch.Tensor:
    """NT-Xent / InfoNCE on a score matrix, with several positives per query allowed.

    Oord et al. (2018) and Chen et al., SimCLR (ICML 2020), Eq. 1; for a query ``q`` (a row for
    i2t, a column for t2i) with positive set ``P(q)``, the mean negative log-probability of its
    positives under a softmax over all its candidates (the other positives included):

        l_q = -1/|P(q)| sum_{p in P(q)} log( exp(S[q, p]/T) / sum_c exp(S[q, c]/T) ).

    The gradient with respect to a negative ``c`` is ``softmax(S[q]/T)_c / T`` (times the
    reduction's weight): every negative receives its softmax weight.

    Every column of a row is a candidate. SimCLR's Eq. 1 on the ``2N x 2N`` matrix of its views
    leaves each view's own score out of the denominator: pass ``scores - 1e4 * eye`` (its
    exponential underflows to exactly 0; ``scores.masked_fill(eye, -1e4)`` keeps a float16
    dtype), the ``[2N, 2N]`` mask of each view's partner as
    ``positives`` (labels would make the view its own positive) and ``direction="i2t"`` (the
    matrix is symmetric: ``"both"`` counts each anchor twice).

    Args:
        scores: ``[Q, C]`` float scores (cosine similarities for the usual scale).
        positives: ``[Q, C]`` bool mask, or ``[B]`` integer labels of a square paired batch.
        temperature: ``T``, a number, finite and at least ``1e-30`` (``1/T`` must fit
            float32; 0.1 here, SimCLR uses 0.1-0.5). CLIP learns its scale: pass
            ``temperature=1.0`` and the scaled scores ``logit_scale.exp() * scores``.
        direction: ``"both"`` (i2t + t2i), ``"i2t"`` or ``"t2i"``.
        reduction: ``"mean"`` over the queries that have a positive, or ``"sum"``.
        on_scores: optional ``(direction, alias, mask)`` callback (:data:`ScoreCallback`).
        validate: refuse NaN/inf scores, scores with ``|s| / T`` past ``max / (4 n)``, ``n``
            ``max(Q, C)`` per direction summed and ``max`` the largest value of the dtype the
            loss is computed in (float32 for float16 and bfloat16 scores; :func:`score_bound`:
            the sum over the queries stays finite),
            and, for half-precision scores, scores whose loss could exceed their dtype's
            largest value (per query ``(max_c S[q, c] - min_p S[q, p]) / T + ln C``); one host
            read, shared with ``on_degenerate``.
        on_degenerate: called with no argument when no query has both a positive and a negative.

    Returns:
        A 0-d tensor; 0 (with zero gradient) when no query has a positive.

    Raises:
        GradlabError: bad arguments, an empty score matrix, or (``validate``) NaN/inf scores.

    Example:
        >>> import torch
        >>> from gradlab.functional import nt_xent_loss
        >>> scores = torch.tensor([[1.0, 0.0], [0.0, 1.0]])
        >>> eye = torch.eye(2, dtype=torch.bool)
        >>> round(nt_xent_loss(scores, eye, temperature=1.0, direction="i2t").item(), 4)
        0.3133
    """
    mask = _loss_mask(scores, positives)
    refuse_learnable("temperature", temperature, LEARNABLE_TEMPERATURE)
    temperature = check_temperature("temperature", temperature)
    _check_options(direction, reduction, on_scores, on_degenerate)
    computed_in = computed_dtype(scores.dtype)
    terms = max(scores.shape) * (2 if direction == "both" else 1)
    bound = score_bound(computed_in, terms, 0.0, 1.0 / temperature, "temperature",
                        f"the sum over the queries of every direction of (s_qc - s_qp) / "
                        f"temperature must fit {computed_in}")  # fmt: skip
    fits = None
    if computed_in != scores.dtype:  # computed in float32, returned in the scores' dtype
        fits = _info_nce_fits(scores, mask, temperature, direction, reduction)
    if _one_sync(scores, mask, direction, validate, on_degenerate is not None, bound, fits):
        on_degenerate()
    return _by_direction(_row_info_nce, scores, mask, direction, on_scores, temperature, reduction)


def _info_nce_bound(
    scores: torch.Tensor, mask: torch.Tensor, temperature: float, direction: str, reduction: str
) -> torch.Tensor:
    """A float32 upper bound of :func:`nt_xent_loss`: per query ``(max_c S[q, c] - min_{p in
    P(q)} S[q, p]) / T + ln C`` (``logsumexp <= max + ln C``), their largest (mean) or their
    sum, summed over the directions. Entries that are never positives (a diagonal shifted by
    -1e4) add nothing but their ``exp``, which underflows to 0."""
    wide = scores.detach().float()
    total = wide.new_zeros(())
    for dim, name in ((1, "i2t"), (0, "t2i")):
        if direction not in (name, "both"):
            continue
        top = wide.amax(dim=dim)
        lowest_positive = wide.masked_fill(~mask, math.inf).amin(dim=dim)
        spread = (top - lowest_positive) / temperature + math.log(wide.shape[dim])
        per_query = torch.where(mask.any(dim=dim), spread, 0.0)
        total = total + (per_query.sum() if reduction == "sum" else per_query.amax())
    return total


def _info_nce_fits(
    scores: torch.Tensor, mask: torch.Tensor, temperature: float, direction: str, reduction: str
) -> tuple[Callable[[], torch.Tensor], Callable[[], str]]:
    """``_one_sync``'s ``fits`` for half-precision scores: the loss, computed in float32, must
    fit the scores' dtype that it is returned in."""
    return _returned_loss_fits(
        scores, lambda: _info_nce_bound(scores, mask, temperature, direction, reduction),
        "(largest score - lowest positive score) / temperature + ln C per query, "
        f"reduction={reduction!r}",
        lambda: _info_nce_grad_bound(mask, temperature, direction, reduction),
        "1 / temperature over the queries with a positive, per direction"
        + (" (reduction='sum': over none)" if reduction == "sum" else ""),
    )  # fmt: skip


def _info_nce_grad_bound(
    mask: torch.Tensor, temperature: float, direction: str, reduction: str
) -> torch.Tensor:
    """A float32 upper bound of every ``|dL/dS|`` entry of :func:`nt_xent_loss`: per direction
    the softmax's ``|p - y / |P||`` is at most 1, times ``1 / T``, over the number of queries
    with a positive (the mean; 1 for the sum); an entry is in a row and a column."""
    total = torch.zeros((), dtype=torch.float32, device=mask.device)
    for dim, name in ((1, "i2t"), (0, "t2i")):
        if direction in (name, "both"):
            if reduction == "sum":
                total = total + 1.0 / temperature
            else:
                count = mask.any(dim=dim).sum().clamp(min=1).float()
                total = total + (1.0 / temperature) / count
    return total


def _returned_loss_fits(
    scores: torch.Tensor,
    bound: Callable[[], torch.Tensor],
    formula: str,
    grad_bound: Callable[[], torch.Tensor] | None = None,
    grad_formula: str = "",
) -> tuple[Callable[[], torch.Tensor], Callable[[], str]]:
    """``_one_sync``'s ``fits`` for a loss computed in float32 and returned in the
    half-precision dtype of ``scores``: ``bound()`` (a 0-d float32 upper bound of the loss,
    described by ``formula``) must not exceed that dtype's largest value, else the returned
    loss would be ``inf``; nor must ``grad_bound()`` (of every ``|dL/dS|`` entry, described by
    ``grad_formula``), else the gradient would hold ``inf``.

    Example:
        >>> scores = torch.ones(2, 2, dtype=torch.float16)
        >>> flag, message = _returned_loss_fits(scores, lambda: torch.tensor(7e4), "a sum")
        >>> bool(flag())
        False
        >>> message()[:58]
        "scores must keep the loss within torch.float16's largest v"
    """
    largest = torch.finfo(scores.dtype).max

    def flag() -> torch.Tensor:
        fits = bound() <= largest
        return fits if grad_bound is None else fits & (grad_bound() <= largest)

    def message() -> str:
        loss = float(bound())
        if loss <= largest and grad_bound is not None:  # the gradient is what overflows
            return gradient_overflow_message(
                scores.dtype,
                f"got scores whose |dL/dS| can reach {float(grad_bound()):.3g} ({grad_formula})",
                "pass scores.float() for a float32 gradient",
            )
        return (
            f"scores must keep the loss within {scores.dtype}'s largest value {largest:.6g} "
            f"(the loss is returned in the scores' dtype); got scores whose loss can reach "
            f"{loss:.3g} ({formula}); pass scores.float() for a float32 loss"
        )

    return flag, message


def _triplet_bound(
    scores: torch.Tensor, mask: torch.Tensor, margin: float, direction: str, reduction: str
) -> torch.Tensor:
    """A float32 upper bound of :func:`max_violation_triplet_loss`: per query, each positive
    costs at most ``margin + max_c S[q, c] - min_{p in P(q)} S[q, p]`` (the hardest negative
    is at most the row's largest score); their sum over the positives (``"sum"``) or their
    largest (``"mean"``: a mean is at most its largest term), summed over the directions."""
    wide = scores.detach().float()
    total = wide.new_zeros(())
    for dim, name in ((1, "i2t"), (0, "t2i")):
        if direction not in (name, "both"):
            continue
        # a query without positives: its lowest positive is inf, its bound clamped to 0
        lowest_positive = wide.masked_fill(~mask, math.inf).amin(dim=dim)
        per_positive = (margin + wide.amax(dim=dim) - lowest_positive).clamp(min=0.0)
        if reduction == "sum":
            total = total + (per_positive * mask.sum(dim=dim)).sum()
        else:
            total = total + per_positive.amax()
    return total
