"""The operating-region analyses run end to end (quick settings) and say what they measured."""

import math
from math import erf

import numpy as np
import pytest
from scipy.optimize import brentq

import gradlab.plotting.operating_region as plot_module
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
from tests.helpers.figure_layout import captured_figures, layout_problems
from tests.reference.smooth_ap_loops import slope


@pytest.mark.slow  # seconds: left out of make test-fast
def test_closed_forms_match_an_independent_expectation_and_simulation(tmp_path, monkeypatch):
    # For i.i.d. N(0, s^2) scores, D = s_i - s_j ~ N(0, 2 s^2) and P(|D| < w) = erf(w / 2s),
    # with w the root of the reference slope |dG/dD| = eps (scipy, not gradlab).
    results = closed_form_curves()
    spreads = results["spreads"]
    for tau, curve in results["expected_proportion"].items():
        width = brentq(lambda d, t=float(tau): slope(d, t) - 0.005, 0.0, 10.0, xtol=1e-14)
        independent = [erf(width / (2 * spread)) for spread in spreads]
        assert curve == pytest.approx(independent, abs=1e-9)
        for spread, measured in results["simulated_proportion"][tau]:
            # 64 queries of 256 scores, each P over 255 x 254 pairs: the mean's sampling error
            # is of the order of 0.001 (one query's alone is of the order of 0.01 and more).
            assert measured == pytest.approx(erf(width / (2 * spread)), abs=0.01)
    with captured_figures(monkeypatch, plot_module) as figures:
        plot_closed_forms(results, tmp_path / "closed.png")
    assert layout_problems(figures[0]) == []


@pytest.mark.slow
def test_p_against_batch_size_quick(tmp_path, monkeypatch):
    results = p_against_batch_size(quick=True)
    for name in ("untrained_uniform", "trained_uniform"):
        for row in results["fixed_model"][name]:
            # Under uniform sampling only the diagonal and self-score shares depend on m.
            assert row["p_seed_definition"] == pytest.approx(
                row["sampling_only_prediction"], abs=0.03
            )
    assert "At a fixed model" in results["conclusion"]
    with captured_figures(monkeypatch, plot_module) as figures:
        plot_p_against_batch_size(results, tmp_path / "p.png")
    assert layout_problems(figures[0]) == []
    left, right = figures[0].axes
    expected = []
    for name, rows in results["fixed_model"].items():
        if name.endswith("uniform"):
            for key in ("p_seed_definition", "sampling_only_prediction", "p_without_query"):
                expected.append([(r["batch_size"], r[key]) for r in rows])
    drawn = [list(zip(line.get_xdata(), line.get_ydata(), strict=True)) for line in left.lines]
    assert drawn == expected
    trained = results["trained_per_batch_size"]
    drawn = [list(zip(line.get_xdata(), line.get_ydata(), strict=True)) for line in right.lines]
    assert drawn == [[(r["batch_size"], r[key]) for r in trained]
                     for key in ("p_seed_definition", "p_without_query")]  # fmt: skip


@pytest.mark.slow
def test_training_dynamics_quick(tmp_path, monkeypatch):
    results = training_dynamics(quick=True)
    history = results["history"]
    assert len(history) > 10
    for record in history:
        assert 0.0 <= record["p_seed_definition"] <= 1.0
        assert 0.0 <= record["share_without_gradient"] <= 1.0
        assert math.isnan(record["ad_share"]) or 0.0 <= record["ad_share"] <= 1.0
    with captured_figures(monkeypatch, plot_module) as figures:
        plot_training_dynamics(results, tmp_path / "t.png")
    assert layout_problems(figures[0]) == []
    steps = [h["step"] for h in history]
    panels = {
        "SmoothAP loss": ["loss"],
        "Operating-region proportion": ["p_seed_definition", "p_without_query"],
        "Queries with no entry of slope above eps": ["share_without_gradient",
                                           "share_without_weighted_gradient"],
        "AD - CB split": ["ad_share", "ad_cb_cosine"],
    }  # fmt: skip
    drawn = {axis.get_title(): axis for axis in figures[0].axes}
    suptitle = figures[0].get_suptitle()
    for title, keys in panels.items():
        flat = all(len({h[key] for h in history if math.isfinite(h[key])}) == 1 for key in keys)
        if flat:  # a panel that never moves is a sentence with its value, not a flat line
            assert title not in drawn and title in suptitle
            assert f"{history[0][keys[0]]:g} at each of the {len(steps)} logged steps" in suptitle
            continue
        axis = drawn[title]
        assert [list(line.get_xdata()) for line in axis.lines] == [steps] * len(keys)
        for line, key in zip(axis.lines, keys, strict=True):
            assert np.array_equal(line.get_ydata(), [h[key] for h in history], equal_nan=True)
