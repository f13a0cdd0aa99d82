"""The score losses' margin rule: the message says the range and why it is bounded."""

from __future__ import annotations

import pytest

import gradlab
from gradlab import GradlabError
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
