"""Reopening a CSV log whose every line is complete changes nothing in it.

Only a last row cut short (no line end) is removed when a run resumes; a file that ends with a
line end, even one that holds nothing but an empty line, keeps every byte and is not written
to at all (its modification time stays), until the next record is appended.
"""

from __future__ import annotations

import os

import pytest

from gradlab.monitor import CSVSink

PAST = 1_000_000_000  # 2001-09-09, a modification time no test run can produce


@pytest.mark.parametrize(
    "content",
    [b"\n", b"step,loss\n", b"step,loss\n0,0.25\n1,0.5\n"],
    ids=["blank", "header", "rows"],
)
def test_opening_a_complete_file_keeps_its_bytes_and_its_modification_time(tmp_path, content):
    path = tmp_path / "metrics.csv"
    path.write_bytes(content)
    os.utime(path, ns=(PAST * 10**9, PAST * 10**9))
    sink = CSVSink()
    sink.open(tmp_path, {"quantities": ["loss"]})
    sink.close()
    assert path.read_bytes() == content
    assert path.stat().st_mtime_ns == PAST * 10**9


def test_a_row_after_a_complete_header_is_appended_under_it(tmp_path):
    path = tmp_path / "metrics.csv"
    path.write_bytes(b"step,loss\n")
    sink = CSVSink()
    sink.open(tmp_path, {"quantities": ["loss"]})
    sink.write({"step": 3, "loss": 0.75})
    sink.close()
    assert path.read_bytes() == b"step,loss\n3,0.75\r\n"
