"""Scores masked with -inf, the softmax idiom, where a function leaves entries out with its
candidate_mask instead: the refusal says so."""

import math

import pytest
import torch

import gradlab.functional as F
from gradlab.errors import GradlabError

HINT = "-inf is no mask here: give a left-out entry a finite score and candidate_mask=False"


def _masked(fill: float) -> tuple[torch.Tensor, torch.Tensor]:
    scores = torch.rand(3, 4, generator=torch.Generator().manual_seed(0))
    positives = torch.zeros(3, 4, dtype=torch.bool)
    positives[:, 1] = True
    return scores.index_fill(1, torch.tensor([0]), fill), positives


CALLS = {
    "smooth_ap": lambda scores, positives: F.smooth_ap(scores, positives, 0.1),
    "gradient_counts": lambda scores, positives: F.gradient_counts(scores, positives, 0.1),
}


@pytest.mark.parametrize("name", list(CALLS))
def test_scores_masked_with_minus_inf_are_told_of_the_candidate_mask(name):
    scores, positives = _masked(-math.inf)
    with pytest.raises(GradlabError) as raised:
        CALLS[name](scores, positives)
    assert str(raised.value) == (
        f"scores must be finite; got -inf in rows 0, 1, 2 (3 rows of 3); {HINT}")
    # what the hint says works: the same entry finite and left out
    mask = torch.ones_like(positives)
    mask[:, 0] = False
    left_out = scores.clone()
    left_out[:, 0] = 0.0
    if name == "smooth_ap":
        kept = F.smooth_ap(left_out[:, 1:], positives[:, 1:], 0.1)
        assert torch.equal(F.smooth_ap(left_out, positives, 0.1, candidate_mask=mask), kept)


@pytest.mark.parametrize("name", list(CALLS))
def test_scores_with_nan_or_plus_inf_get_no_mask_hint(name):
    for fill, kind in ((math.nan, "NaN"), (math.inf, "inf")):
        scores, positives = _masked(fill)
        with pytest.raises(GradlabError) as raised:
            CALLS[name](scores, positives)
        assert str(raised.value) == (
            f"scores must be finite; got {kind} in rows 0, 1, 2 (3 rows of 3)")
