"""Half-precision scores (float16, bfloat16): the score losses compute in float32 and return
in the input's dtype (the glossary's rule). The value and the gradient are those of the same
call on the scores converted to float32, rounded once to the input's dtype; computing in half
precision instead is several per cent off on a 256 x 256 batch."""

import pytest
import torch

import gradlab.functional as F

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
