"""Checks of what a person sees in a figure: legends off the data, text inside its panel, text
large enough at the report's page width, titles clear of each other and of tick labels, and no
series hidden under another."""

from __future__ import annotations

import re
from contextlib import contextmanager

import numpy as np
from matplotlib.colors import to_rgb
from matplotlib.figure import Figure
from matplotlib.lines import Line2D
from matplotlib.text import Text

from gradlab.report.html import STYLE

PAGE_WIDTH_PX = int(re.search(r"body \{[^}]*max-width:\s*(\d+)px", STYLE).group(1))
"""The report's page width in CSS pixels: a wider figure is shown scaled down to it."""

SAVED_DPI = 110
"""The resolution gradlab's figures are saved at (``apply_style``; the studies' ``save_figure``)."""

SMALLEST_TEXT_PT = 8.0
"""No text below this size, as a reader sees it on the report's page."""

SMALLEST_TITLE_PT = 9.0
"""Titles and legends at least this size on the page (the rule of thumb of the figures' issue)."""


def _on_screen(axes, data) -> np.ndarray:
    data = np.asarray(data, dtype=float).reshape(-1, 2)
    return axes.transData.transform(data[np.isfinite(data).all(axis=1)])


def _line_on_screen(line: Line2D) -> np.ndarray:
    """A line's vertices in display coordinates, through its own transform (``axhline``'s x is
    in axes units)."""
    data = np.asarray(line.get_xydata(), dtype=float).reshape(-1, 2)
    return line.get_transform().transform(data[np.isfinite(data).all(axis=1)])


def _along(vertices: np.ndarray, steps: int = 20) -> np.ndarray:
    """The vertices and points every 1/steps of each segment between them."""
    if len(vertices) < 2:
        return vertices
    weights = np.linspace(0, 1, steps, endpoint=False)[None, :, None]
    starts, ends = vertices[:-1, None, :], vertices[1:, None, :]
    return np.concatenate([(starts + weights * (ends - starts)).reshape(-1, 2), vertices[-1:]])


def _data_points_on_screen(axes, steps: int = 20) -> np.ndarray:
    """Markers, and points every 1/steps of each line segment, in display coordinates."""
    points = [_on_screen(axes, c.get_offsets()) for c in axes.collections]
    for line in axes.get_lines():
        points.append(_along(_line_on_screen(line), steps))
    points = [p for p in points if len(p)]
    return np.concatenate(points) if points else np.empty((0, 2))


def rendered_scale(figure: Figure, page_width_px: int = PAGE_WIDTH_PX,
                   dpi: float = SAVED_DPI) -> float:  # fmt: skip
    """Points on the page per point in the figure: the PNG is saved at ``dpi`` with a tight
    bounding box (0.1 inch pad) and shown at 96 CSS px per inch, scaled down to the page width
    when wider."""
    renderer = figure.canvas.get_renderer()
    width_px = (figure.get_tightbbox(renderer).width + 0.2) * dpi
    return dpi / 96 * min(1.0, page_width_px / width_px)


def _tick_labels(axes) -> list[Text]:
    """The tick labels drawn: visible, not empty, at a tick inside the axis's view."""
    labels = []
    for axis, coordinate in ((axes.xaxis, 0), (axes.yaxis, 1)):
        low, high = sorted(axis.get_view_interval())
        slack = 1e-9 * max(abs(low), abs(high), 1e-300)
        for label in axis.get_ticklabels(which="both"):
            position = label.get_position()[coordinate]
            if _shown(label) and low - slack <= position <= high + slack:
                labels.append(label)
    return labels


def _shown(text: Text) -> bool:
    return text.get_visible() and bool(text.get_text().strip())


def _texts(figure: Figure) -> list[tuple[str, Text]]:
    """(role, text) of every text drawn: titles, legends, axis and tick labels, annotations."""
    ticks = {id(t) for axes in figure.axes for axis in (axes.xaxis, axes.yaxis)
             for tick in axis.majorTicks + axis.minorTicks
             for t in (tick.label1, tick.label2)}  # fmt: skip
    found = [("tick label", t) for axes in figure.axes for t in _tick_labels(axes)]
    legends = [*figure.legends, *(a.get_legend() for a in figure.axes if a.get_legend())]
    legend_texts = {id(t) for legend in legends for t in [*legend.texts, legend.get_title()]}
    titles = {id(a.title) for a in figure.axes} | {id(t) for t in _figure_texts(figure)}
    for text in figure.findobj(match=Text):
        if id(text) in ticks or not _shown(text):
            continue
        role = ("legend" if id(text) in legend_texts else "title" if id(text) in titles
                else "text")  # fmt: skip
        found.append((role, text))
    return found


def small_text(figure: Figure, page_width_px: int = PAGE_WIDTH_PX) -> list[str]:
    """Texts smaller than :data:`SMALLEST_TEXT_PT` (titles and legends: :data:`SMALLEST_TITLE_PT`)
    as shown on a page ``page_width_px`` wide."""
    figure.canvas.draw()
    scale = rendered_scale(figure, page_width_px)
    problems = []
    for role, text in _texts(figure):
        smallest = SMALLEST_TITLE_PT if role in ("title", "legend") else SMALLEST_TEXT_PT
        size = text.get_fontsize() * scale
        if size < smallest - 1e-9:
            problems.append(f"{role} {text.get_text()[:30]!r} is {size:.1f} pt on the page "
                            f"(at least {smallest:g})")  # fmt: skip
    return problems


def _figure_texts(figure: Figure) -> list[Text]:
    """Texts placed on the figure itself (suptitle, supxlabel, figure.text), not in a panel."""
    return [text for text in figure.texts if _shown(text)]


def _touch(one, other, pad: float) -> bool:
    return one.padded(pad).overlaps(other) and one.width > 0 and other.width > 0


def overlapping_titles(figure: Figure, pad_px: float = 1.0) -> list[str]:
    """Figure titles touching a panel's title, tick or axis labels; panel titles touching any
    panel's tick or axis labels or another panel's title (``pad_px`` apart at least), or
    covering another panel's frame."""
    figure.canvas.draw()
    renderer = figure.canvas.get_renderer()

    def box(text):
        return text.get_window_extent(renderer)

    labels = [(f"panel {n} {kind}", t) for n, axes in enumerate(figure.axes)
              for kind, t in [*(("tick label", t) for t in _tick_labels(axes)),
                              ("x label", axes.xaxis.label), ("y label", axes.yaxis.label)]
              if _shown(t)]  # fmt: skip
    titles = [(f"panel {n} title", a.title) for n, a in enumerate(figure.axes) if _shown(a.title)]
    problems = []
    for text in _figure_texts(figure):
        for name, other in titles + labels:
            if _touch(box(text), box(other), pad_px):
                problems.append(f"figure text {text.get_text()[:30]!r} touches {name} "
                                f"{other.get_text()[:30]!r}")  # fmt: skip
    for index, (name, title) in enumerate(titles):
        for other_name, other in titles[index + 1 :] + labels:
            if _touch(box(title), box(other), pad_px):
                problems.append(f"{name} {title.get_text()[:30]!r} touches {other_name} "
                                f"{other.get_text()[:30]!r}")  # fmt: skip
    # a title of several lines (a panel's note under it) may reach up into the panel above
    for n, axes in enumerate(figure.axes):
        if not _shown(axes.title):
            continue
        own = axes.get_window_extent(renderer)
        for m, other in enumerate(figure.axes):
            frame = other.get_window_extent(renderer)
            if m != n and other.get_visible() and frame.bounds != own.bounds and \
                    _touch(box(axes.title), frame, 0.0):  # fmt: skip
                problems.append(f"panel {n} title {axes.title.get_text()[:30]!r} covers panel "
                                f"{m}'s frame")  # fmt: skip
    return problems


def _marked(line: Line2D, vertices: np.ndarray) -> np.ndarray:
    """The vertices that carry a marker (``markevery``: None, an int, (start, step) or a slice)."""
    if line.get_marker() in ("None", "", " ", None) or not line.get_markersize():
        return vertices[:0]
    every = line.get_markevery()
    if every is None:
        return vertices
    if isinstance(every, int):
        return vertices[::every]
    if isinstance(every, tuple) and all(isinstance(v, int) for v in every):
        return vertices[every[0] :: every[1]]
    if isinstance(every, slice):
        return vertices[every]
    return vertices


def _distance_to_path(points: np.ndarray, vertices: np.ndarray) -> np.ndarray:
    if len(vertices) == 1:
        return np.linalg.norm(points - vertices[0], axis=1)
    starts, ends = vertices[:-1], vertices[1:]
    along = ends - starts
    length = np.maximum((along**2).sum(axis=1), 1e-12)
    t = np.clip(((points[:, None, :] - starts[None]) * along[None]).sum(axis=2) / length, 0, 1)
    nearest = starts[None] + t[..., None] * along[None]
    return np.linalg.norm(points[:, None, :] - nearest, axis=2).min(axis=1)


_NO_LINE = ("None", "", " ")


def _series(axes) -> list[tuple[str, Line2D]]:
    """The panel's drawn series in drawing order, named by their legend label (an errorbar's
    data line by its container's); error-bar caps left out."""
    names = {id(c.lines[0]): c.get_label() for c in axes.containers if hasattr(c, "has_xerr")}
    series = []
    for index, line in enumerate(axes.get_lines()):
        cap = line.get_marker() in ("_", "|") and line.get_linestyle() in _NO_LINE
        if not line.get_visible() or cap:
            continue
        name = names.get(id(line)) or line.get_label()
        name = f"line {index}" if name.startswith("_") else repr(name)
        series.append((line.get_zorder(), index, name, line))
    return [(name, line) for _, _, name, line in sorted(series, key=lambda s: s[:2])]


class _Shape:
    """A series on screen: its vertices, points along its stroke, its marked vertices, and the
    half-widths of stroke and markers in pixels."""

    def __init__(self, name: str, line: Line2D, px: float) -> None:
        self.name, self.colour = name, to_rgb(line.get_color())
        self.vertices = _line_on_screen(line)
        stroked = line.get_linestyle() not in _NO_LINE and len(self.vertices) > 1
        self.samples = _along(self.vertices) if stroked else self.vertices[:0]
        self.markers = _marked(line, self.vertices)
        self.stroke = line.get_linewidth() * px / 2 if stroked else -np.inf
        self.size = line.get_markersize() * px / 2
        self.linestyle = line.get_linestyle()
        self.opaque = line.get_alpha() is None or line.get_alpha() >= 1

    def covers(self, under: _Shape, tolerance: float) -> bool:
        """Whether every point of ``under``'s stroke and markers lies inside this opaque series'
        stroke (solid, or dashed like ``under``) or its markers."""
        if not self.opaque:  # the series under it shows through
            return False
        stroke = self.stroke if self.linestyle in ("-", under.linestyle) else -np.inf
        for points, half in ((under.samples, under.stroke), (under.markers, under.size)):
            if not len(points):
                continue
            inside = np.zeros(len(points), dtype=bool)
            if len(self.vertices):
                inside |= _distance_to_path(points, self.vertices) + half <= stroke + tolerance
            if len(self.markers):
                nearest = np.linalg.norm(points[:, None, :] - self.markers[None], axis=2).min(1)
                inside |= nearest + half <= self.size + tolerance
            if not inside.all():
                return False
        return bool(len(under.samples) or len(under.markers))


def hidden_series(figure: Figure, tolerance_px: float = 1.0) -> list[str]:
    """Series drawn entirely under a later one of another colour (its whole stroke and its
    markers inside the later series' solid stroke or markers), and series drawn entirely on the
    panel's frame."""
    figure.canvas.draw()
    problems = []
    for number, axes in enumerate(figure.axes):
        shapes = [_Shape(name, line, figure.dpi / 72) for name, line in _series(axes)]
        for index, under in enumerate(shapes):
            for over in shapes[index + 1 :]:
                # its own colour: a part of the same series (a seed's line under the mean)
                if over.colour != under.colour and over.covers(under, tolerance_px):
                    problems.append(f"panel {number}: series {under.name} is hidden under "
                                    f"{over.name}")  # fmt: skip
                    break
        frame = axes.get_window_extent()
        edges = (("bottom", 1, frame.y0), ("top", 1, frame.y1), ("left", 0, frame.x0),
                 ("right", 0, frame.x1))  # fmt: skip
        for shape in shapes:
            for edge, coordinate, value in edges:
                if len(shape.vertices) and np.all(
                    np.abs(shape.vertices[:, coordinate] - value) <= tolerance_px
                ):
                    problems.append(f"panel {number}: series {shape.name} lies on the {edge} "
                                    "frame")  # fmt: skip
    return problems


def layout_problems(figure: Figure, page_width_px: int = PAGE_WIDTH_PX) -> list[str]:
    """Legends that cover a data point, annotations that leave their panel, text too small on
    the report's page (:func:`small_text`), titles touching other text
    (:func:`overlapping_titles`), series hidden under others (:func:`hidden_series`)."""
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
    problems += small_text(figure, page_width_px)
    problems += overlapping_titles(figure)
    problems += hidden_series(figure)
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
