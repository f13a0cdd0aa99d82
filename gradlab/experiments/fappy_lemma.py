"""FAPPY Lemma 1 measured: where dP_ij/ds_ik is non-zero, and its value.

For random configurations (a positive pair and its negatives), one negative's similarity is
swept across [-1, 1]; autograd gives the measured derivative, which is compared with the closed
form of :func:`gradlab.functional.fappy_gradient_closed_form` and with Lemma 1 as printed.
Positions are reported relative to the pair's bin: ``(s_ik - b_t) / Delta``.
"""

from __future__ import annotations

import numpy as np
import torch

from gradlab.functional import (
    false_positive_probability,
    fappy_gradient_closed_form,
    fappy_lemma1_as_printed,
)


def lemma1_gradient_support(
    configurations: int = 200, delta: float = 0.25, negatives: int = 6, seed: int = 0
) -> dict:
    """Measure dP_ij/ds_ik over random configurations; summarize support and value.

    Args:
        configurations: random similarity matrices measured (200 by default).
        delta: the histogram's bin width.
        negatives: negatives per configuration (two positives besides).
        seed: seeds the configurations.
    """
    generator = torch.Generator().manual_seed(seed)
    size = negatives + 2
    labels = torch.tensor([0, 0] + [1] * negatives)
    positions, measured, closed, printed = [], [], [], []
    for _ in range(configurations):
        similarities = torch.rand(size, size, generator=generator, dtype=torch.float64) * 1.8 - 0.9
        similarities = (similarities + similarities.T) / 2
        similarities.fill_diagonal_(1.0)
        pair = similarities[0, 1].item()
        target = float(torch.rand(1, generator=generator).item() * 2 - 1)
        similarities[0, 2] = similarities[2, 0] = target
        leaf = similarities.clone().requires_grad_(True)
        probability, _ = false_positive_probability(
            leaf, labels, delta, pairs=(torch.tensor([0]), torch.tensor([1]))
        )
        (grad,) = torch.autograd.grad(probability.sum(), leaf)
        lower = -1.0 + np.floor((pair + 1.0) / delta) * delta
        positions.append((target - lower) / delta)
        measured.append(grad[0, 2].item())
        closed.append(fappy_gradient_closed_form(pair, target, delta, negatives))
        printed.append(fappy_lemma1_as_printed(pair, target, delta))
    positions_arr = np.array(positions)
    measured_arr = np.array(measured)
    nonzero = np.abs(measured_arr) > 1e-12
    in_pair_bin = (positions_arr >= 0) & (positions_arr < 1)
    in_bin_below = (positions_arr >= -1) & (positions_arr < 0)
    return {
        "delta": delta,
        "negatives": negatives,
        "configurations": configurations,
        "position": positions,
        "measured": measured,
        "closed_form": closed,
        "lemma_as_printed": printed,
        "max_abs_closed_form_error": float(np.max(np.abs(measured_arr - np.array(closed)))),
        "nonzero_share_in_pair_bin": float(nonzero[in_pair_bin].mean()),
        "nonzero_share_in_bin_below": float(nonzero[in_bin_below].mean()),
        "nonzero_share_elsewhere": float(nonzero[~(in_pair_bin | in_bin_below)].mean()),
        "sign_of_nonzero": "positive" if np.all(measured_arr[nonzero] > 0) else "mixed",
        "lemma_value_matches": bool(np.allclose(measured_arr, printed, atol=1e-9)),
    }


