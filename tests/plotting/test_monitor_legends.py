"""gradlab plot's legends: a key drawn as a band under a later key shows as that band in the
legend, and an overlay names the runs that log none of a figure's keys."""

import matplotlib.pyplot as plt
import pytest

import gradlab.plotting.monitor as monitor_plots
from gradlab import Monitor
from gradlab.monitor import Loss, Plot, Quantity, every
from gradlab.plotting.monitor import plot_runs
from tests.helpers.figure_layout import captured_figures
from tests.helpers.training import train

STEPS = 7
"""Enough records (at least twice the family's three keys) for two keys to be judged lying on
one another over the run."""


class Twins(Quantity):
    """Three keys of one family: two that lie on one another (the first is drawn as a band
    under the second) and one apart from both."""

    name = "twins"
    needs = frozenset({"scores"})
    keys = ("twin_low", "twin_high", "apart")
    plots = (Plot("twins", "Twin lines", "value", (("twin_low", "low twin"),
                  ("twin_high", "high twin"), ("apart", "apart"))),)  # fmt: skip

    def compute(self, batch):
        spread = batch.scores.std()
        return {"twin_low": spread, "twin_high": spread * 1.001, "apart": spread + 10}


def _run(log_dir, quantity):
    with Monitor(log_dir, preset=None, quantities=[quantity(every(1))]) as monitor:
        train(monitor, steps=STEPS)
    return log_dir


def _legends(monkeypatch, run_dirs, out):
    """The legend entries (label, line width, alpha, line style) of the twins figure and of
    the overview's twins panel."""
    with captured_figures(monkeypatch, monitor_plots) as figures:
        plot_runs(run_dirs, out)
    titled = {figure.axes[0].get_title(): figure for figure in figures[:-1]}
    panels = {axis.get_title(): axis for axis in figures[-1].axes}
    legends = {"figure": titled["Twin lines"].axes[0].get_legend(),
               "overview": panels["Twin lines"].get_legend()}
    entries = {where: [(text.get_text(), handle.get_linewidth(), handle.get_alpha(),
                        handle.get_linestyle())
                       for text, handle in zip(legend.texts, legend.legend_handles, strict=True)]
               for where, legend in legends.items()}  # fmt: skip
    for figure in figures:
        plt.close(figure)
    return entries


def test_a_key_under_a_later_one_shows_as_its_band_in_the_legend(tmp_path, monkeypatch):
    run = _run(tmp_path / "run", Twins)
    band = (monitor_plots.COVERED_LINE_WIDTH, monitor_plots.COVERED_ALPHA)
    line = (monitor_plots.LINE_WIDTH, None)
    entries = _legends(monkeypatch, [run], tmp_path / "figures")
    for where in ("figure", "overview"):
        assert [(label, width, alpha) for label, width, alpha, _ in entries[where]] == [
            ("low twin", *band), ("high twin", *line), ("apart", *line)], where


@pytest.mark.parametrize("without", [["b"], ["b", "c"]])
def test_an_overlay_names_the_runs_that_log_none_of_the_keys(tmp_path, monkeypatch, without):
    runs = [_run(tmp_path / "a", Twins)] + [_run(tmp_path / name, Loss) for name in without]
    entries = _legends(monkeypatch, runs, tmp_path / "figures")
    for where in ("figure", "overview"):
        label, _, _, style = entries[where][-1]
        assert label == f"not logged by: {', '.join(without)}", where
        assert style == "None", where  # an entry without a line: no run is drawn for it
        assert [label for label, *_ in entries[where][:-1]] == (
            (["a"] if where == "figure" else []) + ["low twin", "high twin", "apart"]), where
