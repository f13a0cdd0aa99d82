"""The tie-aware figures read back from their Axes: which series each panel draws, under which
label, style and colour, on small hand-made results (no study run)."""

from __future__ import annotations

import warnings

import matplotlib.pyplot as plt
import numpy as np
import pytest
from matplotlib.colors import LogNorm, to_rgb

import gradlab.plotting.tie_aware as module
from gradlab.plotting.style import series_style
from tests.helpers.figure_layout import captured_figures


@pytest.fixture
def figures(monkeypatch):
    with captured_figures(monkeypatch, module) as kept:
        yield kept
    plt.close("all")


def _surface() -> dict:
    """Items before the bin 1..5, in the bin 1 to 1024: per (a, n) a distinct error."""
    before = [1.0, 2.0, 3.0, 4.0, 5.0]
    # neighbours of 8, 64 and 512 on the grid: the columns drawn are the nearest, not next to it
    in_bin = [1.0, 2.0, 4.0, 7.0, 8.0, 9.0, 16.0, 32.0, 63.0, 64.0, 65.0, 128.0, 256.0, 511.0,
              512.0, 513.0, 1024.0]  # fmt: skip
    a, n = np.meshgrid(before, in_bin, indexing="ij")
    return {
        "before": before,
        "in_bin": in_bin,
        "surfaces": {
            "log": {"error": (n / (3 * a**2)).tolist()},
            "midpoint": {"error": (-n / (50 * a**3)).tolist()},
        },
        "paper_bound": (n / (2 * a**2)).tolist(),
        "asymptotic": (n / (2.5 * a**2)).tolist(),
    }


def test_the_error_figure_draws_log_bound_and_midpoint_per_bin_size_in_one_colour(figures):
    result = _surface()
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # nothing for the reader to puzzle over on stderr
        assert module.plot_harmonic_error(result, "h.png") == "h.png"
    (figure,) = figures
    assert tuple(figure.get_size_inches()) == (12, 5)
    assert type(figure.get_layout_engine()).__name__ == "ConstrainedLayoutEngine"
    left, right = figure.axes[:2]
    error = np.array(result["surfaces"]["log"]["error"])
    bound = np.array(result["paper_bound"])
    mesh = left.collections[0]
    assert np.array_equal(np.asarray(mesh.get_array()).ravel(), error.ravel())
    assert isinstance(mesh.norm, LogNorm) and mesh.get_cmap().name == "viridis"
    assert mesh.colorbar is not None and mesh.colorbar.ax is figure.axes[2]
    assert (left.get_xscale(), left.get_yscale()) == ("log", "log")
    assert left.get_xlabel() == "items in the bin, $n_d$"
    assert left.get_ylabel() == "items before the bin, $N_{d-1}$"
    assert left.get_title() == (
        "Error of $\\ln((N+n)/N)$ for $H(N+n) - H(N)$\n(white: the bound $n/(2N^2)$)"
    )
    contours = [c for c in left.collections[1:] if hasattr(c, "levels")]
    assert [list(c.levels) for c in contours] == [[1e-4, 1e-3, 1e-2, 1e-1]]
    # the bound's contours are white, as the title says, and labelled with their level
    assert all(to_rgb(colour) == (1, 1, 1) for colour in contours[0].get_edgecolor())
    labels = [text for text in left.texts]
    assert labels and {t.get_text() for t in labels} <= {"0.0001", "0.001", "0.01", "0.1"}
    assert all(t.get_fontsize() == 10 for t in labels)
    assert figure.axes[2].get_ylabel() == "ln-sum error"  # the colour bar
    # right panel: n_d = 1, 8, 64, 512 -> columns 0, 3, 6, 9; per column solid, dashed, dotted
    lines = right.get_lines()
    assert len(lines) == 12
    colours = []
    for index, column in enumerate((0, 4, 9, 14)):
        solid, dashed, dotted = lines[3 * index : 3 * index + 3]
        assert [line.get_linestyle() for line in (solid, dashed, dotted)] == ["-", "--", ":"]
        assert solid.get_label() == f"$n_d$ = {result['in_bin'][column]:.0f}"
        for line, series in (
            (solid, error),
            (dashed, bound),
            (dotted, np.abs(result["surfaces"]["midpoint"]["error"])),
        ):
            assert np.array_equal(line.get_xdata(), result["before"])
            assert np.array_equal(line.get_ydata(), np.asarray(series)[:, column])
        assert to_rgb(dashed.get_color()) == to_rgb(solid.get_color()) == to_rgb(dotted.get_color())
        assert dashed.get_alpha() == pytest.approx(0.6) and solid.get_alpha() is None
        colours.append(to_rgb(solid.get_color()))
    assert colours == [to_rgb(series_style(i)["color"]) for i in (0, 1, 2, 4)]
    assert (right.get_xscale(), right.get_yscale()) == ("log", "log")
    assert right.get_xlabel() == "items before the bin, $N_{d-1}$"
    assert right.get_ylabel() == "absolute error"
    assert right.get_title() == "Log (solid), bound $n/(2N^2)$ (dashed),\nmidpoint (dotted)"
    legend = right.get_legend().get_texts()
    assert [text.get_text() for text in legend] == [f"$n_d$ = {n}" for n in (1, 8, 64, 512)]
    assert all(text.get_fontsize() == 10 for text in legend)


def test_a_coarse_grid_draws_each_nearest_column_once(figures):
    result = _surface()
    keep = [0, 1, 2]  # n_d 1, 2, 4: the sizes asked for are nearest to 1, 4, 4, 4
    result["in_bin"] = [result["in_bin"][k] for k in keep]
    for key in ("paper_bound", "asymptotic"):
        result[key] = [[row[k] for k in keep] for row in result[key]]
    for key in ("log", "midpoint"):
        rows = result["surfaces"][key]["error"]
        result["surfaces"][key]["error"] = [[row[k] for k in keep] for row in rows]
    module.plot_harmonic_error(result, "h.png")
    right = figures[0].axes[1]
    assert [line.get_label() for line in right.get_lines()[::3]] == ["$n_d$ = 1", "$n_d$ = 4"]


@pytest.mark.slow
def test_the_colour_bars_label_stands_clear_of_the_right_panels_label(figures):
    module.plot_harmonic_error(_surface(), "h.png")
    figure = figures[0]
    renderer = figure._get_renderer()
    figure.draw_without_rendering()
    _, right, colour_bar = figure.axes
    gap = (right.yaxis.label.get_window_extent(renderer).x0
           - colour_bar.yaxis.label.get_window_extent(renderer).x1)  # fmt: skip
    assert gap >= 0.3 * figure.dpi  # at least 0.3 inch between "ln-sum error" and the next label
    assert gap <= 1.5 * figure.dpi  # and no wide empty band: the panels keep the width
    assert right.get_position().width >= 0.3  # of the figure


def _gap_result(bits) -> dict:
    scales = [0.5, 5.0, 50.0, 500.0]
    runs = []
    for bit_count in bits:
        for objective in ("ap", "dcg"):
            for offset, method in enumerate(("log", "midpoint", "exact")):
                base = bit_count + (100 if objective == "dcg" else 0) + 10 * offset
                gaps = [base * 1e-4 / (k + 1) for k in range(len(scales))]
                if method == "exact":
                    gaps[-1] = 0.0  # drawn at the log axis' floor
                runs.append(
                    {"bits": bit_count, "objective": objective, "method": method, "gaps": gaps}
                )
    return {
        "scales": scales,
        "bits": list(bits),
        "items": 16,
        "classes": 2,
        "tolerance": 2e-3,
        "runs": runs,
    }


@pytest.mark.parametrize("bits", [(12, 24), (12,)])
@pytest.mark.slow
def test_the_gap_figure_draws_each_run_in_its_panel_with_its_method_s_style(figures, bits):
    result = _gap_result(bits)
    assert module.plot_relaxation_gap(result, "g.png") == "g.png"
    (figure,) = figures
    assert tuple(figure.get_size_inches()) == (4 * len(bits), 7.5)
    panels = np.array(figure.axes).reshape(2, len(bits))
    styles = {"log": "-", "midpoint": "--", "exact": ":"}
    for row, objective in enumerate(("ap", "dcg")):
        for column, bit_count in enumerate(bits):
            axis = panels[row, column]
            assert axis.get_title() == f"{objective.upper()}, {bit_count} bits"
            assert (axis.get_xscale(), axis.get_yscale()) == ("log", "log")
            runs = [
                r for r in result["runs"] if (r["bits"], r["objective"]) == (bit_count, objective)
            ]
            *drawn, tolerance = axis.get_lines()
            assert [line.get_label() for line in drawn] == [r["method"] for r in runs]
            for line, run in zip(drawn, runs, strict=True):
                assert line.get_linestyle() == styles[run["method"]]
                assert np.array_equal(line.get_xdata(), result["scales"])
                assert np.array_equal(line.get_ydata(), [max(g, 1e-17) for g in run["gaps"]])
            assert list(tolerance.get_ydata()) == [2e-3, 2e-3]
            # grey, as the title says, and thinner than the gaps
            assert to_rgb(tolerance.get_color()) == to_rgb("grey")
            assert tolerance.get_linewidth() < min(line.get_linewidth() for line in drawn)
            ylabel = f"|{objective.upper()}_r - {objective.upper()}_T|"
            assert axis.get_ylabel() == (ylabel if column == 0 else "")
            assert axis.get_xlabel() == ("tanh scale alpha" if row == 1 else "")
    legend = panels[0, 0].get_legend()
    assert legend.get_title().get_text() == "harmonic stand-in"
    assert [t.get_text() for t in legend.get_texts()] == ["log", "midpoint", "exact"]
    assert all(axis.get_legend() is None for axis in panels.flat[1:])
    assert figure.get_suptitle() == (
        "Relaxed vs exact tie-aware metrics (16 items, 2 classes); grey: 0.002"
    )
    # shared axes: every panel shows the same scale and gap ranges
    for axis in panels.flat:
        assert axis.get_shared_x_axes().joined(axis, panels[0, 0])
        assert axis.get_shared_y_axes().joined(axis, panels[0, 0])


def test_results_saved_before_the_sizes_were_recorded_are_the_report_s_64_codes_of_4(figures):
    result = _gap_result((12,))
    del result["items"], result["classes"]
    module.plot_relaxation_gap(result, "g.png")
    assert figures[0].get_suptitle() == (
        "Relaxed vs exact tie-aware metrics (64 items, 4 classes); grey: 0.002"
    )
