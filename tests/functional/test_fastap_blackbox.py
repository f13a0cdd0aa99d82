"""FastAP and Blackbox AP against loop references; their backward passes."""

import math

import pytest
import torch
from hypothesis import given
from hypothesis import strategies as st

from gradlab import BlackboxAPLoss, FastAPLoss, GradlabError
from gradlab.functional import BlackboxRanks, blackbox_ap, descending_ranks, fastap
from tests.reference.histogram_losses_loops import fastap_query, ranked_ap


def batch(seed, size, dims=4):
    generator = torch.Generator().manual_seed(seed)
    return (
        torch.randn(size, dims, generator=generator, dtype=torch.float64),
        torch.randint(0, 3, (size,), generator=generator),
    )


@given(seed=st.integers(0, 2**31 - 1), size=st.integers(2, 10), bins=st.sampled_from([4, 10, 20]))
def test_fastap_matches_loops(seed, size, bins):
    embeddings, labels = batch(seed, size)
    got = fastap(embeddings, labels, bins)
    for q in range(size):
        expected = fastap_query(embeddings.tolist(), labels.tolist(), q, bins)
        if math.isnan(expected):
            assert math.isnan(got[q].item())
        else:
            assert got[q].item() == pytest.approx(expected, abs=1e-12)


def test_fastap_gradient_passes_gradcheck():
    embeddings, labels = batch(3, 8)
    labels = torch.tensor([0, 0, 1, 1, 2, 2, 0, 1])
    leaf = embeddings.clone().requires_grad_(True)
    assert torch.autograd.gradcheck(lambda e: FastAPLoss(10)(e, labels), (leaf,))


@given(seed=st.integers(0, 2**31 - 1), margin=st.sampled_from([0.0, 0.02, 0.3]))
def test_blackbox_forward_is_exact_ap_after_the_margin(seed, margin):
    generator = torch.Generator().manual_seed(seed)
    scores = torch.randn(4, 9, generator=generator, dtype=torch.float64)
    positives = torch.rand(4, 9, generator=generator) < 0.4
    got = blackbox_ap(scores, positives, margin=margin)
    for q in range(4):
        expected = ranked_ap(scores[q].tolist(), positives[q].tolist(), margin)
        if math.isnan(expected):
            assert math.isnan(got[q].item())
        else:
            assert got[q].item() == pytest.approx(expected, abs=1e-12)


@given(seed=st.integers(0, 2**31 - 1), interpolation=st.sampled_from([0.5, 4.0, 20.0]))
def test_blackbox_backward_is_the_interpolation_formula(seed, interpolation):
    generator = torch.Generator().manual_seed(seed)
    scores = torch.randn(2, 7, generator=generator, dtype=torch.float64)
    upstream = torch.randn(2, 7, generator=generator, dtype=torch.float64)
    leaf = scores.clone().requires_grad_(True)
    (grad,) = torch.autograd.grad(BlackboxRanks.apply(leaf, interpolation), leaf, upstream)

    def loop_ranks(row):
        order = sorted(range(len(row)), key=lambda c: (-row[c], c))
        ranks = [0.0] * len(row)
        for position, c in enumerate(order, start=1):
            ranks[c] = float(position)
        return ranks

    for q in range(2):
        before = loop_ranks(scores[q].tolist())
        after = loop_ranks((scores[q] + interpolation * upstream[q]).tolist())
        expected = [-(b - a) / interpolation for b, a in zip(before, after, strict=True)]
        assert grad[q].tolist() == pytest.approx(expected, abs=1e-12)


def test_blackbox_gradient_is_not_the_gradient_of_its_forward():
    # By design: the forward is piecewise constant, so finite differences see zero, while the
    # blackbox backward returns the gradient of a lambda-interpolation (Vlastelica et al.).
    embeddings, labels = batch(5, 10)
    labels = torch.tensor([0, 0, 0, 1, 1, 1, 2, 2, 2, 0])
    loss_fn = BlackboxAPLoss()
    leaf = embeddings.clone().requires_grad_(True)
    loss_fn(leaf, labels).backward()
    step = 1e-7
    bumped = embeddings.clone()
    bumped[0, 0] += step
    finite_difference = (loss_fn(bumped, labels) - loss_fn(embeddings, labels)).item() / step
    assert finite_difference == 0.0
    assert leaf.grad.abs().sum().item() > 0


def test_descending_ranks_breaks_ties_by_index():
    assert descending_ranks(torch.tensor([0.5, 0.9, 0.5])).tolist() == [2.0, 1.0, 3.0]


@pytest.mark.parametrize(
    ("call", "message"),
    [
        (lambda: FastAPLoss(num_bins=0), "num_bins must be a positive integer"),
        (
            lambda: BlackboxAPLoss(interpolation=0.0),
            "interpolation must be a positive finite number",
        ),
        (lambda: BlackboxAPLoss(margin=-0.1), "margin must be a non-negative finite number"),
        (
            lambda: blackbox_ap(
                torch.tensor([[math.nan, 0.0]]), torch.ones(1, 2, dtype=torch.bool)
            ),
            r"scores must not hold NaN or \+inf \(-inf marks a non-candidate\)$",
        ),
        (
            lambda: blackbox_ap(torch.zeros(1, 2), torch.ones(1, 3, dtype=torch.bool)),
            r"positives must have shape \(1, 2\) \(one flag per score\); got \(1, 3\)$",
        ),
        (lambda: fastap(torch.zeros(3, 2), torch.zeros(3)), "labels must have an integer dtype"),
    ],
)
def test_error_table(call, message):
    with pytest.raises(GradlabError, match="^" + message):  # each message starts with its name
        call()
