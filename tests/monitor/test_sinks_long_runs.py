"""Long runs: what the sinks keep and read does not grow with the number of logged steps.

A run of days logs hundreds of thousands of records. Resuming it reads back its last step;
that read must not hold the whole log in memory (a log of 500,000 records of the full preset
is 1.5 GB on disk and several GB as Python objects). Measured with ``tracemalloc`` on logs of
two lengths: the peak of the smaller one is the yardstick, not a byte count.
"""

from __future__ import annotations

import tracemalloc
import warnings

import pytest

from gradlab import Monitor
from gradlab.monitor import JSONLSink, read_jsonl, read_segments

KEYS = [f"quantity_{index}" for index in range(60)]  # about the full preset's width


def _log(folder, records: int, cut_at: int | None = None) -> None:
    """A metrics.jsonl of ``records`` records written through the JSONL sink; the record at
    ``cut_at`` is written again after a copy of it cut short (a killed writer's line)."""
    sink = JSONLSink()
    sink.open(folder, {"quantities": ["loss"], "config": {"tau": 0.01, "preset": None}})
    for step in range(records):
        sink.write({"step": step, **{key: step + index / 7 for index, key in enumerate(KEYS)}})
    sink.close()
    if cut_at is not None:
        with (folder / "metrics.jsonl").open("ab") as handle:
            handle.write(b'{"step": %d, "quantity_0": 1.2' % cut_at)


def _peak_of_resuming(folder) -> tuple[int, int]:
    """(the resumed Monitor's first step, the peak of traced memory while it was made)."""
    tracemalloc.start()
    try:
        monitor = Monitor(folder, preset="cheap", resume=True)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    start = monitor.step_count
    monitor.close(log_last_step=False)
    return start, peak


@pytest.mark.slow
def test_resuming_a_long_log_does_not_hold_its_records_in_memory(tmp_path):
    short, long = tmp_path / "short", tmp_path / "long"
    short.mkdir()
    long.mkdir()
    _log(short, 200)
    _log(long, 4000)  # 20 times as many records: about 8 MB of dicts if held at once
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # another preset than the log's: warned, not tested
        _peak_of_resuming(short)  # first use: imports and caches, not the log
        start_short, peak_short = _peak_of_resuming(short)
        start_long, peak_long = _peak_of_resuming(long)
    assert (start_short, start_long) == (200, 4000)
    assert peak_long < 2 * peak_short, (peak_short, peak_long)


def test_resuming_after_a_line_cut_short_goes_on_after_the_last_whole_record(tmp_path):
    _log(tmp_path, 50, cut_at=50)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        start, _ = _peak_of_resuming(tmp_path)
    assert start == 50  # the cut record's step is logged again
    # closed before any step, the resume leaves the file as it was: the cut line goes at the
    # first record a resume writes (tests/monitor/test_runs.py)
    assert [w for w in caught if "removed the last line" in str(w.message)] == []


def _traced(make):
    """(what ``make()`` returns, the traced memory it still holds afterwards)."""
    tracemalloc.start()
    try:
        made = make()
        held, _ = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    return made, held


@pytest.mark.slow
def test_records_read_back_take_about_the_memory_of_the_same_dicts_built_in_python(tmp_path):
    _log(tmp_path, 2000)
    (_, records), held = _traced(lambda: read_jsonl(tmp_path / "metrics.jsonl"))
    # the yardstick: the same values (new float objects, as read) in dicts that share one set
    # of key strings, as a training loop's own dicts of results do
    built, yardstick = _traced(lambda: [{"step": r["step"], **{key: r[key] * 1.0 for key in KEYS}}
                                        for r in records])  # fmt: skip
    assert built == records
    assert held < 1.3 * yardstick, (held, yardstick)  # every key a string of its own: 2.5 x
    segments, held_segments = _traced(lambda: read_segments(tmp_path / "metrics.jsonl"))
    assert segments[0][1] == records and held_segments < 1.3 * yardstick
