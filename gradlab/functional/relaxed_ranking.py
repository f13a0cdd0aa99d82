"""Relaxed tie-aware AP and DCG over soft Hamming histograms (He et al. 2018, Eq. 13-37).

Codes ``phi`` in ``[-1, 1]^b`` (``tanh`` of network outputs) have the relaxed Hamming distance
``d(i, j) = (b - phi_i . phi_j) / 2``. Each distance is spread over the integer bins
``0 .. b`` with the triangular kernel ``delta(x, d) = max(0, 1 - |x - d|)``, giving per query
the soft counts ``c_{d,v}`` of bin ``d`` and affinity level ``v`` (Eq. 22-31). Bin 0 ranks
first (closest).

From the counts (``c_d = sum_v c_{d,v}``, ``C_d`` cumulative, ``C_{d-1}`` before the bin):

    AP_r  = sum_d c+_d/(c_d N+) [ A_d c_d + (C+_{d-1} + 1 - A_d (C_{d-1} + 1)) L(C_{d-1}, C_d) ]
    DCG_r = sum_d sum_v G(v) c_{d,v}/c_d  L_D(C_{d-1}, C_d)

with ``A_d = (c+_d - 1)/(c_d - 1)`` and ``L``, ``L_D`` the harmonic and discount stand-ins of
:mod:`gradlab.functional.harmonic` (Eq. 13 and 16 use ``method="log"``).

**Edge cases, and why.**

* Empty bin (``c_d = 0``, common: the kernel has compact support): contributes 0. Its gradient
  is not 0: the bin term is ``c+_d [A_d + B_d L/c_d]`` and ``L(C_{d-1}, C_{d-1} + c)/c`` tends to
  the stand-in's derivative at ``C_{d-1}`` (:func:`gradlab.functional.harmonic.harmonic_rate`),
  so mass entering an empty bin changes AP at first order, as it does for the exact expression.
* First bin (``C_{d-1} = 0``): the printed ``ln(C_d/0)`` and ``li(1)`` are infinite; the stand-ins
  are finite there (see :mod:`gradlab.functional.harmonic`).
* Bin holding about one item (``c_d -> 1``): ``A_d`` is ``0/0``. For integer counts it is the
  share of relevant items among the *other* items of the bin, a probability, and it multiplies
  zero when ``n_d = 1``. Relaxed, ``(c+ - 1)/(c - 1)`` has a pole at ``c = 1`` whenever
  ``c+ != 1``; gradlab clamps it to ``[0, 1]`` (its range for every integer configuration where
  it matters) above one item, and sets it to 0 for a bin of at most one item (``c <= 1``, and
  within ``1e-9`` of ``c = 1``): such a bin holds no *other* item. With ``c+ <= c`` and ``c+``
  below one item this is the clamp's own limit at ``c -> 1`` from above, so AP is continuous
  there. When ``c+`` tends to one item with ``c`` the quotient has no limit (it is 1 along
  ``c+ = c``): AP then jumps at the edge of the ``1e-9`` band, as any convention jumps
  somewhere. The clamp changes no integer configuration.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import NamedTuple

import torch

from gradlab.errors import GradlabError
from gradlab.functional.harmonic import (
    DISCOUNT_LARGEST_COUNT,
    check_harmonic_method,
    discount_rate,
    harmonic_rate,
)
from gradlab.memory import refuse_beyond_free, refused_when_out_of_memory
from gradlab.validation import (
    check_positive_int,
    check_real_device,
    check_same_device,
    check_shape,
    check_tensor,
    non_finite_message,
    number_text,
    positional_candidate_mask,
    value_checks_enabled,
)


def relaxed_hamming_distances(codes: torch.Tensor) -> torch.Tensor:
    """``[M, M]`` relaxed Hamming distances ``(b - phi_i . phi_j)/2`` of codes ``[M, b]``.

    The codes are relaxed bits in ``[-1, 1]`` (a ``tanh`` of the network's outputs; He et al.
    2018, Sec. 4): the distances then lie in ``[0, b]``. Codes outside are refused (one host
    read): their distances would leave ``[0, b]``, the range of the histogram's bins.

    Raises:
        GradlabError: ``codes`` is not a finite 2-D float tensor, or has entries outside
            ``[-1, 1]``.

    Example:
        >>> import torch
        >>> from gradlab.functional import relaxed_hamming_distances
        >>> relaxed_hamming_distances(torch.tensor([[1.0, 1.0], [1.0, -1.0]]))
        tensor([[0., 1.],
                [1., 0.]])
    """
    check_tensor("codes", codes, ndims=(2,), kind="float", finite=True)
    outside = codes.detach().abs() > 1
    _refuse_values((outside.any(), lambda: "codes must lie in [-1, 1] (relaxed bits, a tanh of "
                                           "the outputs); got "
                                           + _first_bad("codes", codes, outside)))  # fmt: skip
    return (codes.shape[1] - codes @ codes.T) / 2.0


def _refuse_values(*checks: tuple[torch.Tensor, str | Callable[[], str]]) -> None:
    """Raise the message of the first ``(bad_flag, message)`` whose 0-d flag is set (a callable
    message is built only then: it may read values).

    All flags cross to the host in one transfer (one synchronisation on a GPU); nothing is
    read inside :func:`gradlab.validation.skip_value_checks`.
    """
    if not checks or not value_checks_enabled():
        return
    bad = torch.stack([flag.reshape(()) for flag, _ in checks]).tolist()  # the one transfer
    for is_bad, (_, message) in zip(bad, checks, strict=True):
        if is_bad:
            raise GradlabError(message() if callable(message) else message)


def _non_finite(tensor: torch.Tensor) -> torch.Tensor:
    return ~torch.isfinite(tensor.detach()).all()


def _first_bad(
    name: str,
    values: torch.Tensor,
    bad: torch.Tensor,
    noun: str = "entries",
    above: tuple[str, torch.Tensor] | None = None,
) -> str:
    """``name[i, j] = value (k of n entries)``: where ``bad`` is first True, for a message;
    with ``above=(other, its values)``, ``... above other[i, j] = its value (...)``."""
    index = tuple(int(i) for i in bad.nonzero()[0])
    where = ", ".join(map(str, index))
    said = f"{name}[{where}] = {number_text(values.detach()[index])}"
    if above is not None:
        said += f" above {above[0]}[{where}] = {number_text(above[1].detach()[index])}"
    return f"{said} ({int(bad.sum())} of {bad.numel()} {noun})"


def triangular_kernel(distances: torch.Tensor, num_bins: int) -> torch.Tensor:
    """``[..., num_bins]`` weights ``max(0, 1 - |x - d|)`` of each distance for bins ``d``.

    Args:
        distances: a float tensor of any shape; a distance outside ``[0, num_bins - 1]`` keeps
            only the weight of the bins within 1 of it (none beyond ``[-1, num_bins]``).
        num_bins: the bins ``d = 0 .. num_bins - 1``, a positive integer.

    Raises:
        GradlabError: ``distances`` is not a float tensor or holds NaN (a NaN distance has no
            bin; one host read), ``num_bins`` not a positive int, or the weights more than
            the device could allocate.

    Example:
        >>> import torch
        >>> from gradlab.functional import triangular_kernel
        >>> triangular_kernel(torch.tensor([0.25, 2.0]), num_bins=3)
        tensor([[0.7500, 0.2500, 0.0000],
                [0.0000, 0.0000, 1.0000]])
    """
    any_shape = (distances.dim(),) if isinstance(distances, torch.Tensor) else ()
    check_tensor("distances", distances, ndims=any_shape, kind="float")
    num_bins = check_positive_int("num_bins", num_bins)
    if distances.numel() and value_checks_enabled():
        check_real_device(distances=distances)  # a meta tensor has no values to read
        nan = distances.isnan()
        if bool(nan.any()):  # an infinite distance weighs no bin; a NaN gave NaN weights
            raise GradlabError(f"distances must not be NaN (a NaN distance has no bin); got "
                               f"{int(nan.sum())} NaN of {distances.numel()}")  # fmt: skip
    # the weights' bytes, and the bins' centres
    need = (distances.numel() + 1) * num_bins * distances.element_size()

    def refusal(needed: str, free: str | None) -> str:
        beyond = "could allocate" if free is None else f"has free ({free} GiB)"
        return (f"num_bins = {num_bins} asks for {distances.numel()} x {num_bins} weights "
                f"({needed} GiB), more than {distances.device} {beyond}: pass fewer bins or "
                "fewer distances")  # fmt: skip

    if need > _FREE_MEMORY_READ_FROM:  # read the free memory only for large weights
        refuse_beyond_free(need, str(distances.device), refusal)
    with refused_when_out_of_memory(refusal(f"{need / 2**30:.1f}", None)):
        return _triangular_kernel(distances, num_bins)


_FREE_MEMORY_READ_FROM = 1 << 30
"""Weights of :func:`triangular_kernel` past this many bytes are first compared with the
device's free memory (an allocation the system overcommits would fail only when written)."""


def _triangular_kernel(distances: torch.Tensor, num_bins: int) -> torch.Tensor:
    """:func:`triangular_kernel` of checked arguments."""
    centres = torch.arange(num_bins, dtype=distances.dtype, device=distances.device)
    return torch.clamp(1.0 - (distances.unsqueeze(-1) - centres).abs(), min=0.0)


@positional_candidate_mask(4)
def soft_histogram(
    distances: torch.Tensor,
    levels: torch.Tensor,
    num_bins: int,
    num_levels: int,
    *,
    candidate_mask: torch.Tensor | None = None,
) -> torch.Tensor:
    """Soft counts ``c_{d,v}`` ``[Q, num_bins, num_levels]`` of ``[Q, C]`` distances (Eq. 22-31).

    Args:
        distances: ``[Q, C]`` relaxed distances, ``0 <= x <= num_bins - 1``.
        levels: ``[Q, C]`` integer affinity level of each candidate, in ``0 .. num_levels - 1``.
        num_bins: ``b + 1`` for ``b``-bit codes.
        num_levels: number of affinity levels (2 for relevant / not).
        candidate_mask: optional ``[Q, C]`` bool mask of the columns that count (``False`` on the
            query itself in in-batch retrieval).

    Raises:
        GradlabError: wrong shapes or dtypes, NaN/inf distances, a distance of a counted
            column outside ``[0, num_bins - 1]``, or a level outside ``0 .. num_levels - 1``
            (one host read for the value checks).

    Example:
        >>> import torch
        >>> from gradlab.functional import soft_histogram
        >>> counts = soft_histogram(torch.tensor([[0.5, 2.0]]), torch.tensor([[1, 0]]), 3, 2)
        >>> counts[0].T  # rows: level 0, level 1; columns: bins 0, 1, 2
        tensor([[0.0000, 0.0000, 1.0000],
                [0.5000, 0.5000, 0.0000]])
    """
    check_tensor("distances", distances, ndims=(2,), kind="float")
    check_tensor("levels", levels, ndims=(2,), kind="integer")
    check_shape("levels", levels, distances.shape, "one level per distance")
    num_bins = check_positive_int("num_bins", num_bins)
    num_levels = check_positive_int("num_levels", num_levels)
    if candidate_mask is not None:
        check_tensor("candidate_mask", candidate_mask, ndims=(2,), kind="bool")
        check_shape("candidate_mask", candidate_mask, distances.shape, "one flag per distance")
        check_same_device(distances=distances, candidate_mask=candidate_mask)
    check_real_device(distances=distances, levels=levels)  # the value checks read them
    outside = (distances < 0) | (distances > num_bins - 1)  # their weight would be lost
    if candidate_mask is not None:
        outside &= candidate_mask  # a column that does not count may lie anywhere
    _refuse_values(
        (_non_finite(distances), lambda: non_finite_message("distances", distances)),
        (
            outside.any(),
            lambda: f"distances must lie in [0, num_bins - 1] = [0, {num_bins - 1}] (a "
            f"distance outside loses part of its unit count); got "
            f"{number_text(distances.detach()[outside].min())} .. "
            f"{number_text(distances.detach()[outside].max())} among those outside",
        ),
        (
            ((levels < 0) | (levels >= num_levels)).any(),
            lambda: f"levels must lie in 0 .. num_levels - 1 = {num_levels - 1}; got "
            + _first_bad("levels", levels, (levels < 0) | (levels >= num_levels)),
        ),
    )
    weights = _triangular_kernel(distances, num_bins)
    if candidate_mask is not None:
        weights = weights * candidate_mask.unsqueeze(-1)
    one_hot = torch.nn.functional.one_hot(levels.long(), num_levels).to(distances.dtype)
    return torch.einsum("qcd,qcv->qdv", weights, one_hot)


def _safe_ratio(numerator: torch.Tensor, denominator: torch.Tensor) -> torch.Tensor:
    """``numerator / denominator``, 0 where the denominator is not positive (gradient-safe)."""
    nonzero = denominator > 0
    return torch.where(nonzero, numerator / torch.where(nonzero, denominator, 1.0), 0.0)


def _count_checks(
    num_positives: torch.Tensor | None, positive_counts: torch.Tensor | None = None
) -> list:
    """:func:`_refuse_values` checks of an ``N+`` given: finite, at least 0 and, with the soft
    counts ``positive_counts``, at least their sum per query (up to the square root of the
    dtype's epsilon, relative: soft counts summed in another order, or in float32)."""
    if num_positives is None:
        return []
    values = num_positives.detach()
    checks = [
        (~torch.isfinite(values).all(), lambda: non_finite_message("num_positives", values)),
        ((values < 0).any(), lambda: "num_positives must be >= 0 (a count of relevant items); "
                                     f"got {number_text(values.min())}"),
    ]  # fmt: skip
    if positive_counts is None:
        return checks
    counted = positive_counts.detach().sum(dim=1)
    rounding = torch.finfo(counted.dtype).eps ** 0.5 * counted  # a sum of soft counts
    short = values.to(counted.dtype) < counted - rounding
    checks.append((short.any(), lambda: (
        "num_positives must be at least the relevant items the soft counts hold, "
        "positive_counts.sum(-1) per query (fewer would give an AP above 1); got "
        + _first_bad("num_positives", values, short, "queries")
        + f" below {number_text(counted[short][0])}")))  # fmt: skip
    return checks


def relaxed_tie_aware_ap(
    positive_counts: torch.Tensor,
    counts: torch.Tensor,
    method: str = "log",
    num_positives: torch.Tensor | None = None,
) -> torch.Tensor:
    """Relaxed tie-aware AP from soft counts (He et al. 2018, suppl., Eq. 13), per query.

    Args:
        positive_counts: ``[Q, D]`` soft counts ``c+_d`` of relevant items per bin (bin 0 first),
            finite, ``0 <= positive_counts <= counts``.
        counts: ``[Q, D]`` soft counts ``c_d`` of all items, finite, ``>= positive_counts``.
        method: harmonic stand-in, ``"log"`` (Eq. 13 as printed, finite at the first bin),
            ``"midpoint"`` or ``"exact"`` (digamma; equals tie-aware AP at integer counts).
        num_positives: ``[Q]`` real tensor, ``N+``, finite and at least
            ``positive_counts.sum(-1)`` (the relevant items the soft counts hold; more when
            some fall outside the bins); defaults to that sum.

    Returns:
        ``[Q]`` relaxed AP; NaN where ``N+ = 0``. At integer counts ``"exact"`` is tie-aware
        AP, in ``[0, 1]``; at fractional counts Eq. 13 is a relaxation, not an AP, and can
        exceed 1 with every stand-in (then ``1 - AP`` is below 0), as the last example shows.

    Raises:
        GradlabError: wrong shapes or dtypes, counts that are not finite or break
            ``0 <= positive_counts <= counts``, or an ``N+`` that is not finite or below the
            soft counts' sum (the value checks share one host read).

    Example:
        >>> import torch
        >>> from gradlab.functional import relaxed_tie_aware_ap
        >>> positive = torch.tensor([[1.0, 0.0, 1.0]], dtype=torch.float64)
        >>> total = torch.tensor([[1.0, 2.0, 1.0]], dtype=torch.float64)
        >>> relaxed_tie_aware_ap(positive, total, method="exact")
        tensor([0.7500], dtype=torch.float64)
        >>> soft = torch.tensor([[0.9, 0.1]], dtype=torch.float64)  # 0.9 relevant, alone first
        >>> [round(relaxed_tie_aware_ap(soft, torch.tensor([[0.9, 1.1]], dtype=torch.float64),
        ...                             method).item(), 4) for method in ("exact", "log")]
        [1.0313, 1.037]
    """
    check_harmonic_method(method)
    check_tensor("positive_counts", positive_counts, ndims=(2,), kind="float")
    check_tensor("counts", counts, ndims=(2,), kind="float")
    check_shape("counts", counts, positive_counts.shape, "one count per bin")
    check_same_device(positive_counts=positive_counts, counts=counts)
    if num_positives is not None:
        check_tensor("num_positives", num_positives, ndims=(1,), kind="any_real")
        check_shape("num_positives", num_positives, positive_counts.shape[:1],
                    "one count per query")  # fmt: skip
        check_same_device(positive_counts=positive_counts, num_positives=num_positives)
    check_real_device(positive_counts=positive_counts, counts=counts)  # the value checks read
    _refuse_values(
        (_non_finite(positive_counts), lambda: non_finite_message("positive_counts",
                                                                   positive_counts)),
        (_non_finite(counts), lambda: non_finite_message("counts", counts)),
        (
            (positive_counts.detach() < 0).any(),
            lambda: "positive_counts must be >= 0 (soft counts); got "
            + _first_bad("positive_counts", positive_counts, positive_counts.detach() < 0),
        ),
        (
            (positive_counts.detach() > counts.detach()).any(),
            lambda: "positive_counts must be <= counts bin by bin (relevant items are among all "
            "items); got " + _first_bad("positive_counts", positive_counts,
                                        positive_counts.detach() > counts.detach(),
                                        above=("counts", counts)),
        ),
        *_count_checks(num_positives, positive_counts),
    )
    total = positive_counts.sum(dim=1) if num_positives is None else num_positives
    after = counts.cumsum(dim=1)
    before = after - counts
    positives_before = positive_counts.cumsum(dim=1) - positive_counts
    near_one = (counts - 1.0).abs() < 1e-9
    share = _safe_ratio(positive_counts - 1.0, torch.where(near_one, 1.0, counts - 1.0))
    share = torch.where(near_one, 0.0, share.clamp(0.0, 1.0))
    # (c+/c) [A c + B L(C_{d-1}, C_d)] = c+ [A + B L/c]: no division by a count, and the
    # empty-bin limit L/c -> L'(C_{d-1}) gives the right first-order change there.
    rate = harmonic_rate(before, counts, method)
    per_bin = positive_counts * (share + (positives_before + 1.0 - share * (before + 1.0)) * rate)
    defined = total > 0
    return torch.where(defined, per_bin.sum(dim=1) / torch.where(defined, total, 1.0), torch.nan)


def relaxed_tie_aware_dcg(
    level_counts: torch.Tensor, level_gains: torch.Tensor, method: str = "log"
) -> torch.Tensor:
    """Relaxed tie-aware DCG from soft counts ``[Q, D, V]`` (He et al. 2018, Eq. 15-16), per query.

    ``level_gains`` ``[V]`` holds ``G(v)`` of each affinity level. ``method="log"`` is the
    printed logarithmic integral (finite at the first bin), ``"midpoint"`` shifts it by 1/2,
    ``"exact"`` equals tie-aware DCG at integer counts. ``level_counts`` must be finite and
    ``>= 0``, at most 1e7 items per query, ``level_gains`` finite (one host read for the value
    checks).

    Example:
        >>> import torch
        >>> from gradlab.functional import relaxed_tie_aware_dcg
        >>> counts = torch.tensor([[[1.0, 1.0], [0.0, 1.0]]], dtype=torch.float64)
        >>> round(relaxed_tie_aware_dcg(counts, torch.tensor([0.0, 1.0]), "exact").item(), 4)
        1.3155
    """
    check_harmonic_method(method)
    check_tensor("level_counts", level_counts, ndims=(3,), kind="float")
    check_tensor("level_gains", level_gains, ndims=(1,), kind="float")
    if level_gains.shape[0] != level_counts.shape[2]:
        raise GradlabError(
            f"level_gains must have one gain per level ({level_counts.shape[2]}); "
            f"got {level_gains.shape[0]}"
        )
    check_real_device(level_counts=level_counts, level_gains=level_gains)  # the value checks
    _refuse_values(
        (_non_finite(level_counts), lambda: non_finite_message("level_counts", level_counts)),
        (_non_finite(level_gains), lambda: non_finite_message("level_gains", level_gains)),
        ((level_counts.detach() < 0).any(),
         lambda: "level_counts must be >= 0; got "
         + _first_bad("level_counts", level_counts, level_counts.detach() < 0)),
        ((level_counts.detach().sum(dim=(1, 2)) > DISCOUNT_LARGEST_COUNT).any(),
         lambda: f"level_counts must hold at most {DISCOUNT_LARGEST_COUNT:g} items per query "
         "(the discount stand-ins are defined up to that many); got "
         f"{number_text(level_counts.detach().sum(dim=(1, 2)).max())}"),
    )
    counts = level_counts.sum(dim=2)
    before = counts.cumsum(dim=1) - counts
    # mean gain x discount sum = (sum_v G(v) c_{d,v}) x (discount sum / c_d), see AP above.
    gain_mass = (level_counts * level_gains.to(level_counts.dtype)).sum(dim=2)
    return (gain_mass * discount_rate(before, counts, method)).sum(dim=1)


def minibatch_objective_terms(
    codes: torch.Tensor,
    labels: torch.Tensor,
    objective: str = "ap",
    method: str = "log",
    level_gains: torch.Tensor | None = None,
) -> tuple[torch.Tensor, torch.Tensor]:
    """Per-query soft counts and the objective ``O_i`` of in-batch retrieval (Eq. 22-23).

    Each code queries the rest of the batch (the query is not its own candidate). Affinity is
    binary, ``v = [label_i == label_j]``. Returns ``(counts [M, b+1, 2], objective [M])``;
    ``objective`` is computed from ``counts`` so that ``d O_i / d counts`` is ``alpha`` of Eq. 24.
    Codes off ``{-1, 1}`` give fractional soft counts, where the relaxed AP can exceed 1
    (:func:`relaxed_tie_aware_ap`).

    Example:
        >>> import torch
        >>> from gradlab.functional import minibatch_objective_terms
        >>> codes = torch.tensor([[1.0, 1.0], [1.0, 0.9], [-1.0, -1.0], [-0.9, -1.0]])
        >>> counts, objective = minibatch_objective_terms(codes, torch.tensor([0, 0, 1, 1]))
        >>> tuple(counts.shape), objective.shape
        ((4, 3, 2), torch.Size([4]))
    """
    level_gains = _check_minibatch(codes, labels, objective, method, level_gains)
    batch = _minibatch_histograms(codes, labels, objective)
    return batch.counts, counts_objective(batch.counts, objective, method, level_gains, batch)


def _check_minibatch(
    codes: object, labels: object, objective: object, method: object, level_gains: object
) -> torch.Tensor | None:
    """Every argument of the minibatch functions, before any histogram is built; returns the
    gains the DCG uses (``[0, 1]`` when none are given)."""
    check_tensor("codes", codes, ndims=(2,), kind="float", finite=True)
    check_tensor("labels", labels, ndims=(1,), kind="integer")
    check_shape("labels", labels, codes.shape[:1], "one label per code")
    check_same_device(codes=codes, labels=labels)
    if objective not in ("ap", "dcg"):
        raise GradlabError(f"objective must be 'ap' or 'dcg'; got {objective!r}")
    check_harmonic_method(method)
    if level_gains is None:
        return None
    if objective == "ap":
        raise GradlabError(
            "level_gains are the gains of objective='dcg'; objective='ap' has binary relevance "
            f"and no gains, so pass none; got {type(level_gains).__name__}"
        )
    check_tensor("level_gains", level_gains, ndims=(1,), kind="float", finite=True)
    if level_gains.shape[0] != 2:
        raise GradlabError(
            "level_gains must have one gain per affinity level (2: a different label, the "
            f"same label); got {level_gains.shape[0]}"
        )
    check_same_device(codes=codes, level_gains=level_gains)
    return level_gains


class _MinibatchHistograms(NamedTuple):
    distances: torch.Tensor
    levels: torch.Tensor
    not_self: torch.Tensor
    counts: torch.Tensor


def _minibatch_histograms(
    codes: torch.Tensor, labels: torch.Tensor, objective: str
) -> _MinibatchHistograms:
    """Relaxed distances, binary affinity levels, the self mask and the soft counts (Eq. 22-31)."""
    if objective not in ("ap", "dcg"):
        raise GradlabError(f"objective must be 'ap' or 'dcg'; got {objective!r}")
    check_tensor("labels", labels, ndims=(1,), kind="integer")
    check_shape("labels", labels, codes.shape[:1], "one label per code")
    distances = relaxed_hamming_distances(codes)
    levels = (labels.unsqueeze(0) == labels.unsqueeze(1)).long()
    not_self = ~torch.eye(len(labels), dtype=torch.bool, device=codes.device)
    counts = soft_histogram(distances, levels, codes.shape[1] + 1, 2, candidate_mask=not_self)
    return _MinibatchHistograms(distances, levels, not_self, counts)


def counts_objective(
    counts: torch.Tensor,
    objective: str,
    method: str,
    level_gains: torch.Tensor | None,
    batch: _MinibatchHistograms,
) -> torch.Tensor:
    """``O_i`` from counts ``[M, D, 2]``: relaxed AP (``N+`` from the labels) or DCG."""
    if objective == "ap":
        num_positives = (batch.levels.bool() & batch.not_self).sum(dim=1).to(counts.dtype)
        return relaxed_tie_aware_ap(counts[..., 1], counts.sum(dim=2), method, num_positives)
    gains = (
        level_gains if level_gains is not None else torch.tensor([0.0, 1.0], device=counts.device)
    )
    return relaxed_tie_aware_dcg(counts, gains.to(counts.dtype), method)


def minibatch_gradient_matrix_form(
    codes: torch.Tensor,
    labels: torch.Tensor,
    objective: str = "ap",
    method: str = "log",
    level_gains: torch.Tensor | None = None,
) -> torch.Tensor:
    """``d O / d phi`` of the minibatch objective ``O = mean_i O_i`` (He et al. 2018, Eq. 37).

    ``d O / d Phi = -Phi / (2M) sum_{d,v} (A_{d,v} B_{d,v} + B_{d,v} A_{d,v})`` with
    ``A_{d,v} = diag(alpha^{(i)}_{d,v})`` (``alpha = d O_i / d c^{(i)}_{d,v}``, Eq. 24) and
    ``B_{d,v}(i, j) = [v_ij = v] delta'_d(d(i, j))`` (Eq. 28, zero diagonal). Returned as
    ``[M, b]`` like ``codes`` (the transpose of the paper's ``b x M``). ``delta'_d(x)`` is the
    kernel's slope ``-sign(x - d)`` inside its open support ``|x - d| < 1`` and 0 at its kinks
    (``x = d`` and ``|x - d| = 1``), so at binary codes, where every distance is an integer,
    the result is 0 (autograd of the terms picks other values at the kinks). A query without
    a positive (its ``O_i`` undefined, NaN) adds no term but still counts in ``M``: the
    result is ``d/d phi`` of ``sum_i O_i / M`` over the queries that have one, not of the mean
    over those queries alone (nor NaN).

    Example:
        >>> import torch
        >>> from gradlab.functional import minibatch_gradient_matrix_form
        >>> codes = torch.tanh(torch.randn(6, 4, dtype=torch.float64))
        >>> minibatch_gradient_matrix_form(codes, torch.tensor([0, 0, 1, 1, 2, 2])).shape
        torch.Size([6, 4])
    """
    level_gains = _check_minibatch(codes, labels, objective, method, level_gains)
    size, bits = codes.shape
    batch = _minibatch_histograms(codes.detach(), labels, objective)
    with torch.enable_grad():
        leaf_counts = batch.counts.clone().requires_grad_(True)
        value = counts_objective(leaf_counts, objective, method, level_gains, batch)
        (alpha,) = torch.autograd.grad(value.sum(), leaf_counts)  # [M, D, V]
    centres = torch.arange(bits + 1, dtype=codes.dtype, device=codes.device)
    offset = batch.distances.unsqueeze(-1) - centres  # [M, M, D]
    kernel_slope = torch.where(offset.abs() < 1.0, -torch.sign(offset), 0.0)
    one_hot = torch.nn.functional.one_hot(batch.levels, 2).to(codes.dtype)
    one_hot = one_hot * batch.not_self.unsqueeze(-1)
    beta = kernel_slope.unsqueeze(-1) * one_hot.unsqueeze(2)  # [M, M, D, V], beta(i, j)
    # sum_{d,v} (A B + B A)_{ij} = sum_{d,v} (alpha_i + alpha_j) beta(i, j)
    combined = (beta * (alpha.unsqueeze(1) + alpha.unsqueeze(0))).sum(dim=(2, 3))
    return -(combined @ codes.detach()) / (2.0 * size)
