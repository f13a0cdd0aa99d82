"""SigLIP's sigmoid loss (Zhai et al., 2023, Eq. 1) in the equivalence checker, one process:
its objective is the paper's sum over every pair of the score matrix, and accumulation loses
exactly the pairs across micro-batches.

Gradient caching runs with the other losses in ``test_compare.py`` (to 1e-10 for chunks of 1, 3
and 16); the two-process checks (gather with gradient, local loss, gather without gradient, and
the planted bugs) in ``test_distributed.py``, in its one start of the processes. References here
are float64 loops over the pairs, written from the paper's formula, not from gradlab's code.
"""

import math

import pytest
import torch
import torch.nn.functional as F

from gradlab.equivalence import (
    Accumulation,
    FullBatch,
    compare_gradients,
    run_step,
    synthetic_problem,
)
from gradlab.siglip_loss import SigLIPLoss

B = 16
LOSSES = {
    "mean": lambda: SigLIPLoss(),  # scale 10, bias -10: the paper's initialisation
    "sum": lambda: SigLIPLoss(scale=5.0, bias=-2.0, reduction="sum"),
}


@pytest.fixture(scope="module")
def problem():
    return synthetic_problem(batch_size=B, seed=4)


def _loop_loss_and_grad(scores, labels, scale, bias, divide_by_rows):
    """L = -sum_{q,c} log sigmoid(z_qc (t S_qc + b)) [/ Q] and dL/dS, pair by pair."""
    rows = len(scores)
    total = 0.0
    grad = [[0.0] * len(scores[0]) for _ in range(rows)]
    for q, row in enumerate(scores):
        for c, value in enumerate(row):
            z = 1.0 if labels[q] == labels[c] else -1.0
            margin = z * (scale * value + bias)
            total += math.log1p(math.exp(-margin))  # -log sigmoid(m)
            grad[q][c] = -z * scale / (1.0 + math.exp(margin))  # -z t sigmoid(-m)
    divisor = rows if divide_by_rows else 1
    return total / divisor, [[g / divisor for g in row] for row in grad]


@pytest.mark.parametrize("reduction", list(LOSSES))
def test_the_reference_is_the_papers_sum_over_every_pair(problem, reduction):
    model, batch = problem
    loss = LOSSES[reduction]()
    grads = run_step(FullBatch(loss), model, batch)
    with torch.no_grad():
        q, c = model(batch.query_inputs), model(batch.candidate_inputs)
        scores = F.normalize(q, dim=1) @ F.normalize(c, dim=1).T
    value, grad = _loop_loss_and_grad(scores.tolist(), batch.labels.tolist(), loss.scale,
                                      loss.bias, reduction == "mean")  # fmt: skip
    assert grads.loss == pytest.approx(value, rel=1e-12, abs=0)
    assert torch.allclose(grads.scores, torch.tensor(grad, dtype=torch.float64), rtol=0,
                          atol=1e-14)  # fmt: skip
    assert bool(grads.scored.all())


@pytest.mark.parametrize("k", [2, 4])
def test_accumulation_loses_only_the_pairs_across_micro_batches(problem, k):
    # No softmax couples SigLIP's pairs, and the mean divides by the rows: a micro-batch's loss
    # over k is its pairs' sum over B (16 / k rows, times 1 / k). So every pair it scores gets
    # exactly the whole batch's dL/dS, and the k blocks of (16 / k)^2 pairs are all it scores.
    model, batch = problem
    loss = LOSSES["mean"]()
    result = compare_gradients(FullBatch(loss), Accumulation(loss, k), model, batch)
    assert not result.equivalent
    assert result["dL/dscores"].unscored == B * B - k * (B // k) ** 2
    with torch.no_grad():
        q, c = model(batch.query_inputs), model(batch.candidate_inputs)
        scores = F.normalize(q, dim=1) @ F.normalize(c, dim=1).T
    _, grad = _loop_loss_and_grad(scores.tolist(), batch.labels.tolist(), loss.scale, loss.bias,
                                  True)  # fmt: skip
    expected = torch.tensor(grad, dtype=torch.float64)
    blocks = torch.block_diag(*[torch.ones(B // k, B // k)] * k).bool()
    accumulated = run_step(Accumulation(loss, k), model, batch).scores
    assert torch.allclose(accumulated[blocks], expected[blocks], rtol=0, atol=1e-14)
    assert bool((accumulated[~blocks] == 0).all())
    assert bool((expected[~blocks] != 0).all())  # what it loses: every cross-block pair
