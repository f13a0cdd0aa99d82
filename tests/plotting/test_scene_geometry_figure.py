"""The digit scenes' geometry figure on a hand-written result (no training): a panel per
quantity, a line per encoder and loss under its label (colour by loss, dashes by encoder), the
mean over seeds with a +- std band computed by hand, axes from 0 where the title says so. The
drawn Axes are read back; expected values are hand-computed from the inputs."""

from __future__ import annotations

import math

import matplotlib
import matplotlib.pyplot as plt
import numpy as np
import pytest
from matplotlib.colors import to_rgba

import gradlab.plotting.scene_geometry as module
from tests.helpers.figure_layout import captured_figures

NAN = float("nan")
KEYS = ("alignment", "uniformity_images", "uniformity_captions", "rank_share_images",
        "rank_share_captions", "modality_gap")  # fmt: skip


def _result():
    """Two encoders x two losses, two seeds, three steps; every series is ``offset`` plus
    seeds [0.5, 0.4, 0.2] and [0.3, NaN, 0.4]: means [0.4, 0.4, 0.3], stds [0.1, 0, 0.1]."""
    runs = {}
    for e, encoder in enumerate(("VSE++", "VSRN")):
        runs[encoder] = {}
        for index, loss in enumerate(("SmoothAP", "NT-Xent")):
            offset = -1.0 + e + 2 * index  # below 0 for the first series
            geometry = {
                key: [[offset + 0.5 + k, offset + 0.4 + k, offset + 0.2 + k],
                      [offset + 0.3 + k, NAN, offset + 0.4 + k]]
                for k, key in enumerate(KEYS)
            }  # fmt: skip
            runs[encoder][loss] = {"anatomy": {"steps": [0, 10, 20]}, "geometry": geometry}
    return {"seeds": [0, 1], "runs": runs}


@pytest.fixture
def figure(monkeypatch, tmp_path):
    # a user's larger default text (a notebook's style) leaves the figure's own sizes alone
    with (
        captured_figures(monkeypatch, module) as figures,
        matplotlib.rc_context({"font.size": 13, "legend.fontsize": 13, "axes.titlesize": 13}),
    ):
        assert module.plot_scene_geometry(_result(), tmp_path / "g.png") == tmp_path / "g.png"
    (drawn,) = figures
    yield drawn
    plt.close("all")


SERIES = [("VSE++", "SmoothAP", 0, 0), ("VSE++", "NT-Xent", 0, 1), ("VSRN", "SmoothAP", 1, 0),
          ("VSRN", "NT-Xent", 1, 1)]  # fmt: skip


@pytest.mark.slow
def test_each_quantity_has_a_panel_with_a_line_per_encoder_and_loss(figure):
    assert [axis.get_title() for axis in figure.axes] == [
        title for title, _ in module.GEOMETRY_PANELS.values()
    ]
    assert {axis.title.get_fontsize() for axis in figure.axes} == {10}
    for k, axis in enumerate(figure.axes):
        lines = axis.get_lines()
        assert [line.get_label() for line in lines] == [
            f"{enc}, {loss}" for enc, loss, _, _ in SERIES
        ]
        for line, (_, _, e, index) in zip(lines, SERIES, strict=True):
            offset = -1.0 + e + 2 * index + k
            assert list(line.get_xdata()) == [0, 10, 20]
            assert list(line.get_ydata()) == pytest.approx([offset + 0.4, offset + 0.4,
                                                            offset + 0.3])  # fmt: skip
            assert line.get_linestyle() == ("-" if e == 0 else "--")
            assert to_rgba(line.get_color()) == to_rgba(("tab:blue", "tab:orange")[index])


@pytest.mark.slow
def test_each_line_has_a_band_of_one_standard_deviation_over_seeds(figure):
    for k, axis in enumerate(figure.axes):
        assert len(axis.collections) == 4
        for band, (_, _, e, index) in zip(axis.collections, SERIES, strict=True):
            offset = -1.0 + e + 2 * index + k
            mean = [offset + 0.4, offset + 0.4, offset + 0.3]
            std = [0.1, 0.0, 0.1]  # population std of two seeds, the NaN left out
            vertices = band.get_paths()[0].vertices
            top = {(x, round(y, 9)) for x, y in vertices}
            for x, m, s in zip((0, 10, 20), mean, std, strict=True):
                assert (x, round(m + s, 9)) in top and (x, round(m - s, 9)) in top
            assert (
                to_rgba(band.get_facecolor()[0])[:3]
                == to_rgba(("tab:blue", "tab:orange")[index])[:3]
            )
            assert band.get_alpha() == 0.15


@pytest.mark.slow
def test_rank_shares_and_the_gap_start_at_zero_and_the_others_follow_the_data(figure):
    for axis, (_, zero_based) in zip(figure.axes, module.GEOMETRY_PANELS.values(), strict=True):
        low, _ = axis.get_ylim()
        if zero_based:
            assert low == 0
        else:  # the first panel's lowest band reaches -0.7
            assert low < 0 or axis is not figure.axes[0]
    assert figure.axes[0].get_ylim()[0] < -0.7
    for axis in figure.axes:
        assert all(math.isclose(g.get_alpha(), 0.3) for g in axis.get_ygridlines())
        assert all(g.get_visible() for g in axis.get_ygridlines())


@pytest.mark.slow
def test_the_bottom_row_names_the_step_and_the_legend_names_every_line(figure):
    assert [axis.get_xlabel() for axis in figure.axes] == [""] * 3 + ["training step"] * 3
    assert figure.axes[0].get_shared_x_axes().joined(figure.axes[0], figure.axes[5])
    (legend,) = figure.legends
    assert [t.get_text() for t in legend.get_texts()] == [
        f"{enc}, {loss}" for enc, loss, _, _ in SERIES
    ]
    assert {t.get_fontsize() for t in legend.get_texts()} == {10}
    assert [h.get_linestyle() for h in legend.legend_handles] == ["-", "-", "--", "--"]
    assert legend._ncols == 3
    box = legend.get_window_extent(figure.canvas.get_renderer())
    assert box.y1 <= min(axis.get_window_extent().y0 for axis in figure.axes[3:])
    centre = (box.x0 + box.x1) / 2
    assert centre == pytest.approx(figure.bbox.width / 2, abs=2)
    title = figure._suptitle
    assert title.get_text() == (
        "Embedding geometry over training, each batch's images and captions (band: ± std over "
        "2 seeds; solid VSE++, dashed VSRN)"
    )
    assert title.get_fontsize() == 10
    assert figure.get_size_inches() == pytest.approx((13, 7.5))


@pytest.mark.slow
def test_a_single_seed_has_no_band_width():
    result = _result()
    for encoder in result["runs"].values():
        for run in encoder.values():
            run["geometry"] = {key: values[:1] for key, values in run["geometry"].items()}
    result["seeds"] = [0]
    figures = []
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(module, "save_figure", lambda figure, path: figures.append(figure) or path)
        module.plot_scene_geometry(result, "g.png")
    (figure,) = figures
    band = figure.axes[0].collections[0]
    assert np.ptp(band.get_paths()[0].vertices[:, 1]) == pytest.approx(0.3)  # 0.5 - 0.2 of the mean
    assert "over 1 seeds" in figure._suptitle.get_text()
    plt.close(figure)


@pytest.mark.slow
def test_five_losses_wrap_the_four_colours_and_a_third_encoder_is_solid_again(monkeypatch):
    losses = ("L0", "L1", "L2", "L3", "L4")
    run = {"anatomy": {"steps": [0, 1]}, "geometry": {key: [[0.2, 0.3]] for key in KEYS}}
    result = {"seeds": [0], "runs": {enc: dict.fromkeys(losses, run) for enc in "ABC"}}
    with captured_figures(monkeypatch, module) as figures:
        module.plot_scene_geometry(result, "g.png")
    (figure,) = figures
    lines = figure.axes[0].get_lines()
    assert [line.get_label() for line in lines] == [
        f"{e}, {loss}" for e in "ABC" for loss in losses
    ]
    colours = ["tab:blue", "tab:orange", "tab:green", "tab:purple", "tab:blue"]
    assert [to_rgba(line.get_color()) for line in lines] == [to_rgba(c) for c in colours] * 3
    assert [line.get_linestyle() for line in lines] == ["-"] * 5 + ["--"] * 5 + ["-"] * 5
    plt.close(figure)


def test_two_logged_steps_are_ticked_at_the_two_steps_only(monkeypatch):
    # matplotlib's default ticked 0.0, 0.2, ..., 1.0 on a step axis
    run = {"anatomy": {"steps": [0, 1]}, "geometry": {key: [[0.2, 0.3]] for key in KEYS}}
    result = {"seeds": [0], "runs": {"VSE++": {"NT-Xent": run}}}
    with captured_figures(monkeypatch, module) as figures:
        module.plot_scene_geometry(result, "g.png")
    (figure,) = figures
    for axis in figure.axes:
        low, high = axis.get_xlim()
        assert [float(t) for t in axis.get_xticks() if low <= t <= high] == [0.0, 1.0]
    plt.close(figure)


@pytest.mark.slow
def test_the_legend_hangs_just_below_the_figure(figure):
    (legend,) = figure.legends
    figure.canvas.draw()
    box = legend.get_window_extent(figure.canvas.get_renderer())
    pad = legend.borderaxespad * 10 * figure.dpi / 72  # the legend's pad at 10 pt, in pixels
    assert box.y0 - pad == pytest.approx(-0.06 * figure.bbox.height, abs=1)
