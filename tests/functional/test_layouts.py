"""Retrieval layouts: diagonal removal, the symmetric Gram product, input errors."""

import pytest
import torch

from gradlab import GradlabError
from gradlab.functional import cross_modal_layout, drop_diagonal, in_batch_layout


@pytest.mark.parametrize("size", [1, 2, 5, 17])
def test_drop_diagonal_matches_boolean_mask(size):
    matrix = torch.randn(size, size)
    mask = ~torch.eye(size, dtype=torch.bool)
    assert torch.equal(drop_diagonal(matrix), matrix[mask].view(size, size - 1))


def test_in_batch_layout_excludes_or_includes_the_query():
    embeddings = torch.randn(5, 3, dtype=torch.float64)
    labels = torch.tensor([2, 0, 2, 1, 0])
    scores, positives, candidates = in_batch_layout(embeddings, labels)
    full_scores, full_positives, no_mask = in_batch_layout(embeddings, labels, include_query=True)
    assert scores.shape == (5, 5) and no_mask is None
    assert torch.equal(candidates, ~torch.eye(5, dtype=torch.bool))
    torch.testing.assert_close(full_scores.diagonal(), torch.ones(5, dtype=torch.float64))
    assert bool(full_positives.diagonal().all()) and not bool(positives.diagonal().any())
    assert positives.sum().item() == full_positives.sum().item() - 5


@pytest.mark.parametrize(
    ("args", "message"),
    [
        ((torch.zeros(4), torch.zeros(4, dtype=torch.long)), "embeddings must be 2-D"),
        ((torch.zeros(4, 2), torch.zeros(4)), "labels must have an integer dtype"),
        ((torch.zeros(4, 2), torch.zeros(3, dtype=torch.long)), r"labels must have shape \(4,\)"),
        ((torch.full((4, 2), float("inf")), torch.zeros(4, dtype=torch.long)), "finite"),
        (
            (torch.zeros(4, 0), torch.zeros(4, dtype=torch.long)),
            r"embeddings must have at least "
            r"one embedding dimension; got shape \(4, 0\)",
        ),
    ],
)
def test_in_batch_layout_errors(args, message):
    with pytest.raises(GradlabError, match=message):
        in_batch_layout(*args)


@pytest.mark.parametrize(
    ("args", "message"),
    [
        ((torch.zeros(2, 3), torch.zeros(4, 2), torch.ones(2, 4, dtype=torch.bool)), "3 and 2"),
        ((torch.zeros(2, 3), torch.zeros(4, 3), torch.ones(4, 2, dtype=torch.bool)), r"\(2, 4\)"),
        ((torch.zeros(2, 3), torch.zeros(4, 3), torch.ones(2, 4)), "bool tensor"),
        ((torch.zeros(2, 3), [[0.0]], torch.ones(2, 1, dtype=torch.bool)), "torch.Tensor"),
        (
            (
                torch.zeros(2, 3),
                torch.zeros(4, 3, dtype=torch.float64),
                torch.ones(2, 4, dtype=torch.bool),
            ),
            "queries torch.float32 and candidates .*float64",
        ),
        (
            (torch.zeros(2, 0), torch.zeros(4, 0), torch.ones(2, 4, dtype=torch.bool)),
            "queries must have at least one embedding dimension",
        ),
    ],
)
def test_cross_modal_layout_errors(args, message):
    with pytest.raises(GradlabError, match=message):
        cross_modal_layout(*args)


@pytest.mark.parametrize(
    ("function", "args", "message"),
    [
        (drop_diagonal, (torch.zeros(3, 4),), r"matrix must be square; got shape \(3, 4\)"),
    ],
)
def test_matrix_helper_errors(function, args, message):
    with pytest.raises(GradlabError, match=message):
        function(*args)
