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

from gradlab.errors import GradlabError
from gradlab.extras import require

if TYPE_CHECKING:
    from matplotlib.legend import Legend

plt = require("matplotlib.pyplot", "plot", "gradlab.plotting")
sns = require("seaborn", "plot", "gradlab.plotting")
_ticker = require("matplotlib.ticker", "plot", "gradlab.plotting")
NullFormatter, MaxNLocator = _ticker.NullFormatter, _ticker.MaxNLocator


def style_rc() -> dict:
    """The matplotlib settings of gradlab's look: seaborn's white grid and notebook context,
    the colour-blind palette, a sans-serif font, and figures saved with a tight box.

    Example:
        >>> style_rc()["savefig.bbox"], style_rc()["axes.grid"]
        ('tight', True)
    """
    rc = {**sns.axes_style("whitegrid"), **sns.plotting_context("notebook")}
    rc.update({"axes.prop_cycle": plt.cycler(color=sns.color_palette("colorblind")),
               "font.family": ["sans-serif"], "figure.dpi": 110, "savefig.bbox": "tight",
               "axes.titleweight": "bold"})  # fmt: skip
    return rc


def apply_style() -> None:
    """:func:`style_rc` for the rest of the process (the studies' figures and the report)."""
    plt.rcParams.update(style_rc())


def gradlab_style():
    """:func:`style_rc` inside a ``with`` block only, the caller's settings back after it
    (what the plots of run logs use: a notebook's or a training script's own figures keep
    their look).

    Example:
        >>> before = plt.rcParams["savefig.bbox"]
        >>> with gradlab_style():
        ...     plt.rcParams["savefig.bbox"]
        'tight'
        >>> plt.rcParams["savefig.bbox"] == before
        True
    """
    return plt.rc_context(style_rc())


LINE_STYLES = ("-", "--", "-.", ":", (0, (5, 1)), (0, (3, 1, 1, 1, 1, 1)))
"""Line styles that go with the colour-blind palette, so series differ in two ways."""

MARKERS = ("o", "s", "^", "D", "v", "P")
"""Markers in the same order as :data:`LINE_STYLES`."""


PALETTE_SIZE = 10
"""Colours of seaborn's colour-blind palette that :func:`series_style` cycles through."""


def series_style(index: int) -> dict:
    """Colour, line style and marker of the ``index``-th series of a figure.

    Example:
        >>> series_style(1)["linestyle"], series_style(1)["color"] == series_style(7)["color"]
        ('--', False)
    """
    palette = sns.color_palette("colorblind", PALETTE_SIZE)
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


PLAIN_LOW, PLAIN_HIGH = 1e-3, 1e5
"""A log axis whose labelled ticks all lie in ``[PLAIN_LOW, PLAIN_HIGH)`` (0 aside) labels them
as plain numbers (0.002, 0.3, 4, 50000); one that reaches beyond labels powers of ten."""


class PlainLogFormatter(_ticker.LogFormatterSciNotation):
    """matplotlib's log-axis labels, written as plain numbers where every labelled tick in view
    is between :data:`PLAIN_LOW` and :data:`PLAIN_HIGH`: 0.2, 3, 40 rather than 2×10⁻¹, 3×10⁰,
    4×10¹ (which ticks carry a label stays matplotlib's choice: a minor tick only where few
    decades show). An axis that reaches beyond keeps its powers of ten, all alike.

    Example:
        >>> figure, axis = plt.subplots()
        >>> _ = axis.plot([0, 1], [0.25, 7])
        >>> log_scale(axis)
        >>> figure.canvas.draw()
        >>> [label.get_text() for label in axis.get_yticklabels(minor=True) if label.get_text()]
        ['0.2', '0.3', '0.4', '0.6', '2', '3', '4', '6']
        >>> plt.close(figure)
    """

    def set_locs(self, locs=None) -> None:
        super().set_locs(locs)  # which reads the axis's view: a formatter on an axis
        low, high = sorted(self.axis.get_view_interval())
        shown = [abs(v) for v in ([] if locs is None else locs) if v and low <= v <= high]
        self._plain = all(PLAIN_LOW <= v < PLAIN_HIGH for v in shown)

    def __call__(self, x, pos=None) -> str:
        label = super().__call__(x, pos)
        plain = getattr(self, "_plain", PLAIN_LOW <= abs(x) < PLAIN_HIGH)
        return f"{x:g}" if label and x and plain else label


def log_scale(axis: plt.Axes, which: str = "y", linthresh: float | None = None) -> None:
    """Put ``axis``'s ``which`` axis (``"x"`` or ``"y"``) on a log scale, or on a symmetric
    log scale linear within ``linthresh`` of 0 when given, labelled by
    :class:`PlainLogFormatter`.

    Raises:
        GradlabError: ``which`` is neither ``"x"`` nor ``"y"``.
    """
    if which not in ("x", "y"):
        raise GradlabError(f"which must be 'x' or 'y' (the axis to put on a log scale); got "
                           f"{which!r}")  # fmt: skip
    scaled = axis.yaxis if which == "y" else axis.xaxis
    set_scale = axis.set_yscale if which == "y" else axis.set_xscale
    if linthresh is None:
        set_scale("log")
        scaled.set_minor_formatter(PlainLogFormatter(labelOnlyBase=False))
    else:
        set_scale("symlog", linthresh=linthresh)
    scaled.set_major_formatter(PlainLogFormatter())


DIGIT_WIDTH = 0.64
"""Width of a digit of the tick labels, in em (DejaVu Sans: 0.636)."""
LABEL_GAP = 1.2
"""Room left between two step labels, in em."""


class StepLocator(MaxNLocator):
    """Whole-number ticks, no more than the labels of the view's largest step fit side by side
    on the axis (a long run's five- or six-digit steps need fewer ticks than a short run's);
    at most ``MaxNLocator``'s default of 11.

    Example:
        >>> figure, axis = plt.subplots(figsize=(3, 2))
        >>> _ = axis.plot([0, 480_000], [0, 1])
        >>> axis.xaxis.set_major_locator(StepLocator())
        >>> len(axis.get_xticks()) <= 4
        True
        >>> plt.close(figure)
    """

    def __init__(self) -> None:
        super().__init__(integer=True, min_n_ticks=1)

    def tick_values(self, vmin: float, vmax: float):
        if self.axis is not None:
            digits = len(str(int(max(abs(vmin), abs(vmax))))) + (min(vmin, vmax) < 0)
            size = self.axis.majorTicks[0].label1.get_fontsize()  # no call back into here
            length = self.axis.axes.bbox.width * 72 / self.axis.get_figure(root=True).dpi
            fits = int(length // (size * (DIGIT_WIDTH * digits + LABEL_GAP)))
            # intervals: one fewer than ticks; two ticks at least where two whole steps show
            # (a view 1.5 wide around one whole step asked for two got fractions instead)
            whole_steps = math.floor(max(vmin, vmax)) - math.ceil(min(vmin, vmax)) + 1
            self.set_params(nbins=max(1, min(10, fits - 1)),
                            min_n_ticks=2 if fits >= 2 and whole_steps >= 2 else 1)
        return super().tick_values(vmin, vmax)


def step_axis(axis: plt.Axes) -> None:
    """Tick the x axis of ``axis``, a step axis, at whole numbers only: steps are integers.

    matplotlib's default ticks a run of two steps at 0.0, 0.2, ..., and a plain
    ``MaxNLocator(integer=True)`` falls back to fractions when the view holds one whole number
    (a run of one logged step); ``min_n_ticks=1`` keeps that step's own tick instead. The
    ticks are as many as their labels fit (:class:`StepLocator`): 0 4000 8000 12000 ... runs
    into one string on a narrow panel. The steps are written out in full, never as an offset
    or a power of ten (a run restarted at step 1,000,000 read as steps 0 to 30 beside a small
    "+1e6").

    Example:
        >>> figure, axis = plt.subplots()
        >>> _ = axis.plot([3], [0.5])
        >>> step_axis(axis)
        >>> low, high = axis.get_xlim()
        >>> [float(tick) for tick in axis.get_xticks() if low <= tick <= high]
        [3.0]
        >>> plt.close(figure)
    """
    axis.xaxis.set_major_locator(StepLocator())
    formatter = axis.xaxis.get_major_formatter()
    if isinstance(formatter, _ticker.ScalarFormatter):
        formatter.set_useOffset(False)
        formatter.set_scientific(False)


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


def isolated_points(values) -> list[int]:
    """The indices of the finite values with no finite neighbour: no line segment reaches
    them, so a line without markers there draws nothing of them (one value between NaN steps).

    Example:
        >>> nan = float("nan")
        >>> isolated_points([1.0, nan, 2.0, 3.0, nan]), isolated_points([nan, 5.0])
        ([0], [1])
    """
    count = len(values)
    finite = [math.isfinite(float(value)) for value in values]
    return [index for index in range(count) if finite[index]
            and (index == 0 or not finite[index - 1])
            and (index == count - 1 or not finite[index + 1])]  # fmt: skip


def load_results(source: dict | str | Path) -> dict:
    """Accept the results themselves or the path of their JSON file."""
    if isinstance(source, dict):
        return source
    return json.loads(Path(source).read_text())


def save_figure(figure: plt.Figure, path: str | Path) -> Path:
    """Write ``figure`` as PNG (creating the folder) and close it.

    Raises:
        OSError: the file could not be written; its ``filename`` names ``path`` (a full disk
            reached through matplotlib's writer names no file of its own).
    """
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    try:
        figure.savefig(path)
    except OSError as error:
        if error.filename is None:
            raise OSError(error.errno, error.strerror or str(error), str(path)) from error
        raise
    finally:
        plt.close(figure)
    return path
