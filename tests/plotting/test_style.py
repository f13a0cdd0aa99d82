"""The shared look and I/O of every gradlab figure, read back from matplotlib: the rcParams a
figure is drawn with, where the legend sits, the batch-size axis, which series are stated in
words, and what a saved figure leaves on disk. References are matplotlib's and seaborn's own
objects (another library), never the values gradlab computes."""

from __future__ import annotations

import itertools
import json
import math
import re
from pathlib import Path

import matplotlib.pyplot as plt
import numpy as np
import pytest
import seaborn as sns
from matplotlib.colors import to_hex
from matplotlib.font_manager import FontProperties
from matplotlib.lines import Line2D
from matplotlib.textpath import TextToPath

from gradlab.errors import GradlabError
from gradlab.plotting import apply_style, batch_size_axis, load_results, save_figure
from gradlab.plotting.style import (
    LABEL_GAP,
    LINE_STYLES,
    MARKERS,
    PlainLogFormatter,
    constant_value,
    isolated_points,
    legend_below,
    log_scale,
    series_style,
    step_axis,
)

PNG_MAGIC = b"\x89PNG\r\n\x1a\n"


@pytest.fixture(autouse=True)
def _fresh_style():
    plt.rcdefaults()
    yield
    plt.close("all")
    plt.rcdefaults()


def test_apply_style_sets_the_documented_look():
    apply_style()
    params = plt.rcParams
    assert params["figure.dpi"] == 110
    assert params["savefig.bbox"] == "tight"
    assert params["axes.titleweight"] == "bold"
    # seaborn's white grid: grid on, white face
    assert params["axes.grid"] is True
    assert to_hex(params["axes.facecolor"]) == "#ffffff"
    # the colour-blind palette is the colour cycle, in order
    cycle = [to_hex(c) for c in params["axes.prop_cycle"].by_key()["color"]]
    assert cycle == [to_hex(c) for c in sns.color_palette("colorblind")]
    # notebook context, not paper (0.8x) or talk (1.5x): seaborn's unscaled sizes
    reference = sns.plotting_context("notebook")
    assert params["axes.labelsize"] == reference["axes.labelsize"]
    assert params["font.size"] == reference["font.size"]


def test_a_saved_figure_is_cropped_to_its_content(tmp_path):
    apply_style()
    figure = plt.figure(figsize=(4, 3))
    figure.text(0.5, 0.5, "x", fontsize=8)
    image = plt.imread(save_figure(figure, tmp_path / "f.png"))
    height, width = image.shape[:2]
    # at 110 dpi the full figure is 440 x 330 px; 'tight' keeps the small text only
    assert width < 100 and height < 100


def test_series_styles_cycle_through_ten_colours_and_six_dash_marker_pairs():
    palette = [to_hex(c) for c in sns.color_palette("colorblind", 10)]
    styles = [series_style(i) for i in range(30)]
    assert [to_hex(s["color"]) for s in styles] == [palette[i % 10] for i in range(30)]
    first_six = [(str(s["linestyle"]), s["marker"]) for s in styles[:6]]
    assert len({ls for ls, _ in first_six}) == 6 and len({m for _, m in first_six}) == 6
    for i in range(6, 30):
        assert styles[i]["linestyle"] == styles[i - 6]["linestyle"]
        assert styles[i]["marker"] == styles[i - 6]["marker"]
    assert styles[0]["linestyle"] == "-"  # the first series is solid
    # every style is one matplotlib draws, and draws differently from the others
    dashes = set()
    for style in styles[:6]:
        line = Line2D([0, 1], [0, 1], linestyle=style["linestyle"], marker=style["marker"])
        dashes.add((line.get_linestyle(), str(line._dash_pattern)))
    assert len(dashes) == 6
    assert len(LINE_STYLES) == len(MARKERS) == 6


def test_the_legend_sits_centred_under_the_axes_without_a_frame():
    figure, axis = plt.subplots(figsize=(6, 4))
    for i in range(4):
        axis.plot([0, 1], [i, i + 1], label=f"series {i}")
    legend_below(axis, columns=2, fontsize=7)
    figure.canvas.draw()
    legend = axis.get_legend()
    renderer = figure.canvas.get_renderer()
    box = legend.get_window_extent(renderer)
    axes_box = axis.get_window_extent(renderer)
    ticks = [t.get_window_extent(renderer) for t in axis.get_xticklabels() if t.get_text()]
    assert box.y1 < min(t.y0 for t in ticks)  # below the axes and its tick labels
    assert box.y1 > axes_box.y0 - 0.3 * axes_box.height  # yet close under them
    assert abs((box.x0 + box.x1) / 2 - (axes_box.x0 + axes_box.x1) / 2) < 2
    assert not legend.get_frame_on()
    texts = legend.get_texts()
    assert [t.get_text() for t in texts] == [f"series {i}" for i in range(4)]
    assert {t.get_fontsize() for t in texts} == {7}
    columns = {round(t.get_window_extent(renderer).x0) for t in texts}
    rows = {round(t.get_window_extent(renderer).y0) for t in texts}
    assert len(columns) == 2 and len(rows) == 2


def test_the_default_legend_has_two_columns():
    figure, axis = plt.subplots()
    for i in range(4):
        axis.plot([0, 1], [i, i], label=str(i))
    legend_below(axis)
    figure.canvas.draw()
    renderer = figure.canvas.get_renderer()
    columns = {round(t.get_window_extent(renderer).x0) for t in axis.get_legend().get_texts()}
    assert len(columns) == 2


def test_the_batch_size_axis_is_logarithmic_and_ticked_at_the_sizes():
    figure, axis = plt.subplots()
    sizes = [8, 32, 128, 512]
    axis.plot(sizes, [1, 2, 3, 4])
    batch_size_axis(axis, sizes)
    figure.canvas.draw()
    assert axis.get_xscale() == "log"
    assert list(axis.get_xticks()) == sizes
    assert [t.get_text() for t in axis.get_xticklabels()] == ["8", "32", "128", "512"]
    minor = [t.get_text() for t in axis.get_xticklabels(minor=True)]
    assert minor and all(text == "" for text in minor)


@pytest.mark.parametrize(
    ("values", "expected"),
    [
        ([], None),
        ([math.nan, math.inf], None),
        ([5], 5.0),
        ([2, 2.0, math.nan, -math.inf, 2], 2.0),
        ([0, 1e-9], None),
        ([1, 1, 2], None),
        ([3, 4, 3], None),
        (["text", None, 7, 7.0], 7.0),
        ([np.float64(0.25), 0.25], 0.25),
    ],
)
def test_a_series_that_never_moves_is_recognised(values, expected):
    got = constant_value(values)
    assert got == expected and (got is None) == (expected is None)
    if got is not None:
        assert type(got) is float


def test_results_come_from_a_dict_or_a_json_file(tmp_path):
    results = {"runs": [1, 2], "name": "x"}
    assert load_results(results) is results
    path = tmp_path / "r.json"
    path.write_text(json.dumps(results))
    assert load_results(path) == results
    assert load_results(str(path)) == results


def test_save_figure_writes_a_png_in_a_new_folder_and_closes_the_figure(tmp_path):
    figure, axis = plt.subplots()
    axis.plot([0, 1], [0, 1])
    target = tmp_path / "deep" / "er" / "fig.png"
    written = save_figure(figure, str(target))
    assert isinstance(written, Path) and written == target
    assert target.read_bytes()[:8] == PNG_MAGIC
    assert not plt.fignum_exists(figure.number)
    # a second figure into the same, now existing, folder, while a third is the current one:
    # the saved figure is the one closed
    again = plt.figure()
    current = plt.figure()
    assert save_figure(again, target.with_name("two.png")).read_bytes()[:8] == PNG_MAGIC
    assert not plt.fignum_exists(again.number) and plt.fignum_exists(current.number)


def _step_ticks(width: float, view: tuple[float, float], *, margins: bool = True):
    """The ticks inside the view of a step axis ``width`` inches wide showing ``view`` (with
    matplotlib's margins around it, or exactly), and the gaps between their drawn labels in
    em (the labels' own rendered boxes: no width gradlab assumes)."""
    apply_style()
    figure, axis = plt.subplots(figsize=(width, 3.0))
    axis.plot(view, [0.0, 1.0])
    if not margins:
        axis.set_xlim(*view)
    step_axis(axis)
    figure.canvas.draw()
    low, high = axis.get_xlim()
    shown = sorted((label.get_window_extent() for label in axis.get_xticklabels()
                    if label.get_text() and low <= label.get_position()[0] <= high),
                   key=lambda box: box.x0)  # fmt: skip
    em = axis.get_xticklabels()[0].get_fontsize() * figure.dpi / 72
    gaps = [(right.x0 - left.x1) / em for left, right in itertools.pairwise(shown)]
    ticks = [float(t) for t in axis.get_xticks() if low <= t <= high]
    plt.close(figure)
    return ticks, gaps


@pytest.mark.parametrize("width", [3.0, 5.2, 8.0])
@pytest.mark.parametrize("last", [1, 30, 3_000, 30_000, 480_000, 2_000_000, -30_000, -480_000])
def test_step_labels_never_run_into_each_other(width, last):
    # a long run's steps have five or six digits: as many ticks as a short run's collide on
    # a narrow overview panel (0 4000 8000 1200016000...); a negative view's labels carry a
    # minus sign more
    ticks, gaps = _step_ticks(width, (0, last))
    assert len(ticks) >= 2 or last == 1
    assert all(gap >= 0.5 for gap in gaps), (ticks, gaps)  # half an em at least
    assert all(tick.is_integer() for tick in ticks)


@pytest.mark.parametrize(("width", "view", "expected"), [
    (3.0, (-0.75, 0.75), [0.0]),  # one whole step in a view 1.5 wide: its tick alone
    (2.0, (2.2, 3.9), [3.0]),
    (1.0, (0.0, 1.5), [0.0, 1.0]),  # two whole steps: both, even on a narrow panel
    (0.8, (0.0, 1.5), [0.0, 1.0]),
    (0.8, (0.0, 1.0), [0.0, 1.0]),
    (3.0, (-1.0, 0.0), [-1.0, 0.0]),
])  # fmt: skip
def test_a_view_is_ticked_at_whole_steps_and_at_two_where_two_show(width, view, expected):
    """A view of one whole step once got fractions (-0.6, -0.3, 0, 0.3, 0.6): asked for two
    ticks where only one whole number shows, matplotlib's integer locator gives up on
    integers."""
    assert _step_ticks(width, view, margins=False)[0] == expected


@pytest.mark.parametrize("last", [-30, -30_000])
@pytest.mark.parametrize("width", [0.8, 1.0, 4.0])
def test_labels_of_a_view_that_ends_at_its_steps_never_run_into_each_other(width, last):
    # no margins: the view's ends are steps themselves (a narrow panel, negative steps)
    _, gaps = _step_ticks(width, (last, 0), margins=False)
    assert all(gap >= 0.5 for gap in gaps), gaps


def _ticks_where_labels_fit(slots: float, last: int) -> list[float]:
    """The ticks of steps 0..``last`` (a one-digit ``last``) on an axes whose width holds
    ``slots`` labels of ``last`` each with ``LABEL_GAP`` em of room after it: the label's
    width is its text's advance in the tick font (matplotlib's text layout, unrounded)."""
    apply_style()
    size = plt.rcParams["xtick.labelsize"]
    size = size if isinstance(size, (int, float)) else plt.rcParams["font.size"]
    label, _, _ = TextToPath().get_text_width_height_descent(
        str(last), FontProperties(size=size), ismath=False)  # points
    figure = plt.figure(figsize=(slots * (label + LABEL_GAP * size) / 72, 2.0))
    axis = figure.add_axes((0.0, 0.2, 1.0, 0.7))  # the figure's whole width
    axis.plot([0, last], [0.0, 1.0])
    axis.set_xlim(0, last)
    step_axis(axis)
    figure.canvas.draw()
    ticks = [float(t) for t in axis.get_xticks() if 0 <= t <= last]
    plt.close(figure)
    return ticks


def test_as_many_ticks_as_labels_fit_and_no_more():
    """Room for five and a half one-digit labels: steps 0..4 get a tick each; room for
    just under six: steps 0..5 do not all get one (six labels would not fit)."""
    assert _ticks_where_labels_fit(5.5, 4) == [0.0, 1.0, 2.0, 3.0, 4.0]
    assert len(_ticks_where_labels_fit(5.96, 5)) <= 5


def test_a_wide_panel_of_a_short_run_has_at_most_eleven_ticks():
    ticks, _ = _step_ticks(20.0, (0, 11), margins=False)  # room for dozens of labels
    assert 2 <= len(ticks) <= 11 and all(tick.is_integer() for tick in ticks)


@pytest.mark.parametrize("strerror", ["No space left on device", None])
def test_a_nameless_write_error_is_named_by_the_figure(tmp_path, monkeypatch, strerror):
    # matplotlib's PNG writer raises an OSError that names no file (a full disk)
    import errno

    from matplotlib.figure import Figure

    from gradlab.plotting.style import save_figure

    raised = OSError(errno.ENOSPC, strerror) if strerror else OSError("disk full")

    def full(self, *args, **kwargs):
        raise raised

    monkeypatch.setattr(Figure, "savefig", full)
    figure = plt.figure()
    with pytest.raises(OSError) as caught:
        save_figure(figure, tmp_path / "loss.png")
    error = caught.value
    assert (error.errno, error.strerror, error.filename) == (
        raised.errno, strerror or "disk full", str(tmp_path / "loss.png"))
    assert error.__cause__ is raised
    assert not plt.fignum_exists(figure.number)  # closed all the same


def test_a_named_write_error_is_raised_as_it_is(tmp_path, monkeypatch):
    from matplotlib.figure import Figure

    from gradlab.plotting.style import save_figure

    raised = PermissionError(13, "Permission denied", "/elsewhere/loss.png")

    def refused(self, *args, **kwargs):
        raise raised

    monkeypatch.setattr(Figure, "savefig", refused)
    with pytest.raises(PermissionError) as caught:
        save_figure(plt.figure(), tmp_path / "loss.png")
    assert caught.value is raised


def test_the_look_is_set_inside_the_block_only():
    # the documented look: seaborn's white grid, a sans-serif font, a tight box when saved
    from gradlab.plotting.style import gradlab_style

    with plt.rc_context({"axes.grid": False, "savefig.bbox": None, "font.family": ["serif"]}):
        with gradlab_style():
            inside = (plt.rcParams["axes.grid"], plt.rcParams["savefig.bbox"],
                      plt.rcParams["font.family"])  # fmt: skip
        after = (plt.rcParams["axes.grid"], plt.rcParams["savefig.bbox"],
                 plt.rcParams["font.family"])  # fmt: skip
    assert inside == (True, "tight", ["sans-serif"])
    assert after == (False, None, ["serif"])


def _labels(axis, which="y") -> list[str]:
    axis.figure.canvas.draw()
    scaled = axis.yaxis if which == "y" else axis.xaxis
    ticks = [*scaled.get_ticklabels(), *scaled.get_ticklabels(minor=True)]
    low, high = sorted(scaled.get_view_interval())
    return [t.get_text() for t in ticks if t.get_text() and low <= t.get_position()[which == "y"]
            <= high]  # fmt: skip


@pytest.mark.parametrize(("values", "expected"), [
    ([0.25, 7], {"0.3", "1", "2", "6"}),
    ([1.5, 40], {"2", "10", "30"}),
    ([0.002, 0.009], {"0.002", "0.004"}),
])  # fmt: skip
def test_a_log_axis_within_plain_numbers_labels_them_plainly(values, expected):
    # matplotlib labelled a log axis of a few decades 2×10⁻¹, 3×10⁰, 4×10¹ ...
    figure, axis = plt.subplots()
    axis.plot([0, 1], values)
    log_scale(axis)
    labels = _labels(axis)
    assert all(float(label) > 0 for label in labels) and expected <= set(labels), labels
    plt.close(figure)


@pytest.mark.parametrize("values", [[1e-6, 0.5], [3.0, 2e6]])
def test_a_log_axis_reaching_beyond_plain_numbers_labels_every_tick_as_a_power(values):
    figure, axis = plt.subplots()
    axis.plot([0, 1], values)
    log_scale(axis)
    labels = _labels(axis)
    assert labels and all(label.startswith("$") and "10^" in label for label in labels), labels
    plt.close(figure)


@pytest.mark.parametrize("which", ["X", "", None, "xy"])
def test_an_axis_that_is_neither_x_nor_y_is_refused_by_name(which):
    # was: anything but "y" put the x axis on a log scale
    figure, axis = plt.subplots()
    with pytest.raises(GradlabError, match=rf"^which must be 'x' or 'y' \(the axis to put on a "
                                           rf"log scale\); got {re.escape(repr(which))}$"):
        log_scale(axis, which)
    assert (axis.get_xscale(), axis.get_yscale()) == ("linear", "linear")  # left as it was
    plt.close(figure)


def test_a_symmetric_log_axis_labels_zero_and_plain_decades_on_the_x_axis_too():
    figure, axis = plt.subplots()
    axis.plot([0, 0.01, 5], [1, 2, 3])
    log_scale(axis, "x", linthresh=0.01)
    assert axis.get_xscale() == "symlog"
    labels = _labels(axis, "x")
    assert {"0.01", "0.1", "1"} <= set(labels) and "$\\mathdefault{0}$" in labels, labels
    plt.close(figure)


NAN, INF = float("nan"), float("inf")


@pytest.mark.parametrize(("values", "expected"), [
    ([], []),
    ([4.0], [0]),  # one value: no segment at all
    ([1.0, 2.0], []),
    ([1.0, NAN, 2.0, 3.0, NAN], [0]),
    ([NAN, 5.0], [1]),
    ([NAN, 1.0, NAN, 2.0, 3.0, NAN, 4.0], [1, 6]),
    ([1.0, INF, 2.0], [0, 2]),  # an infinity is no neighbour a segment can reach
    ([NAN, NAN], []),
    ([1, NAN, 2], [0, 2]),  # whole numbers too (a count)
])  # fmt: skip
def test_isolated_points_are_the_finite_values_without_a_finite_neighbour(values, expected):
    # a brute force: a segment joins two finite neighbours; a value on none is isolated
    joined = set()
    for left in range(len(values) - 1):
        if math.isfinite(values[left]) and math.isfinite(values[left + 1]):
            joined |= {left, left + 1}
    alone = [i for i, v in enumerate(values) if math.isfinite(v) and i not in joined]
    assert isolated_points(values) == alone == expected


@pytest.mark.parametrize(("view", "plain"), [
    ((1e-3, 1.0), True),  # a tick at 0.001, the first plain number, on the view's edge
    ((1e-4, 1.0), False),  # 0.0001, on the edge, is shown: every label a power of ten
    ((1.0, 1e4), True),
    ((1.0, 1e5), False),  # 100000 is not plain, on the edge too
])  # fmt: skip
def test_a_tick_on_the_edge_of_the_view_decides_like_any_shown_tick(view, plain):
    figure, axis = plt.subplots()
    axis.plot([0, 1], view)
    log_scale(axis)
    axis.set_ylim(*view)
    labels = [label for label in _labels(axis) if label]
    written_plain = [not label.startswith("$") for label in labels]
    assert labels and written_plain == [plain] * len(labels), labels
    plt.close(figure)


def test_the_formatter_without_ticks_yet_labels_by_the_value_alone():
    # matplotlib gives it the ticks first (set_locs); a label asked before, or set_locs()
    # without ticks, decides by the value itself
    formatter = PlainLogFormatter()
    assert [formatter(x) for x in (1e-3, 0.5, 99999.0)] == ["0.001", "0.5", "99999"]
    assert all(formatter(x).startswith("$") for x in (1e-4, 1e5))
    figure, axis = plt.subplots()
    axis.set_yscale("log")
    axis.yaxis.set_major_formatter(formatter)
    formatter.set_locs()
    assert formatter(10.0) == "10" and formatter(1e-4) == "0.0001"  # no tick shown: plain
    plt.close(figure)
