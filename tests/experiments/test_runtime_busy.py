"""When other processes hold the cores that torch's threads would time on, plan and the
studies say so first (busy_machine_note): the rule, read off by hand case by case."""

import os

import pytest

from gradlab.experiments import runtime
from gradlab.experiments.runtime import busy_machine_note


@pytest.mark.parametrize(("threads", "cores", "load", "busy"), [
    (2, 2, 2.7, True),   # two threads, two cores, nearly three jobs beside: busy
    (2, 2, 1.0, True),   # one job beside: one thread loses its core
    (2, 2, 0.99, False),  # under one job's load: nothing said
    (2, 4, 2.0, False),  # two free cores for two threads
    (2, 4, 2.5, True),   # 2.5 + 2 > 4
    (1, 2, 5.0, False),  # one thread waits for no other
    (8, 8, 1.0, True),   # all cores wanted, one held
])  # fmt: skip
def test_the_note_is_said_when_the_load_leaves_fewer_free_cores_than_threads(threads, cores,
                                                                            load, busy):
    note = busy_machine_note(threads, cores=cores, load=load)
    assert (note is not None) == busy
    if busy:
        assert note == (
            f"the machine is busy (load average {load:.1f} over the last minute, {cores} cores): "
            f"the times are taken on {threads} torch threads, which wait for each other behind "
            "the other processes and can read many times too long; for times that mean "
            "something, measure on an idle machine or on one thread (OMP_NUM_THREADS=1)")


@pytest.mark.parametrize(("threads", "cores", "load", "busy"), [
    (2, 2, 1.0, True), (2, 2, 0.99, False), (1, 2, 5.0, False)])  # fmt: skip
def test_work_that_records_no_time_is_said_to_take_longer_by_the_same_rule(threads, cores,
                                                                            load, busy):
    # a study of P or of the anatomy was told its times "can read many times too long": it
    # records none
    note = busy_machine_note(threads, cores=cores, load=load, timed=False)
    assert (note is not None) == busy
    if busy:
        assert note == (
            f"the machine is busy (load average {load:.1f} over the last minute, {cores} cores): "
            f"training runs on {threads} torch threads, which wait for each other behind the "
            "other processes, so it can take many times longer; on one thread "
            "(OMP_NUM_THREADS=1) it waits for no other")


def test_one_core_is_named_in_the_singular():
    assert "(load average 1.5 over the last minute, 1 core): " in busy_machine_note(
        2, cores=1, load=1.5)


def test_the_defaults_read_the_systems_load_and_this_processs_cores(monkeypatch):
    monkeypatch.setattr(os, "getloadavg", lambda: (3.0, 0.0, 0.0))  # the last minute's, first
    monkeypatch.setattr(runtime, "usable_cores", lambda: 2)
    assert busy_machine_note(2).startswith("the machine is busy (load average 3.0 over the "
                                           "last minute, 2 cores)")
    monkeypatch.setattr(os, "getloadavg", lambda: (0.0, 3.0, 3.0))  # not the 5 or 15 minutes'
    assert busy_machine_note(2) is None


def test_a_system_without_a_load_average_says_nothing(monkeypatch):
    def unavailable():
        raise OSError("no load average here")

    monkeypatch.setattr(os, "getloadavg", unavailable)
    assert busy_machine_note(2, cores=2) is None
    monkeypatch.delattr(os, "getloadavg")  # Windows has none at all
    assert busy_machine_note(2, cores=2) is None
