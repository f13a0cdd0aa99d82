"""Checks of what a person sees in a figure: legends off the data, text inside its panel."""

from __future__ import annotations

from contextlib import contextmanager

import numpy as np
from matplotlib.figure import Figure


def _on_screen(axes, data) -> np.ndarray:
    data = np.asarray(data, dtype=float).reshape(-1, 2)
    return axes.transData.transform(data[np.isfinite(data).all(axis=1)])


def _data_points_on_screen(axes, steps: int = 20) -> np.ndarray:
    """Markers, and points every 1/steps of each line segment, in display coordinates."""
    points = [_on_screen(axes, c.get_offsets()) for c in axes.collections]
    for line in axes.get_lines():
        vertices = _on_screen(axes, line.get_xydata())
        if len(vertices) > 1:
            weights = np.linspace(0, 1, steps, endpoint=False)[None, :, None]
            starts, ends = vertices[:-1, None, :], vertices[1:, None, :]
            vertices = np.concatenate([(starts + weights * (ends - starts)).reshape(-1, 2),
                                       vertices[-1:]])  # fmt: skip
        points.append(vertices)
    points = [p for p in points if len(p)]
    return np.concatenate(points) if points else np.empty((0, 2))


def layout_problems(figure: Figure) -> list[str]:
    """Legends that cover a data point, annotations that leave their panel."""
    figure.canvas.draw()
    renderer = figure.canvas.get_renderer()
    problems = []
    for number, axes in enumerate(figure.axes):
        legend = axes.get_legend()
        if legend is not None:
            box = legend.get_window_extent(renderer)
            covered = [p for p in _data_points_on_screen(axes) if box.contains(*p)]
            if covered:
                problems.append(f"panel {number}: legend covers {len(covered)} data points")
        panel = axes.get_window_extent(renderer)
        for text in axes.texts:
            if text.get_text().strip():
                extent = text.get_window_extent(renderer)
                inside = (extent.x0 >= panel.x0 - 1 and extent.x1 <= panel.x1 + 1
                          and extent.y0 >= panel.y0 - 1 and extent.y1 <= panel.y1 + 1)  # fmt: skip
                if not inside:
                    problems.append(f"panel {number}: text {text.get_text()[:30]!r} leaves it")
    return problems


@contextmanager
def captured_figures(monkeypatch, module):
    """Figures that ``module``'s plotting functions save, kept open for inspection."""
    figures: list[Figure] = []

    def keep(figure, path):
        figures.append(figure)
        return path

    monkeypatch.setattr(module, "save_figure", keep)
    yield figures
