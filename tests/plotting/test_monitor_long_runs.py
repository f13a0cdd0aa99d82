"""gradlab plot on long runs: a key logged at more steps than ``max_points`` is drawn as the
means of groups of consecutive steps over a band of each group's range, so what is drawn does
not grow with the run and a run of 500,000 steps is not one solid band.

The references are plain loops over the groups (``ceil(n / max_points)`` consecutive points),
not the code under test.
"""

from __future__ import annotations

import math
import random

import matplotlib.colors
import matplotlib.pyplot as plt
import numpy as np
import pytest

import gradlab.plotting.monitor as monitor_plots
from gradlab import GradlabError
from gradlab.cli import main
from gradlab.monitor import JSONLSink
from gradlab.plotting.monitor import draw_family, plot_runs
from tests.helpers.figure_layout import captured_figures, hidden_series, layout_problems


def _records(steps: int, seed: int = 0, nan_at=()) -> list[dict]:
    """A noisy, slowly falling loss and two P keys that lie close together."""
    rng = random.Random(seed)
    records = []
    for step in range(steps):
        loss = 1.0 / (1.0 + step / 500) + rng.gauss(0, 0.1)
        p = 0.3 + 0.1 * math.sin(step / 300) + rng.gauss(0, 0.02)
        records.append({"step": step, "loss": math.nan if step in nan_at else loss,
                        "p_seed": p, "p_off_diagonal": p + rng.gauss(0, 0.001)})  # fmt: skip
    return records


def _reference(steps: list[int], values: list[float], max_points: int):
    """(steps, means, lows, highs) of each group of ceil(n / max_points) consecutive points."""
    size = math.ceil(len(steps) / max_points)
    groups = [(steps[i : i + size], values[i : i + size]) for i in range(0, len(steps), size)]
    out = []
    for group_steps, group_values in groups:
        finite = [v for v in group_values if math.isfinite(v)]
        mean = math.fsum(finite) / len(finite) if finite else math.nan
        out.append((math.fsum(group_steps) / len(group_steps), mean,
                    min(finite, default=math.nan), max(finite, default=math.nan)))  # fmt: skip
    return [list(column) for column in zip(*out, strict=True)]


def _draw(records, keys=("loss",), family="loss", runs=1, **options):
    figure, axis = plt.subplots()
    draw_family(axis, family, list(keys), [(f"run {i}", records) for i in range(runs)],
                **options)  # fmt: skip
    return figure, axis


def test_a_long_run_is_drawn_as_the_means_of_groups_over_a_band_of_their_range():
    records = _records(2500)
    figure, axis = _draw(records, max_points=1000)  # groups of 3: 834 points
    (line,) = axis.get_lines()
    steps, means, lows, highs = _reference([r["step"] for r in records],
                                           [r["loss"] for r in records], 1000)  # fmt: skip
    assert len(steps) == 834
    np.testing.assert_allclose(line.get_xdata(), steps, rtol=1e-12)
    np.testing.assert_allclose(line.get_ydata(), means, rtol=1e-12)
    (band,) = axis.collections
    edge = band.get_paths()[0].vertices[:, 1]
    np.testing.assert_allclose(np.sort(np.unique(edge)), np.unique(lows + highs), rtol=1e-12)
    assert band.get_label() == "band: min to max of each 3 logged steps; line: their mean"
    plt.close(figure)


@pytest.mark.parametrize("steps", [1200, 12000])
def test_what_is_drawn_does_not_grow_with_the_run(steps):
    figure, axis = _draw(_records(steps), keys=("p_seed", "p_off_diagonal"),
                         family="operating_region", max_points=500)  # fmt: skip
    assert all(250 < len(line.get_xdata()) <= 500 for line in axis.get_lines())
    plt.close(figure)


def test_a_run_within_max_points_and_max_points_none_draw_every_step():
    records = _records(300)
    for options in ({"max_points": 300}, {"max_points": None}):
        figure, axis = _draw(records, **options)
        (line,) = axis.get_lines()
        assert list(line.get_xdata()) == list(range(300)) and len(axis.collections) == 0
        assert axis.get_xlabel() == "optimizer step"
        plt.close(figure)


def test_not_finite_values_keep_their_crosses_and_empty_groups_leave_gaps():
    nan_at = {7, *range(40, 50)}  # one in a group of finite values, then two whole groups
    records = _records(100, nan_at=nan_at)
    figure, axis = _draw(records, max_points=20)  # groups of 5
    line, crosses = axis.get_lines()
    _, means, _, _ = _reference(list(range(100)), [r["loss"] for r in records], 20)
    np.testing.assert_allclose(line.get_ydata(), means, rtol=1e-12)  # NaN where a group is
    assert [math.isnan(v) for v in line.get_ydata()].count(True) == 2  # steps 40-49
    assert not math.isnan(line.get_ydata()[1])  # steps 5-9: the mean of the finite four
    assert sorted(crosses.get_xdata()) == sorted(nan_at)
    plt.close(figure)


def test_identical_long_runs_and_close_keys_keep_their_markers_visible():
    records = _records(3000)
    figure, axis = _draw(records, runs=2, max_points=600)
    assert hidden_series(figure) == []  # the first run's markers show beside the second's
    plt.close(figure)
    figure, axis = _draw(records, keys=("p_seed", "p_off_diagonal"),
                         family="operating_region", max_points=600)  # fmt: skip
    assert hidden_series(figure) == []  # two keys on one another: markers at other points
    marked = [line.get_markevery() for line in axis.get_lines()]
    assert all(every[1] < 600 // 4 for every in marked)  # about eight markers, not 600
    plt.close(figure)


def _log(folder, records):
    folder.mkdir()
    sink = JSONLSink()
    sink.open(folder, {"quantities": ["loss", "operating_region"], "config": {}})
    for record in records:
        sink.write(record)
    sink.close()
    return folder


@pytest.mark.slow  # draws every figure and the overview, with their layout checks: seconds
def test_the_figures_of_a_long_run_keep_their_layout(tmp_path, monkeypatch):
    run = _log(tmp_path / "run", _records(3000))
    with captured_figures(monkeypatch, monitor_plots) as figures:
        plot_runs([run], tmp_path / "figures", max_points=500)
    assert len(figures) == 3  # loss, P, the overview
    for figure in figures:
        assert layout_problems(figure) == [], figure.axes[0].get_title()
        assert all(len(line.get_xdata()) <= 500 for a in figure.axes for line in a.get_lines())
        legends = [*figure.legends, *(axis.get_legend() for axis in figure.axes)]
        texts = [text.get_text() for legend in legends if legend for text in legend.texts]
        assert "band: min to max of each 6 logged steps; line: their mean" in texts
        plt.close(figure)


@pytest.mark.parametrize(("option", "points"), [("50", 40), ("0", 120), (None, 120)])
def test_the_plot_command_takes_max_points(tmp_path, monkeypatch, capsys, option, points):
    run = _log(tmp_path / "run", _records(120))
    extra = ["--max-points", option] if option is not None else []
    with captured_figures(monkeypatch, monitor_plots) as figures:
        assert main(["plot", str(run), *extra]) == 0
    loss = figures[0]
    assert loss.axes[0].get_title() == "Loss"
    assert len(loss.axes[0].get_lines()[0].get_xdata()) == points
    for figure in figures:
        plt.close(figure)


@pytest.mark.parametrize("option", ["1", "-3"])
def test_the_plot_command_refuses_a_bad_max_points_in_one_line(tmp_path, capsys, option):
    run = _log(tmp_path / "run", _records(5))
    assert main(["plot", str(run), "--max-points", option]) == 2
    err = capsys.readouterr().err
    assert err == (f"gradlab: --max-points must be 0 (every logged step) or a whole number of "
                   f"at least 2; got {option}\n")  # fmt: skip
    assert not (run / "figures").exists()


@pytest.mark.parametrize("value", [1, 0, -5, 2.5, True, "10"])
def test_plot_runs_refuses_a_bad_max_points_before_reading(tmp_path, value):
    with pytest.raises(GradlabError) as caught:
        plot_runs([tmp_path / "not_read"], max_points=value)
    assert str(caught.value) == ("max_points must be a whole number of at least 2 (or None: "
                                 f"every logged step); got {value!r}")  # fmt: skip


class CountingRecord(dict):
    """A record that counts how often its step is read."""

    reads = 0

    def __getitem__(self, key):
        if key == "step":
            CountingRecord.reads += 1
        return super().__getitem__(key)


def test_a_run_resumed_many_times_is_read_once_not_once_per_resumption(tmp_path, monkeypatch):
    segments = [({"resumed": {"from_step": 20 * i}} if i else {},
                 [CountingRecord(step=step, loss=0.5) for step in range(20 * i, 20 * i + 20)])
                for i in range(50)]  # fmt: skip
    _log(tmp_path / "run", [])  # a metrics.jsonl for the folder check; its content is replaced
    monkeypatch.setattr(monitor_plots, "read_segments", lambda path, **options: segments)
    CountingRecord.reads = 0
    ((_, records),) = monitor_plots.load_runs([tmp_path / "run"])
    reads = CountingRecord.reads
    assert [dict.__getitem__(record, "step") for record in records] == list(range(1000))
    assert reads <= 3 * 1000, reads  # reading the run again at each of 49 resumptions: 25,000


RESUMED = {
    # a job preempted again and again, each time resumed from its last checkpoint (every 10
    # steps): steps after the checkpoint were logged twice; the reader keeps the later ones
    "six": [(0, 15), (10, 27), (20, 31), (30, 40), (40, 44), (40, 52), (50, 60), (60, 62),
            (60, 65)],
    "five": [(0, 15), (10, 20), (15, 25), (20, 30), (25, 35), (30, 40)],
    # back to step 5, then on from step 10: past what the run holds by then (5-6), though
    # below the largest step logged before (14): not a going back
    "one, then on": [(0, 15), (5, 7), (10, 12)],
}  # fmt: skip
"""(first step, end) of each segment of a log: a run and its resumptions."""


@pytest.mark.parametrize("case", RESUMED)
def test_resumptions_from_earlier_checkpoints_are_told_in_one_warning(tmp_path, case):
    folder = tmp_path / "run"
    folder.mkdir()
    sink = JSONLSink()
    kept, back = [], []  # the records to draw; (step, records replaced) of each going back
    segments = RESUMED[case]
    for start, end in segments:
        sink.open(folder, {"config": {}, **({"resumed": {"from_step": start}} if start else {})})
        written = [{"step": step, "loss": start + step / 100} for step in range(start, end)]
        for record in written:
            sink.write(record)
        sink.close()
        replaced = sum(record["step"] >= start for record in kept)
        back += [(start, replaced)] if replaced else []
        kept = [record for record in kept if record["step"] < start] + written
    with pytest.warns(UserWarning) as caught:
        ((_, records),) = monitor_plots.load_runs([folder])
    assert records == kept
    assert len(back) == {"six": 6, "five": 5, "one, then on": 1}[case]
    log = folder / "metrics.jsonl"
    if len(back) == 1:
        ((step, replaced),) = back
        expected = (f"{log}: a resumption starts at step {step}, which the run had logged "
                    f"already (it went back to an earlier checkpoint, or its step count started "
                    f"over); its records replace the "
                    f"{replaced} from step {step} on")  # fmt: skip
    else:
        steps = ", ".join(str(step) for step, _ in back[:5])
        more = f" and {len(back) - 5} more" if len(back) > 5 else ""
        expected = (f"{log}: {len(back)} resumptions start at steps the run had logged already "
                    f"(they went back to earlier checkpoints, or their step counts started "
                    f"over: steps {steps}{more}); their "
                    f"records replace the {sum(n for _, n in back)} logged before from those "
                    f"steps on")  # fmt: skip
    assert [str(w.message) for w in caught] == [expected]


def test_downsample_gives_each_group_the_mean_and_range_of_its_finite_values():
    """Against the float loop of each group: a group with a NaN or an infinity among finite
    values takes the finite ones only; a group without one is NaN in all three."""
    rng = random.Random(3)
    values = [rng.uniform(-2, 2) for _ in range(40)]
    values[5], values[6] = math.nan, math.inf  # among finite values
    values[12:16] = [math.nan, -math.inf, math.inf, math.nan]  # a whole group of 4
    steps = [3 * i for i in range(40)]  # steps are integers
    got = monitor_plots.downsample(steps, values, 10)
    for column, expected in zip(got, _reference(steps, values, 10), strict=True):
        assert column.dtype == np.float64
        np.testing.assert_allclose(column, expected, rtol=1e-12)  # NaN where expected
    assert [math.isnan(v) for v in got[2]].count(True) == 1  # only the group of steps 36-45


def test_bands_take_their_lines_colour_translucent_without_an_edge(tmp_path, monkeypatch):
    run = _log(tmp_path / "run", _records(400))
    with captured_figures(monkeypatch, monitor_plots) as figures:
        plot_runs([run], tmp_path / "figures", overview=False, max_points=100)
    (figure,) = [f for f in figures if f.axes[0].get_title().startswith("Operating")]
    axis = figure.axes[0]
    lines, bands = axis.get_lines(), axis.collections
    assert len(lines) == len(bands) == 2
    for line, band in zip(lines, bands, strict=True):
        colour = matplotlib.colors.to_rgb(line.get_color())
        assert [tuple(face[:3]) for face in band.get_facecolor()] == [pytest.approx(colour)]
        assert 0 < band.get_alpha() < 1  # the line shows over its band
        assert list(band.get_linewidth()) == [0]
    legends = [*figure.legends, *(a.get_legend() for a in figure.axes if a.get_legend())]
    (swatch,) = [handle for legend in legends for handle in legend.legend_handles
                 if handle.get_label() == bands[0].get_label()]  # fmt: skip
    assert matplotlib.colors.to_rgb(swatch.get_facecolor()) == pytest.approx((0.5, 0.5, 0.5))
    assert 0 < swatch.get_alpha() < 1  # a band's grey, not a line's colour
    for figure in figures:
        plt.close(figure)


@pytest.mark.parametrize("max_points", [None, 10])
def test_a_zero_based_axis_holds_every_key_drawn_not_only_the_last(max_points):
    """The top of a family drawn from 0 is that of all its keys' lines and bands: a last key
    of zeros does not squash the axis to 0..1 under a first key that reaches 4."""
    records = [{"step": step, "gradient_count_mean": 4.0 - step % 3, "gradient_count_q10": 0.0}
               for step in range(30)]  # fmt: skip
    figure, axis = _draw(records, keys=("gradient_count_mean", "gradient_count_q10"),
                         family="gradient_counts", max_points=max_points)  # fmt: skip
    low, high = axis.get_ylim()
    assert low < 0 and high >= 4.0
    plt.close(figure)


def test_grouped_lines_of_several_keys_mark_a_few_points_each_at_different_points():
    records = _records(3000)
    figure, axis = _draw(records, keys=("p_seed", "loss"), family="operating_region",
                         max_points=600)  # fmt: skip
    marked = []
    for line in axis.get_lines():
        start, spacing = line.get_markevery()
        assert type(start) is int and type(spacing) is int  # floats: fractions of the axes
        points, marks = len(line.get_xdata()), monitor_plots.MARKS
        assert marks / 2 <= len(range(start, points, spacing)) <= 2 * marks
        marked.append(set(range(start, points, spacing)))
    assert len(marked) == 2 and not marked[0] & marked[1]
    plt.close(figure)


def test_the_smallest_max_points_draws_two_points():
    figure, axis = _draw(_records(9), max_points=2)
    (line,) = axis.get_lines()
    assert list(line.get_xdata()) == [2.0, 6.5]  # groups of steps 0-4 and 5-8
    plt.close(figure)


def test_plot_run_passes_max_points_on(tmp_path, monkeypatch):
    run = _log(tmp_path / "run", _records(120))
    for max_points, drawn in ((30, 30), (None, 120)):
        with captured_figures(monkeypatch, monitor_plots) as figures:
            monitor_plots.plot_run(run, tmp_path / "figures", overview=False,
                                   max_points=max_points)  # fmt: skip
        assert len(figures[0].axes[0].get_lines()[0].get_xdata()) == drawn
        for figure in figures:
            plt.close(figure)


def test_draw_family_refuses_a_bad_max_points_itself():
    """draw_family is public: it checks max_points as plot_runs does, before drawing."""
    figure, axis = plt.subplots()
    with pytest.raises(GradlabError, match="max_points must be a whole number of at least 2"):
        draw_family(axis, "loss", ["loss"], [("run", _records(5))], max_points=1)
    assert axis.get_lines() == []
    plt.close(figure)


def test_the_bands_of_overlaid_runs_take_each_runs_colour():
    """Several runs: a line takes its run's colour, and so does its band, whatever the key."""
    figure, axis = _draw(_records(300), keys=("p_seed", "p_off_diagonal"),
                         family="operating_region", runs=2, max_points=50)  # fmt: skip
    lines, bands = axis.get_lines(), axis.collections
    assert len(lines) == len(bands) == 4
    assert len({line.get_color() for line in lines}) == 2  # one colour per run
    for line, band in zip(lines, bands, strict=True):
        colour = matplotlib.colors.to_rgb(line.get_color())
        assert [tuple(face[:3]) for face in band.get_facecolor()] == [pytest.approx(colour)]
    plt.close(figure)


def _refused(run, capsys) -> str:
    """What ``gradlab plot RUN`` says of ``run`` after the common prefix (exit code 2)."""
    assert main(["plot", str(run)]) == 2
    prefix = (f"gradlab: RUN_DIR must hold a metrics.jsonl written by gradlab.Monitor; got "
              f"{str(run)!r}, which holds ")  # fmt: skip
    err = capsys.readouterr().err
    assert err.startswith(prefix) and err.endswith("\n")
    return err.removeprefix(prefix).removesuffix("\n")


@pytest.mark.parametrize(("sinks", "held"), [
    (["csv"], "a metrics.csv only (gradlab plot reads the JSONL sink's metrics.jsonl: log with "
              "sinks=['jsonl', 'csv'])"),
    # sinks="tensorboard" (one name) left no metrics.jsonl, and the refusal named no sinks
    ("tensorboard", "the event files of gradlab's TensorBoard sink only (gradlab plot reads "
                    "the JSONL sink's metrics.jsonl: log with sinks=['jsonl', 'tensorboard'], "
                    "and read these in TensorBoard)")])  # fmt: skip
def test_a_run_logged_without_the_jsonl_sink_is_refused_saying_what_plot_reads(
        tmp_path, capsys, sinks, held):
    if sinks == "tensorboard":
        pytest.importorskip("tensorboard")
    from gradlab import Monitor
    from tests.helpers.training import train

    with Monitor(tmp_path / "run", preset="cheap", every=1, sinks=sinks) as monitor:
        train(monitor, steps=2)
    assert _refused(tmp_path / "run", capsys) == held


def test_another_writers_event_files_get_no_sinks_advice(tmp_path, capsys):
    pytest.importorskip("tensorboard")
    from torch.utils.tensorboard import SummaryWriter

    with SummaryWriter(tmp_path / "theirs") as writer:
        writer.add_scalar("loss", 0.5, 0)
    assert _refused(tmp_path / "theirs", capsys) == "no metrics.jsonl"


def test_another_loggers_metrics_csv_is_refused_as_not_a_gradlab_log(tmp_path, capsys):
    """Lightning's CSVLogger folder (sorted columns, ``epoch`` first) gets no sinks advice; the
    gradlab run below it is still named."""
    from gradlab import Monitor
    from tests.helpers.training import train

    folder = tmp_path / "lightning_logs" / "version_0"
    with Monitor(folder / "gradlab_logs", preset="cheap", every=1) as monitor:
        train(monitor, steps=2)
    (folder / "metrics.csv").write_text("epoch,loss,step\n0,0.5,0\n0,0.4,1\n")
    assert main(["plot", str(folder)]) == 2
    assert capsys.readouterr().err == (
        f"gradlab: RUN_DIR must hold a metrics.jsonl written by gradlab.Monitor; got "
        f"{str(folder)!r}, whose metrics.csv is not a gradlab log (its first column is 'epoch', "
        "not gradlab's 'step': another logger wrote it, such as Lightning's CSVLogger); runs "
        f"below it: {str(folder / 'gradlab_logs')!r}\n"
    )


@pytest.mark.parametrize(("content", "said"), [
    # gradlab's CSV sink creates its file before its first row: still gradlab's
    (b"", ", which holds a metrics.csv only (gradlab plot reads the JSONL sink's metrics.jsonl: "
          "log with sinks=['jsonl', 'csv'])"),
    (b"\n", ", which holds a metrics.csv only (gradlab plot reads the JSONL sink's "
             "metrics.jsonl: log with sinks=['jsonl', 'csv'])"),
    # bytes that are no UTF-8 are read as replacement characters, not a UnicodeDecodeError
    (b"\xffepoch,loss\n", ", whose metrics.csv is not a gradlab log (its first column is "
                          "'\ufffdepoch', not gradlab's 'step': another logger wrote it, such as "
                          "Lightning's CSVLogger)"),
])  # fmt: skip
def test_a_metrics_csv_without_a_header_or_of_other_bytes_is_named_in_one_line(
    tmp_path, capsys, content, said
):
    (tmp_path / "metrics.csv").write_bytes(content)
    assert main(["plot", str(tmp_path)]) == 2
    assert capsys.readouterr().err == (
        f"gradlab: RUN_DIR must hold a metrics.jsonl written by gradlab.Monitor; got "
        f"{str(tmp_path)!r}{said}\n")


def test_downsample_takes_integer_values_on_a_log_axis_as_numbers():
    """Integer values (counts) on a log axis: each group's line is its geometric mean."""
    from matplotlib.scale import LogTransform

    values = [2, 30, 500, 7000, 20, 3, 400, 60000, 5]  # logs that are no integers
    steps, means, lows, highs = monitor_plots.downsample(range(9), values, 3, LogTransform(10))
    groups = [values[i : i + 3] for i in (0, 3, 6)]
    assert steps.tolist() == [1.0, 4.0, 7.0]
    np.testing.assert_allclose(
        means, [10 ** (sum(math.log10(v) for v in g) / 3) for g in groups], rtol=1e-12)
    assert (lows.tolist(), highs.tolist()) == ([min(g) for g in groups], [max(g) for g in groups])

