"""FAPPY: the false positive probability of positive pairs (Zhong et al., Eq. 1-7, Algorithm 1).

For bin width ``Delta`` the boundaries are ``b_m = -1 + m Delta``, ``m = 0 .. 2/Delta``. A
positive pair ``<i, j>`` with cosine ``s_ij`` in ``[b_t, b_{t+1}]`` puts
``h_left = (b_{t+1} - s_ij)/Delta`` on bin ``t`` and ``h_right = (s_ij - b_t)/Delta`` on bin
``t + 1`` (Eq. 1-3). The negatives ``N_ij``
(items whose label differs from the pair's) of ``i`` and of ``j`` form triangular-kernel
histograms ``h_i``, ``h_j`` (Eq. 4-5), and (Eq. 7)

    P_ij = h_left sum_{u>=t} h_i^u + h_right sum_{u>=t+1} h_i^u   (+ the same with h_j).

Summing the kernel weights of one negative over ``u >= t`` gives
``clamp((s - b_{t-1}) / Delta, 0, 1)``, so ``P_ij`` costs ``O(|N_ij|)`` per pair and

    dP_ij / ds_ik = ( h_left [s_ik in [b_{t-1}, b_t]]
                    + h_right [s_ik in [b_t, b_{t+1}]] ) / (|N| Delta)

is non-zero on **two** bins: the pair's own bin and the one below it. Zhong et al.'s Lemma 1 and its
appendix state one bin and the value ``-h_right`` (see :func:`fappy_gradient_closed_form` and
``gradlab audit``).

Algorithm 1 fuses scales ``Delta = 2, 1, 1/2, ...`` down to ``Delta_min``: after each scale,
``L <- (L + L_Delta / #positive pairs) / 2`` (``normalization="paper"``, the default: lines 10-11
as printed), so the smallest scale weighs 1/2, the next 1/4, and so on, and ``L`` is the mean
fused loss over all positive pairs. A pair enters scale ``Delta`` only if ``1 - s_ij >= Delta``
(line 5). The authors' Caffe layer instead divides the *running* loss by the number of *active*
pairs of the scale, ``L <- (L + L_Delta) / max(1, #active) / 2`` (``normalization="official"``;
a scale without active pairs divides by 1). That recurrence was read off the authors' layer
(``caffe/src/caffe/layers/fappy_loss_layer.cpp`` of jx-zhong-for-academic-purpose/
fappy_metric_learning: ``ElementwiseUpdate`` adds the scale's sum over pairs with
``1 - s_ij >= Delta``, both directions ``h_i`` and ``h_j``, then divides the running loss by that
pair count; ``Forward_cpu`` halves it after every scale ``Delta = 2, 1, ...``). Positive pairs
are unordered (``i < j``); ``P_ij`` is symmetric in ``i`` and ``j``.
"""

from __future__ import annotations

import functools
from collections.abc import Callable

import torch

from gradlab.errors import GradlabError
from gradlab.functional.layouts import unit_rows
from gradlab.functional.precision import outside_autocast
from gradlab.functional.score_losses import widened
from gradlab.validation import (
    check_bool,
    check_embeddings_and_labels,
    check_in_range,
    check_optional_callable,
    check_positive_int,
    check_real_device,
    check_same_device,
    check_shape,
    check_tensor,
    finite_flag,
    non_finite_message,
    refused_by_caller_name,
    value_checks_enabled,
)

FAPPY_LARGEST_DELTA = 2.0
FAPPY_SMALLEST_DELTA = 2.0**-20
"""The narrowest bin accepted (about 9.5e-7): 2**21 bins over ``[-1, 1]``, near float32's
resolution of a cosine (6e-8 at 1); much narrower bins only overflow the bin index."""
NORMALIZATIONS = ("paper", "official")
COSINE_SLACK = 1e-3
"""How far past +-1 a cosine similarity may round: ``1e-3``, or 8 rounding steps of its dtype
at 1 where that is more (float16: 7.8e-3, bfloat16: 0.0625). A float32 cosine of two
normalized vectors reads up to ``1 + 4.8e-7`` (4 steps), a float16 one ``1 + 9.8e-4``."""


def check_normalization(normalization: str) -> str:
    """``normalization`` if it is one of :data:`NORMALIZATIONS`, else :class:`GradlabError`.

    Example:
        >>> check_normalization("official")
        'official'
    """
    if normalization not in NORMALIZATIONS:
        raise GradlabError(f"normalization must be one of {NORMALIZATIONS}; got {normalization!r}")
    return normalization


def check_delta_min(delta_min: object) -> float:
    """``delta_min`` as a float if it is in ``[FAPPY_SMALLEST_DELTA, 1]``.

    Above 1 only the widest scale (2.0) runs, and a positive pair enters a scale only if
    ``1 - s >= Delta`` (Algorithm 1, line 5): at 2.0, only a pair at cosine exactly -1. The
    loss would be 0 with a zero gradient on every other batch, a model that never trains.

    Example:
        >>> check_delta_min(0.01)
        0.01
    """
    return check_in_range(
        "delta_min", delta_min, FAPPY_SMALLEST_DELTA, FAPPY_LARGEST_DELTA / 2,
        reason="2**-20: narrower bins pass float32's resolution of a cosine; above 1 only the "
        "scale 2.0 runs, where a positive pair counts only at cosine -1, so the loss is 0 on "
        "any other batch",
    )  # fmt: skip


def fappy_deltas(delta_min: float) -> list[float]:
    """The bin widths of Algorithm 1: 2.0 halving while at least ``delta_min`` (2.0 always runs).

    ``delta_min`` must be in ``[2**-20, 1]`` (:func:`check_delta_min`).

    Example:
        >>> from gradlab.functional import fappy_deltas
        >>> fappy_deltas(0.2)
        [2.0, 1.0, 0.5, 0.25]
    """
    delta_min = check_delta_min(delta_min)
    deltas, current = [], FAPPY_LARGEST_DELTA
    while True:
        deltas.append(current)
        current /= 2.0
        if current < delta_min:
            return deltas


def check_bin_width(delta: object) -> float:
    """``delta`` as a float if it is in ``[2**-20, 2]`` and ``2 / delta`` is an integer.

    Raises:
        GradlabError: naming ``delta``, its value and the rule.

    Example:
        >>> check_bin_width(0.4)
        0.4
        >>> try:
        ...     check_bin_width(0.3)
        ... except GradlabError as error:
        ...     print(error)
        delta must divide 2 into whole bins (2 / delta an integer: 2.0, 1.0, 0.5, 0.4, ...); got 0.3
    """
    delta = check_in_range("delta", delta, FAPPY_SMALLEST_DELTA, FAPPY_LARGEST_DELTA)
    bins = FAPPY_LARGEST_DELTA / delta
    if abs(bins - round(bins)) > 1e-9 * bins:
        raise GradlabError(
            "delta must divide 2 into whole bins (2 / delta an integer: 2.0, 1.0, 0.5, 0.4, ...); "
            f"got {delta!r}"
        )
    return delta


def _bin_position(similarity: torch.Tensor, delta: float) -> tuple[torch.Tensor, ...]:
    """Lower edge ``b_t`` of the bin holding ``s``, and the heights ``h_left``, ``h_right``.

    Works on tensors and on plain floats (as 0-d tensors); the last bin is closed at +1.
    """
    if not isinstance(similarity, torch.Tensor):
        similarity = torch.tensor(similarity, dtype=torch.float64)
    last = round(2.0 / delta) - 1
    index = torch.clamp(torch.floor((similarity.detach() + 1.0) / delta), 0, last)
    lower = -1.0 + index * delta
    h_right = (similarity - lower) / delta
    return lower, 1.0 - h_right, h_right


def _cumulative_weight(
    similarities: torch.Tensor, edge: torch.Tensor, delta: float
) -> torch.Tensor:
    """``sum_{u >= m} w^u(s)`` for the bin ``m`` whose lower neighbour's edge is ``b_{m-1}``."""
    return torch.clamp((similarities - edge) / delta, 0.0, 1.0)


@outside_autocast
def false_positive_probability(
    scores: torch.Tensor,
    labels: torch.Tensor,
    delta: float,
    *,
    pairs: tuple[torch.Tensor, torch.Tensor] | None = None,
) -> tuple[torch.Tensor, tuple[torch.Tensor, torch.Tensor]]:
    """``P_ij^Delta`` (Zhong et al., Eq. 7) of every positive pair of a batch.

    Args:
        scores: ``[B, B]`` cosine similarities of the batch with itself (the glossary's
            ``scores``), in ``[-1, 1]`` up to rounding (:data:`COSINE_SLACK`): the bins tile
            ``[-1, 1]`` (Eq. 1-3), and a score outside would give a negative or an above-one
            height (a raw dot product or a logit is no cosine).
        labels: ``[B]`` integer labels.
        delta: bin width in ``[2**-20, 2]`` with ``2 / delta`` an integer (Algorithm 1's
            widths are); other widths are refused.
        pairs: optional ``(i, j)``, two 1-D integer index tensors of one length on the scores'
            device, each ``(i[k], j[k])`` a positive pair of the batch (``0 <= i, j < B``,
            ``i != j``, equal labels); default every positive pair with ``i < j``.

    Returns:
        ``(P [n_pairs], (i, j))``. A pair with no negatives has ``P = 0``. Float16 and
        bfloat16 scores are binned in float32 (their own dtype cannot count the bins of a
        small ``delta``); ``P`` is returned in their dtype. ``P`` is Eq. 7 as printed: the two
        sides' false positive rates added, so it reaches 2 when every negative of both sides
        scores above the pair (gradlab's audit flags the sum; it is no probability), and a
        cosine within :data:`COSINE_SLACK` above 1 can make it slightly negative.

    Raises:
        GradlabError: a bad tensor, shape, device or ``delta``, NaN/inf scores, scores outside
            ``[-1, 1]``, or ``pairs`` that are not positive pairs of the batch (one host read
            for the value checks, before any work).

    Example:
        >>> import torch
        >>> from gradlab.functional import false_positive_probability
        >>> s = torch.tensor([[1.0, 0.2, 0.5], [0.2, 1.0, -0.5], [0.5, -0.5, 1.0]])
        >>> p, _ = false_positive_probability(s, torch.tensor([0, 0, 1]), delta=0.5)
        >>> p
        tensor([1.])
    """
    delta = check_bin_width(delta)
    check_tensor("scores", scores, ndims=(2,), kind="float")
    check_tensor("labels", labels, ndims=(1,), kind="integer")
    check_shape("scores", scores, (len(labels), len(labels)), "[B, B]")
    check_same_device(scores=scores, labels=labels)
    check_real_device(scores=scores)  # a meta tensor has no pairs to find or values to read
    if pairs is None:
        same = labels.unsqueeze(0) == labels.unsqueeze(1)
        first, second = torch.nonzero(torch.triu(same, diagonal=1), as_tuple=True)
    else:
        first, second = _check_pair_tensors(pairs, scores)
    _check_values(scores, labels, None if pairs is None else (first, second))
    given, scores = scores.dtype, widened(scores)  # half precision: bins of float32 (below)
    pair_similarity = scores[first, second]
    lower, h_left, h_right = _bin_position(pair_similarity, delta)
    negatives = (labels.unsqueeze(0) != labels[first].unsqueeze(1)).to(scores.dtype)
    count = negatives.sum(dim=1).clamp(min=1.0)
    total = torch.zeros_like(pair_similarity)
    for rows in (first, second):
        row_similarities = scores[rows]
        from_t = _cumulative_weight(row_similarities, (lower - delta).unsqueeze(1), delta)
        from_t_plus_one = _cumulative_weight(row_similarities, lower.unsqueeze(1), delta)
        above_t = (from_t * negatives).sum(dim=1) / count
        above_t_plus_one = (from_t_plus_one * negatives).sum(dim=1) / count
        total = total + h_left * above_t + h_right * above_t_plus_one
    return total.to(given), (first, second)


def _check_pair_tensors(
    pairs: object, scores: torch.Tensor
) -> tuple[torch.Tensor, torch.Tensor]:
    """The metadata of ``pairs``: two 1-D integer tensors of one length on the scores' device."""
    if not isinstance(pairs, (tuple, list)) or len(pairs) != 2:
        raise GradlabError(
            f"pairs must be a pair (i, j) of index tensors; got {type(pairs).__name__}"
            + (f" of length {len(pairs)}" if isinstance(pairs, (tuple, list)) else "")
        )
    first = check_tensor("pairs[0]", pairs[0], ndims=(1,), kind="integer")
    second = check_tensor("pairs[1]", pairs[1], ndims=(1,), kind="integer")
    check_shape("pairs[1]", second, first.shape, "one j per i")
    check_same_device(scores=scores, **{"pairs[0]": first, "pairs[1]": second})
    return first, second


def _check_values(
    scores: torch.Tensor,
    labels: torch.Tensor,
    pairs: tuple[torch.Tensor, torch.Tensor] | None,
) -> None:
    """One host read: the scores are finite cosines; the given pairs are positive pairs."""
    if not value_checks_enabled() or scores.numel() == 0:
        return
    slack = 1.0 + max(COSINE_SLACK, 8 * torch.finfo(scores.dtype).eps)
    flags = [finite_flag(scores, slack)]
    if pairs is not None:
        first, second = pairs
        size = labels.shape[0]
        inside = (first >= 0) & (first < size) & (second >= 0) & (second < size)
        i, j = first.clamp(0, size - 1), second.clamp(0, size - 1)
        valid = inside & (i != j) & (labels[i] == labels[j])
        flags.append(valid.all())
    host = torch.stack(flags).tolist()
    if not host[0]:
        if not bool(finite_flag(scores)):
            raise GradlabError(non_finite_message("scores", scores))
        low, high = torch.aminmax(scores.detach())
        worst = float(high) if float(high) > -float(low) else float(low)
        raise GradlabError(
            "scores must be cosine similarities in [-1, 1] (FAPPY's bins tile [-1, 1], Zhong "
            f"et al., Eq. 1-3); got a score of {worst:.6g}"
        )
    if pairs is not None and not host[1]:
        bad = int((~valid).nonzero()[0, 0])
        pair = (int(first[bad]), int(second[bad]))
        raise GradlabError(
            f"pairs must index positive pairs of the batch (0 <= i, j < {size}, i != j, "
            f"labels[i] == labels[j]); got (i, j) = {pair} at position {bad}"
        )


@outside_autocast
def fappy_loss(
    embeddings: torch.Tensor,
    labels: torch.Tensor,
    delta_min: float = 0.01,
    normalization: str = "paper",
    *,
    validate: bool = True,
    on_degenerate: Callable[[], None] | None = None,
) -> torch.Tensor:
    """The multi-scale FAPPY loss of Algorithm 1 (Zhong et al.) from embeddings and labels.

    Cosine similarities; scales from :func:`fappy_deltas`. A batch without positive pairs has
    loss 0 (attached to the graph).

    Args:
        embeddings: ``[B, d]`` features (cosine similarity is taken); float16 and bfloat16
            are computed in float32, the loss returned in their dtype.
        labels: ``[B]`` integer labels.
        delta_min: the smallest bin width ``Delta_min``.
        normalization: ``"paper"`` (Algorithm 1 lines 10-11: ``L_Delta`` over all positive pairs)
            or ``"official"`` (the Caffe layer: the running loss over the scale's active pairs).
        validate: refuse NaN/inf embeddings (one host read); ``False`` skips that check, but
            FAPPY's histogram refuses them still (a NaN has no bin), naming ``embeddings``.
            With float16 embeddings it also refuses, when backward runs (one more host read
            there), a gradient float16 cannot hold (about ``1 / (negatives x Delta)`` per bin:
            at a small ``delta_min`` it passes 65504); ``False`` returns it as float16 holds
            it, ``inf``.
        on_degenerate: called when no item has both a positive and a negative in the batch
            (the loss is then 0); read with ``validate``, in its one host read.

    Example:
        >>> import torch
        >>> from gradlab.functional import fappy_loss
        >>> emb = torch.tensor([[1.0, 0.0], [0.9, 0.1], [0.0, 1.0], [0.1, 0.9]])
        >>> float(fappy_loss(emb, torch.tensor([0, 0, 1, 1]), delta_min=0.25))
        0.0
    """
    normalization = check_normalization(normalization)
    validate = check_bool("validate", validate)
    delta_min = check_delta_min(delta_min)  # before the scores are made: a [B, B] product
    check_optional_callable("on_degenerate", on_degenerate)
    check_embeddings_and_labels(embeddings, labels)
    if validate and value_checks_enabled():  # finite embeddings and the signal: one read
        flags = [finite_flag(embeddings)]
        if on_degenerate is not None:
            from gradlab.functional.losses import has_ranking_signal

            flags.append(has_ranking_signal(labels))
        finite, *signal = torch.stack(flags).tolist()
        if not finite:
            raise GradlabError(non_finite_message("embeddings", embeddings))
        if signal and not signal[0]:
            on_degenerate()
    wide = widened(embeddings)  # half precision: computed in float32
    if (validate and embeddings.dtype == torch.float16 and wide.requires_grad
            and value_checks_enabled()):  # fmt: skip
        wide.register_hook(functools.partial(_refuse_half_overflow, delta_min=delta_min))
    normalized = unit_rows(wide)  # a zero row: 0
    similarities = normalized @ normalized.T
    loss = wide[:0].sum()  # 0 on the graph: an empty sum (the full one overflows past 1e38)
    for delta in fappy_deltas(delta_min):
        with refused_by_caller_name(embeddings=embeddings):  # validate=False: not "scores"
            probabilities, (first, second) = false_positive_probability(similarities, labels,
                                                                        delta)  # fmt: skip
        active = (1.0 - similarities[first, second]) >= delta  # Algorithm 1, line 5
        scale_sum = (probabilities * active).sum()
        if normalization == "paper":  # lines 10-11 as printed
            loss = (loss + scale_sum / max(1, len(first))) / 2.0
        else:  # the authors' Caffe layer: running loss over the active pairs (no host sync)
            loss = (loss + scale_sum) / active.sum().clamp(min=1) / 2.0
    return loss.to(embeddings.dtype)


def _refuse_half_overflow(gradient: torch.Tensor, delta_min: float) -> None:
    """Refuse the float32 gradient of float16 embeddings that float16 cannot hold (read when
    backward runs: FAPPY's gradient, about ``1 / (negatives x Delta)`` per bin, has no bound
    known before it is computed)."""
    largest = torch.finfo(torch.float16).max
    reached = float(gradient.abs().max()) if gradient.numel() else 0.0
    if not reached <= largest:
        raise GradlabError(
            f"embeddings must keep FAPPY's gradient within torch.float16's largest value "
            f"{largest:.6g} (it is computed in float32 and returned in the embeddings' dtype; "
            f"refused when backward runs); at delta_min={delta_min:g} it reached "
            f"{reached:.3g}; pass float32 or bfloat16 embeddings, or a larger delta_min"
        )


def fappy_gradient_closed_form(
    pair_similarity: float, negative_similarity: float, delta: float, num_negatives: int
) -> float:
    """``dP_ij / ds_ik`` for one negative ``k`` of ``i`` (derived above, not Lemma 1 as printed).

    ``P_ij`` is piecewise linear in ``s_ik``; at a bin edge this is the right derivative (the
    bins are half-open, ``[b_t, b_t + Delta)``).

    Args:
        pair_similarity: ``s_ij``, a cosine in ``[-1, 1]``.
        negative_similarity: ``s_ik``, a cosine in ``[-1, 1]``.
        delta: the bin width, dividing 2 into whole bins (:func:`check_bin_width`).
        num_negatives: the number of negatives of ``i``, a positive integer.

    Raises:
        GradlabError: an argument outside its range, naming it.

    Example:
        >>> from gradlab.functional import fappy_gradient_closed_form
        >>> fappy_gradient_closed_form(0.3, 0.1, delta=0.25, num_negatives=4)
        0.8
    """
    pair_similarity, negative_similarity, delta = _checked_pair(
        pair_similarity, negative_similarity, delta)
    num_negatives = check_positive_int("num_negatives", num_negatives)
    lower, h_left, h_right = (float(v) for v in _bin_position(pair_similarity, delta))
    value = 0.0
    if lower - delta <= negative_similarity < lower:
        value += h_left
    if lower <= negative_similarity < lower + delta:
        value += h_right
    return value / (num_negatives * delta)


def _checked_pair(pair: object, negative: object, delta: object) -> tuple[float, float, float]:
    """The two cosines and the bin width of a single-bin derivative, checked."""
    return (check_in_range("pair_similarity", pair, -1.0, 1.0),
            check_in_range("negative_similarity", negative, -1.0, 1.0),
            check_bin_width(delta))  # fmt: skip


def fappy_lemma1_as_printed(
    pair_similarity: float, negative_similarity: float, delta: float
) -> float:
    """The FAPPY appendix's value of ``dP_ij / ds_ik``: ``-h_right`` on ``[b_t, b_{t+1}]``.

    Arguments as for :func:`fappy_gradient_closed_form` (no number of negatives: the printed
    value has none).

    Example:
        >>> from gradlab.functional import fappy_lemma1_as_printed
        >>> fappy_lemma1_as_printed(0.0, 0.9, 0.5)  # a negative outside the pair's bin [0, 0.5)
        0.0
    """
    pair_similarity, negative_similarity, delta = _checked_pair(
        pair_similarity, negative_similarity, delta)
    lower, _, h_right = (float(v) for v in _bin_position(pair_similarity, delta))
    return -h_right if lower <= negative_similarity <= lower + delta else 0.0


ROUNDING_SLACK = 1e-3
"""How far past its range a cosine (or a unit vectors' distance past 2) may lie and still be
taken as rounding (float16 resolves about 1e-3 near 1): :func:`euclidean_from_cosine` and
:func:`cosine_from_euclidean` clamp such a value and refuse one further out."""


def _check_within(name: str, values: torch.Tensor, low: float, high: float, what: str) -> None:
    """Refuse entries below ``low`` or above ``high`` (beyond :data:`ROUNDING_SLACK`), in one
    read (none inside :func:`gradlab.validation.skip_value_checks`)."""
    if not (value_checks_enabled() and values.numel()):
        return
    outside = (values < low - ROUNDING_SLACK) | (values > high + ROUNDING_SLACK)
    if bool(outside.any()):
        raise GradlabError(f"{name} must be {what}, in [{low:g}, {high:g}] up to rounding "
                           f"({ROUNDING_SLACK:g}); got {float(values[outside][0]):g}")  # fmt: skip


def euclidean_from_cosine(similarity: torch.Tensor) -> torch.Tensor:
    """Distance of L2-normalized vectors from their cosine: ``sqrt(2 - 2 s)`` (Zhong et al., app.).

    ``similarity``: cosines in ``[-1, 1]``; past that by rounding (up to
    :data:`ROUNDING_SLACK`) they are clamped, further out refused.

    Example:
        >>> import torch
        >>> from gradlab.functional import euclidean_from_cosine
        >>> euclidean_from_cosine(torch.tensor([1.0, 0.0, -1.0]))
        tensor([0.0000, 1.4142, 2.0000])
    """
    check_tensor("similarity", similarity, ndims=tuple(range(8)), kind="float", finite=True)
    _check_within("similarity", similarity, -1.0, 1.0, "a cosine")
    return torch.sqrt(torch.clamp(2.0 - 2.0 * similarity, min=0.0, max=4.0))


def cosine_from_euclidean(distance: torch.Tensor) -> torch.Tensor:
    """The inverse map: ``s = 1 - d^2 / 2`` for ``0 <= d <= 2``.

    ``distance``: distances of unit vectors in ``[0, 2]``; past that by rounding (up to
    :data:`ROUNDING_SLACK`) they are clamped, further out refused.

    Example:
        >>> import torch
        >>> from gradlab.functional import cosine_from_euclidean
        >>> cosine_from_euclidean(torch.tensor([0.0, 2.0]))
        tensor([ 1., -1.])
    """
    check_tensor("distance", distance, ndims=tuple(range(8)), kind="float", finite=True)
    _check_within("distance", distance, 0.0, 2.0, "a distance of unit vectors")
    return 1.0 - distance.clamp(min=0.0, max=2.0) ** 2 / 2.0
