"""The SigLIPLoss module against a float64 loop of Zhai et al. (2023), Eq. 1.

``-log sigmoid(z_ij (t s_ij + b))`` summed over every pair, ``z_ij = +1`` on a positive and
``-1`` elsewhere; the mean divides the sum by the number of rows.
"""

from __future__ import annotations

import math

import pytest
import torch

from gradlab import GradlabError
from gradlab.siglip_loss import SigLIPLoss
from tests.reference.score_losses_loops import siglip_loss


def _batch():
    generator = torch.Generator().manual_seed(4)
    scores = torch.randn(4, 5, generator=generator, dtype=torch.float64) / 3
    positives = torch.zeros(4, 5, dtype=torch.bool)
    positives[torch.arange(4), torch.arange(4)] = True
    positives[0, 4] = True
    return scores, positives


@pytest.mark.parametrize("reduction", ["mean", "sum"])
@pytest.mark.parametrize("scale, bias", [(10.0, -10.0), (2.0, 0.5), (1.0, -3.0)])
def test_the_module_is_the_loop_of_eq_1(scale, bias, reduction):
    scores, positives = _batch()
    got = SigLIPLoss(scale=scale, bias=bias, reduction=reduction)(scores, positives)
    expected, _ = siglip_loss(scores.tolist(), positives.tolist(), scale, bias, reduction)
    assert got.item() == pytest.approx(expected, rel=1e-12)


def test_scores_that_are_not_finite_are_refused_unless_validation_is_off():
    scores, positives = _batch()
    scores[1, 2] = math.nan
    with pytest.raises(GradlabError, match="scores"):
        SigLIPLoss()(scores, positives)
    assert math.isnan(SigLIPLoss(validate=False)(scores, positives).item())


def test_the_score_recorder_sees_the_matrix_both_ways():
    scores, positives = _batch()
    scores.requires_grad_()
    loss = SigLIPLoss(scale=2.0, bias=0.5)
    seen = []
    loss.score_recorder = lambda direction, matrix, mask: seen.append((direction, matrix))
    loss(scores, positives)
    assert len(seen) == 1 and seen[0][0] == "both"
    assert torch.equal(seen[0][1].detach(), scores.detach())
