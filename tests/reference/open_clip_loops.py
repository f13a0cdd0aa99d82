"""Float64 loop references of open_clip's losses' logits and gradients (ClipLoss: Radford et
al. 2021, Fig. 3's pseudocode; SigLipLoss: Zhai et al. 2023, Algorithm 1), written from the papers,
never from gradlab's or open_clip's code."""

from __future__ import annotations

import math

import torch


def logits64(queries, candidates, scale, bias=0.0):
    """``scale x <q, c> + bias`` for every query x candidate, as nested lists of floats."""
    return [[scale * sum(float(q) * float(c) for q, c in zip(query, candidate, strict=True))
             + bias for candidate in candidates] for query in queries]  # fmt: skip


def cross_entropy_grad(logits, positive_of, weight):
    """dL/dlogits of ``weight x mean_i CE(row i, positive_of(i))``, float64 loops."""
    grad = []
    for row, values in enumerate(logits):
        top = max(values)
        exps = [math.exp(value - top) for value in values]
        total = sum(exps)
        grad.append([weight * (exp / total - (column == positive_of(row))) / len(logits)
                     for column, exp in enumerate(exps)])  # fmt: skip
    return torch.tensor(grad, dtype=torch.float64)


def sigmoid_grad(logits, positive_block_columns, batch):
    """dL/dlogits of SigLIP's ``-sum log sigmoid(label x logit) / B``, float64 loops."""
    grad = []
    for row, values in enumerate(logits):
        line = []
        for column, value in enumerate(values):
            label = 1.0 if (column < positive_block_columns and column == row) else -1.0
            line.append(-label / (1.0 + math.exp(label * value)) / batch)
        grad.append(line)
    return torch.tensor(grad, dtype=torch.float64)
