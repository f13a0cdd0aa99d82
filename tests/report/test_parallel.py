"""Studies on worker processes: the same numbers as one process, task order, errors, signals."""

from __future__ import annotations

import contextlib
import os
import re
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from gradlab import GradlabError
from gradlab.experiments import digit_scenes
from gradlab.experiments.runtime import StudyError, check_workers, run_tasks, study_workers
from gradlab.progress import set_progress_mode
from tests.helpers.processes import descendants, sigint_as_at_a_terminal

ROOT = Path(__file__).resolve().parents[2]


def _late_square(value: int, delay: float) -> int:
    """A task for the pool (module-level: a spawned worker imports it)."""
    time.sleep(delay)
    return value * value


def _record_and_sleep(folder: str) -> None:
    """A task that writes its worker's pid into ``folder`` and sleeps (to be interrupted)."""
    (Path(folder) / str(os.getpid())).write_text(str(os.getpid()))
    time.sleep(120)


def _refuses(width: int) -> int:
    if width < 0:
        raise GradlabError("width must be positive")
    return width


def _fails_on_three(value: int) -> int:
    if value == 3:
        raise ValueError("three is not allowed")
    return value


@pytest.fixture
def quiet():
    set_progress_mode("off")
    yield
    set_progress_mode("auto")


@pytest.mark.slow
def test_a_small_study_on_two_workers_equals_the_serial_run(quiet):
    # Two seeds, one encoder, two losses: every task rebuilds its seed's scenes, backbone and
    # batches; the merged dicts must agree to the last bit.
    options = {"quick": True, "seeds": (0, 1), "encoders": ("VSE++",),
               "losses": ("SmoothAP", "NT-Xent")}  # fmt: skip
    serial = digit_scenes.measure(workers=1, **options)
    parallel = digit_scenes.measure(workers=2, **options)
    assert parallel == serial
    # The seeds differ, so equality is not a property of the data alone.
    recall = serial["runs"]["VSE++"]["SmoothAP"]["recall"]["rsum"]
    assert recall[0] != recall[1]


@pytest.mark.slow
def test_results_come_back_in_task_order_not_completion_order(quiet):
    # The first task sleeps longest, so it finishes last on two workers.
    tasks = [(2, 1.5), (3, 0.0), (4, 0.0)]
    with study_workers(2):
        results = run_tasks(_late_square, tasks, stage="squares", names=["a", "b", "c"])
    assert results == [4, 9, 16]


@pytest.mark.slow
@pytest.mark.parametrize("workers", [1, 2])
def test_a_failing_task_is_the_study_error_with_its_seed_named(quiet, workers):
    names = [f"seed {value}" for value in (1, 3, 5)]
    with pytest.raises(StudyError) as raised:
        run_tasks(_fails_on_three, [(1,), (3,), (5,)], stage="odd study", names=names,
                  parts=["x", "y", "z"], workers=workers)  # fmt: skip
    message = str(raised.value)
    assert message == "odd study, seed 3 (y) failed: ValueError: three is not allowed"


@pytest.mark.parametrize("bad", [0, 9, -1, 2.0, "2", True, None])
def test_workers_outside_one_to_eight_are_refused(bad):
    expected = f"workers must be a whole number from 1 to 8; got {re.escape(repr(bad))}$"
    with pytest.raises(GradlabError, match=expected):
        check_workers(bad)
    with pytest.raises(GradlabError, match="workers"):
        with study_workers(bad):
            pass


def test_bad_input_inside_a_task_stays_a_gradlab_error_with_its_seed(quiet):
    with pytest.raises(GradlabError, match=r"^odd study, seed 2: width must be positive$"):
        run_tasks(_refuses, [(1,), (-1,)], stage="odd study", names=["seed 1", "seed 2"],
                  workers=1)  # fmt: skip


def test_names_must_match_the_tasks():
    with pytest.raises(GradlabError, match="one entry per task"):
        run_tasks(abs, [(1,), (2,)], stage="s", names=["seed 0"])


SCRIPT = textwrap.dedent(
    """
    import faulthandler, os, signal, sys, time
    from pathlib import Path
    sys.path.insert(0, {root!r})
    from gradlab.experiments.runtime import run_tasks
    from gradlab.progress import set_progress_mode
    from tests.report.test_parallel import _record_and_sleep

    def stop(signum, frame):
        raise KeyboardInterrupt

    signal.signal(signal.SIGTERM, stop)  # as gradlab report handles SIGTERM
    faulthandler.register(signal.SIGUSR1, all_threads=True)  # the test's evidence of a hang
    set_progress_mode("off")
    folder = Path({folder!r})
    try:
        run_tasks(_record_and_sleep, [({folder!r},)] * 2, stage="sleep",
                  names=["seed 0", "seed 1"], workers=2)
    except KeyboardInterrupt:
        print("stopped", flush=True)
    """
)


@pytest.mark.slow
@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="/proc is Linux's")
@pytest.mark.parametrize("signum", [signal.SIGINT, signal.SIGTERM])
def test_a_signal_stops_the_pool_and_leaves_no_worker_behind(tmp_path, signum):
    # Each task writes its worker's pid and sleeps; the signal goes to the parent only (as
    # `kill` sends it), which must end both workers before it returns.
    script = SCRIPT.format(root=str(ROOT), folder=str(tmp_path))
    process = subprocess.Popen([sys.executable, "-c", script], stdout=subprocess.PIPE,
                               stderr=subprocess.PIPE, text=True,
                               preexec_fn=sigint_as_at_a_terminal)  # fmt: skip
    workers: set[int] = set()
    survivors: list[int] = []
    stdout, stderr = "", "the stopped parent did not exit within 90 s"
    exited = False
    try:
        deadline = time.monotonic() + 60  # spawning two workers took up to 26 s under load
        while len(list(tmp_path.iterdir())) < 2 and time.monotonic() < deadline:
            time.sleep(0.1)
        workers = {int(path.name) for path in tmp_path.iterdir()}
        assert len(workers) == 2, "the two workers never started their tasks"
        process.send_signal(signum)
        with contextlib.suppress(subprocess.TimeoutExpired):
            # generous: under a loaded full suite, terminating and joining spawned workers can
            # take long; a parent still at work is reported as such, not as leaked workers
            stdout, stderr = process.communicate(timeout=90)
            exited = True
        if not exited:  # the evidence: its signal state, then every thread's stack
            stderr = f"the stopped parent did not exit within 90 s; {_signal_state(process.pid)}"
            process.send_signal(signal.SIGUSR1)
            with contextlib.suppress(subprocess.TimeoutExpired):
                stderr += "\n" + process.communicate(timeout=5)[1]
    finally:
        survivors = [pid for pid in workers if _alive(pid)]
        for pid in {*survivors, *descendants(process.pid)}:  # a failed test leaves none behind
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
        if process.poll() is None:
            process.kill()
        process.wait(timeout=30)  # not communicate: a surviving grandchild may hold the pipes
    assert exited, stderr
    assert survivors == [], f"workers {survivors} outlived the stopped pool"
    assert stdout == "stopped\n", stderr
    assert "Traceback" not in stderr, stderr


def _signal_state(pid: int) -> str:
    """The blocked, ignored and caught signals of ``pid`` and where each of its threads waits."""
    with contextlib.suppress(OSError):
        status = Path(f"/proc/{pid}/status").read_text().splitlines()
        masks = [line for line in status if line.startswith(("SigPnd", "ShdPnd", "SigBlk",
                                                              "SigIgn", "SigCgt"))]  # fmt: skip
        threads = [f"{task.name}:{(task / 'wchan').read_text()}"
                   for task in Path(f"/proc/{pid}/task").iterdir()]  # fmt: skip
        return f"{' '.join(masks)}; threads {threads}"
    return "its /proc entry is gone"


def _alive(pid: int) -> bool:
    """Whether ``pid`` runs (a zombie or a reused pid of another program does not count)."""
    try:
        status = Path(f"/proc/{pid}/status").read_text()
    except (FileNotFoundError, ProcessLookupError):
        return False
    state = next(line for line in status.splitlines() if line.startswith("State:"))
    return "Z" not in state.split()[1] and "python" in Path(f"/proc/{pid}/cmdline").read_text()


@pytest.mark.slow
def test_a_worker_has_one_torch_thread_and_no_progress_output(quiet):
    import torch

    from gradlab.progress import progress_mode

    with study_workers(2):
        threads = run_tasks(torch.get_num_threads, [(), ()], stage="threads", names=["a", "b"])
        modes = run_tasks(progress_mode, [(), ()], stage="modes", names=["a", "b"])
    assert threads == [1, 1]
    assert modes == ["off", "off"]
