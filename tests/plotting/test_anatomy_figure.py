"""The gradient-anatomy comparison figure on a hand-written two-checkpoint record (no training):
which direction is drawn under which label and style, which ranks and shares, what each panel
says, where the numerical floor hides rounding noise. The drawn Axes are read back; expected
values are the hand-written inputs."""

from __future__ import annotations

import math

import matplotlib.pyplot as plt
import pytest
from matplotlib.colors import to_rgba

import gradlab.plotting.anatomy as module
from gradlab.functional.gradient_anatomy import DEFAULT_ABSOLUTE_THRESHOLD
from gradlab.plotting.style import series_style
from tests.helpers.figure_layout import captured_figures

NAN = float("nan")


def _part(shares, largest=0.5, active=(1, 2), without=1, queries=4, negatives=9):
    return {"mass_share_by_rank": list(shares), "largest_abs_grad": largest,
            "active_negatives": list(active), "queries_without_gradient": without,
            "queries": queries, "negatives_per_query": negatives}  # fmt: skip


def _record():
    """Two checkpoints x two losses; the second loss's caption->image share has a NaN and a
    string (a JSON null) that are not drawn, the first checkpoint's i2t of B is noise."""
    first = {
        "A": {"i2t": _part([0.6, 0.3, 0.1]), "t2i": _part([0.2, 0.8])},
        "B": {"i2t": _part([0.5, 0.5], largest=3e-14), "t2i": _part([0.9, NAN, "x", 0.1])},
    }
    second = {
        "A": {"i2t": _part([1.0]), "t2i": _part([0.25, 0.75])},
        "B": {"i2t": _part([0.1, 0.2, 0.7]), "t2i": _part([0.4, 0.6])},
    }
    return {"checkpoints": [{"steps": 0, "losses": first}, {"steps": 40, "losses": second}]}


@pytest.fixture
def drawn(monkeypatch, tmp_path):
    def draw(record):
        with captured_figures(monkeypatch, module) as figures:
            assert module.plot_anatomy_comparison(record, tmp_path / "a.png") == tmp_path / "a.png"
        (figure,) = figures
        return figure

    yield draw
    plt.close("all")


def _points(line):
    return list(zip(line.get_xdata(), line.get_ydata(), strict=True))


def test_each_panel_draws_the_finite_shares_by_rank_solid_then_dashed(drawn):
    record = _record()
    figure = drawn(record)
    a0, b0, a1, b1 = figure.axes
    assert [_points(line) for line in a0.get_lines()] == [[(1, 0.6), (2, 0.3), (3, 0.1)],
                                                          [(1, 0.2), (2, 0.8)]]  # fmt: skip
    # B's i2t at step 0 is 3e-14 (below the floor 1e-10): only caption -> image, its finite shares
    assert [_points(line) for line in b0.get_lines()] == [[(1, 0.9), (4, 0.1)]]
    assert [_points(line) for line in a1.get_lines()] == [[(1, 1.0)], [(1, 0.25), (2, 0.75)]]
    assert [_points(line) for line in b1.get_lines()] == [[(1, 0.1), (2, 0.2), (3, 0.7)],
                                                          [(1, 0.4), (2, 0.6)]]  # fmt: skip
    for axis in (a0, a1, b1):
        i2t, t2i = axis.get_lines()
        assert (i2t.get_label(), t2i.get_label()) == ("image -> caption", "caption -> image")
        for line, index in ((i2t, 0), (t2i, 1)):
            style = series_style(index)
            assert to_rgba(line.get_color()) == to_rgba(style["color"])
            assert line.get_linestyle() == style["linestyle"]
            assert line.get_marker() == style["marker"]
            assert (line.get_markersize(), line.get_linewidth()) == (3.5, 1.4)
    assert i2t.get_linestyle() == "-" and t2i.get_linestyle() == "--"
    (only,) = b0.get_lines()  # keeps the caption -> image style without the solid line
    assert only.get_label() == "caption -> image" and only.get_linestyle() == "--"
    assert to_rgba(only.get_color()) == to_rgba(series_style(1)["color"])
    assert only.get_marker() == series_style(1)["marker"]


def test_columns_follow_the_first_checkpoints_losses_and_one_panel_is_drawn_alone(drawn):
    record = _record()
    second = record["checkpoints"][1]
    second["losses"] = {"B": second["losses"]["B"], "A": second["losses"]["A"]}
    figure = drawn(record)
    assert [axis.get_title() for axis in figure.axes] == [
        "A, after 0 steps",
        "B, after 0 steps",
        "A, after 40 steps",
        "B, after 40 steps",
    ]
    assert [_points(line) for line in figure.axes[2].get_lines()] == [
        [(1, 1.0)],
        [(1, 0.25), (2, 0.75)],
    ]
    alone = {"checkpoints": [{"steps": 5, "losses": {"B": second["losses"]["B"]}}]}
    (axis,) = drawn(alone).axes
    assert axis.get_title() == "B, after 5 steps"
    assert [_points(line) for line in axis.get_lines()] == [[(1, 0.1), (2, 0.2), (3, 0.7)],
                                                            [(1, 0.4), (2, 0.6)]]  # fmt: skip
    assert axis.get_xlabel() == "negative's rank by score (1 = hardest)"
    assert axis.get_ylabel() == "share of the negative gradient"


@pytest.mark.slow
def test_panels_are_titled_by_loss_and_step_on_shared_log_rank_axes(drawn):
    figure = drawn(_record())
    titles = [axis.get_title() for axis in figure.axes]
    assert titles == ["A, after 0 steps", "B, after 0 steps", "A, after 40 steps",
                      "B, after 40 steps"]  # fmt: skip
    assert {axis.title.get_fontsize() for axis in figure.axes} == {11}
    assert [axis.get_xlabel() for axis in figure.axes] == [""] * 2 + [
        "negative's rank by score (1 = hardest)"] * 2  # fmt: skip
    assert [axis.get_ylabel() for axis in figure.axes] == [
        "share of the negative gradient",
        "",
        "share of the negative gradient",
        "",
    ]
    for axis in figure.axes:
        assert axis.get_xscale() == "log" and axis.get_yscale() == "linear"
        assert axis.get_ylim() == pytest.approx((-0.03, 1.03))
        formatter = axis.xaxis.get_major_formatter()
        assert [formatter(v, 0) for v in (1, 10, 100, 0.5)] == ["1", "10", "100", "0.5"]
    a0, b1 = figure.axes[0], figure.axes[3]
    assert a0.get_shared_x_axes().joined(a0, b1) and a0.get_shared_y_axes().joined(a0, b1)
    width, height = figure.get_size_inches()
    assert (width, height) == pytest.approx((8.4, 8.0))
    assert figure.get_layout_engine() is not None


def test_the_legend_names_each_direction_once_under_the_figure(drawn):
    figure = drawn(_record())
    (legend,) = figure.legends
    assert [text.get_text() for text in legend.get_texts()] == ["image -> caption",
                                                                "caption -> image"]  # fmt: skip
    handles = legend.legend_handles
    assert [handle.get_linestyle() for handle in handles] == ["-", "--"]
    assert not legend.get_frame_on()
    assert legend._ncols == 2
    box = legend.get_window_extent(figure.canvas.get_renderer())
    for axis in figure.axes:  # under the panels
        assert box.y1 <= axis.get_window_extent().y0


def test_each_panel_states_active_negatives_queries_without_gradient_and_the_largest(drawn):
    record = _record()
    record["checkpoints"][0]["losses"]["A"]["i2t"]["active_negatives"] = [1, 2, 4, NAN]
    record["checkpoints"][0]["losses"]["A"]["t2i"].update(largest_abs_grad=0.0,
                                                           active_negatives=[])  # fmt: skip
    figure = drawn(record)
    a0, b0 = figure.axes[:2]
    (summary,) = a0.texts
    assert summary.get_text() == (
        "i2t: 2.3/9 active, 1/4 without,\n  max |dL/dS| 0.5\n"
        "t2i: nan/9 active, 1/4 without,\n  max |dL/dS| 0"
    )
    assert summary.get_position() == (0.97, 0.62) and summary.get_transform() == a0.transAxes
    assert (summary.get_ha(), summary.get_va(), summary.get_fontsize()) == ("right", "center", 9.5)
    box = summary.get_bbox_patch()
    assert to_rgba(box.get_facecolor()) == pytest.approx(to_rgba("white", 0.85))
    assert to_rgba(box.get_edgecolor()) == pytest.approx(to_rgba("0.8", 0.85))
    (summary,) = b0.texts
    assert "i2t: 1.5/9 active, 1/4 without,\n  max |dL/dS| 3e-14 < floor: not drawn" in (
        summary.get_text()
    )
    assert summary.get_text().endswith("t2i: 1.5/9 active, 1/4 without,\n  max |dL/dS| 0.5")


@pytest.mark.slow
def test_a_largest_gradient_at_the_floor_is_drawn_and_not_noted(drawn):
    record = _record()
    record["checkpoints"][0]["losses"]["B"]["i2t"]["largest_abs_grad"] = DEFAULT_ABSOLUTE_THRESHOLD
    figure = drawn(record)
    b0 = figure.axes[1]
    assert [line.get_label() for line in b0.get_lines()] == ["image -> caption",
                                                             "caption -> image"]  # fmt: skip
    assert "floor" not in b0.texts[0].get_text()
    assert "max |dL/dS| 1e-10\n" in b0.texts[0].get_text()


def test_a_panel_without_gradient_above_the_floor_says_so(drawn):
    record = _record()
    for part in record["checkpoints"][1]["losses"]["B"].values():
        part["largest_abs_grad"] = 2e-16
    record["settings"] = {"absolute_threshold": 1e-15}
    figure = drawn(record)
    b1 = figure.axes[3]
    assert not b1.get_lines()
    note, summary = b1.texts
    assert note.get_text() == "no negative receives gradient\nabove the floor 1e-15"
    assert note.get_position() == (0.5, 0.2) and note.get_transform() == b1.transAxes
    assert (note.get_ha(), note.get_fontsize()) == ("center", 10)
    assert to_rgba(note.get_color()) == to_rgba("0.35")
    assert summary.get_text().count("2e-16 < floor: not drawn") == 2
    # the second checkpoint's step-0 noise 3e-14 is above this record's floor 1e-15: drawn
    assert len(figure.axes[1].get_lines()) == 2
    assert not any("no negative" in text.get_text() for text in figure.axes[1].texts)


def test_the_title_states_the_floor(drawn):
    figure = drawn(dict(_record(), settings={"absolute_threshold": 1e-12}))
    title = figure._suptitle
    assert title.get_text() == (
        "Where each loss sends its negative gradient: one held-out batch (10 images x 50 "
        "captions)\nof a dual encoder trained with NT-Xent, same scores for every loss; "
        "|dL/dS| below 1e-12 not drawn"
    )
    assert title.get_fontsize() == 12


def test_floor_is_the_results_threshold_or_the_anatomy_default():
    assert module.floor({}) == 1e-10 == DEFAULT_ABSOLUTE_THRESHOLD
    assert module.floor({"settings": {}}) == 1e-10
    assert module.floor({"settings": {"absolute_threshold": 3}}) == 3.0
    assert isinstance(module.floor({"settings": {"absolute_threshold": 3}}), float)


def test_the_summary_gives_one_line_pair_per_direction():
    record = {"i2t": _part([1.0], largest=0.123, active=[1, 2, NAN, None], without=0),
              "t2i": _part([1.0], largest=7e-5, active=[], without=3, queries=5,
                           negatives=45)}  # fmt: skip
    assert module.anatomy_summary(record) == (
        "i2t: 1.5 of 9 negatives active,\n  0/4 queries without gradient, max |dL/dS| 0.1\n"
        "t2i: nan of 45 negatives active,\n  3/5 queries without gradient, max |dL/dS| 7e-05"
    )
    assert math.isnan(float(module.anatomy_summary(record).split("t2i: ")[1].split(" ")[0]))


@pytest.mark.slow
def test_the_legend_takes_each_directions_first_line_wherever_it_appears(drawn):
    record = _record()
    for name in ("A", "B"):  # no image -> caption line in the first row
        record["checkpoints"][0]["losses"][name]["i2t"]["largest_abs_grad"] = 0.0
    (legend,) = drawn(record).legends
    assert [text.get_text() for text in legend.get_texts()] == ["caption -> image",
                                                                "image -> caption"]  # fmt: skip
    assert [handle.get_linestyle() for handle in legend.legend_handles] == ["--", "-"]
