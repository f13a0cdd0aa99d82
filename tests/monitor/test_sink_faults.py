"""Logging never stops training and never lies: sink and file-system faults, cut files.

Fault injection: the file sinks open their files through a patched ``open`` of a simulated
disk, and the lock through a patched ``Path.write_bytes``. A file that is *full* refuses to
be opened, writes half of what it is given and then raises ``OSError(28, "No space left on
device")`` (as a full disk does), and raises the same at close; a full lock write creates an
empty file and raises. Each table row names the files that are full during chosen steps (or
at ``close()``), then the disk recovers. The expectations are the documented contract, written
out per row: the training loop never sees the error, one warning, ``dropped_records`` per
sink, the dropped steps noted in the next record (JSONL) or as rows without values (CSV), no
lock or temporary file left, and a new Monitor that resumes after the last written step.
"""

from __future__ import annotations

import builtins
import contextlib
import csv
import errno
import json
import os
import pathlib
import signal
import warnings

import pytest
import torch

import gradlab
from gradlab import GradlabError, Monitor
from gradlab.monitor import Sink, read_jsonl
from gradlab.monitor import sinks as sinks_module

ENOSPC = "[Errno 28] No space left on device"
EVERYTHING = "*"
"""Every file of the folder, the lock included."""


def _enospc(path: object) -> OSError:
    return OSError(errno.ENOSPC, "No space left on device", str(path))


class Disk:
    """A file system whose files (by name, or ``EVERYTHING``) are full while ``full`` says so."""

    def __init__(self) -> None:
        self.full: set[str] = set()

    def is_full(self, path: object) -> bool:
        return EVERYTHING in self.full or pathlib.Path(path).name in self.full

    def open(self, file, *args, **kwargs):
        if self.is_full(file):
            raise _enospc(file)
        return FullableFile(self, file, builtins.open(file, *args, **kwargs))

    def write_bytes(self, path: pathlib.Path, data: bytes) -> int:
        if self.is_full(path) or (EVERYTHING in self.full):
            with builtins.open(path, "wb"):
                pass  # created, nothing written: no space for the data
            raise _enospc(path)
        with builtins.open(path, "wb") as handle:
            return handle.write(data)


class FullableFile:
    """A real file whose writes and close fail while its disk says it is full."""

    def __init__(self, disk: Disk, path, real) -> None:
        self.disk, self.path, self.real = disk, path, real

    def write(self, data):
        if self.disk.is_full(self.path):
            self.real.write(data[: len(data) // 2])  # what fitted
            self.real.flush()
            raise _enospc(self.path)
        return self.real.write(data)

    def close(self) -> None:
        self.real.close()
        if self.disk.is_full(self.path):
            raise _enospc(self.path)

    def __getattr__(self, name):
        return getattr(self.real, name)

    def __iter__(self):
        return iter(self.real)

    def __enter__(self):
        return self

    def __exit__(self, *exc_info) -> None:
        self.close()


class FlakySink(Sink):
    """A sink that is not a file (a remote service, say): its write raises on chosen steps."""

    def __init__(self, failing: set[int]) -> None:
        self.failing = failing
        self.records: list[dict] = []

    def write(self, record: dict) -> None:
        if record["step"] in self.failing:
            raise ConnectionResetError(errno.ECONNRESET, "Connection reset by peer")
        self.records.append(dict(record))


@pytest.fixture
def disk(monkeypatch) -> Disk:
    disk = Disk()
    monkeypatch.setattr(sinks_module, "open", disk.open, raising=False)
    original = pathlib.Path.write_bytes

    def write_bytes(path, data):
        if disk.full:
            return disk.write_bytes(path, data)
        return original(path, data)

    monkeypatch.setattr(pathlib.Path, "write_bytes", write_bytes)
    return disk


def _train(monitor: Monitor, disk: Disk, steps: range, full: dict) -> None:
    """Train ``steps``; during step s the files ``full[s]`` are full; ``full["close"]`` at
    close. Nothing the Monitor does may reach this loop: any exception fails the test."""
    loss_fn = monitor.watch(gradlab.SmoothAPLoss(0.05))
    generator = torch.Generator().manual_seed(0)
    for step in steps:
        embeddings = torch.randn(16, 8, generator=generator, requires_grad=True)
        loss_fn(embeddings, torch.arange(16) % 4).backward()
        disk.full = set(full.get(step, ()))
        monitor.step()
        disk.full = set()
    disk.full = set(full.get("close", ()))
    monitor.close()
    disk.full = set()


def _csv_rows(path: pathlib.Path) -> list[dict]:
    with path.open(newline="", encoding="utf-8") as handle:
        return list(csv.DictReader(handle))


def _strays(folder: pathlib.Path) -> list[str]:
    return sorted(path.name for path in folder.iterdir() if path.name.startswith(".gradlab"))


# Each row: sinks, steps, logged every, full files per step (or at close), then the expected
# dropped_records, JSONL steps and dropped-step notes, CSV steps and rows without values,
# the names the one warning must hold, and the step a resumed Monitor starts at.
J, C = "metrics.jsonl", "metrics.csv"
ROWS = {
    "JSONL write fails at steps 2 and 3": dict(
        sinks=["jsonl", "csv"], steps=6, every=1, full={2: {J}, 3: {J}},
        dropped={J: 2, C: 0}, jsonl=[0, 1, 4, 5], notes={4: [2, 3]},
        csv=[0, 1, 2, 3, 4, 5], empty=[], names=[J], resume=6,
    ),
    "CSV write fails at step 1": dict(
        sinks=["jsonl", "csv"], steps=4, every=1, full={1: {C}},
        dropped={J: 0, C: 1}, jsonl=[0, 1, 2, 3], notes={},
        csv=[0, 1, 2, 3], empty=[1], names=[C], resume=4,
    ),
    "JSONL open fails at the first record": dict(
        sinks=["jsonl", "csv"], steps=4, every=1, full={0: {J}},
        dropped={J: 1, C: 0}, jsonl=[1, 2, 3], notes={1: [0]},
        csv=[0, 1, 2, 3], empty=[], names=[J], resume=4,
    ),
    "CSV open fails at the first two records": dict(
        sinks=["jsonl", "csv"], steps=4, every=1, full={0: {C}, 1: {C}},
        dropped={J: 0, C: 2}, jsonl=[0, 1, 2, 3], notes={},
        csv=[0, 1, 2, 3], empty=[0, 1], names=[C], resume=4,
    ),
    "the whole disk is full at the first record (the lock too)": dict(
        sinks=["jsonl", "csv"], steps=3, every=1, full={0: {EVERYTHING}},
        dropped={J: 1, C: 1}, jsonl=[1, 2], notes={1: [0]},
        csv=[0, 1, 2], empty=[0], names=[".gradlab.lock"], resume=3,
    ),
    "the whole disk is full at steps 1 and 2": dict(
        sinks=["jsonl", "csv"], steps=5, every=1, full={1: {EVERYTHING}, 2: {EVERYTHING}},
        dropped={J: 2, C: 2}, jsonl=[0, 3, 4], notes={3: [1, 2]},
        csv=[0, 1, 2, 3, 4], empty=[1, 2], names=[J, C], resume=5,
    ),
    "every other step logged, fault at step 2 of 6": dict(
        sinks=["jsonl", "csv"], steps=6, every=2, full={2: {J}},
        dropped={J: 1, C: 0}, jsonl=[0, 4, 5], notes={4: [2]},
        csv=[0, 2, 4, 5], empty=[], names=[J], resume=6,
    ),
    "the last step's record fails at close, then the file's close": dict(
        sinks=["jsonl", "csv"], steps=4, every=2, full={"close": {J}},
        dropped={J: 1, C: 0}, jsonl=[0, 2], notes={},
        csv=[0, 2, 3], empty=[], names=[J], resume=4, unnoted=f"{J} dropped 1 record (step 3)",
    ),
    "the file's close fails": dict(
        sinks=["jsonl"], steps=3, every=1, full={"close": {J}},
        dropped={J: 0}, jsonl=[0, 1, 2], notes={},
        csv=None, empty=[], names=[J], resume=3,
    ),
}  # fmt: skip


@pytest.mark.parametrize("row", list(ROWS))
@pytest.mark.slow
def test_a_sink_fault_never_reaches_training_and_is_recorded(tmp_path, disk, row):
    case = ROWS[row]
    monitor = Monitor(tmp_path, preset="cheap", every=case["every"], sinks=case["sinks"])
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        _train(monitor, disk, range(case["steps"]), case["full"])
    messages = [str(w.message) for w in caught if issubclass(w.category, RuntimeWarning)]
    unnoted = [unnoted_message(case["unnoted"])] if "unnoted" in case else []
    assert len(messages) == 1 + len(unnoted) and messages[1:] == unnoted, messages
    assert all(name in messages[0] for name in case["names"]) and ENOSPC in messages[0]
    assert str(tmp_path) in messages[0]
    assert monitor.dropped_records == case["dropped"]
    headers, records = read_jsonl(tmp_path / J)
    assert len(headers) == 1 and [r["step"] for r in records] == case["jsonl"]
    notes = {r["step"]: r["dropped_steps"] for r in records if "dropped_steps" in r}
    assert notes == case["notes"]
    assert all(r["dropped_records"] == len(r["dropped_steps"]) for r in records
               if "dropped_steps" in r)  # fmt: skip
    if case["csv"] is not None:
        rows = _csv_rows(tmp_path / C)
        assert [int(row["step"]) for row in rows] == case["csv"]
        empty = [int(r["step"]) for r in rows if not any(v for k, v in r.items() if k != "step")]
        assert empty == case["empty"]
        assert "dropped_steps" not in rows[0]  # the notes are rows, never columns
    assert _strays(tmp_path) == []
    again = Monitor(tmp_path, preset="cheap", every=1, sinks=case["sinks"], resume=True)
    assert again.step_count == case["resume"]
    _train(again, disk, range(2), {})
    resumed = [r["step"] for r in read_jsonl(tmp_path / J)[1]]
    assert resumed == case["jsonl"] + [case["resume"], case["resume"] + 1]
    assert _strays(tmp_path) == []


def test_a_fault_in_a_sink_that_is_not_a_file_is_noted_in_its_next_record(tmp_path):
    flaky = FlakySink(failing={1, 2})
    monitor = Monitor(tmp_path, preset="cheap", every=1, sinks=["jsonl", flaky])
    with pytest.warns(RuntimeWarning) as caught:
        _train(monitor, Disk(), range(5), {})
    (message,) = [str(w.message) for w in caught if issubclass(w.category, RuntimeWarning)]
    assert "FlakySink" in message and "Connection reset by peer" in message
    assert [r["step"] for r in flaky.records] == [0, 3, 4]
    assert flaky.records[1]["dropped_steps"] == [1, 2] and flaky.records[1]["dropped_records"] == 2
    assert "dropped_steps" not in flaky.records[2]  # said once
    assert monitor.dropped_records == {"metrics.jsonl": 0, "FlakySink": 2}
    assert [r["step"] for r in read_jsonl(tmp_path / J)[1]] == [0, 1, 2, 3, 4]


def unnoted_message(listed: str) -> str:
    """The warning at close() about records no record of their sink notes."""
    return (
        f"gradlab.Monitor: records dropped after the last record a sink wrote ({listed}) are "
        "noted in no record of it (the note, dropped_steps, rides on the next record the sink "
        "takes, and a later fault of a sink is not reported again): its log ends before them, "
        "as if the run had stopped there; monitor.dropped_records counts them per sink"
    )


def test_a_second_fault_of_a_sink_that_no_record_notes_is_reported_at_close(tmp_path):
    flaky = FlakySink(failing={1, 4, 5, 6})
    monitor = Monitor(tmp_path, preset="cheap", every=1, sinks=["jsonl", flaky])
    with pytest.warns(RuntimeWarning) as caught:
        _train(monitor, Disk(), range(7), {})
    messages = [str(w.message) for w in caught if issubclass(w.category, RuntimeWarning)]
    assert len(messages) == 2 and "Connection reset by peer" in messages[0]  # step 1's fault
    assert messages[1] == unnoted_message("FlakySink dropped 3 records (steps 4 to 6)")
    assert caught[1].filename == __file__  # at the close() of the training loop
    assert [r["step"] for r in flaky.records] == [0, 2, 3]  # step 1 noted at step 2, not 4-6
    assert monitor.dropped_records == {"metrics.jsonl": 0, "FlakySink": 4}
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        monitor.close()  # said once


@pytest.mark.slow
def test_every_sink_whose_last_records_were_dropped_is_named_in_one_warning(tmp_path, disk):
    flaky = FlakySink(failing={3})
    monitor = Monitor(tmp_path, preset="cheap", every=1, sinks=["jsonl", "csv", flaky])
    with pytest.warns(RuntimeWarning) as caught:
        _train(monitor, disk, range(4), {2: {J}, 3: {J}})
    messages = [str(w.message) for w in caught if issubclass(w.category, RuntimeWarning)]
    assert messages[-1] == unnoted_message(
        f"{J} dropped 2 records (steps 2 to 3); FlakySink dropped 1 record (step 3)"
    )
    assert len(messages) == 3  # the faults of metrics.jsonl (step 2), FlakySink (step 3), close
    assert monitor.dropped_records == {J: 2, C: 0, "FlakySink": 1}


def test_the_warning_points_at_the_training_loop(tmp_path, disk):
    monitor = Monitor(tmp_path, preset="cheap", every=1)
    with pytest.warns(RuntimeWarning) as caught:
        _train(monitor, disk, range(2), {1: {J}})
    assert caught[0].filename == __file__


@pytest.mark.parametrize(("full", "dropped"), [({1: {J}}, [1]), ({0: {EVERYTHING}}, [0])])
def test_strict_raises_the_fault_and_still_recovers(tmp_path, disk, full, dropped):
    monitor = Monitor(tmp_path, preset="cheap", every=1, strict=True)
    loss_fn = monitor.watch(gradlab.SmoothAPLoss(0.05))
    for step in range(4):
        embeddings = torch.randn(16, 8, requires_grad=True)
        loss_fn(embeddings, torch.arange(16) % 4).backward()
        disk.full = set(full.get(step, ()))
        if step in dropped:
            with pytest.raises(GradlabError) as raised:
                monitor.step()
            assert str(tmp_path) in str(raised.value) and ENOSPC in str(raised.value)
            assert isinstance(raised.value.__cause__, OSError)
        else:
            monitor.step()
        disk.full = set()
    monitor.close()
    assert monitor.dropped_records == {J: len(dropped)}
    records = read_jsonl(tmp_path / J)[1]
    assert [r["step"] for r in records] == [s for s in range(4) if s not in dropped]
    assert records[0].get("dropped_steps") == (dropped if dropped[0] == 0 else None)
    assert _strays(tmp_path) == []


@pytest.mark.slow
def test_the_lock_is_released_once_and_a_second_close_does_nothing(tmp_path, disk, monkeypatch):
    from gradlab.monitor import lock

    released = []
    real_release = lock.release
    monkeypatch.setattr(lock, "release", lambda *a: (released.append(a), real_release(*a)))
    monitor = Monitor(tmp_path, preset="cheap", every=1)
    with pytest.warns(RuntimeWarning):
        _train(monitor, disk, range(3), {0: {EVERYTHING}, "close": {J}})
    monitor.close()
    del monitor
    import gc

    gc.collect()
    assert len(released) == 1 and _strays(tmp_path) == []


# --- files cut short by a killed writer, then resumed: only the cut record is lost --------------

CUTS = {"after the first digit": 1, "after two bytes": 2, "in the middle": 0.5,
        "before the line end": -2, "between CR and LF": -1}  # fmt: skip


def _cut_last_line(path: pathlib.Path, cut: float) -> bytes:
    """Keep ``cut`` bytes of the last line (a fraction: of its length; negative: all but)."""
    data = path.read_bytes()
    start = data.rindex(b"\n", 0, len(data) - 1) + 1
    last = data[start:]
    keep = int(len(last) * cut) if isinstance(cut, float) else cut % len(last)
    path.write_bytes(data[: start + keep])
    return data[:start]


def _train_plain(log_dir, sinks, steps, **kwargs) -> Monitor:
    monitor = Monitor(log_dir, preset="cheap", every=1, sinks=sinks, **kwargs)
    _train(monitor, Disk(), range(steps), {})
    return monitor


@pytest.mark.parametrize("cut", list(CUTS))
def test_a_resumed_csv_whose_last_row_was_cut_loses_only_that_row(tmp_path, cut):
    _train_plain(tmp_path, ["csv"], 3)
    kept = _cut_last_line(tmp_path / C, CUTS[cut])
    again = Monitor(tmp_path, preset="cheap", every=1, sinks=["csv"], resume=True)
    assert again.step_count == 2  # step 2's row was cut: it is written again
    removed = (tmp_path / C).stat().st_size - len(kept)
    with pytest.warns(UserWarning) as caught:  # removed silently before
        _train(again, Disk(), range(2), {})
    assert [str(w.message) for w in caught] == [
        f"gradlab.Monitor: removed the last row of {str(tmp_path / C)!r} ({removed} bytes with "
        "no line end: a write cut short by a killed process), so that no row is left half "
        "empty; the run goes on after the last whole row, and logs the cut row's step again if "
        "its schedule logs that step"]
    rows = _csv_rows(tmp_path / C)
    assert [int(row["step"]) for row in rows] == [0, 1, 2, 3]
    assert all(all(row.values()) for row in rows)  # no row without its values
    assert (tmp_path / C).read_bytes().startswith(kept)  # the complete rows are untouched


@pytest.mark.parametrize("cut", list(CUTS))
def test_a_csv_cut_beside_a_complete_jsonl_takes_the_cut_row_from_the_jsonl(tmp_path, cut):
    # the run resumes after the JSONL's last step: the cut step was never logged again (the
    # CSV read 0, 1, 3, 4 under a warning that said it would be)
    _train_plain(tmp_path, ["jsonl", "csv"], 3)
    whole = _csv_rows(tmp_path / C)
    kept = _cut_last_line(tmp_path / C, CUTS[cut])
    removed = (tmp_path / C).stat().st_size - len(kept)
    with pytest.warns(UserWarning) as caught:
        _train_plain(tmp_path, ["jsonl", "csv"], 2, resume=True)
    assert [str(w.message) for w in caught] == [
        f"gradlab.Monitor: removed the last row of {str(tmp_path / C)!r} ({removed} bytes with "
        "no line end: a write cut short by a killed process), so that no row is left half "
        f"empty; the run resumes at step 3, and the steps it lacks before that (2) are copied "
        f"from {str(tmp_path / J)!r}"]
    rows = _csv_rows(tmp_path / C)
    assert [int(row["step"]) for row in rows] == [0, 1, 2, 3, 4]
    assert rows[2] == whole[2]  # the JSONL's record of step 2, written as the run wrote it
    assert [r["step"] for r in read_jsonl(tmp_path / J)[1]] == [0, 1, 2, 3, 4]


def _copied(folder: pathlib.Path, steps: str, start: int) -> str:
    """The warning of a reopened CSV that lacks ``steps`` of metrics.jsonl before ``start``."""
    return (f"gradlab.Monitor: {str(folder / C)!r} lacks steps that {str(folder / J)!r} holds "
            f"({steps}), before the step the run resumes at ({start}): a process killed "
            "between the two files' writes, or a run resumed without the CSV sink; they are "
            "copied from it")


def test_a_csv_row_missing_whole_beside_the_jsonl_is_copied_from_it(tmp_path):
    # killed between the two files' writes: the CSV lacks step 2 whole, with no cut to see
    _train_plain(tmp_path, ["jsonl", "csv"], 3)
    whole = _csv_rows(tmp_path / C)
    data = (tmp_path / C).read_bytes()
    (tmp_path / C).write_bytes(data[: data.rindex(b"\n", 0, len(data) - 1) + 1])
    with pytest.warns(UserWarning) as caught:
        _train_plain(tmp_path, ["jsonl", "csv"], 1, resume=True)
    assert [str(w.message) for w in caught] == [_copied(tmp_path, "2", 3)]
    rows = _csv_rows(tmp_path / C)
    assert [int(row["step"]) for row in rows] == [0, 1, 2, 3] and rows[2] == whole[2]


def test_a_cut_csv_row_that_no_jsonl_holds_is_said_to_be_lost(tmp_path):
    # the JSONL left out of the resumption: nothing beside the CSV holds step 2
    _train_plain(tmp_path, [sinks_module.JSONLSink("log.jsonl"), "csv"], 3)
    kept = _cut_last_line(tmp_path / C, 0.5)
    removed = (tmp_path / C).stat().st_size - len(kept)
    (tmp_path / "log.jsonl").unlink()
    with pytest.warns(UserWarning) as caught:
        _train_plain(tmp_path, ["csv"], 1, resume=True)
    assert [str(w.message) for w in caught] == [
        f"gradlab.Monitor: removed the last row of {str(tmp_path / C)!r} ({removed} bytes with "
        "no line end: a write cut short by a killed process), so that no row is left half "
        "empty; the run goes on after the last whole row, and logs the cut row's step again if "
        "its schedule logs that step"]
    assert [int(row["step"]) for row in _csv_rows(tmp_path / C)] == [0, 1, 2]


def test_a_cut_csv_row_is_copied_from_a_jsonl_of_another_name(tmp_path):
    # a custom JSONL file name: the CSV sink read metrics.jsonl only, so step 2 was lost
    sinks = [sinks_module.JSONLSink("log.jsonl"), "csv"]
    _train_plain(tmp_path, sinks, 3)
    kept = _cut_last_line(tmp_path / C, 0.5)
    removed = (tmp_path / C).stat().st_size - len(kept)
    with pytest.warns(UserWarning) as caught:
        _train_plain(tmp_path, [sinks_module.JSONLSink("log.jsonl"), "csv"], 1, resume=True)
    assert [str(w.message) for w in caught] == [
        f"gradlab.Monitor: removed the last row of {str(tmp_path / C)!r} ({removed} bytes with "
        "no line end: a write cut short by a killed process), so that no row is left half "
        "empty; the run resumes at step 3, and the steps it lacks before that (2) are copied "
        f"from {str(tmp_path / 'log.jsonl')!r}"]
    assert [int(row["step"]) for row in _csv_rows(tmp_path / C)] == [0, 1, 2, 3]


@pytest.mark.parametrize("cut", [c for c in CUTS if c != "between CR and LF"])
def test_a_resumed_jsonl_whose_last_line_was_cut_loses_only_that_record(tmp_path, cut):
    _train_plain(tmp_path, ["jsonl"], 3)
    _cut_last_line(tmp_path / J, CUTS[cut])
    with warnings.catch_warnings():  # reading the log for its last step: no word of the cut
        warnings.simplefilter("error")
        again = Monitor(tmp_path, preset="cheap", every=1, resume=True)
    assert again.step_count == 2
    with pytest.warns(UserWarning, match="removed the last line") as caught:
        _train(again, Disk(), range(2), {})
    assert len(caught) == 1
    with warnings.catch_warnings():  # the cut line went when the file was opened again:
        warnings.simplefilter("error")  # every line is strict JSON, read without a warning
        headers, records = read_jsonl(tmp_path / J, strict=True)
    assert [r["step"] for r in records] == [0, 1, 2, 3] and len(headers) == 2
    assert all(json.loads(line) for line in (tmp_path / J).read_text().splitlines())


def test_a_jsonl_line_missing_only_its_newline_is_complete_and_kept(tmp_path):
    _train_plain(tmp_path, ["jsonl"], 3)
    path = tmp_path / J
    path.write_bytes(path.read_bytes()[:-1])
    _train_plain(tmp_path, ["jsonl"], 1, resume=True)
    headers, records = read_jsonl(path)
    assert [r["step"] for r in records] == [0, 1, 2, 3] and len(headers) == 2
    assert all(json.loads(line) for line in path.read_text().splitlines())


# --- the lock under a full disk: no file left, whichever way it is created --------------------


class _FullFile:
    """What ``os.fdopen`` gives on a full disk: writes raise ENOSPC."""

    def __init__(self, descriptor: int, mode: str) -> None:
        self.descriptor = descriptor

    def write(self, data: bytes) -> int:
        raise _enospc("lock")

    def __enter__(self):
        return self

    def __exit__(self, *exc_info) -> None:
        os.close(self.descriptor)


def _no_hard_links(*args) -> None:
    raise PermissionError(errno.EPERM, "Operation not permitted")


LOCK_FAULTS = {
    "the temporary file cannot be written": {"write_bytes": True},
    "no hard links, and the lock cannot be written": {"link": _no_hard_links, "fdopen": _FullFile},
}


@pytest.mark.parametrize("fault", list(LOCK_FAULTS))
def test_a_lock_that_cannot_be_written_leaves_no_file(tmp_path, disk, monkeypatch, fault):
    from gradlab.monitor import lock

    patches = LOCK_FAULTS[fault]
    if patches.get("write_bytes"):
        disk.full = {EVERYTHING}
    for name in ("link", "fdopen"):
        if name in patches:
            monkeypatch.setattr(lock.os, name, patches[name])
    with pytest.raises(OSError, match="No space left on device"):
        lock.acquire(tmp_path)
    assert list(tmp_path.iterdir()) == []
    monkeypatch.undo()
    token = lock.acquire(tmp_path)  # space is back: claimed at once
    lock.release(tmp_path, token)
    assert list(tmp_path.iterdir()) == []


@pytest.mark.slow  # seconds: left out of make test-fast
def test_plot_and_read_jsonl_understand_a_dropped_note(tmp_path, disk):
    from gradlab.plotting.monitor import plot_runs

    monitor = Monitor(tmp_path / "run", preset="cheap", every=1)
    with pytest.warns(RuntimeWarning):
        _train(monitor, disk, range(4), {1: {J}})
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # no skipped line, no value ignored
        _, records = read_jsonl(tmp_path / "run" / J)
        written = plot_runs([tmp_path / "run"], out=tmp_path / "figures")
    assert records[1]["dropped_steps"] == [1] and records[1]["step"] == 2
    assert {path.name for path in written} >= {"overview.png"}


# --- a real fault: a file-size limit the event file runs into, then lifted -------------------


@contextlib.contextmanager
def _file_size_limit(size: int):
    """While inside, no file of this process grows past ``size`` bytes (``RLIMIT_FSIZE``: a
    write past it fails with EFBIG, as a write to a full disk fails with ENOSPC, root or not)."""
    resource = pytest.importorskip("resource")
    if signal.getsignal(signal.SIGXFSZ) is not signal.SIG_IGN:
        pytest.skip("SIGXFSZ is not ignored: a write past the limit would kill the process")
    limits = resource.getrlimit(resource.RLIMIT_FSIZE)
    resource.setrlimit(resource.RLIMIT_FSIZE, (size, limits[1]))
    try:
        yield
    finally:
        resource.setrlimit(resource.RLIMIT_FSIZE, limits)


def _tensorboard_steps(folder: pathlib.Path, tag: str) -> dict[int, float]:
    """``{step: value}`` of ``tag`` over every event file of ``folder``, each read on its own."""
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    found = {}
    for path in sorted(folder.glob("events.out.tfevents.*")):
        accumulator = EventAccumulator(str(path))
        accumulator.Reload()
        if tag in accumulator.Tags()["scalars"]:
            found.update((event.step, event.value) for event in accumulator.Scalars(tag))
    return found


@pytest.mark.slow
def test_the_tensorboard_sink_writes_again_once_the_file_system_recovers(tmp_path):
    pytest.importorskip("tensorboard")
    monitor = Monitor(tmp_path, preset="cheap", every=1, sinks=["tensorboard"])
    loss_fn = monitor.watch(gradlab.SmoothAPLoss(0.05))
    generator = torch.Generator().manual_seed(0)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        for step in range(6):
            embeddings = torch.randn(16, 8, generator=generator, requires_grad=True)
            loss_fn(embeddings, torch.arange(16) % 4).backward()
            if step in (2, 3):  # the event file can grow 10 bytes more: no record fits
                (events,) = tmp_path.glob("events.out.tfevents.*")
                with _file_size_limit(events.stat().st_size + 10):
                    monitor.step()
            else:
                monitor.step()
        monitor.close()
    messages = [str(w.message) for w in caught if issubclass(w.category, RuntimeWarning)]
    assert len(messages) == 1 and "TensorBoardSink" in messages[0], messages
    assert "[Errno 27] File too large" in messages[0]
    assert monitor.dropped_records == {"TensorBoardSink": 2}
    assert sorted(_tensorboard_steps(tmp_path, "loss")) == [0, 1, 4, 5]
    assert _tensorboard_steps(tmp_path, "dropped_records") == {4: 2.0}
    assert _strays(tmp_path) == []


@pytest.mark.slow
def test_a_tensorboard_event_file_that_could_not_be_opened_is_not_left_behind(tmp_path):
    pytest.importorskip("tensorboard")
    monitor = Monitor(tmp_path, preset="cheap", every=1, sinks=["tensorboard"])
    loss_fn = monitor.watch(gradlab.SmoothAPLoss(0.05))
    generator = torch.Generator().manual_seed(0)
    with pytest.warns(RuntimeWarning, match="TensorBoardSink"):
        for step in range(3):
            embeddings = torch.randn(16, 8, generator=generator, requires_grad=True)
            loss_fn(embeddings, torch.arange(16) % 4).backward()
            if step == 0:  # the lock fits, the event file's header does not
                with _file_size_limit(300):
                    monitor.step()
            else:
                monitor.step()
        monitor.close()
    assert monitor.dropped_records == {"TensorBoardSink": 1}
    assert len(list(tmp_path.glob("events.out.tfevents.*"))) == 1
    assert sorted(_tensorboard_steps(tmp_path, "loss")) == [1, 2]
    assert _tensorboard_steps(tmp_path, "dropped_records") == {1: 1.0}
    assert _strays(tmp_path) == []


def test_a_sink_that_wrote_no_record_is_said_to_have_written_none(tmp_path):
    # "records dropped after the last record a sink wrote" of a sink that wrote none: there was
    # no last record (an MLflow store that refused every record)
    never, later, none = FlakySink(failing={0, 1, 2}), FlakySink(failing={2}), FlakySink({0, 1, 2})
    monitor = Monitor(tmp_path, preset="cheap", every=1, sinks=["jsonl", never, later, none])
    with pytest.warns(RuntimeWarning) as caught:
        _train(monitor, Disk(), range(3), {})
    messages = [str(w.message) for w in caught if issubclass(w.category, RuntimeWarning)]
    assert messages[-1] == (
        "gradlab.Monitor: records dropped after the last record a sink wrote (FlakySink #2 "
        "dropped 1 record (step 2)) are noted in no record of it (the note, dropped_steps, "
        "rides on the next record the sink takes, and a later fault of a sink is not reported "
        "again): its log ends before them, as if the run had stopped there; a sink wrote no "
        "record of the "
        "run (FlakySink dropped all 3 records (steps 0 to 2); FlakySink #3 dropped all 3 "
        "records (steps 0 to 2)); monitor.dropped_records counts them per sink")
    alone = FlakySink(failing={0, 1})
    monitor = Monitor(tmp_path / "alone", preset="cheap", every=1, sinks=["jsonl", alone])
    with pytest.warns(RuntimeWarning) as caught:
        _train(monitor, Disk(), range(2), {})
    assert str(caught[-1].message) == (
        "gradlab.Monitor: a sink wrote no record of the run (FlakySink dropped all 2 records "
        "(steps 0 to 1)); monitor.dropped_records counts them per sink")


def test_steps_logged_while_the_csv_sink_was_left_out_are_copied_with_that_cause_named(tmp_path):
    # resumed once without the CSV sink: the warning named a killed process as the only cause
    _train_plain(tmp_path, ["jsonl", "csv"], 2)
    _train_plain(tmp_path, ["jsonl"], 2, resume=True)
    with pytest.warns(UserWarning) as caught:
        _train_plain(tmp_path, ["jsonl", "csv"], 1, resume=True)
    assert [str(w.message) for w in caught] == [_copied(tmp_path, "2, 3", 4)]
    assert [int(row["step"]) for row in _csv_rows(tmp_path / C)] == [0, 1, 2, 3, 4]


@pytest.mark.parametrize(("start", "lost"), [(5, "steps 2-4 are not in it (no metrics.jsonl "
                                                  "beside it holds them)"),
                                              (3, "step 2 is not in it (no metrics.jsonl beside "
                                                  "it holds it)")])  # fmt: skip
def test_cut_csv_rows_that_no_jsonl_holds_are_named_as_a_range_or_one(tmp_path, start, lost):
    # the loop resumes at a later checkpoint than the files' end (step 1): the steps between
    # are in no CSV row and no JSONL record
    _train_plain(tmp_path, ["jsonl", "csv"], 2)
    with (tmp_path / C).open("a") as handle:
        handle.write("2,0.")  # a row cut short
    monitor = Monitor(tmp_path, preset="cheap", every=1, sinks=["jsonl", "csv"], resume=True)
    monitor.step_count = start
    with pytest.warns(UserWarning) as caught:
        _train(monitor, Disk(), range(1), {})
    assert [(str(w.message), w.filename) for w in caught] == [(
        f"gradlab.Monitor: removed the last row of {str(tmp_path / C)!r} (4 bytes with no line "
        "end: a write cut short by a killed process), so that no row is left half empty; the "
        f"run resumes at step {start}, after it: {lost}", __file__)]


def test_a_csv_resumed_without_the_jsonl_sink_takes_a_cut_row_from_the_jsonl_beside_it(
        tmp_path):
    _train_plain(tmp_path, ["jsonl", "csv"], 3)
    kept = _cut_last_line(tmp_path / C, 0.5)
    removed = (tmp_path / C).stat().st_size - len(kept)
    with pytest.warns(UserWarning) as caught:
        _train_plain(tmp_path, ["csv"], 1, resume=True)
    assert [str(w.message) for w in caught] == [
        f"gradlab.Monitor: removed the last row of {str(tmp_path / C)!r} ({removed} bytes with "
        "no line end: a write cut short by a killed process), so that no row is left half "
        "empty; the run resumes at step 3, and the steps it lacks before that (2) are copied "
        f"from {str(tmp_path / J)!r}"]


def test_a_csv_holding_its_header_alone_gets_every_step_from_the_jsonl(tmp_path):
    # killed after the CSV's header row: no complete row, so the steps it lacks start at 0
    _train_plain(tmp_path, ["jsonl", "csv"], 3)
    data = (tmp_path / C).read_bytes()
    (tmp_path / C).write_bytes(data[: data.index(b"\n") + 1])  # the header row alone
    with pytest.warns(UserWarning) as caught:
        _train_plain(tmp_path, ["jsonl", "csv"], 1, resume=True)
    assert [(str(w.message), w.filename) for w in caught] == [
        (_copied(tmp_path, "0, 1, 2", 3), __file__)]
    assert [int(row["step"]) for row in _csv_rows(tmp_path / C)] == [0, 1, 2, 3]


def test_a_csv_cut_in_its_first_byte_is_read_as_a_cut_row(tmp_path):
    # one byte of the header row, no line end: removed, said, and the run's steps copied
    _train_plain(tmp_path, ["jsonl", "csv"], 2)
    (tmp_path / C).write_bytes(b"s")
    with pytest.warns(UserWarning) as caught:
        _train_plain(tmp_path, ["jsonl", "csv"], 1, resume=True)
    assert [str(w.message) for w in caught] == [
        f"gradlab.Monitor: removed the last row of {str(tmp_path / C)!r} (1 bytes with no line "
        "end: a write cut short by a killed process), so that no row is left half empty; the "
        "run resumes at step 2, and the steps it lacks before that (0, 1) are copied from "
        f"{str(tmp_path / J)!r}"]
    assert [int(row["step"]) for row in _csv_rows(tmp_path / C)] == [0, 1, 2]


@pytest.mark.parametrize(("before", "said", "journal", "csv_first"), [
    (3, "3 records (steps 0 to 2)", J, False),
    (1, "1 record (step 0)", J, False),
    (3, "3 records (steps 0 to 2)", "run.jsonl", True),  # another name, listed after the CSV
])  # fmt: skip
def test_a_csv_new_in_a_resumed_run_gets_the_runs_earlier_records(tmp_path, before, said,
                                                                  journal, csv_first):
    # the run was logged to metrics.jsonl alone; resumed with the CSV sink too, the CSV began
    # at the resumed step, silently, as if the run had started there
    _train_plain(tmp_path, [sinks_module.JSONLSink(journal)], before)
    sinks = [sinks_module.JSONLSink(journal), "csv"]
    with pytest.warns(UserWarning) as caught:
        _train_plain(tmp_path, sinks[::-1] if csv_first else sinks, 2, resume=True)
    assert [(str(w.message), w.filename) for w in caught] == [(
        f"gradlab.Monitor: {str(tmp_path / C)!r} is new in this resumed run: the run's {said} "
        f"before step {before} are copied into it from {str(tmp_path / journal)!r}, so that "
        "it holds the whole run", __file__)]
    rows = _csv_rows(tmp_path / C)
    records = read_jsonl(tmp_path / journal)[1]
    assert [int(row["step"]) for row in rows] == [r["step"] for r in records]
    assert len(rows) == before + 2
    assert [float(row["loss"]) for row in rows] == [r["loss"] for r in records]


@pytest.mark.parametrize("full", [J, C])
def test_the_fault_warning_names_the_file_that_could_not_be_written(tmp_path, disk, full):
    # the folder alone was checked: a warning naming log_dir instead of the file passed
    monitor = Monitor(tmp_path, preset="cheap", every=1, sinks=["jsonl", "csv"])
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        _train(monitor, disk, range(3), {1: {full}})
    messages = [str(w.message) for w in caught if issubclass(w.category, RuntimeWarning)]
    path = str(tmp_path / full)
    assert messages == [
        f"gradlab.Monitor: could not write the record of step 1 ({full} ({path!r}): {ENOSPC}: "
        f"{path!r}). Training goes on: a record that cannot be written is dropped "
        "(monitor.dropped_records counts them per sink), the sink is tried again at every "
        "logged step and the first record it takes notes the steps it missed (dropped_steps); "
        "later faults of the same sink are not reported again (strict=True raises instead)"]


def test_a_fault_of_a_sink_that_cannot_say_where_it_writes_names_the_log_folder(tmp_path):
    class Nowhere(FlakySink):
        def location(self, log_dir):
            raise RuntimeError("no location")

    monitor = Monitor(tmp_path, preset="cheap", every=1, sinks=["jsonl", Nowhere({0})])
    with pytest.warns(RuntimeWarning) as caught:
        _train(monitor, Disk(), range(1), {})
    message = next(str(w.message) for w in caught if issubclass(w.category, RuntimeWarning))
    assert message.startswith("gradlab.Monitor: could not write the record of step 0 (Nowhere "
                              f"({str(tmp_path)!r}): ")  # fmt: skip


def test_a_dangling_link_among_the_run_files_does_not_stop_a_resumption(tmp_path):
    # a file that vanished (a link to nowhere named as a run file) has no size to compare:
    # the resumption reads the run that is there
    _train_plain(tmp_path, ["jsonl"], 1)
    (tmp_path / C).symlink_to(tmp_path / "gone.csv")
    _train_plain(tmp_path, ["jsonl"], 1, resume=True)
    assert [r["step"] for r in read_jsonl(tmp_path / J)[1]] == [0, 1]
