"""run_report on tiny stand-in sections (fast: nothing trained, no worker process started):
what it writes, in which order, skipped sections, and sections side by side stopping together."""

from __future__ import annotations

import json
import platform
import re
import signal
import subprocess
import sys
import threading
import time

import pytest
import torch

import gradlab
from gradlab import GradlabError
from gradlab.experiments.runtime import computed_once
from gradlab.progress import set_progress_mode
from gradlab.report import runner
from tests.helpers.deadline import deadline


@pytest.fixture
def quiet():
    set_progress_mode("off")
    yield
    set_progress_mode("auto")


@pytest.fixture(autouse=True)
def no_hang():
    """A report that never returns (sections never said ended, a thread that never takes its
    turn) fails its test after 30 s, where the longest of these takes about two, instead of
    hanging the suite."""
    with deadline(30.0, "the report has not returned after 30 s"):
        yield


def _section(name: str, log: list, busy: float = 0.0, threads: list | None = None):
    def section(out, quick, device):
        log.append((name, quick, device, (out / "figures").is_dir()))
        if threads is not None:
            here = threading.current_thread()
            threads.append((here.name, here.daemon))
        started = time.thread_time()
        while time.thread_time() - started < busy:  # CPU time of this thread
            pass
        return {"value": name.upper()}, f"## {name}\n\ntext of {name}"

    return section


def _fakes(monkeypatch, log: list, **extra) -> None:
    sections = {name: _section(name, log) for name in ("one", "two", "three")}
    monkeypatch.setattr(runner, "SECTIONS", {**sections, **extra})


@pytest.mark.parametrize("workers", [1, 2])
def test_every_section_runs_in_report_order_and_is_written(tmp_path, monkeypatch, quiet, workers):
    log: list = []
    _fakes(monkeypatch, log)
    out = tmp_path / "new" / "report"
    results = runner.run_report(out, quick=True, device="cpu", workers=workers)
    assert [entry[0] for entry in log] == ["one", "two", "three"]
    assert all(entry[1:] == (True, "cpu", True) for entry in log)
    assert list(results["sections"]) == ["one", "two", "three"]
    assert [s["value"] for s in results["sections"].values()] == ["ONE", "TWO", "THREE"]
    assert results["skipped"] == {} and results["workers"] == workers
    assert results["gradlab"] == gradlab.__version__ and results["torch"] == torch.__version__
    assert results["machine"] == platform.platform()
    assert results["quick"] is True and results["device"] == "cpu"
    assert json.loads((out / "results.json").read_text()) == results
    summary = (out / "summary.md").read_text()
    lines = summary.splitlines()
    assert lines[0] == "# gradlab report"
    assert lines[2] == (
        f"gradlab {gradlab.__version__}, torch {torch.__version__}, device cpu, "
        "quick settings (small data and few steps: numbers are not the study's)."
    )
    assert "text of one\n\n## two\n\ntext of two\n\n## three" in summary
    assert summary.index("## one\n\ntext of one\n") < summary.index("## two") < summary.index(
        "## three\n\ntext of three\n")  # fmt: skip
    assert "text of three" in (out / "index.html").read_text()


def test_the_selected_sections_run_in_the_order_given(tmp_path, monkeypatch, quiet):
    log: list = []
    _fakes(monkeypatch, log)
    results = runner.run_report(tmp_path, only=["three", "one"], device="meta")
    assert [entry[0] for entry in log] == ["three", "one"]
    assert list(results["sections"]) == ["three", "one"]
    assert results["quick"] is False and results["device"] == "meta"
    intro = (tmp_path / "summary.md").read_text().splitlines()[2]
    assert intro == f"gradlab {gradlab.__version__}, torch {torch.__version__}, device meta."


def test_fappy_is_spelled_out_where_the_page_first_uses_it_whichever_sections_ran(
    tmp_path, monkeypatch, quiet
):
    # "FAPPY" appeared in the key findings, the audit, the verification and the losses alone
    def section(name, text):
        return lambda out, quick, device: ({}, f"## {name} FAPPY\n\n{text}")

    monkeypatch.setattr(runner, "SECTIONS", {
        "audit": section("audit", "| claim | `FAPPYLoss` |\n| --- | --- |\n| a | FAPPY wins |"),
        "losses": section("losses", "FastAP, FAPPY and Blackbox AP; FAPPY is slowest."),
    })  # fmt: skip
    expanded = "FAPPY (the false positive probability loss of Zhong, Li & Li)"
    running = f"FastAP, {expanded} and Blackbox AP; FAPPY is slowest."
    # a table's cell names a row or a column: kept bare, the running text after it spells out
    for only, first in [(["losses"], running), (["audit", "losses"], running)]:
        runner.run_report(tmp_path / "-".join(only), only=only)
        for page in ("summary.md", "index.html"):
            text = (tmp_path / "-".join(only) / page).read_text()
            said = text.replace("&amp;", "&")
            assert said.count(expanded) == 1, page
            # the headings keep their word (and their anchors); running text is spelled out
            # at its first use, before any other bare use
            body = [line for line in said.splitlines()
                    if re.search(r"(?<![\w`])FAPPY(?![\w`])", line)
                    and not line.startswith(("#", "<h", "<nav", "|", "<table"))]  # fmt: skip
            assert expanded in body[0], (page, body[0])  # headings, contents, tables aside
        summary = (tmp_path / "-".join(only) / "summary.md").read_text()
        assert first in summary and ("| a | FAPPY wins |" in summary) == ("audit" in only)


def test_unknown_sections_are_named_before_anything_runs(tmp_path, monkeypatch):
    log: list = []
    _fakes(monkeypatch, log)
    with pytest.raises(GradlabError) as raised:
        runner.run_report(tmp_path / "r", only=["one", "four", "five"])
    assert str(raised.value) == ("only must name report sections ['one', 'two', 'three']; got "
                                 "['four', 'five']")  # fmt: skip
    assert log == [] and not (tmp_path / "r").exists()
    with pytest.raises(GradlabError) as raised:  # was run twice, and written twice in the page
        runner.run_report(tmp_path / "r", only=["two", "one", "two"])
    assert str(raised.value) == "only must name each section once; got two more than once"
    assert log == [] and not (tmp_path / "r").exists()
    with pytest.raises(GradlabError) as raised:
        runner.run_report(tmp_path / "r", only=["two", "one", "two", "one", "three"])
    assert str(raised.value) == "only must name each section once; got one, two more than once"
    with pytest.raises(GradlabError, match="workers"):
        runner.run_report(tmp_path / "r", workers=0)
    assert log == [] and not (tmp_path / "r").exists()


@pytest.mark.slow
def test_each_section_gets_its_own_seconds_and_the_report_its_cpu(tmp_path, monkeypatch, quiet):
    log: list = []
    monkeypatch.setattr(runner, "SECTIONS", {"busy": _section("busy", log, busy=0.45),
                                             "idle": _section("idle", log)})  # fmt: skip
    started, cpu_started = time.perf_counter(), time.process_time()
    results = runner.run_report(tmp_path, workers=1)
    elapsed, cpu_spent = time.perf_counter() - started, time.process_time() - cpu_started
    busy, idle = results["sections"]["busy"], results["sections"]["idle"]
    for timing in (busy, idle):
        for key in ("seconds", "cpu_seconds"):
            assert isinstance(timing[key], float) and timing[key] == round(timing[key], 1)
            assert 0 <= timing[key] <= elapsed + 0.05  # within the report's own run
    # 0.45 s of CPU, rounded to tenths: 0.5 (or 0.4 where the float lies just below)
    assert busy["cpu_seconds"] >= 0.4 and busy["seconds"] >= busy["cpu_seconds"] - 0.05
    assert idle["cpu_seconds"] < 0.4  # its own thread's time, not the report's so far
    cpu = results["cpu_seconds"]
    assert set(cpu) == {"this_process", "workers"}
    assert 0.4 <= cpu["this_process"] <= cpu_spent + 0.05 and cpu["workers"] >= 0
    assert cpu["this_process"] == round(cpu["this_process"], 1)


@pytest.mark.parametrize("workers", [1, 2])
def test_a_section_missing_a_dependency_is_skipped_and_the_rest_run(tmp_path, monkeypatch, quiet,
                                                                    workers):  # fmt: skip
    log: list = []

    def needs_wandb(out, quick, device):
        raise ImportError("No module named 'wandb'")

    _fakes(monkeypatch, log, wandb=needs_wandb)
    results = runner.run_report(tmp_path, only=["one", "wandb", "two"], workers=workers)
    assert results["skipped"] == {"wandb": "ImportError: No module named 'wandb'"}
    assert list(results["sections"]) == ["one", "two"]
    summary = (tmp_path / "summary.md").read_text()
    note = "## wandb\n\nSkipped: a dependency is missing (ImportError: No module named 'wandb').\n"
    assert summary.index("## one") < summary.index(note) < summary.index("## two")


def _progress_lines(err: str) -> list[str]:
    return [line for line in err.splitlines() if line.startswith("gradlab: report section")]


@pytest.mark.parametrize("workers", [1, 2])
def test_each_section_says_its_number_and_when_it_is_done(tmp_path, monkeypatch, capsys, workers):
    log: list = []

    def needs_wandb(out, quick, device):
        raise ModuleNotFoundError("No module named 'wandb'")

    _fakes(monkeypatch, log, wandb=needs_wandb)
    set_progress_mode("lines")
    try:
        runner.run_report(tmp_path, only=["one", "wandb"], workers=workers)
    finally:
        set_progress_mode("auto")
    said = _progress_lines(capsys.readouterr().err)
    assert said[0] == "gradlab: report section 1 of 2: one ..."
    assert said[1].startswith("gradlab: report section 1 of 2: one done (1 section, ")
    assert said[2] == "gradlab: report section 2 of 2: wandb ..."
    assert said[3].startswith("gradlab: report section 2 of 2: wandb done (0 sections, ")  # skipped
    assert len(said) == 4


def _stoppable(name: str, log: list, shared, seen: list):
    """A section that waits for ``shared`` (handing on its turn), noting what stopped it."""

    def section(out, quick, device):
        log.append((name, "before"))
        try:
            shared("slow")
        except BaseException as error:
            seen.append(type(error).__name__)
            raise
        log.append((name, "after"))
        return {}, f"## {name}"

    return section


def _stopping(error: type[BaseException], log: list):
    def section(out, quick, device):
        log.append(("stopper", "before"))
        raise error("stopped here")

    return section


@pytest.mark.slow
@pytest.mark.parametrize("error", [KeyboardInterrupt, ValueError])
def test_side_by_side_a_failure_or_ctrl_c_stops_the_waiting_section_and_skips_the_rest(
        tmp_path, monkeypatch, quiet, error):  # fmt: skip
    started, release = threading.Event(), threading.Event()

    @computed_once
    def shared(setting):
        started.set()
        release.wait(timeout=60)
        return setting

    # computed first outside the report, so that the report's section waits for it (its turn
    # handed on, as while it waits for worker processes) and the next one runs meanwhile
    computing = threading.Thread(target=shared, args=("slow",), daemon=True)
    computing.start()
    assert started.wait(timeout=30)
    log: list = []
    seen: list = []
    monkeypatch.setattr(runner, "SECTIONS", {
        "waiting": _stoppable("waiting", log, shared, seen),
        "stopper": _stopping(error, log),
        "later": _section("later", log),
    })  # fmt: skip
    try:
        with pytest.raises(error, match="stopped here"):
            runner.run_report(tmp_path / "r", workers=2)
        # the waiting section was interrupted where it was, with the same kind of stop for
        # Ctrl-C (and another error for a failure elsewhere); the later one never started
        assert log == [("waiting", "before"), ("stopper", "before")]
        assert seen == [error.__name__ if error is KeyboardInterrupt else "_StoppedError"]
        assert not (tmp_path / "r" / "results.json").exists()
    finally:
        release.set()
        computing.join(timeout=30)


def test_side_by_side_a_section_that_waits_lets_the_next_run_and_keeps_its_place(
        tmp_path, monkeypatch, quiet):  # fmt: skip
    started, release = threading.Event(), threading.Event()

    @computed_once
    def shared(setting):
        started.set()
        release.wait(timeout=60)
        return setting

    computing = threading.Thread(target=shared, args=("slow",), daemon=True)
    computing.start()
    assert started.wait(timeout=30)
    log: list = []

    def releasing(out, quick, device):
        log.append(("releasing", "before"))
        release.set()  # runs while "waiting" waits: it would hang otherwise
        return {"value": "R"}, "## releasing"

    monkeypatch.setattr(runner, "SECTIONS", {
        "waiting": _stoppable("waiting", log, shared, []),
        "releasing": releasing,
    })  # fmt: skip
    try:
        results = runner.run_report(tmp_path, workers=2)
    finally:
        release.set()
        computing.join(timeout=30)
    assert log == [("waiting", "before"), ("releasing", "before"), ("waiting", "after")]
    assert list(results["sections"]) == ["waiting", "releasing"]
    summary = (tmp_path / "summary.md").read_text()
    assert summary.index("## waiting") < summary.index("## releasing")


def test_side_by_side_sections_run_in_named_daemon_threads(tmp_path, monkeypatch, quiet):
    log: list = []
    threads: list = []
    monkeypatch.setattr(runner, "SECTIONS", {name: _section(name, log, threads=threads)
                                             for name in ("one", "two")})  # fmt: skip
    runner.run_report(tmp_path, workers=2)
    # daemon threads: a section that hangs after Ctrl-C cannot keep the process alive
    assert threads == [("report section one", True), ("report section two", True)]
    runner.run_report(tmp_path, workers=1)  # one after the other: in the caller's thread
    assert threads[2:] == [(threading.current_thread().name, threading.current_thread().daemon)] * 2


def test_sections_with_worker_tasks_start_first_and_keep_their_place(tmp_path, monkeypatch, quiet):
    log: list = []
    pooled = runner.WORKER_SECTIONS[0]
    names = ["first", pooled, "last"]
    monkeypatch.setattr(runner, "SECTIONS", {name: _section(name, log) for name in names})
    results = runner.run_report(tmp_path, workers=2)
    assert [entry[0] for entry in log] == [pooled, "first", "last"]
    assert list(results["sections"]) == names
    runner.run_report(tmp_path, workers=1)  # one after the other: in report order
    assert [entry[0] for entry in log[3:]] == names


def _burn_in_a_child(out, quick, device):
    code = "import time\nt = time.process_time()\nwhile time.process_time() - t < 0.3: pass"
    subprocess.run([sys.executable, "-c", code], check=True)
    return {}, "## child"


@pytest.mark.slow
@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="getrusage is POSIX")
def test_the_workers_cpu_is_that_of_the_children_ended_during_the_report(
    tmp_path, monkeypatch, quiet
):
    import resource

    def children() -> float:
        usage = resource.getrusage(resource.RUSAGE_CHILDREN)
        return usage.ru_utime + usage.ru_stime

    monkeypatch.setattr(runner, "SECTIONS", {"child": _burn_in_a_child})
    before = children()
    results = runner.run_report(tmp_path, workers=1)
    spent = children() - before
    assert spent >= 0.3
    assert abs(results["cpu_seconds"]["workers"] - spent) <= 0.05 + 1e-9
    monkeypatch.setitem(sys.modules, "resource", None)  # a system without it (Windows)
    assert runner.run_report(tmp_path, workers=1)["cpu_seconds"]["workers"] == 0.0


def _saved_p_study(folder, data: str) -> None:
    """A saved `gradlab study p-vs-batch-size` result (three seeds, m = 8, 16)."""
    rows = [[0.30, 0.40], [0.31, 0.42], [0.29, 0.41]]
    parts = {"P_diagonal": [[1 / 8, 1 / 16]] * 3, "P_own_row_column": [[0.0, 0.0]] * 3,
             "P_positive_rows": [[0.1, 0.1]] * 3, "P_negative_rows": [[0.1, 0.2]] * 3}  # fmt: skip
    folder.mkdir()
    (folder / "p_vs_batch_size.json").write_text(json.dumps({
        "batch_sizes": [8, 16], "data": f"{data}, train split (24 images, 4 classes)",
        "model": "timm:resnet50 with a linear head to 512 dimensions, random initial weights",
        "per_class": 4, "seeds": [0, 1, 2], "tau": 0.01, "eps": 0.005,
        "settings": {"trained_at_m": {"P": rows, "P_positive_negative": rows,
                                      "P_negative_negative": rows, **parts, "steps": [3, 2],
                                      "epochs": 1}},
    }))  # fmt: skip


@pytest.mark.slow
def test_saved_studies_follow_the_sections_numbered_with_their_findings(
    tmp_path, monkeypatch, quiet
):
    pytest.importorskip("matplotlib")
    log: list = []
    monkeypatch.setattr(runner, "SECTIONS", {"one": _section("one", log)})
    _saved_p_study(tmp_path / "first", "sop")
    _saved_p_study(tmp_path / "second", "cub")
    out = tmp_path / "report"
    results = runner.run_report(out, studies=[tmp_path / "first", tmp_path / "second"])
    assert list(results["sections"]) == ["one", "study 1", "study 2"]
    for number in (1, 2):
        section = results["sections"][f"study {number}"]
        assert section["folder"] == str(tmp_path / ("first" if number == 1 else "second"))
        assert {"seconds", "cpu_seconds"} <= set(section)
        assert (out / "figures" / f"study{number}_p_vs_batch_size.png").exists()
    summary = (out / "summary.md").read_text()
    headings = [line for line in summary.splitlines() if line.startswith("## ")]
    assert headings[1] == "## one" and len(headings) == 4
    assert headings[2].endswith("your study on sop with timm:resnet50")
    assert headings[3].endswith("your study on cub with timm:resnet50")
    findings = summary[summary.index("## Key findings") : summary.index("## one")]
    assert findings.count("P from m = 8 to m = 16: rises") == 2  # one finding per study
    assert json.loads((out / "results.json").read_text()) == results


def test_the_defaults_one_process_on_the_cpu_in_the_callers_thread(tmp_path, monkeypatch, quiet):
    seen: list = []

    def section(out, quick, device):
        seen.append((device, torch.get_num_threads(), threading.current_thread().name))
        return {}, "## alone"

    monkeypatch.setattr(runner, "SECTIONS", {"alone": section})
    before = torch.get_num_threads()
    results = runner.run_report(tmp_path)
    assert results["workers"] == 1 and results["device"] == "cpu"
    here = threading.current_thread().name
    assert seen == [("cpu", 1, here)]  # one torch thread while the section runs
    assert torch.get_num_threads() == before
    results = runner.run_report(tmp_path, workers=2)  # one section: nothing to run beside it
    assert seen[1] == ("cpu", 1, here)
    lines = (tmp_path / "summary.md").read_text().splitlines()
    assert lines[1] == "" and lines[3] == ""


@pytest.mark.slow
def test_side_by_side_ctrl_c_here_stops_the_running_sections_and_skips_the_rest(
    tmp_path, monkeypatch, quiet, ctrl_c_raises
):
    started, release = threading.Event(), threading.Event()

    @computed_once
    def shared(setting):
        started.set()
        release.wait(timeout=60)
        return setting

    computing = threading.Thread(target=shared, args=("slow",), daemon=True)
    computing.start()
    assert started.wait(timeout=30)
    log: list = []
    seen: list = []

    def ctrl_c(out, quick, device):
        log.append(("ctrl_c", "before"))
        signal.raise_signal(signal.SIGINT)  # handled in the main thread: Ctrl-C there
        for _ in range(100):  # its own code goes on until it is interrupted too
            time.sleep(0.05)
        log.append(("ctrl_c", "after"))
        return {}, "## ctrl_c"

    monkeypatch.setattr(runner, "SECTIONS", {
        "waiting": _stoppable("waiting", log, shared, seen),
        "ctrl_c": ctrl_c,
        "later": _section("later", log),
    })  # fmt: skip
    try:
        with pytest.raises(KeyboardInterrupt):
            runner.run_report(tmp_path / "r", workers=2)
        assert log == [("waiting", "before"), ("ctrl_c", "before")]
        assert seen == ["KeyboardInterrupt"]
        assert not (tmp_path / "r" / "results.json").exists()
    finally:
        release.set()
        computing.join(timeout=30)


def test_a_cpu_report_runs_its_sections_on_one_torch_thread_and_restores_the_setting(
    tmp_path, monkeypatch, quiet
):
    seen: list = []

    def section(out, quick, device):
        seen.append(torch.get_num_threads())
        return {}, "## threads"

    monkeypatch.setattr(runner, "SECTIONS", {"threads": section})
    before = torch.get_num_threads()
    torch.set_num_threads(2)
    try:
        runner.run_report(tmp_path, device="cpu")
        assert seen == [1] and torch.get_num_threads() == 2
        runner.run_report(tmp_path, device="meta")  # another device: torch's setting untouched
        assert seen == [1, 2]
    finally:
        torch.set_num_threads(before)


class _StopError(Exception):
    """Raised in the main thread by a signal handler: an error that reaches run_report's own
    thread (as Ctrl-C does) while sections run beside it."""


def test_side_by_side_an_error_in_the_callers_thread_stops_the_sections_and_skips_the_rest(
    tmp_path, monkeypatch, quiet
):
    def stop(signum, frame):
        raise _StopError("stopped in the caller's thread")

    previous = signal.signal(signal.SIGUSR1, stop)
    log: list = []
    seen: list = []

    def raising(out, quick, device):
        log.append(("raising", "before"))
        try:  # from the signal on: the main thread may interrupt this one at any instruction
            signal.raise_signal(signal.SIGUSR1)  # handled in the main thread
            for _ in range(100):  # holds its turn until it is interrupted too
                time.sleep(0.05)
        except BaseException as error:
            seen.append(type(error).__name__)
            raise
        log.append(("raising", "after"))
        return {}, "## raising"

    monkeypatch.setattr(runner, "SECTIONS", {
        "raising": raising, "waiting": _section("waiting", log), "never": _section("never", log),
    })  # fmt: skip
    try:
        with pytest.raises(_StopError, match="stopped in the caller's thread"):
            runner.run_report(tmp_path / "r", workers=2)
    finally:
        signal.signal(signal.SIGUSR1, previous)
    # the running section is stopped with another error than the caller's, the one waiting
    # for its turn never runs, the last is never started, and nothing is written
    assert log == [("raising", "before")]
    assert seen == ["_StoppedError"]
    assert not (tmp_path / "r" / "results.json").exists()


def _signalling(log: list, seen: list, after: threading.Event | None = None, first=None):
    """A section that raises SIGUSR1 in the main thread (once ``first`` section's thread is
    alive, and a moment later, so that the caller is waiting by then), then holds its turn
    until it is interrupted; after that it goes on once ``after`` is set, if given."""

    def section(out, quick, device):
        log.append(("signalling", "before"))
        while first is not None and not any(thread.name == f"report section {first}"
                                            for thread in threading.enumerate()):  # fmt: skip
            time.sleep(0.01)
        time.sleep(0.2)
        try:
            signal.raise_signal(signal.SIGUSR1)  # handled in the main thread
            for _ in range(100):
                time.sleep(0.05)
        except BaseException as error:
            seen.append(type(error).__name__)
            if after is None:
                raise
            after.wait(timeout=5)  # a section that does not stop at once (a long C call)
        log.append(("signalling", "after"))
        return {}, "## signalling"

    return section


@pytest.fixture
def stop_signal():
    """SIGUSR1 raises _StopError in the main thread during the test."""

    def stop(signum, frame):
        raise _StopError("stopped in the caller's thread")

    previous = signal.signal(signal.SIGUSR1, stop)
    yield
    signal.signal(signal.SIGUSR1, previous)


@pytest.mark.slow
@pytest.mark.parametrize("waiting_for", ["a section's turn", "the sections to end"])
def test_side_by_side_an_error_while_the_caller_waits_stops_the_running_section_at_once(
    tmp_path, monkeypatch, quiet, stop_signal, waiting_for
):
    log: list = []
    seen: list = []
    if waiting_for == "a section's turn":  # the next section is started, not yet entered
        sections = {"signalling": _signalling(log, seen, first="next"),
                    "next": _section("next", log)}  # fmt: skip
    else:  # every section has entered: the report waits for them to end
        sections = {"first": _section("first", log), "signalling": _signalling(log, seen)}
    monkeypatch.setattr(runner, "SECTIONS", sections)
    with pytest.raises(_StopError):
        runner.run_report(tmp_path / "r", workers=2)
    # the caller sees the error while it waits, not once the section has ended by itself
    assert [entry for entry in log if entry[0] != "first"] == [("signalling", "before")]
    assert seen == ["_StoppedError"]
    assert not (tmp_path / "r" / "results.json").exists()


@pytest.mark.slow
def test_side_by_side_a_section_that_does_not_stop_is_left_behind(
    tmp_path, monkeypatch, quiet, stop_signal
):
    log: list = []
    seen: list = []
    let_go = threading.Event()
    monkeypatch.setattr(runner, "STOP_SECONDS", 0.2)  # the longest the report waits for it
    monkeypatch.setattr(runner, "SECTIONS", {
        "signalling": _signalling(log, seen, after=let_go), "never": _section("never", log),
    })  # fmt: skip
    try:
        with pytest.raises(_StopError):
            runner.run_report(tmp_path / "r", workers=2)
        # the report gave up waiting for the interrupted section, which still runs
        assert seen == ["_StoppedError"]
        assert log == [("signalling", "before")]
    finally:
        let_go.set()
        for thread in threading.enumerate():
            if thread.name == "report section signalling":
                thread.join(timeout=30)
    assert log == [("signalling", "before"), ("signalling", "after")]
