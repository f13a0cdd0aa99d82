"""VSE++ max-violation, NT-Xent and SigLIP written with Python loops over plain floats.

Independent of gradlab (``math`` only): straight from Faghri et al. (VSE++, Eq. 5), SimCLR
(Eq. 1) and Zhai et al. (SigLIP, 2023, Eq. 1), with the
conventions of :mod:`gradlab.functional.score_losses` (rows are i2t queries, columns t2i).
Each loss comes with its gradient ``dL/dS`` derived by hand, not by autograd.
"""

from __future__ import annotations

import math


def _transpose(matrix):
    return [list(column) for column in zip(*matrix, strict=True)]


def _rows_max_violation(scores, positives, margin):
    """(sum of costs, number of positive pairs, gradient) with rows as queries."""
    rows, cols = len(scores), len(scores[0]) if scores else 0
    grad = [[0.0] * cols for _ in range(rows)]
    total, pairs = 0.0, 0
    for q in range(rows):
        negatives = [c for c in range(cols) if not positives[q][c]]
        hardest = None
        for c in negatives:  # first index among ties, as torch.max on CPU
            if hardest is None or scores[q][c] > scores[q][hardest]:
                hardest = c
        for p in range(cols):
            if not positives[q][p]:
                continue
            pairs += 1
            if hardest is None:
                continue
            cost = margin - scores[q][p] + scores[q][hardest]
            if cost > 0:
                total += cost
                grad[q][p] -= 1.0
                grad[q][hardest] += 1.0
    return total, pairs, grad


def _rows_info_nce(scores, positives, temperature):
    rows, cols = len(scores), len(scores[0]) if scores else 0
    grad = [[0.0] * cols for _ in range(rows)]
    total, queries = 0.0, 0
    for q in range(rows):
        members = [c for c in range(cols) if positives[q][c]]
        if not members:
            continue
        queries += 1
        # log-probabilities as (s - max s) / T - log sum exp(...): never top + log(normalizer),
        # which absorbs the log of the normalizer once |max s| / T passes about 1e16 (tied
        # scores at T = 1e-30 read as probabilities 1 and 1, not 1/2 and 1/2)
        top = max(scores[q])
        shifted = [(s - top) / temperature for s in scores[q]]
        log_normalizer = math.log(sum(math.exp(z) for z in shifted))
        total += -sum(shifted[p] - log_normalizer for p in members) / len(members)
        for c in range(cols):
            probability = math.exp(shifted[c] - log_normalizer)
            indicator = 1.0 / len(members) if positives[q][c] else 0.0
            grad[q][c] = (probability - indicator) / temperature
    return total, queries, grad


def score_loss(name, scores, positives, option, direction="both", reduction="mean"):
    """(loss, dL/dS) of ``name`` in ``("triplet", "nt_xent")`` as plain floats."""
    rows_loss = _rows_max_violation if name == "triplet" else _rows_info_nce
    rows, cols = len(scores), len(scores[0])
    loss, grad = 0.0, [[0.0] * cols for _ in range(rows)]
    for part in ("i2t", "t2i") if direction == "both" else (direction,):
        if part == "i2t":
            total, count, part_grad = rows_loss(scores, positives, option)
        else:
            total, count, part_grad = rows_loss(_transpose(scores), _transpose(positives), option)
            part_grad = _transpose(part_grad) if part_grad else [[0.0] * cols for _ in range(rows)]
        scale = 1.0 if reduction == "sum" else 1.0 / max(count, 1)
        loss += total * scale
        for q in range(rows):
            for c in range(cols):
                grad[q][c] += part_grad[q][c] * scale
    return loss, grad


def siglip_loss(scores, positives, scale, bias, reduction="mean"):
    """(loss, dL/dS) of SigLIP's sigmoid loss: ``-log sigmoid(z (t s + b))`` summed over every
    pair, ``z = +1`` for a positive and ``-1`` otherwise; ``"mean"`` divides by the rows."""
    rows, columns = len(scores), len(scores[0])
    weight = 1.0 if reduction == "sum" else 1.0 / rows
    total, grad = 0.0, [[0.0] * columns for _ in range(rows)]
    for q in range(rows):
        for c in range(columns):
            z = 1.0 if positives[q][c] else -1.0
            logit = scale * float(scores[q][c]) + bias
            total += math.log1p(math.exp(-z * logit))  # -log sigmoid(z logit)
            grad[q][c] = -z * scale / (1.0 + math.exp(z * logit)) * weight
    return total * weight, grad
