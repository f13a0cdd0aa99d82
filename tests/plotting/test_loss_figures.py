"""The other AP losses' figures read back from their Axes on small hand-made results: FAPPY's
Lemma 1 (which points under which label, the two bins it shades) and loss cost against batch
size (one line per loss, its fitted order in its label)."""

from __future__ import annotations

import matplotlib.pyplot as plt
import numpy as np
import pytest
from matplotlib.colors import to_rgba
from matplotlib.markers import MarkerStyle

import gradlab.plotting.losses as module
from tests.helpers.figure_layout import captured_figures, layout_problems


@pytest.fixture
def figures(monkeypatch):
    with captured_figures(monkeypatch, module) as kept:
        yield kept
    plt.close("all")


def _lemma() -> dict:
    position = [0.5, -0.5, 2.0, -1.5, 0.25]
    return {
        "delta": 0.2,
        "negatives": 3,
        "position": position,
        "measured": [1.1, 2.2, 0.0, 0.0, 3.3],
        "closed_form": [1.0, 2.0, 0.0, 0.0, 3.0],
        "lemma_as_printed": [-0.7, 0.0, 0.0, 0.0, -0.9],
    }


def test_the_lemma_figure_draws_measured_closed_form_and_printed_values_at_their_positions(
    figures,
):
    result = _lemma()
    assert module.plot_lemma1(result, "l.png") == "l.png"
    (figure,) = figures
    axis = figure.axes[0]
    by_label = {c.get_label(): c for c in axis.collections if len(c.get_offsets())}
    points = {label: c.get_offsets().tolist() for label, c in by_label.items()}
    order = np.argsort(result["position"])
    assert points == {
        "autograd": [list(p) for p in zip(result["position"], result["measured"], strict=True)],
        "closed form (h_left or h_right)/(|N| Delta)": [
            [result["position"][k], result["closed_form"][k]] for k in order
        ],
        "Lemma 1 as printed: -h_right": [
            list(p) for p in zip(result["position"], result["lemma_as_printed"], strict=True)
        ],
    }
    # the closed form on top of the measured points, the printed value marked x in red
    assert (
        by_label["closed form (h_left or h_right)/(|N| Delta)"].get_zorder()
        > by_label["autograd"].get_zorder()
    )
    measured, closed = by_label["autograd"], by_label["closed form (h_left or h_right)/(|N| Delta)"]
    printed = by_label["Lemma 1 as printed: -h_right"]
    marker = MarkerStyle("x")
    cross = marker.get_path().transformed(marker.get_transform()).vertices
    assert np.array_equal(printed.get_paths()[0].vertices, cross)  # crosses, not dots
    # small closed-form dots inside the larger measured points; the printed value in between
    assert closed.get_sizes()[0] < printed.get_sizes()[0] < measured.get_sizes()[0]
    assert closed.get_zorder() > measured.get_zorder() > max(p.get_zorder() for p in axis.patches)
    assert tuple(printed.get_facecolor()[0]) == to_rgba("C3")
    # the shaded bins: the pair's [0, 1] and the one below [-1, 0], named in the legend
    spans = {
        p.get_label(): p.get_path().transformed(p.get_patch_transform()).get_extents().x0
        for p in axis.patches
    }
    assert spans == {
        "pair's bin [b_t, b_t+1] (Lemma 1's support)": 0.0,
        "bin below [b_t-1, b_t]": -1.0,
    }
    assert [p.get_width() for p in axis.patches] == [1.0, 1.0]
    # light shading in two colours, neither that of a series
    shades = [to_rgba(p.get_facecolor()) for p in axis.patches]
    assert all(0 < shade[3] < 0.3 for shade in shades) and shades[0][:3] != shades[1][:3]
    series = [tuple(c.get_facecolor()[0][:3]) for c in by_label.values()]
    assert len(set(series)) == 3 and not {s[:3] for s in shades} & set(series)
    assert axis.get_xlim() == (-3, 3)  # every position inside [-3, 3]: the bins' neighbours
    assert axis.get_ylabel() == "dP_ij / ds_ik"
    assert axis.get_xlabel() == (
        "(s_ik - b_t) / Delta   (position of the negative relative to the pair's bin)"
    )
    # the legend sits lower left, below the positive derivatives of the pair's bin
    assert axis.get_legend()._loc == 3  # matplotlib's code of "lower left"
    assert axis.get_title() == "FAPPY Lemma 1, measured (Delta = 0.2, |N| = 3)"
    legend = [t.get_text() for t in axis.get_legend().get_texts()]
    assert set(legend) == set(points) | set(spans)


def test_the_lemma_figure_counts_the_negatives_beyond_its_range_or_widens_it(figures):
    # a fixed [-3, 3] left the report's negatives at -3.59 off the figure, unsaid
    result = _lemma()
    result["position"] = [*result["position"][:3], -3.59, 4.5]
    result["measured"][4] = result["closed_form"][4] = result["lemma_as_printed"][4] = 0.0
    module.plot_lemma1(result, "l.png")
    axis = figures[-1].axes[0]
    assert axis.get_xlim() == (-3, 3)
    assert axis.get_xlabel().splitlines()[1] == (
        "2 negatives beyond [-3, 3], each with every value 0, not shown")
    result["measured"][3] = 0.5  # a value there that is not 0: drawn, the range widened
    module.plot_lemma1(result, "l.png")
    axis = figures[-1].axes[0]
    assert axis.get_xlim() == pytest.approx((-3.84, 4.75))
    assert len(axis.get_xlabel().splitlines()) == 1


def test_the_lemma_figure_keeps_negatives_at_the_ends_of_its_range_inside_it(figures):
    # -3 and 3 are on the axis: a non-zero value there needs no wider range, and they are not
    # counted beyond it
    result = _lemma()
    result["position"] = [*result["position"][:3], -3.0, 3.0]
    result["measured"][3] = result["measured"][4] = 0.5
    module.plot_lemma1(result, "l.png")
    axis = figures[-1].axes[0]
    assert axis.get_xlim() == (-3, 3)
    assert len(axis.get_xlabel().splitlines()) == 1


def _cost() -> dict:
    timings = []
    for loss, slope in (("SmoothAP", 2.0), ("FastAP", 1.0)):
        for size in (16, 64, 256):
            timings.append({"loss": loss, "batch_size": size, "median_seconds": 1e-6 * size**slope})
    return {
        "fitted_order": {"SmoothAP": 1.987, "FastAP": 1.0049},
        "claimed": {"SmoothAP": "O(M^2)", "FastAP": "O(M)"},
        "timings": timings,
        "machine": {"device": "cpu (1 thread)"},
        "dims": 128,
    }


def test_the_cost_figure_draws_one_line_per_loss_in_milliseconds_with_its_fitted_order(figures):
    result = _cost()
    assert module.plot_loss_cost(result, "c.png") == "c.png"
    (figure,) = figures
    axis = figure.axes[0]
    lines = axis.get_lines()
    assert [line.get_label() for line in lines] == [
        "SmoothAP: time ~ M^1.99 (claimed O(M^2))",
        "FastAP: time ~ M^1.00 (claimed O(M))",
    ]
    for line, slope in zip(lines, (2.0, 1.0), strict=True):
        assert list(line.get_xdata()) == [16, 64, 256]
        assert list(line.get_ydata()) == pytest.approx([1e-3 * s**slope for s in (16, 64, 256)])
        assert line.get_marker() == "o" and line.get_linestyle() == "-"
    assert (axis.get_xscale(), axis.get_yscale()) == ("log", "log")
    assert axis.get_xlabel() == "mini-batch size M (4 per class)"
    assert axis.get_ylabel() == "forward + backward time (ms)"
    assert axis.get_title() == "Loss cost on cpu (1 thread), d = 128"
    assert [t.get_text() for t in axis.get_legend().get_texts()] == [
        line.get_label() for line in lines
    ]


def test_a_loss_without_a_fitted_order_is_still_drawn_and_says_so(figures):
    # a --quick benchmark's sizes are too few to fit: its figure was empty (only fitted losses
    # were drawn) and matplotlib warned of a legend without entries
    result = _cost()
    del result["fitted_order"]["FastAP"]
    module.plot_loss_cost(result, "c.png")
    (figure,) = figures
    lines = figure.axes[0].get_lines()
    assert [line.get_label() for line in lines] == [
        "SmoothAP: time ~ M^1.99 (claimed O(M^2))",
        "FastAP: no fitted order (too few sizes; claimed O(M))",
    ]
    assert list(lines[1].get_xdata()) == [16, 64, 256]


@pytest.mark.slow
def test_the_cost_figure_of_four_losses_up_to_m_4096_reads_well_on_the_report_page(figures):
    # the benchmark's shape: four AP losses at M = 56 ... 4096 (4 per class), each time a power
    # of M, the claims as the papers state them; the legend must stay off the lines
    orders = {"SmoothAP": 1.96, "FastAP": 2.51, "BlackboxAP": 2.08, "FAPPY": 2.40}
    sizes = [56, 112, 224, 448, 896, 1792, 4096]
    result = {
        "fitted_order": orders,
        "claimed": {"SmoothAP": "O(M^2) per query", "FastAP": "O(M L) per query",
                    "BlackboxAP": "O(n log n) per query", "FAPPY": "not stated"},
        "timings": [{"loss": name, "batch_size": m, "median_seconds": 2e-3 * (m / 56) ** order}
                    for m in sizes for name, order in orders.items()],
        "machine": {"device": "cpu"},
        "dims": 512,
    }  # fmt: skip
    module.plot_loss_cost(result, "c.png")
    (figure,) = figures
    assert layout_problems(figure) == []
    assert len(figure.axes[0].get_lines()) == 4


def test_the_lemma_figure_sizes_its_dots_crosses_and_legend_as_drawn_for_the_page(figures):
    module.plot_lemma1(_lemma(), "l.png")
    (figure,) = figures
    axis = figure.axes[0]
    sizes = {c.get_label(): c.get_sizes().tolist() for c in axis.collections}
    # marker areas in points^2: measured 14, the printed cross 8, the closed form's dot 4
    assert sizes == {
        "autograd": [14.0],
        "closed form (h_left or h_right)/(|N| Delta)": [4.0],
        "Lemma 1 as printed: -h_right": [8.0],
    }
    assert {t.get_fontsize() for t in axis.get_legend().get_texts()} == {8.0}
    assert tuple(figure.get_size_inches()) == pytest.approx((9.0, 4.8))


def test_the_cost_figure_is_eight_by_five_inches_with_an_eight_point_legend(figures):
    module.plot_loss_cost(_cost(), "c.png")
    (figure,) = figures
    assert tuple(figure.get_size_inches()) == pytest.approx((8.0, 5.0))
    assert {t.get_fontsize() for t in figure.axes[0].get_legend().get_texts()} == {8.0}
