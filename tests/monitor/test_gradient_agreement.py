"""Gradient agreement in the precisions and magnitudes a training step hands the Monitor.

The reference gradient is autograd through the loop SmoothAP of test_values.py in float64, on
the very values the quantity sees (half-precision embeddings widened exactly); the expected
agreement is the mathematical one (cosine 1, relative error 0) with a tolerance derived from the
precision the quantity computes in, never a number read from the code under test.
"""

from __future__ import annotations

import pytest
import torch

from gradlab.monitor import GradientAgreement
from gradlab.monitor.batch import BatchView
from tests.monitor.test_values import _loop_smooth_ap_loss, loop_smooth_ap_loss_of_scores

LABELS = torch.tensor([0, 1, 2, 0, 1, 2, 0, 3])
TAU = 0.2


def _reference_grad(embeddings, labels=LABELS, tau=TAU):
    """dLoss/dE of SmoothAP (query excluded) in float64 by autograd through the loops."""
    leaf = embeddings.detach().to(torch.float64).requires_grad_(True)
    _loop_smooth_ap_loss(leaf, labels.tolist(), tau, False).backward()
    return leaf.grad


def _agreement(embeddings, grad, labels=LABELS, tau=TAU):
    batch = BatchView(embeddings=embeddings, labels=labels, embedding_grad=grad, tau=tau,
                      loss_kind="exclude_query", loss_tau=tau)  # fmt: skip
    with torch.no_grad():
        got = GradientAgreement().compute(batch)
    return {key: value.item() for key, value in got.items()}


def _random(shape, seed):
    return torch.randn(*shape, generator=torch.Generator().manual_seed(seed), dtype=torch.float64)


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16])
def test_half_precision_chain_rule_is_taken_in_float32(dtype):
    # Half-precision scores are rounded (to 2^-11 or 2^-8), in the watched loss as in the
    # Monitor, so the reference differentiates the loops at the Monitor's own scores and takes
    # the chain rule back to the embeddings in float64. Norms far from the half-precision grid:
    # rounding them to it would scale each row of the analytic gradient by its own error.
    embeddings = (50 * _random((8, 3), 31)).to(dtype)
    batch = BatchView(embeddings=embeddings, labels=LABELS, tau=TAU)
    leaf = embeddings.to(torch.float64).requires_grad_(True)
    normalized = leaf / leaf.norm(dim=1, keepdim=True)
    product = normalized @ normalized.T  # its value replaced by the Monitor's scores below
    scores = batch.scores.to(torch.float64) + (product - product.detach())
    loop_smooth_ap_loss_of_scores(scores, LABELS.tolist(), TAU, False).backward()
    got = _agreement(embeddings, leaf.grad)
    # float32 throughout: a few float32 roundings (2^-24 each) per entry, amplified by 1/tau;
    # half-precision norms would err by about 1e-4 (float16) or 1e-3 (bfloat16).
    assert got["gradient_agreement_relative_error"] < 1e-5
    assert got["gradient_agreement_cosine"] == pytest.approx(1.0, abs=1e-9)


def test_float32_gradient_is_compared_in_float64():
    # The gradient a float32 step backpropagates: the exact one rounded to float32. Rounding
    # moves the vector by about 2^-24 relatively, which changes the cosine of two nearly parallel
    # vectors only to second order (~1e-14); normalizing it in float32 would err by ~1e-8.
    embeddings = _random((8, 3), 32).to(torch.float32)
    grad = _reference_grad(embeddings).to(torch.float32)
    got = _agreement(embeddings, grad)
    assert got["gradient_agreement_cosine"] == pytest.approx(1.0, abs=1e-11)
    assert got["gradient_agreement_relative_error"] < 1e-5


def test_agreement_of_a_vanishing_gradient():
    # Each query's positive far above its negatives at a small tau: every sigmoid slope is about
    # exp(-1 / tau) / tau, so the gradient's norm is ~1e-13, far below torch's default
    # cosine_similarity eps (1e-8), which would clamp both norms and report a cosine near 0.
    centers = torch.eye(3, dtype=torch.float64)
    labels = torch.tensor([0, 0, 1, 1, 2, 2])
    embeddings = centers[labels] + 0.01 * _random((6, 3), 33)
    tau = 0.03
    grad = _reference_grad(embeddings, labels, tau)
    assert 1e-20 < grad.norm().item() < 1e-10  # the regime this test is about
    got = _agreement(embeddings, grad, labels, tau)
    assert got["gradient_agreement_cosine"] == pytest.approx(1.0, abs=1e-9)
    assert got["gradient_agreement_relative_error"] < 1e-9
