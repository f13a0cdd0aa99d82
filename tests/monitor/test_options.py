"""Monitor option values are checked at construction, with messages that name the option."""

import pytest

from gradlab import GradlabError, Monitor
from gradlab.monitor import read_jsonl
from gradlab.monitor.sinks import JSONLSink
from tests.helpers.monitor_options import BAD_OPTIONS
from tests.helpers.training import train


@pytest.mark.parametrize(("kwargs", "message"), BAD_OPTIONS)
def test_bad_option_values_are_refused_at_construction(tmp_path, kwargs, message):
    with pytest.raises(GradlabError, match=message):
        Monitor(tmp_path / "run", **kwargs)
    assert not (tmp_path / "run").exists()  # refused before anything was created


@pytest.mark.parametrize("sinks", ["jsonl", JSONLSink(), ["jsonl"]])
def test_a_single_sink_name_or_instance_is_one_sink(tmp_path, sinks):
    with Monitor(tmp_path, preset="cheap", every=1, sinks=sinks) as monitor:
        train(monitor, steps=2)
    assert len(monitor.sinks) == 1
    assert [r["step"] for r in read_jsonl(tmp_path / "metrics.jsonl")[1]] == [0, 1]


def test_schedules_with_defaults_or_varargs_are_accepted(tmp_path):
    def sparse(step, offset=1):
        return step % 2 == offset % 2

    with Monitor(tmp_path, preset="cheap", every=sparse) as monitor:
        train(monitor, steps=4)
    assert [r["step"] for r in read_jsonl(tmp_path / "metrics.jsonl")[1]] == [1, 3]
    Monitor(tmp_path / "b", every=lambda *steps: True).close()


def test_json_ready_config_is_stored_in_the_header(tmp_path):
    config = {"lr": 0.1, "layers": [64, 16], "name": "x", "nested": {"ok": None}}
    with Monitor(tmp_path, preset="cheap", every=1, config=config) as monitor:
        train(monitor, steps=1)
    header = read_jsonl(tmp_path / "metrics.jsonl")[0][0]
    assert {key: header["config"][key] for key in config} == config
