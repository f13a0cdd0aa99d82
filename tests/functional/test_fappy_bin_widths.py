"""FAPPY's bin widths: which widths are accepted, and the messages that say why one is not."""

from __future__ import annotations

import pytest
import torch

from gradlab import GradlabError
from gradlab.functional.fappy import (
    check_bin_width,
    fappy_deltas,
    fappy_loss,
)


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


REASON = ("2**-20: narrower bins pass float32's resolution of a cosine; above 1 only the scale "
          "2.0 runs, where a positive pair counts only at cosine -1, so the loss is 0 on any "
          "other batch")


@pytest.mark.parametrize("delta_min", [1e-7, 1.0001, 1.5, 2.0, 1e30])
def test_a_delta_min_outside_its_range_is_refused_with_the_reason(delta_min):
    with pytest.raises(GradlabError) as caught:
        fappy_deltas(delta_min)
    assert str(caught.value) == (
        f"delta_min must be a finite number in [{2.0**-20:g}, 1] ({REASON}); got {delta_min!r}"
    )


def test_at_1_the_scale_1_runs_and_counts_the_pairs_at_or_below_cosine_0():
    # Why 1 is the bound: a pair enters scale Delta only if 1 - s >= Delta (Algorithm 1, line
    # 5). delta_min = 1 adds the scale 1.0, where every positive pair at cosine <= 0 counts;
    # above 1 the scale 2.0 would be alone, and only a pair at cosine exactly -1 enters it.
    assert fappy_deltas(1.0) == [2.0, 1.0]
    embeddings = torch.tensor([[1.0, 0.0], [-0.6, 0.8], [0.0, 1.0], [0.6, -0.8]])
    labels = torch.tensor([0, 0, 1, 1])  # both positive pairs at cosine -0.6
    assert fappy_loss(embeddings, labels, delta_min=1.0).item() > 0.0
