"""The studies' figures as a reader sees them: proportions that coincide named instead of drawn
on top of each other, losses that never move named with their value, layouts that pass the
checks of tests/helpers/figure_layout.py."""

from __future__ import annotations

import json
import math
import warnings
from pathlib import Path

import matplotlib.pyplot as plt
import numpy as np
import pytest

import gradlab.plotting.studies as module
from tests.helpers.figure_layout import hidden_series, layout_problems

NAN = float("nan")


@pytest.fixture
def figures(monkeypatch):
    kept = []
    monkeypatch.setattr(module, "save_figure", lambda figure, path: kept.append(figure) or path)
    yield kept
    plt.close("all")


def _p_result() -> dict:
    """Three seeds, three batch sizes: untrained, every proportion 1; trained, three apart."""
    rng = np.random.default_rng(0)
    ones = np.ones((3, 3)).tolist()

    def apart(centre):
        return (centre + 0.05 * rng.random((3, 3))).tolist()

    return {"batch_sizes": [16, 64, 256], "seeds": [0, 1, 2], "settings": {
        "fixed_untrained": {"P": ones, "P_positive_negative": ones, "P_negative_negative": ones},
        "fixed_trained": {"P": apart(0.3), "P_positive_negative": apart(0.5),
                          "P_negative_negative": apart(0.1)}}}  # fmt: skip


@pytest.mark.slow
def test_p_against_m_names_proportions_equal_to_p_instead_of_hiding_them(figures):
    result = _p_result()
    module.plot_p_vs_batch_size(result, "p.png")
    (figure,) = figures
    untrained, trained = figure.axes
    assert layout_problems(figure) == []
    assert [c.get_label() for c in untrained.containers] == [module.PROPORTIONS["P"][0]]
    (note,) = [t.get_text().replace("\n", " ") for t in untrained.texts]
    assert "positive-negative pairs and negative-negative pairs" in note and "same as P" in note
    assert len(trained.containers) == 3 and not trained.texts
    labels = [t.get_text() for t in figure.legends[0].texts]
    assert labels == [label for label, _, _ in module.PROPORTIONS.values()]


def test_the_old_p_panel_drew_two_proportions_under_the_third():
    """The mutant: every proportion drawn, as before; the hidden-series check rejects it."""
    figure, axis = plt.subplots()
    for label, colour, marker in module.PROPORTIONS.values():
        axis.errorbar([16, 64, 256], [1, 1, 1], yerr=[0, 0, 0], color=colour, marker=marker,
                      ms=4, capsize=3, label=label)  # fmt: skip
    assert len(hidden_series(figure)) == 2


def _scenes(zero_losses: tuple[str, ...], steps: tuple[int, ...] = (0, 5, 10, 15)) -> dict:
    """Two encoders x three losses, four logged steps; ``zero_losses`` never leave a query
    without gradient, the others do at some steps."""
    rng = np.random.default_rng(1)
    losses = ("SmoothAP", "VSE++ max-violation", "NT-Xent")
    shape = (2, len(steps))  # seeds x steps
    runs = {}
    for encoder in ("VSE++", "VSRN"):
        runs[encoder] = {}
        for loss in losses:
            anatomy = {"steps": list(steps)}
            for direction in ("i2t", "t2i"):
                anatomy[direction] = {
                    "active_negatives": (1 + 10 * rng.random(shape)).tolist(),
                    "share_without_gradient": (np.zeros(shape) if loss in zero_losses
                                               else 0.1 * rng.random(shape)).tolist(),
                    "hardest_10pct_share": rng.random(shape).tolist(),
                }  # fmt: skip
            runs[encoder][loss] = {"anatomy": anatomy}
    return {"seeds": [0, 1], "runs": runs}


@pytest.mark.slow
def test_scene_anatomy_names_losses_that_stay_at_zero_instead_of_stacking_their_lines(figures):
    module.plot_scene_anatomy(_scenes(("VSE++ max-violation", "NT-Xent")), "a.png")
    (figure,) = figures
    assert layout_problems(figure) == []
    panel = figure.axes[2]  # queries without gradient, image -> caption
    assert {line.get_label() for line in panel.get_lines()} == {"VSE++, SmoothAP",
                                                                "VSRN, SmoothAP"}  # fmt: skip
    title, note = panel.get_title().split("\n", 1)
    assert title == "queries without gradient (image -> caption)"
    note = note.replace("\n", " ")
    assert note.startswith("0 at every step:")
    assert "VSE++ max-violation (both encoders)" in note and "NT-Xent (both encoders)" in note
    assert len(figure.axes[0].get_lines()) == 6  # nothing coincides there: every line drawn
    assert "\n" not in figure.axes[0].get_title()  # and nothing to note
    # a note on a panel with lines sits under its title, outside the axes: inside, it covered
    # the lines that ran under it
    assert not panel.texts


@pytest.mark.slow  # seconds of drawing
def test_scene_anatomy_notes_a_panel_without_lines_in_its_middle(figures):
    module.plot_scene_anatomy(_scenes(("SmoothAP", "VSE++ max-violation", "NT-Xent")), "a.png")
    (figure,) = figures
    panel = figure.axes[2]  # every loss at 0: nothing drawn, nothing to cover
    assert not panel.get_lines()
    assert panel.get_title() == "queries without gradient (image -> caption)"
    (note,) = [t.get_text().replace("\n", " ") for t in panel.texts]
    assert note == ("0 at every step: SmoothAP (both encoders); VSE++ max-violation (both "
                    "encoders); NT-Xent (both encoders)")  # fmt: skip
    assert layout_problems(figure) == []


@pytest.mark.slow  # seconds of drawing; the test above draws the same figure
def test_scene_anatomy_names_a_single_loss_at_zero_under_both_encoders(figures):
    # its two lines (solid and dashed) lay on each other: one of them could not be seen
    module.plot_scene_anatomy(_scenes(("NT-Xent",)), "a.png")
    (figure,) = figures
    panel = figure.axes[2]
    assert len(panel.get_lines()) == 4
    assert panel.get_title().split("\n") == ["queries without gradient (image -> caption)",
                                             "0 at every step: NT-Xent (both encoders)"]
    assert not panel.texts
    assert layout_problems(figure) == []


@pytest.mark.slow  # seconds of drawing
def test_scene_anatomy_of_two_logged_steps_ticks_the_two_steps_only(figures):
    # matplotlib's default ticked 0.0, 0.2, ..., 1.0 on a step axis
    module.plot_scene_anatomy(_scenes(("NT-Xent",), steps=(0, 1)), "a.png")
    (figure,) = figures
    for axis in figure.axes:
        low, high = axis.get_xlim()
        assert [float(t) for t in axis.get_xticks() if low <= t <= high] == [0.0, 1.0]


def _image_anatomy(sizes: tuple[int, ...], ones: set[tuple[int, str]] | None = None) -> dict:
    """An image study's anatomy: one series per batch size, one direction (each image of a
    batch querying the others); the (batch size, loss) series of ``ones`` keep one active
    negative throughout, by default VSE++'s max-violation at every batch size."""
    rng = np.random.default_rng(2)
    shape = (1, 3)  # one seed, three logged steps
    runs = {}
    for size in sizes:
        runs[f"m = {size}"] = {}
        for loss in ("SmoothAP", "VSE++ max-violation", "NT-Xent"):
            flat = loss == "VSE++ max-violation" if ones is None else (size, loss) in ones
            active = np.ones(shape) if flat else 2 + 5 * rng.random(shape)
            runs[f"m = {size}"][loss] = {"anatomy": {"steps": [0, 1, 2], "in_batch": {
                "active_negatives": active.tolist(),
                "share_without_gradient": (0.1 * rng.random(shape)).tolist(),
                "hardest_10pct_share": rng.random(shape).tolist()}}}  # fmt: skip
    return {"seeds": [0], "runs": runs}


@pytest.mark.slow  # seconds of drawing
@pytest.mark.parametrize("sizes, named", [((8, 16), "both batch sizes"),
                                          ((8, 16, 32), "every batch size")])  # fmt: skip
def test_an_image_studys_anatomy_names_its_batch_sizes_not_encoders(figures, sizes, named):
    # its series are batch sizes; the note read "VSE++ max-violation (both encoders)"
    module.plot_scene_anatomy(_image_anatomy(sizes), "a.png")
    (figure,) = figures
    panel = figure.axes[0]  # active negatives: the other losses' lines drawn
    assert panel.get_lines() and not panel.texts
    heading, note = panel.get_title().split("\n", 1)  # the note under the panel's title
    assert heading == "active negatives per query (image -> the batch's other images)"
    assert note == f"1 at every step: VSE++ max-violation ({named})"


@pytest.mark.slow  # seconds of drawing
def test_an_anatomy_note_keeps_each_parenthesised_group_of_batch_sizes_on_one_line(figures):
    # wrapped at 60 characters word by word, this note read "... VSE++ max-violation (m =" above
    # "8, m = 16)"
    ones = {(8, "SmoothAP"), (8, "VSE++ max-violation"), (16, "VSE++ max-violation")}
    module.plot_scene_anatomy(_image_anatomy((8, 16, 32), ones), "a.png")
    (figure,) = figures
    _, note = figure.axes[0].get_title().split("\n", 1)  # the note under the panel's title
    assert note.replace("\n", " ") == ("1 at every step: SmoothAP (m = 8); VSE++ max-violation "
                                       "(m = 8, m = 16)")  # fmt: skip
    lines = note.split("\n")
    assert len(lines) == 2 and all(len(line) <= 60 for line in lines)
    assert lines[1] == "(m = 8, m = 16)"  # the group whole, on the line it starts


@pytest.mark.parametrize("text, width, expected", [
    # a group of at most 20 characters, parentheses included, moves whole to the next line
    ("P at the smallest batch (m = 16) and the largest (m = 1024)", 30,
     ["P at the smallest batch", "(m = 16) and the largest", "(m = 1024)"]),
    ("VSE++ max-violation (m = 16, m = 64, m = 256)", 29,  # 25 characters: broken as words
     ["VSE++ max-violation (m = 16,", "m = 64, m = 256)"]),
    ("a note without any group to keep at all", 20, ["a note without any", "group to keep at all"]),
])  # fmt: skip
def test_fill_note_keeps_a_short_parenthesised_group_whole(text, width, expected):
    assert module.fill_note(text, width).split("\n") == expected


@pytest.mark.slow  # seconds of drawing and layout checks
def test_the_digit_scenes_anatomy_notes_read_under_their_titles(figures):
    # the study's own result (the report's figure): a note under each panel's title, the middle
    # row's of two lines
    path = Path(__file__).resolve().parents[2] / "figures" / "studies" / "digit_scenes.json"
    module.plot_scene_anatomy(json.loads(path.read_text(encoding="utf-8")), "a.png")
    (figure,) = figures
    assert layout_problems(figure) == []  # titles clear of the figure's title and each other
    renderer = figure.canvas.get_renderer()
    noted = [axis for axis in figure.axes if "\n" in axis.get_title()]
    assert noted and all(axis.get_lines() and not axis.texts for axis in noted)
    frames = [axis.get_window_extent(renderer) for axis in figure.axes]
    legend = figure.legends[0].get_window_extent(renderer)
    for axis in noted:  # above its own panel, clear of the others and of the legend
        title = axis.title.get_window_extent(renderer)
        assert title.y0 >= axis.get_window_extent(renderer).y1
        assert not any(title.overlaps(frame) for frame in frames)
        assert not title.overlaps(legend)


@pytest.fixture(scope="module")
def losses():
    path = Path(__file__).resolve().parents[2] / "figures" / "studies" / "loss_comparison.json"
    return json.loads(path.read_text(encoding="utf-8"))


@pytest.mark.slow  # seconds of layout checks; the test below draws the same figure
def test_the_loss_comparison_reads_on_the_page(losses, figures):
    module.plot_loss_comparison(losses, "losses.png")
    assert layout_problems(figures[0]) == []


@pytest.mark.slow
def test_the_loss_comparison_draws_each_loss_and_the_untrained_line_where_labelled(
    losses, figures
):
    summary = dict(losses.get("summary") or {}, apart={"FastAP": {"reason": "planted"}})
    module.plot_loss_comparison(dict(losses, summary=summary), "losses.png")
    panels = {axis.get_title(): axis for axis in figures[0].axes}
    names = list(losses["losses"])
    axis = panels["MAP@R"]
    labels = [tick.get_text() for tick in axis.get_xticklabels()]
    assert labels == [f"{n} (apart)" if n == "FastAP" else n for n in names]
    untrained = [line for line in axis.get_lines() if line.get_label() == "untrained"]
    assert len(untrained) == 1
    assert untrained[0].get_ydata()[0] == pytest.approx(np.mean(losses["before"]["MAP@R"]))
    for index, name in enumerate(names):  # the mean of each loss at its own tick
        values = losses["losses"][name]["metrics"]["MAP@R"]
        means = [y for line in axis.get_lines() if line.get_label() != "untrained"
                 for x, y in zip(line.get_xdata(), line.get_ydata(), strict=True)
                 if x == index]  # fmt: skip
        assert np.mean(values) == pytest.approx(means[0])


@pytest.mark.slow  # seconds of drawing
def test_an_anatomy_step_with_no_share_in_any_seed_is_a_gap_drawn_without_a_warning(figures):
    # the study writes NaN for the hardest share of a batch where no negative receives gradient
    # (VSE++ after its margin is met); where every seed has NaN the mean is a gap, and numpy's
    # "Mean of empty slice" reached the user's terminal
    result = _image_anatomy((8,))
    result["seeds"] = [0, 1]
    for series in result["runs"]["m = 8"].values():
        for key, values in series["anatomy"]["in_batch"].items():
            series["anatomy"]["in_batch"][key] = [values[0], values[0]]  # two equal seeds
    shares = result["runs"]["m = 8"]["SmoothAP"]["anatomy"]["in_batch"]["hardest_10pct_share"]
    first = list(shares[0])
    shares[0] = [first[0], NAN, first[2]]
    shares[1] = [first[0], NAN, first[2]]
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        module.plot_scene_anatomy(result, "a.png")
    (figure,) = figures
    panel = figure.axes[2]  # the hardest share
    (line,) = [line for line in panel.get_lines() if line.get_label() == "m = 8, SmoothAP"]
    drawn = list(line.get_ydata())
    assert drawn[0] == pytest.approx(first[0]) and drawn[2] == pytest.approx(first[2])
    assert math.isnan(drawn[1])
    # steps 0 and 2 have no finite neighbour: no segment reaches them, so each is marked
    assert line.get_marker() == "o" and list(line.get_markevery()) == [0, 2]
