"""The operating-region figures, drawn from the committed results, as a person sees them."""

from __future__ import annotations

from pathlib import Path

import matplotlib.pyplot as plt
import pytest

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


def test_the_checker_catches_a_legend_over_data_and_text_outside():
    figure, axes = plt.subplots()
    axes.plot([0, 1], [0, 1], label="a line")
    axes.legend(loc="center")
    axes.annotate("far away", (0.5, 0.5), xytext=(3.0, 3.0), textcoords="axes fraction")
    problems = layout_problems(figure)
    plt.close(figure)
    assert any("legend covers" in p for p in problems)
    assert any("leaves it" in p for p in problems)
