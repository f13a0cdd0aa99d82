"""Blackbox AP's rules: a query without negatives is held at AP 1 with a zero gradient, a query
without candidates is NaN, ``validate`` decides which check refuses a NaN embedding, and a
second derivative is refused with a message that says why and what to use instead; the
interpolation is the official implementation's lambda times the row length."""

from __future__ import annotations

import math

import pytest
import torch

from gradlab import BlackboxAPLoss, GradlabError
from gradlab.functional.blackbox_ap import BlackboxRanks, blackbox_ap, blackbox_ap_loss

INF = math.inf


def _scores_and_positives():
    """Row 0: every candidate positive. Row 1: positives and -inf non-candidates only.
    Row 2: a positive and negatives (an ordinary query)."""
    scores = torch.tensor(
        [[0.9, 0.5, 0.7, 0.1], [0.3, -INF, 0.8, -INF], [0.2, 0.6, 0.4, 0.9]],
        dtype=torch.float64,
        requires_grad=True,
    )
    positives = torch.tensor(
        [[True, True, True, True], [True, False, True, False], [True, False, False, False]]
    )
    return scores, positives


def test_a_query_without_negatives_has_ap_one_and_no_gradient():
    scores, positives = _scores_and_positives()
    ap = blackbox_ap(scores, positives)
    assert ap[:2].tolist() == [1.0, 1.0]
    # the ordinary query: its positive ranks 4th of 4 (the others score higher)
    assert ap[2].item() == pytest.approx(1 / 4)
    (grad,) = torch.autograd.grad(ap.sum(), scores)
    assert torch.count_nonzero(grad[:2]) == 0


def test_a_query_without_candidates_or_positives_is_nan():
    scores = torch.tensor([[-INF, -INF, -INF], [0.1, 0.2, 0.3]])
    ap = blackbox_ap(scores, torch.zeros(2, 3, dtype=torch.bool))
    assert math.isnan(ap[0].item()) and math.isnan(ap[1].item())


def test_a_nan_embedding_is_refused_by_name_with_validate_on_and_off():
    # off: the embeddings are not checked, but their NaN scores have no rank; the refusal
    # names the caller's tensor, not the scores it never passed
    embeddings = torch.randn(4, 3, generator=torch.Generator().manual_seed(0))
    embeddings[0, 0] = math.nan
    labels = torch.tensor([0, 0, 1, 1])
    for call in (lambda: blackbox_ap_loss(embeddings, labels),
                 lambda: blackbox_ap_loss(embeddings, labels, validate=True)):  # fmt: skip
        with pytest.raises(GradlabError) as caught:
            call()
        assert str(caught.value) == "embeddings must be finite; got NaN in row 0 (1 row of 4)"
    with pytest.raises(GradlabError) as caught:
        blackbox_ap_loss(embeddings, labels, validate=False)
    assert str(caught.value) == "embeddings must be finite; got NaN in row 0 (1 row of 4)"


def test_a_second_derivative_is_refused_saying_why_and_what_to_use():
    scores, positives = _scores_and_positives()
    loss = blackbox_ap(scores, positives).nansum()
    with pytest.raises(GradlabError) as caught:
        torch.autograd.grad(loss, scores, create_graph=True)
    assert str(caught.value) == (
        "Blackbox AP has no second derivative: its backward is the blackbox interpolation "
        "(Vlastelica et al., 2020), not the derivative of a function, so "
        "torch.autograd.grad(..., create_graph=True) through it is refused; use "
        "create_graph=False, or SmoothAP or FastAP, whose second derivatives are exact"
    )


def _official_normalised_ranks(row):
    """blackbox-backprop's ``rank_normalised`` (Vlastelica et al. 2020; Rolinek et al. 2020's
    code): 1-based descending ranks, ties by index, over the row's length ``C``."""
    size = len(row)
    return [(1 + sum(1 for j, other in enumerate(row) if other > value or (other == value
                                                                         and j < i))) / size
            for i, value in enumerate(row)]  # fmt: skip


@pytest.mark.parametrize("lam", [0.5, 4.0, 30.0])
def test_interpolation_is_the_official_lambda_times_the_row_length(lam):
    # The official ranker ranks normalised by C; gradlab ranks 1..C. For a loss sum(w r / C),
    # the official backward perturbs s by lambda w and returns -(r^ - r^') / lambda; gradlab's
    # with interpolation lambda C is the same gradient, and with lambda alone another one.
    generator = torch.Generator().manual_seed(int(lam * 10))
    scores = torch.randn(4, 9, generator=generator, dtype=torch.float64)
    weights = torch.randn(4, 9, generator=generator, dtype=torch.float64)
    size = scores.shape[1]
    expected = []
    for row, weight in zip(scores.tolist(), weights.tolist(), strict=True):
        before = _official_normalised_ranks(row)
        after = _official_normalised_ranks([s + lam * w for s, w in zip(row, weight,
                                                                         strict=True)])  # fmt: skip
        expected.append([-(b - a) / lam for b, a in zip(before, after, strict=True)])
    expected = torch.tensor(expected, dtype=torch.float64)

    def gradient(interpolation):
        leaf = scores.clone().requires_grad_()
        (BlackboxRanks.apply(leaf, interpolation) * weights / size).sum().backward()
        return leaf.grad

    torch.testing.assert_close(gradient(lam * size), expected, rtol=0, atol=1e-12)
    assert not torch.allclose(gradient(lam), expected)


def test_candidate_mask_leaves_columns_out_as_a_minus_infinity_score_does():
    # the glossary's candidate_mask was refused with a TypeError (blackbox_ap took -inf only)
    generator = torch.Generator().manual_seed(5)
    scores = torch.randn(4, 7, generator=generator, dtype=torch.float64)
    positives = torch.rand(4, 7, generator=generator) < 0.4
    positives[:, 0] = True
    keep = torch.rand(4, 7, generator=generator) < 0.7
    keep[:, :2] = True
    leaf = scores.clone().requires_grad_(True)
    masked = blackbox_ap(leaf, positives, candidate_mask=keep)
    filled = scores.masked_fill(~keep, -math.inf).requires_grad_(True)
    expected = blackbox_ap(filled, positives)
    torch.testing.assert_close(masked, expected, rtol=0, atol=0)
    masked.nansum().backward()
    expected.nansum().backward()
    torch.testing.assert_close(leaf.grad, filled.grad.masked_fill(~keep, 0.0), rtol=0, atol=0)
    assert (leaf.grad[~keep] == 0).all()
    with pytest.raises(GradlabError, match=r"^candidate_mask must have shape \(4, 7\)"):
        blackbox_ap(scores, positives, candidate_mask=keep[:, :3])
    with pytest.raises(GradlabError, match=r"^candidate_mask must be a bool tensor"):
        blackbox_ap(scores, positives, candidate_mask=keep.float())


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_a_margin_beyond_float32_is_refused_not_ranked_as_nan(dtype):
    # 1e39 is inf in float32: the shifted negatives were 0 * inf = NaN, past the NaN check,
    # and the AP came out 0.75 where every positive below every negative gives 0.5833
    scores = torch.tensor([[0.9, 0.5, 0.7]], dtype=dtype)
    positives = torch.tensor([[True, False, True]])
    below = sum(k / rank for k, rank in enumerate((2, 3), start=1)) / 2  # ranks 2, 3 of 3
    assert blackbox_ap(scores, positives, margin=1e30).item() == pytest.approx(below)
    message = ("margin must be a finite number in [0, 1e+30] (larger margins overflow "
               "float32); got 1e+39")
    with pytest.raises(GradlabError) as raised:
        blackbox_ap(scores, positives, margin=1e39)
    assert str(raised.value) == message
    with pytest.raises(GradlabError) as raised:
        BlackboxAPLoss(margin=1e39)
    assert str(raised.value) == message
