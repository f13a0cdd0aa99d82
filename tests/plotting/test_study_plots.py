"""The per-seed studies' figures on small hand-written results (no training): which proportion,
loss or direction is drawn under which label, colour and marker, means and +- std bars computed
by hand, log axes where asked, tick labels, the notes that replace series lying on each other,
and the data each title names. The drawn Axes are read back; expected values are hand-computed
from the inputs."""

from __future__ import annotations

import itertools
import json
import math
import textwrap

import matplotlib
import matplotlib.pyplot as plt
import numpy as np
import pytest
from cycler import cycler
from matplotlib.collections import PathCollection
from matplotlib.colors import to_rgba
from matplotlib.container import BarContainer
from matplotlib.layout_engine import ConstrainedLayoutEngine
from matplotlib.patches import Rectangle
from PIL import Image

import gradlab.plotting.studies as module
from gradlab.jsonio import write_json

NAN = float("nan")


@pytest.fixture
def drawn(monkeypatch):
    """Draw with matplotlib's default style (another figure's seaborn theme turns every grid on)
    and keep the figure instead of saving it."""
    kept = []

    def draw(function, result):
        monkeypatch.setattr(module, "save_figure", lambda figure, path: kept.append(figure) or path)
        assert function(result, "f.png") == "f.png"
        return kept[-1]

    with matplotlib.rc_context():
        matplotlib.rcdefaults()
        # a user's larger default text leaves the figures' own sizes alone
        # and another colour cycle leaves the figures' own colours alone
        matplotlib.rcParams.update(
            {
                "font.size": 13,
                "legend.fontsize": 13,
                "axes.prop_cycle": cycler(color=["black", "0.5"]),
            }
        )
        yield draw
    plt.close("all")


def _errorbar(container):
    """(x, y, y - err, y + err) of an errorbar's points."""
    line, _, (bars,) = container
    spans = [(segment[0][1], segment[1][1]) for segment in bars.get_segments()]
    return [(float(x), float(y), low, high)
            for (x, y), (low, high) in zip(line.get_xydata(), spans, strict=True)]  # fmt: skip


# ---- P against batch size ------------------------------------------------------------------


def _p_result(**settings):
    return {"batch_sizes": [16, 64], "seeds": [0, 1], "settings": settings}


APART = {"P": [[0.2, 0.4], [0.4, 0.6]], "P_positive_negative": [[0.5, 0.7], [0.7, 0.9]],
         "P_negative_negative": [[0.1, NAN], [0.3, 0.1]]}  # fmt: skip


def test_p_draws_each_proportion_per_seed_faintly_and_its_mean_with_a_std_bar(drawn):
    figure = drawn(module.plot_p_vs_batch_size, _p_result(fixed_trained=APART))
    (axis,) = figure.axes
    labels = [c.get_label() for c in axis.containers]
    assert labels == ["P (Brown et al., 2020, suppl. Eq. 1)", "positive-negative pairs",
                      "negative-negative pairs"]  # fmt: skip
    expected = {  # mean +- population std over the two seeds, by hand; the NaN left out
        "P": [(16, 0.3, 0.2, 0.4), (64, 0.5, 0.4, 0.6)],
        "P_positive_negative": [(16, 0.6, 0.5, 0.7), (64, 0.8, 0.7, 0.9)],
        "P_negative_negative": [(16, 0.2, 0.1, 0.3), (64, 0.1, 0.1, 0.1)],
    }
    colours = {"P": "black", "P_positive_negative": "tab:red", "P_negative_negative": "tab:blue"}
    markers = {"P": "o", "P_positive_negative": "s", "P_negative_negative": "^"}
    for container, key in zip(axis.containers, expected, strict=True):
        assert np.array(_errorbar(container)) == pytest.approx(np.array(expected[key]))
        line = container.lines[0]
        assert to_rgba(line.get_color()) == to_rgba(colours[key])
        assert (line.get_marker(), line.get_markersize()) == (markers[key], 4)
        caps = container.lines[1]
        assert len(caps) == 2 and caps[0].get_markersize() == 6  # capsize 3 on each side
    faint = [line for line in axis.get_lines() if line.get_alpha() == 0.25]
    assert len(faint) == 6
    seeds = [list(line.get_ydata()) for line in faint]
    assert seeds == [[0.2, 0.4], [0.4, 0.6], [0.5, 0.7], [0.7, 0.9], [0.1, NAN], [0.3, 0.1]] or (
        np.allclose(seeds, [[0.2, 0.4], [0.4, 0.6], [0.5, 0.7], [0.7, 0.9], [0.1, NAN],
                            [0.3, 0.1]], equal_nan=True))  # fmt: skip
    for line, key in zip(faint, [k for k in expected for _ in range(2)], strict=True):
        assert to_rgba(line.get_color(), 0.25) == to_rgba(colours[key], 0.25)
        assert line.get_linewidth() == 0.8 and list(line.get_xdata()) == [16, 64]
    assert not axis.texts


def test_p_panels_are_log2_in_m_ticked_at_each_m_from_0_to_1(drawn):
    figure = drawn(module.plot_p_vs_batch_size,
                   _p_result(trained_at_m=APART, fixed_untrained=APART))  # fmt: skip
    untrained, trained = figure.axes  # in the order of the settings' titles, not of the dict
    assert [untrained.get_title(), trained.get_title()] == [
        "fixed model, untrained",
        "one model trained at each m",  # no trained network to start from: not "fine-tuned"
    ]
    for axis in figure.axes:
        assert axis.title.get_fontsize() == 11
        assert axis.get_xscale() == "log"
        assert axis.xaxis.get_transform().base == 2
        assert list(axis.get_xticks()) == [16, 64]
        assert [t.get_text() for t in axis.get_xticklabels()] == ["16", "64"]
        assert axis.get_xlabel() == "mini-batch size m"
        assert axis.get_ylim() == pytest.approx((-0.02, 1.02))
        assert all(g.get_alpha() == 0.3 for g in axis.get_ygridlines())
    assert untrained.get_ylabel() == "proportion inside the operating region"
    assert trained.get_ylabel() == ""
    assert untrained.get_shared_y_axes().joined(untrained, trained)
    assert untrained.get_position().x1 < trained.get_position().x0  # side by side
    assert isinstance(figure.get_layout_engine(), ConstrainedLayoutEngine)
    assert figure.get_size_inches() == pytest.approx((8, 4.4))
    (legend,) = figure.legends
    assert [t.get_text() for t in legend.get_texts()] == [
        "P (Brown et al., 2020, suppl. Eq. 1)",
        "positive-negative pairs",
        "negative-negative pairs",
    ]
    assert [(to_rgba(h.get_color()), h.get_marker(), h.get_markersize())
            for h in legend.legend_handles] == [(to_rgba("black"), "o", 4),
                                                (to_rgba("tab:red"), "s", 4),
                                                (to_rgba("tab:blue"), "^", 4)]  # fmt: skip
    assert {t.get_fontsize() for t in legend.get_texts()} == {10}
    assert not legend.get_frame_on() and legend._ncols == 3
    box = legend.get_window_extent(figure.canvas.get_renderer())
    assert box.y1 <= untrained.get_window_extent().y0
    title = figure._suptitle
    assert title.get_text() == (
        "P against batch size on unseen 3-digit strings,\n4 images per class and m/4 classes, "
        "2 seeds (faint: each seed; bars: mean ± std)"
    )
    assert title.get_fontsize() == 11


def test_the_models_trained_at_each_m_are_fine_tuned_only_from_a_trained_network(drawn):
    # a `gradlab study p-vs-batch-size` run from random weights was titled "fine-tuned"
    study = drawn(module.plot_p_vs_batch_size, _p_result(trained_at_m=APART))
    assert [axis.get_title() for axis in study.axes] == ["one model trained at each m"]
    chain = drawn(module.plot_p_vs_batch_size, _p_result(trained_at_m=APART, fixed_trained=APART))
    assert [axis.get_title() for axis in chain.axes] == [
        "fixed model, trained at m = 64", "one model fine-tuned at each m"]


@pytest.mark.slow
def test_the_p_title_names_the_data_a_result_was_measured_on(drawn):
    figure = drawn(module.plot_p_vs_batch_size, dict(_p_result(fixed_trained=APART), data="mine"))
    assert figure._suptitle.get_text().startswith("P against batch size on mine,\n")
    result = dict(_p_result(fixed_trained=APART))
    result["settings"] = dict(result["settings"], data="theirs")
    figure = drawn(module.plot_p_vs_batch_size, result)
    assert figure._suptitle.get_text().startswith("P against batch size on theirs,\n")


def test_one_seed_is_one_seed_in_the_title(drawn):
    result = dict(_p_result(fixed_trained=APART), seeds=[0])
    figure = drawn(module.plot_p_vs_batch_size, result)
    assert "m/4 classes, 1 seed (faint: each seed" in figure._suptitle.get_text()


def test_a_proportion_equal_to_an_earlier_one_is_named_not_drawn(drawn):
    near = [[0.2 + 1e-13, 0.4], [0.4, 0.6]]  # equal to P within 1e-12
    setting = {"P": APART["P"], "P_positive_negative": near, "P_negative_negative": near}
    figure = drawn(module.plot_p_vs_batch_size, _p_result(fixed_trained=setting))
    (axis,) = figure.axes
    assert [c.get_label() for c in axis.containers] == ["P (Brown et al., 2020, suppl. Eq. 1)"]
    assert len([line for line in axis.get_lines() if line.get_alpha() == 0.25]) == 2
    (note,) = axis.texts
    assert note.get_text() == textwrap.fill(
        "positive-negative pairs and negative-negative pairs: the same as P at every seed and m",
        36)  # fmt: skip
    assert note.get_position() == (0.5, 0.5) and note.get_transform() == axis.transAxes
    assert (note.get_ha(), note.get_va(), note.get_fontsize()) == ("center", "center", 10)
    assert to_rgba(note.get_color()) == to_rgba("0.25")


def test_a_proportion_equal_to_the_second_is_named_after_it(drawn):
    apart = [[0.5 + 1e-9, 0.7], [0.7, 0.9]]  # 1e-9 from P_positive_negative: drawn
    for third, drawn_labels in ((APART["P_positive_negative"], 2), (apart, 3)):
        setting = dict(APART, P_negative_negative=third)
        figure = drawn(module.plot_p_vs_batch_size, _p_result(fixed_trained=setting))
        (axis,) = figure.axes
        assert len(axis.containers) == drawn_labels
    setting = dict(APART, P_negative_negative=APART["P_positive_negative"])
    figure = drawn(module.plot_p_vs_batch_size, _p_result(fixed_trained=setting))
    (note,) = figure.axes[0].texts
    assert note.get_text().replace("\n", " ") == (
        "negative-negative pairs: the same as positive-negative pairs at every seed and m"
    )


def test_a_proportion_after_a_repeated_one_is_still_drawn(drawn):
    setting = dict(APART, P_positive_negative=APART["P"])
    figure = drawn(module.plot_p_vs_batch_size, _p_result(fixed_trained=setting))
    (axis,) = figure.axes
    assert [c.get_label() for c in axis.containers] == ["P (Brown et al., 2020, suppl. Eq. 1)",
                                                        "negative-negative pairs"]  # fmt: skip


def test_nans_at_the_same_places_are_equal(drawn):
    setting = {key: [[NAN, 0.5], [0.25, NAN]] for key in APART}
    figure = drawn(module.plot_p_vs_batch_size, _p_result(fixed_untrained=setting))
    (axis,) = figure.axes
    assert len(axis.containers) == 1
    assert (
        axis.texts[0]
        .get_text()
        .replace("\n", " ")
        .startswith("positive-negative pairs and negative-negative pairs: the same as P at")
    )



def test_p_against_batch_size_reads_its_json_file_with_nan_written_either_way(drawn, tmp_path):
    # the report writes its P-vs-m result with gradlab.jsonio.write_json: a NaN is the string
    # "NaN" there, the token NaN where json.dumps wrote it
    setting = {key: [[NAN, 0.5], [0.25, NAN]] for key in APART}
    setting["P"] = [[NAN, 0.5], [0.25, 0.75]]  # P differs: drawn apart from the two repeats
    result = _p_result(fixed_untrained=setting)
    token = tmp_path / "token.json"
    token.write_text(json.dumps(result))
    for path in (token, write_json(tmp_path / "string.json", result)):
        figure = drawn(module.plot_p_vs_batch_size, str(path))
        (axis,) = figure.axes
        assert [c.get_label() for c in axis.containers] == ["P (Brown et al., 2020, suppl. Eq. 1)",
                                                            "positive-negative pairs"]
        means = [point[1] for point in _errorbar(axis.containers[0])]
        assert means == [0.25, 0.625]  # seed 0's NaN left out at m = 16
        assert axis.texts[0].get_text().replace("\n", " ") == (
            "negative-negative pairs: the same as positive-negative pairs at every seed and m")

# ---- loss comparison ------------------------------------------------------------------------


def _losses(before=("recall@1", "mAP", "MAP@R"), summary=None):
    result = {
        "seeds": [0, 1],
        "settings": {"steps": 7},
        "before": {metric: [0.1, 0.3] for metric in before},
        "losses": {
            "SmoothAP": {"metrics": {m: [0.6, 0.8] for m in before},
                         "loss_seconds": [0.002, 0.004]},
            "FastAP": {"metrics": {m: [0.2, 0.2] for m in before},
                       "loss_seconds": [0.01, 0.03]},
        },
    }  # fmt: skip
    if summary is not None:
        result["summary"] = summary
    return result


def test_each_metric_panel_draws_seeds_means_and_the_untrained_line(drawn):
    figure = drawn(module.plot_loss_comparison, _losses(summary={"apart": {"FastAP": {}}}))
    assert [axis.get_title() for axis in figure.axes] == [
        "recall@1",
        "mAP",
        "MAP@R",
        "loss forward + backward (ms)",
    ]
    for axis in figure.axes[:3]:
        assert axis.title.get_fontsize() == 11
        dots = [c for c in axis.collections if isinstance(c, PathCollection)]
        assert [c.get_offsets().tolist() for c in dots] == [[[0, 0.6], [0, 0.8]],
                                                            [[1, 0.2], [1, 0.2]]]  # fmt: skip
        for dots_of_loss in dots:
            assert to_rgba(dots_of_loss.get_facecolor()[0]) == to_rgba("tab:gray")
            assert dots_of_loss.get_sizes()[0] == 14 and dots_of_loss.get_zorder() == 3
        smooth, fast = axis.containers
        assert np.array(_errorbar(smooth)) == pytest.approx(np.array([[0, 0.7, 0.6, 0.8]]))
        assert np.array(_errorbar(fast)) == pytest.approx(np.array([[1, 0.2, 0.2, 0.2]]))
        assert to_rgba(smooth.lines[0].get_color()) == to_rgba("tab:blue")
        assert to_rgba(fast.lines[0].get_color()) == to_rgba("tab:gray")  # listed apart
        assert smooth.lines[0].get_marker() == "o" and smooth.lines[0].get_linestyle() == "None"
        assert smooth.lines[2][0].get_zorder() == 4 and smooth.lines[1][0].get_markersize() == 8
        (untrained,) = [line for line in axis.get_lines() if line.get_label() == "untrained"]
        assert list(untrained.get_ydata()) == pytest.approx([0.2, 0.2])
        assert to_rgba(untrained.get_color()) == to_rgba("tab:red")
        assert (untrained.get_linestyle(), untrained.get_linewidth()) == ("--", 1)
        assert list(axis.get_xticks()) == [0, 1]
        labels = axis.get_xticklabels()
        assert [t.get_text() for t in labels] == ["SmoothAP", "FastAP (apart)"]
        assert {(t.get_rotation(), t.get_ha(), t.get_fontsize()) for t in labels} == {
            (30, "right", 10)
        }
        assert {t.get_fontsize() for t in axis.get_yticklabels()} == {10}
        assert all(g.get_alpha() == 0.3 for g in axis.get_ygridlines())
        assert not any(g.get_visible() for g in axis.get_xgridlines())
        # its seed spread (0.1 and 0.3: std 0.1) as a band: a loss's gain is read against it
        (band,) = [patch for patch in axis.patches if isinstance(patch, Rectangle)]
        box = band.get_bbox()  # x: the axis's width (0 to 1), y: the data's
        assert (box.x0, box.x1, box.y0, box.y1) == pytest.approx((0, 1, 0.1, 0.3))
        assert to_rgba(band.get_facecolor())[:3] == to_rgba("tab:red")[:3]
    # the title names the dashed line: a legend on the first panel covered losses' bars
    assert [axis.get_legend() for axis in figure.axes] == [None] * 4
    assert "dashed: the untrained network" in figure._suptitle.get_text()


def test_the_cost_panel_draws_milliseconds_as_dots_on_a_log_axis(drawn):
    # bars on a log axis were read by their length, which starts at an arbitrary floor
    figure = drawn(module.plot_loss_comparison, _losses())
    cost = figure.axes[-1]
    assert not [c for c in cost.containers if isinstance(c, BarContainer)] and not cost.patches
    dots = [c.lines[0] for c in cost.containers]
    assert [tuple(zip(d.get_xdata(), d.get_ydata(), strict=True)) for d in dots] == [
        ((0, pytest.approx(3.0)),), ((1, pytest.approx(20.0)),)]
    assert {(d.get_marker(), to_rgba(d.get_color())) for d in dots} == {("o", to_rgba("tab:green"))}
    for container in cost.containers:
        caps = container.lines[1]
        assert len(caps) == 2 and caps[0].get_markersize() == 8  # capsize 4 on each side
    spans = [sorted(s[:, 1]) for c in cost.collections for s in c.get_segments()]
    assert np.array(spans) == pytest.approx(np.array([[2.0, 4.0], [10.0, 30.0]]))
    assert cost.get_yscale() == "log"
    assert [t.get_text() for t in cost.get_xticklabels()] == ["SmoothAP", "FastAP"]
    assert {(t.get_rotation(), t.get_ha(), t.get_fontsize()) for t in cost.get_xticklabels()} == {
        (30, "right", 10)
    }
    assert {t.get_fontsize() for t in cost.get_yticklabels()} == {10}
    assert cost.title.get_fontsize() == 11
    assert all(g.get_alpha() == 0.3 for g in cost.get_ygridlines())
    assert not any(g.get_visible() for g in cost.get_xgridlines())
    assert figure.get_size_inches() == pytest.approx((11, 8.6))
    assert figure.get_layout_engine() is not None
    boxes = [axis.get_position() for axis in figure.axes]  # two rows of two
    assert boxes[0].x1 < boxes[1].x0 and boxes[2].x1 < boxes[3].x0
    assert boxes[2].y1 < boxes[0].y0 and boxes[2].x0 == pytest.approx(boxes[0].x0)
    title = figure._suptitle
    assert title.get_text() == (
        "Losses on unseen 3-digit numbers, 2 seeds, same network, batches and 7 steps\n(dots: "
        "seeds; bars: mean ± std; dashed: the untrained network, shaded: ± its std)"
    )
    assert title.get_fontsize() == 11


@pytest.mark.slow
def test_the_cost_panels_minor_labels_keep_the_panels_size_under_a_users_larger_font(drawn):
    # 3 to 5 ms: less than a decade, so the log axis labels its minor ticks (the fixture sets
    # the user's font.size to 13)
    result = _losses()
    result["losses"]["FastAP"]["loss_seconds"] = [0.004, 0.006]
    figure = drawn(module.plot_loss_comparison, result)
    cost = figure.axes[-1]
    figure.canvas.draw()
    minor = [t for t in cost.yaxis.get_ticklabels(minor=True) if t.get_text()]
    assert minor  # the case drawn: labelled minor ticks
    assert {t.get_fontsize() for t in minor} == {10}


@pytest.mark.slow
@pytest.mark.parametrize("fastest", [0.0002, 0.0009, 0.004])
def test_the_cost_panel_reaches_down_to_the_decade_below_the_fastest_loss(drawn, fastest):
    # 0.2 ms sat under a lowest label of 1 ms, its value read against no labelled tick
    result = _losses()
    result["losses"]["FastAP"]["loss_seconds"] = [fastest, fastest]
    figure = drawn(module.plot_loss_comparison, result)
    bottom = figure.axes[-1].get_ylim()[0]
    # a power of ten, at or below the fastest loss's time (its bar included)
    assert math.log10(bottom) == pytest.approx(round(math.log10(bottom)))
    assert bottom <= 1e3 * fastest
    figure.canvas.draw()  # the bottom's tick is labelled
    labelled = {round(math.log10(t.get_position()[1]), 6) for t in
                figure.axes[-1].yaxis.get_ticklabels() if t.get_text()}  # fmt: skip
    assert round(math.log10(bottom), 6) in labelled


def test_fewer_metrics_leave_no_empty_panel(drawn):
    figure = drawn(module.plot_loss_comparison, _losses(before=("mAP", "recall@1")))
    assert [axis.get_title() for axis in figure.axes] == [
        "recall@1",
        "mAP",
        "loss forward + backward (ms)",
    ]
    assert figure.get_size_inches() == pytest.approx((11, 8.6))
    figure = drawn(module.plot_loss_comparison,
                   dict(_losses(before=("MAP@R",)), data="a user's data"))  # fmt: skip
    assert [axis.get_title() for axis in figure.axes] == ["MAP@R", "loss forward + backward (ms)"]
    assert figure.get_size_inches() == pytest.approx((11, 4.3))
    assert figure._suptitle.get_text().startswith("Losses on a user's data, 2 seeds")


# ---- scene recall ---------------------------------------------------------------------------

METRICS = ["i2t_R@1", "i2t_R@5", "i2t_R@10", "t2i_R@1", "t2i_R@5", "t2i_R@10"]


def _recall_result(encoders=("VSE++", "VSRN")):
    runs = {}
    for e, encoder in enumerate(encoders):
        runs[encoder] = {}
        for index, loss in enumerate(("SmoothAP", "VSE++ max", "NT-Xent")):
            base = 0.1 * e + 0.2 * index
            recall = {m: [base + 0.01 * k, base + 0.01 * k + 0.04] for k, m in enumerate(METRICS)}
            runs[encoder][loss] = {"recall": recall}
    return {"seeds": [0, 1], "runs": runs}


@pytest.mark.slow
def test_scene_recall_draws_each_losss_mean_and_std_per_metric(drawn):
    figure = drawn(module.plot_scene_recall, _recall_result())
    width = 0.8 / 3
    colours = ["tab:blue", "tab:orange", "tab:green"]
    for e, axis in enumerate(figure.axes):
        assert axis.get_title() == ("VSE++", "VSRN")[e]
        bars = [c for c in axis.containers if isinstance(c, BarContainer)]
        assert [c.get_label() for c in bars] == ["SmoothAP", "VSE++ max", "NT-Xent"]
        for index, container in enumerate(bars):
            base = 0.1 * e + 0.2 * index
            centres = [k + (index - 1) * width for k in range(6)]
            assert [p.get_x() + p.get_width() / 2 for p in container] == pytest.approx(centres)
            assert [p.get_width() for p in container] == pytest.approx([width] * 6)
            assert [p.get_height() for p in container] == pytest.approx(
                [base + 0.01 * k + 0.02 for k in range(6)]
            )
            assert {to_rgba(p.get_facecolor()) for p in container} == {to_rgba(colours[index])}
            spans = [sorted(s[:, 1]) for s in container.errorbar.lines[2][0].get_segments()]
            assert np.array(spans) == pytest.approx(
                np.array([[base + 0.01 * k, base + 0.01 * k + 0.04] for k in range(6)])
            )
            assert container.errorbar.lines[1][0].get_markersize() == 4  # capsize 2
        assert list(axis.get_xticks()) == list(range(6))
        labels = axis.get_xticklabels()
        # the metric under its bars, and each direction once, in words, under its three metrics
        assert [t.get_text() for t in labels] == [m.split("_", 1)[1] for m in METRICS]
        assert {(t.get_fontsize(), t.get_rotation()) for t in labels} == {(9, 0)}
        directions = [(t.get_text(), t.xy[0]) for t in axis.texts]
        titles = module.DIRECTION_TITLES
        assert directions == [(titles["i2t"], 1), (titles["t2i"], 4)]
        assert not any("_" in t.get_text() for t in [*labels, *axis.texts])
        assert axis.get_ylim() == (0, 1)
        assert all(g.get_alpha() == 0.3 for g in axis.get_ygridlines())
        assert not any(g.get_visible() for g in axis.get_xgridlines())
    first, second = figure.axes
    assert (first.get_ylabel(), second.get_ylabel()) == ("recall on unseen scenes", "")
    assert first.get_shared_y_axes().joined(first, second)
    legend = first.get_legend()
    assert [t.get_text() for t in legend.get_texts()] == ["SmoothAP", "VSE++ max", "NT-Xent"]
    assert {t.get_fontsize() for t in legend.get_texts()} == {10}
    assert second.get_legend() is None
    assert figure.get_size_inches() == pytest.approx((11.2, 4))
    assert first.get_position().x1 < second.get_position().x0  # side by side
    assert isinstance(figure.get_layout_engine(), ConstrainedLayoutEngine)
    assert figure._suptitle.get_text() == (
        "Digit scenes: recall both ways, 2 seeds (bars: mean ± std)"
    )
    assert figure._suptitle.get_fontsize() == 11


def _stuck_result():
    # 100 test scenes: chance R@1 is 0.01 both ways; "VSE++ max" on VSE++ stays below twice that
    result = _recall_result()
    result["settings"] = {"test_scenes": 100, "captions_per_image": 5}
    stuck = result["runs"]["VSE++"]["VSE++ max"]["recall"]
    for metric in METRICS:
        stuck[metric] = [0.005, 0.015] if metric.endswith("R@1") else [0.03, 0.05]
    for runs in result["runs"].values():  # the study's rsum: its six recalls summed, per seed
        for run in runs.values():
            run["recall"]["rsum"] = list(np.sum([run["recall"][m] for m in METRICS], axis=0))
    return result


def test_scene_recall_draws_a_run_that_did_not_train_hatched_and_says_so(drawn):
    figure = drawn(module.plot_scene_recall, _stuck_result())
    for axis, faint in zip(figure.axes, ({"VSE++ max"}, set()), strict=True):
        bars = [c for c in axis.containers if isinstance(c, BarContainer)]
        for container in bars:
            hatched = container.get_label() in faint
            assert {p.get_hatch() for p in container} == {"//" if hatched else None}
            assert {p.get_alpha() for p in container} == {0.45 if hatched else None}
    legend = figure.axes[0].get_legend()
    assert [t.get_text() for t in legend.get_texts()] == [
        "SmoothAP", "VSE++ max", "NT-Xent", "did not train (R@1 < 2 x chance): not ranked"]
    # the legend's loss entries are plain: the same loss trained on the other encoder
    assert [h.get_hatch() for h in legend.legend_handles] == [None, None, None, "//"]


def test_scene_recall_cross_hatches_a_run_whose_embeddings_collapsed(drawn):
    # above chance, yet every pair of its embeddings nearly coincides: listed apart as collapsed,
    # and drawn apart from the runs that did not train
    from gradlab.experiments import digit_scenes

    result = _stuck_result()
    collapsed = digit_scenes.collapse_uniformity() / 10  # closer to 0: above the threshold
    result["runs"]["VSRN"]["NT-Xent"]["geometry"] = {
        f"uniformity_{modality}": [[-2.0, collapsed]] * 2 for modality in ("images", "captions")}
    figure = drawn(module.plot_scene_recall, result)
    hatches = {(axis.get_title(), container.get_label()): {p.get_hatch() for p in container}
               for axis in figure.axes for container in axis.containers
               if isinstance(container, BarContainer)}  # fmt: skip
    assert hatches[("VSRN", "NT-Xent")] == {"xx"} and hatches[("VSE++", "VSE++ max")] == {"//"}
    assert hatches[("VSE++", "NT-Xent")] == {None}
    legend = figure.axes[0].get_legend()
    assert [t.get_text() for t in legend.get_texts()][3:] == [
        "did not train (R@1 < 2 x chance): not ranked",
        f"embeddings collapsed (uniformity > {digit_scenes.collapse_uniformity():.3f}): not "
        "ranked"]
    assert [h.get_hatch() for h in legend.legend_handles][3:] == ["//", "xx"]
    # both entries neutral (white, grey hatch): no loss's colour
    assert [(to_rgba(h.get_facecolor()), to_rgba(h.get_edgecolor()))
            for h in legend.legend_handles[3:]] == [(to_rgba("white"), to_rgba("grey"))] * 2


def test_scene_recall_legend_colours_each_loss_as_its_bars_and_the_hatch_entry_neutral(drawn):
    figure = drawn(module.plot_scene_recall, _stuck_result())
    first = figure.axes[0]
    bars = [c for c in first.containers if isinstance(c, BarContainer)]
    *losses, apart = first.get_legend().legend_handles
    # each loss's entry in its bars' colour (not the user's colour cycle, black and grey here)
    # (the faint run's alpha left out: the legend says hatched, not faint, for it)
    assert [to_rgba(h.get_facecolor()) for h in losses] == [
        to_rgba(c.patches[0].get_facecolor(), 1) for c in bars
    ]
    # the hatch entry stands for a faint run of any loss: the panel's background, outlined
    # in a visible grey, in no loss's colour
    face, edge = to_rgba(apart.get_facecolor()), to_rgba(apart.get_edgecolor())
    assert face == to_rgba(first.get_facecolor())
    assert edge[3] == 1 and edge[0] == edge[1] == edge[2] and edge != face
    assert not {face, edge} & {to_rgba(h.get_facecolor()) for h in losses}


@pytest.mark.slow
def test_scene_recall_names_each_direction_centred_under_its_three_metrics(drawn):
    # drawn, not only built: the direction sits under its metrics' labels, at their size
    figure = drawn(module.plot_scene_recall, _recall_result())
    figure.canvas.draw()
    renderer = figure.canvas.get_renderer()
    for axis in figure.axes:
        labels = axis.get_xticklabels()
        boxes = [t.get_window_extent(renderer) for t in labels]
        assert len(axis.texts) == 2
        for text, first in zip(axis.texts, (0, 3), strict=True):
            box = text.get_window_extent(renderer)
            under = boxes[first : first + 3]
            assert box.y1 < min(b.y0 for b in under)  # below the R@k labels, not over them
            middle = under[1]  # centred under the middle metric (less than a pixel off)
            assert (box.x0 + box.x1) / 2 == pytest.approx((middle.x0 + middle.x1) / 2, abs=0.5)
            assert under[0].x0 <= box.x0 and box.x1 <= under[2].x1  # within its three
            assert box.y0 >= 0  # on the figure
            assert text.get_fontsize() == labels[first].get_fontsize()  # not the user's 13


@pytest.mark.slow
def test_scene_recall_colours_four_losses_and_starts_at_zero(drawn):
    result = _recall_result(encoders=("VSE++",))
    losses = result["runs"]["VSE++"]
    losses["L4"] = {"recall": {m: [0.0, 0.0, 0.9] for m in METRICS}}  # mean - std below 0
    figure = drawn(module.plot_scene_recall, result)
    (axis,) = figure.axes
    bars = [c for c in axis.containers if isinstance(c, BarContainer)]
    colours = ["tab:blue", "tab:orange", "tab:green", "tab:purple"]
    assert [to_rgba(c.patches[0].get_facecolor()) for c in bars] == [to_rgba(c) for c in colours]
    assert axis.get_ylim() == (0, 1)


def test_scene_recall_of_one_encoder_is_one_panel(drawn):
    figure = drawn(module.plot_scene_recall, _recall_result(encoders=("VSRN",)))
    (axis,) = figure.axes
    assert axis.get_title() == "VSRN"
    assert figure.get_size_inches() == pytest.approx((5.6, 4))


# ---- scene anatomy --------------------------------------------------------------------------


def _anatomy(encoders=("VSE++", "VSRN"), directions=("i2t", "t2i"), flat=(),
             losses=("SmoothAP", "VSE++ max", "NT-Xent")):  # fmt: skip
    """Per encoder and loss two seeds at steps 0, 5, 10: a loss in ``flat`` keeps 0 queries
    without gradient; values are ``base`` + [0, 1, 2] per seed, seed 2 one higher."""
    runs = {}
    for e, encoder in enumerate(encoders):
        runs[encoder] = {}
        for index, loss in enumerate(losses):
            anatomy = {"steps": [0, 5, 10]}
            for direction in directions:
                base = 1 + e + 3 * index
                anatomy[direction] = {
                    "active_negatives": [[base, base + 1, base + 2],
                                         [base + 1, base + 2, base + 3]],
                    "share_without_gradient": [[0.0] * 3] * 2 if loss in flat else
                    [[0.1, 0.3, 0.2], [0.3, 0.1, 0.0]],
                    "hardest_10pct_share": [[0.5, 0.6, 0.7], [0.5, 0.6, 0.7]],
                }  # fmt: skip
            runs[encoder][loss] = {"anatomy": anatomy}
    return {"seeds": [0, 1], "runs": runs}


def _note(axis) -> str | None:
    """A scene anatomy panel's note (the series that keep one value): on a panel with lines the
    lines of its title after the first, on a panel without its one text; None when it has none."""
    _, *note = axis.get_title().split("\n", 1)
    if axis.get_lines():  # under the title, outside the axes: nothing inside them
        assert not axis.texts
        return note[0] if note else None
    assert not note  # an empty panel's title is its heading alone
    texts = [text.get_text() for text in axis.texts]
    assert len(texts) <= 1
    return texts[0] if texts else None


LABELS = [f"{encoder}, {loss}" for encoder in ("VSE++", "VSRN")
          for loss in ("SmoothAP", "VSE++ max", "NT-Xent")]  # fmt: skip


@pytest.mark.slow
def test_scene_anatomy_draws_a_line_per_encoder_and_loss_with_a_band_from_zero(drawn):
    figure = drawn(module.plot_scene_anatomy, _anatomy())
    axes = figure.axes
    assert len(axes) == 6
    assert [axis.get_title() for axis in axes] == [
        f"{what} ({way})"
        for what in ("active negatives per query", "queries without gradient",
                     "hardest 10 % negatives' gradient share")
        for way in ("image -> caption", "caption -> image")]  # fmt: skip
    assert {axis.title.get_fontsize() for axis in axes} == {10}
    colours = [to_rgba(c) for c in ("tab:blue", "tab:orange", "tab:green")] * 2
    for axis in axes:
        lines = axis.get_lines()
        assert [line.get_label() for line in lines] == LABELS
        assert [line.get_linestyle() for line in lines] == ["-"] * 3 + ["--"] * 3
        assert [to_rgba(line.get_color()) for line in lines] == colours
        assert all(list(line.get_xdata()) == [0, 5, 10] for line in lines)
        assert all(g.get_alpha() == 0.3 for g in axis.get_ygridlines())
    active = axes[0]
    for e in range(2):
        for index in range(3):
            base = 1 + e + 3 * index
            line = active.get_lines()[3 * e + index]
            assert list(line.get_ydata()) == [base + 0.5, base + 1.5, base + 2.5]
    assert active.get_yscale() == "log" and axes[2].get_yscale() == "linear"
    # share without gradient: mean [0.2, 0.2, 0.1], std [0.1, 0.1, 0.1]; band clipped at 0
    share = axes[2]
    assert list(share.get_lines()[0].get_ydata()) == pytest.approx([0.2, 0.2, 0.1])
    band = share.collections[0]
    assert to_rgba(band.get_facecolor()[0])[:3] == to_rgba("tab:blue")[:3]
    assert band.get_alpha() == 0.15
    ys = {(x, round(y, 9)) for x, y in band.get_paths()[0].vertices}
    assert {(0, 0.1), (0, 0.3), (5, 0.1), (5, 0.3), (10, 0.0), (10, 0.2)} <= ys
    hardest = axes[4]
    band = hardest.collections[0]
    assert np.ptp(band.get_paths()[0].vertices[:, 1]) == pytest.approx(0.2)  # no spread: 0.5-0.7
    assert [axis.get_xlabel() for axis in axes] == [""] * 4 + ["training step"] * 2
    assert axes[0].get_shared_x_axes().joined(axes[0], axes[5])


@pytest.mark.slow
def test_scene_anatomy_names_the_encoders_in_legend_and_title(drawn):
    figure = drawn(module.plot_scene_anatomy, _anatomy())
    (legend,) = figure.legends
    assert [t.get_text() for t in legend.get_texts()] == LABELS
    assert [h.get_linestyle() for h in legend.legend_handles] == ["-"] * 3 + ["--"] * 3
    assert [to_rgba(h.get_color()) for h in legend.legend_handles] == [
        to_rgba(c) for c in ("tab:blue", "tab:orange", "tab:green")
    ] * 2
    assert {t.get_fontsize() for t in legend.get_texts()} == {10}
    assert not legend.get_frame_on() and legend._ncols == 3
    box = legend.get_window_extent(figure.canvas.get_renderer())
    assert box.y1 <= min(axis.get_window_extent().y0 for axis in figure.axes)
    assert figure._suptitle.get_text() == (
        "Gradient anatomy over training (dL/dS of each direction's own term;\nband: ± std over "
        "seeds; solid VSE++, dashed VSRN)"
    )
    assert figure._suptitle.get_fontsize() == 11
    assert figure.get_size_inches() == pytest.approx((10.4, 9.5))


@pytest.mark.slow
def test_losses_that_keep_one_value_are_named_on_the_panel(drawn):
    figure = drawn(module.plot_scene_anatomy, _anatomy(flat=("VSE++ max", "NT-Xent")))
    share = figure.axes[2]
    assert [line.get_label() for line in share.get_lines()] == ["VSE++, SmoothAP", "VSRN, SmoothAP"]
    assert len(share.collections) == 2
    assert share.get_title() == ("queries without gradient (image -> caption)\n"
                                 "0 at every step: VSE++ max (both encoders); NT-Xent\n"
                                 "(both encoders)")  # a parenthesis kept whole  # fmt: skip
    assert share.title.get_fontsize() == 10 and not share.texts
    assert len(share.get_yticks()) > 0
    # every panel elsewhere draws every line
    assert all(len(axis.get_lines()) == 6 for axis in figure.axes if axis is not share
               and axis is not figure.axes[3])  # fmt: skip


@pytest.mark.slow
def test_a_panel_where_every_loss_keeps_its_value_is_a_centred_note(drawn):
    figure = drawn(module.plot_scene_anatomy,
                   _anatomy(flat=("SmoothAP", "VSE++ max", "NT-Xent"), encoders=("A", "B", "C"),
                            directions=("in_batch",)))  # fmt: skip
    share = figure.axes[1]
    assert share.get_title() == "queries without gradient (image -> the batch's other images)"
    assert not share.get_lines() and len(share.get_yticks()) == 0
    assert share.get_yscale() == "linear"
    (note,) = share.texts
    assert note.get_text() == ("0 at every step: SmoothAP (every encoder); VSE++ max\n"
                               "(every encoder); NT-Xent (every encoder)")  # fmt: skip
    assert note.get_position() == (0.5, 0.5) and note.get_transform() == share.transAxes
    assert (note.get_ha(), note.get_va(), note.get_fontsize()) == ("center", "center", 9)
    assert to_rgba(note.get_color()) == to_rgba("0.25")
    figure.canvas.draw()  # drawn: in the middle of the panel's frame, within it
    renderer = figure.canvas.get_renderer()
    box, frame = note.get_window_extent(renderer), share.get_window_extent(renderer)
    assert (box.x0 + box.x1) / 2 == pytest.approx((frame.x0 + frame.x1) / 2, abs=1)
    assert (box.y0 + box.y1) / 2 == pytest.approx((frame.y0 + frame.y1) / 2, abs=1)
    assert frame.x0 < box.x0 and box.x1 < frame.x1 and frame.y0 < box.y0 and box.y1 < frame.y1
    assert [axis.get_xlabel() for axis in figure.axes] == ["", "", "training step"]
    assert figure.get_size_inches() == pytest.approx((5.2, 9.5))
    styles = [h.get_linestyle() for h in figure.legends[0].legend_handles]
    assert styles == ["-"] * 3 + ["--"] * 3 + [":"] * 3
    assert figure._suptitle.get_text().endswith("solid A, dashed B, dotted C)")


def test_an_active_negatives_panel_without_lines_stays_linear(drawn):
    result = _anatomy(flat=("SmoothAP", "VSE++ max", "NT-Xent"), directions=("i2t",))
    for encoder in result["runs"].values():
        for run in encoder.values():
            run["anatomy"]["i2t"]["active_negatives"] = [[4, NAN, 4], [4, 4, NAN]]
    figure = drawn(module.plot_scene_anatomy, result)
    active = figure.axes[0]
    assert not active.get_lines() and active.get_yscale() == "linear"
    assert _note(active).startswith("4 at every step:")


@pytest.mark.slow
@pytest.mark.filterwarnings("ignore:Mean of empty slice", "ignore:Degrees of freedom")
def test_one_loss_keeping_a_value_at_one_encoder_only_is_drawn(drawn):
    result = _anatomy()
    runs = result["runs"]
    runs["VSE++"]["SmoothAP"]["anatomy"]["i2t"]["share_without_gradient"] = [[0.0] * 3] * 2
    runs["VSRN"]["NT-Xent"]["anatomy"]["i2t"]["share_without_gradient"] = [[0.0] * 3] * 2
    runs["VSRN"]["VSE++ max"]["anatomy"]["i2t"]["share_without_gradient"] = [[0.5] * 3] * 2
    figure = drawn(module.plot_scene_anatomy, result)
    share = figure.axes[2]
    assert len(share.get_lines()) == 4
    assert {line.get_label() for line in share.get_lines()} == {
        "VSRN, SmoothAP",
        "VSE++, VSE++ max",
        "VSRN, VSE++ max",
        "VSE++, NT-Xent",
    }
    assert _note(share) == "0 at every step: SmoothAP (VSE++); NT-Xent (VSRN)"
    runs["VSRN"]["SmoothAP"]["anatomy"]["i2t"]["share_without_gradient"] = [[NAN, 0.0, 0.0]] * 2
    figure = drawn(module.plot_scene_anatomy, result)
    assert _note(figure.axes[2]) == "0 at every step: SmoothAP (both encoders); NT-Xent (VSRN)"


@pytest.mark.filterwarnings("ignore:Mean of empty slice", "ignore:Degrees of freedom")
def test_one_loss_keeping_one_value_at_every_encoder_is_named_not_drawn_twice(drawn):
    # VSE++'s max-violation at 1 active negative under both encoders: the dashed line lay
    # under the solid one, and the report's reader could not see the second encoder's
    result = _anatomy()
    runs = result["runs"]
    for encoder in ("VSE++", "VSRN"):
        runs[encoder]["VSE++ max"]["anatomy"]["i2t"]["active_negatives"] = [[1.0] * 3] * 2
    figure = drawn(module.plot_scene_anatomy, result)
    active = figure.axes[0]
    assert {line.get_label() for line in active.get_lines()} == {
        "VSE++, SmoothAP", "VSRN, SmoothAP", "VSE++, NT-Xent", "VSRN, NT-Xent"}
    assert _note(active) == "1 at every step: VSE++ max (both encoders)"
    runs["VSRN"]["VSE++ max"]["anatomy"]["i2t"]["active_negatives"] = [[1.0, 2.0, 1.0]] * 2
    figure = drawn(module.plot_scene_anatomy, result)  # one encoder alone keeps it: drawn
    assert len(figure.axes[0].get_lines()) == 6 and _note(figure.axes[0]) is None


@pytest.mark.filterwarnings("ignore:Mean of empty slice", "ignore:Degrees of freedom")
def test_the_legend_leaves_out_a_series_named_by_a_note_on_every_panel(drawn):
    # the report's legend listed both max-violation lines, drawn on no panel
    result = _anatomy(directions=("i2t",))
    for encoder in ("VSE++", "VSRN"):
        anatomy = result["runs"][encoder]["VSE++ max"]["anatomy"]["i2t"]
        for key, value in (("active_negatives", 1.0), ("share_without_gradient", 0.0),
                           ("hardest_10pct_share", 1.0)):  # fmt: skip
            anatomy[key] = [[value] * 3] * 2
    figure = drawn(module.plot_scene_anatomy, result)
    assert [_note(axis) for axis in figure.axes] == [  # each panel names it
        "1 at every step: VSE++ max (both encoders)", "0 at every step: VSE++ max (both encoders)",
        "1 at every step: VSE++ max (both encoders)"]  # fmt: skip
    legend = figure.legends[0]
    assert [t.get_text() for t in legend.get_texts()] == [
        "VSE++, SmoothAP", "VSE++, NT-Xent", "VSRN, SmoothAP", "VSRN, NT-Xent"]


def _note_text(axis):
    """The text that carries a panel's note: its title when the note is under it, else the one
    text inside the panel."""
    if "\n" in axis.get_title():
        return axis.title
    (text,) = axis.texts
    return text


def _zigzag(steps=(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10)):
    """Scene anatomy in one direction whose hardest-share panel draws SmoothAP zigzagging
    between 0 and 1 and NT-Xent between 0.1 and 0.9 at every step, VSRN's a step behind
    VSE++'s, over the panel's whole height and width; VSE++'s max-violation keeps 0.5 there
    under both encoders: its note. No band of the panel's height, at its top, bottom or
    middle, is clear of lines."""
    result = _anatomy(directions=("i2t",))
    for e, runs in enumerate(result["runs"].values()):
        for index, (loss, run) in enumerate(runs.items()):
            run["anatomy"]["steps"] = list(steps)
            counts = [[1.0 + e + 3 * index + i for i in range(len(steps))]] * 2
            low, high = {"SmoothAP": (0.0, 1.0), "VSE++ max": (0.5, 0.5),
                         "NT-Xent": (0.1, 0.9)}[loss]  # fmt: skip
            shares = [high if (i + e) % 2 else low for i in range(len(steps))]
            run["anatomy"]["i2t"] = {"active_negatives": counts, "share_without_gradient": counts,
                                     "hardest_10pct_share": [shares] * 2}  # fmt: skip
    return result


def _along(axis, line, points=400):
    """``points`` points along each segment of ``line``, in pixels of the drawn figure."""
    xy = axis.transData.transform(line.get_xydata())
    return np.concatenate([np.linspace(a, b, points) for a, b in itertools.pairwise(xy)])


@pytest.mark.slow
def test_a_note_over_drawn_lines_sits_above_its_panel_and_covers_no_line(drawn):
    # in a white box inside the panel, at its emptier end, the note still covered the curves
    # that ran there (the report's NT-Xent lines of the active-negatives panels)
    figure = drawn(module.plot_scene_anatomy, _zigzag())
    hardest = figure.axes[2]
    assert len(hardest.get_lines()) == 4
    figure.canvas.draw()
    renderer = figure.canvas.get_renderer()
    note = _note_text(hardest).get_window_extent(renderer)
    frame = hardest.get_window_extent(renderer)
    assert note.y0 >= frame.y1  # wholly above the panel's frame
    assert frame.x0 <= (note.x0 + note.x1) / 2 <= frame.x1  # and over it, not beside it
    for line in hardest.get_lines():
        inside = [(x, y) for x, y in _along(hardest, line)
                  if note.x0 <= x <= note.x1 and note.y0 <= y <= note.y1]  # fmt: skip
        assert inside == [], line.get_label()
    assert _note(hardest) == "0.5 at every step: VSE++ max (both encoders)"


@pytest.mark.slow
def test_the_notes_clear_the_figures_title_its_legend_and_the_other_panels(drawn):
    # a note under each title of the top row (under the figure's title), a note of four lines
    # in the middle row (under the panels above), one at the bottom (over the legend's row)
    result = _anatomy(losses=("SmoothAP", "VSE++ max-violation", "NT-Xent"))
    for encoder, value in (("VSE++", 0.0), ("VSRN", 0.5)):
        for loss in ("VSE++ max-violation", "NT-Xent"):
            anatomy = result["runs"][encoder][loss]["anatomy"]
            for direction in ("i2t", "t2i"):
                anatomy[direction]["share_without_gradient"] = [[value] * 3] * 2
                anatomy[direction]["active_negatives"] = [[1.0] * 3] * 2
                anatomy[direction]["hardest_10pct_share"] = [[0.25] * 3] * 2
    figure = drawn(module.plot_scene_anatomy, result)
    notes = [_note(axis) for axis in figure.axes]
    assert all(note is not None for note in notes)
    assert notes[2] == ("0 at every step: VSE++ max-violation (VSE++); NT-Xent\n(VSE++)\n"
                        "0.5 at every step: VSE++ max-violation (VSRN); NT-Xent\n(VSRN)")
    figure.canvas.draw()
    renderer = figure.canvas.get_renderer()
    others = [("the figure's title", figure._suptitle.get_window_extent(renderer)),
              ("the legend", figure.legends[0].get_window_extent(renderer))]  # fmt: skip
    others += [(f"panel {n}", axis.get_window_extent(renderer))
               for n, axis in enumerate(figure.axes)]  # fmt: skip
    others += [(f"panel {n}'s x labels", label.get_window_extent(renderer))
               for n, axis in enumerate(figure.axes)
               for label in [axis.xaxis.label, *axis.get_xticklabels()]
               if label.get_visible() and label.get_text()]  # fmt: skip
    for n, axis in enumerate(figure.axes):
        note = _note_text(axis).get_window_extent(renderer)
        for name, box in others:
            if name != f"panel {n}":
                assert not note.overlaps(box), f"panel {n}'s note overlaps {name}"
        titles = [other.title.get_window_extent(renderer) for other in figure.axes
                  if other is not axis]  # fmt: skip
        assert not any(note.overlaps(title) for title in titles), n


def test_a_long_note_wraps_and_keeps_max_violation_whole(drawn):
    # "max-" ended a line, "violation" began the next: the loss's name read as two words
    losses = ("SmoothAP", "VSE++ max-violation", "NT-Xent")
    figure = drawn(module.plot_scene_anatomy,
                   _anatomy(flat=("SmoothAP", "VSE++ max-violation"), losses=losses))  # fmt: skip
    share = figure.axes[2]
    assert [line.get_label() for line in share.get_lines()] == ["VSE++, NT-Xent", "VSRN, NT-Xent"]
    # 48 characters on the first line: with " max-" it would be 53, with " max-violation" 62
    assert _note(share).split("\n") == ["0 at every step: SmoothAP (both encoders); VSE++",
                                        "max-violation (both encoders)"]  # fmt: skip
    assert max(len(line) for line in _note(share).split("\n")) <= module.NOTE_WIDTH


@pytest.mark.slow
def test_scene_anatomy_cycles_four_line_styles_over_encoders_and_colours_a_fourth_loss(drawn):
    encoders = ("A", "B", "C", "D", "E")
    losses = ("SmoothAP", "VSE++ max", "NT-Xent", "FastAP")
    figure = drawn(module.plot_scene_anatomy, _anatomy(encoders=encoders, losses=losses))
    styles = ["-", "--", ":", "-.", "-"]  # the fifth encoder solid again
    colours = [to_rgba(c) for c in ("tab:blue", "tab:orange", "tab:green", "tab:purple")]
    for axis in figure.axes:
        lines = axis.get_lines()
        assert [line.get_linestyle() for line in lines] == [s for s in styles for _ in losses]
        assert [to_rgba(line.get_color()) for line in lines] == colours * 5
    handles = figure.legends[0].legend_handles
    assert [h.get_linestyle() for h in handles] == [s for s in styles for _ in losses]
    assert [to_rgba(h.get_color()) for h in handles] == colours * 5
    assert figure._suptitle.get_text().endswith(
        "; solid A, dashed B, dotted C, dash-dotted D, solid E)")
    assert isinstance(figure.get_layout_engine(), ConstrainedLayoutEngine)


def test_scene_anatomy_of_one_encoder_and_one_loss(drawn):
    result = _anatomy(encoders=("VSRN",), losses=("NT-Xent",))
    figure = drawn(module.plot_scene_anatomy, result)
    assert len(figure.axes) == 6
    for axis in figure.axes:
        assert [line.get_label() for line in axis.get_lines()] == ["VSRN, NT-Xent"]
    # NT-Xent's base is 1 (index 0): seeds [1, 2, 3] and [2, 3, 4]
    assert list(figure.axes[0].get_lines()[0].get_ydata()) == [1.5, 2.5, 3.5]
    assert figure._suptitle.get_text().endswith("; solid VSRN)")


def test_scene_anatomy_of_a_run_logged_at_one_step(drawn):
    result = _anatomy()
    for encoder in result["runs"].values():
        for run in encoder.values():
            anatomy = run["anatomy"]
            anatomy["steps"] = [0]
            for direction in ("i2t", "t2i"):
                anatomy[direction] = {key: [seed[:1] for seed in values]
                                      for key, values in anatomy[direction].items()}  # fmt: skip
    figure = drawn(module.plot_scene_anatomy, result)
    active, share = figure.axes[0], figure.axes[2]
    # active negatives: each series its own value (base + 0.5), so each drawn at its one step
    assert [list(line.get_ydata()) for line in active.get_lines()] == [
        [1.5], [4.5], [7.5], [2.5], [5.5], [8.5]]  # fmt: skip
    # the share without gradient, (0.1 + 0.3) / 2 = 0.2 for every loss: a note, no line
    assert not share.get_lines()
    assert _note(share) == ("0.2 at every step: SmoothAP (both encoders); VSE++ max\n"
                            "(both encoders); NT-Xent (both encoders)")  # "(both" alone no more


def test_a_loss_keeping_its_value_at_two_of_three_encoders_names_both(drawn):
    result = _anatomy(encoders=("A", "B", "C"), directions=("in_batch",))
    runs = result["runs"]
    for encoder, loss in (("A", "SmoothAP"), ("B", "SmoothAP"), ("A", "VSE++ max")):
        runs[encoder][loss]["anatomy"]["in_batch"]["share_without_gradient"] = [[0.0] * 3] * 2
    figure = drawn(module.plot_scene_anatomy, result)
    assert _note(figure.axes[1]) == "0 at every step: SmoothAP (A, B); VSE++ max (A)"


@pytest.mark.slow
def test_two_values_each_kept_by_two_losses_are_two_notes_one_under_the_other(drawn):
    result = _anatomy()
    runs = result["runs"]
    for encoder, value in (("VSE++", 0.0), ("VSRN", 0.5)):
        for loss in ("SmoothAP", "VSE++ max"):
            runs[encoder][loss]["anatomy"]["i2t"]["share_without_gradient"] = [[value] * 3] * 2
    figure = drawn(module.plot_scene_anatomy, result)
    share = figure.axes[2]
    assert {line.get_label() for line in share.get_lines()} == {"VSE++, NT-Xent", "VSRN, NT-Xent"}
    assert _note(share) == ("0 at every step: SmoothAP (VSE++); VSE++ max (VSE++)\n"
                            "0.5 at every step: SmoothAP (VSRN); VSE++ max (VSRN)")  # fmt: skip


@pytest.mark.slow
def test_scene_anatomy_reads_its_json_file_with_nan_written_either_way(drawn, tmp_path):
    # json.dumps writes a NaN as the token NaN; gradlab.jsonio.write_json as the string "NaN"
    result = _anatomy()
    result["runs"]["VSE++"]["SmoothAP"]["anatomy"]["i2t"]["active_negatives"] = [[1, NAN, 3],
                                                                                 [2, 3, 4]]
    token = tmp_path / "token.json"
    token.write_text(json.dumps(result))
    for path in (token, write_json(tmp_path / "string.json", result)):
        figure = drawn(module.plot_scene_anatomy, str(path))
        first = figure.axes[0].get_lines()[0]
        assert first.get_label() == "VSE++, SmoothAP"
        assert list(first.get_ydata()) == [1.5, 3.0, 3.5]  # the NaN left out of the mean
        assert [list(line.get_ydata()) for line in figure.axes[4].get_lines()] == [
            pytest.approx([0.5, 0.6, 0.7])] * 6  # fmt: skip


# ---- saving ----------------------------------------------------------------------------------


def test_save_figure_writes_a_trimmed_110_dpi_png_in_a_new_folder_and_closes_it(tmp_path):
    figure = plt.figure(figsize=(4, 4))
    figure.text(0.5, 0.5, "x", fontsize=10)
    other = plt.figure()  # the current figure: left open
    path = module.save_figure(figure, str(tmp_path / "new" / "deeper" / "f.png"))
    assert path == tmp_path / "new" / "deeper" / "f.png"
    assert not plt.fignum_exists(figure.number)
    with Image.open(path) as image:
        assert image.format == "PNG"
        assert image.info["dpi"] == pytest.approx((110, 110), abs=0.01)
        assert max(image.size) < 100  # trimmed to the letter, not 440 px wide
    assert plt.fignum_exists(other.number)
    again = module.save_figure(plt.figure(), tmp_path / "new" / "g.png")  # the folder exists
    assert again.is_file()
    plt.close(other)


@pytest.mark.slow
def test_an_active_negatives_line_that_reaches_zero_stays_on_its_panel(drawn):
    # a log axis dropped SmoothAP's line off the panel after its first step: 0 active
    # negatives, the finding the panel is there to show
    result = _anatomy(directions=("i2t",))
    for encoder in result["runs"].values():  # a mean over queries: 0.25 active negatives
        encoder["SmoothAP"]["anatomy"]["i2t"]["active_negatives"] = [[0.25, 0, 0]] * 2
    figure = drawn(module.plot_scene_anatomy, result)
    active = figure.axes[0]
    assert active.get_yscale() == "symlog"
    assert active.yaxis.get_transform().linthresh == pytest.approx(0.1, rel=1e-15, abs=0)
    low, high = active.get_ylim()  # 0 half the smallest count's decade above the frame's edge
    assert low == pytest.approx(-0.05, rel=1e-15, abs=0) and high > 9
    drawn_at = {v for line in active.get_lines() for v in line.get_ydata()}
    assert 0.0 in drawn_at and all(low < v < high for v in drawn_at)
    result = _anatomy(directions=("i2t",))
    for encoder in result["runs"].values():  # below 1, never 0: a log axis, as before
        encoder["SmoothAP"]["anatomy"]["i2t"]["active_negatives"] = [[0.5, 0.25, 0.75]] * 2
    assert drawn(module.plot_scene_anatomy, result).axes[0].get_yscale() == "log"


def test_the_titles_plus_minus_sign_is_drawn_in_the_figures_font(tmp_path):
    # the titles write "±" as the pages' text does: the style's font must hold the glyph
    # (matplotlib warns "Glyph ... missing from font(s)" and draws a box otherwise)
    import warnings

    from gradlab.plotting.style import style_rc

    with matplotlib.rc_context(style_rc()), warnings.catch_warnings():
        warnings.simplefilter("error")
        figure = plt.figure(figsize=(2, 1))
        figure.suptitle("bars: mean ± std")
        figure.savefig(tmp_path / "sign.png")
    plt.close(figure)


@pytest.mark.slow
@pytest.mark.parametrize(("largest", "top"), [(148, 200), (31, 50), (100, 100), (7.5, 10)])
def test_active_negatives_are_ticked_at_1_2_5_up_to_a_labelled_tick_above_all(
    drawn, largest, top
):
    # 110 to 148 under a highest label of 100 could not be read off
    result = _anatomy(directions=("i2t",))
    for encoder in result["runs"].values():
        for run in encoder.values():
            run["anatomy"]["i2t"]["active_negatives"] = [[largest, 6, 3], [largest, 5, 3]]
    figure = drawn(module.plot_scene_anatomy, result)
    active = figure.axes[0]
    assert active.get_yscale() == "log" and active.get_ylim()[1] == pytest.approx(top)
    figure.canvas.draw()
    shown = [float(label.get_text()) for minor in (False, True)
             for label in active.get_yticklabels(minor=minor)
             if label.get_text() and active.get_ylim()[0] <= label.get_position()[1] <= top]
    mantissas = {round(value / 10 ** math.floor(math.log10(value))) for value in shown}
    assert top in shown and mantissas <= {1, 2, 5} and len(shown) >= 2, shown


def test_active_negatives_reaching_0_are_framed_up_to_the_power_of_ten_above_all(drawn):
    result = _anatomy(directions=("i2t",))
    for encoder in result["runs"].values():
        for run in encoder.values():
            run["anatomy"]["i2t"]["active_negatives"] = [[148, 6, 0], [140, 5, 0]]
    active = drawn(module.plot_scene_anatomy, result).axes[0]
    assert active.get_yscale() == "symlog" and active.get_ylim()[1] == pytest.approx(1000)


def test_an_untrained_network_without_spread_gets_no_band(drawn):
    # one seed, or seeds that agree: no spread to shade
    result = _losses()
    result["before"] = {metric: [0.2, 0.2] for metric in result["before"]}
    figure = drawn(module.plot_loss_comparison, result)
    assert all(not [p for p in axis.patches if isinstance(p, Rectangle)]
               for axis in figure.axes[:3])  # fmt: skip
