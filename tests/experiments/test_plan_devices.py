"""`gradlab plan` on a CUDA device, with a stand-in for torch.cuda (so that the CUDA branch runs
on any machine): which device is measured, what the peak reads, where it synchronises; the
loss's temperature passed through; and a CPU without glibc's allocator counters."""

from __future__ import annotations

import ctypes
import itertools
import math
import re
from fractions import Fraction

import pytest
import torch

import gradlab.experiments.loss_comparison as loss_comparison
from gradlab.errors import GradlabError
from gradlab.experiments.planner import (
    PLAN_LOSSES,
    PeakBytes,
    estimate_smooth_ap,
    least_bytes,
    measure_loss,
    plan,
)

MIB = 1 << 20
BEFORE, MAX = 5 * MIB, 12 * MIB  # what the stand-in's allocator says: 7 MiB above the start


class _StandInCuda:
    """torch.cuda's counters and a Tensor.to that keeps a tensor sent to CUDA on the CPU (and
    says so), with every call in ``events``; the loss's calls too."""

    def __init__(self, monkeypatch, available=True):
        self.events, self.moved, self.taus = [], [], []
        original_to = torch.Tensor.to

        def to(tensor, *args, **kwargs):
            target = kwargs.get("device", args[0] if args else None)
            if isinstance(target, (str, torch.device)) and torch.device(target).type == "cuda":
                self.moved.append((tuple(tensor.shape), tensor.dtype, str(target)))
                return tensor
            return original_to(tensor, *args, **kwargs)

        original_losses = loss_comparison.loss_functions

        def loss_functions(tau=0.01, batch_size=128):
            self.taus.append((tau, batch_size))

            def recorded(loss):
                def call(embeddings, labels):
                    self.events.append(("pass", tuple(embeddings.shape), tuple(labels.shape)))
                    return loss(embeddings, labels)

                return call

            return {name: recorded(loss)
                    for name, loss in original_losses(tau, batch_size).items()}  # fmt: skip

        def record(name, value=None):
            def call(device):
                self.events.append((name, device))
                return value

            return call

        monkeypatch.setattr(torch.Tensor, "to", to)
        monkeypatch.setattr(loss_comparison, "loss_functions", loss_functions)
        monkeypatch.setattr(torch.cuda, "is_available", lambda: available)
        monkeypatch.setattr(torch.cuda, "synchronize", record("sync"))
        monkeypatch.setattr(torch.cuda, "reset_peak_memory_stats", record("reset"))
        monkeypatch.setattr(torch.cuda, "memory_allocated", record("allocated", BEFORE))
        monkeypatch.setattr(torch.cuda, "max_memory_allocated", record("max", MAX))
        monkeypatch.setattr(torch.cuda, "mem_get_info",
                            lambda device=None: (64 << 30, 80 << 30))  # fmt: skip


@pytest.mark.slow
def test_a_cuda_measurement_reads_the_peak_above_the_start_on_that_device(monkeypatch):
    cuda = _StandInCuda(monkeypatch)
    cost = measure_loss("contrastive", 8, 4, device="cuda:1", repeats=2)
    assert cost["peak_extra_bytes"] == 7 * MIB  # 12 MiB at most, 5 MiB at the start
    assert cost["method"] == ("measured on cuda:1: torch.cuda.max_memory_allocated above the "
                              "start; time: the median of 2 runs")  # fmt: skip
    # the embeddings [m, d] and the labels [m] are sent to the device asked for
    assert sorted(cuda.moved, key=str) == sorted(
        [((8, 4), torch.float32, "cuda:1"), ((8,), torch.int64, "cuda:1")], key=str
    )
    one_pass = ("pass", (8, 4), (8,))
    assert cuda.events == [
        ("sync", "cuda:1"),
        one_pass,
        ("sync", "cuda:1"),  # the warm-up
        # the peak: reset, the allocation at the start, one pass, the largest allocation
        ("sync", "cuda:1"),
        ("reset", "cuda:1"),
        ("allocated", "cuda:1"),
        one_pass,
        ("sync", "cuda:1"),
        ("max", "cuda:1"),
        *[("sync", "cuda:1"), one_pass, ("sync", "cuda:1")] * 2,  # the timed passes
    ]


@pytest.mark.slow
def test_a_cpu_measurement_does_not_touch_cuda(monkeypatch):
    cuda = _StandInCuda(monkeypatch)
    cost = measure_loss("contrastive", 8, 4, device="cpu", repeats=1)
    assert cost["method"].startswith("measured on cpu: ")
    assert cuda.moved == [] and {event[0] for event in cuda.events} == {"pass"}


@pytest.mark.slow
def test_a_plan_on_a_cuda_device_that_is_here_measures_it_with_the_temperature(monkeypatch):
    cuda = _StandInCuda(monkeypatch)
    result = plan("smooth_ap", 8, 4, device="cuda:1", tau=0.05)
    assert result["device"] == "cuda:1" and result["peak_extra_bytes"] == 7 * MIB
    assert result["method"].startswith("measured on cuda:1: torch.cuda.max_memory_allocated")
    assert cuda.taus == [(0.05, 8)]
    assert {(shape, str(device)) for shape, _, device in cuda.moved} == {
        ((8, 4), "cuda:1"),
        ((8,), "cuda:1"),
    }


@pytest.mark.parametrize("device", ["cuda", "cuda:1"])
def test_a_plan_on_a_cuda_device_that_is_not_here_is_estimated_without_touching_it(
    monkeypatch, device
):
    cuda = _StandInCuda(monkeypatch, available=False)
    result = plan("smooth_ap", 384, 512, device=device)
    assert result["peak_extra_bytes"] == estimate_smooth_ap(384, 512)
    assert result["seconds"] is None
    assert result["method"].endswith("time: not estimated, no cuda device here to measure")
    assert cuda.events == [] and cuda.moved == []


def test_another_device_is_estimated_even_when_cuda_is_here(monkeypatch):
    # a CUDA device here says nothing of the meta device (or any other): estimated
    cuda = _StandInCuda(monkeypatch)
    result = plan("smooth_ap", 384, 512, device="meta")
    assert result["peak_extra_bytes"] == estimate_smooth_ap(384, 512)
    assert result["method"].endswith("no meta device here to measure")
    assert cuda.events == []


@pytest.mark.slow
def test_the_calibration_of_an_estimate_runs_the_loss_at_the_temperature_asked(monkeypatch):
    cuda = _StandInCuda(monkeypatch, available=False)
    plan("smooth_ap", 16, 4, estimate=True, tau=0.05)
    assert cuda.taus == [(0.05, 16)]


def test_a_cpu_without_glibcs_counters_measures_no_peak(monkeypatch):
    def no_libc(*args, **kwargs):
        raise OSError("libc.so.6: cannot open shared object file")

    monkeypatch.setattr(ctypes, "CDLL", no_libc)
    with PeakBytes() as meter:
        _ = torch.ones(1 << 20) * 2.0
    assert not meter.available and meter.peak == 0
    cost = measure_loss("contrastive", 8, 4, repeats=1)
    assert cost["peak_extra_bytes"] is None
    assert cost["seconds"] >= 0


class _ExactClock:
    """perf_counter from 0: the warm-up lasts ``warm_up`` exactly, every later pass 1 s."""

    def __init__(self, warm_up):
        self.readings = itertools.chain([0.0, warm_up], itertools.count(10))
        self.calls = 0

    def __call__(self):
        self.calls += 1
        return float(next(self.readings))


@pytest.mark.slow
@pytest.mark.parametrize("warm_up", [10 / 3, 10 / 7, 0.1])
def test_passes_that_would_take_just_over_the_budget_are_not_all_timed(monkeypatch, warm_up):
    # 10 / 3 rounds up as a float: three passes of it take a little more than 10 s (exactly,
    # in rationals), so two are timed
    asked = 100
    fit = math.floor(Fraction(10) / Fraction(warm_up))
    assert fit * Fraction(warm_up) <= 10 < (fit + 1) * Fraction(warm_up)
    clock = _ExactClock(warm_up)
    monkeypatch.setattr("time.perf_counter", clock)
    cost = measure_loss("contrastive", 8, 4, repeats=asked)
    assert f" the median of {min(asked, fit)} runs on " in cost["method"]
    assert clock.calls == 2 + 2 * min(asked, fit)


@pytest.mark.parametrize(("batch_size", "dim"), [(64, 64), (32, 32)])
def test_a_tie_of_batch_and_dimension_names_the_batch_size(monkeypatch, batch_size, dim):
    # need = 8 m (m + d): at m = d, one less m saves 8 (2m + d) bytes, one less d only 8 m
    monkeypatch.setattr("gradlab.memory.available_bytes",
                        lambda device: least_bytes(batch_size, dim) - 1)  # fmt: skip
    with pytest.raises(GradlabError, match=r"; try a smaller --batch-size$"):
        plan("contrastive", batch_size, dim)
    with pytest.raises(
        GradlabError,
        match=re.escape(f"measuring {PLAN_LOSSES['smooth_ap']} at m = {batch_size}, d = {dim}"),
    ):
        plan("smooth_ap", batch_size, dim)
