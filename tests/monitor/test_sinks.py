"""File sinks: NaN and infinities round-trip; each sink names its files and last step."""

import csv
import json
import math
import sys
import warnings

import pytest

from gradlab import GradlabError, Monitor
from gradlab.extras import install_hint
from gradlab.monitor import CSVSink, JSONLSink, Loss, TensorBoardSink, every, read_jsonl
from gradlab.monitor.sinks import SINKS, jsonl_headers, read_segments, stepped_jsonl_headers
from tests.helpers import training
from tests.helpers.event_files import write_users_event_file
from tests.helpers.malformed_logs import MALFORMED
from tests.helpers.sink_data import TABLE, FixedTable, same
from tests.helpers.training import train


def _run(tmp_path, sinks):
    with Monitor(tmp_path, quantities=[FixedTable(every(1))], sinks=sinks) as monitor:
        train(monitor, steps=len(TABLE))
    return monitor


def test_jsonl_round_trips_nan_and_infinities(tmp_path):
    _run(tmp_path, ["jsonl"])
    _, records = read_jsonl(tmp_path / "metrics.jsonl")
    assert [r["step"] for r in records] == [0, 1, 2]
    for record, row in zip(records, TABLE, strict=True):
        assert set(record) == {"step", *row}
        assert all(same(record[key], value) for key, value in row.items())


def test_csv_round_trips_nan_and_infinities(tmp_path):
    _run(tmp_path, ["csv"])
    with (tmp_path / "metrics.csv").open(newline="") as handle:
        rows = list(csv.DictReader(handle))
    assert [int(row["step"]) for row in rows] == [0, 1, 2]
    for row, expected in zip(rows, TABLE, strict=True):
        assert all(same(float(row[key]), value) for key, value in expected.items())


def test_tensorboard_round_trips_nan_and_infinities(tmp_path):
    pytest.importorskip("tensorboard")
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    _run(tmp_path, ["tensorboard"])
    accumulator = EventAccumulator(str(tmp_path))
    accumulator.Reload()
    for key in TABLE[0]:
        events = accumulator.Scalars(key)
        assert [event.step for event in events] == [0, 1, 2]
        # TensorBoard stores float32: 1e-300 underflows to 0, the rest is exact.
        expected = [row[key] if abs(row[key]) != 1e-300 else 0.0 for row in TABLE]
        assert all(same(e.value, v) for e, v in zip(events, expected, strict=True))


def test_tensorboard_writes_no_event_for_a_record_without_a_number(tmp_path):
    pytest.importorskip("tensorboard")
    from tensorboard.backend.event_processing.event_file_loader import EventFileLoader

    sink = TensorBoardSink()
    sink.open(tmp_path, {"quantities": ["loss"]})
    sink.write({"step": 0, "loss": 0.5})
    sink.write({"step": 1, "disabled": {"own": "step 1: raised in compute(): ValueError: x"}})
    sink.close()
    (path,) = TensorBoardSink().existing(tmp_path)
    summaries = [event for event in EventFileLoader(str(path)).Load()
                 if event.HasField("summary")]  # fmt: skip
    # the header's text, then step 0's values: no empty event at step 1
    assert [(event.step, len(event.summary.value)) for event in summaries] == [(0, 1), (0, 1)]


@pytest.mark.parametrize(
    ("sink", "log_file"),
    [(JSONLSink(), "metrics.jsonl"), (CSVSink(), "metrics.csv")],
)
def test_file_sinks_report_their_files_and_last_step(tmp_path, sink, log_file):
    assert sink.existing(tmp_path) == [] and sink.last_step(tmp_path) is None
    _run(tmp_path, [sink])
    assert sink.existing(tmp_path) == [tmp_path / log_file]
    assert sink.last_step(tmp_path) == len(TABLE) - 1


def test_tensorboard_sink_reports_its_event_files_not_another_writers(tmp_path):
    pytest.importorskip("tensorboard")
    users = write_users_event_file(tmp_path)
    assert TensorBoardSink().existing(tmp_path) == []
    _run(tmp_path, ["tensorboard"])
    files = TensorBoardSink().existing(tmp_path)
    assert files == sorted(set(tmp_path.glob("events.out.tfevents.*")) - {users})
    assert len(files) == 1 and files[0].name.endswith(".gradlab")


def test_read_segments_splits_runs_at_each_header(tmp_path):
    _run(tmp_path / "a", ["jsonl"])
    path = tmp_path / "a" / "metrics.jsonl"
    path.write_text(path.read_text() * 2)  # an old log: the same run appended twice
    segments = read_segments(path)
    assert [[r["step"] for r in records] for _, records in segments] == [[0, 1, 2], [0, 1, 2]]
    assert math.isinf(segments[1][1][2]["value_a"])


def test_the_readers_take_the_run_folder_as_gradlab_plot_does(tmp_path):
    # read_segments("run/gradlab_logs"), as the Hugging Face page suggests for a resumed run,
    # raised IsADirectoryError
    _run(tmp_path / "a", ["jsonl"])
    log = tmp_path / "a" / "metrics.jsonl"
    assert repr(read_segments(tmp_path / "a")) == repr(read_segments(log))  # NaN != NaN
    assert repr(read_jsonl(str(tmp_path / "a"))) == repr(read_jsonl(log))
    (tmp_path / "empty").mkdir()
    for reader in (read_segments, read_jsonl):
        with pytest.raises(GradlabError, match=r"^path must be a metrics.jsonl file or a run "
                           r"folder that holds one; got the folder '.*empty', which holds "
                           r"none$"):  # fmt: skip
            reader(tmp_path / "empty")


@pytest.mark.parametrize(
    ("module", "sink", "extra"),
    [("wandb", "wandb", "gradlab-ranking[wandb]"), ("mlflow", "mlflow", "gradlab-ranking[mlflow]"),
     ("tensorboard", "tensorboard", "gradlab-ranking[tensorboard]")],
)  # fmt: skip
def test_a_missing_extra_is_named_when_the_sink_is_asked_for(
    tmp_path, monkeypatch, module, sink, extra
):
    monkeypatch.setitem(sys.modules, module, None)  # as if it were not installed
    with pytest.raises(GradlabError) as raised:
        Monitor(tmp_path, sinks=[sink])
    message = str(raised.value)
    assert f"sinks=['{sink}']" in message and f"pip install '{extra}'" in message
    assert not (tmp_path / "metrics.jsonl").exists()


def test_every_named_sink_is_a_sink_class():
    from gradlab.monitor import Sink

    assert set(SINKS) == {"jsonl", "csv", "tensorboard", "wandb", "mlflow"}
    assert all(issubclass(cls, Sink) for cls in SINKS.values())


# --- edges of the file sinks and readers (mutation survivors) -----------------------------------


def test_read_jsonl_reads_past_a_blank_line(tmp_path):
    path = tmp_path / "metrics.jsonl"
    path.write_text('{"header": {"run": 1}}\n{"step": 0, "a": 1.5}\n\n{"step": 1, "a": "NaN"}\n')
    headers, records = read_jsonl(path)
    assert headers == [{"run": 1}] and [r["step"] for r in records] == [0, 1]
    assert math.isnan(records[1]["a"])


def test_read_segments_keeps_records_written_before_any_header(tmp_path):
    path = tmp_path / "metrics.jsonl"
    path.write_text('{"step": 0, "a": "-Infinity"}\n{"header": {"run": 2}}\n{"step": 0, "a": 2}\n')
    segments = read_segments(path)
    assert [header for header, _ in segments] == [{}, {"run": 2}]
    assert segments[0][1][0]["a"] == -math.inf and segments[1][1] == [{"step": 0, "a": 2}]


def test_require_extra_names_a_package_whose_parent_is_missing():
    from gradlab.monitor.sinks import require_extra

    # find_spec raises ModuleNotFoundError here (the parent package does not exist)
    with pytest.raises(GradlabError) as raised:
        require_extra("gradlab_no_such_package.child", "wandb", "child")
    assert str(raised.value) == (
        "child (sinks=['child']) needs the gradlab_no_such_package package, which is not "
        f"installed; install it with: {install_hint('wandb')}"
    )


@pytest.mark.parametrize(("name", "module"), [("tensorboard", "tensorboard"),
                                              ("wandb", "wandb"), ("mlflow", "mlflow")])
def test_a_sink_whose_extra_is_missing_raises_an_import_error_naming_the_extra(
    monkeypatch, name, module
):
    # a plain GradlabError, where the integrations and plotting raise MissingExtraError (an
    # ImportError too): `except ImportError` caught a missing Lightning, not a missing sink's
    monkeypatch.setitem(sys.modules, module, None)  # the import system's "not installed"
    for make in (lambda: SINKS[name](), lambda: Monitor("unused", sinks=[name])):
        with pytest.raises(ImportError) as raised:
            make()
        assert isinstance(raised.value, GradlabError) and raised.value.extra == name
        assert str(raised.value) == (
            f"{SINKS[name].__name__} (sinks=[{name!r}]) needs the {module} package, which is "
            f"not installed; install it with: {install_hint(name)}")


FILE_SINKS = ["JSONLSink", "CSVSink", "TensorBoardSink"]


@pytest.mark.parametrize("name", FILE_SINKS)
def test_closing_a_file_sink_before_opening_it_and_twice_does_nothing(tmp_path, name):
    if name == "TensorBoardSink":
        pytest.importorskip("tensorboard")
    sink = {"JSONLSink": JSONLSink, "CSVSink": CSVSink, "TensorBoardSink": TensorBoardSink}[name]()
    sink.close()  # e.g. the Monitor failed before opening every sink
    sink.open(tmp_path, {"run": 1})
    sink.write({"step": 0, "a": 1.5})
    sink.close()
    sink.close()  # e.g. closed by the Monitor's exit after an explicit close()
    assert sink.existing(tmp_path)


def test_jsonl_last_step_of_a_log_holding_only_a_header(tmp_path):
    (tmp_path / "metrics.jsonl").write_text('{"header": {"run": 1}}\n')
    assert JSONLSink().last_step(tmp_path) is None


@pytest.mark.parametrize(("content", "kept"), [
    ("", ""), ("{", ""), ('{"header": {"run": 0}}\n{"step": 0, "a"', '{"header": {"run": 0}}\n'),
    ('{"step": 3}', '{"step": 3}\n'), ('{"step": 3}\n[1, 2', '{"step": 3}\n'),
    ('{"step": 3}\n\xff\xfe', '{"step": 3}\n'),
    ('{"step": 3, "note": "caf\xe9"}', '{"step": 3, "note": "caf\xe9"}\n')],
    ids=["empty", "one byte cut short", "a record cut short", "a whole object without its line "
         "end", "a list cut short", "bytes that are not UTF-8",
         "a whole object, not UTF-8"])  # fmt: skip
def test_jsonl_reopens_a_file_without_a_line_cut_short_header_on_its_own_line(
    tmp_path, content, kept
):
    # a killed writer's last line stayed for good: every later read warned, and pandas'
    # read_json(lines=True) failed on it
    path = tmp_path / "metrics.jsonl"
    path.write_bytes(content.encode("latin-1"))
    sink = JSONLSink()
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        sink.open(tmp_path, {"run": 1})
    sink.write({"step": 0, "a": 1.5})
    sink.close()
    assert path.read_bytes().decode("latin-1") == kept + (
        '{"header": {"run": 1}}\n{"step": 0, "a": 1.5}\n'
    )
    cut = not kept.startswith(content)  # bytes of the file went: how many
    removed = len(content.encode("latin-1")) - len(kept.encode("latin-1"))
    assert [(w.category, w.filename, str(w.message)) for w in caught] == ([(
        UserWarning, __file__,
        f"gradlab.Monitor: removed the last line of {str(path)!r} ({removed} bytes with no line "
        "end that are not a whole JSON object: a write cut short by a killed process), so that "
        "every line is JSON; the run goes on after the last whole record, and logs the cut "
        "record's step again if its schedule logs that step")] if cut else [])  # fmt: skip


@pytest.mark.parametrize(("back_to", "steps"),
                         [(3, [0, 1, 2, 3, 4]), (6, [0, 1, 2, 3, 4, 5, 6, 7])])
def test_a_run_resumed_from_an_earlier_checkpoint_is_one_line_in_tensorboard(tmp_path, back_to,
                                                                            steps):
    # resumed at step 3 of a run that had logged 0-5, TensorBoard drew 0..5 then 3, 4: the
    # steps redone twice over, a line that jumps back; a resumption after the last step keeps all
    pytest.importorskip("tensorboard")
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    with Monitor(tmp_path, quantities=[Loss(every(1))], sinks=["jsonl", "tensorboard"]) as first:
        train(first, steps=6)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # the resumption at step 3 is warned of
        with Monitor(tmp_path, quantities=[Loss(every(1))], sinks=["jsonl", "tensorboard"],
                     resume=True) as monitor:  # fmt: skip
            monitor.step_count = back_to
            train(monitor, steps=2, seed=1)
    accumulator = EventAccumulator(str(tmp_path))
    accumulator.Reload()
    assert [event.step for event in accumulator.Scalars("loss")] == steps
    _, records = read_jsonl(tmp_path / "metrics.jsonl", as_trained=True)
    by_step = {record["step"]: record["loss"] for record in records}
    assert [pytest.approx(by_step[e.step], rel=1e-6) == e.value
            for e in accumulator.Scalars("loss")] == [True] * len(steps)  # the latest values


@pytest.mark.parametrize("prefix", ["", "gradlab/"])
def test_a_users_summary_writer_in_the_folder_is_warned_of_unless_a_prefix_parts_the_tags(
    tmp_path, prefix
):
    # a SummaryWriter of the user's in the log folder: TensorBoard read its "loss" and
    # gradlab's as one series, two sources on two scales, and nothing was said
    pytest.importorskip("tensorboard")
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    write_users_event_file(tmp_path)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        with Monitor(tmp_path, quantities=[Loss(every(1))],
                     sinks=[TensorBoardSink(prefix=prefix)]) as monitor:  # fmt: skip
            train(monitor, steps=2)
    said = [str(w.message) for w in caught if "another TensorBoard writer" in str(w.message)]
    (users,) = [path.name for path in tmp_path.glob("events.out.tfevents.*")
                if not path.name.endswith(".gradlab")]  # fmt: skip
    assert said == ([] if prefix else [
        f"gradlab.Monitor: {str(tmp_path)!r} holds event files of another TensorBoard writer "
        f"({users}, a SummaryWriter of yours?): TensorBoard shows every event file of a folder "
        "as one run, so a tag it writes under one of gradlab's keys (loss, ...) becomes one "
        "line with gradlab's; pass sinks=[TensorBoardSink(prefix='gradlab/')], or write yours "
        "into another folder"])
    assert all(w.category is UserWarning for w in caught if "another TensorBoard" in str(w.message))
    # at the line that logged the first record: the training loop's monitor.step()
    assert [w.filename for w in caught if "another TensorBoard" in str(w.message)] == (
        [] if prefix else [training.__file__])
    accumulator = EventAccumulator(str(tmp_path))
    accumulator.Reload()
    assert [e.step for e in accumulator.Scalars(f"{prefix}loss")] == [0, 1]
    assert "user/lr" in accumulator.Tags()["scalars"]


def test_tensorboard_alone_in_its_folder_says_nothing_and_a_bad_prefix_is_refused(tmp_path):
    pytest.importorskip("tensorboard")
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        _run(tmp_path, ["tensorboard"])
    with pytest.raises(GradlabError, match=r"^prefix must be a string; got 3$"):
        TensorBoardSink(prefix=3)


def test_a_resumed_tensorboard_run_warns_of_no_writer_and_holds_each_header(tmp_path):
    # its own earlier event file is no other writer's; the restart event goes after the header
    pytest.importorskip("tensorboard")
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    for resume in (False, True):
        with warnings.catch_warnings():
            warnings.simplefilter("error")
            with Monitor(tmp_path, quantities=[Loss(every(1))], sinks=["jsonl", "tensorboard"],
                         resume=resume) as monitor:  # fmt: skip
                train(monitor, steps=2, seed=int(resume))
    headers, _ = read_jsonl(tmp_path / "metrics.jsonl")
    accumulator = EventAccumulator(str(tmp_path), size_guidance={"tensors": 0})
    accumulator.Reload()
    written = [json.loads(event.tensor_proto.string_val[0].decode())
               for event in accumulator.Tensors("gradlab/header/text_summary")]  # fmt: skip
    assert written == headers and headers[1]["resumed"]["from_step"] == 2
    assert [event.step for event in accumulator.Scalars("loss")] == [0, 1, 2, 3]


def test_tensorboard_holds_the_header_as_json_text(tmp_path):
    pytest.importorskip("tensorboard")
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    _run(tmp_path, ["jsonl", "tensorboard"])
    headers, _ = read_jsonl(tmp_path / "metrics.jsonl")
    accumulator = EventAccumulator(str(tmp_path), size_guidance={"tensors": 0})
    accumulator.Reload()
    (event,) = accumulator.Tensors("gradlab/header/text_summary")
    assert json.loads(event.tensor_proto.string_val[0].decode()) == headers[0]


# --- readers on malformed lines: skipped with one warning, or refused under strict=True ---------

GOOD = b'{"header": {"run": 1}}\n{"step": 0, "a": 1.5}\n'


@pytest.mark.parametrize("reader", [read_jsonl, read_segments])
@pytest.mark.parametrize("case", list(MALFORMED))
def test_a_malformed_line_is_skipped_with_a_warning_naming_it(tmp_path, reader, case):
    line, reason = MALFORMED[case]
    path = tmp_path / "metrics.jsonl"
    path.write_bytes(GOOD + line + b'{"step": 2, "a": 0.5}\n')
    with pytest.warns(UserWarning) as caught:
        result = reader(path)
    assert len(caught) == 1
    assert str(caught[0].message) == f"{path}:3: skipped a line that is {reason}"
    records = result[1] if reader is read_jsonl else result[0][1]
    assert [r["step"] for r in records] == [0, 2]  # the lines around it are kept
    with pytest.raises(GradlabError) as raised:
        reader(path, strict=True)
    assert str(raised.value).startswith(f"{path}:3: every line must be a gradlab header or record")
    assert str(raised.value).endswith(f"this one is {reason}")


def test_only_a_last_line_without_its_end_is_said_to_be_a_write_cut_short(tmp_path):
    # a line followed by a line end was written whole: "a write cut short?" misled there
    path = tmp_path / "metrics.jsonl"
    path.write_bytes(GOOD + b'{"step": 1, "a": 0.\n' + b'{"step": 2, "a": 0.5}\n{"step": 3, "a')
    with pytest.warns(UserWarning) as caught:
        _, records = read_jsonl(path)
    assert [r["step"] for r in records] == [0, 2]
    assert [str(w.message) for w in caught] == [
        f"{path}:3: skipped 2 of 5 lines (line 3: not valid JSON (a line edited by hand, or "
        "written by another program?); line 5: not valid JSON (a write cut short?))"]


def test_several_malformed_lines_are_counted_in_one_warning(tmp_path):
    path = tmp_path / "metrics.jsonl"
    path.write_bytes(GOOD + b"null\n\xff\xfe\nnull\n[]\n" + b'{"step": 1, "a": 1}\n')
    with pytest.warns(UserWarning) as caught:
        _, records = read_jsonl(path)
    assert [str(w.message) for w in caught] == [
        f"{path}:3: skipped 4 of 7 lines (lines 3, 5: not a JSON object (a JSON null); "
        "line 4: not UTF-8 text; line 6: not a JSON object (a JSON array))"
    ]
    assert [r["step"] for r in records] == [0, 1]


def test_random_bytes_give_no_record_and_strict_must_be_a_bool(tmp_path):
    path = tmp_path / "metrics.jsonl"
    path.write_bytes(bytes(range(128, 256)) * 3)
    with pytest.warns(UserWarning, match="not UTF-8 text"):
        assert read_jsonl(path) == ([], [])
    with pytest.raises(GradlabError, match="strict must be True or False; got 'yes'"):
        read_jsonl(path, strict="yes")


# --- the note of dropped records, sink by sink --------------------------------------------------


def test_csv_writes_the_dropped_steps_as_rows_holding_only_their_step(tmp_path):
    sink = CSVSink()
    sink.open(tmp_path, {"run": 1})
    sink.write({"step": 0, "a": 1.5, "b": 2.0})
    sink.write({"step": 3, "a": 0.5, "b": 1.0, "dropped_records": 2, "dropped_steps": [1, 2]})
    sink.close()
    assert (tmp_path / "metrics.csv").read_bytes() == (
        b"step,a,b\r\n0,1.5,2.0\r\n1,,\r\n2,,\r\n3,0.5,1.0\r\n"
    )


def test_csv_whose_first_record_notes_dropped_steps_keeps_them_out_of_its_columns(tmp_path):
    sink = CSVSink()
    sink.open(tmp_path, {"run": 1})
    sink.write({"step": 1, "a": 1.5, "dropped_records": 1, "dropped_steps": [0]})
    sink.close()
    assert (tmp_path / "metrics.csv").read_bytes() == b"step,a\r\n0,\r\n1,1.5\r\n"


def test_jsonl_keeps_the_note_of_dropped_steps_in_the_record(tmp_path):
    sink = JSONLSink()
    sink.open(tmp_path, {"run": 1})
    sink.write({"step": 2, "a": math.nan, "dropped_records": 2, "dropped_steps": [0, 1]})
    sink.close()
    lines = (tmp_path / "metrics.jsonl").read_text().splitlines()
    assert json.loads(lines[1]) == {"step": 2, "a": "NaN", "dropped_records": 2,
                                    "dropped_steps": [0, 1]}  # fmt: skip


@pytest.mark.parametrize("name", ["JSONLSink", "CSVSink"])
def test_a_failed_write_leaves_the_file_as_it_was(tmp_path, name):
    sink = {"JSONLSink": JSONLSink, "CSVSink": CSVSink}[name]()
    sink.open(tmp_path, {"run": 1})
    sink.write({"step": 0, "a": 1.5})
    path = sink.existing(tmp_path)[0]
    before = path.read_bytes()
    real = sink.handle

    class HalfThenFull:  # a full disk: writes what fits, then raises
        def write(self, data):
            real.write(bytes(data[: len(data) // 2]))
            raise OSError(28, "No space left on device")

        def fileno(self):
            return real.fileno()

    sink.handle = HalfThenFull()
    with pytest.raises(OSError, match="No space left"):
        sink.write({"step": 1, "a": 2.5})
    assert path.read_bytes() == before
    sink.handle = real
    sink.write({"step": 2, "a": 3.5})
    sink.close()
    assert path.read_bytes().startswith(before) and path.read_bytes().endswith(b"\n")


# --- CSV columns that a later record brings ----------------------------------------------------


def test_csv_keeps_the_keys_of_a_quantity_on_a_sparser_schedule_than_the_first_record(tmp_path):
    """Steps counted from 1 (as the Trainer callback does): step 1 logs the loss alone, step 2
    the margins too. Their columns were left out of metrics.csv, silently."""
    from gradlab.monitor import Loss, Margins

    with Monitor(tmp_path, quantities=[Loss(every(1)), Margins(every(2))],
                 sinks=["jsonl", "csv"]) as monitor:  # fmt: skip
        monitor.step_count = 1
        train(monitor, steps=4)
    _, records = read_jsonl(tmp_path / "metrics.jsonl")
    with (tmp_path / "metrics.csv").open(newline="") as handle:
        rows = list(csv.DictReader(handle))
    assert "margin_mean" not in records[0] and "margin_mean" in records[1]
    assert [row["step"] for row in rows] == ["1", "2", "3", "4"]
    for row, record in zip(rows, records, strict=True):
        assert set(row) == {"step", "loss", *records[1]}
        for key, value in row.items():
            assert value == ("" if key not in record else str(record[key]))


def _widening_refused(tmp_path, monkeypatch, owner, name):
    """A CSV sink whose second record widens its header while ``owner.name`` raises a full
    disk's error (which the write must raise); returns the sink and the file's bytes before."""
    sink = CSVSink()
    sink.open(tmp_path, {"run": 1})
    sink.write({"step": 0, "a": 1.5})
    before = (tmp_path / "metrics.csv").read_bytes()

    def refuse(*args):
        raise OSError(28, "No space left on device")

    with monkeypatch.context() as patch:
        patch.setattr(owner, name, refuse)
        with pytest.raises(OSError, match="No space left"):
            sink.write({"step": 1, "a": 0.5, "b": 2.0})
    return sink, before


def test_csv_widened_by_a_later_record_is_rewritten_whole_or_not_at_all(tmp_path, monkeypatch):
    import gradlab.monitor.sinks as sinks

    sink, before = _widening_refused(tmp_path, monkeypatch, sinks.os, "replace")
    assert (tmp_path / "metrics.csv").read_bytes() == before
    assert sorted(path.name for path in tmp_path.iterdir()) == ["metrics.csv"]
    sink.write({"step": 1, "a": 0.5, "b": 2.0})  # retried: the header grows once
    sink.write({"step": 2, "b": 1.0})
    sink.close()
    assert (tmp_path / "metrics.csv").read_bytes() == (
        b"step,a,b\r\n0,1.5,\r\n1,0.5,2.0\r\n2,,1.0\r\n"
    )


_KILLED_WHILE_WIDENING = """
import os, sys
import gradlab.monitor.sinks as sinks
from gradlab.monitor import CSVSink

sink = CSVSink()
sink.open(sinks.Path(sys.argv[1]), {"run": 1})
sink.write({"step": 0, "a": 1.5})
sinks.os.replace = lambda source, target: os._exit(9)  # killed hard before the move
sink.write({"step": 1, "a": 0.5, "b": 2.0})
"""


@pytest.mark.slow
@pytest.mark.parametrize("reopen", ["resume", "overwrite", "sink"])
def test_a_writer_killed_while_widening_leaves_no_copy_once_the_folder_is_opened(tmp_path, reopen):
    import subprocess

    import torch

    import gradlab

    folder = tmp_path / "run"
    folder.mkdir()
    killed = subprocess.run([sys.executable, "-c", _KILLED_WHILE_WIDENING, str(folder)],
                            capture_output=True, timeout=120)  # fmt: skip
    assert killed.returncode == 9
    assert (folder / ".metrics.csv.widened").is_file()  # what a hard kill leaves
    with (folder / "metrics.csv").open(newline="") as handle:
        assert list(csv.reader(handle)) == [["step", "a"], ["0", "1.5"]]  # whole, unwidened
    if reopen == "sink":  # reopened with the columns it has: no widening removes the copy
        sink = CSVSink()
        sink.open(folder, {"run": 2})
        sink.write({"step": 1, "a": 0.5})
        sink.close()
    else:
        with Monitor(folder, preset="cheap", every=1, sinks=["csv"],
                     **{reopen: True}) as monitor:  # fmt: skip
            loss_fn = monitor.watch(gradlab.SmoothAPLoss(0.05))
            embeddings = torch.randn(8, 4, generator=torch.Generator().manual_seed(0))
            loss_fn(embeddings.requires_grad_(), torch.arange(8) % 2).backward()
            monitor.step()
    assert sorted(path.name for path in folder.iterdir()) == ["metrics.csv"]
    with (folder / "metrics.csv").open(newline="") as handle:
        rows = list(csv.DictReader(handle))
    assert [row["step"] for row in rows] == (["0"] if reopen == "overwrite" else ["0", "1"])


def test_a_widening_whose_copy_cannot_be_written_raises_that_error(tmp_path, monkeypatch):
    # the copy fails before it exists (a full disk at open): its clean-up finds no file and
    # the writer's own error is what the caller sees, the CSV file untouched
    import pathlib

    sink, before = _widening_refused(tmp_path, monkeypatch, pathlib.Path, "write_bytes")
    sink.close()
    assert (tmp_path / "metrics.csv").read_bytes() == before
    assert sorted(path.name for path in tmp_path.iterdir()) == ["metrics.csv"]


@pytest.mark.parametrize("keys", [("a",), ("a", "b")])
def test_a_first_row_that_failed_leaves_the_header_to_the_next_record_with_its_keys(
    tmp_path, keys
):
    # The file system refuses the first row part way (a file-size limit: the write stores what
    # fits, then fails, as a full disk does): nothing stays in the file, and the next record,
    # with the same keys or a key more, writes the header whole.
    import resource
    import signal

    sink = CSVSink()
    sink.open(tmp_path, {"run": 1})
    limits = resource.getrlimit(resource.RLIMIT_FSIZE)
    handler = signal.signal(signal.SIGXFSZ, signal.SIG_IGN)  # the write fails; no signal kills
    try:
        resource.setrlimit(resource.RLIMIT_FSIZE, (4, limits[1]))  # "step,a" does not fit
        with pytest.raises(OSError):
            sink.write({"step": 0, "a": 1.5})
    finally:
        resource.setrlimit(resource.RLIMIT_FSIZE, limits)
        signal.signal(signal.SIGXFSZ, handler)
    assert (tmp_path / "metrics.csv").read_bytes() == b""  # the 4 bytes that fit: cut back
    values = {"a": 0.5, "b": 2.0}
    sink.write({"step": 1, **{key: values[key] for key in keys}})
    sink.close()
    with (tmp_path / "metrics.csv").open(newline="") as handle:
        assert list(csv.reader(handle)) == [["step", *keys],
                                            ["1", *(str(values[key]) for key in keys)]]


def test_the_last_header_is_found_on_an_indented_line(tmp_path):
    # a JSON line may start with spaces (a file written by another tool): still a header
    from gradlab.monitor.sinks import last_jsonl_header

    path = tmp_path / "metrics.jsonl"
    path.write_text('{"header": {"tau": 0.1}}\n{"step": 0}\n  {"header": {"tau": 0.2}}\n')
    assert last_jsonl_header(path) == {"tau": 0.2}


def test_the_last_step_of_a_log_skips_a_bad_line_with_a_warning_and_a_cut_end_quietly(tmp_path):
    # a damaged middle line is said (read_jsonl says it too); the last line a killed writer cut
    # short is expected there and passed over quietly
    from gradlab.monitor.sinks import last_jsonl_step

    log = tmp_path / "metrics.jsonl"
    lines = [json.dumps({"header": {"version": 1}}), json.dumps({"step": 1, "loss": 0.5}),
             "{not json", json.dumps({"step": 2, "loss": 0.4}), '{"step": 3, "lo']
    log.write_text("\n".join(lines))
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        assert last_jsonl_step(log) == 2
    assert [(w.category, str(w.message)) for w in caught] == [
        (UserWarning, f"{log}:3: skipped a line that is not valid JSON (a line edited by hand, or "
        "written by another program?)")]


def test_the_last_steps_warning_of_a_bad_line_points_at_its_caller(tmp_path):
    from gradlab.monitor.sinks import last_jsonl_step

    log = tmp_path / "metrics.jsonl"
    log.write_text(json.dumps({"step": 1}) + "\n{not json\n" + json.dumps({"step": 2}) + "\n")
    with pytest.warns(UserWarning, match="skipped a line that is not valid JSON") as caught:
        last_jsonl_step(log)
    assert [w.filename for w in caught] == [__file__]


def test_stepped_headers_are_those_a_record_follows_and_every_header_is_listed(tmp_path):
    log = tmp_path / "metrics.jsonl"
    log.write_text('{"header": {"run": 1}}\n'  # no step: a run that logged nothing
                   '{"header": {"run": 2}}\n'
                   'not json\n'  # an unreadable line is no step
                   '{"header": {"run": 3}}\n'
                   '  {"step": 0, "loss": 1.0}\n'
                   '{"step": 1, "loss": 0.5}\n'
                   '{"header": {"run": 4}}\n'
                   '{"step": 2}\n')  # fmt: skip
    assert [header["run"] for header in stepped_jsonl_headers(log)] == [3, 4]
    assert [header["run"] for header in jsonl_headers(log)] == [1, 2, 3, 4]
    assert stepped_jsonl_headers(tmp_path) == [{"run": 3}, {"run": 4}]  # the run folder


def test_a_sink_is_located_at_its_file_else_at_the_log_folder(tmp_path):
    """Where a fault's warning says a sink writes: its file in log_dir, else log_dir."""
    from gradlab.monitor import Sink

    class Folder(Sink):
        def write(self, record):
            pass

    class NotAName(Folder):
        filename = 3  # no file name: the folder

    assert JSONLSink().location(tmp_path) == str(tmp_path / "metrics.jsonl")
    assert CSVSink("log.csv").location(tmp_path) == str(tmp_path / "log.csv")
    assert Folder().location(tmp_path) == str(tmp_path)
    assert NotAName().location(tmp_path) == str(tmp_path)


def test_sink_kinds_names_the_kinds_given_by_name_or_as_objects():
    from gradlab.monitor.sinks import sink_kinds

    class MyCSV(CSVSink):
        pass

    assert sink_kinds(["jsonl"]) == {"jsonl"}
    assert sink_kinds([CSVSink("copy.csv")]) == {"csv"}
    assert sink_kinds([MyCSV("mine.csv"), "tensorboard"]) == {"csv", "tensorboard"}
    assert sink_kinds([]) == set() and sink_kinds(["no such sink"]) == set()


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc/self/mem")
def test_an_event_file_that_cannot_be_read_is_no_gradlab_event_file(tmp_path):
    # /proc/self/mem is a file whose first bytes cannot be read (EIO): a link to it stands for
    # an unreadable event file, which is not taken for gradlab's
    from gradlab.monitor.sinks import gradlab_event_files

    (tmp_path / "events.out.tfevents.1.host.1.0").symlink_to("/proc/self/mem")
    (tmp_path / "events.out.tfevents.1.host.2.0.gradlab").write_bytes(b"")
    assert [path.name for path in gradlab_event_files(tmp_path)] == [
        "events.out.tfevents.1.host.2.0.gradlab"]


@pytest.mark.parametrize("header", [None, {}])
def test_a_csv_sink_opened_without_a_run_header_writes_its_rows(tmp_path, header):
    sink = CSVSink("rows.csv")
    sink.open(tmp_path, header)
    sink.write({"step": 0, "loss": 0.5})
    sink.close()
    with open(tmp_path / "rows.csv", newline="") as handle:
        assert list(csv.DictReader(handle)) == [{"step": "0", "loss": "0.5"}]
