"""The operating-region figures on hand-written results (no study run): which curve is drawn
under which label and style, log axes where the figure says so, panels that never move stated in
words, whole-number step ticks. The drawn Axes are read back; expected values are the inputs."""

from __future__ import annotations

import math

import matplotlib.pyplot as plt
import numpy as np
import pytest
from matplotlib.colors import to_rgba
from matplotlib.layout_engine import ConstrainedLayoutEngine

import gradlab.plotting.operating_region as module
from gradlab.plotting.style import series_style
from tests.helpers.figure_layout import captured_figures, layout_problems


@pytest.fixture
def drawn(monkeypatch, tmp_path):
    def draw(function, results):
        with captured_figures(monkeypatch, module) as figures:
            assert function(results, tmp_path / "f.png") == tmp_path / "f.png"
        (figure,) = figures
        return figure

    yield draw
    plt.close("all")


def _points(line):
    return [(float(x), float(y)) for x, y in zip(line.get_xdata(), line.get_ydata(), strict=True)]


def _closed_forms():
    return {"taus": [0.01, 0.1, 1.0],
            "widths": {"0.001": [0.05, 0.4, 2.0], "0.005": [0.03, 0.2, 1.0]},
            "seed_setting": {"tau": 0.01, "eps": 0.005, "width": 0.03125},
            "spreads": [0.1, 0.2],
            "expected_proportion": {"0.01": [0.3, 0.2], "0.1": [0.9, 0.7]},
            "simulated_proportion": {"0.01": [[0.1, 0.31], [0.2, 0.19]],
                                     "0.1": [[0.1, 0.88], [0.2, 0.72]]}}  # fmt: skip


def test_closed_forms_draw_a_width_curve_per_eps_on_log_log_axes(drawn):
    figure = drawn(module.plot_closed_forms, _closed_forms())
    left = figure.axes[0]
    assert [_points(line) for line in left.get_lines()] == [
        [(0.01, 0.05), (0.1, 0.4), (1.0, 2.0)],
        [(0.01, 0.03), (0.1, 0.2), (1.0, 1.0)],
    ]
    assert [line.get_label() for line in left.get_lines()] == ["eps = 0.001", "eps = 0.005"]
    for index, line in enumerate(left.get_lines()):
        style = series_style(index)
        assert to_rgba(line.get_color()) == to_rgba(style["color"])
        assert line.get_linestyle() == style["linestyle"]
    assert (left.get_xscale(), left.get_yscale()) == ("log", "log")
    assert left.get_xlabel() == "temperature tau"
    assert left.get_ylabel() == "half-width w (score units)"
    assert left.get_title() == "Operating region |dG/dD| > eps  <=>  |D| < w"
    (seed,) = left.collections
    assert seed.get_offsets().tolist() == [[0.01, 0.03125]]
    assert to_rgba(seed.get_facecolor()[0]) == to_rgba("black") and seed.get_zorder() == 3
    (note,) = left.texts
    assert note.get_text() == "Brown et al. (2020):\ntau = 0.01, eps = 0.005\nw = 0.0312"
    assert note.xy == (0.01, 0.03125) and note.get_position() == (0.04, 0.80)
    assert note.get_anncoords() == "axes fraction" and note.get_ha() == "left"
    assert note.arrow_patch is not None
    assert to_rgba(note.arrow_patch.get_edgecolor()) == to_rgba("black")
    assert note.arrow_patch.get_linewidth() == 0.8
    legend = left.get_legend()
    assert legend.get_title().get_text() == "w = 0 once eps * tau >= 1/4"
    assert [t.get_text() for t in legend.get_texts()] == ["eps = 0.001", "eps = 0.005"]
    box = legend.get_window_extent(figure.canvas.get_renderer())
    assert box.y1 <= left.get_window_extent().y0  # below the panel
    assert figure.get_size_inches() == pytest.approx((12, 5.2))
    left_box, right_box = (axis.get_position() for axis in figure.axes)  # side by side
    assert left_box.x1 < right_box.x0 and left_box.y0 == pytest.approx(right_box.y0)


def test_closed_forms_draw_expected_lines_and_simulated_markers_per_tau(drawn):
    results = _closed_forms()
    figure = drawn(module.plot_closed_forms, results)
    _, right = figure.axes
    assert [_points(line) for line in right.get_lines()] == [[(0.1, 0.3), (0.2, 0.2)],
                                                             [(0.1, 0.9), (0.2, 0.7)]]  # fmt: skip
    assert [c.get_offsets().tolist() for c in right.collections] == [
        [[0.1, 0.31], [0.2, 0.19]],
        [[0.1, 0.88], [0.2, 0.72]],
    ]
    for index, (line, markers) in enumerate(zip(right.get_lines(), right.collections,
                                                strict=True)):  # fmt: skip
        style = series_style(index)
        assert to_rgba(line.get_color()) == to_rgba(style["color"])
        assert line.get_linestyle() == style["linestyle"]
        assert to_rgba(markers.get_facecolor()[0]) == to_rgba(style["color"])
        assert markers.get_zorder() == 3
    assert len({tuple(c.get_paths()[0].vertices.ravel()) for c in right.collections}) == 2
    assert (right.get_xscale(), right.get_yscale()) == ("log", "linear")
    assert right.get_xlabel() == "score standard deviation (cosine units)"
    assert right.get_ylabel() == "P without the diagonal"
    assert right.get_title() == "Off-diagonal P, i.i.d. Gaussian scores: erf(w / 2 sigma)"
    legend = right.get_legend()
    assert [t.get_text() for t in legend.get_texts()] == ["tau = 0.01", "tau = 0.1"]
    for index, handle in enumerate(legend.legend_handles):
        style = series_style(index)
        assert (handle.get_marker(), handle.get_linestyle()) == (style["marker"],
                                                                 style["linestyle"])  # fmt: skip
        assert to_rgba(handle.get_color()) == to_rgba(style["color"])
    assert legend.get_title().get_text() == (
        "lines: closed form; markers: simulation, 64 x 256 scores"
    )
    assert legend._ncols == 3
    box = legend.get_window_extent(figure.canvas.get_renderer())
    assert box.y1 <= right.get_window_extent().y0


def _rows(sizes, *columns):
    keys = ("p_seed_definition", "sampling_only_prediction", "p_without_query")
    return [{"batch_size": m, **{k: c[i] for k, c in zip(keys, columns, strict=False)}}
            for i, m in enumerate(sizes)]  # fmt: skip


def _p_results():
    sizes = [8, 32, 128]
    return {
        "epochs": 3,
        "fixed_model": {
            "untrained_uniform": _rows(sizes, [0.1, 0.2, 0.3], [0.11, 0.21, 0.31], [0.5, 0.6, 0.7]),
            "trained_classes": _rows(sizes, [0.9] * 3, [0.9] * 3, [0.9] * 3),
            "trained_uniform": _rows(sizes, [0.4, 0.3, 0.2], [0.41, 0.31, 0.21], [0.8, 0.7, 0.6]),
        },
        "trained_per_batch_size": _rows([16, 64], [0.5, 0.25], [0, 0], [0.75, 0.125]),
    }


def test_p_against_batch_size_draws_three_curves_per_uniform_model(drawn):
    figure = drawn(module.plot_p_against_batch_size, _p_results())
    left = figure.axes[0]
    sizes = [8.0, 32.0, 128.0]
    expected = [[0.1, 0.2, 0.3], [0.11, 0.21, 0.31], [0.5, 0.6, 0.7],
                [0.4, 0.3, 0.2], [0.41, 0.31, 0.21], [0.8, 0.7, 0.6]]  # fmt: skip
    assert [_points(line) for line in left.get_lines()] == [
        list(zip(sizes, values, strict=True)) for values in expected
    ]
    assert [line.get_label() for line in left.get_lines()] == [
        f"{name}: {what}" for name in ("untrained", "trained")
        for what in (f"P, {module.EQ1_NAME}", "diagonal + self-score shares only",
                     "P over pairs of other candidates")]  # fmt: skip
    # colour by the model's place among all fixed models (C0, C2), style by the quantity
    assert [to_rgba(line.get_color()) for line in left.get_lines()] == [
        to_rgba(c) for c in ("C0",) * 3 + ("C2",) * 3
    ]
    assert [line.get_linestyle() for line in left.get_lines()] == ["-", "--", ":"] * 2
    assert [line.get_marker() for line in left.get_lines()] == ["o", "None", "None"] * 2
    assert left.get_xlabel() == "mini-batch size m"
    assert left.get_ylabel() == "proportion P in the operating region"
    assert left.get_title() == "(a) Fixed model, batches of size m"
    assert left.get_xscale() == "log"
    assert list(left.get_xticks()) == sizes
    assert [t.get_text() for t in left.get_xticklabels()] == ["8", "32", "128"]
    assert {t.get_fontsize() for t in left.get_legend().get_texts()} == {9.5}
    assert [t.get_text() for t in left.get_legend().get_texts()] == [
        line.get_label() for line in left.get_lines()
    ]
    width, height = figure.get_size_inches()
    assert (width, height) == pytest.approx((11.5, 5))
    left_box, right_box = (axis.get_position() for axis in figure.axes)  # side by side
    assert left_box.x1 < right_box.x0 and left_box.y0 == pytest.approx(right_box.y0)
    assert figure.get_layout_engine() is not None


def test_p_against_batch_size_draws_the_trained_models_per_m(drawn):
    figure = drawn(module.plot_p_against_batch_size, _p_results())
    _, right = figure.axes
    assert [_points(line) for line in right.get_lines()] == [
        [(16, 0.5), (64, 0.25)],
        [(16, 0.75), (64, 0.125)],
    ]
    assert [line.get_label() for line in right.get_lines()] == [
        f"P, {module.EQ1_NAME}",
        "P without the query's row and column",
    ]
    assert [(line.get_marker(), line.get_linestyle()) for line in right.get_lines()] == [
        ("o", "-"),
        ("s", ":"),
    ]
    assert right.get_xlabel() == "mini-batch size m used for training"
    assert right.get_ylabel() == "mean P over the last epoch"
    assert right.get_title() == "(b) SmoothAP trained at each m (3 epochs)"
    assert right.get_xscale() == "log" and list(right.get_xticks()) == [16, 64]
    assert [t.get_text() for t in right.get_legend().get_texts()] == [
        f"P, {module.EQ1_NAME}",
        "P without the query's row and column",
    ]


KEYS = ("loss", "p_seed_definition", "p_without_query", "share_without_gradient",
        "share_without_weighted_gradient", "ad_share", "ad_cb_cosine")  # fmt: skip


TITLES = ["SmoothAP loss", "Operating-region proportion",
          "Queries with no entry of slope above eps", "AD - CB split"]  # fmt: skip
PANEL_KEYS = [["loss"], ["p_seed_definition", "p_without_query"],
              ["share_without_gradient", "share_without_weighted_gradient"],
              ["ad_share", "ad_cb_cosine"]]  # fmt: skip


def _history(steps=(10, 20, 30), **constant):
    """Three logged steps; every key moves unless given a constant value."""
    rng = np.random.default_rng(0)
    return [{"step": step, **{key: constant.get(key, float(rng.random())) for key in KEYS}}
            for step in steps]  # fmt: skip


def _dynamics(history):
    return {"history": history, "batch_size": 32, "tau": 0.01}


def test_training_dynamics_draw_every_moving_series_under_its_label(drawn):
    history = _history()
    figure = drawn(module.plot_training_dynamics, _dynamics(history))
    assert [axis.get_title() for axis in figure.axes] == TITLES
    assert [axis.get_ylabel() for axis in figure.axes] == [
        "1 - mean smooth AP",
        "proportion P",
        "share of queries",
        "mean over queries",
    ]
    labels = [["loss"], [module.EQ1_NAME, "P without the query's row and column"],
              ["slope > eps", "slope / R^2 > eps"],
              ["|AD| / (|AD| + |CB|)", "cosine(AD, -CB)"]]  # fmt: skip
    for axis, own, names in zip(figure.axes, PANEL_KEYS, labels, strict=True):
        assert [_points(line) for line in axis.get_lines()] == [
            [(h["step"], h[key]) for h in history] for key in own
        ]
        assert [line.get_label() for line in axis.get_lines()] == names
        for index, line in enumerate(axis.get_lines()):
            style = series_style(index)
            assert to_rgba(line.get_color()) == to_rgba(style["color"])
            assert line.get_linestyle() == style["linestyle"]
        legend = axis.get_legend()
        if len(own) > 1:
            assert [t.get_text() for t in legend.get_texts()] == names
        else:
            assert legend is None
    assert [axis.get_xlabel() for axis in figure.axes] == ["", "", "optimizer step",
                                                           "optimizer step"]  # fmt: skip
    assert figure.axes[0].get_shared_x_axes().joined(figure.axes[0], figure.axes[3])
    assert figure.get_size_inches() == pytest.approx((9.2, 8.2))
    boxes = [axis.get_position() for axis in figure.axes]  # two rows of two
    assert boxes[0].x1 < boxes[1].x0 and boxes[2].x1 < boxes[3].x0
    assert boxes[2].y1 < boxes[0].y0 and boxes[1].y0 == pytest.approx(boxes[0].y0)
    assert figure._suptitle.get_text() == "SmoothAP on digits 0-4, batch 32, tau=0.01"
    assert isinstance(figure.get_layout_engine(), ConstrainedLayoutEngine)


def test_training_dynamics_name_the_batches_make_up_when_the_run_gives_it(drawn):
    # "batch 64" alone did not tell this run from the Monitor's (5 classes x 8)
    figure = drawn(module.plot_training_dynamics,
                   {**_dynamics(_history()), "classes_per_batch": 4, "per_class": 8})
    assert figure._suptitle.get_text() == (
        "SmoothAP on digits 0-4, batches of 4 classes x 8, tau=0.01")


@pytest.mark.slow
def test_training_dynamics_tick_whole_steps_only(drawn):
    figure = drawn(module.plot_training_dynamics, _dynamics(_history(steps=(0, 1, 2))))
    figure.canvas.draw()
    for axis in figure.axes:
        ticks = [t for t in axis.get_xticks() if 0 <= t <= 2]
        assert len(ticks) >= 2 and all(float(t).is_integer() for t in ticks), ticks


def test_a_panel_that_never_moves_is_a_sentence_with_its_value(drawn):
    history = _history(share_without_gradient=0.0, share_without_weighted_gradient=0,
                       ad_share=0.25, ad_cb_cosine=-1.0)  # fmt: skip
    history[1]["ad_share"] = math.nan  # a NaN is no move
    figure = drawn(module.plot_training_dynamics, _dynamics(history))
    assert [axis.get_title() for axis in figure.axes] == [
        "SmoothAP loss",
        "Operating-region proportion",
    ]
    assert [axis.get_xlabel() for axis in figure.axes] == ["optimizer step"] * 2
    assert figure.get_size_inches() == pytest.approx((9.2, 4.4))
    assert figure._suptitle.get_text() == "\n".join(
        [
            "SmoothAP on digits 0-4, batch 32, tau=0.01",
            # too long for one line of 100: the parenthetical on a line of its own
            "Queries with no entry of slope above eps: 0 at each of the 3 logged steps",
            "(slope > eps and slope / R^2 > eps; not drawn)",
            "AD - CB split: 0.25 and -1 at each of the 3 logged steps",
            "(|AD| / (|AD| + |CB|) and cosine(AD, -CB); not drawn)",
        ]
    )


def test_one_moving_series_in_a_panel_draws_the_panel(drawn):
    history = _history(
        p_seed_definition=0.5,
        share_without_gradient=0.0,
        share_without_weighted_gradient=0.0,
        ad_share=0.1,
        ad_cb_cosine=0.1,
    )
    figure = drawn(module.plot_training_dynamics, _dynamics(history))
    assert [axis.get_title() for axis in figure.axes] == [
        "SmoothAP loss",
        "Operating-region proportion",
    ]
    proportion = figure.axes[1]
    assert [line.get_label() for line in proportion.get_lines()] == [
        module.EQ1_NAME,
        "P without the query's row and column",
    ]
    assert figure._suptitle.get_text().split("\n", 3)[3] == (
        "AD - CB split: 0.1 at each of the 3 logged steps\n"
        "(|AD| / (|AD| + |CB|) and cosine(AD, -CB); not drawn)")  # 101 characters: two lines


def test_a_note_that_fits_in_100_characters_stays_one_line(drawn):
    history = _history(p_seed_definition=0.5, share_without_gradient=0.0,
                       share_without_weighted_gradient=0.0, ad_share=0.0,
                       ad_cb_cosine=0.0)  # fmt: skip
    figure = drawn(module.plot_training_dynamics, _dynamics(history))
    note = ("AD - CB split: 0 at each of the 3 logged steps (|AD| / (|AD| + |CB|) and "
            "cosine(AD, -CB); not drawn)")  # fmt: skip
    assert len(note) == 100  # at the bound: one line still
    assert figure._suptitle.get_text().split("\n", 3)[3] == note


def test_three_moving_panels_stand_in_one_row(drawn):
    history = _history(ad_share=0.5, ad_cb_cosine=0.5)
    figure = drawn(module.plot_training_dynamics, _dynamics(history))
    assert len(figure.axes) == 3
    assert figure.get_size_inches() == pytest.approx((13.8, 4.4))
    assert isinstance(figure.get_layout_engine(), ConstrainedLayoutEngine)
    boxes = [axis.get_position() for axis in figure.axes]
    assert boxes[0].x1 < boxes[1].x0 and boxes[1].x1 < boxes[2].x0
    assert [axis.get_xlabel() for axis in figure.axes] == ["optimizer step"] * 3


FLAT = {"loss": 0.7, "p_seed_definition": 0.5, "p_without_query": 0.125,
        "share_without_gradient": 0.0, "share_without_weighted_gradient": 1.0,
        "ad_share": 0.25, "ad_cb_cosine": -1.0}  # fmt: skip
INSIDE = {**FLAT, "share_without_gradient": 0.25, "share_without_weighted_gradient": 0.5,
          "ad_cb_cosine": 0.5}  # no value on a bound: the range alone sets the panel's limits


@pytest.mark.slow
@pytest.mark.parametrize("values", [FLAT, INSIDE], ids=["values on the bounds", "inside"])
@pytest.mark.parametrize("steps", [(10, 20, 30), (4,)], ids=["three steps", "one step"])
def test_a_run_where_nothing_moves_draws_every_panel_flat(drawn, steps, values):
    """Every series constant (a one-step run is one): no panel would be left to draw, so every
    panel is drawn, each series a flat line inside a y-range with room on both sides."""
    FLAT = values  # the values of this case
    history = _history(steps=steps, **FLAT)
    figure = drawn(module.plot_training_dynamics, _dynamics(history))
    assert [axis.get_title() for axis in figure.axes] == TITLES
    for axis, own in zip(figure.axes, PANEL_KEYS, strict=True):
        assert [_points(line) for line in axis.get_lines()] == [
            [(step, FLAT[key]) for step in steps] for key in own
        ]
        low, high = axis.get_ylim()  # not matplotlib's sliver of +-5 % around a flat line
        assert high - low >= max(1.0, *(abs(FLAT[key]) for key in own)), axis.get_title()
        for key in own:  # each line well inside the panel, not on its frame
            assert 0.1 < (FLAT[key] - low) / (high - low) < 0.9, (axis.get_title(), low, high)
        # a share or proportion never shows far below 0 or above 1, a cosine beyond +-1
        # what the quantities can take (a share or P 0-1, a cosine -1-1), padded by 15 %
        bottom, top = (-1.0, 1.0) if "ad_cb_cosine" in own else (0.0, 1.0)
        span = top - bottom
        assert (low, high) == pytest.approx((bottom - 0.15 * span, top + 0.15 * span))
        markers = [line.get_marker() not in ("None", None, "") for line in axis.get_lines()]
        if len(steps) == 1:  # a line through one point draws nothing: each shows as a marker
            assert all(markers)
            assert list(axis.get_xticks()) == list(steps)  # the step, not fractions around it
            left, right = axis.get_xlim()
            assert (left + right) / 2 == steps[0] and right - left >= 1  # the step centred
        else:  # lines alone: markers on every logged step would crowd a long run
            assert not any(markers)
    assert figure._suptitle.get_text() == "SmoothAP on digits 0-4, batch 32, tau=0.01"
    assert layout_problems(figure) == []


@pytest.mark.parametrize(("function", "results"), [
    (module.plot_closed_forms, _closed_forms), (module.plot_p_against_batch_size, _p_results),
], ids=["closed forms", "P against m"])  # fmt: skip
def test_the_two_panels_stand_side_by_side_at_the_figures_size(drawn, function, results):
    figure = drawn(function, results())
    left, right = (axis.get_position() for axis in figure.axes[:2])
    assert left.x1 < right.x0 and left.y0 == pytest.approx(right.y0)  # one row, left to right
    expected = {module.plot_closed_forms: module.CLOSED_FORMS_FIGSIZE,
                module.plot_p_against_batch_size: module.P_AGAINST_M_FIGSIZE}[function]
    assert tuple(figure.get_size_inches()) == pytest.approx(expected)
    assert figure.get_size_inches()[0] > 2 * figure.get_size_inches()[1]  # wide: two panels


def test_a_long_note_breaks_between_its_sentence_and_parenthetical_alone(drawn):
    # the sentence alone (84 characters) fits a line of 100: it is not wrapped inside
    history = _history(steps=range(10, 10010, 10), p_seed_definition=0.123457,
                       p_without_query=0.234568)  # fmt: skip
    figure = drawn(module.plot_training_dynamics, _dynamics(history))
    sentence = ("Operating-region proportion: 0.123457 and 0.234568 at each of the 1000 logged "
                "steps")  # fmt: skip
    assert 70 < len(sentence) <= 100
    assert figure._suptitle.get_text().split("\n")[1:] == [
        sentence, f"({module.EQ1_NAME} and P without the query's row and column; not drawn)"]
