"""The sinks' reading of cut files: the warning's line list, and CSV rows cut short by a killed
writer (removed on reopening, however far the last line end lies from the end of the file)."""

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
