"""The chunked SmoothAP's building blocks, each against a hand computation: the sigmoid block
outside autograd without a buffer, which groups cover every row, the size of the one block
buffer, and the double backward of a batch with no positive."""

from __future__ import annotations

import math

import pytest
import torch

from gradlab.functional import smooth_ap
from gradlab.functional.smooth_ap import (
    block_size,
    covers_every_query,
    group_by_positive_count,
    sigmoid_block,
)


def test_the_sigmoid_block_without_a_buffer_matches_a_loop():
    generator = torch.Generator().manual_seed(3)
    rows = torch.randn(3, 5, generator=generator)
    columns = torch.tensor([[0, 2], [4, 1], [3, 3]])
    tau = 0.3
    block = sigmoid_block(rows, columns, tau)  # no graph, no out=: a fresh tensor
    assert block.shape == (3, 2, 5)
    for k in range(3):
        for a, i in enumerate(columns[k].tolist()):
            for j in range(5):
                d = (float(rows[k, j]) - float(rows[k, i])) / tau  # D_ij = (s_j - s_i) / tau
                expected = 0.0 if j == i else 1.0 / (1.0 + math.exp(-d))
                assert float(block[k, a, j]) == pytest.approx(expected, rel=1e-6, abs=1e-7)


@pytest.mark.parametrize(("mask", "covers"), [
    ([[True, False], [False, True], [True, False]], True),  # one group of all three rows
    ([[True, False], [False, False], [True, False]], False),  # a row without positive
    ([[True, True], [False, True], [True, False]], False),  # two groups
])  # fmt: skip
def test_one_group_of_every_row_covers_every_query(mask, covers):
    groups = group_by_positive_count(torch.tensor(mask))
    assert covers_every_query(groups, 3) is covers


def test_the_block_buffer_holds_the_largest_chunk():
    assert block_size([], 4, budget=100) == 0  # no group: nothing to hold
    # 3 queries with 2 positives of 4 columns: 8 entries each; a budget of 5 still takes one.
    groups = group_by_positive_count(torch.tensor([[True, True, False, False]] * 3))
    assert block_size(groups, 4, budget=5) == 8
    assert block_size(groups, 4, budget=17) == 16  # two queries fit
    # One column, one positive: 1 entry per query, so a budget of 2 takes two queries.
    assert block_size(group_by_positive_count(torch.ones(3, 1, dtype=torch.bool)), 1, 2) == 2


def test_the_double_backward_of_a_batch_without_positives_is_zero():
    scores = torch.randn(3, 4, dtype=torch.float64, requires_grad=True)
    positives = torch.zeros(3, 4, dtype=torch.bool)
    ap = smooth_ap(scores, positives, 0.1)  # create_graph: the differentiable backward
    total = torch.nan_to_num(ap).sum() + 0.0 * scores.sum()
    (grad,) = torch.autograd.grad(total, scores, create_graph=True)
    assert torch.equal(grad, torch.zeros_like(scores))


def test_a_query_whose_every_candidate_is_positive_has_ap_one_even_when_its_scores_sum_to_zero():
    scores = torch.tensor([[0.5, -0.5, 0.0], [0.3, 0.1, 0.2]], requires_grad=True)
    positives = torch.tensor([[True, True, True], [True, False, False]])
    ap = smooth_ap(scores, positives, 0.1)
    assert float(ap[0]) == 1.0  # no negative: every positive ranks first
    ap.sum().backward()
    assert torch.equal(scores.grad[0], torch.zeros(3))
