"""Every public default of the Monitor, its quantities, schedules and sinks is the documented one.

Each test uses the default (the argument left out), checks it against the documented value by
an independent computation (loops, the steps listed by hand) and, where a value is involved,
that another value gives another result, so a moved default cannot go unnoticed.
"""

from __future__ import annotations

import inspect

import pytest
import torch

import gradlab
from gradlab.monitor import (
    CSVSink,
    GradientCounts,
    JSONLSink,
    Monitor,
    OperatingRegion,
    Quantity,
    WeightedGradientCounts,
    dense_warmup,
    every,
    log_spaced,
    read_jsonl,
)
from gradlab.monitor.batch import BatchView
from tests.helpers.training import train
from tests.reference.operating_region_loops import gradient_count, proportion
from tests.reference.smooth_ap_loops import cosine

DOCUMENTED_EPS = 0.005  # the operating region's threshold (Brown et al. 2020), also the count's


def _batch(tau=0.01):
    generator = torch.Generator().manual_seed(21)
    embeddings = torch.randn(9, 3, generator=generator, dtype=torch.float64)
    return BatchView(embeddings=embeddings, labels=torch.tensor([0, 1, 2] * 3), tau=tau)


def test_operating_region_default_eps():
    batch = _batch()
    rows = [[cosine(a, b) for b in batch.embeddings.tolist()] for a in batch.embeddings.tolist()]
    expected = sum(proportion(r, 0.01, DOCUMENTED_EPS) for r in rows) / len(rows)
    assert OperatingRegion().compute(batch)["p_seed"].item() == pytest.approx(expected, rel=1e-12)
    assert OperatingRegion().eps == DOCUMENTED_EPS
    assert OperatingRegion(eps=0.05).compute(_batch())["p_seed"].item() != pytest.approx(expected)


@pytest.mark.parametrize("cls", [GradientCounts, WeightedGradientCounts])
def test_gradient_counts_default_threshold_and_unweighted(cls):
    batch = _batch()
    rows = [[cosine(a, b) for b in batch.embeddings.tolist()] for a in batch.embeddings.tolist()]
    labels = batch.labels.tolist()
    counts = []
    for q, row in enumerate(rows):
        positives = [labels[c] == labels[q] and c != q for c in range(len(labels))]
        keep = [c != q for c in range(len(labels))]
        counts.append(gradient_count(row, positives, 0.01, DOCUMENTED_EPS, False, keep))
    got = cls().compute(batch)
    assert got["gradient_count_mean"].item() == pytest.approx(sum(counts) / len(counts))
    assert ("gradient_count_mean_weighted" in got) is (cls is WeightedGradientCounts)
    other = cls(threshold=0.05).compute(_batch())["gradient_count_mean"].item()
    assert other != pytest.approx(sum(counts) / len(counts))


def test_a_quantity_without_a_schedule_computes_every_step():
    assert all(Quantity().should_compute(step) for step in range(200))


def test_schedule_defaults():
    assert [s for s in range(300) if log_spaced()(s)] == [0, 1, 2, 4, 8, 16, 32, 64, 128, 256]
    warmup = [s for s in range(400) if dense_warmup()(s)]
    assert warmup == [*range(100), 100, 150, 200, 250, 300, 350]


def test_monitor_defaults_preset_sinks_tau_and_schedule(tmp_path):
    monitor = Monitor(tmp_path)
    names = [q.name for q in monitor.quantities]
    assert names == ["loss", "embedding_norm", "embedding_grad_norm", "operating_region",
                     "gradient_counts", "degenerate_batches", "geometry", "margins"]  # fmt: skip
    assert not any(isinstance(q, WeightedGradientCounts) for q in monitor.quantities)
    assert [type(s) for s in monitor.sinks] == [JSONLSink]
    assert monitor.tau == 0.01 and monitor.strict is False and monitor.distributed == "auto"
    logged = [s for s in range(260) if monitor.quantities[0].should_compute(s)]
    assert logged == [*range(10), *range(10, 200, 10), 200, 250]
    monitor.close()


def test_file_sink_default_file_names(tmp_path):
    with Monitor(tmp_path, quantities=[gradlab.monitor.Loss(every(1))],
                 sinks=[JSONLSink(), CSVSink()]) as monitor:  # fmt: skip
        train(monitor, steps=2)
    assert sorted(p.name for p in tmp_path.iterdir() if not p.name.startswith(".")) == [
        "metrics.csv",
        "metrics.jsonl",
    ]
    assert [r["step"] for r in read_jsonl(tmp_path / "metrics.jsonl")[1]] == [0, 1]


def test_remote_sink_default_prefix_and_watch_inputs():
    from gradlab.monitor import MLflowSink, WandbSink

    for cls in (WandbSink, MLflowSink):
        assert inspect.signature(cls).parameters["prefix"].default == "gradlab/"
    assert inspect.signature(Monitor.watch).parameters["inputs"].default is None  # declared


def test_close_logs_the_last_step_by_default(tmp_path):
    monitor = Monitor(tmp_path, preset="cheap", every=10)
    train(monitor, steps=3)
    monitor.close()
    assert [r["step"] for r in read_jsonl(tmp_path / "metrics.jsonl")[1]] == [0, 2]
