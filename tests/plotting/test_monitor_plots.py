"""gradlab plot: runs overlaid (one colour per run), restarting logs split with a warning."""

import warnings

import matplotlib.pyplot as plt
import pytest
import seaborn as sns
from matplotlib.colors import to_rgb

import gradlab.plotting.monitor as monitor_plots
from gradlab import GradlabError, Monitor
from gradlab.cli import main
from gradlab.plotting.monitor import _draw_family, load_runs, plot_runs
from tests.monitor.helpers import train
from tests.plotting.layout import captured_figures, layout_problems


def _run(log_dir, steps=4, preset="cheap", **options):
    with Monitor(log_dir, preset=preset, every=1, **options) as monitor:
        train(monitor, steps=steps)
    return log_dir


def _lines(runs, family):
    figure, axis = plt.subplots()
    keys = {"loss": ["loss"], "operating_region": ["p_seed", "p_off_diagonal"]}[family]
    _draw_family(axis, family, keys, runs)
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


def test_plot_command_overlays_runs_into_their_common_parent(tmp_path, capsys):
    _run(tmp_path / "a")
    _run(tmp_path / "b", tau=0.1)
    assert main(["plot", str(tmp_path / "a"), str(tmp_path / "b"), "--label", "tau 0.01",
                 "--label", "tau 0.1"]) == 0  # fmt: skip
    written = capsys.readouterr().out
    for name in ("overview.png", "loss.png", "embeddings.png"):
        assert f"wrote {tmp_path / 'figures' / name}" in written
        assert (tmp_path / "figures" / name).is_file()


def test_legends_leave_the_data_visible(tmp_path, monkeypatch):
    runs = [_run(tmp_path / "a", preset="default"), _run(tmp_path / "b", preset="default", tau=0.1)]
    for selection in (runs, runs[:1]):
        with captured_figures(monkeypatch, monitor_plots) as figures:
            plot_runs(selection, tmp_path / "figures")
        assert len(figures) == 6  # loss, embeddings, P, counts, degenerate batches, overview
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


def test_the_plot_command_prints_the_restart_warning(tmp_path, capsys, monkeypatch):
    log = _run(tmp_path / "old") / "metrics.jsonl"
    log.write_text(log.read_text() * 2)
    with captured_figures(monkeypatch, monitor_plots) as figures:
        assert main(["plot", str(tmp_path / "old")]) == 0
    assert len(figures) == 4 and all(plt.close(figure) is None for figure in figures)
    assert "steps restart" in capsys.readouterr().err


def test_a_resumed_run_is_one_line(tmp_path):
    _run(tmp_path / "run", steps=3)
    _run(tmp_path / "run", steps=2, resume=True)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        runs = load_runs([tmp_path / "run"])
    assert len(runs) == 1 and [r["step"] for r in runs[0][1]] == [0, 1, 2, 3, 4]


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
    with pytest.raises(GradlabError, match="holds no logged step yet"):
        plot_runs([tmp_path / "empty"])
    assert main(["plot", str(tmp_path / "empty")]) == 2
