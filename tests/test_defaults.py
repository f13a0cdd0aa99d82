"""Every public default is the documented one: a call that omits an argument equals the call
that spells out the documented value, computed by an independent reference, and differs from
a call with another value (so a moved default cannot go unnoticed).

Where the defaults come from: seed 002 (Smooth-AP supplementary) uses tau = 0.01 and the
operating-region threshold 0.005, and Blackbox AP with lambda = 4 and margin 0.02; FAPPY's
smallest bin width 0.01 is the first of seed 004's Delta_min values; FastAP's 10 bins are
gradlab's documented choice (seed 002 used 20 on iNaturalist); VSE++'s margin 0.2 and
NT-Xent's temperature 0.1 are those losses' usual settings.
"""

from __future__ import annotations

import math

import pytest
import torch
from scipy.optimize import brentq

import gradlab
from gradlab.functional import (
    fappy_deltas,
    gradient_counts,
    operating_region_is_empty,
    operating_region_proportion,
    operating_region_width,
    smooth_ap,
)
from tests.reference.histogram_losses_loops import fappy_algorithm1, fastap_query, ranked_ap
from tests.reference.operating_region_loops import gradient_count, proportion
from tests.reference.smooth_ap_loops import (
    in_batch_smooth_ap,
    loss_from_aps,
    slope,
    smooth_ap_one_query,
)

SEED_TAU, SEED_EPS = 0.01, 0.005


def _embeddings(size=12, dims=5, seed=0):
    generator = torch.Generator().manual_seed(seed)
    return torch.randn(size, dims, generator=generator, dtype=torch.float64)


def test_smooth_ap_default_temperature_is_the_seeds():
    # The example: with the default moved to 0.1 this gave 0.7275 instead of 0.8333.
    scores, positives = [0.9, 0.8, 0.1], [True, False, True]
    value = smooth_ap(torch.tensor([scores], dtype=torch.float64), torch.tensor([positives]))
    reference = smooth_ap_one_query(scores, positives, SEED_TAU)
    assert value.item() == pytest.approx(reference, abs=1e-12)
    assert value.item() != pytest.approx(smooth_ap_one_query(scores, positives, 0.1), abs=1e-3)


def test_smooth_ap_loss_defaults_tau_and_query_excluded():
    embeddings, labels = _embeddings(), [0, 1, 2] * 4
    loss = gradlab.SmoothAPLoss()(embeddings, torch.tensor(labels)).item()
    reference = loss_from_aps(in_batch_smooth_ap(embeddings.tolist(), labels, SEED_TAU, False))
    assert loss == pytest.approx(reference, abs=1e-12)
    for other in (dict(tau=0.1), dict(include_query=True)):
        changed = gradlab.SmoothAPLoss(**other)(embeddings, torch.tensor(labels)).item()
        assert changed != pytest.approx(loss, abs=1e-6), other


def test_operating_region_width_default_is_the_seeds_setting():
    # |dG/dD| = eps at D = w: the root of the reference slope, by bracketing.
    root = brentq(lambda d: slope(d, SEED_TAU) - SEED_EPS, 0.0, 1.0, xtol=1e-15)
    assert operating_region_width() == pytest.approx(root, rel=1e-9)
    assert operating_region_width() != pytest.approx(operating_region_width(eps=0.05), rel=1e-3)


@pytest.mark.parametrize("tau", [0.01, 0.5, 2.0])
def test_region_is_empty_exactly_from_eps_tau_one_quarter(tau):
    # The sigmoid's largest slope is at D = 0: the region is empty once eps >= slope(0).
    threshold = slope(0.0, tau)
    for eps, empty in ((threshold * (1 - 1e-6), False), (threshold * (1 + 1e-6), True)):
        assert operating_region_is_empty(tau, eps) is empty
        assert (operating_region_width(tau, eps) == 0.0) is empty


def test_operating_region_proportion_defaults():
    scores = _embeddings(1, 40, seed=3)[0] * 0.05
    measured = operating_region_proportion(scores[None, :]).item()
    assert measured == pytest.approx(proportion(scores.tolist(), SEED_TAU, SEED_EPS), abs=1e-12)
    other = operating_region_proportion(scores[None, :], eps=0.05).item()
    assert other != pytest.approx(measured, abs=1e-6)


def test_gradient_counts_defaults():
    scores = (_embeddings(1, 16, seed=4)[0] * 0.03).tolist()
    positives = [i % 3 == 0 for i in range(16)]
    counts = gradient_counts(torch.tensor([scores], dtype=torch.float64), torch.tensor([positives]))
    expected = gradient_count(scores, positives, SEED_TAU, SEED_EPS, weighted=False)
    assert counts.per_query.item() == expected
    changed = gradient_counts(torch.tensor([scores], dtype=torch.float64),
                              torch.tensor([positives]), threshold=0.05)  # fmt: skip
    assert changed.per_query.item() != expected


def test_fappy_scales_halve_from_two_down_to_delta_min_inclusive():
    # Algorithm 1: Delta_cur = 2, then halve ... until Delta_cur < Delta_min.
    assert fappy_deltas(0.25) == [2.0, 1.0, 0.5, 0.25]
    assert fappy_deltas(0.2499) == [2.0, 1.0, 0.5, 0.25]
    assert fappy_deltas(0.2501) == [2.0, 1.0, 0.5]
    assert len(fappy_deltas(0.01)) == 1 + math.floor(math.log2(2.0 / 0.01))


def test_fappy_loss_default_delta_min():
    embeddings, labels = _embeddings(8, 4, seed=5), [0, 0, 1, 1, 2, 2, 3, 3]
    loss = gradlab.FAPPYLoss()(embeddings, torch.tensor(labels)).item()
    assert loss == pytest.approx(fappy_algorithm1(embeddings.tolist(), labels, 0.01), abs=1e-10)
    other = gradlab.FAPPYLoss(delta_min=0.5)(embeddings, torch.tensor(labels)).item()
    assert other != pytest.approx(loss, abs=1e-6)


def test_fastap_default_bins():
    embeddings, labels = _embeddings(12, 6, seed=6), [0, 1, 2, 3] * 3
    loss = gradlab.FastAPLoss()(embeddings, torch.tensor(labels)).item()
    aps = [fastap_query(embeddings.tolist(), labels, q, 10) for q in range(len(labels))]
    assert loss == pytest.approx(loss_from_aps(aps), abs=1e-10)
    other = gradlab.FastAPLoss(num_bins=20)(embeddings, torch.tensor(labels)).item()
    assert other != pytest.approx(loss, abs=1e-6)


def test_blackbox_ap_default_margin_in_its_forward():
    embeddings, labels = _embeddings(12, 6, seed=7), [0, 1, 2] * 4
    loss = gradlab.BlackboxAPLoss()(embeddings, torch.tensor(labels)).item()
    normalized = torch.nn.functional.normalize(embeddings, dim=1)
    scores = (normalized @ normalized.T).tolist()
    aps = []
    for q in range(len(labels)):
        others = [c for c in range(len(labels)) if c != q]
        aps.append(ranked_ap([scores[q][c] for c in others],
                             [labels[c] == labels[q] for c in others], 0.02))  # fmt: skip
    assert loss == pytest.approx(loss_from_aps(aps), abs=1e-10)


def test_blackbox_ap_default_interpolation_is_lambda_four():
    embeddings, labels = _embeddings(12, 6, seed=8), torch.tensor([0, 1, 2] * 4)

    def gradient(**options):
        leaf = embeddings.clone().requires_grad_(True)
        gradlab.BlackboxAPLoss(**options)(leaf, labels).backward()
        return leaf.grad

    default = gradient()
    torch.testing.assert_close(default, gradient(interpolation=4.0), rtol=0, atol=0)
    assert not torch.allclose(default, gradient(interpolation=1.0))


@pytest.mark.parametrize(
    ("cls", "reference", "default", "others"),
    [
        ("MaxViolationTripletLoss", "triplet", 0.2, dict(margin=0.3)),
        ("NTXentLoss", "nt_xent", 0.1, dict(temperature=0.2)),
    ],
)
def test_score_matrix_loss_defaults_margin_temperature_both_directions_mean(
    cls, reference, default, others
):
    from tests.reference.score_losses_loops import score_loss

    generator = torch.Generator().manual_seed(9)
    scores = torch.rand(4, 6, generator=generator, dtype=torch.float64) * 0.6
    positives = (torch.arange(6) % 4).unsqueeze(0) == torch.arange(4).unsqueeze(1)
    loss = getattr(gradlab, cls)()(scores, positives).item()
    expected, _ = score_loss(reference, scores.tolist(), positives.tolist(), default)
    assert loss == pytest.approx(expected, abs=1e-12)
    for changed in (others, dict(direction="i2t"), dict(reduction="sum")):
        other = getattr(gradlab, cls)(**changed)(scores, positives).item()
        assert other != pytest.approx(loss, abs=1e-6), changed
    with pytest.raises(gradlab.GradlabError, match="finite"):  # validate=True by default
        getattr(gradlab, cls)()(torch.full((2, 2), float("nan")), torch.eye(2, dtype=torch.bool))


def test_smooth_ap_loss_validates_by_default():
    embeddings = _embeddings(4, 3)
    embeddings[1, 0] = float("nan")
    with pytest.raises(gradlab.GradlabError, match="finite"):
        gradlab.SmoothAPLoss()(embeddings, torch.tensor([0, 0, 1, 1]))
    gradlab.SmoothAPLoss(validate=False)(embeddings, torch.tensor([0, 0, 1, 1]))  # no check
