"""The layout checks themselves: each rejects the defect it is for, built as the report's old
figures drew it, and passes the figure once the defect is gone."""

from __future__ import annotations

import matplotlib.image as mpimg
import matplotlib.pyplot as plt
import numpy as np
import pytest

from gradlab.plotting.style import apply_style
from tests.helpers.figure_layout import (
    PAGE_WIDTH_PX,
    SAVED_DPI,
    hidden_series,
    layout_problems,
    overlapping_titles,
    small_text,
)


@pytest.fixture(autouse=True)
def _style():
    apply_style()
    yield
    plt.close("all")


def _overview(width_per_panel: float, legend_size: float):
    """The Monitor's old overview: two columns of panels, each with a legend under it."""
    figure, axes = plt.subplots(2, 2, figsize=(2 * width_per_panel, 8.4))
    for axis in axes.flat:
        axis.plot([0, 1, 2], [1.0, 0.5, 0.2], label="gradient norm (whole batch)")
        axis.set_title("Gradient of the loss w.r.t. the embeddings")
        axis.legend(fontsize=legend_size, loc="upper center", bbox_to_anchor=(0.5, -0.2),
                    frameon=False)  # fmt: skip
    figure.tight_layout()
    return figure


@pytest.mark.slow  # saves and reads back a PNG: seconds; the last test checks small text fast
def test_small_text_rejects_the_old_overview_and_measures_the_saved_png(tmp_path):
    old = _overview(6.5, 7)  # 13 inches wide, 7 pt legends: 6.3 pt on a 1100 px page
    problems = small_text(old)
    assert problems and all("legend" in p for p in problems), problems
    old.savefig(tmp_path / "old.png", dpi=SAVED_DPI, bbox_inches="tight")
    width = mpimg.imread(tmp_path / "old.png").shape[1]
    shown = 7 * SAVED_DPI / 96 * PAGE_WIDTH_PX / width  # the PNG as the browser scales it
    assert width > PAGE_WIDTH_PX
    assert f"is {shown:.1f} pt on the page" in problems[0]
    assert small_text(_overview(4.8, 9)) == []
    # the same figure on a page twice as wide is not scaled down: 7 pt at 110 dpi reads 8.0 pt
    assert not [p for p in small_text(_overview(6.5, 7.9), page_width_px=4000) if "legend" in p]


def _retrieval(suptitle_y: float | None):
    """The old before/after retrieval figure: two bar panels, bold titles, a suptitle."""
    figure, axes = plt.subplots(1, 2, figsize=(12, 4.2), sharey=True)
    for axis, title in zip(axes, ("Unseen classes 5-9", "Seen classes 0-4"), strict=True):
        axis.bar([0, 1], [0.9, 0.6])
        axis.set(title=title, ylim=(0, 1.25))
    if suptitle_y is None:
        figure.suptitle("Digits retrieval with an MLP embedding (each image queries the others)")
    else:
        figure.suptitle("Digits retrieval with an MLP embedding", y=suptitle_y)
    return figure


def _flat_counts(top_tick: bool):
    """The old 'batches without ranking signal' figure: all zero on 0..1, long bold title."""
    figure, axis = plt.subplots(figsize=(8, 4.2))
    axis.plot(range(0, 72, 2), [0] * 36, marker="o", markersize=3)
    axis.set_title("Batches without ranking signal (no query has both a positive and a negative)")
    axis.set_ylim(0, 1 if top_tick else 0.95)
    return figure


@pytest.mark.slow
def test_overlapping_titles_reject_the_old_suptitle_and_a_title_on_a_tick_label():
    problems = overlapping_titles(_retrieval(None))
    assert len(problems) == 2 and all("touches panel" in p and "title" in p for p in problems)
    assert overlapping_titles(_retrieval(1.06)) == []
    on_tick = overlapping_titles(_flat_counts(top_tick=True))
    assert on_tick == ["panel 0 title 'Batches without ranking signal' touches panel 0 tick "
                       "label '1.0'"]  # fmt: skip
    assert overlapping_titles(_flat_counts(top_tick=False)) == []  # 1.0 is out of view


def test_overlapping_titles_reject_a_title_of_several_lines_reaching_the_panel_above():
    # a panel's note under its title, without a layout engine to make room for it
    figure, (top, bottom) = plt.subplots(2, 1, figsize=(5, 4))
    for axis in (top, bottom):
        axis.plot([0, 1], [0, 1])
    bottom.set_title("queries without gradient\n0 at every step: a loss\nand another\nand more")
    problems = overlapping_titles(figure)
    assert "panel 1 title 'queries without gradient\\n0 at ' covers panel 0's frame" in problems
    figure.set_layout_engine("constrained")  # room made: the same title clears the panel above
    assert not [p for p in overlapping_titles(figure) if "frame" in p]


def _untrained_p(values):
    """The old untrained panel of P against batch size: three error-bar series, one per
    proportion, each faint per seed and a mean with its bar."""
    figure, axis = plt.subplots()
    sizes = [16, 64, 256]
    for (label, colour, marker), value in zip(
        [("P", "black", "o"), ("positive-negative", "tab:red", "s"),
         ("negative-negative", "tab:blue", "^")], values, strict=True):  # fmt: skip
        axis.plot(sizes, [value] * 3, color=colour, alpha=0.25, lw=0.8)
        axis.errorbar(sizes, [value] * 3, yerr=[0.0] * 3, color=colour, marker=marker, ms=4,
                      capsize=3, label=label)  # fmt: skip
    axis.set_xscale("log", base=2)
    axis.set_ylim(-0.02, 1.02)
    return figure


@pytest.mark.slow
def test_hidden_series_rejects_three_proportions_drawn_on_one_line():
    problems = hidden_series(_untrained_p([1.0, 1.0, 1.0]))
    assert "panel 0: series 'P' is hidden under 'positive-negative'" in problems
    assert "panel 0: series 'positive-negative' is hidden under 'negative-negative'" in problems
    assert hidden_series(_untrained_p([1.0, 0.6, 0.3])) == []


@pytest.mark.slow
def test_hidden_series_sees_a_wide_line_under_a_narrow_one_and_dashes_that_let_it_show():
    figure, axis = plt.subplots()
    x = np.linspace(0, 1, 30)
    axis.plot(x, x**2, lw=3.2, label="first run")
    axis.plot(x, x**2, lw=2.3, label="same run again")  # 0.7 px either side: not seen
    assert hidden_series(figure) == ["panel 0: series 'first run' is hidden under "
                                     "'same run again'"]  # fmt: skip
    figure, axis = plt.subplots()
    axis.plot(x, x**2, lw=1.5, label="under")
    axis.plot(x, x**2, "--", lw=1.5, label="dashed over it")  # the gaps show the one under
    axis.plot(x, x**2 + 0.2, lw=1.5, label="apart")
    assert hidden_series(figure) == []
    figure, axis = plt.subplots()  # markers at other steps than the line over them: seen
    axis.plot(x, x, lw=1.5, marker="o", markersize=5, markevery=(0, 4), label="marked")
    axis.plot(x, x, lw=1.5, marker="s", markersize=3, markevery=(2, 4), label="over it")
    assert hidden_series(figure) == []


@pytest.mark.slow
def test_hidden_series_rejects_a_zero_line_on_the_frame():
    figure = _flat_counts(top_tick=False)
    assert hidden_series(figure) == ["panel 0: series line 0 lies on the bottom frame"]
    figure.axes[0].set_ylim(-0.05, 1)
    assert hidden_series(figure) == []


@pytest.mark.slow  # seconds: left out of make test-fast
def test_layout_problems_runs_every_check():
    assert any("hidden" in p for p in layout_problems(_untrained_p([1.0, 1.0, 1.0])))
    assert any("touches" in p for p in layout_problems(_retrieval(None)))
    assert any("pt on the page" in p for p in layout_problems(_overview(6.5, 7)))
