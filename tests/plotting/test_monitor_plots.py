"""gradlab plot: runs overlaid (one colour per run), restarting logs split with a warning."""

import io
import json
import math
import re
import warnings
from itertools import pairwise

import matplotlib.pyplot as plt
import numpy as np
import pytest
import seaborn as sns
import torch
from matplotlib.colors import to_rgb

import gradlab.plotting.monitor as monitor_plots
from gradlab import GradlabError, Monitor, NTXentLoss
from gradlab.cli import main
from gradlab.monitor import Loss, Plot, Quantity, default_schedule, every, read_jsonl
from gradlab.plotting.monitor import draw_family, load_runs, plot_runs
from tests.helpers.figure_layout import captured_figures, hidden_series, layout_problems
from tests.helpers.home import home_and_work
from tests.helpers.training import train


def _run(log_dir, steps=4, preset="cheap", **options):
    with Monitor(log_dir, preset=preset, every=1, **options) as monitor:
        train(monitor, steps=steps)
    return log_dir


def _lines(runs, family):
    figure, axis = plt.subplots()
    keys = {"loss": ["loss"], "operating_region": ["p_seed", "p_off_diagonal"]}[family]
    draw_family(axis, family, keys, runs)
    lines = [(to_rgb(line.get_color()), line.get_linestyle(), list(line.get_xdata()))
             for line in axis.get_lines()]  # fmt: skip
    plt.close(figure)
    return lines


def test_two_runs_get_one_colour_each_and_keys_a_line_style_each(tmp_path):
    runs = load_runs([_run(tmp_path / "a", preset="default"),
                      _run(tmp_path / "b", preset="default", tau=0.1)])  # fmt: skip
    assert [label for label, _ in runs] == ["a", "b"]
    lines = _lines(runs, "operating_region")
    assert len(lines) == 4
    palette = [to_rgb(c) for c in sns.color_palette("colorblind", 2)]
    assert [colour for colour, _, _ in lines] == [palette[0], palette[0], palette[1], palette[1]]
    assert lines[0][1] != lines[1][1] and lines[0][1] == lines[2][1]


@pytest.mark.slow
def test_plot_command_overlays_runs_into_their_common_parent(tmp_path, capsys):
    _run(tmp_path / "a")
    _run(tmp_path / "b", tau=0.1)
    assert main(["plot", str(tmp_path / "a"), str(tmp_path / "b"), "--label", "tau 0.01",
                 "--label", "tau 0.1"]) == 0  # fmt: skip
    written = capsys.readouterr().out
    for name in ("overview.png", "loss.png", "embeddings.png"):
        assert f"wrote {tmp_path / 'figures' / name}" in written
        assert (tmp_path / "figures" / name).is_file()


@pytest.mark.slow
def test_legends_leave_the_data_visible(tmp_path, monkeypatch):
    runs = [_run(tmp_path / "a", preset="default"), _run(tmp_path / "b", preset="default", tau=0.1)]
    for selection in (runs, runs[:1]):
        with captured_figures(monkeypatch, monitor_plots) as figures:
            plot_runs(selection, tmp_path / "figures")
        # loss, norms, grads, P, counts (2), degenerate, 4 geometry, overview
        assert len(figures) == 12
        for figure in figures:
            assert layout_problems(figure) == [], figure.axes[0].get_title()
            labels = [t.get_text() for legend in [*figure.legends,
                      *(a.get_legend() for a in figure.axes)] if legend for t in legend.texts]
            assert all(label for label in labels)
            plt.close(figure)


def test_a_log_whose_steps_restart_is_split_with_a_warning(tmp_path):
    log = _run(tmp_path / "old") / "metrics.jsonl"
    log.write_text(log.read_text() * 2)  # two runs appended, as before runs were kept apart
    with pytest.warns(UserWarning, match="holds 2 runs whose steps restart"):
        runs = load_runs([tmp_path / "old"])
    assert [label for label, _ in runs] == ["old (run 1)", "old (run 2)"]
    for _, _, steps in _lines(runs, "loss"):
        assert steps == sorted(steps) == [0, 1, 2, 3]  # no line jumps back to the start


@pytest.mark.slow
def test_the_plot_command_prints_the_restart_warning(tmp_path, capsys, monkeypatch):
    log = _run(tmp_path / "old") / "metrics.jsonl"
    log.write_text(log.read_text() * 2)
    with captured_figures(monkeypatch, monitor_plots) as figures:
        assert main(["plot", str(tmp_path / "old")]) == 0
    assert len(figures) == 5 and all(plt.close(figure) is None for figure in figures)
    assert "steps restart" in capsys.readouterr().err


def test_a_resumed_run_is_one_line(tmp_path):
    _run(tmp_path / "run", steps=3)
    _run(tmp_path / "run", steps=2, resume=True)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        runs = load_runs([tmp_path / "run"])
    assert len(runs) == 1 and [r["step"] for r in runs[0][1]] == [0, 1, 2, 3, 4]


@pytest.mark.slow
def test_an_out_under_tilde_is_in_the_home_folder(tmp_path, monkeypatch):
    home, work = home_and_work(tmp_path, monkeypatch)
    written = plot_runs([_run(tmp_path / "run", steps=2)], "~/figures")
    assert home / "figures" / "overview.png" in written
    assert all(path.is_file() for path in written) and list(work.iterdir()) == []


def test_same_folder_names_are_told_apart_by_their_path(tmp_path):
    runs = load_runs([_run(tmp_path / "x" / "gradlab", 1), _run(tmp_path / "y" / "gradlab", 1)])
    assert [label for label, _ in runs] == ["x/gradlab", "y/gradlab"]


@pytest.mark.parametrize(
    ("arguments", "message"),
    [
        (lambda tmp: ([tmp / "missing"],), "run_dir must hold a metrics.jsonl"),
        (lambda tmp: ([],), "run_dirs must be a non-empty list"),
        (lambda tmp: ([_run(tmp / "a", 1)], None, ["one", "two"]), "labels must give one label"),
    ],
)
def test_bad_plot_calls_raise(tmp_path, arguments, message):
    with pytest.raises(GradlabError, match=message):
        plot_runs(*arguments(tmp_path))


def test_a_run_without_records_is_refused(tmp_path):
    Monitor(tmp_path / "empty").close()  # a header, no record
    with pytest.raises(GradlabError, match=r"holds no logged step \(a run that has not "
                                           r"logged yet, or one that logged nothing"):
        plot_runs([tmp_path / "empty"])
    assert main(["plot", str(tmp_path / "empty")]) == 2


@pytest.mark.parametrize("text", ["", "\n\n"])
def test_an_empty_log_is_refused_as_empty_and_left_out_beside_another(tmp_path, text):
    # it was said to hold no logged step, pointing at a header's not_logged it does not have
    (tmp_path / "empty").mkdir()
    (tmp_path / "empty" / "metrics.jsonl").write_text(text)
    said = (f"{tmp_path / 'empty' / 'metrics.jsonl'} is empty: no header and no record "
            "(gradlab.Monitor writes its header first")
    with pytest.raises(GradlabError, match=re.escape(said)):
        plot_runs([tmp_path / "empty"])
    with pytest.warns(UserWarning) as caught:  # first: the runs after it are still read
        runs = load_runs([tmp_path / "empty", _run(tmp_path / "run", 1)])
    assert [str(w.message) for w in caught] == [
        f"{said}: a file it did not write, or one cut off before its header): drawn without "
        "it"]
    assert [label for label, _ in runs] == ["run"]


@pytest.mark.parametrize(
    ("arguments", "message"),
    [
        (lambda run, tmp: [run, "--out", str(tmp / "a_file")], r"--out must .*an existing file"),
        (lambda run, tmp: [run, "--out", ""], r"--out must be a non-empty folder path; got ''$"),
        (lambda run, tmp: [run, "--label", ""], r"--label must be non-empty strings; got ''"),
        (lambda run, tmp: [run, run, "--label", "a", "--label", "a"], r"'a' more than once"),
        (lambda run, tmp: [run, f"{run}/metrics.jsonl"], r"name each run once; got .*run more"),
        (lambda run, tmp: [run, "--label", "a", "--label", "b"], r"one label per run \(1\)"),
    ],
)
def test_plot_user_errors_are_one_line_and_exit_2(tmp_path, capsys, arguments, message):
    run = str(_run(tmp_path / "run", 1))
    (tmp_path / "a_file").write_text("mine")
    assert main(["plot", *arguments(run, tmp_path)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith("gradlab: "), err
    assert re.search(message, err), err
    assert (tmp_path / "a_file").read_text() == "mine"


@pytest.mark.slow
@pytest.mark.parametrize("damage", ["truncate_last", "garbage_first"])
def test_plot_skips_a_broken_line_naming_file_and_line(tmp_path, capsys, monkeypatch, damage):
    log = _run(tmp_path / "run", 3) / "metrics.jsonl"
    text = log.read_text()
    log.write_text(text[:-15] if damage == "truncate_last" else "garbage{\n" + text)
    line = 4 if damage == "truncate_last" else 1  # header + 3 records; garbage is line 1
    with captured_figures(monkeypatch, monitor_plots) as figures:
        assert main(["plot", str(tmp_path / "run"), "--out", str(tmp_path / "figs")]) == 0
    assert all(plt.close(figure) is None for figure in figures)
    assert f"{log}:{line}: skipped a line that is not valid JSON" in capsys.readouterr().err


def _figures(monkeypatch, run_dirs, **options):
    with captured_figures(monkeypatch, monitor_plots) as figures:
        plot_runs(run_dirs, **options)
    plt.close(figures[-1])  # the overview
    return {figure.axes[0].get_title().replace("\n", " "): figure for figure in figures[:-1]}


@pytest.mark.slow
def test_legends_are_human_labels_and_panels_say_what_they_count(tmp_path, monkeypatch):
    run = _run(tmp_path / "run", steps=3, preset="full")
    figures = _figures(monkeypatch, [run], out=tmp_path / "figs")
    for title, figure in figures.items():
        assert layout_problems(figure) == [], title
        texts = [t.get_text() for t in figure.axes[0].get_legend().texts]
        assert texts and not any("_" in text for text in texts), (title, texts)
        plt.close(figure)
    titles = " | ".join(figures)
    assert "Batches in which no query has a positive" not in titles
    assert "no query has both a positive and a negative" in titles
    assert "Queries without gradient entries" not in titles
    assert "no entry in the sigmoid's operating region (Bleeker & de Rijke's count" in titles
    assert monitor_plots.key_label("p_off_diagonal") == "P without the diagonal"
    assert monitor_plots.key_label("new_thing_q50") == "new thing (median)"  # fallback


@pytest.mark.slow
def test_norms_and_gradient_norms_have_separate_axes(tmp_path, monkeypatch):
    figures = _figures(monkeypatch, [_run(tmp_path / "run", steps=3)], out=tmp_path / "figs")
    for figure in figures.values():
        keys = {t.get_text() for t in figure.axes[0].get_legend().texts}
        assert not ({"mean norm"} <= keys and {"gradient norm (whole batch)"} <= keys)
        plt.close(figure)
    assert "Embedding norms" in figures and "Gradient of the loss w.r.t. the embeddings" in figures


@pytest.mark.slow  # trains with the full preset and draws every family: seconds
def test_counts_and_shares_start_at_zero(tmp_path, monkeypatch):
    run = _run(tmp_path / "run", steps=3, preset="full")  # no degenerate batch: all zero
    figures = _figures(monkeypatch, [run], out=tmp_path / "figs")
    for title, figure in figures.items():
        bottom, top = figure.axes[0].get_ylim()
        if title.startswith(("Batches without", "Queries with no entry", "Operating-region")):
            assert bottom == -0.03 * top, (title, bottom)  # a zero line shows above the frame
            assert not [p for p in hidden_series(figure) if "frame" in p], title
        if title.startswith("Batches without"):
            assert top == 1, (title, top)  # all zero: 0..1, not -0.04..0.04
        plt.close(figure)


@pytest.mark.slow
def test_identical_runs_both_stay_visible_without_a_marker_on_every_step(tmp_path):
    steps = 24
    runs = load_runs([_run(tmp_path / "a", steps), _run(tmp_path / "b", steps)])
    figure, axis = plt.subplots()
    draw_family(axis, "loss", ["loss"], runs)
    first, second = axis.get_lines()
    assert list(first.get_ydata()) == list(second.get_ydata())  # the same series
    assert hidden_series(figure) == []  # the first run's markers show beside the second's
    marked = [set(range(line.get_markevery()[0], steps, line.get_markevery()[1]))
              for line in (first, second)]  # fmt: skip
    assert not marked[0] & marked[1]  # the runs mark different steps
    assert all(len(m) <= steps // 2 for m in marked)  # not a marker on every step
    assert first.get_marker() != second.get_marker()
    assert first.get_markerfacecolor() != "none"  # small filled markers, not large open ones
    for line in (first, second):  # a mutant: every step marked, the same size, the first hidden
        line.set_markevery(None)
    assert hidden_series(figure) == ["panel 0: series line 0 is hidden under line 1"]
    plt.close(figure)


class Spread(Quantity):
    """A quantity defined here: the spread of the scores, with a figure family of its own."""

    name = "score_spread"
    needs = frozenset({"scores"})
    keys = ("score_spread",)
    plots = (Plot("score_spread", "Spread of the scores", "standard deviation",
                  (("score_spread", "std of all scores"),), zero_based=True),)  # fmt: skip

    def compute(self, batch):
        return {"score_spread": batch.scores.std()}


class Undrawn(Spread):
    """The same values without a figure family: nothing to draw them with."""

    name = "undrawn"
    keys = ("undrawn",)
    plots = ()

    def compute(self, batch):
        return {"undrawn": batch.scores.std()}


def _spread_axis(figures):
    (figure,) = figures.values()
    axis = figure.axes[0]
    bottom, top = axis.get_ylim()
    drawn = (axis.get_title(), axis.get_ylabel(), bottom == -0.03 * top,  # from 0
             [t.get_text() for t in axis.get_legend().texts])  # fmt: skip
    plt.close(figure)
    return drawn


SPREAD_DRAWN = ("Spread of the scores", "standard deviation", True, ["std of all scores"])


def test_a_users_quantity_is_drawn_from_its_own_plot_declaration(tmp_path, monkeypatch):
    run = _run(tmp_path / "run", steps=3, preset=None, quantities=[Spread()])
    figures = _figures(monkeypatch, [run], out=tmp_path / "figs", quantities=[Spread])
    assert _spread_axis(figures) == SPREAD_DRAWN
    with pytest.raises(GradlabError, match="quantities must be a list of Quantity classes"):
        plot_runs([run], quantities=["score_spread"])


def test_a_users_plot_family_is_drawn_from_the_run_header_without_its_class(
    tmp_path, monkeypatch
):
    # gradlab plot (the CLI) cannot import the user's class: it drew none of its families
    run = _run(tmp_path / "run", steps=3, preset=None, quantities=[Spread()])
    headers, _ = read_jsonl(run / "metrics.jsonl")
    assert headers[0]["plots"] == [{
        "family": "score_spread", "title": "Spread of the scores",
        "ylabel": "standard deviation", "series": [["score_spread", "std of all scores"]],
        "zero_based": True, "resolution": 0.0}]  # fmt: skip
    figures = _figures(monkeypatch, [run], out=tmp_path / "figs")
    assert _spread_axis(figures) == SPREAD_DRAWN
    undrawn = _run(tmp_path / "undrawn", steps=3, preset=None, quantities=[Undrawn()])
    assert "plots" not in read_jsonl(undrawn / "metrics.jsonl")[0][0]
    with pytest.raises(GradlabError, match="hold no key that a figure family draws: "):
        plot_runs([undrawn], out=tmp_path / "without")


class Renamed(Spread):
    """Spread's values under another key and family: a resumption that changed them."""

    name = "score_spread"
    keys = ("score_spread_again",)
    plots = (Plot("spread_again", "Spread again", "standard deviation",
                  (("score_spread_again", "std again"),)),)  # fmt: skip

    def compute(self, batch):
        return {"score_spread_again": batch.scores.std()}


def test_a_resumed_run_draws_the_families_of_every_header(tmp_path, monkeypatch):
    # the last header's families alone were drawn: the first run's logged steps were lost
    run = _run(tmp_path / "run", steps=2, preset=None, quantities=[Spread()])
    _run(run, steps=2, preset=None, quantities=[Renamed()], resume=True)
    figures = _figures(monkeypatch, [run], out=tmp_path / "figs")
    assert sorted(figures) == ["Spread again", "Spread of the scores"]
    for figure in figures.values():
        plt.close(figure)


class Retitled(Spread):
    """Spread with its family's title and legend label corrected: a resumption's."""

    plots = (Plot("score_spread", "Spread of all the scores", "standard deviation",
                  (("score_spread", "std"),), zero_based=True),)  # fmt: skip


def test_a_family_a_resumption_declared_anew_is_drawn_as_its_latest_header_says(
    tmp_path, monkeypatch
):
    # the first header's title and label were drawn, without a word, after the quantity was
    # corrected and the run resumed
    run = _run(tmp_path / "run", steps=2, preset=None, quantities=[Spread()])
    _run(run, steps=2, preset=None, quantities=[Retitled()], resume=True)
    assert len(read_jsonl(run / "metrics.jsonl")[0]) == 2  # both headers
    figures = _figures(monkeypatch, [run], out=tmp_path / "figs")
    assert list(figures) == ["Spread of all the scores"]
    (figure,) = figures.values()
    assert [text.get_text() for text in figure.axes[0].get_legend().texts] == ["std"]
    plt.close(figure)


def test_a_header_family_that_is_no_safe_file_name_is_not_drawn(tmp_path):
    # a log edited by hand (or written elsewhere) named a family ../../escaped: the figure was
    # written outside --out
    run = _run(tmp_path / "run", steps=2, preset=None, quantities=[Spread()])
    log = run / "metrics.jsonl"
    log.write_text(log.read_text().replace('"family": "score_spread"',
                                           '"family": "../../escaped"'))  # fmt: skip
    with pytest.raises(GradlabError, match="hold no key that a figure family draws: "):
        plot_runs([run], out=tmp_path / "out" / "figs")
    assert sorted(p.name for p in tmp_path.rglob("*.png")) == []


def test_a_class_whose_plots_are_a_property_is_named_instead_of_a_type_error(tmp_path):
    class Computed(Spread):
        @property
        def plots(self):
            return Spread.plots

    run = _run(tmp_path / "run", steps=2, preset=None, quantities=[Spread()])
    with pytest.raises(GradlabError) as raised:
        plot_runs([run], out=tmp_path / "figs", quantities=[Computed])
    assert str(raised.value).startswith("quantities: Computed.plots is <property object at ")
    assert str(raised.value).endswith(
        ", not a tuple of Plot; pass an instance of the quantity, or declare plots as a class "
        "attribute"
    )
    plot_runs([run], out=tmp_path / "figs", quantities=[Computed()], overview=False)


def test_gradlabs_own_families_are_not_repeated_in_the_header(tmp_path):
    run = _run(tmp_path / "run", steps=2)
    headers, _ = read_jsonl(run / "metrics.jsonl")
    assert "plots" not in headers[0]


GEOMETRY_FAMILIES = ("geometry", "geometry_collapse", "margins", "margin_violations",
                     "chance_level", "temperature", "temperature_gradient", "temperature_clamp",
                     "suspects", "suspects_share")  # fmt: skip


def _clip_run(log_dir, steps=6):
    """Two towers with open_clip's learnable logit scale (log s, clamped to [0, ln 100]), the
    default preset and the temperature, chance-level and suspect quantities."""
    from gradlab.functional import content_hashes
    from gradlab.monitor import PRESETS, ChanceLevel, Suspects, Temperature, every

    torch.manual_seed(0)
    towers = torch.nn.ModuleList([torch.nn.Linear(6, 8), torch.nn.Linear(6, 8)])
    logit_scale = torch.nn.Parameter(torch.tensor(math.log(1 / 0.07)))
    optimizer = torch.optim.SGD([{"params": towers.parameters(), "lr": 0.5},
                                 {"params": [logit_scale], "lr": 0.05}])  # fmt: skip
    hashes = content_hashes(["a", "b", "a", "c", "d", "e", "b", "f"])  # two duplicated captions
    quantities = [*(kind(every(1)) for kind in PRESETS["default"]),
                  Temperature(every(1), scale=logit_scale, log_scale=True, logits=True,
                              clamp=(0.0, math.log(100.0))),
                  ChanceLevel(every(1), terms=2),
                  Suspects(every(1), hashes=lambda: hashes)]  # fmt: skip
    generator = torch.Generator().manual_seed(1)
    with Monitor(log_dir, quantities=quantities) as monitor:
        loss_fn = monitor.watch(NTXentLoss(temperature=1.0, direction="both"))
        for _ in range(steps):
            images, texts = torch.randn(2, 8, 6, generator=generator)
            unit = [torch.nn.functional.normalize(tower(x), dim=1)
                    for tower, x in zip(towers, (images, texts), strict=True)]  # fmt: skip
            logits = logit_scale.exp() * unit[0] @ unit[1].T
            loss_fn(logits, torch.eye(8, dtype=torch.bool)).backward()
            optimizer.step()
            with torch.no_grad():  # open_clip's training loop clamps after each step
                logit_scale.clamp_(0.0, math.log(100.0))
            monitor.step()  # before zero_grad: the parameter's gradient is still there
            optimizer.zero_grad()
    return log_dir


@pytest.mark.slow  # trains a run and draws every family: seconds
def test_plot_draws_the_geometry_temperature_and_suspect_families(tmp_path, monkeypatch):
    """A SmoothAP run on embeddings (the default preset's geometry and margins) and a CLIP-like
    run on logits (temperature, chance level, suspects): every family is drawn, each line the
    logged values of its run and key."""
    logs = [_run(tmp_path / "embeddings", steps=5, preset="default"), _clip_run(tmp_path / "clip")]
    records = [read_jsonl(log / "metrics.jsonl")[1] for log in logs]
    with captured_figures(monkeypatch, monitor_plots) as figures:
        paths = plot_runs(logs, tmp_path / "figures")
    drawn = {path.stem: figure for path, figure in zip(paths, figures, strict=True)}
    assert set(GEOMETRY_FAMILIES) <= set(drawn)
    for family in GEOMETRY_FAMILIES:
        figure = drawn[family]
        assert layout_problems(figure) == [], family
        expected = []
        for run in records:
            for key in monitor_plots.PLOTS[family].keys:
                points = [(r["step"], r[key]) for r in run if key in r and math.isfinite(r[key])]
                if points:
                    expected.append(tuple(zip(*points, strict=True)))
        lines = [(tuple(line.get_xdata()), tuple(line.get_ydata()))
                 for line in figure.axes[0].get_lines()]  # fmt: skip
        assert lines == expected, family
        plt.close(figure)
    clip = records[1]
    assert all(0 < r["temperature_scale"] <= 100.0 + 1e-9 for r in clip)


def _records(**series):
    steps = len(next(iter(series.values())))
    return [("run", [{"step": step, **{key: values[step] for key, values in series.items()}}
                     for step in range(steps)])]  # fmt: skip


def test_a_quantity_collapsing_over_decades_is_read_on_a_log_axis():
    collapsing = [1.4, 1.3, 0.4, 1e-3, 2e-6, 3e-9, 1e-12, 5e-13]
    keys = ["decomposition_ad_norm_q50", "decomposition_cb_norm_q50"]
    # an exact 0 among values that span decades: symmetric log (linear near 0), not linear,
    # which drew 1e-12 as 0
    for values, scale in ((collapsing, "log"), ([*collapsing[:-1], 0.0], "symlog"),
                          ([1.4, 1.1, 0.9, 0.5, 0.2, 0.1, 0.05, 0.02], "linear"),
                          ([1.4, 0.0, -0.5, 1e-6], "linear")):  # fmt: skip
        figure, axis = plt.subplots()
        runs = _records(**{keys[0]: values, keys[1]: [v / 10 for v in values]})
        draw_family(axis, "decomposition", keys, runs)
        assert axis.get_yscale() == scale, values
        plt.close(figure)


def test_a_run_reads_on_the_same_kind_of_axis_alone_and_beside_a_run_with_a_zero():
    # one exact 0 in another run made the whole panel linear: a gradient of 1e-20 read as 0
    falling = [1e-2, 1e-8, 1e-14, 1e-20]
    key = "embedding_grad_norm"
    alone, beside = plt.subplots()[1], plt.subplots()[1]
    run = _records(**{key: falling})
    draw_family(alone, "embedding_gradients", [key], run)
    draw_family(beside, "embedding_gradients", [key],
                [*run, ("b", _records(**{key: [1e-3, 0.0, 1e-3, 0.0]})[0][1])])  # fmt: skip
    assert (alone.get_yscale(), beside.get_yscale()) == ("log", "symlog")
    low, high = beside.get_ylim()
    transform = beside.yaxis.get_transform()
    place = [float((transform.transform([v])[0] - transform.transform([low])[0])
                   / (transform.transform([high])[0] - transform.transform([low])[0]))
             for v in falling]  # fmt: skip
    assert all(b - a > 0.1 for a, b in pairwise(place[::-1]))  # each drop of 6 decades shows
    plt.close("all")


def test_grouped_steps_on_a_log_axis_are_drawn_at_their_geometric_mean():
    # an arithmetic mean of 1e-2 and 1e-20 is half of 1e-2: a collapse at every other step
    # read as a healthy line
    values = [1e-2 if step % 2 else 1e-20 for step in range(40)]
    figure, axis = plt.subplots()
    draw_family(axis, "embedding_gradients", ["embedding_grad_norm"],
                _records(embedding_grad_norm=values), max_points=10)  # groups of 4
    (line,) = axis.get_lines()
    expected = [math.exp(math.fsum(math.log(v) for v in values[i : i + 4]) / 4)
                for i in range(0, 40, 4)]  # fmt: skip
    np.testing.assert_allclose(line.get_ydata(), expected, rtol=1e-9)
    (band,) = axis.collections
    assert band.get_label().endswith("line: their geometric mean")
    plt.close(figure)


def test_values_apart_by_rounding_alone_are_drawn_as_a_flat_line():
    # a loss of 0.5 +- 1e-12 filled the axis as a zig-zag under an offset label "1e-12+5e-1"
    figure, axis = plt.subplots()
    draw_family(axis, "loss", ["loss"], _records(loss=[0.5, 0.5 + 1e-12, 0.5 - 1e-12, 0.5]))
    low, high = axis.get_ylim()
    assert low <= 0.5 - 0.04 and high >= 0.5 + 0.04 and abs((low + high) / 2 - 0.5) < 1e-9
    figure.canvas.draw()
    assert axis.yaxis.get_offset_text().get_text() == ""
    moving = plt.subplots()[1]  # a spread worth reading keeps matplotlib's own limits
    draw_family(moving, "loss", ["loss"], _records(loss=[0.5, 0.5 + 1e-6, 0.5]))
    assert moving.get_ylim()[1] - moving.get_ylim()[0] < 1e-5
    plt.close("all")


@pytest.mark.parametrize("values", [
    [0.0, 1.7e308, 1e300], [0.0, 5e-324, 1.0, 1e-3], [10.0**(300 - 40 * s) for s in range(16)],
    [0.0, 1e308, 1.0, 1e-3], [1e-310, 5e-324, 1e-300]], ids=[
    "zero-and-largest", "zero-and-denormal", "600-decades", "zero-1e308", "denormals"])  # fmt: skip
@pytest.mark.slow
def test_values_near_float64_s_ends_are_drawn_without_a_traceback(values):
    # 10**309 overflowed the symmetric log axis's ticks, 10**-324 gave it no threshold, and
    # matplotlib's own scales overflowed (a traceback, or a figure with nothing drawn)
    figure, axis = plt.subplots()
    runs = _records(embedding_grad_norm=values)
    draw_family(axis, "embedding_gradients", ["embedding_grad_norm"], runs)
    figure.savefig(io.BytesIO(), format="png")  # the ticks and the limits, computed
    beyond = [step for step, value in enumerate(values) if abs(value) > 1e300]
    crosses = [line for line in axis.get_lines() if line.get_label().startswith("undefined (NaN)")]
    assert [list(line.get_xdata()) for line in crosses] == ([beyond] if beyond else [])
    (line,) = [line for line in axis.get_lines() if line not in crosses]
    drawn = line.get_ydata()
    assert all(math.isnan(drawn[step]) for step in beyond)
    low, high = axis.get_ylim()
    assert all(low <= value <= high for value in drawn if math.isfinite(value))
    plt.close(figure)


def test_the_relaxation_gap_is_drawn_on_its_own_axis_not_the_aps():
    # drawn beside the two APs on their 0-1 axis, a gap of a thousandth read as a flat 0
    gaps = [-1e-3, -2e-3, -1.5e-3, -0.5e-3]
    runs = _records(smooth_ap=[0.5 + g for g in gaps], exact_ap=[0.5] * 4, relaxation_gap=gaps)
    assert monitor_plots.PLOTS["relaxation_gap"].keys == ("smooth_ap", "exact_ap")
    figure, axis = plt.subplots()
    draw_family(axis, "relaxation_gap_difference", ["relaxation_gap"], runs)
    (line,) = axis.get_lines()
    assert list(line.get_ydata()) == gaps
    low, high = axis.get_ylim()
    assert low <= min(gaps) and max(gaps) <= high and high - low < 0.01
    plt.close(figure)


def test_a_gap_of_rounding_around_zero_is_drawn_flat_at_zero():
    # exact APs of 0.7 and 0.7 + 1.1e-16: their gap zig-zagged over the whole panel
    axis = plt.subplots()[1]
    draw_family(axis, "relaxation_gap_difference", ["relaxation_gap"],
                _records(relaxation_gap=[0.0, -1.1e-16, 0.0, -1.1e-16]))  # fmt: skip
    low, high = axis.get_ylim()
    assert low < -0.9e-11 and high > 0.9e-11  # the 1e-16 of spread at the middle, flat
    real = plt.subplots()[1]  # a gap above the resolution keeps its own scale
    draw_family(real, "relaxation_gap_difference", ["relaxation_gap"],
                _records(relaxation_gap=[0.0, -1e-6, 0.0, -1e-6]))  # fmt: skip
    assert real.get_ylim()[1] - real.get_ylim()[0] < 1e-5
    plt.close("all")


def test_a_zero_based_share_flat_but_for_float32_rounding_is_drawn_inside_the_frame():
    # 0.5 +- 6e-8 put the axis's top at the line, on the frame, where only its markers showed;
    # an exact 0.5 was drawn with room above it
    share = Plot("share", "Share", "share", (("share", "share"),), zero_based=True)
    tops = []
    for values in ([0.5] * 6, [0.5, 0.49999997, 0.50000006, 0.49999997, 0.5, 0.50000006]):
        axis = plt.subplots()[1]
        draw_family(axis, "share", ["share"], _records(share=values), plots={"share": share})
        bottom, top = axis.get_ylim()
        assert bottom == -0.03 * top
        tops.append(top)
        plt.close(axis.figure)
    assert tops[1] == pytest.approx(tops[0], rel=1e-6) and tops[0] >= 1.04 * 0.5


def test_a_step_whose_quantity_logged_nothing_is_a_gap_not_a_line_across_it():
    # steps without anatomy keys (a miner that found no pair) were joined by a line through
    # them, which read as a value there
    records = [{"step": step, "loss": 1.0 / (step + 1)} for step in range(10)]
    for record in records:
        if record["step"] not in (4, 5):
            record["anatomy_active_negatives_mean"] = float(record["step"])
        if record["step"] % 5 == 0:
            record["p_seed"] = 0.5  # a sparser schedule: its line is kept
    axis = plt.subplots()[1]
    draw_family(axis, "anatomy_active_negatives", ["anatomy_active_negatives_mean"],
                [("run", records)])  # fmt: skip
    (line,) = axis.get_lines()  # no cross: nothing was NaN
    assert list(line.get_xdata()) == list(range(10))
    drawn = list(line.get_ydata())
    assert [math.isnan(v) for v in drawn] == [step in (4, 5) for step in range(10)]
    sparse = plt.subplots()[1]
    draw_family(sparse, "operating_region", ["p_seed"], [("run", records)])
    assert list(sparse.get_lines()[0].get_xdata()) == [0, 5] and len(sparse.get_lines()) == 1
    plt.close("all")


def test_flat_families_are_stated_with_their_values():
    runs = _records(loss=[0.5, 0.4, 0.3], degenerate_batches=[0, 0, 0], degenerate_batch=[0, 0, 0],
                    gradient_agreement_cosine=[1.0, 0.9999999, 1.0],
                    gradient_agreement_relative_error=[1e-7, 2e-7, 1.5e-7])  # fmt: skip
    flat = monitor_plots.flat_families(runs)
    assert set(flat) == {"degenerate_batches", "gradient_agreement"}  # the loss moves
    labels = dict(monitor_plots.PLOTS["degenerate_batches"].series)
    assert flat["degenerate_batches"] == (
        f"{monitor_plots.PLOTS['degenerate_batches'].title}: "
        f"{labels['degenerate_batches']} 0 at each of the 3 logged steps; "
        f"{labels['degenerate_batch']} 0 at each of the 3 logged steps")
    assert "1 (to within 1e-07)" in flat["gradient_agreement"]
    assert "between 1e-07 and 2e-07" in flat["gradient_agreement"]
    moved = _records(degenerate_batches=[0, 0, 1], degenerate_batch=[0, 0, 1])
    assert monitor_plots.flat_families(moved) == {}


@pytest.mark.slow
def test_the_step_axis_has_integer_ticks_only(tmp_path, monkeypatch):
    # 3 steps (0, 1, 2): matplotlib's default locator would tick 0.25, 0.5, ...
    with captured_figures(monkeypatch, monitor_plots) as figures:
        plot_runs([_run(tmp_path / "run", steps=3)], out=tmp_path / "figs")
    axes = [axis for figure in figures for axis in figure.axes if axis.get_visible()]
    assert len(axes) > len(figures)  # the overview's panels too
    for axis in axes:
        axis.figure.canvas.draw()
        low, high = axis.get_xlim()
        ticks = [t for t in axis.get_xticks() if low <= t <= high]
        assert len(ticks) >= 2 and all(t == round(t) for t in ticks), (axis.get_title(), ticks)
    for figure in figures:
        plt.close(figure)


@pytest.mark.slow
def test_plot_takes_a_metrics_jsonl_as_its_run_folder(tmp_path, capsys):
    run = _run(tmp_path / "run", steps=2)
    assert main(["plot", str(run / "metrics.jsonl")]) == 0
    written = capsys.readouterr().out
    assert f"wrote {run / 'figures' / 'overview.png'}" in written, written
    assert (run / "figures" / "loss.png").is_file()
    assert [label for label, _ in load_runs([run / "metrics.jsonl"])] == ["run"]


def test_plot_refuses_another_file_in_one_line_asking_for_the_folder(tmp_path, capsys):
    run = _run(tmp_path / "run", steps=1)
    (run / "notes.txt").write_text("mine")
    assert main(["plot", str(run / "notes.txt")]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "pass the run folder" in err and "notes.txt" in err, err
    assert sorted(p.name for p in run.iterdir()) == ["metrics.jsonl", "notes.txt"]


@pytest.mark.slow
def test_plotting_a_replaced_run_removes_the_old_runs_figures(tmp_path):
    # a full-preset run plotted, then replaced (overwrite=True) by a cheap one and plotted
    # again: no figure of a family the new run does not log may stay beside the new ones
    _run(tmp_path, steps=3, preset="full")
    first = {path.name for path in plot_runs([tmp_path])}
    (tmp_path / "figures" / "notes.txt").write_text("mine")
    with Monitor(tmp_path, preset="cheap", every=1, overwrite=True) as monitor:
        train(monitor, steps=3)
    second = {path.name for path in plot_runs([tmp_path], overview=False)}
    left = {path.name for path in (tmp_path / "figures").iterdir()}
    assert first - second - {"overview.png"}  # the full run had families the cheap one lacks
    assert left == second | {"notes.txt", monitor_plots.FIGURE_LIST}


@pytest.mark.slow
def test_a_file_of_ones_own_named_like_a_figure_is_refused_not_replaced(tmp_path, capsys):
    # `gradlab plot run --out figs` replaced the user's figs/loss.png and deleted their
    # figs/geometry.png (a family the run did not log): only figures a plot wrote may go
    run = _run(tmp_path / "run", steps=2)
    figures = tmp_path / "figs"
    figures.mkdir()
    (figures / "loss.png").write_text("mine")
    (figures / "geometry.png").write_text("mine too")
    assert main(["plot", str(run), "--out", str(figures)]) == 2
    err = capsys.readouterr().err
    assert err == (f"gradlab: the figures folder {str(figures)!r} already holds loss.png, which "
                   "gradlab plot did not write (it lists its own figures in "
                   ".gradlab-figures.json) and would replace: plot into another folder, or move "
                   "those files away\n")  # fmt: skip
    assert sorted(p.name for p in figures.iterdir()) == ["geometry.png", "loss.png"]
    assert (figures / "loss.png").read_text() == "mine"
    (figures / "loss.png").unlink()
    written = {path.name for path in plot_runs([run], figures, overview=False)}
    left = {path.name for path in figures.iterdir()}
    assert "loss.png" in written and "geometry.png" not in written
    assert left == written | {"geometry.png", monitor_plots.FIGURE_LIST}
    assert (figures / "geometry.png").read_text() == "mine too"
    # the plot's own figures, listed, are replaced by the next plot
    assert {path.name for path in plot_runs([run], figures, overview=False)} == written


class UndrawnMedian(Quantity):
    """A quantity of one's own that declares no plots."""

    name = "undrawn_median"
    needs = frozenset({"sorted_scores"})
    keys = ("undrawn_median_mean",)

    def compute(self, batch):
        return {"undrawn_median_mean": -batch.negated_sorted[:, 1].mean()}


def test_a_log_only_of_keys_no_family_draws_names_them_and_what_to_declare(tmp_path, capsys):
    # "the logs of [...] hold no known quantity" named neither the keys nor the missing plots
    run = _run(tmp_path / "run", steps=2, preset=None, quantities=[UndrawnMedian(every(1))])
    assert main(["plot", str(run), "--out", str(tmp_path / "figs")]) == 2
    assert capsys.readouterr().err == (
        f"gradlab: the logs of [{str(run)!r}] hold no key that a figure family draws: "
        "undrawn_median_mean (a quantity of your own draws its keys when it declares plots: "
        "gradlab.monitor.Plot)\n")
    assert not (tmp_path / "figs").exists()


@pytest.mark.slow
def test_a_figure_list_naming_files_elsewhere_removes_none_of_them(tmp_path):
    # the list is read back from the folder (a file anyone can edit): only plain .png names in
    # the folder itself are figures an earlier plot may have written
    run = _run(tmp_path / "run", steps=2)
    figures = tmp_path / "out" / "figs"
    plot_runs([run], figures, overview=False)
    victims = [tmp_path / "out" / "victim.png", figures / "sub" / "victim.png",
               figures / "victim.txt"]  # fmt: skip
    for victim in victims:
        victim.parent.mkdir(parents=True, exist_ok=True)
        victim.write_text("mine")
    listed = json.loads((figures / monitor_plots.FIGURE_LIST).read_text())
    (figures / monitor_plots.FIGURE_LIST).write_text(json.dumps(
        [*listed, "../victim.png", "sub/victim.png", "victim.txt", 3]))  # fmt: skip
    plot_runs([run], figures, overview=False)
    assert all(victim.read_text() == "mine" for victim in victims)


@pytest.mark.slow
def test_a_listed_figure_the_user_deleted_is_no_error(tmp_path):
    run = _run(tmp_path / "run", steps=2)
    figures = tmp_path / "figs"
    written = plot_runs([run], figures)
    (figures / "loss.png").unlink()  # removed by hand, still listed
    (figures / "overview.png").unlink()
    assert {path.name for path in plot_runs([run], figures, overview=False)} == (
        {path.name for path in written} - {"overview.png"})
    assert not (figures / "overview.png").exists()


class RowMedian(Quantity):
    """A quantity of one's own with a figure (as docs/monitor_in_depth.md's example)."""

    name = "row_median"
    needs = frozenset({"sorted_scores"})
    keys = ("row_median_mean",)
    plots = (Plot("row_median", "Row median", "score", (("row_median_mean", "median"),)),)

    def compute(self, batch):
        middle = batch.negated_sorted.shape[1] // 2
        return {"row_median_mean": -batch.negated_sorted[:, middle].mean()}


@pytest.mark.slow
def test_plotting_a_replaced_run_removes_a_figure_of_ones_own_quantity(tmp_path):
    # the old run's own family is in neither gradlab's families nor the new run's header: its
    # figure stayed beside the new run's, though plotting never mixes runs
    with Monitor(tmp_path, quantities=[RowMedian(every(1))]) as monitor:
        train(monitor, steps=3)
    assert (tmp_path / "figures" / "row_median.png") in plot_runs([tmp_path])
    with Monitor(tmp_path, preset="cheap", every=1, overwrite=True) as monitor:
        train(monitor, steps=3)
    second = {path.name for path in plot_runs([tmp_path])}
    left = {path.name for path in (tmp_path / "figures").iterdir()}
    assert "row_median.png" not in left
    assert left == second | {monitor_plots.FIGURE_LIST}


def _one_run(values_by_key, steps=12):
    """One run of ``steps`` records, each key's value at step s given by its function."""
    return [("run", [{"step": s, **{key: value(s) for key, value in values_by_key.items()}}
                     for s in range(steps)])]  # fmt: skip


def test_keys_of_one_run_that_lie_on_one_another_mark_alternate_steps(tmp_path):
    """|AD - CB| on |AD| when CB is negligible: drawn on top, it would hide |AD|'s markers on
    every step. The keys mark alternate steps, each step once, so both show."""
    keys = ["decomposition_ad_norm_q50", "decomposition_cb_norm_q50",
            "decomposition_grad_norm_q50"]  # fmt: skip
    steps = 12
    runs = _one_run({keys[0]: lambda s: 10.0 ** -s, keys[1]: lambda s: 1e-4 * 10.0 ** -s,
                     keys[2]: lambda s: (1 - 1e-4) * 10.0 ** -s}, steps)  # fmt: skip
    assert monitor_plots.coinciding(keys, runs[0][1])
    figure, axis = plt.subplots()
    draw_family(axis, "decomposition", keys, runs)
    marked = []
    for line in axis.get_lines():
        start, every = line.get_markevery()
        marked.append(set(range(start, steps, every)))
    assert all(marked) and set().union(*marked) == set(range(steps))
    assert all(not one & two for i, one in enumerate(marked) for two in marked[i + 1 :])
    plt.close(figure)
    # keys apart: a marker on every step, as before
    apart = _one_run({keys[0]: lambda s: 1.0 + s, keys[1]: lambda s: 0.5 + s,
                      keys[2]: lambda s: 0.25 * (1 + s)}, steps)  # fmt: skip
    assert not monitor_plots.coinciding(keys, apart[0][1])
    figure, axis = plt.subplots()
    draw_family(axis, "decomposition", keys, apart)
    assert [line.get_markevery() for line in axis.get_lines()] == [None] * 3
    plt.close(figure)


def test_a_key_under_a_later_one_is_drawn_as_a_band(tmp_path):
    # |AD| under |AD - CB| was hidden by it: the two lines, one colour showing (the report's
    # decomposition figure of a SmoothAP run)
    keys = ["decomposition_ad_norm_q50", "decomposition_cb_norm_q50",
            "decomposition_grad_norm_q50"]  # fmt: skip
    runs = _one_run({keys[0]: lambda s: 10.0 ** -s, keys[1]: lambda s: 1e-4 * 10.0 ** -s,
                     keys[2]: lambda s: (1 - 1e-4) * 10.0 ** -s})  # fmt: skip
    assert monitor_plots.covered_keys(keys, runs[0][1]) == {keys[0]}
    figure, axis = plt.subplots()
    draw_family(axis, "decomposition", keys, runs)
    widths = [line.get_linewidth() for line in axis.get_lines()]
    alphas = [line.get_alpha() for line in axis.get_lines()]
    plt.close(figure)
    assert widths[0] > 3 * widths[2] and widths[1] == widths[2]  # a band, the others lines
    assert alphas[0] < 1 and alphas[1:] == [None, None]  # the line on it shows through
    # two runs: each run's own colour tells them apart, no band
    figure, axis = plt.subplots()
    draw_family(axis, "decomposition", keys, [runs[0], ("again", runs[0][1])])
    assert len({line.get_linewidth() for line in axis.get_lines()}) == 1
    plt.close(figure)


def _covered_by_hand(keys, records) -> set:
    """The earlier key of each pair that lies on one another (the rule below)."""
    return {keys[a] for a in range(len(keys)) for b in range(a + 1, len(keys))
            if _coinciding_by_hand([keys[a], keys[b]], records, len(keys))}  # fmt: skip


def _coinciding_by_hand(keys, records, count=None) -> bool:
    """The docstring's rule, pair by pair: over the steps where both keys hold finite numbers
    (not booleans), at least 2 x len(keys) of them, the two lie within 2 % of the larger at
    90 % of those steps."""
    for a in range(len(keys)):
        for b in range(a + 1, len(keys)):
            both = []
            for record in records:
                x, y = record.get(keys[a]), record.get(keys[b])
                if all(type(v) in (int, float) and math.isfinite(v) for v in (x, y)):
                    both.append(abs(x - y) <= 0.02 * max(abs(x), abs(y)))
            if both and len(both) >= 2 * (count or len(keys)) and sum(both) >= 0.9 * len(both):
                return True
    return False


@pytest.mark.parametrize("seed", range(40))
def test_coinciding_follows_its_rule_on_mixed_records(seed):
    generator = torch.Generator().manual_seed(seed)
    keys = ["a", "b", "c"][: 2 + seed % 2]
    steps = 3 + seed % 9
    choices = [1.0, 1.015, 1.03, -1.0, 0.0, math.nan, math.inf, None, True, "x", 2]
    records = []
    for step in range(steps):
        record = {"step": step}
        for key in keys:
            pick = int(torch.randint(0, 4 if seed % 3 else len(choices), (1,), generator=generator))
            value = choices[pick]
            if value is not None:
                record[key] = value * (step + 1) if type(value) is float else value
        records.append(record)
    assert monitor_plots.coinciding(keys, records) == _coinciding_by_hand(keys, records)
    assert monitor_plots.covered_keys(keys, records) == _covered_by_hand(keys, records)


def test_coinciding_at_its_thresholds():
    def run(values_a, values_b):
        return [{"a": a, "b": b} for a, b in zip(values_a, values_b, strict=True)]

    ten = [1.0] * 10
    # within 2 % of the larger: 0.0204 <= 0.02 x 1.0204, 0.021 > 0.02 x 1.021
    assert monitor_plots.coinciding(["a", "b"], run(ten, [1.0204] * 10)) is True
    assert monitor_plots.coinciding(["a", "b"], run(ten, [1.021] * 10)) is False
    nine_of_ten = run(ten, [1.0] * 9 + [2.0])
    assert monitor_plots.coinciding(["a", "b"], nine_of_ten) is True  # 90 %: enough
    assert monitor_plots.coinciding(["a", "b"], run(ten, [1.0] * 8 + [2.0] * 2)) is False
    assert monitor_plots.coinciding(["a", "b"], run([1.0] * 4, [1.0] * 4)) is True  # 2 x 2 steps
    assert monitor_plots.coinciding(["a", "b"], run([1.0] * 3, [1.0] * 3)) is False
    assert monitor_plots.coinciding(["a", "b", "c"], run([1.0] * 5, [1.0] * 5)) is False  # 6
    assert monitor_plots.coinciding(["a", "b"], run([-1.0] * 4, [-1.01] * 4)) is True
    assert monitor_plots.coinciding(["a", "b"], run([0.0] * 4, [0.0] * 4)) is True


@pytest.mark.slow
def test_a_family_figure_names_only_the_runs_it_draws(tmp_path, monkeypatch):
    # runs with different keys: a cheap run has no P; its name beside P's lines would send the
    # reader looking for a line hidden under another
    runs = [_run(tmp_path / "cheap", preset="cheap"), _run(tmp_path / "default", preset="default")]
    figures = _figures(monkeypatch, runs, out=tmp_path / "figs")
    named = {title: [text.get_text() for text in figure.axes[0].get_legend().texts]
             for title, figure in figures.items()}  # fmt: skip
    assert "cheap" not in named["Operating-region proportion P"]
    assert "default" in named["Operating-region proportion P"]
    assert {"cheap", "default"} <= set(named["Loss"])
    for figure in figures.values():
        plt.close(figure)


def _marked(line, count):
    every = line.get_markevery()
    if every is None:
        return set(range(count))
    if isinstance(every, tuple):
        return set(range(every[0], count, every[1]))
    return set(every)


@pytest.mark.parametrize("values", [[0.0, math.nan, math.nan], [math.nan, math.nan, 0.0],
                                    [math.nan, 0.5, math.nan], [0.25],
                                    [0.1, 0.2, math.nan], [math.nan, 0.1, 0.2]])  # fmt: skip
def test_a_value_no_line_reaches_is_marked_in_an_overlay(values):
    # a run's only finite value between NaN steps has no line to it: unmarked, it was not drawn
    records = [{"step": step, "anatomy_queries_without_gradient": value}
               for step, value in enumerate(values)]  # fmt: skip
    other = [{"step": step, "anatomy_queries_without_gradient": 0.1 * step} for step in range(3)]
    for position in (0, 1):  # drawn first or second: each run marks its own steps
        runs = [("other", other)]
        runs.insert(position, ("isolated", records))
        figure, axis = plt.subplots()
        draw_family(axis, "anatomy_without_gradient", ["anatomy_queries_without_gradient"], runs)
        line = axis.get_lines()[position]
        other_line = axis.get_lines()[1 - position]
        # the overlay's own steps for each run (run 0 from 0, run 1 from 1, every 2nd step) and
        # the values with no finite neighbour, by hand
        regular = set(range(position, len(values), 2))
        lone = {index for index, value in enumerate(values) if math.isfinite(value)
                and all(not math.isfinite(values[n]) for n in (index - 1, index + 1)
                        if 0 <= n < len(values))}  # fmt: skip
        assert _marked(line, len(values)) == regular | lone, position
        assert _marked(other_line, 3) == set(range(1 - position, 3, 2))  # no lone value
        plt.close(figure)


def test_an_instance_whose_plots_are_no_tuple_is_named_by_its_class(tmp_path):
    class Odd(Spread):
        @property
        def plots(self):
            return "spread"

    run = _run(tmp_path / "run", steps=2, preset=None, quantities=[Spread()])
    with pytest.raises(GradlabError) as raised:
        plot_runs([run], out=tmp_path / "figs", quantities=[Odd()])
    assert str(raised.value) == (
        "quantities: Odd.plots is 'spread', not a tuple of Plot; pass an instance of the "
        "quantity, or declare plots as a class attribute")


def test_a_header_that_is_no_object_is_skipped_when_its_families_are_read(tmp_path):
    # a crafted or damaged log: {"header": [...]} holds no families, and no figure fails on it
    run = _run(tmp_path / "run", steps=2, preset=None, quantities=[Spread()])
    log = run / "metrics.jsonl"
    log.write_text('{"header": ["not", "an", "object"]}\n' + log.read_text())
    plot_runs([run], out=tmp_path / "figs", quantities=[Spread], overview=False)
    assert (tmp_path / "figs" / "score_spread.png").is_file()


@pytest.mark.parametrize("own_every", [2, 5])
def test_keys_on_schedules_of_their_own_keep_their_lines(own_every):
    # a preset on the default schedule (0-10, then every 10th) beside a quantity of one's own
    # logged every few steps: neither is missing anywhere, so neither line has a gap (the
    # preset's keys were drawn as dots between the own quantity's records)
    steps = sorted({*range(11), *range(20, 101, 10), *range(0, 101, own_every)})
    records = []
    for step in steps:
        record = {"step": step}
        if step <= 10 or step % 10 == 0:
            record.update(loss=1.0 / (step + 1), embedding_norm_mean=1.0)
        if step % own_every == 0:
            record["anatomy_active_negatives_mean"] = float(step)
        records.append(record)
    for family, key in (("loss", "loss"),
                        ("anatomy_active_negatives", "anatomy_active_negatives_mean")):
        axis = plt.subplots()[1]
        draw_family(axis, family, [key], [("run", records)])
        (line,) = axis.get_lines()
        expected = [r["step"] for r in records if key in r]
        assert list(line.get_xdata()) == expected
        assert not any(math.isnan(value) for value in line.get_ydata())
    plt.close("all")


def test_a_key_of_a_dense_schedule_missing_beside_a_sparser_one_leaves_gaps():
    # the loss every step but steps 7-8 (its quantity logged nothing there) beside a key
    # logged every 5th step: the gaps are the loss's missing steps, not the other key's
    records = [{"step": step, "p_seed": 0.5} if step % 5 == 0 else {"step": step}
               for step in range(15)]  # fmt: skip
    for record in records:
        if record["step"] not in (7, 8):
            record.update(loss=1.0, embedding_norm_mean=2.0)
    axis = plt.subplots()[1]
    draw_family(axis, "loss", ["loss"], [("run", records)])
    (line,) = axis.get_lines()
    assert list(line.get_xdata()) == list(range(15))
    assert [math.isnan(v) for v in line.get_ydata()] == [s in (7, 8) for s in range(15)]
    plt.close("all")


@pytest.mark.parametrize(("logged", "gaps"), [
    ([0, 4, 5], {1, 2, 3}),  # missing after the first step: wider than the next interval
    ([0, 1, 5], {2, 3, 4}),  # missing before the last step: wider than the one before
    ([0, 2, 4, 6, 8], set()),  # every second step, evenly: a schedule of its own
    # steps 2 and 4 missing: 1-3 is wider than 0-1 before it; 3-5 no wider than 1-3 before it
    # (0-1, further back, is no neighbour of 3-5)
    ([0, 1, 3, 5], {2}),
    # steps 1 and 3 missing: 0-2 no wider than 2-4 after it (4-5, further on, is none of its
    # neighbours); 2-4 is wider than 4-5 after it
    ([0, 2, 4, 5], {3}),
], ids=["after-first", "before-last", "every-second", "near-neighbour-before",
        "near-neighbour-after"])  # fmt: skip
def test_a_gap_is_a_wider_interval_than_its_neighbours(logged, gaps):
    # the loss logged every step: each step was due for a key logged with it
    records = [{"step": step, "loss": 1.0} for step in range(logged[-1] + 1)]
    for record in records:
        if record["step"] in logged:
            record["embedding_grad_norm"] = 1.0
    axis = plt.subplots()[1]
    draw_family(axis, "embedding_gradients", ["embedding_grad_norm"], [("run", records)])
    (line,) = axis.get_lines()
    drawn = dict(zip(line.get_xdata(), line.get_ydata(), strict=True))
    assert {step for step, value in drawn.items() if math.isnan(value)} == gaps
    assert set(drawn) == set(logged) | gaps
    plt.close("all")


class EveryOtherCall(Quantity):
    """A quantity of one's own whose ``compute`` has nothing to log ({}) at every other call."""

    name = "every_other_call"
    needs = frozenset({"scores"})
    keys = ("every_other_call",)
    plots = (Plot("every_other_call", "Logged at every other call", "calls",
                  (("every_other_call", "calls"),)),)  # fmt: skip

    def __init__(self, schedule=None):
        super().__init__(schedule)
        self.calls = 0

    def compute(self, batch):
        self.calls += 1
        return {"every_other_call": float(self.calls)} if self.calls % 2 else {}


def _drawn(run, family, key):
    """The run's line of ``key`` as drawn: step -> value (NaN: a gap)."""
    axis = plt.subplots()[1]
    own = {plot.family: plot for plot in (*Spread.plots, *EveryOtherCall.plots)}
    draw_family(axis, family, [key], load_runs([run]), plots={**monitor_plots.PLOTS, **own})
    (line,) = axis.get_lines()
    drawn = dict(zip(line.get_xdata().tolist(), line.get_ydata().tolist(), strict=True))
    plt.close(axis.figure)
    return drawn


def test_a_key_on_a_sparser_schedule_than_anothers_is_one_line(tmp_path):
    # the loss on the default schedule (each step to 10, then every 10th) beside a quantity
    # logged every step: its line had a gap from 10 to 20 and none after (20, 30, 40 were
    # evenly spaced), as if steps 11-19 were due; the header now says when each one is due
    run = tmp_path / "run"
    with Monitor(run, quantities=[Loss(default_schedule()), Spread(every(1))]) as monitor:
        train(monitor, steps=45)
    schedules = read_jsonl(run / "metrics.jsonl")[0][0]["schedules"]
    assert schedules == {"loss": {"schedule": repr(default_schedule()), "keys": ["loss"]},
                         "score_spread": {"schedule": "every(1)", "keys": ["score_spread"]}}
    drawn = _drawn(run, "loss", "loss")
    assert list(drawn) == [*range(11), 20, 30, 40]
    assert not any(math.isnan(value) for value in drawn.values())


def test_each_part_of_a_resumed_run_is_due_on_its_own_headers_schedules(tmp_path):
    # resumed with the loss every 5th step instead of every step: 12-14 and 16-19 were gaps
    run = tmp_path / "run"
    with Monitor(run, quantities=[Loss(every(1)), Spread(every(1))]) as monitor:
        train(monitor, steps=12)
    with Monitor(run, quantities=[Loss(every(5)), Spread(every(1))], resume=True) as monitor:
        train(monitor, steps=9)
    drawn = _drawn(run, "loss", "loss")
    assert list(drawn) == [*range(12), 15, 20]
    assert not any(math.isnan(value) for value in drawn.values())


def test_a_quantity_that_logged_nothing_at_a_due_step_leaves_a_gap_there(tmp_path):
    # a compute that returns {} at every other step, due at each like the loss beside it: its
    # steps 0, 2, 4, 6 were evenly spaced, read as a schedule of their own, and joined
    run = tmp_path / "run"
    with Monitor(run, quantities=[Loss(every(1)), EveryOtherCall(every(1))]) as monitor:
        train(monitor, steps=7)
    drawn = _drawn(run, "every_other_call", "every_other_call")
    assert list(drawn) == list(range(7))
    assert [math.isnan(value) for value in drawn.values()] == [s % 2 == 1 for s in range(7)]


def test_a_schedule_of_ones_own_is_not_recorded_and_its_gaps_are_guessed(tmp_path):
    # a function's steps cannot be written down: its keys' gaps are read from the other keys
    run = tmp_path / "run"
    with Monitor(run, quantities=[Loss(lambda step: step % 3 == 0), Spread(every(1))]) as m:
        train(m, steps=10)
    assert read_jsonl(run / "metrics.jsonl")[0][0]["schedules"]["loss"]["schedule"] is None
    drawn = _drawn(run, "loss", "loss")  # evenly spaced: a schedule of its own, one line
    assert list(drawn) == [0, 3, 6, 9] and not any(map(math.isnan, drawn.values()))


def test_large_step_numbers_are_written_out_not_offset():
    # a run restarted at step 1,000,000: "0 6 12 ... 30" and a small "+1e6" read as steps 0-30
    records = [{"step": 1_000_000 + step, "loss": 1.0 / (step + 1)} for step in range(30)]
    figure, axis = plt.subplots()
    draw_family(axis, "loss", ["loss"], [("run", records)])
    figure.canvas.draw()
    assert axis.xaxis.get_offset_text().get_text() == ""
    low, high = axis.get_xlim()
    shown = {int(label.get_text().replace("\u2212", "-")): tick for label, tick
             in zip(axis.get_xticklabels(), axis.get_xticks(), strict=True)
             if low <= tick <= high}  # fmt: skip
    assert shown and all(label == tick for label, tick in shown.items())  # the steps in full
    plt.close(figure)


@pytest.mark.slow
def test_plotting_leaves_the_callers_matplotlib_settings_as_they_were(tmp_path):
    # seaborn's theme was set for the whole process: a notebook's own figures changed look
    _run(tmp_path, steps=3, preset="cheap")
    mine = {"axes.grid": False, "savefig.bbox": None, "figure.dpi": 72.0, "font.size": 7.0}
    with plt.rc_context(mine):  # a caller's own settings, unlike gradlab's
        before = dict(plt.rcParams)
        plot_runs([tmp_path])
        after = dict(plt.rcParams)
    assert {key for key in before if before[key] != after[key]} == set()
    assert {key: after[key] for key in mine} == mine


def test_steps_a_sink_dropped_are_a_gap_in_the_lines_not_a_line_across(tmp_path):
    # a record noting dropped_steps [4, 5, 6] was joined to step 3 by a straight line, as if
    # the steps had those values
    run = tmp_path / "run"
    run.mkdir()
    records = [{"step": step, "loss": 1.0 / (step + 1)} for step in (0, 1, 2, 3, 7, 8, 9)]
    records[4].update(dropped_records=3, dropped_steps=[4, 5, 6])
    lines = [{"header": {"config": {"tau": 0.01}}}, *records]
    (run / "metrics.jsonl").write_text("".join(json.dumps(line) + "\n" for line in lines))
    runs = load_runs([run])
    axis = plt.subplots()[1]
    draw_family(axis, "loss", ["loss"], runs)
    (line,) = axis.get_lines()
    drawn = dict(zip(line.get_xdata(), line.get_ydata(), strict=True))
    assert [step for step, value in drawn.items() if math.isnan(value)] == [4, 5, 6]
    assert {step: drawn[step] for step in (3, 7)} == {3: 0.25, 7: 0.125}
    plt.close("all")


@pytest.mark.slow
def test_an_overview_png_of_ones_own_is_refused_only_when_the_overview_is_drawn(tmp_path):
    run = _run(tmp_path / "run", steps=2)
    figures = tmp_path / "figs"
    figures.mkdir()
    (figures / "overview.png").write_text("mine")
    (figures / "loss.png").write_text("mine too")
    with pytest.raises(GradlabError) as refused:
        plot_runs([run], out=figures)
    assert str(refused.value) == (
        f"the figures folder {str(figures)!r} already holds loss.png, "
        "overview.png, which gradlab plot did not write (it lists its own figures in "
        ".gradlab-figures.json) and would replace: plot into another folder, or move those "
        "files away")
    (figures / "loss.png").unlink()
    written = plot_runs([run], out=figures, overview=False)  # the user's overview.png stays
    assert (figures / "overview.png").read_text() == "mine"
    assert "overview.png" not in {path.name for path in written}


@pytest.mark.slow
def test_a_run_cut_in_its_header_is_drawn_without_like_a_run_without_steps(tmp_path):
    """A crash during a run's first write leaves one cut line: among other runs it is left out
    with a warning, as a run that has not logged yet is; alone it is refused."""
    drawn = _run(tmp_path / "drawn")
    cut = tmp_path / "cut"
    cut.mkdir()
    (cut / "metrics.jsonl").write_bytes(b'{"header": {"gradlab": "0.2.0", "con')  # no line end
    with pytest.warns(UserWarning) as caught:
        written = plot_runs([drawn, cut], tmp_path / "figs")
    log = cut / "metrics.jsonl"
    said = [str(w.message) for w in caught if str(log) in str(w.message)]
    assert said == [f"{log}:1: skipped a line that is not valid JSON (a write cut short?), so no "
                    "logged step is left (a run folder must hold a metrics.jsonl written by "
                    "gradlab.Monitor): drawn without it"]
    assert (tmp_path / "figs" / "loss.png") in written
    with pytest.raises(GradlabError) as alone:
        plot_runs([cut], tmp_path / "figs2")
    assert str(alone.value) == said[0].removesuffix(": drawn without it")


def test_runs_past_the_palette_are_named_as_sharing_a_colour(tmp_path):
    palette = sns.color_palette("colorblind")
    runs = [_run(tmp_path / f"r{i:02d}", steps=2) for i in range(len(palette) + 1)]
    with pytest.warns(UserWarning) as caught:
        loaded = load_runs(runs)
    assert [(str(w.message), w.filename) for w in caught] == [(
        f"{len(runs)} runs overlaid: past the {len(palette)}th, each run's colour is an "
        f"earlier run's ({loaded[-1][0]} and {loaded[0][0]} share one; only their markers and "
        "the legend's order tell them apart); plot fewer runs at a time", __file__)]
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        load_runs(runs[:-1])  # one colour each: nothing to say


def test_the_steps_due_lie_strictly_inside_the_span_asked_and_each_key_keeps_its_own():
    records = monitor_plots.Records(
        [{"step": s} for s in range(13)],
        [(0, {"a": every(2), "b": every(3)}), (10, {"a": every(2), "b": every(3)})])
    # strictly between 2 and 8: neither end, whichever schedule logs it
    assert records.due_steps("a", 2, 8) == {4, 6}
    assert records.due_steps("b", 0, 6) == {3}  # its own schedule, not a's cached
    assert records.due_steps("a", 0, 6) == {2, 4}


def test_a_span_inside_a_later_part_reads_that_part_alone():
    # the first part's header records no schedule for b (a key it did not log): a span past
    # it reads b's schedule from the second part's header, not None from the first's
    records = monitor_plots.Records(
        [{"step": s} for s in range(20)],
        [(0, {"a": every(2)}), (10, {"a": every(2), "b": every(2)})])
    assert records.due_steps("b", 12, 18) == {14, 16}
    assert records.due_steps("b", 8, 18) is None  # reaching into the first part: guessed


@pytest.mark.parametrize("header", [None, "a string", [1], {"schedules": "every(1)"}, {}])
def test_a_header_that_records_no_schedules_reads_as_none(header):
    # a line another program wrote, or a header edited by hand: read, never a traceback
    assert monitor_plots.recorded_schedules(header) is None


def test_a_header_entry_that_is_no_schedule_record_is_skipped():
    header = {"schedules": {"junk": "every(1)", "no keys": {"schedule": "every(2)"},
                            "keys not a list": {"schedule": "every(2)", "keys": "loss"},
                            "loss": {"schedule": "every(2)", "keys": ["loss", 3]}}}
    known = monitor_plots.recorded_schedules(header)
    assert list(known) == ["loss"]
    assert [known["loss"](step) for step in range(4)] == [True, False, True, False]


def test_overlaid_runs_draw_the_families_of_each_runs_own_quantities(tmp_path, monkeypatch):
    # the last run's families alone were drawn: the first run's own quantity went missing
    first = _run(tmp_path / "first", steps=2, preset=None, quantities=[Spread()])
    second = _run(tmp_path / "second", steps=2, preset=None, quantities=[Renamed()])
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # each run logs none of the other's keys
        figures = _figures(monkeypatch, [first, second], out=tmp_path / "figs")
    assert sorted(figures) == ["Spread again", "Spread of the scores"]
    for figure in figures.values():
        plt.close(figure)
