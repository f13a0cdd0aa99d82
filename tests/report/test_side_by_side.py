"""The report's sections side by side: while one waits for its workers the next runs its own
part, one section's own code at a time, the same numbers as one after the other."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import textwrap
import threading
import time
from pathlib import Path

import pytest

from gradlab.experiments.runtime import computed_once, run_tasks
from gradlab.progress import set_progress_mode
from gradlab.report import runner
from tests.helpers.processes import descendants, sigint_as_at_a_terminal

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture
def quiet():
    set_progress_mode("off")
    yield
    set_progress_mode("auto")


def _pause(folder: str, seconds: float) -> float:
    """A worker task (module-level: a spawned worker imports it) that notes its process."""
    (Path(folder) / str(os.getpid())).write_text("")
    time.sleep(seconds)
    return seconds


def _alive(pid: int) -> bool:
    """Whether ``pid`` runs (a zombie does not count)."""
    try:
        status = Path(f"/proc/{pid}/status").read_text()
    except (FileNotFoundError, ProcessLookupError):
        return False
    return "Z" not in next(line for line in status.splitlines() if line.startswith("State:"))


def _sections(log: list, folder: Path, fail: str | None = None):
    """Sections that log when their own code runs (and on which thread) around their tasks."""
    busy = threading.Lock()

    def make(name: str, tasks: int):
        def section(out, quick, device):
            for phase in ("before", "after"):
                if phase == "after" and tasks:
                    run_tasks(_pause, [(str(folder), 1.5)] * tasks, stage=name,
                              names=["seed 0"] * tasks)  # fmt: skip
                # the section's own code: it must never run beside another section's
                assert busy.acquire(blocking=False), f"{name} ran beside another section"
                log.append((name, phase, time.perf_counter()))
                if name == fail and phase == "after":
                    busy.release()
                    raise ValueError(f"{name} failed")
                time.sleep(0.3)
                busy.release()
            return {"value": name.upper()}, f"## {name}"

        return section

    return {"pooled": make("pooled", 2), "local": make("local", 0),
            "later": make("later", 2)}  # fmt: skip


@pytest.mark.slow
def test_sections_overlap_their_waits_and_keep_their_order(tmp_path, monkeypatch, quiet):
    log: list = []
    monkeypatch.setattr(runner, "SECTIONS", _sections(log, tmp_path))
    results = runner.run_report(tmp_path, workers=2)
    assert list(results["sections"]) == ["pooled", "local", "later"]
    assert [results["sections"][n]["value"] for n in results["sections"]] == [
        "POOLED", "LOCAL", "LATER"]
    at = {(name, phase): when for name, phase, when in log}
    # "local" ran while "pooled" waited for its workers: before pooled's own code resumed
    assert at[("local", "after")] < at[("pooled", "after")]
    summary = (tmp_path / "summary.md").read_text()
    assert summary.index("## pooled") < summary.index("## local") < summary.index("## later")


@pytest.mark.slow
def test_one_worker_runs_the_sections_one_after_the_other(tmp_path, monkeypatch, quiet):
    log: list = []
    monkeypatch.setattr(runner, "SECTIONS", _sections(log, tmp_path))
    runner.run_report(tmp_path, workers=1)
    order = [(name, phase) for name, phase, _ in log]
    assert order == [(n, p) for n in ("pooled", "local", "later") for p in ("before", "after")]


@pytest.mark.slow
def test_a_failing_section_fails_the_report_and_leaves_no_worker(tmp_path, monkeypatch, quiet):
    log: list = []
    pids = tmp_path / "pids"
    pids.mkdir()
    monkeypatch.setattr(runner, "SECTIONS", _sections(log, pids, fail="pooled"))
    with pytest.raises(ValueError, match="pooled failed"):
        runner.run_report(tmp_path / "report", workers=2)
    workers = [int(path.name) for path in pids.iterdir()]
    assert workers  # the pool did start
    deadline = time.monotonic() + 15
    while any(_alive(pid) for pid in workers) and time.monotonic() < deadline:
        time.sleep(0.2)
    assert [pid for pid in workers if _alive(pid)] == []


@pytest.mark.slow
def test_quick_sections_side_by_side_give_the_serial_numbers(tmp_path, quiet, quick_report):
    # the side-by-side run is the whole quick report on two workers (conftest's quick_report)
    only = ["tie_aware", "losses", "scenes"]
    runner.run_report(tmp_path / "serial", quick=True, only=only, workers=1)
    serial, side = (json.loads((folder / "results.json").read_text())
                    for folder in (tmp_path / "serial", quick_report))  # fmt: skip

    def numbers(value):  # everything but timings (seconds anywhere, where they were taken)
        if isinstance(value, dict):  # and the worker count
            return {k: numbers(v) for k, v in value.items()
                    if "second" not in k and k not in ("workers", "timing")}  # fmt: skip
        return [numbers(v) for v in value] if isinstance(value, list) else value

    for name in only:
        assert json.dumps(numbers(side["sections"][name]), sort_keys=True) == json.dumps(
            numbers(serial["sections"][name]), sort_keys=True), name  # fmt: skip
    assert "step_seconds" in json.dumps(serial)  # timings were there, and left out
    # the losses' timing conditions name the training processes that ran at once
    assert [run["sections"]["losses"]["settings"]["timing"]["processes"]
            for run in (serial, side)] == [1, side["workers"]] and side["workers"] > 1  # fmt: skip
    # the pages differ only in timing columns (ms per step); the sections keep their order
    headings = ["## Harmonic sums vs logarithms (He et al., 2018)",
                "## Ranking losses on unseen digit strings",
                "## Image-caption retrieval on digit scenes (Bleeker & de Rijke, 2022, appendix B)"]
    for page in (tmp_path / "serial" / "summary.md", quick_report / "summary.md"):
        shown = [line for line in page.read_text().splitlines() if line in headings]
        assert shown == headings, page


SCRIPT = textwrap.dedent(
    """
    import sys, time
    from pathlib import Path
    sys.path.insert(0, {root!r})
    from gradlab.experiments.runtime import run_tasks
    from gradlab.progress import set_progress_mode
    from gradlab.report import runner
    from tests.report.test_side_by_side import _pause

    folder = Path({folder!r})

    def pooled(out, quick, device):
        run_tasks(_pause, [(str(folder / "pids"), 60.0)] * 2, stage="pooled",
                  names=["seed 0", "seed 1"])
        (folder / "pooled-after").write_text("")
        return {{}}, "## pooled"

    def local(out, quick, device):
        while len(list((folder / "pids").iterdir())) < 2:  # both workers at their tasks
            time.sleep(0.1)
        (folder / "local-started").write_text("")
        for _ in range(30):  # its own code, in Python: 3 s unless interrupted
            time.sleep(0.1)
        (folder / "local-after").write_text("")
        return {{}}, "## local"

    runner.SECTIONS = {{"pooled": pooled, "local": local}}
    set_progress_mode("lines")
    try:
        runner.run_report(folder / "report", workers=2)
    except KeyboardInterrupt:
        time.sleep(6)  # as a caller cleans up: a section still running would write now
        print("stopped", flush=True)
    """
)


@pytest.mark.slow
@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="/proc is Linux's")
def test_ctrl_c_stops_the_running_section_and_the_waiting_one(tmp_path):
    # "local" runs its own code while "pooled" waits for two workers: Ctrl-C must stop both
    # where they are (nothing after it is written, no section said done) and end the workers.
    (tmp_path / "pids").mkdir()
    script = SCRIPT.format(root=str(ROOT), folder=str(tmp_path))
    process = subprocess.Popen([sys.executable, "-c", script], stdout=subprocess.PIPE,
                               stderr=subprocess.PIPE, text=True,
                               preexec_fn=sigint_as_at_a_terminal)  # fmt: skip
    workers: list[int] = []
    try:
        deadline = time.monotonic() + 150  # spawning two workers under load takes a while
        while time.monotonic() < deadline and not (tmp_path / "local-started").exists():
            time.sleep(0.05)
        workers = [int(path.name) for path in (tmp_path / "pids").iterdir()]
        assert len(workers) == 2 and (tmp_path / "local-started").exists()
        process.send_signal(signal.SIGINT)
        stdout, stderr = process.communicate(timeout=60)
    finally:
        for pid in [*workers, *descendants(process.pid)]:
            with contextlib.suppress(ProcessLookupError):
                if _alive(pid):
                    os.kill(pid, signal.SIGKILL)
        if process.poll() is None:
            process.kill()
        process.wait(timeout=30)
    assert stdout == "stopped\n", stderr
    assert "Traceback" not in stderr and "Exception in thread" not in stderr, stderr
    assert "done" not in stderr, stderr  # no section (and no seed) said done
    assert not (tmp_path / "local-after").exists() and not (tmp_path / "pooled-after").exists()
    deadline = time.monotonic() + 15
    while any(_alive(pid) for pid in workers) and time.monotonic() < deadline:
        time.sleep(0.2)
    assert [pid for pid in workers if _alive(pid)] == []


@pytest.mark.slow
def test_a_result_computed_once_is_shared_with_a_caller_that_came_while_it_ran():
    started, release, calls = threading.Event(), threading.Event(), []

    @computed_once
    def measure(setting):
        calls.append(setting)
        started.set()
        assert release.wait(timeout=30)
        return {"setting": setting}

    got = {}
    first = threading.Thread(target=lambda: got.setdefault("first", measure("quick")))
    first.start()
    assert started.wait(timeout=30)
    second = threading.Thread(target=lambda: got.setdefault("second", measure("quick")))
    second.start()
    time.sleep(0.3)  # the second caller is waiting now, not computing
    release.set()
    first.join(timeout=30), second.join(timeout=30)
    assert calls == ["quick"] and got["first"] is got["second"] == {"setting": "quick"}
    assert measure("full") == {"setting": "full"} and calls == ["quick", "full"]


def test_a_failed_computation_is_not_kept():
    calls = []

    @computed_once
    def fails_once(x):
        calls.append(x)
        if len(calls) == 1:
            raise ValueError("first try")
        return x

    with pytest.raises(ValueError, match="first try"):
        fails_once(2)
    assert fails_once(2) == 2 and calls == [2, 2]
