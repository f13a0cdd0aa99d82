"""The run folder's fault reports, claim and close, driven through ``RunFolder`` and a sink
that fails on demand: what the user reads (the sink's name, its file, the error, what was
being written) and what happens to the records after a failed or refused claim.
"""

from __future__ import annotations

import errno
import pathlib
import platform
import sys
import warnings

import pytest
import torch

import gradlab
from gradlab import GradlabError
from gradlab.monitor import JSONLSink, Sink
from gradlab.monitor.lock import LOCK_NAME
from gradlab.monitor.run_folder import RunFolder

STRICT_TAIL = (
    " (strict=True; without it the record is dropped, counted in "
    "monitor.dropped_records, and training goes on)"
)


class FlakySink(Sink):
    """A sink writing ``filename`` (nothing on disk) that raises where ``fail`` says."""

    def __init__(self, filename: str = "flaky.log") -> None:
        self.filename = filename
        self.fail: dict[str, BaseException] = {}
        self.opened = 0
        self.records: list[dict] = []

    def open(self, log_dir, header):
        self.opened += 1
        if "open" in self.fail:
            raise self.fail["open"]

    def write(self, record):
        if "write" in self.fail:
            raise self.fail["write"]
        self.records.append(record)

    def close(self):
        if "close" in self.fail:
            raise self.fail["close"]


def _full() -> OSError:
    return OSError(errno.ENOSPC, "No space left on device")


@pytest.fixture
def full_lock(monkeypatch):
    """While ``state["full"]``, the lock file cannot be written (the claim fails)."""
    state = {"full": True}
    write_bytes = pathlib.Path.write_bytes

    def fake(path, data):
        if state["full"]:
            raise _full()
        return write_bytes(path, data)

    monkeypatch.setattr(pathlib.Path, "write_bytes", fake)
    return state


def _folder(tmp_path, *sinks, **options):
    return RunFolder(tmp_path / "run", list(sinks), resume=False, overwrite=False, **options)


def test_a_strict_write_fault_names_the_sink_its_file_the_error_and_the_step(tmp_path):
    sink = FlakySink()
    folder = _folder(tmp_path, sink, strict=True)
    folder.open({"config": {}})
    sink.fail["write"] = _full()
    with pytest.raises(GradlabError) as raised:
        folder.write({"step": 3})
    where = str(tmp_path / "run" / "flaky.log")
    assert str(raised.value) == (
        f"flaky.log could not write the record of step 3 to {where!r}: "
        f"OSError: [Errno 28] No space left on device{STRICT_TAIL}"
    )
    sink.fail.clear()
    folder.close()


def test_one_warning_lists_every_sink_failing_at_once_with_its_file(tmp_path):
    first, second = FlakySink("a.log"), FlakySink("b.log")
    folder = _folder(tmp_path, first, second)
    folder.open({"config": {}})
    first.fail["write"] = second.fail["write"] = _full()
    with pytest.warns(RuntimeWarning) as caught:
        folder.write({"step": 2})
    run = tmp_path / "run"
    assert len(caught) == 1
    message = str(caught[0].message)
    assert message == (
        f"gradlab.Monitor: could not write the record of step 2 (a.log ({str(run / 'a.log')!r}): "
        f"[Errno 28] No space left on device; b.log ({str(run / 'b.log')!r}): "
        "[Errno 28] No space left on device). Training goes on: a record that cannot be "
        "written is dropped (monitor.dropped_records counts them per sink), the sink is tried "
        "again at every logged step and the first record it takes notes the steps it missed "
        "(dropped_steps); later faults of the same sink are not reported again "
        "(strict=True raises instead)"
    )
    assert folder.dropped_records == {"a.log": 1, "b.log": 1}
    first.fail.clear()
    second.fail.clear()
    folder.close()


def test_a_sink_without_a_file_name_is_reported_at_the_folder(tmp_path):
    class Remote(FlakySink):
        pass

    sink = Remote()
    del sink.filename
    folder = _folder(tmp_path, sink, strict=True)
    folder.open({"config": {}})
    sink.fail["write"] = ConnectionError("lost")
    with pytest.raises(GradlabError) as raised:
        folder.write({"step": 0})
    assert str(raised.value).startswith(
        f"Remote could not write the record of step 0 to {str(tmp_path / 'run')!r}: "
        "ConnectionError: lost"
    )
    sink.fail.clear()
    folder.close()


def test_a_strict_close_fault_names_the_end_of_the_run_and_the_file(tmp_path):
    sink = FlakySink()
    folder = _folder(tmp_path, sink, strict=True)
    folder.open({"config": {}})
    folder.write({"step": 0})
    sink.fail["close"] = _full()
    with pytest.raises(GradlabError) as raised:
        folder.close()
    assert str(raised.value).startswith(
        f"flaky.log could not write the end of the run to "
        f"{str(tmp_path / 'run' / 'flaky.log')!r}: OSError: [Errno 28]"
    )
    assert not (tmp_path / "run" / LOCK_NAME).exists()


def test_a_sink_that_could_not_open_is_reported_at_close_with_the_open_error(tmp_path):
    sink = FlakySink()
    sink.fail["open"] = _full()
    sink.fail["close"] = ValueError("nothing to close")  # the failed open's clean-up
    folder = _folder(tmp_path, sink, strict=True)
    folder.open({"config": {}})
    with pytest.raises(GradlabError) as raised:
        folder.close()
    assert str(raised.value).startswith(
        f"flaky.log could not write the end of the run to "
        f"{str(tmp_path / 'run' / 'flaky.log')!r}: OSError: [Errno 28] No space left on device"
    )


def test_a_sink_whose_open_and_clean_up_fail_reports_the_open_error(tmp_path):
    sink = FlakySink()
    folder = _folder(tmp_path, sink, strict=True)
    folder.open({"config": {}})  # opened: no fault
    folder.close()
    sink.fail["open"] = PermissionError("read-only")
    sink.fail["close"] = ValueError("nothing to close")
    again = RunFolder(tmp_path / "run", [sink], resume=False, overwrite=False, strict=True)
    again.open({"config": {}})
    with pytest.raises(GradlabError) as raised:
        again.write({"step": 0})
    assert "PermissionError: read-only" in str(raised.value)


def test_closing_twice_opens_no_sink_again(tmp_path):
    sink = FlakySink()
    folder = _folder(tmp_path, sink)
    folder.open({"config": {}})
    folder.close()
    folder.close()
    assert sink.opened == 1
    assert not (tmp_path / "run" / LOCK_NAME).exists()
    with pytest.raises(GradlabError, match="was refused to this Monitor"):
        folder.write({"step": 1})


def test_a_failed_claim_drops_the_record_and_is_reported_as_the_claim(tmp_path, full_lock):
    sink = FlakySink()
    folder = _folder(tmp_path, sink)
    folder.open({"config": {}})
    with pytest.warns(RuntimeWarning) as caught:
        folder.write({"step": 0})
    assert str(caught[0].message).startswith(
        "gradlab.Monitor: could not write the record of step 0 (the claim of log_dir "
        f"({str(tmp_path / 'run' / LOCK_NAME)!r}): [Errno 28] No space left on device)"
    )
    assert sink.records == []
    assert folder.dropped_records == {"flaky.log": 1}
    full_lock["full"] = False
    folder.write({"step": 1})
    assert [record["step"] for record in sink.records] == [1]
    folder.close()


def test_a_failed_claim_at_close_is_reported_under_strict(tmp_path, full_lock):
    folder = _folder(tmp_path, FlakySink(), strict=True)
    folder.open({"config": {}})
    full_lock["full"] = False  # recovered, but open()'s failure is still to be reported
    with pytest.raises(GradlabError) as raised:
        folder.close()
    assert str(raised.value).startswith(
        "the claim of log_dir could not write the end of the run to "
        f"{str(tmp_path / 'run' / LOCK_NAME)!r}: OSError: [Errno 28] No space left on device"
    )


def test_a_claim_that_fails_again_is_reported_with_its_error(tmp_path, full_lock):
    folder = _folder(tmp_path, FlakySink(), strict=True)
    folder.open({"config": {}})
    for step in (0, 1):  # open()'s failure, then the retry's
        with pytest.raises(GradlabError) as raised:
            folder.write({"step": step})
        assert f"of step {step} to " in str(raised.value)
        assert "OSError: [Errno 28] No space left on device" in str(raised.value)


def test_a_folder_taken_by_another_monitor_meanwhile_is_refused_for_good(tmp_path, full_lock):
    sink = FlakySink()
    folder = _folder(tmp_path, sink)
    folder.open({"config": {}})
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        folder.write({"step": 0})  # the claim failed: dropped
    full_lock["full"] = False
    other = RunFolder(tmp_path / "run", [], resume=False, overwrite=False)
    other.open({"config": {}})  # takes the folder
    with pytest.raises(GradlabError, match="in use"):
        folder.write({"step": 1})
    with pytest.raises(GradlabError) as raised:
        folder.write({"step": 2})
    assert str(raised.value) == (f"log_dir {str(tmp_path / 'run')!r} was refused to this Monitor")
    assert sink.records == []
    other.close()


def test_the_fault_warning_points_at_the_line_that_wrote(tmp_path):
    """Deselected under mutmut, whose trampolines add frames inside the monitor package."""
    sink = FlakySink()
    folder = _folder(tmp_path, sink)
    folder.open({"config": {}})
    sink.fail["write"] = _full()
    with pytest.warns(RuntimeWarning) as caught:
        line = sys._getframe().f_lineno + 1
        folder.write({"step": 0})
    assert (caught[0].filename, caught[0].lineno) == (__file__, line)
    sink.fail.clear()
    folder.close()


def test_sinks_sharing_a_file_name_are_counted_apart(tmp_path):
    sinks = [FlakySink("x.log"), FlakySink("y.log"), FlakySink("x.log"), FlakySink("x.log")]
    folder = _folder(tmp_path, *sinks)
    assert folder.dropped_records == {"x.log": 0, "y.log": 0, "x.log #2": 0, "x.log #3": 0}


def test_a_log_dir_under_missing_folders_is_created_at_the_claim(tmp_path):
    sink = FlakySink()
    path = tmp_path / "a" / "b" / "run"
    folder = RunFolder(path, [sink], resume=False, overwrite=False)
    folder.open({"config": {}})
    assert (path / LOCK_NAME).is_file()
    folder.write({"step": 0})
    folder.close()
    assert [record["step"] for record in sink.records] == [0]


def test_a_folder_held_by_a_live_monitor_is_refused_when_made(tmp_path):
    holder = _folder(tmp_path, FlakySink())
    holder.open({"config": {}})
    with pytest.raises(GradlabError, match="in use"):
        _folder(tmp_path, FlakySink())
    holder.close()


def test_a_previous_run_is_refused_with_its_files_and_the_choices(tmp_path):
    run = tmp_path / "run"
    run.mkdir()
    (run / "metrics.jsonl").write_text('{"header": {}}\n{"step": 0, "loss": 0.5}\n')
    (run / "metrics.csv").write_text("step,loss\n0,0.5\n")
    with pytest.raises(GradlabError) as raised:
        RunFolder(run, [JSONLSink(), gradlab.monitor.CSVSink()], resume=False, overwrite=False)
    assert str(raised.value) == (
        f"log_dir {str(run)!r} already holds a run (metrics.csv, metrics.jsonl); "
        "pass resume=True to continue it, overwrite=True to replace it, or choose a new log_dir"
    )


@pytest.mark.parametrize("sink", [JSONLSink, gradlab.monitor.CSVSink])
def test_a_previous_run_in_a_file_named_like_a_glob_is_found(tmp_path, sink):
    # "run[1].jsonl" as a glob matches "run1.jsonl", not itself: the run it held was not seen,
    # and a new run was appended to it
    run = tmp_path / "run"
    run.mkdir()
    (run / "run[1].log").write_text('{"header": {}}\n{"step": 0, "loss": 0.5}\n')
    with pytest.raises(GradlabError) as raised:
        RunFolder(run, [sink("run[1].log")], resume=False, overwrite=False)
    assert str(raised.value) == (
        f"log_dir {str(run)!r} already holds a run (run[1].log); pass resume=True to continue "
        "it, overwrite=True to replace it, or choose a new log_dir")
    (run / "run[1].log").rename(run / "run1.log")  # only a file of the very name is the run's
    RunFolder(run, [sink("run[1].log")], resume=False, overwrite=False).close()


@pytest.mark.parametrize("files", [{"metrics.jsonl": '{"header": {}}\n'},
                                   {"metrics.jsonl": "", "metrics.csv": "step,loss\n"}])
def test_a_previous_run_that_logged_no_step_is_said_to_be_replaced_losing_nothing(
    tmp_path, files
):
    # an error before the first step left a header alone; the rerun was refused with no word
    # that nothing would be lost
    run = tmp_path / "run"
    run.mkdir()
    for name, text in files.items():
        (run / name).write_text(text)
    with pytest.raises(GradlabError) as raised:
        RunFolder(run, [JSONLSink()], resume=False, overwrite=False)
    assert str(raised.value) == (
        f"log_dir {str(run)!r} already holds a run ({', '.join(sorted(files))}) (it logged no "
        "step: a run stopped before its first record, which overwrite=True replaces losing "
        "nothing); pass resume=True to continue it, overwrite=True to replace it, or choose a "
        "new log_dir")


class _Blind(FlakySink):
    patterns = ("blind.log",)


class _AlsoBlind(FlakySink):
    patterns = ("other.log",)


class _Unknown(FlakySink):
    patterns = ("unknown.log",)

    def last_step(self, log_dir):
        return None


def test_resuming_needs_a_sink_that_reads_the_last_step_back(tmp_path):
    run = tmp_path / "run"
    run.mkdir()
    (run / "blind.log").write_text("")
    with pytest.raises(GradlabError) as raised:
        RunFolder(run, [_Blind(), _AlsoBlind()], resume=True, overwrite=False)
    assert str(raised.value) == (
        f"resume=True needs the last step of the run in log_dir {str(run)!r}, "
        "which _Blind cannot read back; add the 'jsonl' sink"
    )
    (run / "other.log").write_text("")
    with pytest.raises(GradlabError, match="which _Blind, _AlsoBlind cannot read back"):
        RunFolder(run, [_Blind(), _AlsoBlind()], resume=True, overwrite=False)


def test_a_resumed_run_without_a_readable_step_starts_at_zero(tmp_path):
    run = tmp_path / "run"
    run.mkdir()
    (run / "unknown.log").write_text("")
    folder = RunFolder(run, [_Unknown()], resume=True, overwrite=False)
    assert folder.start_step == 0
    assert folder.previous == {"resumed": {"from_step": 0, "files": ["unknown.log"]}}


def test_the_header_names_the_versions_and_no_device(tmp_path):

    header = _folder(tmp_path).header({"config": {"every": 1}})
    assert header["gradlab"] == gradlab.__version__
    assert header["torch"] == torch.__version__
    assert header["python"] == platform.python_version()
    assert header["device"] is None
    assert header["config"] == {"every": 1}


class _EndSink(Sink):
    """Keeps what it was told at close(): whether training failed."""

    def __init__(self) -> None:
        self.records: list[dict] = []
        self.ended_failed: bool | None = None

    def write(self, record: dict) -> None:
        self.records.append(record)

    def close(self) -> None:
        self.ended_failed = self.failed


@pytest.mark.parametrize(("how", "failed"), [("plain", False), ("raised", True)])
def test_every_sink_is_told_at_close_whether_training_failed(tmp_path, how, failed):
    sinks = [_EndSink(), _EndSink()]
    folder = RunFolder(tmp_path, sinks, resume=False, overwrite=False)
    folder.open({"config": {}})
    folder.write({"step": 0, "a": 1.0})
    folder.close() if how == "plain" else folder.close(failed=True)
    assert [sink.ended_failed for sink in sinks] == [failed, failed]
    assert Sink.failed is False  # told on the instance, the class default untouched


class _Logs(FlakySink):
    patterns = ("*.log",)  # a glob: it lists a link to nowhere, which has no size


def test_a_link_to_nowhere_among_a_sink_s_files_does_not_stop_a_resumption(tmp_path):
    run = tmp_path / "run"
    run.mkdir()
    (run / "metrics.jsonl").write_text('{"header": {}}\n{"step": 0}\n{"step": 1}\n')
    (run / "latest.log").symlink_to(run / "rotated.log")
    folder = RunFolder(run, [JSONLSink(), _Logs()], resume=True, overwrite=False)
    assert folder.start_step == 2  # after the last logged step, 1
    folder.claim()
    assert folder.claimed
    folder.release()
