"""Sinks read back: the exact JSON encodings of NaN and +-infinity, and reopened folders.

The values written are the fixed table of ``sink_data.py`` (not computed by gradlab). A resumed
run reopens the folder: JSONL appends a second header, CSV keeps its one header row and its
columns (a run whose records hold other keys must not shift the old columns), TensorBoard
starts a second event file; every file holds both runs' steps and values.
"""

from __future__ import annotations

import csv
import json
import math
import time
import warnings

import pytest
import torch

from gradlab import GradlabError, Monitor
from gradlab.monitor import CSVSink, JSONLSink, Loss, Quantity, every, read_jsonl
from gradlab.monitor.sinks import decode_value, encode_value
from tests.helpers.sink_data import TABLE, FixedTable, same
from tests.helpers.training import train

RAW = {math.nan: "NaN", math.inf: "Infinity", -math.inf: "-Infinity"}


def _raw(value):
    if math.isnan(value):
        return "NaN"
    return RAW.get(value, value)


def _run(log_dir, sinks, steps=3, resume=False, quantities=None):
    quantities = quantities or [FixedTable(every(1))]
    with Monitor(log_dir, quantities=quantities, sinks=sinks, resume=resume) as monitor:
        train(monitor, steps=steps)


def test_jsonl_writes_the_javascript_names_of_nan_and_each_infinity(tmp_path):
    _run(tmp_path, ["jsonl"])
    lines = (tmp_path / "metrics.jsonl").read_text().splitlines()
    raw = [json.loads(line) for line in lines[1:]]  # no decoding: the strings as written
    for record, row in zip(raw, TABLE, strict=True):
        assert {key: record[key] for key in row} == {key: _raw(v) for key, v in row.items()}


@pytest.mark.parametrize("value", [0.0, -2.5, 1e-300, 7, "Infinite", "nan", None, True])
def test_other_values_pass_through_encode_and_decode_unchanged(value):
    assert encode_value(value) == value and type(encode_value(value)) is type(value)
    assert decode_value(value) == value and type(decode_value(value)) is type(value)


@pytest.mark.parametrize("value", [math.inf, -math.inf, math.nan])
def test_non_finite_values_round_trip_through_encode_and_decode(value):
    assert isinstance(encode_value(value), str)
    assert same(decode_value(encode_value(value)), value)
    assert math.copysign(1.0, decode_value(encode_value(value))) == math.copysign(1.0, value)


def _csv_rows(path):
    with path.open(newline="") as handle:
        return list(csv.reader(handle))


def test_reopened_jsonl_and_csv_hold_both_runs_with_one_csv_header(tmp_path):
    _run(tmp_path, ["jsonl", "csv"], steps=2)
    _run(tmp_path, ["jsonl", "csv"], steps=1, resume=True)  # the table's third row, step 2
    headers, records = read_jsonl(tmp_path / "metrics.jsonl")
    assert len(headers) == 2 and headers[1]["resumed"]["from_step"] == 2
    assert [r["step"] for r in records] == [0, 1, 2]
    expected = [TABLE[0], TABLE[1], TABLE[0]]  # a new FixedTable starts at its first row
    for record, row in zip(records, expected, strict=True):
        assert all(same(record[key], value) for key, value in row.items())
    rows = _csv_rows(tmp_path / "metrics.csv")
    assert rows[0] == ["step", *TABLE[0]]  # the header, once
    assert [row[0] for row in rows[1:]] == ["0", "1", "2"]
    for row, values in zip(rows[1:], expected, strict=True):
        assert all(same(float(cell), v) for cell, v in zip(row[1:], values.values(), strict=True))
    assert CSVSink().last_step(tmp_path) == JSONLSink().last_step(tmp_path) == 2


def test_a_reopened_csv_keeps_its_columns_and_adds_those_of_the_new_run(tmp_path):
    _run(tmp_path, ["jsonl", "csv"], steps=2)
    # The resumed run logs the loss first and the table's keys after it.
    _run(tmp_path, ["jsonl", "csv"], steps=1, resume=True,
         quantities=[Loss(every(1)), FixedTable(every(1))])  # fmt: skip
    _, records = read_jsonl(tmp_path / "metrics.jsonl")
    with (tmp_path / "metrics.csv").open(newline="") as handle:
        rows = list(csv.DictReader(handle))
    assert list(rows[0]) == ["step", *TABLE[0], "loss"]  # the old columns first, in order
    assert len(rows) == 3
    for row, record in zip(rows, records, strict=True):
        for key in ("step", *TABLE[0]):
            assert same(float(row[key]), float(record[key])), key
    assert [row["loss"] for row in rows[:2]] == ["", ""]  # the first run logged no loss
    assert float(rows[2]["loss"]) == records[2]["loss"]


def test_a_csv_cut_short_mid_row_loses_only_the_cut_row(tmp_path):
    _run(tmp_path, ["jsonl", "csv"], steps=2)
    path = tmp_path / "metrics.csv"
    path.write_text(path.read_text() + "2,0.5")  # a writer killed mid-row
    _run(tmp_path, ["jsonl", "csv"], steps=1, resume=True)
    rows = _csv_rows(path)
    assert [row[0] for row in rows[1:]] == ["0", "1", "2"]  # the cut row gone, step 2 anew
    assert all(len(row) == len(rows[0]) for row in rows)


def test_reopened_tensorboard_folder_holds_both_runs(tmp_path):
    pytest.importorskip("tensorboard")
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    _run(tmp_path, ["jsonl", "tensorboard"], steps=2)
    _run(tmp_path, ["jsonl", "tensorboard"], steps=1, resume=True)
    files = sorted(tmp_path.glob("events.out.tfevents.*"))
    assert len(files) == 2
    steps, values = [], []
    for path in files:  # each run's own event file, read on its own
        accumulator = EventAccumulator(str(path))
        accumulator.Reload()
        events = accumulator.Scalars("value_b")
        steps += [e.step for e in events]
        values += [e.value for e in events]
    assert steps == [0, 1, 2]
    assert all(same(v, row["value_b"]) for v, row in zip(values, [*TABLE[:2], TABLE[0]],
                                                          strict=True))  # fmt: skip


def test_tensorboard_holds_every_value_of_every_record_and_the_header(tmp_path):
    """Each key of the table at each step, as TensorBoard keeps a scalar (float32: 1e-300 is
    0, NaN and the infinities stay), and the run's header as its text."""
    pytest.importorskip("tensorboard")
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    _run(tmp_path, ["jsonl", "tensorboard"], quantities=[FixedTable(every(1)), Loss(every(1))])
    headers, records = read_jsonl(tmp_path / "metrics.jsonl")
    accumulator = EventAccumulator(str(tmp_path), size_guidance={"tensors": 0})
    accumulator.Reload()
    assert sorted(accumulator.Tags()["scalars"]) == ["loss", *sorted(TABLE[0])]
    for key in TABLE[0]:
        events = accumulator.Scalars(key)
        assert [e.step for e in events] == [0, 1, 2]
        for event, row in zip(events, TABLE, strict=True):
            assert same(event.value, float(torch.tensor(row[key], dtype=torch.float32))), key
    losses = [float(torch.tensor(r["loss"], dtype=torch.float32)) for r in records]
    assert [e.value for e in accumulator.Scalars("loss")] == losses
    (header,) = accumulator.Tensors("gradlab/header/text_summary")
    assert [json.loads(header.tensor_proto.string_val[0])] == headers


def test_one_csv_sink_object_serves_one_run_after_another(tmp_path):
    # The same CSVSink for a resumed run, then for a new folder whose run logs other keys: the
    # second file gets its own header from its own first record (not the resumed file's
    # columns), and no write goes to the closed file of the run before.
    sink = CSVSink()
    _run(tmp_path / "first", [sink], steps=2)
    _run(tmp_path / "first", [sink], steps=1, resume=True)
    _run(tmp_path / "second", [sink], steps=2, quantities=[Loss(every(1)), FixedTable(every(1))])
    with (tmp_path / "first" / "metrics.csv").open(newline="") as handle:
        first = list(csv.DictReader(handle))
    with (tmp_path / "second" / "metrics.csv").open(newline="") as handle:
        second = list(csv.DictReader(handle))
    assert [row["step"] for row in first] == ["0", "1", "2"]
    assert list(second[0]) == ["step", "loss", *TABLE[0]]  # the quantities' order
    assert [row["step"] for row in second] == ["0", "1"]


def test_a_csv_holding_only_its_header_has_no_last_step(tmp_path):
    (tmp_path / "metrics.csv").write_text("step,loss\r\n", encoding="utf-8")
    assert CSVSink().last_step(tmp_path) is None


def test_resuming_over_an_empty_csv_puts_the_header_on_its_first_line(tmp_path):
    _run(tmp_path, ["jsonl"], steps=2)
    (tmp_path / "metrics.csv").touch()  # an empty file: nothing to keep, nothing cut short
    with pytest.warns(UserWarning, match="is new in this resumed run"):  # the run's records
        _run(tmp_path, ["jsonl", "csv"], steps=1, resume=True)
    lines = (tmp_path / "metrics.csv").read_bytes().decode("utf-8").split("\r\n")
    assert lines[0] == ",".join(["step", *TABLE[0]])
    assert [line.split(",")[0] for line in lines[1:4]] == ["0", "1", "2"]


class LineBreakKey(Quantity):
    """A quantity whose key holds a line break (the CSV writer quotes it)."""

    name = "line_break_key"
    key = "line\r\nbreak"
    keys = (key,)

    def compute(self, batch):
        return {self.key: torch.tensor(0.25, dtype=torch.float64)}


def test_a_key_with_a_line_break_keeps_its_csv_column_when_resumed(tmp_path):
    # The reopened file's header is read back as written (newline=""): with universal newlines
    # the key would read back as "line\nbreak" and the resumed rows would lose its value.
    _run(tmp_path, ["jsonl", "csv"], steps=2, quantities=[LineBreakKey(every(1))])
    _run(tmp_path, ["jsonl", "csv"], steps=1, resume=True, quantities=[LineBreakKey(every(1))])
    with (tmp_path / "metrics.csv").open(newline="", encoding="utf-8") as handle:
        rows = list(csv.DictReader(handle))
    assert [row["step"] for row in rows] == ["0", "1", "2"]
    assert [row[LineBreakKey.key] for row in rows] == ["0.25"] * 3


def test_a_cut_short_jsonl_line_warning_names_the_line_that_read_the_log(tmp_path, monkeypatch):
    from tests.helpers.warning_frames import frame_named_by_stacklevel

    path = tmp_path / "metrics.jsonl"
    path.write_text('{"step": 0, "loss": 1.0}\n{"step": 1, "lo\n', encoding="utf-8")
    named = []

    def record(message, category=UserWarning, stacklevel=1, **kwargs):
        if "not valid JSON" in str(message):
            named.append(frame_named_by_stacklevel(stacklevel).f_code.co_filename)

    monkeypatch.setattr(warnings, "warn", record)
    _, records = read_jsonl(path)
    assert [r["step"] for r in records] == [0] and named == [__file__]


def test_a_header_with_nan_in_its_config_is_strict_json_and_reads_back(tmp_path):
    # jq and JavaScript refuse bare NaN: the header's nested values are encoded as records are
    config = {"lr": math.nan, "schedule": {"warmup": math.inf}, "betas": [0.9, -math.inf]}
    with Monitor(tmp_path, preset="cheap", every=1, config=config) as monitor:
        train(monitor, steps=1)

    def refuse(constant):
        raise ValueError(f"not strict JSON: {constant}")

    for line in (tmp_path / "metrics.jsonl").read_text().splitlines():
        json.loads(line, parse_constant=refuse)
    (header,), _ = read_jsonl(tmp_path / "metrics.jsonl")
    assert math.isnan(header["config"]["lr"])
    assert header["config"]["schedule"] == {"warmup": math.inf}
    assert header["config"]["betas"] == [0.9, -math.inf]


def test_a_tensorboard_event_file_opens_with_its_version_and_every_event_has_its_time(tmp_path):
    # the sink writes its events itself: TensorBoard reads a file as events only after a first
    # event naming the format's version, and orders a run's events by their wall time
    pytest.importorskip("tensorboard")
    from tensorboard.backend.event_processing.event_file_loader import EventFileLoader

    start = time.time()
    _run(tmp_path, ["jsonl", "tensorboard"], steps=2)
    end = time.time()
    (path,) = tmp_path.glob("events.out.tfevents.*")
    events = list(EventFileLoader(str(path)).Load())
    assert events[0].file_version == "brain.Event:2"
    assert all(start <= event.wall_time <= end for event in events)
    assert [event.step for event in events[2:]] == [0, 1]  # after the version and the header


def _trained_by_brute_force(runs):
    """Each run's records, a step kept when no later record of its run has a step at or
    below it (training went back past it): the definition, checked pair by pair."""
    kept = []
    for records in runs:
        kept += [r for i, r in enumerate(records)
                 if all(later["step"] > r["step"] for later in records[i + 1:])]
    return kept


def test_read_jsonl_as_trained_keeps_the_records_the_training_went_on_with(tmp_path):
    # run 1: steps 0-5; resumed at 3 (an earlier checkpoint), steps 3-6; step_count set back
    # to 5 within that part; resumed after its end at 7; then a second run from step 0.
    parts = [({}, [0, 1, 2, 3, 4, 5]),
             ({"resumed": {"from_step": 3}}, [3, 4, 5, 6, 5, 6]),
             ({"resumed": {"from_step": 7}}, [7, 8]),
             ({}, [0, 1, 1, 2])]  # fmt: skip
    lines, runs, tag = [], [], 0
    for header, steps in parts:
        lines.append(json.dumps({"header": header}))
        if not header.get("resumed"):
            runs.append([])
        for step in steps:
            tag += 1  # tells records of one step apart
            lines.append(json.dumps({"step": step, "tag": tag}))
            runs[-1].append({"step": step, "tag": tag})
    (tmp_path / "metrics.jsonl").write_text("\n".join(lines) + "\n")
    headers, trained = read_jsonl(tmp_path, as_trained=True)
    assert headers == [header for header, _ in parts]
    assert trained == _trained_by_brute_force(runs)
    assert [r["step"] for r in trained] == [0, 1, 2, 3, 4, 5, 6, 7, 8, 0, 1, 2]
    _, every_record = read_jsonl(tmp_path)
    assert every_record == [r for run in runs for r in run]


@pytest.mark.parametrize("value", [1, "yes", None])
def test_read_jsonl_refuses_an_as_trained_that_is_not_a_bool(tmp_path, value):
    (tmp_path / "metrics.jsonl").write_text('{"step": 0}\n')
    with pytest.raises(GradlabError, match=r"as_trained must be True or False; got "):
        read_jsonl(tmp_path, as_trained=value)
