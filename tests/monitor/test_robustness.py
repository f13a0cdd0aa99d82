"""Crash safety (a killed training process leaves valid JSONL) and torch.distributed (gloo)."""

import json
import math
import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest
import torch

import gradlab
from gradlab.functional import in_batch_layout, operating_region_proportion
from gradlab.models import EmbeddingMLP
from gradlab.monitor import read_jsonl
from tests.helpers.processes import run_two_ranks
from tests.helpers.workers import (
    distributed_worker,
    gathered_worker,
    rank_batch,
    rank_pairs,
    rank_scores,
    score_matrix_worker,
    temperature_ddp_worker,
)
from tests.reference import geometry_loops, score_losses_loops, smooth_ap_loops

ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.slow
def test_killed_training_leaves_valid_jsonl(tmp_path):
    process = subprocess.Popen(
        [sys.executable, "-m", "tests.helpers.workers", str(tmp_path)],
        cwd=ROOT,
        stdout=subprocess.PIPE,
        text=True,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
    )
    try:
        assert process.stdout.readline().strip() == "READY"
    finally:
        process.send_signal(signal.SIGKILL)
        process.wait(timeout=30)
    lines = (tmp_path / "metrics.jsonl").read_text().splitlines()
    assert len(lines) >= 6  # the header and at least five records
    for line in lines:
        json.loads(line)
    _, records = read_jsonl(tmp_path / "metrics.jsonl")
    assert [r["step"] for r in records] == list(range(len(records)))


@pytest.mark.slow
def test_distributed_monitor_uses_the_global_batch_and_rank_zero_writes(tmp_path):
    log_dir = tmp_path / "run"
    run_two_ranks(distributed_worker, (str(tmp_path / "init"), str(log_dir)))
    headers, records = read_jsonl(log_dir / "metrics.jsonl")
    assert len(headers) == 1 and len(records) == 1  # rank 1 wrote nothing
    torch.manual_seed(0)
    model = EmbeddingMLP(64, 16)
    with torch.no_grad():
        parts = [rank_batch(rank) for rank in range(2)]
        embeddings = torch.cat([model(images) for images, _ in parts])
        labels = torch.cat([labels for _, labels in parts])
    scores = in_batch_layout(embeddings, labels, include_query=True).scores
    expected = operating_region_proportion(scores, 0.05).mean().item()  # the loss's tau
    assert records[0]["p_seed"] == pytest.approx(expected, rel=1e-6)
    # the embeddings' gradient: each rank's own loss on its own rows, stacked in rank order
    own = []
    for images, rank_labels in parts:
        rows = model(images).detach().requires_grad_(True)
        gradlab.SmoothAPLoss(0.05)(rows, rank_labels).backward()
        own.append(rows.grad.double())
    stacked = torch.cat(own)
    assert records[0]["embedding_grad_norm"] == pytest.approx(stacked.norm().item(), rel=1e-6)
    assert records[0]["embedding_grad_norm_row_mean"] == pytest.approx(
        stacked.norm(dim=1).mean().item(), rel=1e-6)  # fmt: skip


@pytest.mark.slow
@pytest.mark.parametrize("kind", ["scores", "cross"])
def test_a_loss_on_score_matrices_under_distributed_reads_rank_zeros_matrix(tmp_path, kind):
    # each rank scores its own batch: rows of two ranks' matrices are not one matrix, so the
    # statistics are rank 0's own and the loss the ranks' mean
    log_dir = tmp_path / "run"
    run_two_ranks(score_matrix_worker, (str(tmp_path / "init"), str(log_dir), kind))
    for rank in range(2):  # only what cannot apply to a score matrix; nothing failed
        reasons = torch.load(tmp_path / f"run_rank{rank}_disabled.pt")
        assert all(reason.startswith("needs ") for reason in reasons.values()), reasons
    headers, (record,) = read_jsonl(log_dir / "metrics.jsonl")
    scores = [rank_scores(rank).double().tolist() for rank in range(2)]
    positives = [[row == column for column in range(6)] for row in range(6)]
    if kind == "scores":
        losses = [score_losses_loops.score_loss("nt_xent", matrix, positives, 0.1, "i2t")[0]
                  for matrix in scores]  # fmt: skip
    else:
        pairs = [[t.double().tolist() for t in rank_pairs(rank)] for rank in range(2)]
        losses = [smooth_ap_loops.loss_from_aps(smooth_ap_loops.cross_modal_smooth_ap(
            queries, candidates, positives, 0.05)) for queries, candidates in pairs]  # fmt: skip
    assert record["loss"] == pytest.approx(sum(losses) / 2, rel=1e-6)
    expected = geometry_loops.margins(scores[0], positives, [[True] * 6] * 6)
    keys = ("margin_positive_score", "margin_hardest_negative", "margin_mean",
            "margin_violation_share", "margin_recall_at_1")  # fmt: skip
    assert [record[key] for key in keys] == pytest.approx(expected, abs=1e-6)
    assert "margins" not in headers[0].get("not_logged", {})


@pytest.mark.slow
@pytest.mark.parametrize("distributed", ["auto", "local"])
def test_a_loss_on_embeddings_gathered_already_is_read_once(tmp_path, distributed):
    # every rank calls the loss on the global batch: gathering it again would log two copies
    # of each row, whose duplicate pairs pass for distinct items (uniformity, P, counts)
    log_dir = tmp_path / "run"
    run_two_ranks(gathered_worker, (str(tmp_path / "init"), str(log_dir), distributed))
    _, records = read_jsonl(log_dir / "metrics.jsonl")
    torch.manual_seed(0)
    model = EmbeddingMLP(64, 16)
    with torch.no_grad():
        embeddings = torch.cat([model(rank_batch(rank)[0]) for rank in range(2)])
    expected = geometry_loops.uniformity(embeddings.double().tolist())
    assert [r["step"] for r in records] == [0, 1]
    assert records[0]["geometry_uniformity"] == pytest.approx(expected, rel=1e-5)
    told = json.loads((tmp_path / "run_rank0_warnings.json").read_text())
    same = [w for w in told if "every rank holds the same batch" in w]
    # told once under "auto", with the way to silence it; "local" never gathers
    assert len(same) == (1 if distributed == "auto" else 0), told
    assert all("distributed='local'" in w and "step 0" in w for w in same)


@pytest.mark.slow
def test_under_ddp_the_observed_scale_gradient_is_rank_zeros_own_as_its_closed_form(tmp_path):
    # DDP averages logit_scale.grad over the ranks, while the closed form reads rank 0's own
    # matrix: the logged gradient is the one rank 0's backward sent, so the two agree
    log_dir = tmp_path / "run"
    run_two_ranks(temperature_ddp_worker, (str(tmp_path / "init"), str(log_dir)))
    _, (record,) = read_jsonl(log_dir / "metrics.jsonl")
    eye = [[row == column for column in range(6)] for row in range(6)]
    scale = math.exp(2.5)
    own = [geometry_loops.temperature_gradient(rank_scores(rank).double().tolist(), eye, scale)
           for rank in range(2)]  # fmt: skip
    assert record["temperature_log_scale_grad"] == pytest.approx(own[0], rel=1e-6)
    assert record["temperature_log_scale_grad_observed"] == pytest.approx(own[0], rel=1e-6)
    averaged = float(torch.load(tmp_path / "run_rank0_grad.pt"))  # what DDP left in .grad
    assert averaged == pytest.approx(sum(own) / 2, rel=1e-6)
    assert abs(own[0] - own[1]) > 1e-3  # the ranks' matrices differ: the test can tell
