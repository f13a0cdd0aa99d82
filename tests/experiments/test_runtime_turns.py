"""The studies' runtime: threads, worker settings, the parent's turn, errors and
progress lines of run_tasks with one worker (fast: no worker process but in the slow test)."""

from __future__ import annotations

import io
import os
import re
import sys
import threading
import time

import pytest
import torch

from gradlab import GradlabError
from gradlab.experiments.runtime import (
    MAX_WORKERS,
    StudyError,
    check_workers,
    computed_once,
    current_workers,
    default_workers,
    parent_turn,
    run_tasks,
    study_threads,
    study_workers,
    usable_cores,
)
from gradlab.progress import set_progress_mode


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


def _fullmatch(patterns: list[str], text: str) -> None:
    found = text.splitlines()
    assert len(found) == len(patterns), found
    for pattern, line in zip(patterns, found, strict=True):
        assert re.fullmatch(pattern, line), (pattern, line)


def test_study_threads_sets_cpu_threads_and_restores_them_even_after_an_error():
    before = torch.get_num_threads()
    wanted = 3 if before != 3 else 2
    with study_threads("cpu:0", wanted):
        assert torch.get_num_threads() == wanted
    assert torch.get_num_threads() == before
    with pytest.raises(ValueError), study_threads("cpu"):
        assert torch.get_num_threads() == 1
        raise ValueError
    assert torch.get_num_threads() == before
    with study_threads("cuda", wanted):  # not a CPU: the setting is left alone
        assert torch.get_num_threads() == before


def test_the_default_workers_are_the_usable_cores_capped():
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
    assert usable_cores() == max(1, cores)
    assert default_workers() == min(max(1, cores), 8)


@pytest.mark.parametrize("good", [1, 2, MAX_WORKERS])
def test_whole_numbers_from_one_to_eight_are_accepted(good):
    assert check_workers(good) == good


def test_the_refusal_names_the_argument_it_was_given_as():
    expected = r"^--workers must be a whole number from 1 to 8; got 0$"
    with pytest.raises(GradlabError, match=expected):
        check_workers(0, "--workers")


def test_study_workers_sets_the_workers_for_the_block_and_restores_them(quiet):
    assert current_workers() == 1
    with study_workers(3):
        assert current_workers() == 3
        with study_workers(1):
            assert current_workers() == 1
        assert current_workers() == 3
    assert current_workers() == 1
    with pytest.raises(KeyError), study_workers(2):
        raise KeyError
    assert current_workers() == 1


def test_run_tasks_takes_the_blocks_workers_but_never_more_than_tasks(lines, capsys):
    with study_workers(4):
        assert run_tasks(abs, [(-3,)], stage="one", names=["seed 0"]) == [3]
    assert run_tasks(abs, [], stage="none", names=[]) == []
    _fullmatch([
        r"gradlab: one: 1 seed in this process \.\.\.",
        r"gradlab: one: seed 0 done \(\d+ s; 1 of 1 seed done\)",
        r"gradlab: one done \(1 seed, \d+ s\)",
        r"gradlab: none: 0 seeds in this process \.\.\.",
        r"gradlab: none done \(0 seeds, \d+ s\)",
    ], capsys.readouterr().err)  # fmt: skip


def test_progress_lines_count_groups_in_their_unit(lines, capsys):
    tasks = [(1,), (-2,), (3,)]
    assert run_tasks(abs, tasks, stage="toy", names=["a", "b", "a"], unit="run",
                     detail="trained", workers=1) == [1, 2, 3]  # fmt: skip
    _fullmatch([
        r"gradlab: toy: 2 runs, 3 tasks in this process \.\.\.",
        r"gradlab: toy: b done \(trained, \d+ s; 1 of 2 runs done\)",
        r"gradlab: toy: a done \(trained, \d+ s; 2 of 2 runs done\)",
        r"gradlab: toy done \(2 runs, \d+ s\)",
    ], capsys.readouterr().err)  # fmt: skip


def _sleep_then(value: float) -> float:
    time.sleep(value)
    return value


@pytest.mark.slow
def test_a_groups_seconds_add_up_its_tasks(lines, capsys):
    run_tasks(_sleep_then, [(0.6,), (0.6,)], stage="nap", names=["seed 0", "seed 0"],
              workers=1)  # fmt: skip
    done = capsys.readouterr().err.splitlines()[1]
    seconds = int(re.search(r"\((\d+) s;", done).group(1))
    assert seconds >= 1  # 1.2 s slept in the group, rounded (a single task would say 1 or 0)


def test_no_progress_is_said_when_progress_is_off(quiet, capsys):
    assert run_tasks(abs, [(-1,)], stage="s", names=["seed 0"], workers=1) == [1]
    assert capsys.readouterr().err == ""


def test_names_and_parts_must_match_the_tasks_and_say_their_counts():
    with pytest.raises(GradlabError, match=r"^names and parts must hold one entry per task \(2\); "
                                           r"got 2 names and 1 parts$"):  # fmt: skip
        run_tasks(abs, [(1,), (2,)], stage="s", names=["a", "b"], parts=["x"])
    with pytest.raises(GradlabError, match=r"\(1\); got 2 names and 1 parts$"):
        run_tasks(abs, [(1,)], stage="s", names=["a", "b"])


def _needs(module: str) -> None:
    raise ModuleNotFoundError(f"No module named {module!r}")


def test_a_missing_dependency_stays_itself_with_the_task_in_a_note(quiet):
    with pytest.raises(ModuleNotFoundError) as raised:
        run_tasks(_needs, [("wandb",)], stage="logging study", names=["seed 1"], parts=["W&B"],
                  workers=1)  # fmt: skip
    assert raised.value.__notes__ == ["in logging study, seed 1 (W&B)"]


def test_a_failure_names_the_task_and_keeps_its_cause(quiet):
    with pytest.raises(StudyError) as raised:
        run_tasks(int, [("1",), ("x",)], stage="parse", names=["seed 0", "seed 1"], workers=1)
    assert str(raised.value) == ("parse, seed 1 failed: ValueError: invalid literal for int() "
                                 "with base 10: 'x'")  # fmt: skip
    assert isinstance(raised.value.__cause__, ValueError)
    with pytest.raises(GradlabError) as bad:
        run_tasks(check_workers, [(0,)], stage="check", names=["seed 2"], workers=1)
    assert str(bad.value).startswith("check, seed 2: workers must be")
    assert isinstance(bad.value.__cause__, GradlabError)


def test_a_task_that_fails_stops_the_tasks_after_it(quiet):
    calls = []

    def note(value):
        calls.append(value)
        return int(value)

    with pytest.raises(StudyError):
        run_tasks(note, [("1",), ("x",), ("3",)], stage="s", names=["a", "b", "c"], workers=1)
    assert calls == ["1", "x"]


def _thread(target) -> threading.Thread:
    thread = threading.Thread(target=target, daemon=True)
    thread.start()
    return thread


@pytest.mark.slow
def test_one_thread_at_a_time_runs_inside_parent_turn():
    inside, release, got_in = threading.Event(), threading.Event(), threading.Event()

    def first():
        with parent_turn():
            inside.set()
            assert release.wait(timeout=30)

    def second():
        with parent_turn():
            got_in.set()

    one = _thread(first)
    assert inside.wait(timeout=30)
    two = _thread(second)
    assert not got_in.wait(timeout=0.5)  # the first still holds the turn
    release.set()
    assert got_in.wait(timeout=30)
    one.join(timeout=30), two.join(timeout=30)
    with parent_turn():  # the turn is free again, and can be taken twice in a row
        pass
    with parent_turn():
        pass


@pytest.mark.slow
def test_a_thread_waiting_for_a_shared_result_hands_the_turn_on_and_takes_it_back():
    started, release = threading.Event(), threading.Event()

    @computed_once
    def measure(setting):
        started.set()
        assert release.wait(timeout=30)
        return setting * 2

    # The first call runs outside any turn; a section waiting for it inside its turn must let
    # another section run meanwhile, and hold the turn again when it goes on.
    computing = _thread(lambda: measure(21))
    assert started.wait(timeout=30)
    events: list = []
    waiting, third_ran, second_left = threading.Event(), threading.Event(), threading.Event()

    def second():
        with parent_turn():
            waiting.set()
            events.append(("second got", measure(21)))
            time.sleep(0.3)  # holding the turn again: the fourth cannot run now
            events.append("second left")
        second_left.set()

    def third():
        with parent_turn():
            events.append("third ran")
        third_ran.set()

    two = _thread(second)
    assert waiting.wait(timeout=30)
    three = _thread(third)
    assert third_ran.wait(timeout=30)  # ran while the second waited (it would hang otherwise)
    release.set()
    while ("second got", 42) not in events:
        time.sleep(0.01)

    def fourth():
        with parent_turn():
            events.append("fourth ran")

    four = _thread(fourth)
    assert second_left.wait(timeout=30)
    for thread in (computing, two, three, four):
        thread.join(timeout=30)
    assert events == ["third ran", ("second got", 42), "second left", "fourth ran"]


@pytest.mark.slow
def test_waiting_for_a_shared_result_after_a_turn_was_left_keeps_no_turn():
    # After a parent_turn block this thread holds no turn: waiting must not hand one on.
    with parent_turn():
        pass
    started, release = threading.Event(), threading.Event()

    @computed_once
    def measure(setting):
        started.set()
        assert release.wait(timeout=30)
        return setting

    computing = _thread(lambda: measure("x"))
    assert started.wait(timeout=30)
    threading.Timer(0.7, release.set).start()
    assert measure("x") == "x"  # a second caller outside any turn: waits, then shares
    computing.join(timeout=30)
    with parent_turn():  # and the turn is still free
        pass


def test_usable_cores_read_the_affinity_mask_else_the_core_count(monkeypatch):
    if hasattr(os, "sched_getaffinity"):
        monkeypatch.setattr(os, "sched_getaffinity", lambda pid: {5})
        monkeypatch.setattr(os, "cpu_count", lambda: 6)
        assert usable_cores() == 1
        monkeypatch.delattr(os, "sched_getaffinity")
    for counted, expected in [(3, 3), (1, 1), (None, 1)]:
        monkeypatch.setattr(os, "cpu_count", lambda counted=counted: counted)
        assert usable_cores() == expected


@pytest.mark.slow
def test_progress_lines_reach_a_buffered_log_at_once(lines, monkeypatch):
    raw = io.BytesIO()
    log = io.TextIOWrapper(raw, encoding="utf-8")  # buffered: nothing reaches raw unflushed
    monkeypatch.setattr(sys, "stderr", log)
    run_tasks(abs, [(-1,)], stage="logged", names=["seed 0"], workers=1)
    assert raw.getvalue().decode().count("gradlab: logged") == 3


@pytest.mark.slow
def test_a_groups_seconds_stay_within_the_run(lines, capsys):
    started = time.perf_counter()
    run_tasks(_sleep_then, [(0.6,)], stage="nap", names=["seed 0"], workers=1)
    elapsed = time.perf_counter() - started
    for line in capsys.readouterr().err.splitlines()[1:]:
        seconds = int(re.search(r"(\d+) s[;)]", line).group(1))
        assert seconds <= elapsed + 0.5, line  # a duration of this run, rounded


@pytest.mark.slow
def test_after_a_failed_study_the_blocks_pool_starts_nothing_new(quiet):
    # spawns two workers (seconds): the pool's stop is what the other tests cannot reach
    with study_workers(2):
        with pytest.raises(StudyError, match=r"^s, b failed: ValueError"):
            run_tasks(int, [("1",), ("x",)], stage="s", names=["a", "b"])
        with pytest.raises(StudyError, match=r"^the worker processes were stopped"):
            run_tasks(int, [("2",), ("3",)], stage="t", names=["a", "b"])
        assert run_tasks(int, [("4",)], stage="u", names=["a"]) == [4]  # one task: here
