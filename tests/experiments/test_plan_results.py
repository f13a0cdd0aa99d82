"""`gradlab plan`'s results read exactly: the stated memory model counted tensor by tensor, the
time as the median of the timed calls (a stand-in clock, so no wall-clock time is asserted), the
scaling of an estimate from its calibration batch, the printed lines and the refusals."""

from __future__ import annotations

import itertools
import re

import pytest
import torch

from gradlab.errors import GradlabError
from gradlab.experiments.planner import (
    PLAN_LOSSES,
    PeakBytes,
    check_loss_plan,
    estimate_smooth_ap,
    format_plan,
    measure_loss,
    plan,
)
from gradlab.functional.smooth_ap import DEFAULT_CHUNK_ELEMENTS


def _model_bytes(m, d, positives, rows):
    """The tensors the model counts, one by one, in float32 (4 bytes) or bool (1 byte)."""
    scores, score_grad = 4 * m * m, 4 * m * m
    masks = 1 * m * m + 1 * m * m  # positives, candidates
    unit, unit_grad = 4 * m * d, 4 * m * d
    block = 4 * rows * positives * m
    temporaries = 8 * 4 * rows * m
    return scores + score_grad + masks + unit + unit_grad + block + temporaries


@pytest.mark.parametrize("include", [False, True])
def test_the_memory_model_counts_each_tensor(include):
    m, d, k = 96, 24, 4
    positives = k if include else k - 1
    # a budget of 1000 entries holds 1000 // (positives * 96) rows (3 or 2)
    rows = 1000 // (positives * m)
    assert rows in (2, 3)
    got = estimate_smooth_ap(m, d, k, include_query=include, budget=1000)
    assert got == _model_bytes(m, d, positives, rows)
    # at least one row even when the budget holds none; at most the whole batch
    assert estimate_smooth_ap(m, d, k, include, budget=1) == _model_bytes(m, d, positives, 1)
    assert estimate_smooth_ap(m, d, k, include, budget=10**9) == _model_bytes(m, d, positives, m)
    # by default the chunk budget of gradlab's SmoothAP
    default_rows = min(m, DEFAULT_CHUNK_ELEMENTS // (positives * m))
    assert estimate_smooth_ap(m, d, k, include) == _model_bytes(m, d, positives, default_rows)


def test_the_memory_model_refuses_a_bad_budget_or_batch():
    with pytest.raises(GradlabError, match=r"^budget must be a positive integer"):
        estimate_smooth_ap(8, 4, budget=0)
    with pytest.raises(GradlabError, match=r"^batch size must be a multiple of 3"):
        estimate_smooth_ap(8, 4, per_class=3)


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (
            ("smooth-ap", 8, 4, 4),
            "loss must be one of " + ", ".join(PLAN_LOSSES) + "; got 'smooth-ap'",
        ),
        (("fast_ap", 0, 4, 4), "batch size must be a positive integer"),
        (("fast_ap", 8, -1, 4), "dim must be a positive integer"),
        (("fast_ap", 8, 4, 0), "per_class must be a positive integer"),
        (("fast_ap", 8, 4, 1), "per_class must be at least 2 (a query needs a positive); got 1"),
        (("fast_ap", 10, 4, 4), "batch size must be a multiple of 4 (4 images per class); got 10"),
        (("fast_ap", 4, 4, 4), "batch size must hold at least two classes (8 or more at 4 "
                               "per class: a query needs a negative); got 4"),
    ],
)
def test_bad_plans_are_refused_naming_the_argument(args, message):
    with pytest.raises(GradlabError, match="^" + re.escape(message)):
        check_loss_plan(*args)
    with pytest.raises(GradlabError, match="^" + re.escape(message)):
        plan(*args)


def test_the_plan_losses_are_the_comparisons_losses():
    from gradlab.experiments.loss_comparison import loss_functions

    assert set(PLAN_LOSSES.values()) <= set(loss_functions(0.01, 8))


class _Clock:
    """A stand-in for time.perf_counter: each timed call lasts the next of ``durations``."""

    def __init__(self, durations):
        # the clock starts far from 0, as perf_counter does: a duration is a difference (the
        # durations are dyadic fractions, exact at this offset)
        self.durations, self.now, self.calls, self.starts = iter(durations), 1024.0, 0, 0

    def __call__(self):
        self.calls += 1
        if self.calls % 2:  # a start
            self.starts += 1
            return self.now
        self.now += next(self.durations)
        return self.now


@pytest.mark.slow
def test_measured_time_is_the_median_of_the_timed_calls(monkeypatch):
    # the first call is the warm-up (1/1024 s: all seven timed calls fit in the timing budget)
    clock = _Clock([2**-10, 0.5, 0.25, 8.0, 0.75, 0.5, 1.0, 9.0])
    monkeypatch.setattr("time.perf_counter", clock)
    monkeypatch.setattr(torch, "get_num_threads", lambda: 2)  # the threads that timed, named
    cost = measure_loss("contrastive", 16, 4, repeats=7)
    assert clock.starts == 8
    assert cost["seconds"] == 0.75  # sorted: 0.25 0.5 0.5 0.75 1 8 9
    assert cost["method"] == (
        "measured on cpu: the C allocator's bytes in use (mallinfo2) after every op; "
        "time: the median of 7 runs on 2 torch threads"
    )


@pytest.mark.slow
@pytest.mark.parametrize(
    ("warm_up", "repeats", "timed"),
    [(2**-10, 5, 5), (2**-10, 20, 20), (2.0, 5, 5), (3.0, 5, 3), (4.0, 5, 2), (5.0, 5, 2),
     (6.0, 5, 1), (20.0, 5, 1)],
)
def test_a_slow_pass_is_timed_fewer_times(monkeypatch, capsys, warm_up, repeats, timed):
    # as many timed calls as asked (five by default) that fit in 10 s at the warm-up's pace,
    # at least one
    clock = _Clock([warm_up] * (repeats + 1))
    monkeypatch.setattr("time.perf_counter", clock)
    monkeypatch.setattr(torch, "get_num_threads", lambda: 1)  # one thread: no plural
    cost = measure_loss("fast_ap", 8, 4, repeats=repeats)
    assert clock.starts == 1 + timed
    assert cost["seconds"] == warm_up
    assert cost["method"].endswith(f"the median of {timed} run" + ("s" if timed > 1 else "")
                                   + " on 1 torch thread")
    # a pass of 5 s or more says on stderr how many passes are still to come
    err = capsys.readouterr().err
    if warm_up >= 5.0:
        assert err == (f"gradlab plan: one pass takes {warm_up:.0f} s here; {1 + timed} more "
                       "to measure the peak and the time\n")  # fmt: skip
    else:
        assert err == ""


def test_measure_refuses_a_repeat_count_that_is_not_positive():
    with pytest.raises(GradlabError, match=r"^repeats must be a positive integer"):
        measure_loss("fast_ap", 8, 4, repeats=0)


@pytest.mark.slow
@pytest.mark.skipif(not PeakBytes().available, reason="glibc's mallinfo2 is not here")
def test_the_measured_peak_holds_at_least_the_scores_and_their_gradient():
    m = 128
    for loss in ("smooth_ap", "contrastive"):
        peak = measure_loss(loss, m, 8, repeats=1)["peak_extra_bytes"]
        assert 8 * m * m <= peak < 100 * m * m, (loss, peak)


@pytest.mark.slow
@pytest.mark.parametrize(
    ("loss", "per_class", "include"),
    [("smooth_ap", 3, False), ("smooth_ap_query_included", 4, True)],
)
def test_an_estimate_scales_the_calibration_time_by_the_squared_batch_ratio(
    monkeypatch, loss, per_class, include
):
    # the calibration batch: 256 rounded down to whole classes (255 for 3 per class)
    small = 256 - 256 % per_class
    batch = 2 * small
    clock = _Clock(itertools.repeat(0.5))
    monkeypatch.setattr("time.perf_counter", clock)
    result = plan(loss, batch, 8, per_class=per_class, estimate=True)
    assert clock.starts == 6  # one calibration measurement: a warm-up and five timed calls
    assert result == {
        "loss": PLAN_LOSSES[loss],
        "batch_size": batch,
        "dim": 8,
        "per_class": per_class,
        "device": "cpu",
        "peak_extra_bytes": estimate_smooth_ap(batch, 8, per_class, include_query=include),
        "seconds": 0.5 * 4.0,
        "method": "estimated: memory from estimate_smooth_ap's model (the larger of 10 m^2 + "
        f"8 m d + the chunk's block and temporaries, and 24 m d, bytes); time: this CPU's at "
        f"m = {small}, "
        f"scaled by (m / {small})^2",
    }
    # a device that is not here: its memory from the model, no time (this CPU's says nothing
    # about it), and nothing measured
    elsewhere = plan(loss, batch, 8, per_class=per_class, device="meta")
    assert clock.starts == 6
    assert elsewhere == {**result, "device": "meta", "seconds": None,
                         "method": "estimated: memory from estimate_smooth_ap's model (the "
                         "larger of 10 m^2 + 8 m d + the chunk's block and temporaries, and "
                         "24 m d, bytes); time: not "
                         "estimated, no meta device here to measure"}  # fmt: skip
    # a batch below the calibration size is timed as it is
    small_plan = plan(loss, 6 * per_class, 8, per_class=per_class, estimate=True)
    assert small_plan["seconds"] == 0.5
    assert small_plan["method"].endswith(f"m = {6 * per_class}, scaled by (m / {6 * per_class})^2")


@pytest.mark.slow
def test_a_plan_here_is_measured_and_a_loss_without_a_model_is_not_estimated(monkeypatch):
    monkeypatch.setattr("time.perf_counter", _Clock(itertools.repeat(0.25)))
    result = plan("fast_ap", 8, 4, device="cpu")
    assert {k: result[k] for k in ("loss", "batch_size", "dim", "per_class", "device")} == {
        "loss": "FastAP",
        "batch_size": 8,
        "dim": 4,
        "per_class": 4,
        "device": "cpu",
    }
    assert result["seconds"] == 0.25 and result["method"].startswith("measured on cpu: ")
    # the hint answers what was asked: an estimate, or a device that is not here
    for kwargs, where in (({"device": "meta"}, "no meta device is here"),
                          ({"estimate": True}, "without --estimate")):  # fmt: skip
        with pytest.raises(
            GradlabError,
            match=re.escape(
                "loss 'fast_ap' has no stated memory model; measure it where the device is "
                f"({where}; --device cpu runs here)"
            ),
        ):
            plan("fast_ap", 8, 4, **kwargs)


def test_the_printed_plan():
    result = {
        "loss": "FastAP",
        "batch_size": 8,
        "dim": 4,
        "per_class": 2,
        "device": "cuda:1",
        "peak_extra_bytes": 3 * 2**20 + 2**19,
        "seconds": 0.0123456,
        "method": "by hand",
    }
    assert format_plan(result).splitlines() == [
        "FastAP at m = 8 (2 per class), d = 4, on cuda:1",
        "peak extra memory: 3.5 MiB (the loss's forward + backward; the backbone's come on top)",
        "time per step:     12.35 ms (forward + backward of the loss)",
        "how: by hand",
    ]
    result["peak_extra_bytes"] = None
    assert (
        format_plan(result).splitlines()[1].startswith("peak extra memory: not measurable here (")
    )


@pytest.mark.slow
@pytest.mark.skipif(not PeakBytes().available, reason="glibc's mallinfo2 is not here")
def test_the_meter_counts_mapped_blocks_reads_zero_when_idle_and_stops_at_exit():
    meter = PeakBytes()
    assert meter.peak == 0  # nothing measured yet
    with meter:
        pass
    assert meter.peak == 0  # a block without tensors holds nothing
    mib = 1 << 20
    with PeakBytes() as large:
        # 48 MiB: above glibc's largest mmap threshold (32 MiB), so always a mapped block
        block = torch.ones(12 * mib)
        del block
    assert 48 * mib <= large.peak < 49 * mib
    after = torch.ones(12 * mib)  # outside the block: not counted
    assert meter.peak == 0 and large.peak < 49 * mib
    del after


@pytest.mark.slow
def test_measuring_leaves_the_global_random_state_alone(monkeypatch):
    monkeypatch.setattr("time.perf_counter", _Clock(itertools.repeat(0.5)))
    torch.manual_seed(123)
    expected = torch.rand(4)
    torch.manual_seed(123)
    measure_loss("contrastive", 8, 4, repeats=1)
    assert torch.equal(torch.rand(4), expected)


def test_two_images_per_class_are_enough():
    check_loss_plan("smooth_ap", 8, 4, 2)  # a query with one positive
    assert estimate_smooth_ap(8, 4, per_class=2, budget=10**6) == _model_bytes(8, 4, 1, 8)


@pytest.mark.slow
def test_the_meters_one_time_setup_does_not_count_as_a_slow_pass(monkeypatch):
    # The warm-up ran under PeakBytes, whose entry pays the process's first dispatch (about
    # 2 s here): a 17 ms SmoothAP pass at m = 384 was timed 3 or 4 times, not 5. Only the
    # pass sets the pace.
    import time

    from gradlab.experiments import planner

    enter = planner.PeakBytes.__enter__

    def slow_enter(self):
        time.sleep(0.3)  # the one-time setup, outside the loss's pass
        return enter(self)

    monkeypatch.setattr(planner.PeakBytes, "__enter__", slow_enter)
    monkeypatch.setattr(planner, "TIMING_SECONDS", 0.5)
    cost = measure_loss("contrastive", 16, 4)
    assert " the median of 5 runs on " in cost["method"]


@pytest.mark.slow
@pytest.mark.parametrize(("load", "threads", "said"),
                         [(2.7, 2, True), (0.2, 2, False), (2.7, 1, False), (1.2, 2, True)])
def test_a_measurement_says_first_that_other_processes_hold_the_cores(
    capsys, monkeypatch, load, threads, said
):
    # on a 2-core machine beside other jobs, two torch threads timed a step at 400 ms that one
    # thread timed at 7 ms, and nothing said the machine was busy
    import os

    monkeypatch.setattr(os, "getloadavg", lambda: (load, 1.0, 1.0))
    monkeypatch.setattr(torch, "get_num_threads", lambda: threads)
    monkeypatch.setattr("gradlab.experiments.runtime.usable_cores", lambda: 2)
    measure_loss("contrastive", 8, 4, repeats=1)
    err = capsys.readouterr().err
    assert err == ((
        f"gradlab plan: the machine is busy (load average {load:.1f} over the last minute, 2 "
        f"cores): the times are taken on {threads} torch threads, which wait for each other "
        "behind the other processes and can read many times too long; for times that mean "
        "something, measure on an idle machine or on one thread (OMP_NUM_THREADS=1)\n")
        if said else "")
