"""The report's training and caption figures on hand-written results (no training): which bars
and curves are drawn under which label, the 10-step smoothing of the loss curves against a plain
loop, titles, limits and tick labels. The drawn Axes are read back; expected values are the
inputs."""

from __future__ import annotations

import matplotlib
import matplotlib.pyplot as plt
import numpy as np
import pytest

import gradlab.plotting.report_figures as module
from tests.helpers.figure_layout import captured_figures


@pytest.fixture
def drawn(monkeypatch, tmp_path):
    def draw(function, results):
        with captured_figures(monkeypatch, module) as figures:
            assert function(results, tmp_path / "f.png") == tmp_path / "f.png"
        (figure,) = figures
        return figure

    yield draw
    plt.close("all")


def _bars(container):
    """(centre, width, height) of each bar."""
    return [(round(p.get_x() + p.get_width() / 2, 9), round(p.get_width(), 9), p.get_height())
            for p in container]  # fmt: skip


def _retrieval():
    return {
        "unseen_classes_before": {"recall@1": 0.2, "mAP": 0.1},
        "unseen_classes_after": {"recall@1": 0.6, "mAP": 0.4},
        "seen_classes_held_out_before": {"recall@1": 0.3, "mAP": 0.15},
        "seen_classes_held_out_after": {"recall@1": 0.9, "mAP": 0.7},
    }


def test_retrieval_draws_before_and_after_bars_side_by_side_per_metric(drawn):
    figure = drawn(module.plot_retrieval_before_after, _retrieval())
    unseen, seen = figure.axes
    expected = {unseen: ([0.2, 0.1], [0.6, 0.4]), seen: ([0.3, 0.15], [0.9, 0.7])}
    for axis, (before, after) in expected.items():
        first, second = axis.containers
        assert (first.get_label(), second.get_label()) == ("before training",
                                                           "after SmoothAP training")  # fmt: skip
        assert _bars(first) == [(-0.2, 0.4, before[0]), (0.8, 0.4, before[1])]
        assert _bars(second) == [(0.2, 0.4, after[0]), (1.2, 0.4, after[1])]
        assert list(axis.get_xticks()) == [0, 1]
        assert [t.get_text() for t in axis.get_xticklabels()] == ["recall@1", "mAP"]
        assert axis.get_ylim() == (0, 1)
    assert unseen.get_title() == "Unseen classes 5-9"
    assert seen.get_title() == "Seen classes 0-4, held-out images"
    assert (unseen.get_ylabel(), seen.get_ylabel()) == ("score (fraction)", "")
    assert unseen.get_shared_y_axes().joined(unseen, seen)
    (legend,) = figure.legends
    assert [t.get_text() for t in legend.get_texts()] == ["before training",
                                                          "after SmoothAP training"]  # fmt: skip
    assert not legend.get_frame_on() and legend._ncols == 2
    box = legend.get_window_extent(figure.canvas.get_renderer())
    assert box.y1 <= min(axis.get_window_extent().y0 for axis in figure.axes)
    assert figure._suptitle.get_text() == (
        "Digits retrieval with an MLP embedding (each image queries all the others)"
    )
    assert figure.get_size_inches() == pytest.approx((10, 4.2))
    assert unseen.get_position().x1 < seen.get_position().x0  # side by side
    assert figure.get_layout_engine() is not None


def _run(history, recall, counts):
    return {"loss_history": history, "recall": recall, "gradient_counts": counts}


def _captions():
    rng = np.random.default_rng(3)
    losses = {}
    for index, name in enumerate(("SmoothAP", "VSE++", "NT-Xent")):
        history = (2.0 + rng.random(13)).tolist()
        recall = {"i2t_R@1": 0.1 * (index + 1), "t2i_R@1": 0.2 * (index + 1)}
        counts = [{"step": step, "i2t_share_without_gradient": 0.1 * index + step / 100,
                   "t2i_share_without_gradient": 0.5 - step / 100}
                  for step in (0, 5, 10)]  # fmt: skip
        losses[name] = _run(history, recall, counts)
    return {"losses": losses}


def _moving_mean(values, window=10):
    return [sum(values[i : i + window]) / window for i in range(len(values) - window + 1)]


def test_captions_draw_each_losss_10_step_mean_over_its_first_loss(drawn):
    results = _captions()
    figure = drawn(module.plot_captions, results)
    training = figure.axes[0]
    assert [line.get_label() for line in training.get_lines()] == ["SmoothAP", "VSE++", "NT-Xent"]
    for line, run in zip(training.get_lines(), results["losses"].values(), strict=True):
        history = run["loss_history"]
        expected = [value / history[0] for value in _moving_mean(history)]
        assert list(line.get_xdata()) == [0, 1, 2, 3]
        assert list(line.get_ydata()) == pytest.approx(expected, rel=1e-12)
    assert training.get_xlabel() == "step"
    assert training.get_ylabel() == "loss / initial loss (10-step mean)"
    assert training.get_title() == "Training"
    assert [t.get_text() for t in training.get_legend().get_texts()] == [
        "SmoothAP",
        "VSE++",
        "NT-Xent",
    ]
    assert figure._suptitle.get_text() == (
        "Image-caption miniature (digits, 5 templated captions per image)"
    )
    assert figure.get_size_inches() == pytest.approx((16, 4.5))
    assert len(figure.axes) == 3
    boxes = [axis.get_position() for axis in figure.axes]  # in one row
    assert boxes[0].x1 < boxes[1].x0 and boxes[1].x1 < boxes[2].x0


@pytest.mark.slow
def test_a_loss_that_starts_at_zero_is_divided_by_a_tiny_floor_not_by_zero(drawn):
    results = _captions()
    history = [0.0] * 5 + [1e-12] * 5 + [2e-12]
    results["losses"]["SmoothAP"]["loss_history"] = history
    figure = drawn(module.plot_captions, results)
    line = figure.axes[0].get_lines()[0]
    assert list(line.get_ydata()) == pytest.approx([0.5, 0.7], rel=1e-9)
    results["losses"]["SmoothAP"]["loss_history"] = [-1.0] * 10
    figure = drawn(module.plot_captions, results)
    assert list(figure.axes[0].get_lines()[0].get_ydata()) == pytest.approx([-1e12])


def test_captions_draw_each_losss_recall_bars_centred_on_the_metric(drawn):
    results = _captions()
    figure = drawn(module.plot_captions, results)
    recall = figure.axes[1]
    assert [c.get_label() for c in recall.containers] == ["SmoothAP", "VSE++", "NT-Xent"]
    width = 0.8 / 3
    for index, container in enumerate(recall.containers):
        heights = [0.1 * (index + 1), 0.2 * (index + 1)]
        centres = [x + (index - 1) * width for x in (0, 1)]
        assert [p.get_x() + p.get_width() / 2 for p in container] == pytest.approx(centres)
        assert [p.get_width() for p in container] == pytest.approx([width] * 2)
        assert [p.get_height() for p in container] == pytest.approx(heights)
    assert list(recall.get_xticks()) == [0, 1]
    assert [t.get_text() for t in recall.get_xticklabels()] == ["i2t_R@1", "t2i_R@1"]
    assert {t.get_rotation() for t in recall.get_xticklabels()} == {30}
    assert recall.get_ylabel() == "recall (fraction)"
    assert recall.get_title() == "Held-out recall, both directions"
    assert recall.get_ylim() == (0, 1.05)
    legend = recall.get_legend()
    assert [t.get_text() for t in legend.get_texts()] == ["SmoothAP", "VSE++", "NT-Xent"]
    assert {t.get_fontsize() for t in legend.get_texts()} == {8}


@pytest.mark.slow
def test_captions_draw_queries_without_gradient_per_direction(drawn):
    results = _captions()
    figure = drawn(module.plot_captions, results)
    counts = figure.axes[2]
    lines = counts.get_lines()
    assert [line.get_label() for line in lines] == [
        f"{name}: {direction}"
        for name in ("SmoothAP", "VSE++", "NT-Xent")
        for direction in ("image->caption", "caption->image")
    ]
    assert [line.get_linestyle() for line in lines] == ["-", "--"] * 3
    for index in range(len(results["losses"])):
        i2t, t2i = lines[2 * index : 2 * index + 2]
        assert list(i2t.get_xdata()) == [0, 5, 10] == list(t2i.get_xdata())
        assert list(i2t.get_ydata()) == pytest.approx([0.1 * index + s / 100 for s in (0, 5, 10)])
        assert list(t2i.get_ydata()) == pytest.approx([0.5 - s / 100 for s in (0, 5, 10)])
    assert counts.get_xlabel() == "step"
    assert counts.get_ylabel() == "share of queries"
    assert counts.get_title() == "SmoothAP queries with no gradient entry (tau=0.01)"
    legend = counts.get_legend()
    assert [t.get_text() for t in legend.get_texts()] == [line.get_label() for line in lines]
    assert {t.get_fontsize() for t in legend.get_texts()} == {7}


def test_captions_tick_their_step_axes_at_whole_steps_on_a_short_run(drawn):
    # 11 losses: two 10-step means, at steps 0 and 1; gradient counts at steps 0 and 1
    results = _captions()
    for run in results["losses"].values():
        run["loss_history"] = run["loss_history"][:11]
        first, second = run["gradient_counts"][:2]
        run["gradient_counts"] = [first, {**second, "step": 1}]
    figure = drawn(module.plot_captions, results)
    for axis in (figure.axes[0], figure.axes[2]):
        low, high = axis.get_xlim()
        assert [float(t) for t in axis.get_xticks() if low <= t <= high] == [0.0, 1.0]


def test_the_directions_keep_their_dashes_under_a_users_dotted_default(drawn):
    with matplotlib.rc_context({"lines.linestyle": ":"}):
        figure = drawn(module.plot_captions, _captions())
    styles = [line.get_linestyle() for line in figure.axes[2].get_lines()]
    assert styles == ["-", "--"] * 3
