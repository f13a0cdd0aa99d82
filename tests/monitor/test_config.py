"""MonitorConfig: the Monitor's options written and checked once, shared with the callback."""

from __future__ import annotations

import dataclasses
import warnings

import pytest

from gradlab import GradlabError
from gradlab.monitor import (
    PRESETS,
    SINKS,
    CSVSink,
    JSONLSink,
    Loss,
    Monitor,
    MonitorConfig,
    WandbSink,
    every,
    read_jsonl,
)
from tests.helpers.monitor_options import BAD_OPTIONS
from tests.helpers.training import train


@pytest.mark.parametrize(("kwargs", "message"), BAD_OPTIONS)
def test_bad_values_are_refused_when_the_config_is_made(kwargs, message):
    with pytest.raises(GradlabError, match=message):
        MonitorConfig(**kwargs)


def test_the_config_is_frozen_and_normalised_once():
    options = MonitorConfig(every=3, sinks="jsonl", quantities=[Loss()])
    with pytest.raises(dataclasses.FrozenInstanceError):
        options.tau = 0.5
    assert options.sinks == ("jsonl",)
    assert isinstance(options.quantities, tuple)
    assert [options.every(step) for step in range(4)] == [True, False, False, True]


def test_the_monitors_keywords_are_the_configs_fields():
    import inspect

    keywords = [name for name in inspect.signature(Monitor).parameters if name != "log_dir"]
    assert keywords == MonitorConfig.names()
    defaults = {name: parameter.default
                for name, parameter in inspect.signature(Monitor).parameters.items()
                if name != "log_dir"}  # fmt: skip
    assert defaults == {field.name: field.default for field in dataclasses.fields(MonitorConfig)}


def test_unknown_option_names_are_refused_with_the_allowed_ones():
    with pytest.raises(GradlabError, match=r"monitor options must be among \['tau', .*\]; "
                                           r"got \['temperature'\]"):  # fmt: skip
        MonitorConfig.of({"temperature": 0.1, "tau": 0.1})


def test_a_monitor_from_a_config_logs_as_one_from_keywords(tmp_path):
    options = MonitorConfig(preset="cheap", every=2, config={"lr": 0.1})
    with Monitor.from_config(tmp_path / "a", options) as first:
        train(first, steps=4)
    with Monitor(tmp_path / "b", preset="cheap", every=2, config={"lr": 0.1}) as second:
        train(second, steps=4)
    (header_a,), records_a = read_jsonl(tmp_path / "a" / "metrics.jsonl")
    (header_b,), records_b = read_jsonl(tmp_path / "b" / "metrics.jsonl")
    assert header_a["config"] == header_b["config"] and header_a["config"]["lr"] == 0.1
    assert [r["step"] for r in records_a] == [r["step"] for r in records_b] == [0, 2, 3]
    with pytest.raises(GradlabError, match="options must be a MonitorConfig"):
        Monitor.from_config(tmp_path / "c", {"preset": "cheap"})


@pytest.mark.slow
def test_the_callback_takes_a_config_or_keywords_not_both(tmp_path):
    pytest.importorskip("lightning")
    from gradlab.integrations.lightning import GradlabCallback

    options = MonitorConfig(tau=0.05, preset="cheap")
    assert GradlabCallback(options=options).options is options
    assert GradlabCallback(tau=0.05, preset="cheap").options == options
    with pytest.raises(GradlabError, match="options must be a MonitorConfig"):
        GradlabCallback(options=options, tau=0.1)
    with pytest.raises(GradlabError, match="options must be a MonitorConfig"):
        GradlabCallback(options={"tau": 0.1})


def test_every_schedules_copies_and_leaves_the_callers_quantities_as_they_were(tmp_path):
    quantity = Loss(every(5))
    with pytest.warns(UserWarning, match=r"every=1 replaces .* \(loss every\(5\)\)"):
        first = Monitor(tmp_path / "a", quantities=[quantity], every=1)
    assert [q.should_compute(3) for q in first.quantities] == [True]  # every step here
    assert quantity.should_compute(3) is False  # the caller's object: still every 5 steps
    second = Monitor(tmp_path / "b", quantities=[quantity])  # no every: its own schedule
    assert [q.should_compute(3) for q in second.quantities] == [False]
    first.close()
    second.close()


@pytest.mark.parametrize("preset", ["full", "cheap", "default"])
def test_a_preset_and_explicit_quantities_together_are_refused_with_how_to_combine_them(preset):
    # explicit quantities replace the preset: a named preset beside them was dropped in silence
    with pytest.raises(GradlabError) as caught:
        MonitorConfig(preset=preset, quantities=[Loss()])
    assert str(caught.value) == (
        f"preset={preset!r} and quantities were both given; explicit quantities replace a "
        "preset, so pass one of them (to add quantities to a preset: "
        f"[cls(gradlab.monitor.default_schedule()) for cls in "
        f"gradlab.monitor.PRESETS[{preset!r}]] + [...], on the preset's schedule)")
    with pytest.raises(GradlabError, match=r"^preset='full' and quantities were both given"):
        Monitor("unused", preset="full", quantities=[Loss()])


def test_no_preset_means_the_default_one_or_none_beside_explicit_quantities(tmp_path):
    assert [q.name for q in MonitorConfig().make_quantities()] == [
        cls.name for cls in PRESETS["default"]]
    config = MonitorConfig(quantities=[Loss()])
    assert [quantity.name for quantity in config.make_quantities()] == ["loss"]
    with Monitor(tmp_path / "a") as monitor, Monitor(tmp_path / "b", quantities=[Loss()]) as own:
        train(monitor, steps=1)
        train(own, steps=1)
    headers = [read_jsonl(tmp_path / run / "metrics.jsonl")[0][0] for run in ("a", "b")]
    assert [header["config"]["preset"] for header in headers] == ["default", None]


ONCE = "sinks must write each record once; got "
"""The start of the refusal of two sinks that write to one place."""

EXTRAS = {"tensorboard": "tensorboard", "wandb": "wandb", "mlflow": "mlflow"}
"""The package each sink name needs."""


@pytest.mark.slow
@pytest.mark.parametrize("name", sorted(SINKS))
def test_a_sink_object_beside_its_own_name_is_refused_naming_both(tmp_path, name):
    # each would write every record (twice the header in metrics.jsonl, two event files)
    if name in EXTRAS:
        pytest.importorskip(EXTRAS[name])
    place = {
        "jsonl": "'metrics.jsonl' in log_dir",
        "csv": "'metrics.csv' in log_dir",
        "tensorboard": "TensorBoard event files into log_dir (TensorBoard shows them as one run)",
        "wandb": "the 'gradlab/*' keys of the active W&B run",
        "mlflow": "the 'gradlab/*' keys of the active MLflow run",
    }[name]
    sink = SINKS[name]()
    cls = type(sink).__name__
    with pytest.raises(GradlabError) as caught:
        Monitor(tmp_path / "run", sinks=[sink, name])
    assert str(caught.value) == (f"{ONCE}sinks[0] (a {cls}) and sinks[1] ({name!r}), which both "
                                 f"write {place}; keep one of them")  # fmt: skip
    with pytest.raises(GradlabError) as caught:
        MonitorConfig(sinks=["jsonl" if name != "jsonl" else "csv", name, SINKS[name]()])
    assert str(caught.value) == (f"{ONCE}sinks[1] ({name!r}) and sinks[2] (a {cls}), which both "
                                 f"write {place}; keep one of them")  # fmt: skip
    assert not (tmp_path / "run").exists()  # refused before anything was written


def test_two_sink_objects_of_one_file_are_refused_and_of_two_files_log_each(tmp_path):
    with pytest.raises(GradlabError) as caught:
        Monitor(tmp_path / "run", sinks=[JSONLSink(), CSVSink(), JSONLSink("metrics.jsonl")])
    assert str(caught.value) == (f"{ONCE}sinks[0] (a JSONLSink) and sinks[2] (a JSONLSink), "
                                 "which both write 'metrics.jsonl' in log_dir; keep one of them")
    with pytest.raises(GradlabError) as caught:
        Monitor(tmp_path / "run", sinks=[CSVSink("log.txt"), JSONLSink("log.txt")])
    assert str(caught.value) == (f"{ONCE}sinks[0] (a CSVSink) and sinks[1] (a JSONLSink), "
                                 "which both write 'log.txt' in log_dir; keep one of them")
    with Monitor(tmp_path / "run", preset="cheap", every=1,
                 sinks=["jsonl", JSONLSink("copy.jsonl")]) as monitor:  # fmt: skip
        train(monitor, steps=2)
    for name in ("metrics.jsonl", "copy.jsonl"):
        headers, records = read_jsonl(tmp_path / "run" / name)
        assert len(headers) == 1 and [record["step"] for record in records] == [0, 1]


@pytest.mark.parametrize("name", ["run[1].jsonl", "run?.jsonl"])
def test_two_file_sinks_of_one_file_named_like_a_glob_are_refused(tmp_path, name):
    with pytest.raises(GradlabError) as caught:
        Monitor(tmp_path / "run", sinks=[JSONLSink(name), JSONLSink(name)])
    assert str(caught.value) == (f"{ONCE}sinks[0] (a JSONLSink) and sinks[1] (a JSONLSink), "
                                 f"which both write {name!r} in log_dir; keep one of them")


def test_sinks_of_yours_whose_patterns_are_globs_are_two_sinks():
    # two NpzSinks writing a.npz and b.npz were refused as both writing '*.npz'
    from gradlab.monitor import Sink

    class NpzSink(Sink):
        patterns = ("*.npz",)

        def __init__(self, name):
            self.name = name

        def write(self, record):
            pass

    options = MonitorConfig(sinks=["jsonl", NpzSink("a.npz"), NpzSink("b.npz")])
    assert [type(sink).__name__ for sink in options.make_sinks()] == ["JSONLSink", "NpzSink",
                                                                       "NpzSink"]  # fmt: skip


def test_tracker_sinks_with_other_prefixes_are_taken_and_with_one_refused():
    pytest.importorskip("wandb")
    # other options do not matter: the second sink logs into the run the first started
    with pytest.raises(GradlabError) as caught:
        MonitorConfig(sinks=[WandbSink(project="a"), WandbSink(project="b")])
    assert str(caught.value) == (f"{ONCE}sinks[0] (a WandbSink) and sinks[1] (a WandbSink), "
                                 "which both write the 'gradlab/*' keys of the active W&B run; "
                                 "keep one of them")  # fmt: skip
    options = MonitorConfig(sinks=["wandb", WandbSink(prefix="probe/")])
    assert [type(sink).__name__ for sink in options.make_sinks()] == ["WandbSink", "WandbSink"]


def test_sinks_of_yours_that_name_one_file_are_refused_together():
    # a pattern without a wildcard names the one file the sink writes
    from gradlab.monitor import Sink

    class ExportSink(Sink):
        patterns = ("EXPORT.npz",)

        def write(self, record):
            pass

    with pytest.raises(GradlabError) as caught:
        MonitorConfig(sinks=["jsonl", ExportSink(), ExportSink()])
    assert str(caught.value) == (f"{ONCE}sinks[1] (an ExportSink) and sinks[2] (an ExportSink), "
                                 "which both write 'EXPORT.npz' in log_dir; keep one of them")


def test_make_quantities_says_which_schedules_every_replaces_unless_told_not_to():
    from gradlab.monitor.schedules import every

    config = MonitorConfig(quantities=[Loss(every(5))], every=2)
    with pytest.warns(UserWarning, match=r"every=2 replaces the schedules the quantities were "
                                         r"given \(loss every\(5\)\)"):  # fmt: skip
        quantities = config.make_quantities()
    assert [repr(q.schedule) for q in quantities] == ["every(2)"]
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # warn=False (the ranks after rank 0): said by none
        assert [repr(q.schedule) for q in config.make_quantities(warn=False)] == ["every(2)"]
