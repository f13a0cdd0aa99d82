"""The command line under bad files, unwritable paths and SIGTERM: one line, never a traceback.

One row per fault. A malformed ``metrics.jsonl`` line is skipped with a one-line warning that
counts it, or, when no record is left, refused in one line with exit code 2. Values that are not
numbers are left out of the figures with a note. An output that cannot be written is refused in
one line with exit code 2 before any work. SIGTERM during ``gradlab report`` removes the staging
folder as Ctrl-C does.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import matplotlib.pyplot as plt
import pytest

from gradlab.cli import main
from gradlab.plotting import monitor as monitor_plots
from tests.helpers.malformed_logs import MALFORMED
from tests.helpers.processes import sigint_as_at_a_terminal

HEADER = json.dumps({"header": {"quantities": ["loss"]}})
GOOD = [HEADER, json.dumps({"step": 0, "loss": 0.5}), json.dumps({"step": 1, "loss": 0.25})]


def _log(folder: Path, lines: list[bytes]) -> Path:
    folder.mkdir(parents=True)
    (folder / "metrics.jsonl").write_bytes(b"".join(line + b"\n" for line in lines))
    return folder


GOOD_BYTES = [line.encode() for line in GOOD]

# name -> (a fourth line after a valid log, why it is skipped): the readers' table, the probe's
# cases; the plot draws the rest, exit 0
SKIPPED_LINES = {
    name: MALFORMED[name]
    for name in ("not UTF-8 (a latin-1 byte)", "a JSON array", "a JSON number", "JSON null",
                 "no step", "a string step", "a boolean step")
}  # fmt: skip

# name -> a fourth line whose loss is not a number: left out of the figure with a note, exit 0
NOT_NUMBERS = {
    "a string value": b'{"step": 2, "loss": "high"}',
    "a boolean value": b'{"step": 2, "loss": true}',
}

# name -> (the whole log, what the refusal says after the path); nothing left: exit 2
NOTHING_READABLE = {
    "random bytes": (
        [bytes(range(128, 256)), bytes(range(255, 127, -1))],
        ":1: skipped 2 of 2 lines (lines 1, 2: not UTF-8 text)",
    ),
    "only nulls and arrays": (
        [b"null", b"[]", b"null"],
        ":1: skipped 3 of 3 lines (lines 1, 3: not a JSON object (a JSON null); "
        "line 2: not a JSON object (a JSON array))",
    ),
}


def _run(argv, capsys):
    """main(argv) -> (exit code, stdout, stderr); argparse's SystemExit counts as a return."""
    try:
        code = main(argv)
    except SystemExit as stop:
        code = stop.code
    captured = capsys.readouterr()
    return code, captured.out, captured.err


def _plot(tmp_path, capsys, monkeypatch, lines):
    """``gradlab plot`` of a log of ``lines`` -> (exit code, stderr lines, the log, the points of
    each line of each figure drawn)."""
    run = _log(tmp_path / "run", lines)
    drawn = []

    def keep(figure, path):
        drawn.append([line.get_xydata().tolist() for line in figure.axes[0].get_lines()])
        plt.close(figure)
        return path

    monkeypatch.setattr(monitor_plots, "save_figure", keep)
    code, _, stderr = _run(["plot", str(run), "--out", str(tmp_path / "figures")], capsys)
    return code, stderr.splitlines(), run / "metrics.jsonl", drawn


@pytest.mark.parametrize("case", list(SKIPPED_LINES))
def test_plot_skips_a_malformed_line_with_a_one_line_warning(tmp_path, capsys, monkeypatch, case):
    line, reason = SKIPPED_LINES[case]
    code, stderr, log, drawn = _plot(tmp_path, capsys, monkeypatch, [*GOOD_BYTES, line.strip()])
    assert code == 0
    assert stderr == [f"gradlab: warning: {log}:4: skipped a line that is {reason}"]
    assert drawn[0] == [[[0.0, 0.5], [1.0, 0.25]]]  # the two good records, nothing else


@pytest.mark.parametrize("case", list(NOT_NUMBERS))
def test_plot_ignores_values_that_are_not_numbers_with_a_note(tmp_path, capsys, monkeypatch, case):
    lines = [*GOOD_BYTES, NOT_NUMBERS[case]]
    code, stderr, _, drawn = _plot(tmp_path, capsys, monkeypatch, lines)
    assert code == 0
    assert stderr == ["gradlab: warning: ignored 1 logged value(s) that are not numbers: loss (1)"]
    assert drawn[0] == [[[0.0, 0.5], [1.0, 0.25]]]


@pytest.mark.parametrize("case", list(NOTHING_READABLE))
def test_plot_refuses_a_log_with_nothing_readable_in_one_line(tmp_path, capsys, monkeypatch, case):
    lines, detail = NOTHING_READABLE[case]
    code, stderr, log, drawn = _plot(tmp_path, capsys, monkeypatch, lines)
    assert code == 2
    assert stderr == [
        f"gradlab: {log}{detail}, so no logged step is left (a run folder must hold a "
        "metrics.jsonl written by gradlab.Monitor)"
    ]
    assert drawn == [] and not (tmp_path / "figures").exists()


def _fail_if_called(*args, **kwargs):
    raise AssertionError("the work started before the output path was checked")


# name -> (argv, the option the one-line error names). /proc and /sys accept no new file even
# from root; a 0o500 folder ({locked}) binds every user but root (those rows skip as root).
UNWRITABLE_OUTPUTS = {
    "plot --out under /proc": (["plot", "{run}", "--out", "/proc/figs"], "--out"),
    "plot --out under /sys": (["plot", "{run}", "--out", "/sys/kernel/figs"], "--out"),
    "plot --out in a 0o500 folder": (["plot", "{run}", "--out", "{locked}/figs"], "--out"),
    "audit --json in /proc": (["audit", "--json", "/proc/records.json"], "--json"),
    "audit --markdown in /sys": (["audit", "--markdown", "/sys/kernel/audit.md"], "--markdown"),
    "audit --json in a 0o500 folder": (["audit", "--json", "{locked}/a.json"], "--json"),
    "report --out under /proc/self": (
        ["report", "--only", "audit", "--out", "/proc/self/new/report"], "--out"),
    "report --out under /sys": (["report", "--only", "audit", "--out", "/sys/kernel/r"], "--out"),
    "report --out in a 0o500 folder": (
        ["report", "--only", "audit", "--out", "{locked}/r"], "--out"),
}  # fmt: skip


@pytest.mark.parametrize("case", list(UNWRITABLE_OUTPUTS))
def test_an_unwritable_output_is_refused_in_one_line_before_any_work(
    tmp_path, capsys, monkeypatch, case
):
    import gradlab.plotting.monitor
    import gradlab.report
    import gradlab.symbolic.audit

    argv, option = UNWRITABLE_OUTPUTS[case]
    if "{locked}" in " ".join(argv) and (not hasattr(os, "geteuid") or os.geteuid() == 0):
        pytest.skip("root writes into a 0o500 folder; the /proc and /sys rows cover root")
    system = next((root for root in ("/proc/", "/sys/") if root in " ".join(argv)), None)
    if system is not None and not Path(system).is_dir():
        pytest.skip(f"no {system} on this system")
    monkeypatch.setattr(gradlab.symbolic.audit, "run_audit", _fail_if_called)
    monkeypatch.setattr(gradlab.report, "run_report", _fail_if_called)
    monkeypatch.setattr(gradlab.plotting.monitor, "plot_runs", _fail_if_called)
    locked = tmp_path / "read_only"
    locked.mkdir(mode=0o500)
    run = _log(tmp_path / "run", [line.encode() for line in GOOD])
    argv = [arg.format(run=run, locked=locked) for arg in argv]
    code, stdout, stderr = _run(argv, capsys)
    assert code == 2
    (line,) = stderr.splitlines()
    assert line.startswith(f"gradlab: {option} must be a") and "gradlab can write" in line
    assert stdout == ""


def test_the_audit_refuses_one_file_for_both_outputs_before_any_work(
    tmp_path, capsys, monkeypatch
):
    import gradlab.symbolic.audit

    monkeypatch.setattr(gradlab.symbolic.audit, "run_audit", _fail_if_called)
    same = tmp_path / "out.json"
    code, stdout, stderr = _run(["audit", "--json", str(same), "--markdown",
                                 str(tmp_path / "." / "out.json")], capsys)  # fmt: skip
    assert (code, stdout) == (2, "")
    assert stderr == (f"gradlab: --json and --markdown name the same file {same}; give each "
                      "its own (one would overwrite the other)\n")


# argv -> the option named: an empty path would be Path("") == ".", the current folder
EMPTY_PATHS = {
    "audit --json ''": (["audit", "--json", ""], "--json"),
    "audit --markdown ' '": (["audit", "--markdown", " "], "--markdown"),
    "report --out ''": (["report", "--only", "audit", "--out", ""], "--out"),
    "plot ''": (["plot", ""], "RUN_DIR"),
    "check-equivalence --json ''": (["check-equivalence", "--json", ""], "--json"),
}


@pytest.mark.parametrize("case", list(EMPTY_PATHS))
def test_an_empty_path_is_refused_by_its_option_in_one_line_before_any_work(
    tmp_path, capsys, monkeypatch, case
):
    # before, `--json ''` was refused as "got '.', which is a folder" and `report --out ''` ran
    # every section, then ended in "could not use '.': Invalid argument"
    import gradlab.plotting.monitor
    import gradlab.report
    import gradlab.symbolic.audit

    monkeypatch.setattr(gradlab.symbolic.audit, "run_audit", _fail_if_called)
    monkeypatch.setattr(gradlab.report, "run_report", _fail_if_called)
    monkeypatch.setattr(gradlab.plotting.monitor, "plot_runs", _fail_if_called)
    monkeypatch.chdir(tmp_path)
    argv, option = EMPTY_PATHS[case]
    code, stdout, stderr = _run(argv, capsys)
    assert (code, stdout) == (2, "")
    (line,) = stderr.splitlines()
    empty = next(arg for arg in argv if not arg.strip())
    assert line.startswith(f"gradlab {argv[0]}: error: argument {option}: must be a path; got "
                           f"{empty!r}")  # fmt: skip
    assert list(tmp_path.iterdir()) == []


def test_an_output_that_fails_while_written_is_one_line_exit_2(tmp_path, capsys, monkeypatch):
    """A write that fails after the check (the disk filled, the folder was locked meanwhile)."""
    import gradlab.symbolic.audit

    target = tmp_path / "records.json"

    def denied(records, json_path, markdown_path):
        raise PermissionError(13, "Permission denied", str(json_path))

    monkeypatch.setattr(gradlab.symbolic.audit, "run_audit", lambda **options: [])
    monkeypatch.setattr(gradlab.symbolic.audit, "format_table", lambda records: "table")
    monkeypatch.setattr(gradlab.symbolic.audit, "write_outputs", denied)
    code, _, stderr = _run(["audit", "--json", str(target)], capsys)
    assert code == 2
    assert stderr.splitlines() == [f"gradlab: could not use --json {str(target)!r}: Permission "
                                   "denied"]  # fmt: skip


FULL = Path("/dev/full")  # Linux: every write into it fails with ENOSPC, as on a full disk


@pytest.mark.skipif(not FULL.exists(), reason="needs /dev/full (Linux)")
def test_a_full_disk_while_the_audit_writes_is_one_line_naming_the_file(capsys, monkeypatch):
    import gradlab.symbolic.audit

    monkeypatch.setattr(gradlab.symbolic.audit, "run_audit", lambda **options: [])
    code, _, stderr = _run(["audit", "--markdown", str(FULL)], capsys)
    assert code == 2
    assert stderr.splitlines() == [f"gradlab: could not use --markdown {str(FULL)!r}: No space "
                                   "left on device"]  # fmt: skip


@pytest.mark.skipif(not FULL.exists(), reason="needs /dev/full (Linux)")
def test_a_full_disk_while_check_equivalence_writes_is_one_line(capsys):
    code, stdout, stderr = _run(["check-equivalence", "gradient-cache", "--json", str(FULL)],
                                capsys)  # fmt: skip
    assert code == 2 and "verdict:" in stdout
    assert stderr.splitlines() == [f"gradlab: could not use --json {str(FULL)!r}: No space left "
                                   "on device"]  # fmt: skip


def test_a_path_option_typed_with_a_tilde_is_named_when_its_write_fails(capsys, monkeypatch,
                                                                        tmp_path):
    import gradlab.symbolic.audit

    monkeypatch.setenv("HOME", str(tmp_path))

    def denied(records, json_path, markdown_path):
        raise PermissionError(13, "Permission denied", str(json_path))

    monkeypatch.setattr(gradlab.symbolic.audit, "run_audit", lambda **options: [])
    monkeypatch.setattr(gradlab.symbolic.audit, "format_table", lambda records: "table")
    monkeypatch.setattr(gradlab.symbolic.audit, "write_outputs", denied)
    code, _, stderr = _run(["audit", "--json", "~/records.json"], capsys)
    assert code == 2
    assert stderr.splitlines() == [f"gradlab: could not use --json "
                                   f"{str(tmp_path / 'records.json')!r}: Permission denied"]


@pytest.mark.parametrize("option", ["--json", "--markdown"])
def test_a_name_longer_than_the_file_system_takes_is_refused_before_the_audit(
        capsys, tmp_path, option):  # fmt: skip
    # it ran the whole audit, then said "could not use 'aaa...json': File name too long"
    long = tmp_path / ("a" * 300 + ".json")
    code, stdout, stderr = _run(["audit", option, str(long)], capsys)
    assert (code, stdout) == (2, "")
    assert stderr.splitlines() == [f"gradlab: {option} must be a path the file system takes; "
                                   f"got a name of 305 bytes ({'a' * 40!r}...), longer than it "
                                   "allows"]  # fmt: skip


def test_a_full_disk_while_figures_are_drawn_is_one_line(tmp_path, capsys, monkeypatch):
    """A figure's write fails inside matplotlib, whose error names no file."""
    import errno

    import gradlab.plotting.monitor

    def full(*args, **kwargs):
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))

    monkeypatch.setattr(gradlab.plotting.monitor, "plot_runs", full)
    run = _log(tmp_path / "run", GOOD_BYTES)
    code, _, stderr = _run(["plot", str(run)], capsys)
    assert code == 2
    assert stderr.splitlines() == [f"gradlab: could not use an output: {os.strerror(errno.ENOSPC)}"]


def test_a_full_disk_inside_matplotlibs_writer_names_the_figure(tmp_path, capsys, monkeypatch):
    """matplotlib's PNG writer raises without a file name: the figure it wrote is named."""
    import errno

    from matplotlib.figure import Figure

    def full(self, *args, **kwargs):
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))

    monkeypatch.setattr(Figure, "savefig", full)
    run = _log(tmp_path / "run", GOOD_BYTES)
    code, _, stderr = _run(["plot", str(run)], capsys)
    assert code == 2
    figure = run / "figures" / "loss.png"
    assert stderr.splitlines() == [
        f"gradlab: could not use {str(figure)!r}: {os.strerror(errno.ENOSPC)}"]


def test_a_default_figures_folder_that_cannot_be_used_is_named_as_the_default(tmp_path, capsys):
    # "--out must be ..." named an option the user never passed
    run = _log(tmp_path / "run", GOOD_BYTES)
    (run / "figures").write_text("a file where the figures go")
    code, _, stderr = _run(["plot", str(run)], capsys)
    assert code == 2
    assert stderr.splitlines() == [
        "gradlab: RUN_DIR/figures, the default of --out (pass --out FOLDER to write elsewhere), "
        f"must be a folder or a path where one can be created; got {str(run / 'figures')!r}, "
        "which is an existing file"]


def _wait_for(condition, seconds: float) -> bool:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if condition():
            return True
        time.sleep(0.05)
    return condition()


@pytest.mark.slow
@pytest.mark.skipif(not hasattr(signal, "SIGTERM") or sys.platform == "win32", reason="POSIX")
def test_sigterm_during_report_leaves_nothing_behind(tmp_path):
    out = tmp_path / "r"
    staging = tmp_path / ".r.partial"
    command = [sys.executable, "-m", "gradlab", "report", "--quick", "--only", "audit",
               "--out", str(out), "--no-progress"]  # fmt: skip
    environment = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)}
    for _ in range(5):  # a quick report can finish between seeing its staging and the signal
        process = subprocess.Popen(
            command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=environment
        )
        try:
            assert _wait_for(staging.exists, 120), "the report never started writing"
            process.send_signal(signal.SIGTERM)
            _, stderr = process.communicate(timeout=60)
        finally:
            if process.poll() is None:
                process.kill()
                process.communicate()
        if process.returncode != 0 or not out.exists():  # the signal came while it worked
            break
        shutil.rmtree(out)  # it had finished: a complete report, not a fault; try again
    assert not staging.exists() and not out.exists()
    assert process.returncode != 0
    assert stderr.splitlines() == ["gradlab: terminated (SIGTERM); nothing was written"]


# Loaded by every Python process of the run below (it is first on PYTHONPATH): it widens the
# moment between a worker process being spawned and its work being written to it to a second
# (not the resource tracker's start, which is sent nothing),
# and marks that moment with a file, so that the signal lands exactly there.
SLOW_SPAWN = """
import multiprocessing.util, os, pathlib, sys, time
_spawn = multiprocessing.util.spawnv_passfds
def _slow_spawn(*arguments):
    pid = _spawn(*arguments)
    if sys._getframe(1).f_code.co_filename.endswith("popen_spawn_posix.py"):  # a worker
        pathlib.Path(os.environ["GRADLAB_TEST_SPAWNED"]).touch()
        time.sleep(1.0)
    return pid
multiprocessing.util.spawnv_passfds = _slow_spawn
"""


TERMINATED = "gradlab: terminated (SIGTERM); nothing was written"
INTERRUPTED = "gradlab: interrupted; nothing was written"
REPORT = ["report", "--quick", "--no-progress", "--workers", "2", "--only", "audit"]


@pytest.mark.slow
@pytest.mark.skipif(not hasattr(signal, "SIGTERM") or sys.platform == "win32", reason="POSIX")
@pytest.mark.parametrize(
    ("command", "ctrl_c", "line"),
    [(REPORT, False, TERMINATED), ([*REPORT, "--only", "verification"], False, TERMINATED),
     (REPORT, True, INTERRUPTED), (["check-equivalence", "gather"], True, INTERRUPTED)],
    ids=["report, SIGTERM, one section in the main thread", "report, SIGTERM, two side by side",
         "report, Ctrl-C", "check-equivalence, Ctrl-C"],
)  # fmt: skip
def test_a_signal_while_a_worker_starts_leaves_no_worker_and_one_line(tmp_path, command, ctrl_c,
                                                                      line):  # fmt: skip
    # A worker spawned but not yet sent its work, when the signal's exception left the code
    # starting it, read an empty pipe and printed EOFError's traceback under the one line; and
    # Ctrl-C, which a terminal sends to every process of the command, made a starting worker
    # print a KeyboardInterrupt traceback of its own.
    hook = tmp_path / "hook"
    hook.mkdir()
    (hook / "sitecustomize.py").write_text(SLOW_SPAWN)
    spawned, out = tmp_path / "spawned", tmp_path / "r"
    outputs = ["--out", str(out)] if command[0] == "report" else []
    environment = {**os.environ, "PYTHONPATH": os.pathsep.join([str(hook), *sys.path]),
                   "GRADLAB_TEST_SPAWNED": str(spawned)}  # fmt: skip
    process = subprocess.Popen(
        [sys.executable, "-m", "gradlab", *command, *outputs], stdout=subprocess.PIPE,
        stderr=subprocess.PIPE, text=True, env=environment, start_new_session=True,
        preexec_fn=sigint_as_at_a_terminal,
    )  # fmt: skip
    try:
        assert _wait_for(spawned.exists, 180), "no worker process was started"
        if ctrl_c:  # as a terminal sends it: to every process of the command
            os.killpg(process.pid, signal.SIGINT)
        else:
            process.send_signal(signal.SIGTERM)
        _, stderr = process.communicate(timeout=60)  # the workers share its stderr
    finally:
        if process.poll() is None:
            process.kill()
            process.communicate()
    assert process.returncode == (130 if ctrl_c else 143)
    assert stderr.splitlines() == [line]
    assert not out.exists() and not (tmp_path / ".r.partial").exists()

# Makes the first import of torch wait a second, marked by a file, so that Ctrl-C lands there.
SLOW_TORCH = """
import os, pathlib, sys, time
class _SlowTorch:
    def find_spec(self, name, path=None, target=None):
        if name == "torch":
            sys.meta_path.remove(self)
            pathlib.Path(os.environ["GRADLAB_TEST_IMPORTING"]).touch()
            time.sleep(1.0)
        return None
sys.meta_path.insert(0, _SlowTorch())
"""


@pytest.mark.skipif(sys.platform == "win32", reason="POSIX process groups")
def test_ctrl_c_while_the_options_import_torch_is_one_line(tmp_path):
    hook = tmp_path / "hook"
    hook.mkdir()
    (hook / "sitecustomize.py").write_text(SLOW_TORCH)
    importing = tmp_path / "importing"
    environment = {**os.environ, "PYTHONPATH": os.pathsep.join([str(hook), *sys.path]),
                   "GRADLAB_TEST_IMPORTING": str(importing)}  # fmt: skip
    process = subprocess.Popen(
        [sys.executable, "-m", "gradlab", "check-equivalence", "gather"], stdout=subprocess.PIPE,
        stderr=subprocess.PIPE, text=True, env=environment, start_new_session=True,
        preexec_fn=sigint_as_at_a_terminal,
    )  # fmt: skip
    try:
        assert _wait_for(importing.exists, 60), "torch was never imported"
        os.killpg(process.pid, signal.SIGINT)
        stdout, stderr = process.communicate(timeout=60)
    finally:
        if process.poll() is None:
            process.kill()
            process.communicate()
    assert (process.returncode, stdout) == (130, "")
    assert stderr.splitlines() == [INTERRUPTED]


def test_plot_on_a_log_that_cannot_be_read_is_one_line_exit_2(tmp_path, capsys, monkeypatch):
    run = _log(tmp_path / "run", GOOD_BYTES)

    def denied(path, **options):
        raise PermissionError(13, "Permission denied", str(path))

    monkeypatch.setattr(monitor_plots, "read_segments", denied)
    code, _, stderr = _run(["plot", str(run), "--out", str(tmp_path / "figures")], capsys)
    assert code == 2
    log = run / "metrics.jsonl"
    assert stderr.splitlines() == [f"gradlab: cannot read the log {str(log)!r}: Permission denied"]


def _fake_report(seen):
    def run_report(staging, **options):
        seen.append(signal.getsignal(signal.SIGTERM))
        staging.mkdir()
        (staging / "results.json").write_text("{}")

    return run_report


def test_report_handles_sigterm_only_while_it_writes(tmp_path, monkeypatch):
    import gradlab.report

    seen = []
    monkeypatch.setattr(gradlab.report, "run_report", _fake_report(seen))
    before = signal.getsignal(signal.SIGTERM)
    assert main(["report", "--only", "audit", "--out", str(tmp_path / "r"), "--no-progress"]) == 0
    assert signal.getsignal(signal.SIGTERM) is before  # the previous handler is back
    assert len(seen) == 1 and seen[0] is not before and callable(seen[0])
    assert (tmp_path / "r" / "results.json").read_text() == "{}"


def test_report_in_a_thread_runs_without_a_signal_handler(tmp_path, monkeypatch):
    """signal.signal works in the main thread only; main() called elsewhere still reports."""
    import threading

    import gradlab.report

    seen = []
    monkeypatch.setattr(gradlab.report, "run_report", _fake_report(seen))
    before = signal.getsignal(signal.SIGTERM)
    codes = []
    argv = ["report", "--only", "audit", "--out", str(tmp_path / "r"), "--no-progress"]
    thread = threading.Thread(target=lambda: codes.append(main(argv)))
    thread.start()
    thread.join(timeout=60)
    assert codes == [0] and seen == [before] and signal.getsignal(signal.SIGTERM) is before
    assert (tmp_path / "r" / "results.json").read_text() == "{}"


def test_plot_refuses_an_unwritable_default_figure_folder_before_reading(
    tmp_path, capsys, monkeypatch
):
    """No --out: RUN_DIR/figures, checked like --out (simulated: root can write anywhere)."""
    import gradlab.paths

    run = _log(tmp_path / "run", GOOD_BYTES)
    monkeypatch.setattr(gradlab.paths, "_writable_folder", lambda folder: folder != run)
    monkeypatch.setattr(monitor_plots, "read_segments", _fail_if_called)
    code, _, stderr = _run(["plot", str(run)], capsys)
    assert code == 2
    assert stderr.splitlines() == [
        "gradlab: RUN_DIR/figures, the default of --out (pass --out FOLDER to write "
        f"elsewhere), must be a folder gradlab can write; got {str(run / 'figures')!r}, and "
        f"nothing can be created in {str(run)!r}"
    ]


def test_plot_of_a_folder_without_a_run_names_the_run_folder_not_the_default_out(
    tmp_path, capsys
):
    """No --out and no run there: the run folder is the mistake, not RUN_DIR/figures."""
    missing = tmp_path / "no_run_here"
    code, _, stderr = _run(["plot", str(missing)], capsys)
    assert code == 2
    assert stderr.splitlines() == [
        "gradlab: RUN_DIR must hold a metrics.jsonl written by gradlab.Monitor; "
        f"got {str(missing)!r}, which does not exist"
    ]
    assert not missing.exists()  # nothing created for a run that is not there


def test_plot_with_out_names_a_missing_run_as_run_dir(tmp_path, capsys):
    """With --out given, a missing run is still named as the command names it (RUN_DIR)."""
    missing = tmp_path / "no_run_here"
    code, _, stderr = _run(["plot", str(missing), "--out", str(tmp_path / "figures")], capsys)
    assert code == 2
    assert stderr.splitlines() == [
        "gradlab: RUN_DIR must hold a metrics.jsonl written by gradlab.Monitor; "
        f"got {str(missing)!r}, which does not exist"
    ]
    assert not (tmp_path / "figures").exists()


def test_plot_names_its_own_flags_for_labels_and_runs(tmp_path, capsys):
    """The command's errors say --label and RUN_DIR, not plot_runs' labels and run_dirs."""
    one, two = _log(tmp_path / "one", GOOD_BYTES), _log(tmp_path / "two", GOOD_BYTES)
    out = ["--out", str(tmp_path / "figures")]
    cases = [
        (["plot", str(one), str(two), "--label", "a", *out],
         "gradlab: --label must give one label per run (2); got 1: ['a']"),
        (["plot", str(one), str(two), "--label", "a", "--label", "a", *out],
         "gradlab: --label must differ from each other; got 'a' more than once in ['a', 'a']"),
        (["plot", str(one), "--label", " ", *out],
         "gradlab: --label must be non-empty strings; got ' ' in [' ']"),
        (["plot", str(one), str(one / "metrics.jsonl"), *out],
         f"gradlab: RUN_DIR must name each run once; got {one.resolve()} more than once in "
         f"{[str(one), str(one / 'metrics.jsonl')]!r}"),
    ]  # fmt: skip
    for argv, line in cases:
        code, stdout, stderr = _run(argv, capsys)
        assert (code, stdout, stderr.splitlines()) == (2, "", [line])
    assert not (tmp_path / "figures").exists()  # refused before anything was drawn


@pytest.mark.parametrize(("command", "option"), [(["audit"], "--json"),
                                                 (["audit"], "--markdown"),
                                                 (["check-equivalence", "accumulation"], "--json")])
def test_an_output_file_ending_in_a_separator_is_refused_as_a_folder(tmp_path, capsys, command,
                                                                     option):
    # argparse's Path dropped the separator: `--json DIR/` wrote a file named DIR
    wanted = f"{tmp_path / 'records'}/"
    code, _, err = _run([*command, option, wanted], capsys)
    assert code == 2
    assert err == (f"gradlab {command[0]}: error: argument {option}: must be a file path; got "
                   f"{wanted!r}, which names a folder (it ends in a separator): add the file's "
                   f"name (see gradlab {command[0]} --help)\n")
    assert list(tmp_path.iterdir()) == []


def test_an_interrupted_plot_says_what_it_left_and_the_next_plot_replaces_it(
    tmp_path, capsys, monkeypatch
):
    """Interrupted after its first figure, plot said "nothing was written", left that figure
    unlisted, and the next plot refused it as a file gradlab did not write."""
    from matplotlib.figure import Figure

    run = _log(tmp_path / "run", [json.dumps({"header": {}}).encode(),
                                  json.dumps({"step": 0, "loss": 0.5,
                                              "embedding_norm_mean": 1.0}).encode()])
    figures = run / "figures"
    save = Figure.savefig
    saved = []

    def interrupted_at_the_second(self, path, *args, **kwargs):
        if saved:
            raise KeyboardInterrupt
        saved.append(Path(path).name)
        return save(self, path, *args, **kwargs)

    monkeypatch.setattr(Figure, "savefig", interrupted_at_the_second)
    code, out, err = _run(["plot", str(run)], capsys)
    assert (code, out) == (130, "")
    assert err == (f"gradlab: interrupted; figures drawn before it stay in {str(figures)!r}, "
                   "listed as gradlab's: the next plot there replaces them\n")
    assert [path.name for path in figures.glob("*.png")] == saved
    monkeypatch.setattr(Figure, "savefig", save)
    code, out, err = _run(["plot", str(run)], capsys)
    assert (code, err) == (0, "")
    written = sorted(line.removeprefix("wrote ") for line in out.splitlines())
    assert sorted(map(str, figures.glob("*.png"))) == written
    assert len(written) == 3  # loss, embeddings and the overview
