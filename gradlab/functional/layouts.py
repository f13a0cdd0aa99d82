"""Retrieval layouts: how a batch of embeddings becomes ``[Q, C]`` scores and positives.

Conventions (stated, not implied):

* Scores are cosine similarities; a larger score ranks higher.
* **In-batch retrieval.** Each item queries all the others. By default the query is *not* one
  of its own candidates (Smooth-AP paper's definition, seed 000 Eq. 1), so scores are
  ``[B, B - 1]``. With ``include_query=True`` the query is a candidate and its own positive,
  as in the official Smooth-AP code and pytorch-metric-learning: scores are ``[B, B]``.
* **Cross-modal retrieval.** Queries of one modality against candidates of another, with an
  explicit ``[Q, C]`` positive mask (seed 001, appendix B: an image has 5 positive captions,
  a caption 1 positive image).
"""

from __future__ import annotations

import torch
import torch.nn.functional as F

from gradlab._validation import check_same_device, check_shape, check_tensor
from gradlab.errors import GradlabError


def in_batch_layout(
    embeddings: torch.Tensor, labels: torch.Tensor, include_query: bool = False
) -> tuple[torch.Tensor, torch.Tensor]:
    """Cosine scores and positive mask for in-batch retrieval.

    Args:
        embeddings: ``[B, d]`` float tensor (need not be normalized).
        labels: ``[B]`` integer class labels, in any order, classes of any size.
        include_query: keep each query as its own (positive) candidate.

    Returns:
        ``(scores, positives)``, each ``[B, B - 1]`` (or ``[B, B]`` with ``include_query``).

    Example:
        >>> emb = torch.tensor([[1.0, 0.0], [0.0, 1.0], [1.0, 1.0]])
        >>> scores, positives = in_batch_layout(emb, torch.tensor([0, 1, 0]))
        >>> scores.shape, positives.tolist()
        (torch.Size([3, 2]), [[False, True], [False, False], [True, False]])
    """
    check_tensor("embeddings", embeddings, ndims=(2,), kind="float", finite=True)
    check_tensor("labels", labels, ndims=(1,), kind="integer")
    check_shape("labels", labels, embeddings.shape[:1], "one label per embedding")
    check_same_device(embeddings=embeddings, labels=labels)
    scores = gram(F.normalize(embeddings, dim=1))
    positives = labels.unsqueeze(0) == labels.unsqueeze(1)
    if include_query:
        return scores, positives
    return drop_diagonal(scores), drop_diagonal(positives)


class _SymmetricGram(torch.autograd.Function):
    """``X X^T`` whose backward is one product, ``(G + G^T) X``, instead of autograd's two."""

    @staticmethod
    def forward(ctx, matrix):  # type: ignore[override]
        ctx.save_for_backward(matrix)
        return matrix @ matrix.T

    @staticmethod
    def backward(ctx, grad):  # type: ignore[override]
        (matrix,) = ctx.saved_tensors
        return (grad + grad.T) @ matrix


def gram(matrix: torch.Tensor) -> torch.Tensor:
    """The Gram matrix ``X X^T`` of the rows of ``matrix`` ``[B, d]``, with a cheap backward.

    Example:
        >>> gram(torch.tensor([[1.0, 2.0], [0.0, 1.0]]))
        tensor([[5., 2.],
                [2., 1.]])
    """
    check_tensor("matrix", matrix, ndims=(2,), kind="float")
    return _SymmetricGram.apply(matrix)


def drop_diagonal(matrix: torch.Tensor) -> torch.Tensor:
    """``[B, B] -> [B, B - 1]`` without the diagonal, row order kept.

    The flattened matrix minus its first entry, read as ``[B - 1, B + 1]``, has the diagonal
    in its last column; dropping that column is a strided view and one contiguous copy,
    much cheaper than boolean masking.

    Example:
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
    queries: torch.Tensor, candidates: torch.Tensor, positives: torch.Tensor
) -> torch.Tensor:
    """Cosine scores ``[Q, C]`` of ``queries`` ``[Q, d]`` against ``candidates`` ``[C, d]``.

    Example:
        >>> cross_modal_layout(torch.eye(2), torch.eye(2), torch.eye(2, dtype=torch.bool))
        tensor([[1., 0.],
                [0., 1.]])
    """
    check_tensor("queries", queries, ndims=(2,), kind="float", finite=True)
    check_tensor("candidates", candidates, ndims=(2,), kind="float", finite=True)
    if queries.shape[1] != candidates.shape[1]:
        raise GradlabError(
            "queries and candidates must share their embedding size; got "
            f"{queries.shape[1]} and {candidates.shape[1]}"
        )
    check_tensor("positives", positives, ndims=(2,), kind="bool")
    check_shape("positives", positives, (queries.shape[0], candidates.shape[0]), "[Q, C]")
    check_same_device(queries=queries, candidates=candidates, positives=positives)
    return F.normalize(queries, dim=1) @ F.normalize(candidates, dim=1).T
