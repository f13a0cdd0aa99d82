"""The harmonic-vs-log analyses run (quick settings) and agree with their own claims."""

import numpy as np
import pytest

import gradlab.plotting.tie_aware as plot_module
from gradlab.experiments.tie_aware import harmonic_error_surface, relaxation_gap_against_scale
from gradlab.plotting.tie_aware import plot_harmonic_error, plot_relaxation_gap
from gradlab.report.prose import relaxation_summary
from tests.helpers.figure_layout import captured_figures, layout_problems


@pytest.mark.slow  # a 64 x 64 error surface and its figure: seconds
def test_error_surface_respects_the_paper_bound(tmp_path, monkeypatch):
    results = harmonic_error_surface(max_before=64, max_in_bin=64)
    assert results["bound_holds"] and 0.0 < results["largest_error_over_bound"] <= 1.0
    with captured_figures(monkeypatch, plot_module) as figures:
        plot_harmonic_error(results, tmp_path / "h.png")
    assert layout_problems(figures[0]) == []
    # What is drawn is the data: the surface on the left; per bin size n_d, the log error,
    # the bound and |midpoint error| against N_{d-1} on the right (columns looked up here).
    left, right = figures[0].axes[:2]
    error = np.array(results["surfaces"]["log"]["error"])
    assert np.array_equal(np.asarray(left.collections[0].get_array()).ravel(), error.ravel())
    in_bin = results["in_bin"]
    lines = right.get_lines()
    # the grid's nearest column to each n_d, each drawn once: up to n_d = 64, 512 is 64 again
    columns = []
    for n in [1, 8, 64, 512]:
        column = min(range(len(in_bin)), key=lambda c, n=n: abs(in_bin[c] - n))
        if column not in columns:
            columns.append(column)
    assert len(columns) == 3 and len(lines) == 3 * len(columns)
    for index, column in enumerate(columns):
        drawn = [line.get_ydata() for line in lines[3 * index : 3 * index + 3]]
        midpoint = np.abs(np.array(results["surfaces"]["midpoint"]["error"]))
        for got, source in zip(drawn, (error, np.array(results["paper_bound"]), midpoint),
                               strict=True):  # fmt: skip
            assert np.array_equal(got, source[:, column])
        assert np.array_equal(lines[3 * index].get_xdata(), results["before"])


@pytest.mark.slow
def test_exact_stand_in_converges_and_log_does_not(tmp_path, monkeypatch):
    results = relaxation_gap_against_scale(quick=True)
    for run in results["runs"]:
        if run["method"] == "exact":
            # Saturated codes are binary: the exact stand-in reproduces AP_T / DCG_T.
            assert run["gap_at_largest_scale"] < 1e-3
    log_gaps = [r["gap_at_largest_scale"] for r in results["runs"] if r["method"] == "log"]
    assert min(log_gaps) > 1e-3
    assert "AP exact" in relaxation_summary(results)
    with captured_figures(monkeypatch, plot_module) as figures:
        plot_relaxation_gap(results, tmp_path / "g.png")
    assert layout_problems(figures[0]) == []
    # Each run is one line of its panel (row: objective, column: code length), gaps floored at
    # 1e-17 for the log scale.
    panels = np.array(figures[0].axes).reshape(2, len(results["bits"]))
    drawn = sorted(tuple(line.get_ydata()) for axis in panels.flat for line in axis.get_lines()
                   if len(line.get_ydata()) == len(results["scales"]))  # fmt: skip
    expected = sorted(tuple(max(g, 1e-17) for g in run["gaps"]) for run in results["runs"])
    assert drawn == expected
    for row, objective in enumerate(("ap", "dcg")):
        for column, bits in enumerate(results["bits"]):
            runs = [r for r in results["runs"] if r["objective"] == objective and r["bits"] == bits]
            assert len(panels[row, column].get_lines()) == len(runs) + 1  # + the tolerance line
