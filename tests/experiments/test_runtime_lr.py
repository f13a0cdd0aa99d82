"""The studies' learning rate: positive, finite, and small enough that Adam's first step is a
float32 number (it is ``lr / (1 - 0.9)``)."""

from __future__ import annotations

import math

import pytest
import torch

from gradlab.errors import GradlabError
from gradlab.experiments.runtime import LARGEST_LR, check_lr


def test_the_largest_learning_rate_trains_and_the_next_float_is_refused():
    # the bound itself: one Adam step runs (the step is lr / 0.1 in float32 before it is
    # scaled back); the next float64 above it is refused, naming it as the caller does
    parameter = torch.nn.Parameter(torch.ones(3))
    optimizer = torch.optim.Adam([parameter], lr=check_lr(LARGEST_LR))
    parameter.sum().backward()
    optimizer.step()
    assert bool(torch.isfinite(parameter).all())
    above = math.nextafter(LARGEST_LR, math.inf)
    with pytest.raises(GradlabError, match=r"^--lr must be at most .*; got 3\.40282346638528"):
        check_lr(above, "--lr")
    with pytest.raises(RuntimeError, match="overflow"):  # what the refusal spares: torch's error
        torch.optim.Adam([parameter], lr=LARGEST_LR * 10).step()
