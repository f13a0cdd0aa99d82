"""gradlab plot on hand-written ``metrics.jsonl`` files (seconds, no training): which runs a
log holds, which series is drawn under which label and in which colour, where the figures go,
and one clear error for each bad call. The drawn Axes are read back; expected values are the
hand-written records."""

from __future__ import annotations

import json
import math
import os
import sys
import textwrap
import warnings
from itertools import pairwise
from pathlib import Path

import matplotlib.pyplot as plt
import pytest
import seaborn as sns
import torch
from matplotlib.colors import to_rgb
from matplotlib.lines import Line2D

import gradlab
import gradlab.plotting.monitor as monitor_plots
from gradlab import GradlabError
from gradlab.monitor import Plot, Quantity
from gradlab.plotting.monitor import (
    UNDRAWN_HINT,
    check_run_dirs,
    draw_family,
    flat_families,
    load_runs,
    plot_run,
    plot_runs,
    run_folder,
)
from gradlab.plotting.style import LINE_STYLES
from tests.helpers.figure_layout import captured_figures, layout_problems
from tests.helpers.malformed_logs import MALFORMED
from tests.helpers.warning_frames import frame_named_by_stacklevel

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
    # folders of different names: their names alone, whatever lies between them and their
    # common parent
    runs = load_runs([_run(tmp_path / "x" / "a", loss=LOSS),
                      _run(tmp_path / "y" / "b", loss=LOSS[:2])])  # fmt: skip
    assert [label for label, _ in runs] == ["a", "b"]
    assert runs[0][1] == _records(loss=LOSS) and runs[1][1] == _records(loss=LOSS[:2])


def test_folders_of_one_name_are_labelled_by_their_path_below_the_common_parent(tmp_path):
    runs = load_runs([_run(tmp_path / "x" / "run", loss=LOSS),
                      _run(tmp_path / "y" / "z" / "run", loss=LOSS)])  # fmt: skip
    assert [label for label, _ in runs] == ["x/run", "y/z/run"]


@pytest.mark.parametrize(
    ("folders", "expected"),
    [  # the callbacks' folders: Lightning's CSV or TensorBoard logger, no logger, Hugging Face
        (["out/csv/version_0/gradlab_logs"], ["version_0"]),
        (["run/gradlab_logs"], ["run"]),
        (["out1/csv/version_0/gradlab_logs", "out2/csv/version_0/gradlab_logs"],
         ["out1", "out2"]),
        (["out1/csv/version_0/gradlab_logs", "out1/csv/version_1/gradlab_logs",
          "out2/csv/version_0/gradlab_logs"],
         ["out1/version_0", "out1/version_1", "out2/version_0"]),
        (["lightning_logs/version_0/gradlab_logs", "lightning_logs/version_1/gradlab_logs"],
         ["version_0", "version_1"]),
        (["a/gradlab_logs/version_0", "b/gradlab_logs/version_0"], ["a", "b"]),
        (["tau_0.01/gradlab_logs", "tau_0.1/gradlab_logs"], ["tau_0.01", "tau_0.1"]),
        (["x/run/gradlab_logs", "y/z/run/gradlab_logs"], ["x", "y/z"]),
        # beside a folder of one's own, gradlab_logs alone is left out
        (["mine/version_0", "out/gradlab_logs/version_0"], ["mine/version_0", "out/version_0"]),
        # where leaving gradlab_logs out would make two labels one, the paths are kept
        (["r/gradlab_logs/x", "r/x/gradlab_logs"], ["gradlab_logs/x", "x/gradlab_logs"]),
        # where leaving the folders all share out would leave one run no label, they stay
        (["a/b/c/gradlab_logs", "a/c/gradlab_logs"], ["b/c", "c"]),
        # a run inside another: the outer one is its folder's name, not "."
        (["run/gradlab_logs", "run"], ["gradlab_logs", "run"]),
        # a callback's folder inside another's, both in folders named x: the outer one has no
        # folder left below the common parent and is named by its own, as a run inside another
        (["x/gradlab_logs", "x/gradlab_logs/x/gradlab_logs"], ["gradlab_logs", "x/gradlab_logs"]),
    ],
)
def test_the_callbacks_folders_are_labelled_by_the_folders_that_tell_them_apart(
    tmp_path, folders, expected
):
    # a Lightning run was labelled gradlab_logs, two of them out1/csv/version_0/gradlab_logs
    runs = load_runs([_run(tmp_path / folder, loss=LOSS) for folder in folders])
    assert [label for label, _ in runs] == expected


def test_given_labels_name_the_runs(tmp_path):
    runs = load_runs([_run(tmp_path / "a", loss=LOSS), _run(tmp_path / "b", loss=LOSS)],
                     ["tau 0.01", "tau 0.1"])  # fmt: skip
    assert [label for label, _ in runs] == ["tau 0.01", "tau 0.1"]


@pytest.mark.parametrize("second", ["folder", "metrics.jsonl", "relative"])
def test_a_run_named_twice_is_an_error_naming_it(tmp_path, monkeypatch, second):
    run = _run(tmp_path / "a", loss=LOSS)
    monkeypatch.chdir(tmp_path)
    again = {"folder": run, "metrics.jsonl": run / "metrics.jsonl", "relative": Path("a")}[second]
    with pytest.raises(GradlabError) as caught:
        load_runs([run, again])
    assert str(caught.value) == (f"run_dirs must name each run once; got {run.resolve()} more "
                                 f"than once in {[str(run), str(again)]!r}")


def test_every_run_named_twice_is_listed_in_order(tmp_path):
    first, second = _run(tmp_path / "b", loss=LOSS), _run(tmp_path / "a", loss=LOSS)
    with pytest.raises(GradlabError) as caught:
        load_runs([first, second, second, first])
    assert f"got {second.resolve()}, {first.resolve()} more than once" in str(caught.value)


def test_a_log_whose_steps_restart_is_one_line_per_run_with_a_warning(tmp_path):
    run = _log(tmp_path / "old", ({"run": 1}, _records(loss=LOSS)), ({"run": 2}, []),
               ({"run": 3}, _records(loss=LOSS[:3])))  # fmt: skip
    with pytest.warns(UserWarning) as caught:
        runs = load_runs([run])
    assert [str(w.message) for w in caught] == [
        f"{run / 'metrics.jsonl'} holds 2 runs whose steps restart (appended before gradlab kept "
        "runs apart); each is drawn as its own line"
    ]
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


def test_a_sinks_note_adds_a_bare_step_only_for_whole_steps_no_record_holds(tmp_path):
    """A noted step that is logged, not a whole number, or a note that is no list adds no
    step: only step 1, a whole step that no record holds, becomes a step without values."""
    records = [{"step": 0, "loss": 1.0},
               {"step": 3, "loss": 0.5, "dropped_steps": [1, 3, "2", 2.5, True]},
               {"step": 4, "loss": 0.25, "dropped_steps": 7}]  # fmt: skip
    run = _log(tmp_path / "run", ({"run": 1}, records))
    assert load_runs([run]) == [("run", [records[0], {"step": 1}, records[1], records[2]])]


def test_a_broken_line_is_skipped_with_a_warning_naming_file_and_line(tmp_path):
    records = _records(loss=LOSS)
    run = _log(tmp_path / "run", ({"run": 1}, [records[0], "garbage{", *records[1:]]))
    with pytest.warns(UserWarning, match=r"metrics.jsonl:3: skipped a line"):
        runs = load_runs([run])
    assert runs == [("run", records)]


@pytest.mark.slow
def test_the_warnings_point_at_the_line_that_called(tmp_path, monkeypatch):
    """Counted in the program's own frames, so that it holds under mutation testing too."""
    named, warn = [], warnings.warn

    def record(message, category=UserWarning, stacklevel=1, **kwargs):
        if sys._getframe(1).f_globals.get("__name__") == monitor_plots.__name__:
            named.append(frame_named_by_stacklevel(stacklevel).f_code.co_filename)
        else:  # the log reader's own warning, which gradlab plot passes on
            warn(message, category, stacklevel + 1, **kwargs)

    broken = _log(tmp_path / "broken", ({"run": 1}, ["garbage{", *_records(loss=LOSS)]),
                  ({"run": 2}, _records(loss=LOSS)))  # fmt: skip
    words = _run(tmp_path / "words", loss=[0.5, "x", 0.25, 0.125])
    empty = _log(tmp_path / "empty", ({"run": 1}, []))
    back = _log(tmp_path / "back", ({"run": 1}, _records(loss=LOSS)),
                ({"run": 1, "resumed": {"from_step": 2}}, _records(loss=LOSS)[2:]))  # fmt: skip
    with captured_figures(monkeypatch, monitor_plots) as figures, monkeypatch.context() as patch:
        patch.setattr(warnings, "warn", record)
        load_runs([back])  # a resumption from an earlier checkpoint
        load_runs([broken])  # a skipped line, and two runs in one log
        plot_runs([words], tmp_path / "figs")  # a value that is not a number
        load_runs([words, empty])  # a run without a logged step, left out
        plot_runs([words, empty], tmp_path / "figs")  # the same, and the "x" again
    _close(dict(enumerate(figures)))
    assert named == [__file__] * 7


def test_a_log_of_broken_lines_only_is_refused_with_what_was_skipped(tmp_path):
    run = _log(tmp_path / "run", (None, ["garbage{", "[1, 2"]))
    with pytest.raises(GradlabError, match=r"skipped .*so no logged step is left"):
        load_runs([run])


NONE_LOGGED = ("(a run that has not logged yet, or one that logged nothing: the warnings of "
               "its training say why, such as a watched call the Monitor could not read; its "
               "header's not_logged, where it has one, names the quantities the watched loss "
               "could not serve)")
"""What a log without a logged step is said to be (it said "yet" of a run that had ended)."""


def test_a_log_without_records_is_refused(tmp_path):
    run = _log(tmp_path / "run", ({"run": 1}, []))
    with pytest.raises(GradlabError, match=r"run.metrics.jsonl holds no logged step \(a run "
                                           r"that has not logged yet, or one that logged "
                                           r"nothing: the warnings of its training say "
                                           r"why"):
        load_runs([run])
    other = _log(tmp_path / "other", ({"run": 1}, []))
    with pytest.raises(GradlabError, match=r"run.metrics.jsonl and .*other.metrics.jsonl hold no"):
        load_runs([run, other])


def test_a_run_without_records_is_left_out_of_an_overlay_with_a_warning(tmp_path):
    # one run that had not logged yet stopped the whole overlay
    empty = _log(tmp_path / "empty", ({"run": 1}, []))
    runs = [_run(tmp_path / "a", loss=LOSS), empty, _run(tmp_path / "b", loss=LOSS[:2])]
    with pytest.warns(UserWarning) as caught:
        loaded = load_runs(runs, ["first", "none", "second"])
    assert [(w.category, str(w.message)) for w in caught] == [
        (UserWarning, f"{empty / 'metrics.jsonl'} holds no logged step {NONE_LOGGED}: drawn "
                      "without it")]
    assert [(label, len(records)) for label, records in loaded] == [("first", 4), ("second", 2)]
    other = _log(tmp_path / "other", ({"run": 1}, []))  # two of them: one warning naming both
    with pytest.warns(UserWarning) as caught:
        loaded = load_runs([runs[0], empty, other])
    assert [str(w.message) for w in caught] == [
        f"{empty / 'metrics.jsonl'}, {other / 'metrics.jsonl'} hold no logged step "
        f"{NONE_LOGGED}: drawn without it"]
    assert [len(records) for _, records in loaded] == [4]


def _unreadable(folder, line):
    """A run folder whose ``metrics.jsonl`` is the one malformed ``line`` (bytes)."""
    folder.mkdir(parents=True)
    (folder / "metrics.jsonl").write_bytes(line)
    return folder


def _no_step_left(folder, reason):
    return (f"{folder / 'metrics.jsonl'}:1: skipped a line that is {reason}, so no logged step "
            "is left (a run folder must hold a metrics.jsonl written by gradlab.Monitor)")


def test_a_log_with_no_readable_line_is_left_out_of_an_overlay_with_its_reason(tmp_path):
    """The runs after it are read too, and the warning names the line that called."""
    line, reason = MALFORMED["not JSON"]
    cut = _unreadable(tmp_path / "cut", line)
    with pytest.warns(UserWarning) as caught:
        loaded = load_runs([cut, _run(tmp_path / "good", loss=LOSS)], ["cut", "good"])
    assert loaded == [("good", _records(loss=LOSS))]
    assert [(str(w.message), w.filename) for w in caught] == [
        (f"{_no_step_left(cut, reason)}: drawn without it", __file__)]


def test_logs_none_of_which_has_a_readable_line_are_refused_with_each_ones_reason(tmp_path):
    (cut_line, cut_reason), (array_line, array_reason) = (MALFORMED["not JSON"],
                                                          MALFORMED["a JSON array"])
    cut = _unreadable(tmp_path / "cut", cut_line)
    array = _unreadable(tmp_path / "array", array_line)
    with pytest.raises(GradlabError) as refused:
        load_runs([cut, array])
    assert str(refused.value) == (
        f"{_no_step_left(cut, cut_reason)}; {_no_step_left(array, array_reason)}")


@pytest.mark.slow
def test_a_label_with_dollar_signs_is_drawn_as_written(tmp_path, monkeypatch):
    # a $ opened matplotlib's math text: '$\\cmd{x}$' raised a ParseException at drawing time
    # and '$x^2$' was drawn as a formula
    labels = ["lr $\\badcmd{x}$ run", "$x^2$"]
    runs = [_run(tmp_path / name, loss=LOSS) for name in "ab"]
    figures, _ = _drawn(monkeypatch, runs, tmp_path / "figs", labels)
    legend = figures["loss"].axes[0].get_legend()
    for text, label in zip(legend.texts, labels, strict=True):
        assert text.get_text() == label.replace("$", "\\$")
        assert text._preprocess_math(text.get_text()) == (label, False)  # drawn as plain text
    _close(figures)


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


@pytest.mark.slow
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


@pytest.mark.slow
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


@pytest.mark.slow
def test_each_line_is_its_runs_values_with_a_gap_and_a_cross_where_one_is_not_finite(
    tmp_path, monkeypatch
):
    # a divergence must show: a line across the NaN steps would look like steps not logged
    a = _run(tmp_path / "a", loss=[0.9, "NaN", 0.5, "Infinity"], p_seed=[None, 0.5, 0.25, None])
    b = _run(tmp_path / "b", loss=[0.8, 0.6, None, 0.2], p_seed=[None] * 4)
    figures, _ = _drawn(monkeypatch, [a, b], tmp_path / "figs")
    axis = figures["loss"].axes[0]
    first, second, crosses = _lines(axis)
    assert first[0] == [0, 1, 2, 3] and first[1][0::2] == [0.9, 0.5]
    assert all(math.isnan(value) for value in first[1][1::2])  # gaps at steps 1 and 3
    # run b's step 2 logs no loss: a gap, no cross (a line across it would read as a value)
    assert second[0] == [0, 1, 2, 3] and second[1][:2] + second[1][3:] == [0.8, 0.6, 0.2]
    assert math.isnan(second[1][2])
    assert crosses == ([1, 3], [0.0, 0.0])  # on the step axis, in the axes' height
    figures["loss"].canvas.draw()
    cross = axis.get_lines()[-1]
    bottom = axis.get_window_extent().y0  # the frame's lower edge, whatever the data's range
    shown = cross.get_transform().transform([(step, 0.0) for step in crosses[0]])
    assert shown[:, 1] == pytest.approx([bottom, bottom])
    assert cross.get_clip_on() is False  # on the edge: the frame does not cut it in half
    labels = [text.get_text() for text in axis.get_legend().get_texts()]
    assert labels[-1] == ("undefined (NaN), infinite or beyond 1e300 at this step (in its run's "
                          "colour)")
    assert to_rgb(cross.get_color()) == PALETTE[0]  # run a's
    assert _lines(figures["operating_region"].axes[0]) == [([1, 2], [0.5, 0.25])]
    assert figures["operating_region"].axes[0].get_legend().get_texts()[-1].get_text() != (
        labels[-1])  # only where a drawn key was not finite
    overview = figures["overview"].axes[0]
    assert overview.get_legend().get_texts()[-1].get_text() == labels[-1]
    _close(figures)


@pytest.mark.slow
def test_a_family_with_no_finite_value_keeps_its_crosses_in_the_frame(tmp_path, monkeypatch):
    # every value NaN (an anatomy without active negatives: no share to take): no line set
    # the step range, the crosses lay far right of the frame, and the figure's tight box
    # stretched to reach them (68,658 x 520 pixels for 12 steps, a decompression bomb at 200)
    steps = 200
    run = _run(tmp_path / "run", loss=[0.5] * steps, p_seed=["NaN"] * steps)
    figures, _ = _drawn(monkeypatch, [run], tmp_path / "figs")
    for name in ("operating_region", "overview"):
        axis = figures[name].axes[-1] if name == "overview" else figures[name].axes[0]
        low, high = axis.get_xlim()
        assert low <= 0 and high >= steps - 1  # every cross inside the step range
    for name, figure in figures.items():  # the box a tight save keeps, in inches
        figure.canvas.draw()
        box = figure.get_tightbbox(figure.canvas.get_renderer())
        assert box.width < 2 * figure.get_figwidth(), (name, box.width)
    _close(figures)


def test_keys_absent_from_every_run_are_not_drawn(tmp_path, monkeypatch):
    run = _run(tmp_path / "a", p_off_diagonal=P_SEED, unknown_key=LOSS, other_key=LOSS)
    with pytest.warns(UserWarning) as caught:  # a key of no family is named, not dropped mute
        figures, paths = _drawn(monkeypatch, [run], tmp_path / "figs")
    assert [(str(w.message), w.filename) for w in caught] == [(
        "logged keys that no figure family draws: other_key, unknown_key (a quantity of your "
        "own draws its keys when it declares plots: gradlab.monitor.Plot)", __file__)]
    assert [path.stem for path in paths] == ["operating_region", "overview"]
    axis = figures["operating_region"].axes[0]
    assert _legend_texts(axis.get_legend()) == ["P without the diagonal"]
    assert to_rgb(axis.get_lines()[0].get_color()) == PALETTE[0]  # the first drawn key's colour
    _close(figures)


@pytest.mark.slow
def test_values_that_are_not_numbers_are_dropped_with_a_count(tmp_path, monkeypatch):
    run = _run(tmp_path / "a", loss=[0.9, "x", True, [1]], p_seed=[0.5, "0.1", 0.3, 0.2],
               note=["a", "b", "c", "d"])  # fmt: skip
    with pytest.warns(UserWarning) as caught:
        figures, _ = _drawn(monkeypatch, [run], tmp_path / "figs")
    assert [str(w.message) for w in caught] == [
        "ignored 4 logged value(s) that are not numbers: loss (3), p_seed (1)"
    ]
    assert _lines(figures["loss"].axes[0]) == [([0], [0.9])]
    ((steps, values),) = _lines(figures["operating_region"].axes[0])  # the dropped one: a gap
    assert steps == [0, 1, 2, 3] and math.isnan(values[1])
    assert values[:1] + values[2:] == [0.5, 0.3, 0.2]
    _close(figures)


def test_numbers_only_draw_without_a_warning(tmp_path, monkeypatch):
    run = _run(tmp_path / "a", loss=[1, 0.5, 0.25, 0.125])  # ints are numbers
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        figures, _ = _drawn(monkeypatch, [run], tmp_path / "figs")
    assert _lines(figures["loss"].axes[0]) == [([0, 1, 2, 3], [1, 0.5, 0.25, 0.125])]
    _close(figures)


@pytest.mark.slow
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


@pytest.mark.slow
def test_a_series_over_decades_goes_on_a_log_axis(tmp_path, monkeypatch):
    run = _run(tmp_path / "a", loss=[1.0, 1e-1, 1e-2, 1e-3], p_seed=[1.0, 1e-1, 1e-2, 1e-3],
               embedding_norm_mean=[1.0, 1e-1, 1e-2, 2e-3])  # fmt: skip
    figures, _ = _drawn(monkeypatch, [run], tmp_path / "figs")
    assert figures["loss"].axes[0].get_yscale() == "log"
    assert figures["embeddings"].axes[0].get_yscale() == "linear"  # 2.7 decades
    assert figures["operating_region"].axes[0].get_yscale() == "linear"  # shares: from 0
    _close(figures)


@pytest.mark.slow
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


@pytest.mark.slow
def test_the_overview_panels_share_the_runs_step_range(tmp_path, monkeypatch):
    # the closing step logs no gradient: its panel's line stops at step 2, not the others'
    run = _run(tmp_path / "a", loss=LOSS, embedding_grad_norm=[0.5, 0.4, 0.3, None])
    figures, _ = _drawn(monkeypatch, [run], tmp_path / "figs")
    loss_panel, gradient_panel = (axis for axis in figures["overview"].axes
                                  if axis.get_visible())  # fmt: skip
    assert max(_lines(gradient_panel)[0][0]) == 2 and max(_lines(loss_panel)[0][0]) == 3
    assert gradient_panel.get_xlim() == loss_panel.get_xlim()
    low, high = loss_panel.get_xlim()
    assert low <= 0 and high >= 3  # the whole run, step 0 to 3
    _close(figures)


def test_one_family_fills_the_overview_alone(tmp_path, monkeypatch):
    figures, _ = _drawn(monkeypatch, [_run(tmp_path / "a", loss=LOSS)], tmp_path / "figs")
    assert len(figures["overview"].axes) == 1
    _close(figures)


@pytest.mark.slow
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


def test_a_run_that_logs_none_of_a_familys_keys_is_named_in_its_legends(tmp_path, monkeypatch):
    # a pytorch-metric-learning loss on LpDistance logs no anatomy: overlaid with runs that do,
    # it was missing from their figures and overview panels without a word, while the
    # overview's legend of runs named it
    runs = [_run(tmp_path / "a", loss=LOSS, p_seed=P_SEED, p_off_diagonal=P_SEED),
            _run(tmp_path / "b", loss=LOSS), _run(tmp_path / "c", loss=LOSS, p_seed=P_SEED)]
    figures, _ = _drawn(monkeypatch, runs, tmp_path / "figs")
    assert _legend_texts(figures["operating_region"].axes[0].get_legend()) == [
        "a", "c", "P (Brown et al. 2020, suppl. Eq. 1)", "P without the diagonal",
        "not logged by: b"]
    assert _legend_texts(figures["loss"].axes[0].get_legend()) == ["a", "b", "c"]
    loss_panel, p_panel = figures["overview"].axes
    assert loss_panel.get_legend() is None  # every run logs the loss
    assert _legend_texts(p_panel.get_legend()) == [
        "P (Brown et al. 2020, suppl. Eq. 1)", "P without the diagonal", "not logged by: b"]
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


@pytest.mark.slow
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


@pytest.mark.slow
def test_a_written_figure_is_a_png_file(tmp_path):
    paths = plot_run(_run(tmp_path / "a", loss=LOSS), tmp_path / "figs")
    assert paths == [tmp_path / "figs" / "loss.png", tmp_path / "figs" / "overview.png"]
    assert [path.read_bytes()[:8] for path in paths] == [b"\x89PNG\r\n\x1a\n"] * 2


@pytest.mark.slow
def test_overview_false_draws_every_family_but_not_the_overview(tmp_path):
    paths = plot_run(_run(tmp_path / "a", loss=LOSS), tmp_path / "figs", overview=False)
    assert paths == [tmp_path / "figs" / "loss.png"]
    assert sorted(path.name for path in (tmp_path / "figs").iterdir()) == [
        monitor_plots.FIGURE_LIST, "loss.png"]  # fmt: skip


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
    with pytest.raises(GradlabError, match=r"the logs of \['.*a'\] hold no key that a figure "
                       r"family draws: "):
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


@pytest.mark.slow
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


@pytest.mark.slow
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


# ---- more of what a reader sees ---------------------------------------------------------------


@pytest.mark.skipif(not Path("/proc/self/mem").exists(), reason="needs Linux's /proc/self/mem")
def test_a_log_that_cannot_be_read_is_named_with_the_reason(tmp_path):
    (tmp_path / "run").mkdir()
    (tmp_path / "run" / "metrics.jsonl").symlink_to("/proc/self/mem")  # a file; reading fails
    log = tmp_path / "run" / "metrics.jsonl"
    with pytest.raises(GradlabError) as caught:
        load_runs([tmp_path / "run"])
    assert str(caught.value) == f"cannot read the log {str(log)!r}: Input/output error"


def test_the_refusal_of_a_log_of_broken_lines_says_what_was_skipped(tmp_path):
    run = _log(tmp_path / "run", (None, ["garbage{"]))
    with pytest.raises(GradlabError) as caught:
        load_runs([run])
    message = str(caught.value)
    assert message.startswith(f"{run / 'metrics.jsonl'}:1: ")
    assert message.endswith(", so no logged step is left (a run folder must hold a metrics.jsonl "
                            "written by gradlab.Monitor)")  # fmt: skip


def test_every_repeated_label_is_named(tmp_path):
    runs = [_run(tmp_path / name, loss=LOSS) for name in "abcde"]
    with pytest.raises(GradlabError) as caught:
        load_runs(runs, ["x", "y", "x", "y", "z"])
    assert str(caught.value) == ("labels must differ from each other; got 'x', 'y' more than "
                                 "once in ['x', 'y', 'x', 'y', 'z']")  # fmt: skip


def test_a_runs_metrics_jsonl_stands_for_its_folder_and_other_files_are_refused(tmp_path):
    run = _run(tmp_path / "a", loss=LOSS)
    assert run_folder(run / "metrics.jsonl") == run_folder(run) == run
    assert load_runs([run / "metrics.jsonl"]) == [("a", _records(loss=LOSS))]
    (run / "notes.txt").write_text("not a log")
    for other in (run / "notes.txt", tmp_path / "elsewhere" / "metrics.jsonl"):
        assert run_folder(other) == other
    with pytest.raises(GradlabError) as caught:
        load_runs([run / "notes.txt"])
    assert str(caught.value) == (
        f"run_dir must be a folder written by gradlab.Monitor; got the file "
        f"{str(run / 'notes.txt')!r} (pass the run folder, the one that holds metrics.jsonl)"
    )


@pytest.mark.slow
def test_titles_wrap_at_80_characters_and_at_45_in_the_overview(tmp_path, monkeypatch):
    class Titled(Quantity):
        name = "titled"
        needs = frozenset({"scores"})
        keys = ("long", "short")
        plots = (
            Plot("long", f"{'a' * 40} {'b' * 40}", "v", (("long", "long"),)),  # 81 wide
            Plot("short", f"{'c' * 22} {'d' * 23}", "v", (("short", "short"),)),
        )  # 46 wide

        def compute(self, batch):
            return {}

    run = _run(tmp_path / "a", long=LOSS, short=LOSS)
    figures, _ = _drawn(monkeypatch, [run], tmp_path / "figs", quantities=[Titled])
    assert figures["long"].axes[0].get_title() == f"{'a' * 40}\n{'b' * 40}"
    assert figures["short"].axes[0].get_title() == f"{'c' * 22} {'d' * 23}"  # 45 + 1 < 80
    assert [axis.get_title() for axis in figures["overview"].axes] == [
        f"{'a' * 40}\n{'b' * 40}",
        f"{'c' * 22}\n{'d' * 23}",
    ]
    _close(figures)


def test_two_runs_are_told_apart_by_colour(tmp_path):
    runs = load_runs([_run(tmp_path / name, p_seed=P_SEED, p_off_diagonal=P_SEED) for name in "ab"])
    figure, axis = plt.subplots()
    draw_family(axis, "operating_region", ["p_seed", "p_off_diagonal"], runs)
    colours = [to_rgb(line.get_color()) for line in axis.get_lines()]
    assert colours == [PALETTE[0], PALETTE[0], PALETTE[1], PALETTE[1]]
    plt.close(figure)


def test_runs_of_different_lengths_never_mark_the_same_step(tmp_path):
    lengths = (16, 24, 16, 40)
    runs = load_runs([_run(tmp_path / f"r{i}", loss=[1 / (s + 1) for s in range(n)])
                      for i, n in enumerate(lengths)])  # fmt: skip
    figure, axis = plt.subplots()
    draw_family(axis, "loss", ["loss"], runs)
    marked = []
    for line, steps in zip(axis.get_lines(), lengths, strict=True):
        start, every = line.get_markevery()
        marked.append(set(range(start, steps, every)))
    assert all(marked) and all(not one & two for i, one in enumerate(marked)
                               for two in marked[i + 1 :])  # fmt: skip
    plt.close(figure)


def test_the_step_axis_is_ticked_at_whole_steps(tmp_path):
    figure, axis = plt.subplots()
    draw_family(axis, "loss", ["loss"], load_runs([_run(tmp_path / "a", loss=LOSS[:3])]))
    ticks = axis.get_xticks()
    assert len(ticks) >= 2 and all(float(t).is_integer() for t in ticks)
    plt.close(figure)


@pytest.mark.parametrize("steps", [1, 2])
def test_a_run_of_one_or_two_steps_is_ticked_at_its_steps_only(tmp_path, steps):
    # one step: a plain integer locator fell back to -0.045, -0.03, ... around it
    figure, axis = plt.subplots()
    draw_family(axis, "loss", ["loss"], load_runs([_run(tmp_path / "a", loss=LOSS[:steps])]))
    low, high = axis.get_xlim()
    ticks = [float(t) for t in axis.get_xticks() if low <= t <= high]
    assert ticks == [float(step) for step in range(steps)]
    plt.close(figure)


def test_zero_based_axes_reach_the_largest_value_and_stop_below_1_for_small_shares(tmp_path):
    run = _run(tmp_path / "a", queries_without_gradient=[0, 2, 5, 3], p_seed=[0.0, 0.1, 0.2, 0.1],
               degenerate_batches=["NaN"] * 4)  # fmt: skip
    runs = load_runs([run])
    limits = {}
    for family, keys in (("gradient_counts", ["queries_without_gradient"]),
                         ("operating_region", ["p_seed"]),
                         ("degenerate_batches", ["degenerate_batches"])):  # fmt: skip
        figure, axis = plt.subplots()
        draw_family(axis, family, keys, runs)
        limits[family] = axis.get_ylim()
        plt.close(figure)
    bottom, top = limits["gradient_counts"]
    assert top >= 5 and bottom == -0.03 * top
    bottom, top = limits["operating_region"]
    assert 0.2 <= top < 0.5 and bottom == -0.03 * top  # the data's own range, from 0
    assert limits["degenerate_batches"] == (-0.03, 1.0)  # nothing finite: 0..1


def test_a_family_with_one_series_never_logged_is_still_flat():
    runs = [("a", [{"step": s, "degenerate_batch": 0} for s in range(3)])]
    assert flat_families(runs) == {
        "degenerate_batches": (
            f"{monitor_plots.PLOTS['degenerate_batches'].title}: this batch without ranking signal "
            "(0/1) 0 at each of the 3 logged steps"
        )
    }


@pytest.mark.slow
def test_legends_of_the_runs_show_solid_lines(tmp_path, monkeypatch):
    runs = [_run(tmp_path / name, p_seed=P_SEED, p_off_diagonal=P_SEED) for name in "ab"]
    figures, _ = _drawn(monkeypatch, runs, tmp_path / "figs")
    handles = figures["operating_region"].axes[0].get_legend().legend_handles
    assert [h.get_linestyle() for h in handles] == ["-", "-", "-", "--"]  # runs, then keys
    assert [h.get_linestyle() for h in figures["overview"].legends[0].legend_handles] == ["-"] * 2
    _close(figures)


def _in_figure(artist, figure):
    return artist.get_window_extent().transformed(figure.transFigure.inverted())


@pytest.mark.slow
@pytest.mark.parametrize("names", [("a",), ("a", "b"), ("a", "b", "c", "d")])
def test_overview_panels_fill_the_figure_with_their_legends_below_them(tmp_path, monkeypatch,
                                                                       names):  # fmt: skip
    runs = [
        _run(tmp_path / name, loss=LOSS, p_seed=P_SEED, p_off_diagonal=P_SEED) for name in names
    ]
    figures, _ = _drawn(monkeypatch, runs, tmp_path / "figs")
    overview = figures["overview"]
    overview.canvas.draw()
    loss_panel, p_panel = overview.axes
    left, right = loss_panel.get_position(), p_panel.get_position()
    assert left.x1 < right.x0 and math.isclose(left.y0, right.y0)  # side by side
    assert left.x0 < 0.2 and right.x1 > 0.8 and left.height > 0.35
    legend = p_panel.get_legend()
    box, panel = _in_figure(legend, overview), _in_figure(p_panel, overview)
    assert box.y1 <= panel.y0 and abs((box.x0 + box.x1) / 2 - (panel.x0 + panel.x1) / 2) < 0.01
    assert not legend.get_frame_on() and box.height > 1.5 * box.width / 10  # stacked
    colours = {to_rgb(h.get_color()) for h in legend.legend_handles}
    assert colours == ({to_rgb("0.3")} if len(names) > 1 else set(PALETTE[:2]))
    if len(names) > 1:  # the runs' legend: one row above every title, inside the figure
        (runs_legend,) = overview.legends
        box = _in_figure(runs_legend, overview)
        titles = [_in_figure(axis.title, overview) for axis in overview.axes]
        assert box.y0 >= max(title.y1 for title in titles) - 1e-6 and box.y1 <= 1.0
        assert abs((box.x0 + box.x1) / 2 - 0.5) < 0.01 and not runs_legend.get_frame_on()
        rows = {round(text.get_window_extent().y0) for text in runs_legend.texts}
        assert len(rows) == 1
    else:
        assert overview.legends == []
    _close(figures)


@pytest.mark.slow
def test_every_row_of_the_overview_is_as_tall_as_a_one_panel_overview(tmp_path, monkeypatch):
    one, _ = _drawn(monkeypatch, [_run(tmp_path / "a", loss=LOSS)], tmp_path / "one")
    run = _run(tmp_path / "b", loss=LOSS, p_seed=P_SEED, queries_without_gradient=[0, 0, 1, 1])
    three, _ = _drawn(monkeypatch, [run], tmp_path / "three")  # two rows of two panels
    assert three["overview"].get_figheight() == pytest.approx(
        2 * one["overview"].get_figheight(), rel=1e-12)
    assert three["overview"].axes[3].get_visible() is False  # the fourth panel is hidden
    _close(one)
    _close(three)


def test_a_resumption_from_an_earlier_step_replaces_the_records_from_there(tmp_path):
    # trained to step 3, then resumed from the checkpoint of step 2: 2 and 3 were trained again
    first = _records(loss=LOSS)
    again = [{**record, "loss": record["loss"] + 1.0} for record in _records(loss=LOSS)[2:]]
    run = _log(tmp_path / "run", ({"run": 1}, first),
               ({"run": 1, "resumed": {"from_step": 2}}, again))  # fmt: skip
    with pytest.warns(UserWarning) as caught:
        runs = load_runs([run])
    assert [str(w.message) for w in caught] == [
        f"{run / 'metrics.jsonl'}: a resumption starts at step 2, which the run had logged "
        "already (it went back to an earlier checkpoint, or its step count started over); its "
        "records replace the 2 from step 2 on"
    ]
    assert runs == [("run", first[:2] + again)]


def _said_reading(run) -> list[str]:
    """The warnings of reading ``run`` (there must be one)."""
    with pytest.warns(UserWarning) as caught:
        load_runs([run])
    return [str(w.message) for w in caught]


@pytest.mark.parametrize("resumed", [True, {"from_step": "1"}, {"from_step": 1.0}])
def test_a_resumption_header_without_a_whole_from_step_names_its_first_logged_step(tmp_path,
                                                                                   resumed):
    """A hand-edited header's resumption that is no mapping, or whose from_step is no integer,
    is named by its first logged step alone."""
    run = _log(tmp_path / "run", ({"run": 1}, _records(loss=LOSS)),
               ({"run": 1, "resumed": resumed}, _records(loss=LOSS)[2:]))  # fmt: skip
    assert _said_reading(run) == [
        f"{run / 'metrics.jsonl'}: a resumption starts at step 2, which the run had logged "
        "already (it went back to an earlier checkpoint, or its step count started over); its "
        "records replace the 2 from step 2 on"]


def test_a_second_resumption_from_one_step_replaces_the_first_ones_schedules(tmp_path):
    """Resumed twice from step 2: the later header's schedules hold from step 2 on, not the
    earlier resumption's (which logged another quantity); the steps due are read from them."""
    first = {"first": {"schedule": "every(1)", "keys": ["first_value"]}}
    other = {"other": {"schedule": "every(1)", "keys": ["other_value"]}}
    run = _log(tmp_path / "run", (
        {"run": 1, "schedules": first}, [{"step": s, "first_value": 1.0} for s in range(4)]), (
        {"run": 1, "resumed": {"from_step": 2}, "schedules": other},
        [{"step": s, "other_value": 1.0} for s in (2, 3)]), (
        {"run": 1, "resumed": {"from_step": 2}, "schedules": first},
        [{"step": s, "first_value": 2.0} for s in (2, 3, 4)]))  # fmt: skip
    with pytest.warns(UserWarning, match="went back"):
        ((_, records),) = load_runs([run])
    assert [record["step"] for record in records] == [0, 1, 2, 3, 4]
    assert records.due_steps("first_value", 1, 5) == {2, 3, 4}


def test_quantities_disabled_and_logged_again_after_a_resumption_are_each_named(tmp_path):
    schedules = {name: {"schedule": "every(1)", "keys": [f"{name}_value"]}
                 for name in ("first", "second")}  # fmt: skip
    values = {"first_value": 1.0, "second_value": 2.0}
    run = _log(tmp_path / "run", ({"run": 1, "schedules": schedules}, [
        {"step": 0, **values}, {"step": 1, "disabled": {"first": "why", "second": "why"}}]),
        ({"run": 1, "resumed": {"from_step": 2}, "schedules": schedules},
         [{"step": 2, **values}]))  # fmt: skip
    assert _said_reading(run) == [
        f"{run / 'metrics.jsonl'}: the Monitor disabled the quantities 'first', 'second' (why) "
        "during the run: their keys end there ('first' is logged again from step 2, where the "
        "run resumed; 'second' is logged again from step 2, where the run resumed)"]


def test_a_resumption_whose_first_logged_step_is_past_its_start_names_both(tmp_path):
    # resumed from the checkpoint of step 1, whose schedule logs step 2 first: the header says
    # from_step 1, the replaced records start at 2; the warning names both (it named 2 alone,
    # beside a header that says 1)
    first = _records(loss=LOSS)
    again = [{**record, "loss": record["loss"] + 1.0} for record in _records(loss=LOSS)[2:]]
    run = _log(tmp_path / "run", ({"run": 1}, first),
               ({"run": 1, "resumed": {"from_step": 1}}, again))  # fmt: skip
    with pytest.warns(UserWarning) as caught:
        runs = load_runs([run])
    assert [str(w.message) for w in caught] == [
        f"{run / 'metrics.jsonl'}: a resumption from step 1 (first logged at step 2) starts at "
        "a step which the run had logged already (it went back to an earlier checkpoint, or its "
        "step count started over); its records replace the 2 from step 2 on"
    ]
    assert runs == [("run", first[:2] + again)]


def test_steps_that_go_back_within_one_run_replace_the_records_from_there(tmp_path):
    # monitor.step_count set back to 1 after step 3, inside one run (no new header): the
    # line went back from 3 to 1 and on, a zig-zag, without a word
    first = _records(loss=LOSS)  # steps 0-3
    again = [{**record, "loss": record["loss"] + 1.0} for record in _records(loss=LOSS)[1:]]
    run = _log(tmp_path / "run", ({"run": 1}, first + again))
    with pytest.warns(UserWarning) as caught:
        runs = load_runs([run])
    assert [str(w.message) for w in caught] == [
        f"{run / 'metrics.jsonl'}: its steps go back within one run, from step 3 to step 1: "
        "monitor.step_count was set back, or training went back to an earlier checkpoint with "
        "the same Monitor; the later records replace the 3 logged from step 1 on, so the line "
        "follows the training that went on"
    ]
    assert caught[0].filename == __file__
    assert runs == [("run", first[:1] + again)]


def test_a_step_logged_again_replaces_the_earlier_record(tmp_path):
    # step 1 logged twice in one run (step_count set back by one): the later record stands
    run = _log(tmp_path / "run", ({"run": 1}, [{"step": s, "loss": float(i)}
                                                for i, s in enumerate([0, 1, 1, 2])]))  # fmt: skip
    with pytest.warns(UserWarning) as caught:
        ((_, records),) = load_runs([run])
    assert [str(w.message) for w in caught] == [  # was "go back ... from step 1 to step 1"
        f"{run / 'metrics.jsonl'}: step 1 is logged twice in a row within one run (a repeat; "
        "the steps do not go back): monitor.step_count was set back by one, or the step was "
        "trained again with the same Monitor; the later record replaces the earlier one, so "
        "the line follows the training that went on"
    ]
    assert [(r["step"], r["loss"]) for r in records] == [(0, 0.0), (1, 2.0), (2, 3.0)]


def test_a_repeated_step_before_steps_that_go_back_is_told_first_and_counts_them(tmp_path):
    steps = [0, 1, 1, 2, 0]  # a repeat of 1, then back from 2 to 0
    run = _log(tmp_path / "run", ({"run": 1}, [{"step": s, "loss": float(i)}
                                                for i, s in enumerate(steps)]))  # fmt: skip
    with pytest.warns(UserWarning) as caught:
        ((_, records),) = load_runs([run])
    assert [str(w.message) for w in caught] == [
        f"{run / 'metrics.jsonl'}: step 1 is logged twice in a row within one run (a repeat; "
        "the steps do not go back) (and 1 more such place): monitor.step_count was set back by "
        "one, or the step was trained again with the same Monitor; the later record replaces "
        "the earlier one, so the line follows the training that went on"
    ]
    assert [(r["step"], r["loss"]) for r in records] == [(0, 4.0)]


def test_places_where_steps_go_back_are_counted_in_the_plural(tmp_path):
    steps = [0, 1, 0, 1, 0, 1, 0]  # three places after the first
    run = _log(tmp_path / "run", ({"run": 1}, [{"step": s, "loss": float(i)}
                                                for i, s in enumerate(steps)]))  # fmt: skip
    with pytest.warns(UserWarning, match=r"from step 1 to step 0 \(and 2 more such places\)"):
        load_runs([run])


def test_several_places_where_steps_go_back_are_told_in_one_warning(tmp_path):
    steps = [0, 1, 2, 1, 2, 3, 0, 1]
    run = _log(tmp_path / "run", ({"run": 1}, [{"step": s, "loss": float(i)}
                                                for i, s in enumerate(steps)]))  # fmt: skip
    with pytest.warns(UserWarning) as caught:
        ((_, records),) = load_runs([run])
    assert [str(w.message) for w in caught] == [
        f"{run / 'metrics.jsonl'}: its steps go back within one run, from step 2 to step 1 "
        "(and 1 more such place): monitor.step_count was set back, or training went back to an "
        "earlier checkpoint with the same Monitor; the later records replace the 2 logged from "
        "step 1 on, so the line follows the training that went on"
    ]
    assert [(r["step"], r["loss"]) for r in records] == [(0, 6.0), (1, 7.0)]


def test_the_resumption_warning_names_the_line_that_called_load_runs(tmp_path):
    run = _log(tmp_path / "run", ({"run": 1}, _records(loss=LOSS)),
               ({"run": 1, "resumed": {"from_step": 0}}, _records(loss=LOSS)))  # fmt: skip
    with pytest.warns(UserWarning, match="a resumption starts at step 0") as caught:
        load_runs([run])
    assert caught[0].filename == __file__


def test_a_resumption_that_logged_nothing_leaves_its_run_as_it_was(tmp_path):
    run = _log(tmp_path / "run", ({"run": 1}, _records(loss=LOSS)),
               ({"run": 1, "resumed": {"from_step": 4}}, []))  # fmt: skip
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert load_runs([run]) == [("run", _records(loss=LOSS))]


def test_a_folder_above_its_runs_names_them(tmp_path):
    # a trainer's output folder: the runs are one and two levels below it
    output = tmp_path / "out"
    _run(output / "gradlab_logs", loss=LOSS)
    for index in range(4):
        _run(output / "sweep" / f"run{index}", loss=LOSS)
    with pytest.raises(GradlabError) as caught:
        load_runs([output])
    shown = [output / "gradlab_logs", *(output / "sweep" / f"run{i}" for i in range(2))]
    assert str(caught.value) == (  # the first three of five, nearest first
        f"run_dir must hold a metrics.jsonl written by gradlab.Monitor; got {str(output)!r}, "
        f"which holds no metrics.jsonl; runs below it: "
        f"{', '.join(repr(str(path)) for path in shown)} and 2 more"
    )
    (tmp_path / "empty").mkdir()
    with pytest.raises(GradlabError) as caught:  # nothing below: nothing named
        load_runs([tmp_path / "empty"])
    assert str(caught.value).endswith(f"got {str(tmp_path / 'empty')!r}, which holds no "
                                      "metrics.jsonl")  # fmt: skip
    (tmp_path / "odd" / "metrics.jsonl").mkdir(parents=True)  # said without a reason before
    with pytest.raises(GradlabError) as caught:
        load_runs([tmp_path / "odd"])
    assert str(caught.value).endswith(f"got {str(tmp_path / 'odd')!r}, whose metrics.jsonl is a "
                                      "folder, not a file")  # fmt: skip
    with pytest.raises(GradlabError) as caught:  # a path that is not there says so
        load_runs([tmp_path / "typo"])
    assert str(caught.value).endswith(f"got {str(tmp_path / 'typo')!r}, which does not exist")


def test_runs_below_a_folder_are_looked_for_two_levels_deep_and_listed_in_full_up_to_three(
    tmp_path,
):
    output = tmp_path / "out"
    _run(output / "a" / "b" / "c", loss=LOSS)  # three levels below: not looked for
    with pytest.raises(GradlabError) as caught:
        load_runs([output])
    assert str(caught.value).endswith(f"got {str(output)!r}, which holds no metrics.jsonl")
    runs = [output / name for name in ("r0", "r1", "r2")]
    for count, run in enumerate(runs, start=1):  # one, two, three runs: each named, no "more"
        _run(run, loss=LOSS)
        with pytest.raises(GradlabError) as caught:
            load_runs([output])
        named = ", ".join(repr(str(path)) for path in runs[:count])
        assert str(caught.value).endswith(f"; runs below it: {named}"), count
    _run(output / "r3", loss=LOSS)  # a fourth: the first three named, "and 1 more"
    with pytest.raises(GradlabError) as caught:
        load_runs([output])
    named = ", ".join(repr(str(path)) for path in runs)
    assert str(caught.value).endswith(f"; runs below it: {named} and 1 more")


def _legend_columns(legend) -> int:
    """Columns of a drawn legend: the distinct left edges of its texts."""
    return len({round(text.get_window_extent().x0) for text in legend.get_texts()})


def _legends(figures):
    return figures["overview"].legends[0], figures["loss"].axes[0].get_legend()


@pytest.mark.slow
def test_the_legend_of_many_runs_wraps_inside_a_one_panel_overview(tmp_path, monkeypatch):
    # eight runs of a sweep, each named as a person would: one row of them would be wider
    # than the panel and the PNG, shrunk to the docs' page, would show its text too small
    runs = [_run(tmp_path / f"temperature 0.0{index + 1}, seed {index}",
                 loss=[value + 0.05 * index for value in LOSS]) for index in range(8)]  # fmt: skip
    figures, _ = _drawn(monkeypatch, runs, tmp_path / "figs")
    for figure, legend in zip(figures.values(), reversed(_legends(figures)), strict=True):
        figure.canvas.draw()
        inside, extent = figure.bbox.padded(1.0), legend.get_window_extent()
        assert inside.x0 <= extent.x0 and extent.x1 <= inside.x1
        assert len(legend.get_texts()) == 8
        assert layout_problems(figure) == []
    _close(figures)


@pytest.mark.slow
@pytest.mark.parametrize(("name", "overview", "family"), [
    ("run {}", 4, 3),  # short names: every column the figures allow
    ("lr 0.001, seed {}", 2, 3),  # the overview's panel holds two of these side by side
    ("a run named after every setting of its sweep: learning rate 0.001, batch 256, "
     "warm-up 500 steps, seed {}", 1, 1),  # wider than either figure: one column, no fewer
])  # fmt: skip
def test_legends_keep_as_many_columns_as_fit(tmp_path, monkeypatch, name, overview, family):
    runs = [_run(tmp_path / name.format(index), loss=[v + 0.05 * index for v in LOSS])
            for index in range(8)]  # fmt: skip
    figures, _ = _drawn(monkeypatch, runs, tmp_path / "figs")
    for figure in figures.values():
        figure.canvas.draw()
    assert [_legend_columns(legend) for legend in _legends(figures)] == [overview, family]
    _close(figures)


@pytest.mark.slow
def test_the_modality_gap_is_a_distance_on_its_own_axis_not_a_share(tmp_path, monkeypatch):
    # the gap lies in [0, 2]: on the collapse panel's "share" axis (1: spread) it misread
    run = _run(tmp_path / "clip", geometry_effective_rank_share=[0.6, 0.7, 0.8, 0.9],
               geometry_modality_gap=[1.2, 1.0, 0.8, 0.7])  # fmt: skip
    figures, _ = _drawn(monkeypatch, [run], tmp_path / "figs")
    gap, collapse = figures["geometry_modality_gap"].axes[0], figures["geometry_collapse"].axes[0]
    assert gap.get_ylabel() == "distance" and _lines(gap)[0][1] == [1.2, 1.0, 0.8, 0.7]
    assert collapse.get_ylabel() == "1: spread evenly, near 0: collapsed"
    assert len(_lines(collapse)) == 1
    _close(figures)


@pytest.mark.slow
def test_whole_counts_are_ticked_at_whole_numbers_and_shares_are_not(tmp_path, monkeypatch):
    # a reader of "queries: 0.5" looks for half a query
    run = _run(tmp_path / "run", queries_without_gradient=[0, 1, 2, 1],
               p_seed=[0.05, 0.95, 0.5, 0.3], loss=[1, 10, 100, 10000])  # fmt: skip
    figures, _ = _drawn(monkeypatch, [run], tmp_path / "figs")

    def ticks(name):
        axis = figures[name].axes[0]
        low, high = axis.get_ylim()
        return [t for t in axis.get_yticks() if low <= t <= high]

    assert len(ticks("gradient_counts")) >= 2
    assert all(t == int(t) for t in ticks("gradient_counts"))
    assert any(t != int(t) for t in ticks("operating_region"))  # shares keep their tenths
    # whole numbers over decades stay on a log axis, ticked at powers of ten
    assert figures["loss"].axes[0].get_yscale() == "log"
    assert all(math.log10(t) == int(math.log10(t)) for t in ticks("loss"))
    _close(figures)


# ---- keys of one run that lie on one another, sizes and the width of a legend ----------------


def _marked_steps(axis, steps):
    """The steps each line of ``axis`` marks: every step when it sets no ``markevery``."""
    marked = []
    for line in axis.get_lines():
        every = line.get_markevery()
        start, stride = (0, 1) if every is None else every
        marked.append(set(range(start, steps, stride)))
    return marked


def test_two_keys_of_one_run_that_lie_on_one_another_each_mark_every_other_step(tmp_path):
    # P and P without the diagonal equal at every step: drawn on top of each other, the first
    # one's markers would be hidden by the second's; each marks its own half of the steps
    steps = 8
    values = [0.5 / (s + 1) for s in range(steps)]
    runs = load_runs([_run(tmp_path / "a", p_seed=values, p_off_diagonal=values)])
    figure, axis = plt.subplots(figsize=(3, 2))
    draw_family(axis, "operating_region", ["p_seed", "p_off_diagonal"], runs)
    first, second = _marked_steps(axis, steps)
    assert first == set(range(0, steps, 2)) and second == set(range(1, steps, 2))
    assert all(line.get_marker() not in ("", "None", None) for line in axis.get_lines())
    plt.close(figure)


def test_two_keys_of_one_run_apart_mark_every_step(tmp_path):
    # P 0.5, 0.25, ... and P without the diagonal 0.4, 0.2, ...: 20 % apart at every step
    runs = load_runs([_run(tmp_path / "a", p_seed=P_SEED, p_off_diagonal=[0.4, 0.2, 0.1, 0.05])])
    figure, axis = plt.subplots(figsize=(3, 2))
    draw_family(axis, "operating_region", ["p_seed", "p_off_diagonal"], runs)
    assert [line.get_markevery() for line in axis.get_lines()] == [None, None]
    assert _marked_steps(axis, 4) == [set(range(4))] * 2
    plt.close(figure)


@pytest.mark.slow
def test_every_legend_of_the_figures_has_one_text_size(tmp_path, monkeypatch):
    # the overview's panels and the family figures: one size of legend text on the page
    run = _run(tmp_path / "a", loss=LOSS, p_seed=P_SEED, p_off_diagonal=P_SEED)
    figures, _ = _drawn(monkeypatch, [run], tmp_path / "figs")
    legends = [axis.get_legend() for figure in figures.values() for axis in figure.axes]
    sizes = {text.get_fontsize() for legend in legends if legend for text in legend.get_texts()}
    assert sizes == {monitor_plots.LEGEND_FONTSIZE}
    assert all(axis.get_legend() is not None for axis in figures["overview"].axes)
    _close(figures)


def test_each_family_figure_has_the_family_size(tmp_path, monkeypatch):
    run = _run(tmp_path / "a", loss=LOSS, p_seed=P_SEED)
    figures, _ = _drawn(monkeypatch, [run], tmp_path / "figs", overview=False)
    assert sorted(figures) == ["loss", "operating_region"]
    for figure in figures.values():
        assert tuple(figure.get_size_inches()) == pytest.approx(monitor_plots.FAMILY_FIGSIZE)
    _close(figures)


def test_a_legend_exactly_as_wide_as_its_figure_keeps_its_columns():
    # "no wider than the figure": a legend spread over the figure's full width (mode expand,
    # no pad) is as wide as the figure, not wider, and is not drawn again with fewer columns
    figure = plt.figure(figsize=(4, 2))
    asked = []

    def make_legend(columns):
        asked.append(columns)
        legend = figure.legend([Line2D([], [])] * 3, ["a", "b", "c"], ncols=columns,
                               mode="expand", loc="lower left", bbox_to_anchor=(0, 0, 1, 1),
                               bbox_transform=figure.transFigure, borderaxespad=0)  # fmt: skip
        figure.canvas.draw()  # the expanded width is laid out when drawn
        return legend

    legend = monitor_plots.fit_width(figure, make_legend, 3)
    assert legend.get_window_extent().width == figure.bbox.width
    assert asked == [3] and figure.legends == [legend]
    plt.close(figure)


def test_two_runs_diverging_at_one_step_show_a_cross_each_in_their_colours():
    # an overlay's crosses were one red series: which run had diverged could not be told
    runs = [("a", [{"step": s, "loss": v} for s, v in enumerate([0.9, math.nan, 0.5])]),
            ("b", [{"step": s, "loss": v} for s, v in enumerate([0.8, 0.7, 0.6])]),
            ("c", [{"step": s, "loss": v} for s, v in enumerate([0.7, math.inf, 1e301])])]
    axis = plt.subplots()[1]
    draw_family(axis, "loss", ["loss"], runs)
    crosses = [line for line in axis.get_lines() if line.get_marker() == "x"]
    assert [(to_rgb(line.get_color()), list(line.get_xdata()), list(line.get_ydata()))
            for line in crosses] == [(PALETTE[0], [1], [0.0]),
                                     (PALETTE[2], [1, 2], [0.0, 0.0])]  # fmt: skip
    axis.figure.canvas.draw()  # on the display: run a's on the frame's edge, c's below it
    bottom = axis.get_window_extent().y0
    shown = [line.get_transform().transform([(1, 0.0)])[0, 1] for line in crosses]
    points = axis.figure.dpi / 72
    assert shown == pytest.approx([bottom, bottom - 8 * points])
    assert all(not line.get_clip_on() for line in crosses)
    ticks = axis.xaxis.get_major_ticks()[0]  # the step labels moved down by the extra row
    assert ticks.get_pad() == plt.rcParams["xtick.major.pad"] + 8
    assert axis.yaxis.get_major_ticks()[0].get_pad() == plt.rcParams["ytick.major.pad"]
    assert {line.get_label() for line in crosses} == {
        "undefined (NaN), infinite or beyond 1e300 at this step (in its run's colour)"}
    alone = plt.subplots()[1]  # one run: red, on the frame's edge, as before
    draw_family(alone, "loss", ["loss"], runs[2:])
    (cross,) = [line for line in alone.get_lines() if line.get_marker() == "x"]
    assert (cross.get_color(), list(cross.get_ydata()), cross.get_label()) == (
        "#c0392b", [0.0, 0.0], "undefined (NaN), infinite or beyond 1e300 at this step")
    plt.close("all")


@pytest.mark.slow
def test_rows_of_crosses_push_the_step_labels_and_legends_down_not_into_each_other(
    tmp_path, monkeypatch
):
    # rows of crosses below the frame moved the step labels onto the legend
    runs = [_run(tmp_path / name, loss=values) for name, values in (
        ("a", [0.9, "NaN", 0.5, 0.4]), ("b", [0.8, 0.7, 0.6, 0.5]),
        ("c", ["Infinity", "NaN", 0.5, 0.4]), ("d", ["NaN"] * 4))]  # fmt: skip
    figures, _ = _drawn(monkeypatch, runs, tmp_path / "figs")
    for name in ("loss", "overview"):
        figure = figures[name]
        figure.canvas.draw()
        renderer = figure.canvas.get_renderer()
        axis = figure.axes[0]
        crosses = [line for line in axis.get_lines() if line.get_marker() == "x"]
        assert len(crosses) == 3, name  # a, c and d each on a row
        lowest = min(line.get_window_extent(renderer).y0 for line in crosses)
        labels = [tick.get_window_extent(renderer) for tick in axis.get_xticklabels()
                  if tick.get_text()]  # fmt: skip
        assert max(box.y1 for box in labels) < lowest, name  # the step labels below the rows
        top = max(text.get_window_extent(renderer).y1 for text in axis.get_legend().get_texts())
        assert top < axis.xaxis.label.get_window_extent(renderer).y0, name  # the legend below
        # moved by the two extra rows exactly: its anchor 16 points below where it would be
        anchor = axis.get_legend().get_bbox_to_anchor()
        below = {"loss": -0.16, "overview": -0.2}[name]  # where each figure puts its legend
        expected = axis.transAxes.transform((0.5, below))[1] - 16 * figure.dpi / 72
        assert anchor.y0 == pytest.approx(expected, rel=1e-12, abs=0), name
    _close(figures)


@pytest.mark.slow
def test_one_runs_crosses_are_named_in_the_legend_as_red_crosses(tmp_path, monkeypatch):
    run = _run(tmp_path / "a", loss=[0.9, "NaN", 0.5, 0.4], p_seed=P_SEED)
    figures, _ = _drawn(monkeypatch, [run], tmp_path / "figs")
    for name in ("loss", "overview"):
        legend = figures[name].axes[0].get_legend()
        entry, text = legend.legend_handles[-1], legend.get_texts()[-1]
        assert (text.get_text(), entry.get_marker(), entry.get_linestyle(), entry.get_color()) \
            == ("undefined (NaN), infinite or beyond 1e300 at this step", "x", "None",
                "#c0392b"), name
        axis = figures[name].axes[0]  # one row, on the frame's edge: the legend where it was
        figures[name].canvas.draw()
        below = {"loss": -0.16, "overview": -0.2}[name]
        assert legend.get_bbox_to_anchor().y0 == pytest.approx(
            axis.transAxes.transform((0.5, below))[1], rel=1e-12, abs=0), name
    assert "NaN" not in " ".join(  # only where a drawn key was not finite
        text.get_text() for text in figures["operating_region"].axes[0].get_legend().get_texts())
    _close(figures)


def _run_at(folder, tau, preset):
    generator = torch.Generator().manual_seed(0)
    with gradlab.Monitor(folder, tau=tau, preset=preset, every=1) as monitor:
        loss_fn = monitor.watch(gradlab.SmoothAPLoss(tau))
        for _ in range(2):
            embeddings = torch.randn(8, 4, generator=generator, requires_grad=True)
            loss_fn(embeddings, torch.arange(8) % 2).backward()
            monitor.step()
    return folder


@pytest.mark.slow
def test_runs_logged_at_different_taus_are_said_not_to_compare_where_tau_matters(tmp_path):
    # P and the gradient counts of runs at tau 0.01 and 0.05 were overlaid without a word
    first = _run_at(tmp_path / "a", 0.01, "default")
    second = _run_at(tmp_path / "b", 0.05, "default")
    with pytest.warns(UserWarning) as caught:
        plot_runs([first, second], out=tmp_path / "figures", overview=False)
    mixed = [w for w in caught if "different taus" in str(w.message)]
    assert [w.filename for w in mixed] == [__file__]  # the plot_runs call
    mixed = [str(w.message) for w in mixed]
    assert mixed == [
        # the runs as the legend names them (their folders' names), not by their paths
        f"these logs were written at different taus ({first.name}: 0.01; {second.name}: 0.05): "
        "operating_region, gradient_counts, gradient_count_mean depend on tau (SmoothAP's "
        "sigmoid width), so their lines do not compare across them"
    ]
    same = _run_at(tmp_path / "c", 0.01, "default")
    cheap = [_run_at(tmp_path / "d", 0.01, "cheap"), _run_at(tmp_path / "e", 0.05, "cheap")]
    for pair in ([first, same], cheap):  # one tau, or no family that reads it
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            plot_runs(pair, out=tmp_path / "quiet", overview=False)
        assert not [w for w in caught if "different taus" in str(w.message)]


def test_runs_at_different_taus_carry_their_tau_in_the_legend(tmp_path, monkeypatch):
    # the figures of runs at taus 0.01 and 0.1 showed P five times apart, and only a warning
    # on stderr said why: the PNG now says it too
    runs = [_log(tmp_path / name, ({"config": {"tau": tau}}, _records(loss=LOSS, p_seed=P_SEED)))
            for name, tau in (("a", 0.01), ("b", 0.1))]  # fmt: skip
    resumed = _log(tmp_path / "c", ({"config": {"tau": 0.01}}, _records(loss=LOSS)),
                   ({"config": {"tau": 0.05}, "resumed": {"from_step": 4}},
                    [{"step": 4, "loss": 0.5, "p_seed": 0.1}]))  # fmt: skip
    bare = _log(tmp_path / "d", (None, _records(loss=LOSS, p_seed=P_SEED)))
    with pytest.warns(UserWarning):
        figures, _ = _drawn(monkeypatch, [*runs, resumed, bare], tmp_path / "figs")
    assert _legend_texts(figures["loss"].axes[0].get_legend()) == [
        "a (tau 0.01)", "b (tau 0.1)", "c (tau 0.01, 0.05)", "d"]
    _close(figures)
    same = [_log(tmp_path / name, ({"config": {"tau": 0.01}}, _records(loss=LOSS, p_seed=P_SEED)))
            for name in ("e", "f")]  # fmt: skip
    figures, _ = _drawn(monkeypatch, same, tmp_path / "figs2")
    assert _legend_texts(figures["loss"].axes[0].get_legend()) == ["e", "f"]
    _close(figures)


def test_a_log_without_a_header_is_drawn_and_said_to_have_unknown_settings(tmp_path):
    # a metrics.jsonl cut of its header was drawn beside another run without a word, and the
    # tau comparison skipped it
    bare, cut = (_log(tmp_path / name, (None, _records(loss=LOSS, p_seed=P_SEED)))
                 for name in ("bare", "cut"))  # fmt: skip
    headed = _log(tmp_path / "headed", ({"config": {"tau": 0.1}},
                                        _records(loss=LOSS, p_seed=P_SEED)))  # fmt: skip
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        written = plot_runs([bare, headed, cut], out=tmp_path / "figures", overview=False)
    said = [(str(w.message), w.filename) for w in caught if "no header line" in str(w.message)]
    assert said == [(
        "bare, cut: no header line before the logged steps (gradlab.Monitor writes one first, with "
        "the run's settings): tau, preset and schedules unknown, so no tau is compared with "
        "the other runs' or said on the figures; drawn as logged", __file__)]
    assert tmp_path / "figures" / "loss.png" in written
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        plot_runs([headed], out=tmp_path / "alone", overview=False)
    assert not [w for w in caught if "no header line" in str(w.message)]


@pytest.mark.slow
def test_the_taus_warning_names_the_runs_by_their_labels_when_given(tmp_path):
    # it named the runs by their full paths, though the legends said "a" and "b"
    first = _run_at(tmp_path / "a", 0.01, "default")
    second = _run_at(tmp_path / "b", 0.05, "default")
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        plot_runs([first, second], out=tmp_path / "figures", overview=False,
                  labels=["tau 0.01", "tau 0.05"])  # fmt: skip
    assert [str(w.message) for w in caught if "different taus" in str(w.message)] == [
        "these logs were written at different taus (tau 0.01: 0.01; tau 0.05: 0.05): "
        "operating_region, gradient_counts, gradient_count_mean depend on tau (SmoothAP's "
        "sigmoid width), so their lines do not compare across them"]


@pytest.mark.slow
def test_a_run_left_out_for_logging_no_step_is_not_named_among_the_taus(tmp_path):
    # an empty run at tau 0.05 was left out of the figures but named in the taus warning
    first = _run_at(tmp_path / "a", 0.01, "default")
    same = _run_at(tmp_path / "b", 0.01, "default")
    gradlab.Monitor(tmp_path / "empty", tau=0.05, preset="default", every=1).close()
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        plot_runs([first, same, tmp_path / "empty"], out=tmp_path / "figures", overview=False)
    assert [str(w.message) for w in caught if "logged step" in str(w.message)] == [
        f"{tmp_path / 'empty' / 'metrics.jsonl'} holds no logged step {NONE_LOGGED}: drawn "
        "without it"]
    assert not [w for w in caught if "different taus" in str(w.message)]
    # a resumption that logged no step, at another tau: a header alone (gradlab 0.1 wrote one;
    # the Monitor now leaves the run as it was)
    log = first / "metrics.jsonl"
    header = json.loads(log.read_text().splitlines()[0])
    header["header"]["config"]["tau"] = 0.05
    with log.open("a") as handle:
        handle.write(json.dumps(header) + "\n")
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        plot_runs([first], out=tmp_path / "again", overview=False)
    assert not [w for w in caught if "different taus" in str(w.message)]


@pytest.mark.slow
def test_a_run_resumed_at_another_tau_names_both_of_its_taus(tmp_path):
    first = _run_at(tmp_path / "a", 0.01, "default")
    resumed = gradlab.Monitor(first, tau=0.05, preset="default", every=1, resume=True)
    with resumed as monitor, pytest.warns(UserWarning, match=r"other settings \(tau 0.01 -> "):
        loss_fn = monitor.watch(gradlab.SmoothAPLoss(0.05))
        embeddings = torch.randn(8, 4, generator=torch.Generator().manual_seed(1),
                                 requires_grad=True)  # fmt: skip
        loss_fn(embeddings, torch.arange(8) % 2).backward()
        monitor.step()
    with pytest.warns(UserWarning) as caught:
        plot_runs([first], out=tmp_path / "figures", overview=False)
    assert [str(w.message) for w in caught if "different taus" in str(w.message)] == [
        f"these logs were written at different taus ({first.name}: 0.01, 0.05): operating_region, "
        "gradient_counts, gradient_count_mean depend on tau (SmoothAP's sigmoid width), so "
        "their lines do not compare across them"
    ]


@pytest.mark.parametrize("kind", ["fifo", "dangling link", "folder"])
def test_a_metrics_jsonl_that_is_no_file_is_named_for_what_it_is(tmp_path, kind):
    # a FIFO was called a folder, and a link to nothing "no metrics.jsonl"
    run = tmp_path / "run"
    run.mkdir()
    log = run / "metrics.jsonl"
    if kind == "fifo":
        os.mkfifo(log)
    elif kind == "dangling link":
        log.symlink_to(tmp_path / "gone.jsonl")
    else:
        log.mkdir()
    said = {"fifo": "whose metrics.jsonl is not a regular file",
            "dangling link": f"whose metrics.jsonl is a link to {str(tmp_path / 'gone.jsonl')!r}, "
                             "which does not exist",
            "folder": "whose metrics.jsonl is a folder, not a file"}[kind]  # fmt: skip
    with pytest.raises(GradlabError) as caught:
        plot_runs([run], out=tmp_path / "figures")
    assert str(caught.value) == (
        f"run_dir must hold a metrics.jsonl written by gradlab.Monitor; got {str(run)!r}, {said}")


def test_a_log_with_no_key_at_all_and_one_with_two_unknown_keys_are_refused_in_words(tmp_path):
    steps_only = _log(tmp_path / "steps", ({"run": 1}, [{"step": 0}, {"step": 1}]))
    with pytest.raises(GradlabError) as refused:
        plot_runs([steps_only], tmp_path / "figs")
    assert str(refused.value) == (
        f"the logs of [{str(steps_only)!r}] hold no key that a figure family draws (nor any key "
        "of a quantity of your own)")
    two = _run(tmp_path / "two", mine_a=[1.0, 2.0], mine_b=[0.5, 0.25])
    with pytest.raises(GradlabError) as refused:
        plot_runs([two], tmp_path / "figs2")
    assert str(refused.value) == (
        f"the logs of [{str(two)!r}] hold no key that a figure family draws: mine_a, mine_b "
        f"{UNDRAWN_HINT}")


def _run_of(folder, loss_fn, preset="default"):
    generator = torch.Generator().manual_seed(0)
    with gradlab.Monitor(folder, preset=preset, every=1) as monitor:  # tau: not given
        watched = monitor.watch(loss_fn)
        for _ in range(2):
            embeddings = torch.randn(8, 4, generator=generator, requires_grad=True)
            unit = torch.nn.functional.normalize(embeddings, dim=1)
            if isinstance(loss_fn, gradlab.SmoothAPLoss):
                watched(embeddings, torch.arange(8) % 2).backward()
            else:
                watched(unit @ unit.T / 0.1, torch.arange(8) % 2).backward()
            monitor.step()
    return folder


@pytest.mark.slow
def test_the_sigmoid_families_of_a_loss_without_a_tau_say_so_in_their_titles(tmp_path,
                                                                            monkeypatch):
    # an NT-Xent run drew P and the gradient counts (SmoothAP's sigmoid at gradlab's default
    # tau) under the same titles as a SmoothAP run's, as if they described its gradient
    ntxent = _run_of(tmp_path / "ntxent", gradlab.NTXentLoss(0.1))
    smooth = _run_of(tmp_path / "smooth", gradlab.SmoothAPLoss(0.05))
    sigmoid = sorted(family for family in ("operating_region", "gradient_counts",
                                           "gradient_count_mean"))  # fmt: skip
    titles = {}
    for name, run in (("ntxent", ntxent), ("smooth", smooth)):
        figures, _ = _drawn(monkeypatch, [run], out=tmp_path / f"{name}_figures")
        titles[name] = {stem: figure.axes[0].get_title().replace("\n", " ")
                        for stem, figure in figures.items() if stem in sigmoid}  # fmt: skip
        _close(figures)
    assert sorted(titles["ntxent"]) == sorted(titles["smooth"]) == sigmoid
    note = " [SmoothAP's sigmoid at the default tau 0.01: not this loss's gradient]"
    for family in sigmoid:
        assert titles["ntxent"][family] == titles["smooth"][family] + note
        assert "default tau" not in titles["smooth"][family]


def _default_tau_overlay(monkeypatch, runs, tmp_path) -> tuple[list[str], list[str]]:
    """The overlaid figures' titles and the warnings about runs at the default tau."""
    with pytest.warns(UserWarning) as caught:
        figures, _ = _drawn(monkeypatch, runs, out=tmp_path / "figures")
    titles = [figure.axes[0].get_title() for figure in figures.values()]
    _close(figures)
    return titles, [str(w.message) for w in caught if "sigmoid tau" in str(w.message)]


@pytest.mark.slow
def test_an_overlay_names_the_runs_whose_sigmoid_families_are_at_the_default_tau(tmp_path,
                                                                                monkeypatch):
    """Overlaid with a SmoothAP run, a warning names the NT-Xent run, and so do the titles of
    the sigmoid's families (they were plain: a figure alone read the NT-Xent run's counts as
    its gradient's); the other titles stay plain."""
    ntxent = _run_of(tmp_path / "ntxent", gradlab.NTXentLoss(0.1))
    smooth = _run_of(tmp_path / "smooth", gradlab.SmoothAPLoss(0.01))
    titles, said = _default_tau_overlay(monkeypatch, [ntxent, smooth], tmp_path)
    assert said == [f"{ntxent.name} was logged by a loss without a sigmoid tau: its lines of "
                    "operating_region, gradient_counts, gradient_count_mean measure SmoothAP's "
                    "sigmoid at gradlab's default tau, not that loss's gradient, and do not "
                    "compare with the other runs'"]
    note = f" [{ntxent.name}: SmoothAP's sigmoid at the default tau, not its loss's gradient]"
    noted = {title.replace("\n", " ") for title in titles if "default tau" in title}
    assert noted == {monitor_plots.PLOTS[family].title + note
                     for family in ("operating_region", "gradient_counts", "gradient_count_mean")}


@pytest.mark.slow
def test_an_overlay_names_every_run_at_the_default_tau_in_the_plural(tmp_path, monkeypatch):
    first = _run_of(tmp_path / "ntxent", gradlab.NTXentLoss(0.1))
    second = _run_of(tmp_path / "ntxent_2", gradlab.NTXentLoss(0.2))
    smooth = _run_of(tmp_path / "smooth", gradlab.SmoothAPLoss(0.01))
    _, said = _default_tau_overlay(monkeypatch, [first, second, smooth], tmp_path)
    assert said == [f"{first.name}, {second.name} were logged by a loss without a sigmoid "
                    "tau: their lines of operating_region, gradient_counts, gradient_count_mean "
                    "measure SmoothAP's sigmoid at gradlab's default tau, not that loss's "
                    "gradient, and do not compare with the other runs'"]


@pytest.mark.slow
def test_an_overlay_names_of_each_run_at_the_default_tau_only_the_families_it_logged(
        tmp_path, monkeypatch):
    # NT-Xent watched on its score matrix under the full preset logs no decomposition,
    # relaxation gap or gradient agreement (they need the embeddings): the warning named them
    # among "its lines" all the same, because the SmoothAP run drew them
    ntxent = _run_of(tmp_path / "ntxent", gradlab.NTXentLoss(0.1), preset="full")
    smooth = _run_of(tmp_path / "smooth", gradlab.SmoothAPLoss(0.01), preset="full")
    unserved = json.loads((ntxent / "metrics.jsonl").read_text().splitlines()[0])["header"][
        "not_logged"]
    assert {"decomposition", "relaxation_gap", "gradient_agreement"} <= set(unserved)
    _, said = _default_tau_overlay(monkeypatch, [ntxent, smooth], tmp_path)
    assert len(said) == 1
    lines = said[0].split("its lines of ")[1].split(" measure")[0].split(", ")
    assert "operating_region" in lines and "gradient_counts" in lines
    assert not any(line.startswith(("decomposition", "relaxation_gap", "gradient_agreement"))
                   for line in lines), lines  # fmt: skip


@pytest.mark.slow
def test_a_run_without_a_logged_step_is_not_named_as_one_at_the_default_tau(tmp_path,
                                                                             monkeypatch):
    smooth = _run_of(tmp_path / "smooth", gradlab.SmoothAPLoss(0.01))
    gradlab.Monitor(tmp_path / "empty").close()  # a header, no logged step: drawn without
    with pytest.warns(UserWarning) as caught:
        figures, _ = _drawn(monkeypatch, [smooth, tmp_path / "empty"], out=tmp_path / "figs")
    _close(figures)
    assert not [w for w in caught if "without a sigmoid tau" in str(w.message)]


def _titles_of(monkeypatch, run, out) -> dict[str, str]:
    """``{family: title}`` of the family figures plot_runs draws of ``run`` alone."""
    figures, _ = _drawn(monkeypatch, [run], out=out, overview=False)
    titles = {stem: figure.axes[0].get_title().replace("\n", " ")
              for stem, figure in figures.items()}  # fmt: skip
    _close(figures)
    return titles


def test_only_the_sigmoid_families_name_a_default_tau_and_only_one_that_is_a_number(
        tmp_path, monkeypatch):
    """A header's default tau that is no number (a hand-edited log) is named nowhere."""
    records = _records(loss=LOSS, p_seed=P_SEED)
    given = _titles_of(monkeypatch, _log(tmp_path / "given", (
        {"config": {"tau": 0.01, "tau_from": "argument"}}, records)), tmp_path / "given_figs")
    assert sorted(given) == ["loss", "operating_region"]
    note = " [SmoothAP's sigmoid at the default tau 0.01: not this loss's gradient]"
    for index, (tau, said) in enumerate([(0.01, note), (True, ""), ("0.01", ""), (None, "")]):
        run = _log(tmp_path / f"default{index}", (
            {"config": {"tau": tau, "tau_from": "default"}}, records))
        assert _titles_of(monkeypatch, run, tmp_path / f"figs{index}") == {
            "loss": given["loss"], "operating_region": given["operating_region"] + said}, tau


@pytest.mark.slow
def test_runs_at_the_default_tau_that_logged_other_families_are_named_apart(tmp_path,
                                                                             monkeypatch):
    """Two runs at the default tau, one of which logged the gradient counts too: one warning
    names each group with its families, and each title names the runs it draws at the default
    tau, in the plural for two. Their headers name no not_logged (a run that logged every
    quantity) and one schedule without keys (a hand-edited log: it adds no family)."""
    region = ["p_seed"]
    counts = ["gradient_count_mean", "queries_without_gradient"]
    default = {"config": {"tau": 0.01, "tau_from": "default"}}
    first = _log(tmp_path / "first", ({**default, "schedules": {
        "operating_region": {"schedule": "every(1)", "keys": region}}},
        _records(p_seed=P_SEED)))  # fmt: skip
    second = _log(tmp_path / "second", ({**default, "schedules": {
        "operating_region": {"schedule": "every(1)", "keys": region},
        "gradient_counts": {"schedule": "every(1)", "keys": counts},
        "hand_edited": {"schedule": "every(1)"}}},
        _records(p_seed=P_SEED, gradient_count_mean=LOSS)))  # fmt: skip
    given = _log(tmp_path / "given", ({"config": {"tau": 0.01, "tau_from": "argument"}},
                                      _records(p_seed=P_SEED, gradient_count_mean=LOSS)))
    with pytest.warns(UserWarning) as caught:
        figures, _ = _drawn(monkeypatch, [first, second, given], out=tmp_path / "figs",
                            labels=["A", "B", "C"], overview=False)  # fmt: skip
    titles = {stem: figure.axes[0].get_title().replace("\n", " ")
              for stem, figure in figures.items()}  # fmt: skip
    _close(figures)
    assert [str(w.message) for w in caught if "sigmoid tau" in str(w.message)] == [
        "A was logged by a loss without a sigmoid tau: its lines of operating_region measure "
        "SmoothAP's sigmoid at gradlab's default tau, not that loss's gradient, and do not "
        "compare with the other runs'; B was logged by a loss without a sigmoid tau: its lines "
        "of operating_region, gradient_count_mean measure SmoothAP's sigmoid at gradlab's "
        "default tau, not that loss's gradient, and do not compare with the other runs'"]
    plots = monitor_plots.PLOTS
    assert titles["operating_region"] == (plots["operating_region"].title + " [A, B: SmoothAP's "
                                          "sigmoid at the default tau, not their loss's "
                                          "gradient]")  # fmt: skip
    assert titles["gradient_count_mean"] == (plots["gradient_count_mean"].title + " [B: "
                                             "SmoothAP's sigmoid at the default tau, not its "
                                             "loss's gradient]")  # fmt: skip


def test_an_overlay_names_its_run_at_the_default_tau_by_its_label_at_the_call(tmp_path,
                                                                              monkeypatch):
    default = _log(tmp_path / "ntxent", ({"config": {"tau": 0.01, "tau_from": "default"}},
                                         _records(p_seed=P_SEED)))  # fmt: skip
    given = _log(tmp_path / "smooth", ({"config": {"tau": 0.01, "tau_from": "argument"}},
                                       _records(p_seed=P_SEED)))  # fmt: skip
    with pytest.warns(UserWarning) as caught:
        figures, _ = _drawn(monkeypatch, [default, given], out=tmp_path / "figs",
                            labels=["NT-Xent", "SmoothAP"], overview=False)  # fmt: skip
    _close(figures)
    assert [(str(w.message), w.filename) for w in caught] == [(
        "NT-Xent was logged by a loss without a sigmoid tau: its lines of operating_region "
        "measure SmoothAP's sigmoid at gradlab's default tau, not that loss's gradient, and do "
        "not compare with the other runs'", __file__)]


def test_read_jsonl_as_trained_reads_what_gradlab_plot_draws(tmp_path):
    # two readers of one rule (the library's read_jsonl, the figures' load_runs): random logs
    # of one run resumed at random steps, some behind its end, with steps set back within a
    # part, keep the same records in both
    import random

    from gradlab.monitor import read_jsonl

    generator = random.Random(0)
    for case in range(40):
        segments, tag, step = [], 0, 0
        for part in range(generator.randint(1, 4)):
            header = {"run": 1, **({"resumed": {"from_step": step}} if part else {})}
            if part:
                step = max(0, step - generator.randint(-2, 5))  # behind its end, or after
            records = []
            for _ in range(generator.randint(1, 6)):
                if generator.random() < 0.15:
                    step = max(0, step - generator.randint(0, 3))  # set back within the part
                tag += 1
                records.append({"step": step, "loss": float(tag)})
                step += 1
            segments.append((header, records))
        run = _log(tmp_path / f"log{case}", *segments)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            ((_, drawn),) = load_runs([run])
        _, trained = read_jsonl(run, as_trained=True)
        assert [(r["step"], r["loss"]) for r in drawn] == [
            (r["step"], r["loss"]) for r in trained], case
