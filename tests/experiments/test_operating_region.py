"""The operating-region analyses run end to end (quick settings) and say what they measured."""

import math

import pytest

from gradlab.experiments.operating_region import (
    closed_form_curves,
    p_against_batch_size,
    training_dynamics,
)
from gradlab.plotting.operating_region import (
    plot_closed_forms,
    plot_p_against_batch_size,
    plot_training_dynamics,
)


def test_closed_form_curves_agree_with_their_simulation(tmp_path):
    results = closed_form_curves()
    for tau, points in results["simulated_proportion"].items():
        spreads = results["spreads"]
        for spread, measured in points:
            expected = results["expected_proportion"][tau][spreads.index(spread)]
            assert measured == pytest.approx(expected, abs=0.03)
    assert plot_closed_forms(results, tmp_path / "closed.png").stat().st_size > 10_000


@pytest.mark.slow
def test_p_against_batch_size_quick(tmp_path):
    results = p_against_batch_size(quick=True)
    for name in ("untrained_uniform", "trained_uniform"):
        for row in results["fixed_model"][name]:
            # Under uniform sampling only the diagonal and self-score shares depend on m.
            assert row["p_seed_definition"] == pytest.approx(
                row["sampling_only_prediction"], abs=0.03
            )
    assert "At a fixed model" in results["conclusion"]
    assert plot_p_against_batch_size(results, tmp_path / "p.png").stat().st_size > 10_000


@pytest.mark.slow
def test_training_dynamics_quick(tmp_path):
    results = training_dynamics(quick=True)
    history = results["history"]
    assert len(history) > 10
    for record in history:
        assert 0.0 <= record["p_seed_definition"] <= 1.0
        assert 0.0 <= record["share_without_gradient"] <= 1.0
        assert math.isnan(record["ad_share"]) or 0.0 <= record["ad_share"] <= 1.0
    assert plot_training_dynamics(results, tmp_path / "t.png").stat().st_size > 10_000
