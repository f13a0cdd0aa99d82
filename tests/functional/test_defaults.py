"""Every public default of ``gradlab.functional`` not pinned in tests/test_defaults.py.

A call that omits an argument equals the call that spells out the documented value, computed by
an independent reference (mpmath, loops), and differs from a call with another value, so a
moved default cannot go unnoticed.
"""

from __future__ import annotations

import math

import mpmath
import numpy as np
import pytest
import torch

from gradlab.functional import (
    discount_gap,
    discount_rate,
    fappy_loss,
    harmonic_gap,
    harmonic_log_error,
    harmonic_rate,
    operating_region_is_empty,
    relaxed_tie_aware_ap,
    smooth_ap_decomposition,
)
from tests.reference.histogram_losses_loops import fappy_algorithm1
from tests.reference.relaxed_ranking_loops import harmonic_stand_in, relaxed_ap
from tests.reference.smooth_ap_loops import smooth_ap_one_query

LOW = torch.tensor([0.0, 0.5, 2.0, 6.5], dtype=torch.float64)
HIGH = LOW + 1.5


def test_harmonic_gap_and_rate_default_to_the_exact_digamma_form():
    pairs = zip(LOW.tolist(), HIGH.tolist(), strict=True)
    expected = [float(harmonic_stand_in(a, b, "exact")) for a, b in pairs]
    torch.testing.assert_close(harmonic_gap(LOW, HIGH), torch.tensor(expected, dtype=torch.float64))
    torch.testing.assert_close(
        harmonic_rate(LOW, HIGH - LOW), torch.tensor(expected, dtype=torch.float64) / 1.5
    )
    assert not torch.allclose(harmonic_gap(LOW, HIGH), harmonic_gap(LOW, HIGH, "log"))


def test_discount_gap_and_rate_default_to_the_interpolated_exact_sums():
    # At integers the exact discount sum is sum_{t=a+1}^{b} 1/log2(t+1).
    low, high = torch.tensor([0.0, 2.0, 5.0], dtype=torch.float64), torch.tensor([1.0, 4.0, 9.0])
    high = high.double()
    expected = [
        math.fsum(1.0 / math.log2(t + 1) for t in range(int(a) + 1, int(b) + 1))
        for a, b in zip(low.tolist(), high.tolist(), strict=True)
    ]
    torch.testing.assert_close(discount_gap(low, high), torch.tensor(expected, dtype=torch.float64))
    torch.testing.assert_close(
        discount_rate(low, high - low), torch.tensor(expected, dtype=torch.float64) / (high - low)
    )
    for method in ("log", "midpoint"):
        assert not torch.allclose(discount_gap(low, high), discount_gap(low, high, method))


def test_relaxed_ap_defaults_to_the_printed_log_form():
    positive = torch.tensor([[0.5, 0.0, 1.2, 0.3]], dtype=torch.float64)
    total = torch.tensor([[1.5, 0.0, 2.5, 0.75]], dtype=torch.float64)
    expected = relaxed_ap(positive[0].tolist(), total[0].tolist(), "log")
    assert relaxed_tie_aware_ap(positive, total).item() == pytest.approx(expected, abs=1e-13)
    assert relaxed_tie_aware_ap(positive, total, "exact").item() != pytest.approx(expected)


def test_harmonic_log_error_defaults_to_the_log_method_in_float64():
    a, n = np.array([1.0, 4.0, 30.0]), np.array([2.0, 3.0, 11.0])
    result = harmonic_log_error(a, n)
    for k in range(3):
        truth = mpmath.harmonic(a[k] + n[k]) - mpmath.harmonic(a[k])
        expected = float(mpmath.log((a[k] + n[k]) / a[k]) - truth)
        assert float(result.error[k]) == pytest.approx(expected, abs=1e-14)
    midpoint = harmonic_log_error(a, n, "midpoint").error
    assert not np.allclose(result.error, midpoint)


@pytest.mark.parametrize(("tau", "empty"), [(20.0, False), (50.0, True), (60.0, True)])
def test_operating_region_is_empty_defaults_eps_to_the_seeds(tau, empty):
    # Empty exactly when eps * tau >= 1/4 with eps = 0.005 (seed 002).
    assert operating_region_is_empty(tau=tau) is empty


@pytest.mark.parametrize(("eps", "empty"), [(10.0, False), (25.0, True), (30.0, True)])
def test_operating_region_is_empty_defaults_tau_to_the_seeds(eps, empty):
    assert operating_region_is_empty(eps=eps) is empty


def test_smooth_ap_decomposition_default_temperature_is_the_seeds():
    generator = torch.Generator().manual_seed(12)
    query = torch.randn(4, generator=generator, dtype=torch.float64) * 0.3
    vectors = torch.randn(6, 4, generator=generator, dtype=torch.float64) * 0.3
    positives = torch.tensor([True, False, True, False, False, True])
    parts = smooth_ap_decomposition(query, vectors, positives)
    scores = (vectors @ query).tolist()
    expected = smooth_ap_one_query(scores, positives.tolist(), 0.01)
    assert parts.ap.item() == pytest.approx(expected, abs=1e-12)
    assert parts.ap.item() != pytest.approx(smooth_ap_one_query(scores, positives.tolist(), 0.1))


def test_fappy_loss_default_delta_min_is_the_seeds_smallest():
    generator = torch.Generator().manual_seed(15)
    embeddings = torch.randn(8, 4, generator=generator, dtype=torch.float64)
    labels = [0, 0, 1, 1, 2, 2, 3, 3]
    loss = fappy_loss(embeddings, torch.tensor(labels)).item()
    assert loss == pytest.approx(fappy_algorithm1(embeddings.tolist(), labels, 0.01), abs=1e-10)
    assert loss != pytest.approx(fappy_algorithm1(embeddings.tolist(), labels, 0.5), abs=1e-6)
