"""The operating-region figures, drawn from the committed results, as a person sees them."""

from __future__ import annotations

from pathlib import Path

import matplotlib.pyplot as plt
import numpy as np
import pytest
from matplotlib.text import Text

import gradlab.plotting.operating_region as module
from tests.helpers.figure_layout import captured_figures, layout_problems

FIGURES = Path(__file__).resolve().parents[2] / "figures"
CLOSED_FORMS = FIGURES / "operating_region_closed_forms.json"


@pytest.mark.slow
def test_closed_forms_keep_legends_off_the_data_and_text_inside(monkeypatch, tmp_path):
    with captured_figures(monkeypatch, module) as figures:
        module.plot_closed_forms(CLOSED_FORMS, tmp_path / "f.png")
    (figure,) = figures
    assert layout_problems(figure) == []
    left = figure.axes[0]
    assert len(left.get_lines()) == len(module.load_results(CLOSED_FORMS)["widths"])
    styles = {line.get_linestyle() for line in left.get_lines()}
    assert len(styles) == len(left.get_lines())  # series differ by line style, not colour only
    plt.close(figure)


@pytest.mark.slow
def test_the_checker_catches_a_legend_over_data_and_text_outside():
    figure, axes = plt.subplots()
    axes.plot([0, 1], [0, 1], label="a line")
    axes.legend(loc="center")
    axes.annotate("far away", (0.5, 0.5), xytext=(3.0, 3.0), textcoords="axes fraction")
    problems = layout_problems(figure)
    plt.close(figure)
    assert any("legend covers" in p for p in problems)
    assert any("leaves it" in p for p in problems)


@pytest.mark.slow
def test_the_papers_setting_is_named_clear_of_every_curve(monkeypatch, tmp_path):
    """The annotation of Brown et al.'s (tau, eps) point crosses none of the width curves."""
    with captured_figures(monkeypatch, module) as figures:
        module.plot_closed_forms(CLOSED_FORMS, tmp_path / "f.png")
    (figure,) = figures
    figure.canvas.draw()  # lay the figure out as saved
    left = figure.axes[0]
    (note,) = left.texts
    box = Text.get_window_extent(note, figure.canvas.get_renderer())  # the words, not the arrow
    inside = []
    for line in left.get_lines():
        x, y = (np.asarray(v, dtype=float) for v in line.get_data())
        dense_x = np.geomspace(x.min(), x.max(), 2000)  # the tau axis is logarithmic
        dense_y = np.interp(np.log(dense_x), np.log(x), y)
        keep = dense_y > 0  # a width of 0 is off the log axis
        points = left.transData.transform(np.column_stack([dense_x[keep], dense_y[keep]]))
        inside += [line.get_label() for px, py in points if box.contains(px, py)][:1]
    plt.close(figure)
    assert "Brown et al. (2020)" in note.get_text()
    assert inside == []
