"""The Monitor asks its quantities: declarations, a quantity added from outside, no names.

A quantity declares what it needs, its keys and its plot families; the Monitor provides each
need once per logged step and names no quantity itself.
"""

from __future__ import annotations

import inspect
import re
import statistics

import pytest
import torch
from torch.overrides import TorchFunctionMode

import gradlab
from gradlab.monitor import (
    NEEDS,
    PRESETS,
    QUANTITIES,
    Monitor,
    OperatingRegion,
    Quantity,
    WeightedGradientCounts,
    every,
    monitor,
    read_jsonl,
)
from gradlab.monitor.geometry import ChanceLevel, Temperature
from gradlab.plotting import monitor as monitor_plots
from tests.reference.smooth_ap_loops import cosine


class RowMedian(Quantity):
    """The median of each row's scores (in-batch: the query's own entry left out), averaged
    over the rows: read from the step's one sort, nothing else."""

    name = "row_median"
    needs = frozenset({"sorted_scores"})
    keys = ("row_median_mean",)

    def compute(self, batch):
        ordered = -batch.negated_sorted  # each row descending
        if batch.labels is not None:  # the query's own score sits somewhere in its row
            own = batch.scores.diagonal().unsqueeze(1)
            first = (ordered == own).to(torch.int8).argmax(dim=1, keepdim=True)
            columns = torch.arange(ordered.shape[1]).unsqueeze(0)
            keep = columns != first
            ordered = ordered[keep].view(ordered.shape[0], -1)
        size = ordered.shape[1]
        middle = (ordered[:, (size - 1) // 2] + ordered[:, size // 2]) / 2
        return {"row_median_mean": middle.mean()}


class CountSorts(TorchFunctionMode):
    """Counts the torch sorts called inside the block."""

    SORTS = (torch.sort, torch.argsort, torch.Tensor.sort, torch.Tensor.argsort)

    def __init__(self):
        super().__init__()
        self.sorts = 0

    def __torch_function__(self, func, types, args=(), kwargs=None):
        self.sorts += func in self.SORTS
        return func(*args, **(kwargs or {}))


def _batch(size=9, dim=5, seed=3):
    generator = torch.Generator().manual_seed(seed)
    embeddings = torch.randn(size, dim, generator=generator, dtype=torch.float64)
    return embeddings.requires_grad_(True), torch.arange(size) % 3


def test_a_quantity_defined_outside_gradlab_logs_its_values_from_the_steps_sort(tmp_path):
    embeddings, labels = _batch()
    with Monitor(tmp_path, quantities=[RowMedian(every(1)), OperatingRegion(every(1))]) as run:
        loss_fn = run.watch(gradlab.SmoothAPLoss(0.1))
        loss_fn(embeddings, labels).backward()
        with CountSorts() as counter:
            record = run.step()
    rows = embeddings.detach().tolist()
    medians = [
        statistics.median(cosine(rows[i], rows[j]) for j in range(len(rows)) if j != i)
        for i in range(len(rows))
    ]
    assert record["row_median_mean"] == pytest.approx(statistics.fmean(medians), abs=1e-12)
    assert "p_seed" in record
    assert counter.sorts <= 1  # at most one sort, shared by the two quantities
    headers, _ = read_jsonl(tmp_path / "metrics.jsonl")
    assert "row_median" in headers[0]["quantities"]


def test_a_quantity_the_watched_loss_cannot_serve_is_explained_from_its_declaration(tmp_path):
    class NeedsEmbeddings(Quantity):
        name = "needs_embeddings"
        needs = frozenset({"embeddings"})

        def compute(self, batch):  # pragma: no cover - never asked
            raise AssertionError("computed although its need cannot be met")

    with Monitor(tmp_path, quantities=[NeedsEmbeddings(every(1)), RowMedian(every(1))]) as run:
        loss_fn = run.watch(gradlab.NTXentLoss(0.1))
        scores = torch.randn(4, 4, requires_grad=True)
        loss_fn(scores, torch.eye(4, dtype=torch.bool)).backward()
        record = run.step()
    assert run.not_logged == {
        "needs_embeddings": (
            "needs the embeddings; the loss is watched on a score matrix, not on embeddings"
        )
    }
    # The scores are read as they are (no cosine of them): every entry of a row is a candidate.
    assert record["row_median_mean"] == pytest.approx(
        statistics.fmean(statistics.median(row) for row in scores.detach().tolist()), abs=1e-6
    )


def test_the_monitor_module_names_no_quantity_class_and_no_key():
    source = inspect.getsource(monitor)
    quantities = [*QUANTITIES, WeightedGradientCounts]
    for cls in quantities:
        assert not re.search(rf"\b{cls.__name__}\b", source), cls.__name__
    names = {cls.name for cls in quantities}
    keys = {key for cls in quantities for key in cls.keys} | set(WeightedGradientCounts().keys)
    for word in names | keys:
        assert not re.search(rf"[\"']{word}[\"']", source), word


def test_every_need_a_quantity_declares_is_one_the_monitor_knows():
    for cls in [*QUANTITIES, WeightedGradientCounts]:
        assert cls().needs <= set(NEEDS), cls.__name__
        assert cls().keys, cls.__name__


def test_every_key_kept_on_a_non_finite_step_is_one_the_quantity_logs():
    for cls in [*QUANTITIES, WeightedGradientCounts, ChanceLevel, Temperature]:
        assert cls().input_free_keys <= set(cls().keys), cls.__name__


@pytest.mark.parametrize("preset", sorted(PRESETS))
def test_every_logged_key_is_declared_by_its_quantity(tmp_path, preset):
    embeddings, labels = _batch(12, 4, seed=5)
    with Monitor(tmp_path, preset=preset, every=1) as run:
        loss_fn = run.watch(gradlab.SmoothAPLoss(0.1))
        loss_fn(embeddings, labels).backward()
        record = run.step()
        declared = {key: q.name for q in run.quantities for key in q.keys}
    logged = set(record) - {"step"}
    assert logged and logged <= set(declared), sorted(logged - set(declared))
    assert {declared[key] for key in logged} == {q.name for q in run.quantities}


def test_the_plot_families_are_the_quantities_declarations():
    expected = {}
    for cls in QUANTITIES:
        for plot in cls.plots:
            expected.setdefault(plot.family, (plot.title, plot.keys, plot.ylabel))
    assert monitor_plots.FAMILIES == expected
    # Every drawn key is a key some quantity logs, and has a human label.
    logged = {key for cls in [*QUANTITIES, WeightedGradientCounts] for key in cls().keys}
    for _, keys, _ in expected.values():
        assert set(keys) <= logged
        assert all("_" not in monitor_plots.key_label(key) for key in keys)


def test_a_quantity_computes_without_autograd_bookkeeping(tmp_path):
    """compute() runs in torch.inference_mode: no graph, no version counters, no view tracking
    (cheaper per op than no_grad), and the record is the same floats."""
    seen = []

    class Mode(Quantity):
        name = "mode"
        needs = frozenset({"scores"})
        keys = ("mode_mean_score",)

        def compute(self, batch):
            seen.append((torch.is_inference_mode_enabled(), torch.is_grad_enabled()))
            return {"mode_mean_score": batch.scores.mean()}

    with Monitor(tmp_path, quantities=[Mode(every(1))]) as run:
        loss_fn = run.watch(gradlab.NTXentLoss(0.1))
        scores = torch.randn(4, 4, requires_grad=True)
        loss_fn(scores, torch.eye(4, dtype=torch.bool)).backward()
        record = run.step()
    assert seen == [(True, False)]
    # a float32 mean of 16 scores against the float64 one: an absolute tolerance (a relative
    # one of 1e-6 failed about 3 % of draws, where the mean lies near 0)
    assert record["mode_mean_score"] == pytest.approx(float(scores.detach().double().mean()),
                                                      rel=0, abs=1e-6)  # fmt: skip
