"""The geometry of a batch of embeddings, its ranking margins and the temperature's gradient.

Collapse, spread and separation measures that embedding-model users log, each a pure function:

* :func:`alignment` and :func:`uniformity`: Wang & Isola (2020), Eq. 4 and Eq. 5 (uniformity
  as a log of a sum that never underflows: the exponentials as they are up to ``t = 50``,
  where the smallest is ``exp(-200)``, and a shifted log-sum-exp past it);
* :func:`effective_rank`: RankMe's formula (Garrido et al. 2023, Eq. 1), the exponential of the
  entropy of the normalised singular values, on the **centred** embeddings (RankMe itself takes
  them uncentred, so its published values are not comparable), also returned over its largest
  possible value ``min(N - 1, d)`` (a centred ``N x d`` matrix has rank at most ``N - 1``:
  dividing by ``min(N, d)`` as MONAI's collapse metric does caps a full-rank batch at
  ``(N - 1) / N`` when ``N <= d``);
* :func:`normalized_std`: the per-dimension standard deviation of the L2-normalised
  embeddings, averaged over dimensions, times ``sqrt(d)`` (SimSiam, Chen & He 2021, Sec. 4.1:
  about 1 for spread-out embeddings, 0 for collapsed ones);
* :func:`query_margins`: per query, the positive score, the hardest negative, the margin, the
  share of negatives that violate it and in-batch R@1; :func:`in_batch_margins` gives the same
  for an in-batch matrix with fewer passes, reading a sort of its rows it is given;
* :func:`in_batch_alignment_uniformity`: alignment and uniformity of one in-batch cosine
  matrix, without building its ``[N, N]`` masks (the same values as the two functions);
* :func:`chance_level`: ``ln C``, the InfoNCE loss of a model that scores every candidate alike;
* :func:`modality_gap`: the distance between the centroids of two modalities' normalised
  embeddings (Liang et al. 2022, "Mind the Gap", Sec. 4.1);
* :func:`temperature_gradient`: ``dL/d log s`` of InfoNCE with logits ``s * S`` in closed form,
  ``s * (E_softmax[S] - S_positive)`` (the softmax-expected logit minus the positive logit).

Conventions: scores are cosine similarities ``[Q, C]`` (a larger score ranks higher), rows are
queries; ``candidate_mask`` False removes an entry (in-batch: the query itself); positives are
candidates. Values that have no meaning for a query (no positive, no negative) are NaN; NaN or
infinite embeddings or scores are refused with a ``GradlabError`` naming the argument and the
first such row (one value read, skipped inside ``gradlab.validation.skip_value_checks``, where
the Monitor calls these measures on inputs it has checked).
"""

from __future__ import annotations

import math
import numbers
from typing import NamedTuple

import numpy as np
import torch

from gradlab.errors import GradlabError
from gradlab.functional.fappy import COSINE_SLACK
from gradlab.functional.layouts import unit_rows
from gradlab.functional.score_losses import DIRECTIONS as SCORE_LOSS_DIRECTIONS
from gradlab.validation import (
    check_bool,
    check_finite,
    check_in_range,
    check_real_device,
    check_same_device,
    check_shape,
    check_tensor,
    finite_flag,
    number_text,
    value_checks_enabled,
)

__all__ = [
    "DIRECTIONS",
    "EffectiveRank",
    "QueryMargins",
    "alignment",
    "chance_level",
    "effective_rank",
    "in_batch_alignment_uniformity",
    "in_batch_margins",
    "modality_gap",
    "normalized_std",
    "query_margins",
    "temperature_gradient",
    "uniformity",
]

DIRECTIONS = SCORE_LOSS_DIRECTIONS
"""Directions of :func:`temperature_gradient`, the score losses' (``"both"``, ``"i2t"``,
``"t2i"``): both directions (here their mean, CLIP's symmetric loss, Radford et al. 2021;
open_clip's ``ClipLoss``), rows as queries, columns as queries."""


def _check_scores(
    scores: torch.Tensor,
    positives: torch.Tensor,
    candidate_mask: torch.Tensor | None,
    *,
    cosines: bool = False,
) -> None:
    check_tensor("scores", scores, ndims=(2,), kind="float")
    check_tensor("positives", positives, ndims=(2,), kind="bool")
    check_shape("positives", positives, scores.shape, "one flag per score")
    if candidate_mask is not None:
        check_tensor("candidate_mask", candidate_mask, ndims=(2,), kind="bool")
        check_shape("candidate_mask", candidate_mask, scores.shape, "one flag per score")
        check_same_device(scores=scores, positives=positives, candidate_mask=candidate_mask)
    else:
        check_same_device(scores=scores, positives=positives)
    (_check_cosines if cosines else _check_finite)("scores", scores)


def _check_cosines(name: str, values: torch.Tensor) -> None:
    """Refuse NaN, infinite or out-of-range entries of a matrix of cosines: ``[-1, 1]`` up to
    rounding (:data:`~gradlab.functional.fappy.COSINE_SLACK`), one value read. Logits or dot
    products are no cosines: their distances ``2 - 2 s`` mean nothing."""
    if values.device.type == "meta" or not value_checks_enabled() or not values.numel():
        return
    slack = 1.0 + max(COSINE_SLACK, 8 * torch.finfo(values.dtype).eps)
    if bool(finite_flag(values, slack)):
        return
    check_finite(name, values)  # NaN or inf: named as everywhere
    low, high = torch.aminmax(values.detach())
    worst = float(high) if float(high) > -float(low) else float(low)
    raise GradlabError(f"{name} must be cosine similarities in [-1, 1] (up to rounding, "
                       f"{COSINE_SLACK:g}); got {number_text(worst)}")  # fmt: skip


def _check_finite(name: str, values: torch.Tensor) -> None:
    """Refuse NaN or infinite entries, which would pass into every mean (one value read); a
    meta tensor, a shape without values, is computed on as it is (a result on "meta")."""
    if values.device.type != "meta":
        check_finite(name, values)


def _check_embeddings(name: str, embeddings: torch.Tensor, least: int = 1) -> None:
    check_tensor(name, embeddings, ndims=(2,), kind="float")
    if embeddings.shape[0] < least or embeddings.shape[1] < 1:
        raise GradlabError(
            f"{name} must have at least {least} row(s) and 1 column; got shape "
            f"{tuple(embeddings.shape)}"
        )
    _check_finite(name, embeddings)


def _masks(
    positives: torch.Tensor, candidate_mask: torch.Tensor | None
) -> tuple[torch.Tensor, torch.Tensor]:
    """Positives and negatives, both restricted to the candidates."""
    if candidate_mask is None:
        return positives, ~positives
    return positives & candidate_mask, candidate_mask & ~positives


def alignment(
    scores: torch.Tensor,
    positives: torch.Tensor,
    alpha: float = 2.0,
    *,
    candidate_mask: torch.Tensor | None = None,
) -> torch.Tensor:
    """Alignment of positive pairs: Wang & Isola (2020), Eq. 4, from cosine scores.

    ``E_(x, y) positive ||f(x) - f(y)||^alpha`` over unit vectors, whose squared distance is
    ``2 - 2 s`` for the cosine score ``s``; the mean runs over every positive pair (entries of
    ``positives`` that are candidates). 0: positives coincide; 4 (alpha = 2): they are opposite.
    A zero embedding, whose cosines are 0, stands at squared distance 2 from its positives.

    Args:
        scores: ``[Q, C]`` cosine similarities.
        positives: ``[Q, C]`` bool.
        alpha: the exponent, > 0 (Wang & Isola use 2).
        candidate_mask: ``[Q, C]`` bool or None (every entry a candidate).

    Returns:
        A 0-d float64 tensor without a graph (a measure of detached scores); NaN when there is
        no positive pair.

    Raises:
        GradlabError: a bad tensor, shape, device or ``alpha``; scores outside ``[-1, 1]``
            beyond rounding (logits or dot products are no cosines).

    Example:
        >>> import torch
        >>> from gradlab.functional import alignment
        >>> scores = torch.tensor([[1.0, 0.0], [0.0, 1.0]])
        >>> float(alignment(scores, torch.tensor([[True, True], [False, True]])))  # 0, 2, 0
        0.6666666666666666
    """
    _check_scores(scores, positives, candidate_mask, cosines=True)
    alpha = check_in_range("alpha", alpha, 1e-12, 1e6)
    keep, _ = _masks(positives, candidate_mask)
    aligned, kept, _, _ = _block_sums(scores, keep, alpha, None)
    return aligned / kept


_BLOCK_ENTRIES = 1 << 15
"""Entries per block of rows in the float64 passes over a CPU score matrix (256 KiB): a block
stays in cache and the allocator hands the same memory back, where a fresh ``[B, B]`` float64
matrix costs a page fault per 4 KiB (about half of those passes' time at B = 1024)."""


def _row_blocks(scores: torch.Tensor) -> list[slice]:
    """Row slices of ``scores`` of at most :data:`_BLOCK_ENTRIES` entries (at least one row),
    on a CPU; one slice of every row elsewhere (a GPU's caching allocator reuses its blocks,
    and each slice costs kernel launches); none for a matrix without rows."""
    rows, columns = scores.shape
    step = rows if scores.device.type != "cpu" else max(1, _BLOCK_ENTRIES // max(columns, 1))
    step = max(step, 1)  # no rows off a CPU: range() refuses a step of 0
    return [slice(start, min(start + step, rows)) for start in range(0, rows, step)]


def _squared_distances(scores: torch.Tensor) -> torch.Tensor:
    """``2 - 2 s`` clamped to ``[0, 4]`` in a new float64 tensor: the squared distance of unit
    vectors whose cosine is ``s`` (a cosine rounded past 1 or -1 is distance 0 or 4)."""
    distances = scores.to(torch.float64, copy=True)
    # 2 - 2 s in one pass: 2 s is exact, so this is (-2 s) + 2 bit for bit
    torch.sub(distances.new_full((), 2.0), distances, alpha=2.0, out=distances)
    return distances.clamp_(min=0.0, max=4.0)


def _block_sums(
    scores: torch.Tensor,
    keep: torch.Tensor | None,
    alpha: float,
    t: float | None,
    *,
    drop_diagonal: bool = False,
    kept: torch.Tensor | None = None,
) -> tuple[torch.Tensor, torch.Tensor | None, torch.Tensor, torch.Tensor | None]:
    """One pass over the squared distances ``d = 2 - 2 s`` of ``scores``, block of rows by
    block, in float64: ``sum over keep of d^(alpha / 2)`` (``keep`` given) and, for a square
    cosine matrix of N >= 2 unit vectors (``t`` given), ``sum over i != j of exp(-t d - m)``
    with ``m`` the largest exponent past :data:`_UNSHIFTED_T` (``None`` up to it: no
    exponential underflows there), found in one more pass as ``-t`` times the smallest
    distance off the diagonal. ``drop_diagonal``: the diagonal of ``keep`` is not kept.
    Returns ``(aligned, kept, kernel, m)``, ``kept`` the number of entries kept (0-d int64;
    None without ``keep``; the caller's ``kept`` when given, not counted again).

    On a CPU (float32/float64 scores) the alignment reads only the kept entries
    (:func:`_kept_sum`: a few per row, where a masked pass reads every one); elsewhere it is a
    masked sum of each block.
    """
    scores = scores.detach()  # a measure, not a loss: no graph (its passes work in place)
    blocks = _row_blocks(scores)
    largest = None
    if t is not None and t > _UNSHIFTED_T:
        nearest = torch.full((), math.inf, dtype=torch.float64, device=scores.device)
        for rows in blocks:
            distances = _squared_distances(scores[rows])
            distances.diagonal(rows.start).fill_(math.inf)  # entry (i, i) of row i
            nearest = torch.minimum(nearest, distances.amin())
        largest = nearest.mul_(-t)
        largest = largest.masked_fill_(largest.abs() == math.inf, 0.0)
    # Each sum starts from its first block's: its entries are +0.0 or more (or NaN), so this
    # is the sum started from 0 bit for bit (0 + x is x), without the zero and its addition.
    aligned, kernel = None, None
    if keep is not None and _sums_kept_entries(scores):
        aligned, kept = _kept_sum(scores, keep, alpha, drop_diagonal)
        keep = None  # summed
    elif keep is not None:
        if drop_diagonal:
            keep = keep.clone().fill_diagonal_(False)
        kept = keep.sum() if kept is None else kept
    if keep is not None or t is not None:
        whole = len(blocks) == 1  # one block of every row: no slices to make
        for rows in blocks:
            distances = _squared_distances(scores if whole else scores[rows])
            if keep is not None:
                powered = distances.pow(alpha / 2.0) if alpha != 2.0 else distances
                part = torch.where(keep if whole else keep[rows], powered, 0.0).sum()
                aligned = part if aligned is None else aligned + part
            if t is not None:  # in place: the alignment has read the distances
                exponents = distances.mul_(-t)
                if largest is not None:
                    exponents.sub_(largest)
                values = exponents.exp_()
                values.diagonal(rows.start).fill_(0.0)
                part = values.sum()
                kernel = part if kernel is None else kernel + part
    if aligned is None or kernel is None:  # a sum that read no block: 0
        zero = torch.zeros((), dtype=torch.float64, device=scores.device)
        aligned = zero if aligned is None else aligned
        kernel = zero.clone() if kernel is None else kernel
    return aligned, kept, kernel, largest


def _kept_entries(keep: torch.Tensor, drop_diagonal: bool) -> tuple[np.ndarray, np.ndarray]:
    """Rows and columns (int64) of the True entries of a CPU ``[Q, C]`` bool mask, row by row
    and in each row by column (one NumPy search of the mask); the diagonal's left out when
    ``drop_diagonal``."""
    # row-major, as a boolean index reads them (NumPy reads the CPU tensor in place)
    flat = np.flatnonzero(np.from_dlpack(keep.detach()))
    rows, cols = np.divmod(flat, max(keep.shape[1], 1))
    if drop_diagonal:
        off = rows != cols
        rows, cols = rows[off], cols[off]
    return rows, cols


_KEPT_ENTRIES_FROM = 1 << 16
"""Score matrices of at least this many entries (B >= 256 in-batch) read their kept entries
alone on a CPU: below it the masked passes are cheaper than the search's fixed cost (about
45 us more per function at 112 x 112, even at 256 x 256, one thread)."""


def _sums_kept_entries(scores: torch.Tensor) -> bool:
    """Whether the alignment and the margins read the kept entries of ``scores`` alone
    (:func:`_kept_sum`, :func:`_positive_rows`): float32 or float64 on a CPU, where finding
    them is a host-side NumPy search, of at least :data:`_KEPT_ENTRIES_FROM` entries; smaller
    matrices, other devices and dtypes take masked passes."""
    return (scores.device.type == "cpu" and scores.dtype in (torch.float32, torch.float64)
            and scores.numel() >= _KEPT_ENTRIES_FROM)  # fmt: skip


def _kept_sum(
    scores: torch.Tensor, keep: torch.Tensor, alpha: float, drop_diagonal: bool
) -> tuple[torch.Tensor, torch.Tensor]:
    """``sum over keep of d^(alpha / 2)`` of a CPU matrix and the number of kept entries,
    from the kept entries alone, in row-major order (one search of the mask for them; the
    distances as :func:`_squared_distances` makes them). In-batch positives are a few per row:
    about 10x faster at 1024 x 1024 than a masked pass over every entry, and the same sum up
    to its order (a few float64 ulps)."""
    rows, cols = _kept_entries(keep, drop_diagonal)
    values = scores.detach()[torch.from_numpy(rows), torch.from_numpy(cols)]
    distances = _squared_distances(values)
    powered = distances.pow(alpha / 2.0) if alpha != 2.0 else distances
    return powered.sum(), torch.tensor(rows.shape[0], dtype=torch.int64)


_UNSHIFTED_T = 50.0
"""Up to this ``t`` every kernel value ``exp(-t d)`` of a squared distance ``d`` in ``[0, 4]``
is at least ``exp(-200)``, a normal float64: :func:`_block_sums` sums them as they are."""


def _log_mean(kernel: torch.Tensor, largest: torch.Tensor | None, size: int) -> torch.Tensor:
    """``log mean_(i != j) exp(-t d_ij)`` of N = ``size`` points from :func:`_block_sums`."""
    value = kernel.log() - math.log(size * (size - 1))
    return value if largest is None else value + largest


def uniformity(
    embeddings: torch.Tensor, t: float = 2.0, *, gram: torch.Tensor | None = None
) -> torch.Tensor:
    """Uniformity of the normalised embeddings: Wang & Isola (2020), Eq. 5.

    ``log mean_(i < j) exp(-t ||u_i - u_j||^2)`` over the distinct pairs of unit vectors
    ``u_i = x_i / |x_i|``, with ``||u_i - u_j||^2 = 2 - 2 u_i . u_j``; computed as the log of
    the sum over ordered pairs ``i != j`` minus ``log(N (N - 1))``. Up to ``t = 50`` no
    exponential underflows (the smallest is ``exp(-200)``); past it the sum is a log-sum-exp
    shifted by the largest exponent, so the value stays finite where the plain mean of the
    exponentials would underflow. Lower is more uniform: 0 for identical points, about
    ``-2 t`` for points spread over a high-dimensional sphere, ``-4 t`` for two opposite points.
    A zero row has no direction: its cosine with every row is 0 (as the score matrix holds
    it), so it counts at squared distance 2 from each, as a point orthogonal to all
    (:func:`normalized_std` keeps it as the zero vector instead; a batch with zero rows is
    best read with the embedding norms beside it).

    Args:
        embeddings: ``[N, d]``, N >= 2.
        t: the kernel's scale, > 0 (Wang & Isola use 2).
        gram: optional ``[N, N]`` cosine similarities of ``embeddings`` already computed (the
            in-batch score matrix); used instead of a second product.

    Returns:
        A 0-d float64 tensor without a graph (a measure of the detached embeddings).

    Raises:
        GradlabError: a bad tensor, fewer than 2 rows, a ``gram`` of the wrong shape or with
            entries outside ``[-1, 1]`` beyond rounding, or ``t``.

    Example:
        >>> import torch
        >>> from gradlab.functional import uniformity
        >>> round(float(uniformity(torch.tensor([[1.0, 0.0], [-1.0, 0.0]]))), 6)  # distance^2 4
        -8.0
    """
    _check_embeddings("embeddings", embeddings, least=2)
    t = check_in_range("t", t, 1e-12, 1e6)
    size = embeddings.shape[0]
    if gram is None:
        unit = unit_rows(embeddings.to(torch.float64))
        gram = unit @ unit.T
    else:
        check_tensor("gram", gram, ndims=(2,), kind="float")
        check_shape("gram", gram, (size, size), "the embeddings' cosine similarities")
        check_same_device(embeddings=embeddings, gram=gram)
        _check_cosines("gram", gram)
    _, _, kernel, largest = _block_sums(gram, None, 2.0, t)
    return _log_mean(kernel, largest, size)


def _check_in_batch(
    scores: torch.Tensor, positives: torch.Tensor, *, cosines: bool = False
) -> None:
    """Check a square ``[N, N]`` in-batch matrix (of cosines: ``cosines``) and its positives."""
    _check_scores(scores, positives, None, cosines=cosines)
    if scores.shape[0] != scores.shape[1]:
        raise GradlabError(f"scores must be a square [N, N] in-batch matrix; got shape "
                           f"{tuple(scores.shape)}")  # fmt: skip


def in_batch_alignment_uniformity(
    scores: torch.Tensor, positives: torch.Tensor, alpha: float = 2.0, t: float = 2.0
) -> tuple[torch.Tensor, torch.Tensor]:
    """:func:`alignment` and :func:`uniformity` of an in-batch cosine matrix.

    Wang & Isola (2020), Eq. 4 and Eq. 5, from the squared distances ``2 - 2 s`` (in float64,
    a block of rows at a time on a CPU): the alignment over ``positives`` (every entry but the
    diagonal a candidate), the uniformity over every pair ``i != j`` of the ``N`` embeddings
    whose cosine matrix ``scores`` is. The values are those of
    ``alignment(scores, positives, alpha, candidate_mask=~eye)`` and
    ``uniformity(embeddings, t, gram=scores)``, bit for bit, without the candidate mask.

    Args:
        scores: ``[N, N]`` cosine similarities of a batch with itself, N >= 2.
        positives: ``[N, N]`` bool (the diagonal is no positive: the query is not its own
            candidate).
        alpha: the alignment's exponent, > 0.
        t: the uniformity's scale, > 0.

    Returns:
        ``(alignment, uniformity)``, 0-d float64 tensors without a graph (alignment NaN
        without positives).

    Raises:
        GradlabError: a bad tensor, shape, device, ``alpha`` or ``t``; fewer than 2 rows.

    Example:
        >>> import math
        >>> import torch
        >>> from gradlab.functional import in_batch_alignment_uniformity
        >>> scores = torch.tensor([[1.0, 1.0, -1.0], [1.0, 1.0, -1.0], [-1.0, -1.0, 1.0]])
        >>> positives = torch.tensor([[False, True, False], [True, False, False],
        ...                           [False, False, False]])
        >>> aligned, spread = in_batch_alignment_uniformity(scores, positives)
        >>> float(aligned)  # the one positive pair coincides
        0.0
        >>> # pairs (0, 1) at distance 0, four ordered pairs with point 2 at squared distance 4
        >>> round(float(spread), 6) == round(math.log((2 + 4 * math.exp(-8.0)) / 6), 6)
        True
    """
    _check_in_batch(scores, positives, cosines=True)
    if scores.shape[0] < 2:
        raise GradlabError(f"scores must hold at least 2 embeddings; got shape "
                           f"{tuple(scores.shape)}")  # fmt: skip
    alpha = check_in_range("alpha", alpha, 1e-12, 1e6)
    t = check_in_range("t", t, 1e-12, 1e6)
    return _in_batch_alignment_uniformity(scores, positives, alpha, t)


def _in_batch_alignment_uniformity(
    scores: torch.Tensor,
    positives: torch.Tensor,
    alpha: float = 2.0,
    t: float = 2.0,
    kept: torch.Tensor | None = None,
) -> tuple[torch.Tensor, torch.Tensor]:
    """:func:`in_batch_alignment_uniformity` of checked arguments. ``kept``: the number of
    positives (int64, 0-d), when the caller has it; it then vouches that the diagonal of
    ``positives`` is False (the Monitor's in-batch layout): neither a copy of the mask
    without its diagonal nor a count of it is made."""
    # the diagonal is no positive: left out by the sum itself (no copy of the mask)
    aligned, kept, kernel, largest = _block_sums(scores, positives, alpha, t,
                                                 drop_diagonal=kept is None, kept=kept)  # fmt: skip
    return aligned / kept, _log_mean(kernel, largest, scores.shape[0])


class EffectiveRank(NamedTuple):
    """:func:`effective_rank`'s result.

    Attributes:
        rank: ``exp(entropy)`` of the normalised singular values, in ``[1, min(N - 1, d)]``.
        share: ``rank / min(N - 1, d)``, in ``(0, 1]``: 1 for a centred batch whose
            ``min(N - 1, d)`` singular values are equal.

    Example:
        >>> import torch
        >>> from gradlab.functional import effective_rank
        >>> float(effective_rank(torch.ones(5, 3)).rank)  # identical points
        1.0
    """

    rank: torch.Tensor
    share: torch.Tensor


def effective_rank(embeddings: torch.Tensor, *, normalize: bool = False) -> EffectiveRank:
    """Effective rank of the centred embeddings (RankMe's formula, Garrido et al. 2023, Eq. 1).

    RankMe applies the formula to the embeddings as they come (uncentred); here their mean is
    taken out first, so that a batch offset from the origin, every row sharing one mean
    direction, does not count that direction: values differ from RankMe's published ones (the
    second example: a ReLU batch).

    ``exp(-sum_k p_k log p_k)`` with ``p_k = sigma_k / sum_j sigma_j`` for the singular values
    ``sigma_k`` of the embeddings minus their mean. The singular values come from the
    eigenvalues of the smaller Gram matrix (``[N, N]`` or ``[d, d]``) in float64; eigenvalues
    below ``max(N, d) * eps(float64)`` times the largest are rounding and count as 0. A batch
    whose points coincide has no spread at all: its effective rank is 1 by convention (the
    smallest value; the entropy of one direction).

    The share divides by ``min(N - 1, d)``, the largest rank a centred ``N x d`` matrix can
    have: a collapse metric normalised by ``min(N, d)`` cannot reach 1 when ``N <= d``. On a
    CUDA device ``torch.linalg.eigvalsh`` synchronises with the host.

    Args:
        embeddings: ``[N, d]``, N >= 2.
        normalize: L2-normalise the rows first (measure directions only).

    Returns:
        :class:`EffectiveRank` of 0-d float64 tensors without a graph (a measure of the
        detached embeddings, as :func:`alignment` and :func:`uniformity` are: through the
        square root of an eigenvalue 0, which a centred batch of ``N <= d`` rows always has,
        a gradient would be NaN).

    Raises:
        GradlabError: a bad tensor (NaN or infinite entries included) or fewer than 2 rows.

    Example:
        >>> import torch
        >>> from gradlab.functional import effective_rank
        >>> simplex = torch.eye(4)  # 4 points, centred: 3 equal singular values
        >>> [round(float(value), 6) for value in effective_rank(simplex)]
        [3.0, 1.0]
        >>> _ = torch.manual_seed(0)
        >>> features = torch.relu(torch.randn(256, 64, dtype=torch.float64)) + 0.5
        >>> singular = torch.linalg.svdvals(features)  # RankMe: the features uncentred
        >>> share = singular / singular.sum()
        >>> round(float(effective_rank(features).rank), 1), round(float(
        ...     torch.exp(-(share * share.log()).sum())), 1)
        (61.7, 47.8)
    """
    _check_embeddings("embeddings", embeddings, least=2)
    normalize = check_bool("normalize", normalize)
    return _effective_rank(embeddings.to(torch.float64), normalize,
                           rescale=embeddings.dtype == torch.float64)  # fmt: skip


def _effective_rank(
    values: torch.Tensor, normalize: bool = False, *, rescale: bool
) -> EffectiveRank:
    """:func:`effective_rank` of checked float64 ``values``. ``rescale``: divide the centred
    values by their largest magnitude first (the rank is scale-free), so that the Gram of
    float64 input beyond about 1e+-150 neither overflows nor underflows; float32 and half
    input widened to float64 cannot (squares of 3.4e38 and of 1.4e-45 are float64 numbers).
    Works on ``values`` detached: a measure, not a loss (no graph)."""
    values = values.detach()
    if normalize:
        values = unit_rows(values)
    centred = values - values.mean(dim=0, keepdim=True)
    if rescale:
        largest = centred.abs().amax()
        centred = centred / torch.where(largest > 0, largest, 1.0)  # NaN, inf: caught below
    rows, dims = centred.shape
    gram = centred @ centred.T if rows <= dims else centred.T @ centred
    # NaN or inf (in the input, or a Gram that overflows) make eigvalsh raise: decompose zeros
    # instead and answer NaN, without reading the flag back.
    finite = torch.isfinite(gram).all()
    eigenvalues = torch.linalg.eigvalsh(torch.where(finite, gram, 0.0))
    floor = eigenvalues[-1].clamp(min=0.0) * (max(rows, dims) * torch.finfo(torch.float64).eps)
    singular = torch.where(eigenvalues > floor, eigenvalues, 0.0).sqrt_()
    total = singular.sum()
    p = singular / total  # no spread at all: 0 / 0, replaced below
    entropy = torch.xlogy(p, p).sum().neg_()
    rank = torch.where(finite, torch.where(total > 0, entropy.exp(), 1.0), math.nan)
    return EffectiveRank(rank, rank / min(rows - 1, dims))


def normalized_std(
    embeddings: torch.Tensor, *, norms: torch.Tensor | None = None
) -> torch.Tensor:
    """Standard deviation of the L2-normalised embeddings, mean over dimensions, x ``sqrt(d)``.

    SimSiam's collapse check (Chen & He 2021, Sec. 4.1): per dimension the population standard
    deviation (divided by N) over the batch of ``x_i / |x_i|``, averaged over the ``d``
    dimensions; every non-zero row is of unit length there, whatever its scale
    (:func:`~gradlab.functional.layouts.unit_rows`), and a zero row stays zero. Unit vectors
    spread uniformly over the sphere give about ``1 / sqrt(d)`` per dimension, so the product
    with ``sqrt(d)`` is about 1; identical points give 0.

    Args:
        embeddings: ``[N, d]``, N >= 1.
        norms: optional ``[N]`` L2 norms of the rows of ``embeddings`` in float64
            (``embeddings.to(torch.float64).norm(dim=1)``) already computed; used instead of
            computing them again (the same value, bit for bit, for float32 and half
            embeddings; float64 rows of norm beyond about 1e154 or below 1e-300 are scaled
            first, so pass none for them).

    Returns:
        A 0-d float64 tensor without a graph (a measure of the detached embeddings, as
        :func:`alignment` and :func:`uniformity` are: through the square root of a spread of
        0, a collapsed batch's, a gradient would be NaN).

    Raises:
        GradlabError: a bad tensor, an empty batch, or ``norms`` of the wrong shape, dtype or
            device, or not finite and at least 0.

    Example:
        >>> import torch
        >>> from gradlab.functional import normalized_std
        >>> float(normalized_std(torch.tensor([[1.0, 0.0], [-1.0, 0.0]])))  # std 1 and 0: mean 1/2
        0.7071067811865476
    """
    _check_embeddings("embeddings", embeddings)
    if norms is not None:
        check_tensor("norms", norms, ndims=(1,), kind="float")
        check_shape("norms", norms, embeddings.shape[:1], "one norm per row")
        if norms.dtype != torch.float64:
            raise GradlabError(f"norms must be float64; got {norms.dtype}")
        check_same_device(embeddings=embeddings, norms=norms)
        _check_finite("norms", norms)
        if norms.device.type != "meta" and value_checks_enabled() and bool((norms < 0).any()):
            raise GradlabError(f"norms must be the rows' L2 norms, at least 0; got "
                               f"{number_text(norms.min())}")  # fmt: skip
    return _normalized_std(embeddings.to(torch.float64), norms)


def _normalized_std(values: torch.Tensor, norms: torch.Tensor | None = None) -> torch.Tensor:
    """:func:`normalized_std` of checked float64 ``values`` (and ``norms``), detached: a
    measure, not a loss (no graph)."""
    values = values.detach()
    if norms is None:
        unit = unit_rows(values)
    else:  # each row over its norm (a zero row stays zero): unit_rows's rows, bit for bit,
        # for float64 copies of narrower rows, whose norms neither overflow nor fall below
        # the 1e-12 floor that F.normalize would divide by instead
        unit = values / norms.detach().unsqueeze(1).clamp_min(torch.finfo(torch.float64).tiny)
    # two passes, as torch.std makes them, spelled out: torch's reduction over the rows of a
    # row-major [N, d] matrix is about 2.5x slower
    spread = unit.sub_(unit.mean(dim=0)).square_().mean(dim=0).sqrt_()
    return spread.mean() * math.sqrt(unit.shape[1])


class QueryMargins(NamedTuple):
    """:func:`query_margins`'s per-query values, each ``[Q]`` float64 (NaN where undefined).

    Attributes:
        positive: mean score of the query's positives (NaN: no positive).
        hardest_positive: the lowest score among its positives.
        hardest_negative: the highest score among its negatives (NaN: no negative).
        margin: ``hardest_positive - hardest_negative`` (> 0: every positive above every
            negative); NaN unless the query has both.
        violation_share: share of its negatives scoring at least its hardest positive.
        recall_at_1: 1 if its best positive scores strictly above every negative, else 0 (a tie
            at the top counts as a miss); NaN unless the query has both.

    Example:
        >>> import torch
        >>> from gradlab.functional import query_margins
        >>> margins = query_margins(torch.tensor([[0.8, 0.3]]), torch.tensor([[True, False]]))
        >>> round(float(margins.margin[0]), 4), float(margins.recall_at_1[0])
        (0.5, 1.0)
    """

    positive: torch.Tensor
    hardest_positive: torch.Tensor
    hardest_negative: torch.Tensor
    margin: torch.Tensor
    violation_share: torch.Tensor
    recall_at_1: torch.Tensor


def _positive_rows(
    values: torch.Tensor, rows: np.ndarray, cols: np.ndarray
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Per row of a CPU float32/float64 ``[Q, C]`` matrix, from its positives' entries
    ``(rows, cols)`` (row-major, :func:`_kept_entries`): their number (int64), their sum in
    float64 (added in column order) and their smallest value (``inf`` without one, NaN when
    one is NaN), each ``[Q]``. A few entries per row: no pass over the matrix."""
    num_rows = values.shape[0]
    kept = np.from_dlpack(values[torch.from_numpy(rows), torch.from_numpy(cols)])
    count = np.bincount(rows, minlength=num_rows)
    total = np.bincount(rows, weights=kept.astype(np.float64), minlength=num_rows)
    lowest = np.full(num_rows, np.inf, dtype=kept.dtype)
    np.minimum.at(lowest, rows, kept)  # NaN propagates, as amin's
    return torch.from_numpy(count), torch.from_numpy(total), torch.from_numpy(lowest)


def query_margins(
    scores: torch.Tensor,
    positives: torch.Tensor,
    *,
    candidate_mask: torch.Tensor | None = None,
) -> QueryMargins:
    """Per query: positive score, hardest negative, margin, violation share and R@1.

    One pass over ``[Q, C]`` (no sort): negatives are the candidates that are not positives.
    R@1 is in-batch recall at 1 over the query's candidates.

    Args:
        scores: ``[Q, C]`` scores, a larger score ranks higher.
        positives: ``[Q, C]`` bool.
        candidate_mask: ``[Q, C]`` bool or None (every entry a candidate; in-batch, mask the
            query itself).

    Returns:
        :class:`QueryMargins`; every value of a query without candidates (``C = 0``) is NaN.

    Raises:
        GradlabError: a bad tensor, shape or device.

    Example:
        >>> import torch
        >>> from gradlab.functional import query_margins
        >>> scores = torch.tensor([[0.9, 0.5, 0.7], [0.2, 0.1, 0.3]])
        >>> out = query_margins(scores, torch.tensor([[True, False, False], [True, False, False]]))
        >>> [round(v, 4) for v in out.margin.tolist()], out.recall_at_1.tolist()
        ([0.2, -0.1], [1.0, 0.0])
        >>> out.violation_share.tolist()  # negatives at or above the hardest positive
        [0.0, 0.5]
    """
    _check_scores(scores, positives, candidate_mask)
    keep, negatives = _masks(positives, candidate_mask)
    negative_count = negatives.sum(dim=1)
    # Smallest and largest entries are exact in the scores' own dtype: one [Q, C] buffer in it
    # serves every masked pass (fresh temporaries per pass cost page faults on large batches).
    values = scores.detach()
    above, below = values.new_full((), math.inf), values.new_full((), -math.inf)
    sparse = _sums_kept_entries(values)
    if sparse:  # the positives' count, sum and smallest from their entries alone
        positive_count, total, lowest = _positive_rows(values, *_kept_entries(keep, False))
        positive = total / positive_count  # 0 / 0: NaN
    else:
        positive_count = keep.sum(dim=1)
        masked = torch.where(keep, values, 0.0)
        positive = masked.sum(dim=1, dtype=torch.float64) / positive_count  # 0 / 0: NaN
    has_positive, has_negative = positive_count > 0, negative_count > 0
    if values.shape[1] == 0:  # no candidate: no positive, no negative, every value NaN
        lowest = best_positive = hardest_negative = values.new_full(values.shape[:1], math.nan)
    else:
        if not sparse:
            lowest = torch.where(keep, values, above, out=masked).amin(dim=1)
        else:
            masked = torch.empty_like(values)
        best_positive = torch.where(keep, values, below, out=masked).amax(dim=1)
        hardest_negative = torch.where(negatives, values, below, out=masked).amax(dim=1)
    violating = (negatives & (values >= lowest.unsqueeze(1))).sum(dim=1)
    hardest_positive = torch.where(has_positive, lowest.to(torch.float64), math.nan)
    hardest_negative = torch.where(has_negative, hardest_negative.to(torch.float64), math.nan)
    best_positive = best_positive.to(torch.float64)
    both = has_positive & has_negative
    violation_share = torch.where(
        both, violating.to(torch.float64) / negative_count.clamp(min=1), math.nan
    )
    recall = torch.where(both, (best_positive > hardest_negative).to(torch.float64), math.nan)
    return QueryMargins(positive, hardest_positive, hardest_negative,
                        hardest_positive - hardest_negative, violation_share,
                        recall)  # fmt: skip


def in_batch_margins(
    scores: torch.Tensor, positives: torch.Tensor, negated_sorted: torch.Tensor | None = None
) -> QueryMargins:
    """:func:`query_margins` of an in-batch matrix, from a sort of its rows.

    In-batch every entry is a candidate but the query's own (the diagonal), so the negatives
    scoring at least the hardest positive are the entries of the row at or above it, less its
    positives and less the query when it is there: a binary search of the sorted row, not a
    pass over the matrix; R@1 likewise counts the entries above the hardest negative. The
    result equals ``query_margins(scores, positives, candidate_mask=~eye)`` for finite scores
    (NaN scores give undefined counts; the Monitor logs NaN for such a step).

    Args:
        scores: ``[N, N]`` scores of a batch with itself, a larger score ranks higher.
        positives: ``[N, N]`` bool (the diagonal is no positive: the query is not its own
            candidate).
        negated_sorted: ``[N, N]``: each row of ``-scores`` sorted ascending (a sort the caller
            has already made, such as the Monitor's one sort of the step); None: sorted here
            (``O(N^2 log N)``, more than :func:`query_margins`' passes cost).

    Returns:
        :class:`QueryMargins`.

    Raises:
        GradlabError: a bad tensor, shape or device.

    Example:
        >>> import torch
        >>> from gradlab.functional import in_batch_margins
        >>> scores = torch.tensor([[1.0, 0.9, 0.5], [0.9, 1.0, 0.95], [0.5, 0.95, 1.0]])
        >>> positives = torch.tensor([[False, True, False], [True, False, False],
        ...                           [False, False, False]])
        >>> out = in_batch_margins(scores, positives)
        >>> [round(v, 4) for v in out.margin.tolist()[:2]], out.recall_at_1.tolist()[:2]
        ([0.4, -0.05], [1.0, 0.0])
    """
    _check_in_batch(scores, positives)
    values = scores.detach()
    if negated_sorted is None:
        negated_sorted = (-values).sort(dim=1).values
    else:
        check_tensor("negated_sorted", negated_sorted, ndims=(2,), kind="float")
        check_shape("negated_sorted", negated_sorted, scores.shape, "each row of -scores sorted")
        check_same_device(scores=scores, negated_sorted=negated_sorted)
    # the searches want contiguous rows (a transposed matrix: torch warns, and copies anyway)
    negated_sorted = negated_sorted.contiguous()
    if values.shape[0] == 0:  # no query: nothing to reduce over (as query_margins)
        return QueryMargins(*(values.new_empty(0, dtype=torch.float64) for _ in range(6)))
    return _in_batch_margins(values, positives, negated_sorted)


def _in_batch_margins(
    values: torch.Tensor,
    positives: torch.Tensor,
    negated_sorted: torch.Tensor,
    positive_count: torch.Tensor | None = None,
    lowest: torch.Tensor | None = None,
) -> QueryMargins:
    """:func:`in_batch_margins` of checked arguments (``values`` detached). ``positive_count``:
    the ``[N]`` int32 True entries per row of ``positives``, when the caller has them; it then
    vouches that the diagonal of ``positives`` is False (the Monitor's in-batch layout), so no
    copy of the mask without its diagonal is made and no count is taken again. ``lowest``:
    each row's smallest positive score (``inf`` without one), when the caller has it (read
    from the positives' entries: no masked pass)."""
    size = values.shape[1]
    below = values.new_full((), -math.inf)
    if _sums_kept_entries(values):
        # the positives' count, sum and smallest from their entries alone (no masked pass)
        count, total, lowest = _positive_rows(values, *_kept_entries(positives, True))
        positive_count = count.to(torch.int32)
        positive = total / positive_count  # 0 / 0: NaN
        masked = torch.empty_like(values)
    else:
        if positive_count is None:  # the diagonal is no positive (the query is no candidate)
            positives = positives.clone().fill_diagonal_(False)
            # Row counts summed as bytes (a bool sum goes through int64: several times slower).
            positive_count = positives.view(torch.uint8).sum(dim=1, dtype=torch.int32)
        masked = torch.where(positives, values, 0.0)
        positive = masked.sum(dim=1, dtype=torch.float64) / positive_count  # 0 / 0: NaN
        if lowest is None:
            above = values.new_full((), math.inf)
            lowest = torch.where(positives, values, above, out=masked).amin(dim=1)
    negative_count = (size - 1) - positive_count  # every other column not a positive
    has_positive, has_negative = positive_count > 0, negative_count > 0
    # The negatives: every entry but the positives and the query (the diagonal).
    hardest_negative = torch.where(positives, below, values, out=masked)
    hardest_negative = hardest_negative.fill_diagonal_(-math.inf).amax(dim=1)
    own = values.diagonal()
    # Entries s >= lowest: -s <= -lowest in the ascending rows of -scores; every positive is
    # among them, and the query when its own score is.
    at_least = torch.searchsorted(negated_sorted, (-lowest).unsqueeze(1), side="right")
    violating = at_least.squeeze(1) - positive_count - (own >= lowest).to(positive_count.dtype)
    # Entries s > hardest negative other than the query: positives only, so R@1 is 1 when any
    # (more entries above it than the query alone, if the query is among them).
    higher = torch.searchsorted(negated_sorted, (-hardest_negative).unsqueeze(1), side="left")
    best_above = higher.squeeze(1) > (own > hardest_negative)
    hardest_positive = torch.where(has_positive, lowest.to(torch.float64), math.nan)
    hardest_negative = torch.where(has_negative, hardest_negative.to(torch.float64), math.nan)
    both = has_positive & has_negative
    violation_share = torch.where(
        both, violating.to(torch.float64) / negative_count.clamp(min=1), math.nan
    )
    recall = torch.where(both, best_above.to(torch.float64), math.nan)
    return QueryMargins(positive, hardest_positive, hardest_negative,
                        hardest_positive - hardest_negative, violation_share,
                        recall)  # fmt: skip


def chance_level(num_candidates: int) -> float:
    """``ln C``: the InfoNCE loss when every one of a query's ``C`` candidates scores alike.

    A loss that stays there ("loss 4.85 = ln 128") has learned nothing; a loss minus this level
    near 0 signals collapse or a temperature too small to separate the scores. With several
    positives (NT-Xent's mean over the positives) the level is the same.

    Args:
        num_candidates: ``C`` >= 1 (in-batch: ``B - 1``; a paired ``B x B`` batch: ``B``).

    Returns:
        ``ln C`` as a float.

    Raises:
        GradlabError: ``num_candidates`` not a positive integer.

    Example:
        >>> from gradlab.functional import chance_level
        >>> round(chance_level(128), 4)
        4.852
    """
    if (
        isinstance(num_candidates, bool)
        or not isinstance(num_candidates, numbers.Integral)  # a NumPy integer too
        or (num_candidates < 1)
    ):
        raise GradlabError(
            f"num_candidates must be a positive integer (candidates per query); got "
            f"{num_candidates!r}"
        )
    return math.log(num_candidates)


def modality_gap(queries: torch.Tensor, candidates: torch.Tensor) -> torch.Tensor:
    """Distance between the centroids of two modalities' normalised embeddings.

    Liang et al. (2022), "Mind the Gap", Sec. 4.1: ``|mean_i x_i/|x_i| - mean_j y_j/|y_j||``.
    0 when both modalities share one centroid; at most 2.

    Args:
        queries: ``[Q, d]`` embeddings of one modality (e.g. images).
        candidates: ``[C, d]`` embeddings of the other (e.g. captions).

    Returns:
        A 0-d float64 tensor without a graph (a measure of the detached embeddings, as
        :func:`alignment` and :func:`uniformity` are).

    Raises:
        GradlabError: a bad tensor, an empty batch, or widths that differ.

    Example:
        >>> import torch
        >>> from gradlab.functional import modality_gap
        >>> float(modality_gap(torch.tensor([[1.0, 0.0]]), torch.tensor([[0.0, 2.0]])))
        1.4142135623730951
    """
    _check_embeddings("queries", queries)
    _check_embeddings("candidates", candidates)
    check_shape("candidates", candidates, (candidates.shape[0], queries.shape[1]),
                "the queries' embedding width")  # fmt: skip
    check_same_device(queries=queries, candidates=candidates)
    first = unit_rows(queries.detach().to(torch.float64)).mean(dim=0)  # a measure: no graph
    second = unit_rows(candidates.detach().to(torch.float64)).mean(dim=0)
    return (first - second).norm()


def _row_temperature_gradient(
    logits: torch.Tensor, keep: torch.Tensor, candidates: torch.Tensor
) -> torch.Tensor:
    """Mean over the queries with a positive of ``E_softmax[z] - mean_positive z``."""
    masked = torch.where(candidates, logits, -math.inf)
    weights = torch.softmax(masked, dim=1)
    expected = torch.where(candidates, weights * logits, 0.0).sum(dim=1)
    count = keep.sum(dim=1)
    positive = torch.where(keep, logits, 0.0).sum(dim=1) / count.clamp(min=1)
    has = count > 0
    per_query = torch.where(has, expected - positive, 0.0)
    return per_query.sum() / has.sum().clamp(min=1)


def temperature_gradient(
    scores: torch.Tensor,
    positives: torch.Tensor,
    scale: float | torch.Tensor,
    *,
    candidate_mask: torch.Tensor | None = None,
    direction: str = "i2t",
) -> torch.Tensor:
    """``dL/d log s`` of InfoNCE with logits ``z = s S``, in closed form.

    For a query with candidates ``c`` and positives ``P`` the loss (NT-Xent with several
    positives: Oord et al. 2018; SimCLR, Chen et al. 2020, Eq. 1; temperature ``T = 1/s``) is
    ``l = mean_(p in P) [ logsumexp_c z_c - z_p ]``; since ``dz/d log s = z``,

        dl/d log s = sum_c softmax(z)_c z_c - mean_(p in P) z_p,

    the softmax-expected logit minus the positive logit. It is <= 0 when the positive has the
    largest logit (gradient descent then raises ``s``) and > 0 when the negatives outscore it on
    average (descent lowers ``s``). The loss is the mean over the queries that
    have a positive; ``"both"`` is the mean of the two directions (CLIP's symmetric loss,
    Radford et al. 2021; open_clip's ``ClipLoss``), half of gradlab's ``nt_xent_loss(...,
    direction="both")``, which sums them. For open_clip's ``logit_scale`` (``s = exp`` of the
    parameter) this is the parameter's gradient; for a scale parameter itself, divide by ``s``.

    Args:
        scores: ``[Q, C]`` cosine similarities (not yet scaled).
        positives: ``[Q, C]`` bool.
        scale: ``s`` in ``[1e-30, 1e30]``, a number or a 1-element real tensor (open_clip's
            ``logit_scale.exp()``, sentence-transformers' ``scale``). A tensor is not read back
            (no host synchronisation): one outside that range (0, negative, NaN, inf) gives a
            NaN result instead of an error.
        candidate_mask: ``[Q, C]`` bool or None.
        direction: ``"i2t"`` (rows are queries), ``"t2i"`` (columns) or ``"both"`` (their mean).

    Returns:
        A 0-d float64 tensor without a graph (a value of the detached ``scores`` and
        ``scale``, not a loss to differentiate); 0 when no query has a positive; NaN for a
        tensor ``scale`` outside ``[1e-30, 1e30]``.

    Raises:
        GradlabError: a bad tensor, shape, device, ``direction`` or number ``scale``, or a
            ``scale`` tensor that is not one real number.

    Example:
        >>> import torch
        >>> from gradlab.functional import temperature_gradient
        >>> scores = torch.tensor([[1.0, 0.0], [0.0, 1.0]])
        >>> eye = torch.eye(2, dtype=torch.bool)
        >>> round(float(temperature_gradient(scores, eye, 1.0)), 4)  # e/(1+e) - 1
        -0.2689
    """
    _check_scores(scores, positives, candidate_mask)
    if direction not in DIRECTIONS:
        raise GradlabError(f"direction must be one of {DIRECTIONS}; got {direction!r}")
    valid = None
    if isinstance(scale, torch.Tensor):
        if scale.numel() != 1:
            raise GradlabError(f"scale must be a number or a 1-element tensor; got shape "
                               f"{tuple(scale.shape)}")  # fmt: skip
        check_tensor("scale", scale, ndims=tuple(range(scale.dim() + 1)), kind="any_real")
        if not scores.is_meta:  # a meta scale has no value to bring to the scores
            check_real_device(scale=scale)
        scale = scale.detach().reshape(()).to(device=scores.device, dtype=torch.float64)
        valid = (scale >= 1e-30) & (scale <= 1e30)  # the number's range; False for NaN
    else:
        scale = check_in_range("scale", scale, 1e-30, 1e30)
    values = scores.detach().to(torch.float64)  # a value, as the detached scale is: no graph
    keep, _ = _masks(positives, candidate_mask)
    candidates = torch.ones_like(keep) if candidate_mask is None else candidate_mask
    logits = values * scale
    terms = []
    if direction in ("i2t", "both"):
        terms.append(_row_temperature_gradient(logits, keep, candidates))
    if direction in ("t2i", "both"):
        terms.append(_row_temperature_gradient(logits.T, keep.T, candidates.T))
    gradient = terms[0] if len(terms) == 1 else (terms[0] + terms[1]) / 2
    return gradient if valid is None else torch.where(valid, gradient, math.nan)
