"""The score losses' input rules: the margin's range and why it is bounded, the refusal of
-inf scores and what to use instead."""

from __future__ import annotations

import math

import pytest
import torch

import gradlab
from gradlab import GradlabError, NTXentLoss
from gradlab.functional.score_losses import check_margin


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
