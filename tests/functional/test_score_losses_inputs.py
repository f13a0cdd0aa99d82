"""The score losses' input rules: the margin's range and why it is bounded, the refusal of
-inf scores and of a tensor for a scale, each saying what to use instead."""

from __future__ import annotations

import math

import pytest
import torch

import gradlab
import gradlab.functional as F
from gradlab import GradlabError, NTXentLoss, SigLIPLoss
from gradlab.functional.score_losses import check_margin
from tests.reference.score_losses_loops import score_loss, siglip_loss


@pytest.mark.parametrize(
    ("call", "got"),
    [
        (lambda: check_margin(-1.0), "-1.0"),
        (lambda: check_margin(float("inf")), "inf"),
        (lambda: gradlab.MaxViolationTripletLoss(1e40), "1e+40"),
    ],
)
def test_a_margin_out_of_range_is_refused_with_the_range_and_the_reason(call, got):
    with pytest.raises(GradlabError) as caught:
        call()
    assert str(caught.value) == (
        f"margin must be a finite number in [0, 1e+30] (larger margins overflow float32); got {got}"
    )


def test_a_margin_in_range_is_returned_as_a_float():
    assert check_margin(1e30) == 1e30 and type(check_margin(0)) is float


@pytest.mark.parametrize("direction", ["i2t", "both"])
def test_minus_inf_scores_are_refused_saying_minus_inf_and_how_to_leave_an_entry_out(direction):
    # SimCLR's own idiom masks a view's own score with -inf; the message names -inf (not
    # "inf") and says what does the same with finite scores.
    own = torch.eye(4, dtype=torch.bool)
    scores = torch.rand(4, 4, generator=torch.Generator().manual_seed(0))
    with pytest.raises(GradlabError) as caught:
        NTXentLoss(0.5, direction=direction)(scores.masked_fill(own, -math.inf),
                                             own.roll(2, dims=1))  # fmt: skip
    assert str(caught.value) == (
        "scores must be finite; got -inf in rows 0, 1, 2, 3 (4 rows of 4); to leave an entry "
        "out, fill it with a large negative finite score (scores.masked_fill(mask, -1e4): in a "
        "softmax its exponential underflows to exactly 0)"
    )
    with pytest.raises(GradlabError) as caught:  # +inf: the plain message, no hint
        NTXentLoss(0.5)(scores.masked_fill(own, math.inf), own.roll(2, dims=1))
    assert str(caught.value) == "scores must be finite; got inf in rows 0, 1, 2, 3 (4 rows of 4)"


LEARNABLE_T = ("pass temperature=1.0 and the scaled scores, loss(logit_scale.exp() * scores, "
               "positives), as CLIP learns its scale")
LEARNABLE_SIGLIP = ("pass scale=1.0, bias=0.0 and the logits, loss(t * scores + b, positives), "
                    "as SigLIP learns t and b")


@pytest.mark.parametrize(("call", "name", "how"), [
    (lambda t: NTXentLoss(t), "temperature", LEARNABLE_T),
    (lambda t: F.nt_xent_loss(torch.eye(2), torch.eye(2) > 0, t), "temperature", LEARNABLE_T),
    (lambda t: SigLIPLoss(t), "scale", LEARNABLE_SIGLIP),
    (lambda t: SigLIPLoss(10.0, t), "bias", LEARNABLE_SIGLIP),
    (lambda t: F.sigmoid_pair_loss(torch.eye(2), torch.eye(2) > 0, 10.0, t), "bias",
     LEARNABLE_SIGLIP),
])  # fmt: skip
def test_a_tensor_for_a_scale_is_refused_saying_how_a_learnable_one_is_used(call, name, how):
    # the docstrings said CLIP and SigLIP learn these; a parameter was refused as "not a
    # finite number" with no word of the way that works
    with pytest.raises(GradlabError) as caught:
        call(torch.tensor(0.5, requires_grad=True))
    assert str(caught.value) == f"{name} must be a number, not a tensor (a learnable {name}: {how})"


def test_the_advised_learnable_scales_give_the_losses_of_those_scales():
    # The advice is right: T = 1 on logit_scale.exp() * S is NT-Xent at T = exp(-logit_scale),
    # scale 1 and bias 0 on t S + b is SigLIP at (t, b), and the parameters get gradients.
    generator = torch.Generator().manual_seed(4)
    scores = torch.rand(5, 5, generator=generator, dtype=torch.float64) * 2 - 1
    eye = torch.eye(5, dtype=torch.bool)
    logit_scale = torch.tensor(math.log(14.0), dtype=torch.float64, requires_grad=True)
    value = NTXentLoss(1.0)(logit_scale.exp() * scores, eye)
    expected, _ = score_loss("nt_xent", scores.tolist(), eye.tolist(), 1.0 / 14.0)
    assert value.item() == pytest.approx(expected, rel=1e-12, abs=0)
    t = torch.tensor(7.0, dtype=torch.float64, requires_grad=True)
    b = torch.tensor(-3.0, dtype=torch.float64, requires_grad=True)
    sigmoid = SigLIPLoss(1.0, 0.0)(t * scores + b, eye)
    expected, _ = siglip_loss(scores.tolist(), eye.tolist(), 7.0, -3.0)
    assert sigmoid.item() == pytest.approx(expected, rel=1e-12, abs=0)
    (value + sigmoid).backward()
    assert all(p.grad is not None and p.grad != 0 for p in (logit_scale, t, b))


@pytest.mark.parametrize("loss_fn", [NTXentLoss(0.1), gradlab.MaxViolationTripletLoss(0.2),
                                     SigLIPLoss()])
def test_embeddings_with_labels_are_told_apart_from_scores_in_the_message(loss_fn):
    # pytorch-metric-learning's NTXentLoss takes (embeddings, labels): called the same way,
    # the message advised a bool mask, with which the same mistake is silent
    embeddings = torch.randn(8, 16)
    labels = torch.arange(4).repeat_interleave(2)
    with pytest.raises(GradlabError) as raised:
        loss_fn(embeddings, labels)
    assert str(raised.value) == (
        "positives given as labels needs a square, paired score matrix [B, B]; got scores of "
        "shape (8, 16) (these losses take a score matrix such as z @ z.T of unit rows, not the "
        "embeddings; for a rectangular one pass a [Q, C] bool mask)")
