"""One look for every gradlab figure, and the small I/O every plotting function shares.

Plotting needs the ``plot`` extra (matplotlib and seaborn): importing :mod:`gradlab.plotting`
without it raises a :class:`~gradlab.GradlabError` that names ``pip install
'gradlab-ranking[plot]'``. Importing it selects no matplotlib backend (a notebook keeps its
own); the ``gradlab`` command picks Agg for itself unless ``MPLBACKEND`` is set.
"""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import TYPE_CHECKING

from gradlab.extras import require

if TYPE_CHECKING:
    from matplotlib.legend import Legend

plt = require("matplotlib.pyplot", "plot", "gradlab.plotting")
sns = require("seaborn", "plot", "gradlab.plotting")
_ticker = require("matplotlib.ticker", "plot", "gradlab.plotting")
NullFormatter, MaxNLocator = _ticker.NullFormatter, _ticker.MaxNLocator


def apply_style() -> None:
    """Seaborn's white grid, colour-blind palette, and a readable font size."""
    sns.set_theme(style="whitegrid", context="notebook", palette="colorblind")
    plt.rcParams.update({"figure.dpi": 110, "savefig.bbox": "tight", "axes.titleweight": "bold"})


LINE_STYLES = ("-", "--", "-.", ":", (0, (5, 1)), (0, (3, 1, 1, 1, 1, 1)))
"""Line styles that go with the colour-blind palette, so series differ in two ways."""

MARKERS = ("o", "s", "^", "D", "v", "P")
"""Markers in the same order as :data:`LINE_STYLES`."""


def series_style(index: int) -> dict:
    """Colour, line style and marker of the ``index``-th series of a figure.

    Example:
        >>> series_style(1)["linestyle"], series_style(1)["color"] == series_style(7)["color"]
        ('--', False)
    """
    palette = sns.color_palette("colorblind", 10)
    return {
        "color": palette[index % len(palette)],
        "linestyle": LINE_STYLES[index % len(LINE_STYLES)],
        "marker": MARKERS[index % len(MARKERS)],
    }


def legend_below(axis: plt.Axes, columns: int = 2, **options) -> Legend:
    """The legend under the axes, outside the data, in ``columns`` columns (returned)."""
    return axis.legend(loc="upper center", bbox_to_anchor=(0.5, -0.16), ncol=columns, frameon=False,
                **options)  # fmt: skip


def batch_size_axis(axis: plt.Axes, sizes: list[int]) -> None:
    """A log-scaled x axis ticked exactly at the batch sizes, without minor labels."""
    axis.set_xscale("log")
    axis.set_xticks(sizes, [str(size) for size in sizes])
    axis.xaxis.set_minor_formatter(NullFormatter())


def step_axis(axis: plt.Axes) -> None:
    """Tick the x axis of ``axis``, a step axis, at whole numbers only: steps are integers.

    matplotlib's default ticks a run of two steps at 0.0, 0.2, ..., and a plain
    ``MaxNLocator(integer=True)`` falls back to fractions when the view holds one whole number
    (a run of one logged step); ``min_n_ticks=1`` keeps that step's own tick instead.

    Example:
        >>> figure, axis = plt.subplots()
        >>> _ = axis.plot([3], [0.5])
        >>> step_axis(axis)
        >>> low, high = axis.get_xlim()
        >>> [float(tick) for tick in axis.get_xticks() if low <= tick <= high]
        [3.0]
        >>> plt.close(figure)
    """
    axis.xaxis.set_major_locator(MaxNLocator(integer=True, min_n_ticks=1))


def constant_value(values) -> float | None:
    """The value every finite entry of ``values`` shares, or None when they differ (or none is
    finite). A series that never moves is stated in words, not drawn as a full-size flat line.

    Example:
        >>> constant_value([0, 0.0, float("nan"), 0]), constant_value([0, 1e-9])
        (0.0, None)
    """
    finite = [float(v) for v in values if isinstance(v, (int, float)) and math.isfinite(v)]
    if not finite or any(v != finite[0] for v in finite):
        return None
    return finite[0]


def load_results(source: dict | str | Path) -> dict:
    """Accept the results themselves or the path of their JSON file."""
    if isinstance(source, dict):
        return source
    return json.loads(Path(source).read_text())


def save_figure(figure: plt.Figure, path: str | Path) -> Path:
    """Write ``figure`` as PNG (creating the folder) and close it."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    figure.savefig(path)
    plt.close(figure)
    return path
