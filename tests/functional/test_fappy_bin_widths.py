"""FAPPY's bin widths: which widths are accepted, and the messages that say why one is not."""

from __future__ import annotations

import pytest

from gradlab import GradlabError
from gradlab.functional.fappy import check_bin_width, fappy_deltas


@pytest.mark.parametrize("delta", [0.3, 0.75, 2.0 / 3.5])
def test_a_width_that_does_not_divide_two_is_refused_with_the_rule(delta):
    with pytest.raises(GradlabError) as caught:
        check_bin_width(delta)
    assert str(caught.value) == (
        "delta must divide 2 into whole bins (2 / delta an integer: 2.0, 1.0, 0.5, 0.4, ...); "
        f"got {delta!r}"
    )


@pytest.mark.parametrize("bins", [1000, 2**20])
def test_a_width_off_by_rounding_is_accepted_relative_to_the_number_of_bins(bins):
    # 2 / delta is an integer up to 1e-11 relative: a width computed in floating point
    delta = 2.0 / (bins * (1 + 1e-11))
    assert abs(2.0 / delta - bins) > 1e-9  # more than an absolute tolerance would allow
    assert check_bin_width(delta) == delta


def test_a_delta_min_below_the_smallest_width_is_refused_with_the_reason():
    with pytest.raises(GradlabError) as caught:
        fappy_deltas(1e-7)
    assert str(caught.value) == (
        f"delta_min must be a finite number in [{2.0**-20:g}, inf) (2**-20: narrower bins pass "
        "float32's resolution of a cosine); got 1e-07"
    )
