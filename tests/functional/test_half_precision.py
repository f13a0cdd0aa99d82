"""Half-precision scores (float16, bfloat16): the score losses compute in float32 and return
in the input's dtype (the glossary's rule). The value and the gradient are those of the same
call on the scores converted to float32, rounded once to the input's dtype; computing in half
precision instead is several per cent off on a 256 x 256 batch."""

import math

import pytest
import torch
import torch.nn.functional as F_torch

import gradlab.functional as F
from gradlab import GradlabError

N = 256
EYE = torch.eye(N, dtype=torch.bool)
LOSSES = {
    "nt_xent both": lambda s: F.nt_xent_loss(s, EYE, temperature=0.1),
    "nt_xent i2t": lambda s: F.nt_xent_loss(s, EYE, temperature=0.05, direction="i2t"),
    "max_violation": lambda s: F.max_violation_triplet_loss(s, EYE, margin=0.2),
    "sigmoid_pair": lambda s: F.sigmoid_pair_loss(s, EYE, scale=10.0, bias=-10.0),
}


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16])
@pytest.mark.parametrize("loss", LOSSES.values(), ids=LOSSES.keys())
def test_half_scores_are_computed_in_float32_and_returned_in_their_dtype(loss, dtype):
    scores = torch.randn(N, N, generator=torch.Generator().manual_seed(3)).clamp(-1, 1).to(dtype)
    half = scores.clone().requires_grad_()
    value = loss(half)
    value.backward()
    wide = scores.float().requires_grad_()
    reference = loss(wide)
    reference.backward()
    assert value.dtype == dtype and half.grad.dtype == dtype
    assert torch.equal(value, reference.to(dtype))
    assert torch.equal(half.grad, wide.grad.to(dtype))


def simclr_loop(scores: list[list[float]], temperature: float) -> float:
    """Chen et al. (2020), Eq. 1 in float64: view i against its partner i + n, its own score
    left out of the denominator, averaged over the 2n views."""
    views = len(scores)
    total = 0.0
    for i in range(views):
        partner = (i + views // 2) % views
        denominator = sum(math.exp(scores[i][k] / temperature) for k in range(views) if k != i)
        total -= math.log(math.exp(scores[i][partner] / temperature) / denominator)
    return total / views


@pytest.mark.parametrize("temperature", [0.5, 0.1, 0.05])
@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16])
def test_simclr_recipe_in_half_precision_is_the_papers_loss(dtype, temperature):
    # docs/losses.md: the diagonal shifted by -1e4 in the scores' own dtype. The loss is
    # computed in float32, so |s| / T = 1e5 is no overflow; the loss itself fits the dtype.
    n = 8
    views = F_torch.normalize(torch.randn(2 * n, 16, generator=torch.Generator().manual_seed(5)))
    scores = (views @ views.T).to(dtype)
    own = torch.eye(2 * n, dtype=torch.bool)
    shifted = scores.masked_fill(own, -1e4).requires_grad_()
    loss = F.nt_xent_loss(shifted, own.roll(n, dims=1), temperature, direction="i2t")
    loss.backward()
    expected = simclr_loop(scores.double().tolist(), temperature)
    assert loss.dtype == dtype and loss.item() == pytest.approx(expected, rel=1e-2)
    assert bool(torch.isfinite(shifted.grad).all())


def test_a_half_precision_loss_beyond_its_dtype_is_refused():
    # A summed NT-Xent of 1000 queries that float16 cannot hold (it would read inf).
    scores = (torch.randn(1000, 1000, generator=torch.Generator().manual_seed(6)) * 3).half()
    eye = torch.eye(1000, dtype=torch.bool)
    wide = F.nt_xent_loss(scores.float(), eye, 0.1, reduction="sum").item()
    assert wide > torch.finfo(torch.float16).max
    with pytest.raises(GradlabError, match=r"^scores must keep the loss within torch.float16's "
                                           r"largest value 65504 "):  # fmt: skip
        F.nt_xent_loss(scores, eye, 0.1, reduction="sum")
    # The mean of the same losses fits: it is computed and returned.
    mean = F.nt_xent_loss(scores, eye, 0.1)
    assert mean.item() == pytest.approx(wide / 1000, rel=1e-3)


FOUR_PER_CLASS = (torch.arange(512) // 4).unsqueeze(0) == (torch.arange(512) // 4).unsqueeze(1)
SUMMED = {
    # VSE++'s summed hinge (Faghri et al. 2018, Eq. 5) and SigLIP's summed pairs (Zhai et al.
    # 2023, Eq. 1) of 512 queries whose scores float16 holds but whose loss it cannot: (loss,
    # the scores' spread). With four positives a query, every positive's hinge counts (at a
    # spread of 6 the loss is 75,500; a bound of one hinge per query would say 25,300).
    "max_violation": (lambda s, reduction: F.max_violation_triplet_loss(
        s, torch.eye(512, dtype=torch.bool), margin=0.2, reduction=reduction), 30.0),
    "max_violation four positives": (lambda s, reduction: F.max_violation_triplet_loss(
        s, FOUR_PER_CLASS, margin=0.2, reduction=reduction), 6.0),
    "sigmoid_pair": (lambda s, reduction: F.sigmoid_pair_loss(
        s, torch.eye(512, dtype=torch.bool), scale=10.0, bias=-10.0, reduction=reduction), 30.0),
}


@pytest.mark.parametrize(("loss", "spread"), SUMMED.values(), ids=SUMMED.keys())
def test_a_summed_half_precision_loss_beyond_its_dtype_is_refused_not_inf(loss, spread):
    scores = (torch.randn(512, 512, generator=torch.Generator().manual_seed(7)) * spread).half()
    wide = loss(scores.float(), "sum").item()  # the float32 loss the call would cast back
    assert wide > torch.finfo(torch.float16).max
    with pytest.raises(GradlabError, match=r"^scores must keep the loss within torch.float16's "
                                           r"largest value 65504 "):  # fmt: skip
        loss(scores, "sum")
    # the mean fits float16 (58,000 for SigLIP, close to its largest value): computed, returned
    mean = loss(scores, "mean")
    assert math.isfinite(mean.item())
    assert mean.item() == pytest.approx(loss(scores.float(), "mean").item(), rel=1e-3)
