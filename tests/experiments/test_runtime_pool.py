"""run_tasks on more than one worker, in process: the pool's executor stood in by threads.

``concurrent.futures.ProcessPoolExecutor`` is replaced by a thread pool that records how it was
built and shut down and holds stand-in worker processes, so the pool's own code (task order,
errors, progress lines, one shared pool per block, the turn handed on while waiting, every
worker ended on a failure) runs in milliseconds. One test in test_runtime_turns.py spawns real
workers; test_parallel.py and test_runtime_signals.py have the rest.
"""

from __future__ import annotations

import concurrent.futures
import multiprocessing
import re
import signal
import threading
import time
import types

import pytest
import torch

from gradlab import GradlabError
from gradlab.experiments.runtime import (
    StudyError,
    parent_turn,
    run_tasks,
    stop_starting_workers,
    study_workers,
)
from gradlab.progress import progress_mode, set_progress_mode


class _Process:
    """A stand-in worker process: records what was done to it; ``stubborn`` ignores terminate."""

    def __init__(self, log: list, name: str, stubborn: bool = False):
        self.log, self.name, self.alive, self.stubborn = log, name, True, stubborn

    def terminate(self):
        self.log.append(("terminate", self.name))
        self.alive = self.stubborn

    def kill(self):
        self.log.append(("kill", self.name))
        self.alive = False

    def join(self, timeout=None):
        self.log.append(("join", self.name, timeout))

    def is_alive(self):
        return self.alive


class _Thread:
    def __init__(self, log):
        self.log = log

    def join(self, timeout=None):
        self.log.append(("join manager", timeout))


@pytest.fixture
def pools(monkeypatch):
    """Every executor built, as ``(keywords, executor)``; their workers' log in ``pools.log``."""
    built: list = []
    log: list = []

    class Executor(concurrent.futures.ThreadPoolExecutor):
        def __init__(self, max_workers, mp_context, initializer):
            super().__init__(max_workers=max_workers)
            self.keywords = {"max_workers": max_workers,
                             "context": mp_context.get_start_method(),
                             "initializer": initializer}  # fmt: skip
            self.shutdowns: list = []
            number = len(built)
            self._processes = {i: _Process(log, f"pool {number} worker {i}")
                               for i in range(max_workers)}  # fmt: skip
            self._executor_manager_thread = _Thread(log)
            built.append(self)

        def shutdown(self, wait=True, *, cancel_futures=False):
            self.shutdowns.append({"wait": wait, "cancel_futures": cancel_futures})
            super().shutdown(wait=wait, cancel_futures=cancel_futures)

    monkeypatch.setattr(concurrent.futures, "ProcessPoolExecutor", Executor)

    return types.SimpleNamespace(built=built, log=log)


@pytest.fixture
def lines():
    set_progress_mode("lines")
    yield
    set_progress_mode("auto")


@pytest.fixture
def quiet():
    set_progress_mode("off")
    yield
    set_progress_mode("auto")


def _late(value, delay):
    time.sleep(delay)
    return value * value


def _fails_on_three(value):
    if value == 3:
        raise ValueError("three is not allowed")
    return value


@pytest.mark.slow
def test_results_come_back_in_task_order_on_a_spawn_pool_of_the_asked_size(pools, quiet):
    # the first task finishes last
    tasks = [(2, 0.4), (3, 0.0), (4, 0.0)]
    assert run_tasks(_late, tasks, stage="s", names=["a", "b", "c"], workers=2) == [4, 9, 16]
    (executor,) = pools.built
    assert executor.keywords["max_workers"] == 2
    assert executor.keywords["context"] == "spawn"
    assert executor.shutdowns == [{"wait": True, "cancel_futures": False}]  # its own: closed
    assert pools.log == []  # a pool that finished ends nothing by force


def test_never_more_workers_than_tasks(pools, quiet):
    assert run_tasks(abs, [(-1,), (-2,)], stage="s", names=["a", "b"], workers=8) == [1, 2]
    assert run_tasks(abs, [(-5,)], stage="s", names=["a"], workers=8) == [5]
    assert [e.keywords["max_workers"] for e in pools.built] == [2]  # one task: in this process


def test_a_worker_runs_one_torch_thread_without_progress_and_leaves_ctrl_c_to_the_parent(pools,
                                                                                        quiet):
    run_tasks(abs, [(1,), (2,)], stage="s", names=["a", "b"], workers=2)
    start = pools.built[0].keywords["initializer"]
    threads, handler = torch.get_num_threads(), signal.getsignal(signal.SIGINT)
    torch.set_num_threads(3)
    set_progress_mode("lines")
    try:
        start()  # what a worker runs first
        assert torch.get_num_threads() == 1
        assert progress_mode() == "off"
        assert signal.getsignal(signal.SIGINT) is signal.SIG_IGN
    finally:
        signal.signal(signal.SIGINT, handler)
        torch.set_num_threads(threads)


def test_a_failing_task_names_its_seed_and_part_and_every_worker_is_ended(pools, quiet):
    with pytest.raises(StudyError) as raised:
        run_tasks(_fails_on_three, [(1,), (3,), (5,)], stage="odd study",
                  names=["seed 1", "seed 3", "seed 5"], parts=["x", "y", "z"], workers=2)
    assert str(raised.value) == "odd study, seed 3 (y) failed: ValueError: three is not allowed"
    assert isinstance(raised.value.__cause__, ValueError)
    (executor,) = pools.built
    assert executor.shutdowns == [{"wait": False, "cancel_futures": True}]
    workers = ["pool 0 worker 0", "pool 0 worker 1"]
    assert pools.log == [*(("terminate", w) for w in workers),
                         *(("join", w, 10.0) for w in workers), ("join manager", 10.0)]


def test_a_worker_that_ignores_terminate_is_killed(pools, quiet, monkeypatch):
    # a child started by the pool after it was built, that survives terminate
    stubborn = _Process(pools.log, "late child", stubborn=True)
    children = []
    monkeypatch.setattr(multiprocessing, "active_children", lambda: list(children))
    def start_child_and_fail(value):
        children.append(stubborn)
        return _fails_on_three(value)

    with pytest.raises(StudyError), study_workers(2):
        run_tasks(start_child_and_fail, [(3,)] * 2, stage="s", names=["a", "b"])
    assert ("kill", "late child") in pools.log
    assert pools.log.index(("kill", "late child")) > pools.log.index(("terminate", "late child"))
    assert pools.log.count(("join", "late child", 10.0)) == 2
    assert ("kill", "pool 0 worker 0") not in pools.log


def test_a_bad_input_in_a_task_stays_a_gradlab_error_naming_it(pools, quiet):
    from gradlab.experiments.runtime import check_workers

    with pytest.raises(GradlabError, match=r"^s, seed 2: workers must be a whole number"):
        run_tasks(check_workers, [(1,), (0,)], stage="s", names=["seed 1", "seed 2"], workers=2)


def test_one_pool_serves_every_study_of_the_block_and_ends_with_it(pools, quiet):
    with study_workers(3):
        assert run_tasks(abs, [(-1,), (-2,)], stage="s", names=["a", "b"]) == [1, 2]
        assert run_tasks(abs, [(-3,), (-4,), (-5,)], stage="t", names=["a", "b", "c"]) == [3, 4, 5]
        assert len(pools.built) == 1 and pools.built[0].shutdowns == []
    (executor,) = pools.built
    assert executor.keywords["max_workers"] == 3
    assert executor.shutdowns == [{"wait": True, "cancel_futures": False}]
    assert pools.log == []


def test_a_study_that_asks_for_more_workers_than_the_block_has_gets_its_own_pool(pools, quiet):
    with study_workers(2):
        assert run_tasks(abs, [(-1,), (-2,), (-3,)], stage="s", names=["a", "b", "c"],
                         workers=3) == [1, 2, 3]  # fmt: skip
        assert [e.keywords["max_workers"] for e in pools.built] == [3]
        assert pools.built[0].shutdowns == [{"wait": True, "cancel_futures": False}]
        assert run_tasks(abs, [(-1,), (-2,)], stage="s", names=["a", "b"], workers=2) == [1, 2]
    assert [e.keywords["max_workers"] for e in pools.built] == [3, 2]


def test_after_a_failure_the_blocks_pool_starts_nothing_new(pools, quiet):
    with study_workers(2):
        with pytest.raises(StudyError):
            run_tasks(_fails_on_three, [(3,), (4,)], stage="s", names=["a", "b"])
        with pytest.raises(StudyError, match=r"^the worker processes were stopped \(another "
                                             r"study failed, or the run was interrupted\)$"):
            run_tasks(abs, [(1,), (2,)], stage="t", names=["a", "b"])
        assert run_tasks(abs, [(-4,)], stage="u", names=["a"]) == [4]  # one task: here
    assert len(pools.built) == 1


def test_after_starts_are_stopped_the_blocks_pool_starts_nothing_and_its_tasks_run_nowhere(
    pools, quiet
):
    ran = []
    with study_workers(2):
        stop_starting_workers(1.0)
        with pytest.raises(StudyError, match=r"^the worker processes were stopped"):
            run_tasks(ran.append, [(1,), (2,)], stage="s", names=["a", "b"])
    assert pools.built == [] and ran == []


def _held_start(monkeypatch):
    """A thread running tasks whose workers' start (the executor's construction stands for it:
    spawn, then send the work) goes on only when ``release`` is set; ``entered`` once under way.
    """
    entered, release, order = threading.Event(), threading.Event(), []
    built = concurrent.futures.ProcessPoolExecutor

    def held(*arguments, **keywords):
        entered.set()
        release.wait(10)
        order.append("started")
        return built(*arguments, **keywords)

    monkeypatch.setattr(concurrent.futures, "ProcessPoolExecutor", held)
    starting = threading.Thread(
        target=run_tasks, args=(abs, [(1,), (2,)]), kwargs={"stage": "s", "names": ["a", "b"]}
    )
    return types.SimpleNamespace(thread=starting, entered=entered, release=release, order=order)


def test_stopping_starts_waits_for_a_thread_that_is_starting_workers(pools, quiet, monkeypatch):
    start = _held_start(monkeypatch)
    with study_workers(2):
        start.thread.start()
        assert start.entered.wait(10)
        stopper = threading.Thread(target=lambda: (stop_starting_workers(10.0),
                                                   start.order.append("stopped")))  # fmt: skip
        stopper.start()
        time.sleep(0.2)
        assert start.order == []  # the stop waits while the start is under way
        start.release.set()
        stopper.join(10)
        start.thread.join(10)
    assert start.order == ["started", "stopped"]


def test_stopping_starts_gives_up_waiting_after_its_timeout(pools, quiet, monkeypatch):
    start = _held_start(monkeypatch)
    with study_workers(2):
        start.thread.start()
        assert start.entered.wait(10)
        stop_starting_workers(0.2)
        still_starting = start.thread.is_alive()  # the stop came back while the start is held
        start.release.set()
        start.thread.join(10)
    assert still_starting

def test_an_exception_in_the_block_ends_its_workers_at_once(pools, quiet):
    with pytest.raises(KeyError), study_workers(2):
        run_tasks(abs, [(1,), (2,)], stage="s", names=["a", "b"])
        raise KeyError
    (executor,) = pools.built
    assert executor.shutdowns == [{"wait": False, "cancel_futures": True}]
    assert ("terminate", "pool 0 worker 1") in pools.log
    with study_workers(2):  # a block that used no worker ends nothing
        pass
    assert len(pools.built) == 1


@pytest.mark.slow
def test_progress_lines_say_the_worker_processes_and_each_finished_group(pools, lines, capsys):
    tasks = [(1, 0.3), (2, 0.0), (3, 0.0)]
    run_tasks(_late, tasks, stage="toy", names=["a", "b", "a"], unit="run", detail="squared",
              workers=2)  # fmt: skip
    found = capsys.readouterr().err.splitlines()
    patterns = [r"gradlab: toy: 2 runs, 3 tasks on 2 worker processes \.\.\.",
                r"gradlab: toy: b done \(squared, \d+ s; 1 of 2 runs done\)",
                r"gradlab: toy: a done \(squared, \d+ s; 2 of 2 runs done\)",
                r"gradlab: toy done \(2 runs, \d+ s\)"]  # fmt: skip
    assert len(found) == len(patterns), found
    for pattern, line in zip(patterns, found, strict=True):
        assert re.fullmatch(pattern, line), (pattern, line)


def test_a_study_waiting_for_its_workers_hands_the_turn_on(pools, quiet):
    # Inside its turn, a study waits for tasks that finish only once another thread has had a
    # turn: they would wait in vain if the turn were not handed on.
    other_ran = threading.Event()

    def other():
        with parent_turn():
            other_ran.set()

    results = []

    def study():
        with parent_turn():
            threading.Thread(target=other, daemon=True).start()
            results.extend(run_tasks(other_ran.wait, [(5,), (5,)], stage="s", names=["a", "b"],
                                     workers=2))  # fmt: skip
            results.append(other_ran.is_set())

    thread = threading.Thread(target=study, daemon=True)
    thread.start()
    thread.join(timeout=30)
    assert results == [True, True, True]


class _Bar:
    """A stand-in progress bar: how it was made and what was said to it."""

    def __init__(self, log, **keywords):
        self.log = log
        log.append(("bar", keywords))

    def update(self, n=1):
        self.log.append(("update", n))

    def close(self):
        self.log.append(("close",))


@pytest.mark.parametrize("workers", [1, 2])
def test_on_a_terminal_one_bar_counts_the_finished_groups(pools, monkeypatch, capsys, workers):
    from gradlab.experiments import runtime

    log: list = []
    monkeypatch.setattr(runtime, "progress", lambda **keywords: _Bar(log, **keywords))
    set_progress_mode("bar")
    try:
        assert run_tasks(abs, [(-1,), (-2,), (-3,)], stage="toy", names=["a", "b", "a"],
                         unit="run", workers=workers) == [1, 2, 3]  # fmt: skip
    finally:
        set_progress_mode("auto")
    assert log == [("bar", {"total": 2, "desc": "toy", "unit": "run"}), ("update", 1),
                   ("update", 1), ("close",)]  # fmt: skip
    assert capsys.readouterr().err == ""  # the bar, not lines


@pytest.mark.parametrize("bad", [True, False, 2.0, "2", 0, 9])
def test_workers_must_be_a_whole_number_from_one_to_eight_not_a_bool(bad):
    from gradlab.experiments.runtime import check_workers

    with pytest.raises(GradlabError, match=rf"^workers must be a whole number from 1 to 8; got "
                                           rf"{re.escape(repr(bad))}$"):  # fmt: skip
        check_workers(bad)


@pytest.mark.slow
def test_a_groups_seconds_add_up_its_tasks_run_side_by_side(pools, lines, capsys):
    run_tasks(_late, [(1, 0.3), (2, 0.3)], stage="nap", names=["seed 0", "seed 0"], workers=2)
    done = capsys.readouterr().err.splitlines()[1]
    # 0.6 s in the group's two tasks, rounded: 1 (one task alone would say 0)
    assert re.fullmatch(r"gradlab: nap: seed 0 done \(1 s; 1 of 1 seed done\)", done), done
