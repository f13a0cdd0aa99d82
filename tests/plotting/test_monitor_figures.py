"""gradlab plot on hand-written ``metrics.jsonl`` files (seconds, no training): which runs a
log holds, which series is drawn under which label and in which colour, where the figures go,
and one clear error for each bad call. The drawn Axes are read back; expected values are the
hand-written records."""

from __future__ import annotations

import json
import math
import textwrap
import warnings
from itertools import pairwise

import matplotlib.pyplot as plt
import pytest
import seaborn as sns
from matplotlib.colors import to_rgb

import gradlab.plotting.monitor as monitor_plots
from gradlab import GradlabError
from gradlab.monitor import Plot, Quantity
from gradlab.plotting.monitor import check_run_dirs, draw_family, load_runs, plot_run, plot_runs
from gradlab.plotting.style import LINE_STYLES
from tests.helpers.figure_layout import captured_figures, layout_problems

PALETTE = [to_rgb(colour) for colour in sns.color_palette("colorblind", 10)]
LOSS = [0.9, 0.7, 0.6, 0.55]
P_SEED = [0.5, 0.25, 0.125, 0.0625]


def _log(folder, *segments):
    """Write ``metrics.jsonl``: each segment a header (dict, or None for no header line) and
    its records (dicts); a string is written as a raw line."""
    folder.mkdir(parents=True, exist_ok=True)
    lines = []
    for header, records in segments:
        if header is not None:
            lines.append(json.dumps({"header": header}))
        lines += [r if isinstance(r, str) else json.dumps(r) for r in records]
    (folder / "metrics.jsonl").write_text("\n".join(lines) + "\n")
    return folder


def _records(**series):
    steps = len(next(iter(series.values())))
    return [{"step": s, **{k: v[s] for k, v in series.items() if v[s] is not None}}
            for s in range(steps)]  # fmt: skip


def _run(folder, **series):
    return _log(folder, ({"run": 1}, _records(**series)))


def _drawn(monkeypatch, *args, **kwargs):
    """``{file stem: figure}`` of what plot_runs draws (figures open: close them)."""
    with captured_figures(monkeypatch, monitor_plots) as figures:
        paths = plot_runs(*args, **kwargs)
    return {path.stem: figure for path, figure in zip(paths, figures, strict=True)}, paths


def _close(figures):
    for figure in figures.values():
        plt.close(figure)


def _lines(axis):
    return [(list(line.get_xdata()), list(line.get_ydata())) for line in axis.get_lines()]


def _legend_texts(legend):
    return [text.get_text() for text in legend.texts]


# ---- which runs a log holds ----------------------------------------------------------------


def test_runs_are_labelled_by_their_folder_and_keep_their_records(tmp_path):
    runs = load_runs([_run(tmp_path / "a", loss=LOSS), _run(tmp_path / "b", loss=LOSS[:2])])
    assert [label for label, _ in runs] == ["a", "b"]
    assert runs[0][1] == _records(loss=LOSS) and runs[1][1] == _records(loss=LOSS[:2])


def test_folders_of_one_name_are_labelled_by_their_path_below_the_common_parent(tmp_path):
    runs = load_runs([_run(tmp_path / "x" / "run", loss=LOSS),
                      _run(tmp_path / "y" / "z" / "run", loss=LOSS)])  # fmt: skip
    assert [label for label, _ in runs] == ["x/run", "y/z/run"]


def test_given_labels_name_the_runs(tmp_path):
    runs = load_runs([_run(tmp_path / "a", loss=LOSS), _run(tmp_path / "b", loss=LOSS)],
                     ["tau 0.01", "tau 0.1"])  # fmt: skip
    assert [label for label, _ in runs] == ["tau 0.01", "tau 0.1"]


def test_a_log_whose_steps_restart_is_one_line_per_run_with_a_warning(tmp_path):
    run = _log(tmp_path / "old", ({"run": 1}, _records(loss=LOSS)), ({"run": 2}, []),
               ({"run": 3}, _records(loss=LOSS[:3])))  # fmt: skip
    with pytest.warns(UserWarning, match=r"metrics.jsonl holds 2 runs whose steps restart"):
        runs = load_runs([run])
    assert runs == [("old (run 1)", _records(loss=LOSS)), ("old (run 2)", _records(loss=LOSS[:3]))]


def test_records_before_any_header_are_a_run(tmp_path):
    run = _log(tmp_path / "bare", (None, _records(loss=LOSS)))
    assert load_runs([run]) == [("bare", _records(loss=LOSS))]


def test_a_resumed_run_continues_its_line_without_a_warning(tmp_path):
    first, later = _records(loss=LOSS)[:2], _records(loss=LOSS)[2:]
    run = _log(tmp_path / "run", ({"run": 1}, first),
               ({"run": 1, "resumed": {"from_step": 2}}, later))  # fmt: skip
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert load_runs([run]) == [("run", first + later)]


def test_a_resumption_after_an_empty_start_is_the_run(tmp_path):
    run = _log(tmp_path / "run", ({"run": 1}, []),
               ({"run": 1, "resumed": {"from_step": 0}}, _records(loss=LOSS)))  # fmt: skip
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert load_runs([run]) == [("run", _records(loss=LOSS))]


def test_a_broken_line_is_skipped_with_a_warning_naming_file_and_line(tmp_path):
    records = _records(loss=LOSS)
    run = _log(tmp_path / "run", ({"run": 1}, [records[0], "garbage{", *records[1:]]))
    with pytest.warns(UserWarning, match=r"metrics.jsonl:3: skipped a line"):
        runs = load_runs([run])
    assert runs == [("run", records)]


def test_the_warnings_point_at_the_line_that_called(tmp_path, monkeypatch):
    broken = _log(tmp_path / "broken", ({"run": 1}, ["garbage{", *_records(loss=LOSS)]))
    with pytest.warns(UserWarning, match="skipped a line") as caught:
        load_runs([broken])
    assert [warning.filename for warning in caught] == [__file__]
    words = _run(tmp_path / "words", loss=[0.5, "x", 0.25, 0.125])
    with pytest.warns(UserWarning, match="not numbers") as caught:
        _close(_drawn(monkeypatch, [words], tmp_path / "figs")[0])
    assert [warning.filename for warning in caught] == [__file__]


def test_a_log_of_broken_lines_only_is_refused_with_what_was_skipped(tmp_path):
    run = _log(tmp_path / "run", (None, ["garbage{", "[1, 2"]))
    with pytest.raises(GradlabError, match=r"skipped .*so no logged step is left"):
        load_runs([run])


def test_a_log_without_records_is_refused(tmp_path):
    run = _log(tmp_path / "run", ({"run": 1}, []))
    with pytest.raises(GradlabError, match=r"run.metrics.jsonl holds no logged step yet"):
        load_runs([run])


@pytest.mark.parametrize(
    ("labels", "message"),
    [
        (["one"], r"labels must give one label per run \(2\); got 1: \['one'\]"),
        (["one", ""], r"labels must be non-empty strings; got ''"),
        (["one", "  "], r"labels must be non-empty strings; got '  '"),
        (["one", 2], r"labels must be non-empty strings; got 2"),
        (["one", "one"], r"labels must differ from each other; got 'one' more than once"),
    ],
)
def test_bad_labels_are_refused(tmp_path, labels, message):
    runs = [_run(tmp_path / "a", loss=LOSS), _run(tmp_path / "b", loss=LOSS)]
    with pytest.raises(GradlabError, match=message):
        load_runs(runs, labels)


@pytest.mark.parametrize("run_dirs", ["runs/a", [], ()])
def test_run_dirs_must_be_a_non_empty_list(run_dirs):
    with pytest.raises(GradlabError, match="run_dirs must be a non-empty list of run folders"):
        load_runs(run_dirs)


def test_a_folder_without_a_log_is_named_before_any_log_is_read(tmp_path):
    good, empty = _run(tmp_path / "good", loss=LOSS), tmp_path / "empty"
    empty.mkdir()
    (tmp_path / "dir_log" / "metrics.jsonl").mkdir(parents=True)
    check_run_dirs([good])
    for bad in (empty, tmp_path / "dir_log"):
        with pytest.raises(GradlabError, match=f"run_dir must hold a metrics.jsonl .*{bad.name}"):
            check_run_dirs([good, bad])
        with pytest.raises(GradlabError, match=f"got '{bad}'"):
            load_runs([good, bad], ["a", "b"])


# ---- what is drawn, under which label ------------------------------------------------------


def test_one_run_draws_each_key_in_its_own_colour_under_its_label(tmp_path, monkeypatch):
    run = _run(tmp_path / "a", loss=LOSS, p_seed=P_SEED, p_off_diagonal=[0.4, 0.2, 0.1, 0.05])
    figures, paths = _drawn(monkeypatch, [run], tmp_path / "figs")
    assert paths == [tmp_path / "figs" / f"{name}.png"
                     for name in ("loss", "operating_region", "overview")]  # fmt: skip
    axis = figures["operating_region"].axes[0]
    steps = list(range(4))
    assert _lines(axis) == [(steps, P_SEED), (steps, [0.4, 0.2, 0.1, 0.05])]
    assert [to_rgb(line.get_color()) for line in axis.get_lines()] == PALETTE[:2]
    assert [line.get_linestyle() for line in axis.get_lines()] == ["-", "--"]
    assert _legend_texts(axis.get_legend()) == ["P (Brown et al. 2020, suppl. Eq. 1)",
                                                "P without the diagonal"]  # fmt: skip
    handles = axis.get_legend().legend_handles
    assert [to_rgb(h.get_color()) for h in handles] == PALETTE[:2]  # the lines' own styles
    assert axis.get_title() == "Operating-region proportion P"
    assert axis.get_xlabel() == "optimizer step" and axis.get_ylabel() == "proportion"
    assert _legend_texts(figures["loss"].axes[0].get_legend()) == ["loss"]
    _close(figures)


def test_several_runs_get_a_colour_each_and_keys_a_line_style_each(tmp_path, monkeypatch):
    runs = [_run(tmp_path / name, loss=LOSS, p_seed=P_SEED, p_off_diagonal=P_SEED)
            for name in ("a", "b", "c")]  # fmt: skip
    figures, _ = _drawn(monkeypatch, runs, tmp_path / "figs", labels=["A", "B", "C"])
    axis = figures["operating_region"].axes[0]
    lines = axis.get_lines()
    assert [to_rgb(line.get_color()) for line in lines] == [PALETTE[i] for i in (0, 0, 1, 1, 2, 2)]
    assert [line.get_linestyle() for line in lines] == ["-", "--"] * 3
    assert len({line.get_marker() for line in lines}) == 3  # a marker per run
    assert lines[0].get_marker() == lines[1].get_marker()
    legend = axis.get_legend()
    assert _legend_texts(legend) == ["A", "B", "C", "P (Brown et al. 2020, suppl. Eq. 1)",
                                     "P without the diagonal"]  # fmt: skip
    handles = legend.legend_handles
    assert [to_rgb(h.get_color()) for h in handles[:3]] == PALETTE[:3]
    assert [h.get_marker() for h in handles[:3]] == [lines[i].get_marker() for i in (0, 2, 4)]
    assert {to_rgb(h.get_color()) for h in handles[3:]} <= {to_rgb("0.3")}  # keys: grey
    assert [h.get_linestyle() for h in handles[3:]] == ["-", "--"]
    # one key: the legend names the runs only
    assert _legend_texts(figures["loss"].axes[0].get_legend()) == ["A", "B", "C"]
    _close(figures)


def test_each_line_is_its_runs_finite_values_of_its_key(tmp_path, monkeypatch):
    a = _run(tmp_path / "a", loss=[0.9, "NaN", 0.5, "Infinity"], p_seed=[None, 0.5, 0.25, None])
    b = _run(tmp_path / "b", loss=[0.8, 0.6, None, 0.2], p_seed=[None] * 4)
    figures, _ = _drawn(monkeypatch, [a, b], tmp_path / "figs")
    assert _lines(figures["loss"].axes[0]) == [([0, 2], [0.9, 0.5]), ([0, 1, 3], [0.8, 0.6, 0.2])]
    assert _lines(figures["operating_region"].axes[0]) == [([1, 2], [0.5, 0.25])]
    _close(figures)


def test_keys_absent_from_every_run_are_not_drawn(tmp_path, monkeypatch):
    run = _run(tmp_path / "a", p_off_diagonal=P_SEED, unknown_key=LOSS)
    figures, paths = _drawn(monkeypatch, [run], tmp_path / "figs")
    assert [path.stem for path in paths] == ["operating_region", "overview"]
    axis = figures["operating_region"].axes[0]
    assert _legend_texts(axis.get_legend()) == ["P without the diagonal"]
    assert to_rgb(axis.get_lines()[0].get_color()) == PALETTE[0]  # the first drawn key's colour
    _close(figures)


def test_values_that_are_not_numbers_are_dropped_with_a_count(tmp_path, monkeypatch):
    run = _run(tmp_path / "a", loss=[0.9, "x", True, [1]], p_seed=[0.5, "0.1", 0.3, 0.2],
               note=["a", "b", "c", "d"])  # fmt: skip
    with pytest.warns(UserWarning) as caught:
        figures, _ = _drawn(monkeypatch, [run], tmp_path / "figs")
    assert [str(w.message) for w in caught] == [
        "ignored 4 logged value(s) that are not numbers: loss (3), p_seed (1)"
    ]
    assert _lines(figures["loss"].axes[0]) == [([0], [0.9])]
    assert _lines(figures["operating_region"].axes[0]) == [([0, 2, 3], [0.5, 0.3, 0.2])]
    _close(figures)


def test_numbers_only_draw_without_a_warning(tmp_path, monkeypatch):
    run = _run(tmp_path / "a", loss=[1, 0.5, 0.25, 0.125])  # ints are numbers
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        figures, _ = _drawn(monkeypatch, [run], tmp_path / "figs")
    assert _lines(figures["loss"].axes[0]) == [([0, 1, 2, 3], [1, 0.5, 0.25, 0.125])]
    _close(figures)


def test_counts_and_shares_start_at_zero_and_others_do_not(tmp_path, monkeypatch):
    run = _run(tmp_path / "a", loss=[2.0, 1.8, 1.7, 1.6], p_seed=P_SEED,
               degenerate_batches=[0, 0, 0, 0])  # fmt: skip
    figures, _ = _drawn(monkeypatch, [run], tmp_path / "figs")
    bottom, top = figures["operating_region"].axes[0].get_ylim()
    assert top >= max(P_SEED) and bottom == -0.03 * top
    assert figures["degenerate_batches"].axes[0].get_ylim() == (-0.03, 1.0)  # all zero: 0..1
    bottom, top = figures["loss"].axes[0].get_ylim()
    assert 1.0 < bottom < 1.6 and top > 2.0  # the loss's own range, not from 0
    _close(figures)


def test_a_series_over_decades_goes_on_a_log_axis(tmp_path, monkeypatch):
    run = _run(tmp_path / "a", loss=[1.0, 1e-1, 1e-2, 1e-3], p_seed=[1.0, 1e-1, 1e-2, 1e-3],
               embedding_norm_mean=[1.0, 1e-1, 1e-2, 2e-3])  # fmt: skip
    figures, _ = _drawn(monkeypatch, [run], tmp_path / "figs")
    assert figures["loss"].axes[0].get_yscale() == "log"
    assert figures["embeddings"].axes[0].get_yscale() == "linear"  # 2.7 decades
    assert figures["operating_region"].axes[0].get_yscale() == "linear"  # shares: from 0
    _close(figures)


def test_the_overview_has_one_panel_per_family_with_the_keys_legend(tmp_path, monkeypatch):
    run = _run(tmp_path / "a", loss=LOSS, p_seed=P_SEED, p_off_diagonal=P_SEED,
               queries_without_gradient=[0, 0, 1, 1])  # fmt: skip
    figures, _ = _drawn(monkeypatch, [run], tmp_path / "figs")
    overview = figures["overview"]
    shown = [axis for axis in overview.axes if axis.get_visible()]
    assert [axis.get_title().replace("\n", " ") for axis in shown] == [
        monitor_plots.PLOTS[family].title
        for family in ("loss", "operating_region", "gradient_counts")
    ]
    assert len(overview.axes) == 4  # two columns, the fourth panel hidden
    assert [len(axis.get_lines()) for axis in shown] == [1, 2, 1]
    for axis, family in zip(shown, ("loss", "operating_region", "gradient_counts"),
                            strict=True):  # fmt: skip
        assert _lines(axis) == _lines(figures[family].axes[0])
    assert [_legend_texts(axis.get_legend()) for axis in shown] == [
        ["loss"],
        ["P (Brown et al. 2020, suppl. Eq. 1)", "P without the diagonal"],
        ["queries (count)"],
    ]
    assert overview.legends == []  # one run: no runs' legend
    for axis in shown:  # titles wrap at 45 characters in the panels, at 80 in the figures
        lines = axis.get_title().split("\n")
        assert max(map(len, lines)) <= 45
        assert all(len(f"{one} {two.split()[0]}") > 45 for one, two in pairwise(lines))
    title = figures["gradient_counts"].axes[0].get_title()
    assert title == textwrap.fill(monitor_plots.PLOTS["gradient_counts"].title, 80)
    assert "\n" in title
    _close(figures)


def test_one_family_fills_the_overview_alone(tmp_path, monkeypatch):
    figures, _ = _drawn(monkeypatch, [_run(tmp_path / "a", loss=LOSS)], tmp_path / "figs")
    assert len(figures["overview"].axes) == 1
    _close(figures)


def test_the_overview_of_several_runs_names_the_runs_once(tmp_path, monkeypatch):
    runs = [_run(tmp_path / name, loss=LOSS, p_seed=P_SEED, p_off_diagonal=P_SEED)
            for name in ("a", "b")]  # fmt: skip
    figures, _ = _drawn(monkeypatch, runs, tmp_path / "figs")
    overview = figures["overview"]
    (runs_legend,) = overview.legends
    assert _legend_texts(runs_legend) == ["a", "b"]
    assert [to_rgb(h.get_color()) for h in runs_legend.legend_handles] == PALETTE[:2]
    loss_panel, p_panel = overview.axes
    assert loss_panel.get_legend() is None  # one key: the runs' legend says it all
    assert _legend_texts(p_panel.get_legend()) == ["P (Brown et al. 2020, suppl. Eq. 1)",
                                                   "P without the diagonal"]  # fmt: skip
    assert [h.get_linestyle() for h in p_panel.get_legend().legend_handles] == ["-", "--"]
    top_of_panels = max(axis.get_position().y1 for axis in overview.axes)
    legend_box = runs_legend.get_window_extent().transformed(overview.transFigure.inverted())
    assert legend_box.y0 >= top_of_panels - 1e-6  # the runs' legend above the panels
    _close(figures)


def test_identical_runs_mark_different_steps_and_few_of_them(tmp_path):
    steps = 12 * monitor_plots.MARKS
    runs = load_runs([_run(tmp_path / name, loss=[1 / (s + 1) for s in range(steps)])
                      for name in ("a", "b", "c")])  # fmt: skip
    figure, axis = plt.subplots()
    draw_family(axis, "loss", ["loss"], runs)
    marked = []
    for line in axis.get_lines():
        start, every = line.get_markevery()
        marked.append(set(range(start, steps, every)))
    assert all(not one & two for i, one in enumerate(marked) for two in marked[i + 1 :])
    assert all(monitor_plots.MARKS / 2 <= len(m) <= 2 * monitor_plots.MARKS for m in marked)
    plt.close(figure)


def test_one_run_with_few_steps_draws_small_markers_on_each(tmp_path):
    runs = load_runs([_run(tmp_path / "a", loss=LOSS)])
    figure, axis = plt.subplots()
    draw_family(axis, "loss", ["loss"], runs)
    (line,) = axis.get_lines()
    assert line.get_markevery() is None and line.get_marker() not in ("", "None", None)
    plt.close(figure)


# ---- where figures go, and bad calls -------------------------------------------------------


def test_figures_go_next_to_one_run_or_into_the_common_parent(tmp_path, monkeypatch):
    one = _run(tmp_path / "runs" / "a", loss=LOSS)
    figures, paths = _drawn(monkeypatch, [one])
    assert paths == [one / "figures" / "loss.png", one / "figures" / "overview.png"]
    _close(figures)
    two = _run(tmp_path / "runs" / "b", loss=LOSS)
    figures, paths = _drawn(monkeypatch, [one, two])
    assert paths[0] == tmp_path.resolve() / "runs" / "figures" / "loss.png"
    _close(figures)
    with captured_figures(monkeypatch, monitor_plots) as figures:
        assert plot_run(one) == [one / "figures" / "loss.png", one / "figures" / "overview.png"]
    assert [figure.axes[0].get_title() for figure in figures] == ["Loss", "Loss"]
    _close(dict(enumerate(figures)))


def test_a_written_figure_is_a_png_file(tmp_path):
    paths = plot_run(_run(tmp_path / "a", loss=LOSS), tmp_path / "figs")
    assert [path.read_bytes()[:8] for path in paths] == [b"\x89PNG\r\n\x1a\n"] * 2


@pytest.mark.parametrize(
    ("call", "message"),
    [
        (lambda run, tmp: plot_runs([run], out=""), r"out must be a folder path or None; got ''"),
        (lambda run, tmp: plot_runs([run], out=3), r"out must be a folder path or None; got 3"),
        (lambda run, tmp: plot_runs([run], out=tmp / "file"), r"out must .*existing file"),
        (lambda run, tmp: plot_runs([run], quantities="loss"), "quantities must be a list"),
        (lambda run, tmp: plot_runs([run], quantities=[3]), "quantities must be a list"),
        (lambda run, tmp: plot_runs([run], quantities=[int]), "quantities must be a list"),
        (lambda run, tmp: plot_runs([tmp / "nothing"]), "run_dir must hold a metrics.jsonl"),
        (lambda run, tmp: plot_runs([run], labels=["a", "b"]), "one label per run"),
    ],
)
def test_bad_plot_calls_raise_before_drawing(tmp_path, monkeypatch, call, message):
    run = _run(tmp_path / "a", loss=LOSS)
    (tmp_path / "file").write_text("mine")
    with (
        captured_figures(monkeypatch, monitor_plots) as figures,
        pytest.raises(GradlabError, match=message),
    ):
        call(run, tmp_path)
    assert figures == [] and not (run / "figures").exists()


def test_a_log_without_a_known_key_is_refused(tmp_path):
    run = _run(tmp_path / "a", unknown=LOSS)
    with pytest.raises(GradlabError, match=r"the logs of \['.*a'\] hold no known quantity"):
        plot_runs([run], tmp_path / "figs")


class Spread(Quantity):
    """A quantity of the caller's, whose first family repeats a built-in one's name."""

    name = "spread"
    needs = frozenset({"scores"})
    keys = ("spread", "loss")
    plots = (Plot("spread", "Spread of the scores", "std", (("spread", "std of the scores"),),
                  zero_based=True),
             Plot("loss", "Not the loss", "x", (("loss", "not the loss"),)))  # fmt: skip

    def compute(self, batch):
        return {"spread": batch.scores.std()}


@pytest.mark.parametrize("given", [Spread, Spread()])
def test_a_callers_quantity_adds_its_family_and_keeps_the_built_in_ones(
    tmp_path, monkeypatch, given
):
    run = _run(tmp_path / "a", loss=LOSS, spread=[0.0, 0.5, 1.0, math.pi])
    figures, paths = _drawn(monkeypatch, [run], tmp_path / "figs", quantities=[given])
    assert [path.stem for path in paths] == ["loss", "spread", "overview"]
    assert figures["loss"].axes[0].get_title() == "Loss"  # the first declaration wins
    axis = figures["spread"].axes[0]
    assert axis.get_title() == "Spread of the scores" and axis.get_ylabel() == "std"
    assert _legend_texts(axis.get_legend()) == ["std of the scores"]
    assert axis.get_ylim()[0] == -0.03 * axis.get_ylim()[1]
    _close(figures)


def test_a_callers_key_label_reaches_the_legends(tmp_path, monkeypatch):
    class Labelled(Quantity):
        name = "labelled"
        needs = frozenset({"scores"})
        keys = ("a_b", "c_d")
        plots = (Plot("labelled", "Two", "v", (("a_b", "the A-B value"), ("c_d", "C-D"))),)

        def compute(self, batch):
            return {}

    runs = [_run(tmp_path / name, a_b=LOSS, c_d=LOSS) for name in ("x", "y")]
    figures, _ = _drawn(monkeypatch, runs, tmp_path / "figs", quantities=[Labelled])
    assert _legend_texts(figures["labelled"].axes[0].get_legend())[2:] == ["the A-B value", "C-D"]
    panel = figures["overview"].axes[0]
    assert _legend_texts(panel.get_legend()) == ["the A-B value", "C-D"]
    _close(figures)


def test_line_styles_cycle_through_the_styles_for_many_keys(tmp_path):
    keys = [f"k{i}" for i in range(len(LINE_STYLES) + 1)]
    labelled = Plot("many", "Many", "v", tuple((key, key) for key in keys))
    runs = load_runs([_run(tmp_path / name, **dict.fromkeys(keys, LOSS)) for name in "ab"])
    figure, axis = plt.subplots()
    draw_family(axis, "many", keys, runs, plots={"many": labelled})
    styles = [line.get_linestyle() for line in axis.get_lines()[: len(keys)]]
    assert styles[:4] == ["-", "--", "-.", ":"] and styles[-1] == styles[0]  # cycled
    plt.close(figure)


def test_figures_of_hand_written_runs_have_no_layout_problems(tmp_path, monkeypatch):
    # a long title over two keys, six keys, each run its own colour and marker
    steps = 12
    ramp = [s / steps for s in range(steps)]
    series = {"queries_without_gradient": [s % 3 for s in range(steps)],
              "queries_without_gradient_weighted": [(s % 3) / 2 for s in range(steps)],
              **{key: [0.1 + r / (i + 1) for r in ramp] for i, key
                 in enumerate(monitor_plots.PLOTS["anatomy_hardness"].keys)}}  # fmt: skip
    runs = [_run(tmp_path / name, **series) for name in ("first run", "second run", "third")]
    figures, _ = _drawn(monkeypatch, runs, tmp_path / "figs")
    assert len(figures) == 3
    for name, figure in figures.items():
        assert layout_problems(figure) == [], name
    _close(figures)
