"""Retrieval layouts: how a batch of embeddings becomes ``[Q, C]`` scores and positives.

Conventions (stated, not implied):

* Scores are cosine similarities; a larger score ranks higher.
* **In-batch retrieval.** Each item queries all the others. By default the query is *not* one
  of its own candidates (Smooth-AP's definition; Bleeker & de Rijke 2022, App. A, Eq. 1):
  scores stay ``[B, B]`` and the diagonal is masked out through ``candidate_mask``. With
  ``include_query=True`` the query is a candidate and its own positive, as in the official
  Smooth-AP code and pytorch-metric-learning.
* **Cross-modal retrieval.** Queries of one modality against candidates of another, with an
  explicit ``[Q, C]`` positive mask (Bleeker & de Rijke 2022, appendix B: an image has 5
  positive captions, a caption 1 positive image).
"""

from __future__ import annotations

import math
from typing import NamedTuple

import torch
import torch.nn.functional as F

from gradlab.errors import GradlabError
from gradlab.validation import (
    check_bool,
    check_embedding_size,
    check_same_device,
    check_shape,
    check_tensor,
)


class RetrievalLayout(NamedTuple):
    """Scores and masks of one retrieval problem, ready for :func:`smooth_ap`.

    Attributes:
        scores: ``[Q, C]`` cosine similarities.
        positives: ``[Q, C]`` bool, relevant candidates.
        candidate_mask: ``[Q, C]`` bool or ``None``; ``False`` where a column is not a candidate of
            that query (the query itself in in-batch retrieval). ``None``: all are candidates.

    Example:
        >>> import torch
        >>> from gradlab.functional import in_batch_layout
        >>> layout = in_batch_layout(torch.eye(4), torch.tensor([0, 0, 1, 1]))
        >>> layout.scores.shape, layout.positives[0].tolist(), layout.candidate_mask[0].tolist()
        (torch.Size([4, 4]), [False, True, False, False], [False, True, True, True])
    """

    scores: torch.Tensor
    positives: torch.Tensor
    candidate_mask: torch.Tensor | None


FLOAT16_SMALLEST_NORM = 2.0**-6
"""The smallest norm of a float16 row that :func:`unit_rows` leaves to ``F.normalize``: its
backward divides by the norm squared, which below this falls among float16's subnormals."""


def unit_rows(embeddings: torch.Tensor) -> torch.Tensor:
    """The rows of ``[N, d]`` ``embeddings`` scaled to unit L2 norm, in their dtype; an all-zero
    row stays zero (its cosine with every row is 0) in every dtype, with a zero gradient (a zero
    vector has no direction to follow).

    A cosine is scale-free, so every non-zero finite row comes out of unit length, whatever
    its size. ``F.normalize`` divides by the norm floored at 1e-12: that floor rounds to 0 in
    float16, where a zero row became 0 / 0 = NaN (and so did every cosine score built from
    it), and a row whose norm lies below it comes out shorter than 1; a norm that overflows
    (entries of about ``65504 / sqrt(d)`` in float16, 1e19 in float32, 1e154 in float64) gave
    a row of zeros, which scores 0 with everything and has no gradient: a model whose
    embeddings grow that large stopped training, silently. Here the floor is
    ``max(1e-12, smallest positive float of the dtype)`` (in float16 2^-24, below the norm of
    any non-zero row), and a non-zero row whose norm is infinite or below the floor is first
    divided by the power of two at or below its largest ``|entry|`` (exactly); so is a float16
    row of norm below 2^-6, whose ``F.normalize`` backward squares the norm into float16's
    subnormals (a zero gradient came back NaN). Every other row is divided by exactly 1, so it
    is ``F.normalize``'s, bit for bit.

    Example:
        >>> rows = torch.tensor([[3.0, 4.0], [0.0, 0.0]], dtype=torch.float16)
        >>> unit_rows(rows).tolist()
        [[0.60009765625, 0.7998046875], [0.0, 0.0]]
        >>> unit_rows(torch.tensor([[3e19, 4e19]])).tolist()  # its norm overflows float32
        [[0.6000000238418579, 0.800000011920929]]
    """
    info = torch.finfo(embeddings.dtype)
    floor = max(1e-12, info.tiny * info.eps)
    # The divisor is a constant for autograd: a rescaled row's unit vector, and its
    # derivative, are those of the row itself (the unit vector is scale-free).
    rows = embeddings.detach()
    peak = rows.abs().amax(dim=1, keepdim=True) if rows.shape[1] else rows.new_ones(len(rows), 1)
    norm = torch.linalg.vector_norm(rows, dim=1, keepdim=True)
    smallest = FLOAT16_SMALLEST_NORM if embeddings.dtype == torch.float16 else floor
    fits = (norm >= smallest) & (norm < math.inf)  # NaN: fits neither way, nor is rescued
    rescue = ~fits & (peak > 0) & (peak < math.inf)  # not a zero row, nor one with an inf
    # The power of two at or below the largest |entry|: an exact division, so that a rescued
    # row whose norm F.normalize would round as well (a float16 row below 2^-6) is its row
    # bit for bit.
    power = torch.ldexp(torch.ones_like(peak), torch.frexp(peak).exponent - 1)
    unit = F.normalize(embeddings / torch.where(rescue, power, 1.0), dim=1, eps=floor)
    # A zero row has no direction: its gradient is 0 (F.normalize's is the incoming one over
    # the floor: 1e12 times it in float32, inf in float16).
    return torch.where(peak == 0, 0.0, unit)


def in_batch_layout(
    embeddings: torch.Tensor,
    labels: torch.Tensor,
    include_query: bool = False,
    *,
    validate: bool = True,
) -> RetrievalLayout:
    """Cosine scores and masks for in-batch retrieval: every item queries the whole batch.

    Args:
        embeddings: ``[B, d]`` float tensor (need not be normalized).
        labels: ``[B]`` integer class labels, in any order, classes of any size.
        include_query: keep each query as its own (positive) candidate.
        validate: refuse NaN/inf embeddings (reads a value: one host synchronisation on a GPU).
            The losses pass ``False`` and check finiteness inside their one synchronisation.

    Returns:
        A :class:`RetrievalLayout` over the full ``[B, B]`` score matrix. Without
        ``include_query`` the diagonal is masked out of ``candidate_mask`` and ``positives``
        rather than copied away (``drop_diagonal`` gives the ``[B, B - 1]`` view).

    Example:
        >>> import torch
        >>> from gradlab.functional import drop_diagonal, in_batch_layout
        >>> emb = torch.tensor([[1.0, 0.0], [0.0, 1.0], [1.0, 1.0]])
        >>> layout = in_batch_layout(emb, torch.tensor([0, 1, 0]))
        >>> layout.scores.shape, drop_diagonal(layout.positives).tolist()
        (torch.Size([3, 3]), [[False, True], [False, False], [True, False]])
    """
    include_query = check_bool("include_query", include_query)
    validate = check_bool("validate", validate)
    check_tensor("embeddings", embeddings, ndims=(2,), kind="float", finite=validate)
    check_embedding_size("embeddings", embeddings)
    check_tensor("labels", labels, ndims=(1,), kind="integer")
    check_shape("labels", labels, embeddings.shape[:1], "one label per embedding")
    check_same_device(embeddings=embeddings, labels=labels)
    normalized = unit_rows(embeddings)
    scores = normalized @ normalized.T
    positives = labels.unsqueeze(0) == labels.unsqueeze(1)
    if include_query:
        return RetrievalLayout(scores, positives, None)
    positives.fill_diagonal_(False)
    candidate_mask = torch.ones_like(positives).fill_diagonal_(False)
    return RetrievalLayout(scores, positives, candidate_mask)


def drop_diagonal(matrix: torch.Tensor) -> torch.Tensor:
    """``[B, B] -> [B, B - 1]`` without the diagonal, row order kept.

    The flattened matrix minus its first entry, read as ``[B - 1, B + 1]``, has the diagonal
    in its last column; dropping that column is a strided view and one contiguous copy,
    much cheaper than boolean masking.

    Example:
        >>> import torch
        >>> from gradlab.functional import drop_diagonal
        >>> drop_diagonal(torch.arange(9).view(3, 3))
        tensor([[1, 2],
                [3, 5],
                [6, 7]])
    """
    check_tensor("matrix", matrix, ndims=(2,), kind="any")
    if matrix.shape[0] != matrix.shape[1]:
        raise GradlabError(f"matrix must be square; got shape {tuple(matrix.shape)}")
    size = matrix.shape[0]
    if size <= 1:
        return matrix[:, :0].contiguous()
    body = matrix.flatten()[1:].view(size - 1, size + 1)[:, :-1]
    return body.reshape(size, size - 1)


def cross_modal_layout(
    queries: torch.Tensor,
    candidates: torch.Tensor,
    positives: torch.Tensor,
    *,
    validate: bool = True,
) -> torch.Tensor:
    """Cosine scores ``[Q, C]`` of ``queries`` ``[Q, d]`` against ``candidates`` ``[C, d]``.

    ``validate=False`` skips the finiteness check (see :func:`in_batch_layout`).

    Example:
        >>> import torch
        >>> from gradlab.functional import cross_modal_layout
        >>> cross_modal_layout(torch.eye(2), torch.eye(2), torch.eye(2, dtype=torch.bool))
        tensor([[1., 0.],
                [0., 1.]])
    """
    validate = check_bool("validate", validate)
    check_tensor("queries", queries, ndims=(2,), kind="float", finite=validate)
    check_tensor("candidates", candidates, ndims=(2,), kind="float", finite=validate)
    if queries.shape[1] != candidates.shape[1]:
        raise GradlabError(
            "queries and candidates must share their embedding size; got "
            f"{queries.shape[1]} and {candidates.shape[1]}"
        )
    check_embedding_size("queries", queries)
    if queries.dtype != candidates.dtype:
        raise GradlabError(
            "queries and candidates must share one floating dtype; got queries "
            f"{queries.dtype} and candidates {candidates.dtype} (cast one with .to(dtype))"
        )
    check_tensor("positives", positives, ndims=(2,), kind="bool")
    check_shape("positives", positives, (queries.shape[0], candidates.shape[0]), "[Q, C]")
    check_same_device(queries=queries, candidates=candidates, positives=positives)
    return unit_rows(queries) @ unit_rows(candidates).T
