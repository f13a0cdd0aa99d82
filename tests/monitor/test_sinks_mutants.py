"""The sinks' reading of cut files: the warning's line list, and CSV rows cut short by a killed
writer (removed on reopening, however far the last line end lies from the end of the file); the
CSV file's rows around the Monitor's note of disabled quantities and in a resumption; the
records of a log of several runs as trained."""

from __future__ import annotations

import csv

import pytest

from gradlab.monitor import CSVSink, read_jsonl


@pytest.mark.parametrize(
    ("bad", "listed"),
    [
        (2, "lines 2, 3"),
        (5, "lines 2, 3, 4, 5, 6"),
        (6, "lines 2, 3, 4, 5, 6 and 1 more"),
        (8, "lines 2, 3, 4, 5, 6 and 3 more"),
    ],
)
def test_the_skipped_lines_are_listed_up_to_five_then_counted(tmp_path, bad, listed):
    path = tmp_path / "metrics.jsonl"
    path.write_text('{"step": 0}\n' + "[1]\n" * bad)
    with pytest.warns(UserWarning) as caught:
        read_jsonl(path)
    assert str(caught[0].message) == (
        f"{path}:2: skipped {bad} of {bad + 1} lines ({listed}: not a JSON object (a JSON array))"
    )


def _reopen_and_write(path, step):
    sink = CSVSink()
    sink.open(path.parent, {"header": True})
    sink.write({"step": step, "loss": 0.5})
    sink.close()
    with open(path, newline="") as handle:
        return list(csv.reader(handle))


def test_a_row_cut_short_right_after_a_block_of_the_search_is_removed(tmp_path):
    # the last line end is the first byte of the last 64 KiB of the file
    path = tmp_path / "metrics.csv"
    path.write_bytes(b"step,loss\n0,0.25" + b"\n" + b"1," + b"9" * (65536 - 3))
    assert path.stat().st_size - 65536 == len(b"step,loss\n0,0.25")
    with pytest.warns(UserWarning, match=r"removed the last row of .* \(65535 bytes with"):
        rows = _reopen_and_write(path, 1)
    assert rows == [["step", "loss"], ["0", "0.25"], ["1", "0.5"]]


def test_a_file_without_a_line_end_is_started_again(tmp_path):
    path = tmp_path / "metrics.csv"
    path.write_bytes(b"step,lo")
    with pytest.warns(UserWarning, match=r"removed the last row of .* \(7 bytes with"):
        rows = _reopen_and_write(path, 0)
    assert rows == [["step", "loss"], ["0", "0.5"]]


def test_a_row_cut_short_far_from_the_header_is_removed(tmp_path):
    path = tmp_path / "metrics.csv"
    path.write_bytes(b"step,loss\n0,0.25\n1," + b"9" * 200_000)
    with pytest.warns(UserWarning) as caught:  # the one warning: the removal, named
        rows = _reopen_and_write(path, 1)
    assert rows == [["step", "loss"], ["0", "0.25"], ["1", "0.5"]]
    assert [str(w.message) for w in caught] == [
        f"gradlab.Monitor: removed the last row of {str(path)!r} (200002 bytes with no line "
        "end: a write cut short by a killed process), so that no row is left half empty; the "
        "run goes on after the last whole row, and logs the cut row's step again if its "
        "schedule logs that step"]


@pytest.mark.parametrize(
    ("line", "kind"), [("true", "boolean"), ("null", "null"), ('"a"', "string")]
)
def test_a_json_value_that_is_not_an_object_is_named_by_its_kind(tmp_path, line, kind):
    path = tmp_path / "metrics.jsonl"
    path.write_text('{"step": 0}\n' + line + "\n")
    with pytest.warns(UserWarning) as caught:
        read_jsonl(path)
    assert str(caught[0].message) == (
        f"{path}:2: skipped a line that is not a JSON object (a JSON {kind})"
    )


def test_the_dropped_counts_never_become_csv_columns(tmp_path):
    sink = CSVSink()
    sink.open(tmp_path, {"header": True})
    sink.write({"step": 0, "loss": 0.5, "dropped_records": 0, "dropped_steps": []})
    sink.write({"step": 1, "loss": 0.25})
    sink.close()
    with open(tmp_path / "metrics.csv", newline="") as handle:
        assert list(csv.reader(handle)) == [["step", "loss"], ["0", "0.5"], ["1", "0.25"]]


NOTE = {"spread": "step 1: raised in compute(): ValueError: x"}


def _csv_rows(folder, *records):
    folder.mkdir(exist_ok=True)
    sink = CSVSink()
    sink.open(folder, {"header": True})
    for record in records:
        sink.write(record)
    sink.close()
    with open(folder / "metrics.csv", newline="") as handle:
        return list(csv.reader(handle))


def test_a_record_of_the_note_alone_gets_no_csv_row(tmp_path):
    # a row holding only its step reads as a step the sink missed after a fault
    rows = _csv_rows(tmp_path, {"step": 0, "loss": 0.5}, {"step": 1, "disabled": NOTE})
    assert rows == [["step", "loss"], ["0", "0.5"]]
    assert _csv_rows(tmp_path / "alone", {"step": 1, "disabled": NOTE}) == []


def test_a_record_with_the_note_and_values_gets_its_row_without_the_note(tmp_path):
    rows = _csv_rows(tmp_path, {"step": 0, "loss": 0.5, "disabled": NOTE},
                     {"step": 1, "loss": 0.25})  # fmt: skip
    assert rows == [["step", "loss"], ["0", "0.5"], ["1", "0.25"]]
    later = _csv_rows(tmp_path / "later", {"step": 0, "loss": 0.5},
                      {"step": 1, "loss": 0.25, "disabled": NOTE})  # fmt: skip
    assert later == [["step", "loss"], ["0", "0.5"], ["1", "0.25"]]


def test_the_steps_missed_before_a_record_of_the_note_alone_get_their_rows(tmp_path):
    # the sink missed steps 1 and 2 after a fault; step 3's record holds only the note
    missed = {"step": 3, "disabled": NOTE, "dropped_records": 2, "dropped_steps": [1, 2]}
    rows = _csv_rows(tmp_path, {"step": 0, "loss": 0.5}, missed)
    assert rows == [["step", "loss"], ["0", "0.5"], ["1", ""], ["2", ""]]


def test_a_csv_file_new_in_a_resumption_gets_the_steps_before_it_not_that_step(tmp_path):
    # the run logged steps 0 to 4 without the CSV sink, then went back to its checkpoint at
    # step 3 with it: steps 0, 1, 2 are copied from metrics.jsonl, step 3 is logged again
    lines = ['{"header": {}}'] + [f'{{"step": {step}, "loss": {step}.5}}' for step in range(5)]
    (tmp_path / "metrics.jsonl").write_text("\n".join(lines) + "\n")
    sink = CSVSink()
    with pytest.warns(UserWarning, match=r"3 records \(steps 0 to 2\) before step 3"):
        sink.open(tmp_path, {"resumed": {"from_step": 3}})
    sink.write({"step": 3, "loss": 9.0})
    sink.close()
    with open(tmp_path / "metrics.csv", newline="") as handle:
        assert list(csv.reader(handle)) == [["step", "loss"], ["0", "0.5"], ["1", "1.5"],
                                            ["2", "2.5"], ["3", "9.0"]]  # fmt: skip


def test_records_as_trained_keep_every_run_of_a_log_of_three(tmp_path):
    # three runs one after the other (no header marks a resumption): each keeps its records
    path = tmp_path / "metrics.jsonl"
    path.write_text('{"header": {}}\n{"step": 0, "run": 1}\n{"header": {}}\n'
                    '{"step": 0, "run": 2}\n{"header": {}}\n{"step": 0, "run": 3}\n')  # fmt: skip
    _, records = read_jsonl(path, as_trained=True)
    assert [record["run"] for record in records] == [1, 2, 3]
