"""smooth_ap on degenerate but legal input, on both backwards and under ``torch.func.grad``:
no positive anywhere, no query, no candidate (NaN or empty, on the graph, zero gradient), and
queries whose every candidate is positive (AP exactly 1, gradient exactly 0)."""

from __future__ import annotations

import math

import pytest
import torch

from gradlab.functional import smooth_ap
from tests.reference.smooth_ap_loops import smooth_ap_one_query, smooth_ap_one_query_gradient

WITHOUT_POSITIVES = [(2, 3), (0, 3), (3, 0), (0, 0)]
"""Shapes whose queries have no positive: none marked, no query, no candidate."""


@pytest.mark.parametrize("shape", WITHOUT_POSITIVES)
@pytest.mark.parametrize("backward", ["exact", "autograd"])
def test_a_batch_without_positives_stays_on_the_graph_with_a_zero_gradient(backward, shape):
    scores = torch.randn(shape, generator=torch.Generator().manual_seed(0), requires_grad=True)
    ap = smooth_ap(scores, torch.zeros(shape, dtype=torch.bool), 0.1, backward=backward)
    assert ap.shape == (shape[0],) and ap.requires_grad
    assert all(math.isnan(value) for value in ap.tolist())
    ap.nansum().backward()
    assert torch.equal(scores.grad, torch.zeros(shape))
    scores.grad = None
    smooth_ap(scores, torch.zeros(shape, dtype=torch.bool), 0.1, backward=backward).sum().backward()
    assert torch.equal(scores.grad, torch.zeros(shape))  # NaN rows send nothing back


@pytest.mark.parametrize("shape", WITHOUT_POSITIVES)
def test_torch_func_grad_of_a_batch_without_positives_is_zero(shape):
    positives = torch.zeros(shape, dtype=torch.bool)
    grad = torch.func.grad(lambda s: smooth_ap(s, positives, 0.1, backward="autograd").nansum())(
        torch.randn(shape, generator=torch.Generator().manual_seed(1))
    )
    assert torch.equal(grad, torch.zeros(shape))


def all_positive_batch() -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """float32 scores; rows 0-2 every column positive, row 3 every candidate positive (its last
    three columns are no candidates), rows 4-5 mixed: 3 positives of 6 candidates, so row 3
    shares their group, one that has a negative."""
    scores = torch.randn(6, 6, generator=torch.Generator().manual_seed(0))
    positives = torch.tensor([[1] * 6] * 3 + [[1, 1, 1, 0, 0, 0], [1, 0, 1, 0, 1, 0],
                                              [0, 1, 1, 1, 0, 0]]).bool()  # fmt: skip
    candidates = torch.ones(6, 6, dtype=torch.bool)
    candidates[3, 3:] = False
    return scores, positives, candidates


def loop_values_and_gradients(scores, positives, candidates, tau):
    """float64 loops over each query's candidates (non-candidates: zero gradient)."""
    values, gradients = [], torch.zeros(scores.shape, dtype=torch.float64)
    for q in range(scores.shape[0]):
        kept = [c for c in range(scores.shape[1]) if candidates[q, c]]
        row, flags = [float(scores[q, c]) for c in kept], [bool(positives[q, c]) for c in kept]
        values.append(smooth_ap_one_query(row, flags, tau))
        for c, derivative in zip(kept, smooth_ap_one_query_gradient(row, flags, tau), strict=True):
            gradients[q, c] = derivative
    return values, gradients


@pytest.mark.parametrize("backward", ["exact", "autograd"])
def test_queries_whose_candidates_are_all_positive_have_ap_one_and_an_exactly_zero_gradient(
    backward,
):
    # Autograd of A / (A + C) left about 5e-8 (float32, tau = 0.1) on such rows.
    scores, positives, candidates = all_positive_batch()
    leaf = scores.clone().requires_grad_(True)
    ap = smooth_ap(leaf, positives, 0.1, candidate_mask=candidates, backward=backward)
    ap.sum().backward()
    assert ap[:4].tolist() == [1.0, 1.0, 1.0, 1.0]
    assert torch.equal(leaf.grad[:4], torch.zeros(4, 6))
    values, gradients = loop_values_and_gradients(scores, positives, candidates, 0.1)
    # the mixed rows: float32 against the float64 loops, a few roundings of values below 10
    torch.testing.assert_close(ap[4:].double(), torch.tensor(values[4:], dtype=torch.float64),
                               atol=1e-6, rtol=0)  # fmt: skip
    torch.testing.assert_close(leaf.grad[4:].double(), gradients[4:], atol=1e-5, rtol=0)


def test_torch_func_grad_of_all_positive_queries_is_exactly_zero():
    scores, positives, candidates = all_positive_batch()

    def total(s):
        return smooth_ap(s, positives, 0.1, candidate_mask=candidates, backward="autograd").sum()

    grad = torch.func.grad(total)(scores)
    assert torch.equal(grad[:4], torch.zeros(4, 6))
    _, gradients = loop_values_and_gradients(scores, positives, candidates, 0.1)
    torch.testing.assert_close(grad[4:].double(), gradients[4:], atol=1e-5, rtol=0)


@pytest.mark.parametrize("backward", ["exact", "autograd"])
def test_the_double_backward_of_all_positive_queries_is_zero(backward):
    scores, positives, candidates = all_positive_batch()
    leaf = scores[:4].double().requires_grad_(True)
    ap = smooth_ap(leaf, positives[:4], 0.1, candidate_mask=candidates[:4], backward=backward)
    (grad,) = torch.autograd.grad(ap.sum(), leaf, create_graph=True)
    (second,) = torch.autograd.grad(grad.sum(), leaf)
    assert torch.equal(grad.detach(), torch.zeros(4, 6, dtype=torch.float64))
    assert torch.equal(second, torch.zeros(4, 6, dtype=torch.float64))


def test_rows_sharing_a_large_offset_keep_their_precision_once_centred():
    # what smooth_ap's docstring advises for float32 raw dot products: AP is shift-invariant
    # per row, s / tau is not rounded alike; the float64 loop on the same inputs is the truth
    generator = torch.Generator().manual_seed(0)
    scores = 0.05 * torch.randn(16, 64, generator=generator) + 1000.0
    positives = torch.rand(16, 64, generator=generator) < 0.1
    positives[:, 0] = True
    truth = torch.tensor([smooth_ap_one_query(row.double().tolist(), flags.tolist(), 0.01)
                          for row, flags in zip(scores, positives, strict=True)])  # fmt: skip
    plain = smooth_ap(scores, positives, 0.01).double()
    centred = smooth_ap(scores - scores.mean(dim=1, keepdim=True), positives, 0.01).double()
    assert (plain - truth).abs().max() > 1e-6  # the digits lost to the offset
    assert (centred - truth).abs().max() < 1e-6
