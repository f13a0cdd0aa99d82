"""Tie-aware analyses: the harmonic-vs-log error, and relaxed vs exact metrics.

Each function returns JSON-ready dicts; :mod:`gradlab.plotting.tie_aware` draws them.
"""

from __future__ import annotations

import numpy as np
import torch

from gradlab.errors import GradlabError
from gradlab.functional import (
    HARMONIC_METHODS,
    harmonic_log_error,
    minibatch_objective_terms,
    relaxed_hamming_distances,
    tie_aware_ap,
    tie_aware_dcg,
)
from gradlab.progress import progress
from gradlab.validation import check_positive_int

TOLERANCE = 1e-3


def harmonic_error_surface(max_before: int = 512, max_in_bin: int = 512) -> dict:
    """``ln((a+n)/a) - (H(a+n) - H(a))`` over ``a = N_{d-1}`` and ``n = n_d`` (He et al.,
    2018, Eq. 21)."""
    before = np.unique(np.round(np.geomspace(1, max_before, 48))).astype(float)
    in_bin = np.unique(np.round(np.geomspace(1, max_in_bin, 48))).astype(float)
    grid_a, grid_n = np.meshgrid(before, in_bin, indexing="ij")
    surfaces = {}
    for method in ("log", "midpoint"):
        result = harmonic_log_error(grid_a, grid_n, method)
        surfaces[method] = {"error": result.error.tolist()}
    log_result = harmonic_log_error(grid_a, grid_n, "log")
    worst_ratio = float(np.max(log_result.error / log_result.paper_bound))
    return {
        "before": before.tolist(),
        "in_bin": in_bin.tolist(),
        "surfaces": surfaces,
        "paper_bound": log_result.paper_bound.tolist(),
        "asymptotic": log_result.asymptotic.tolist(),
        "largest_error_over_bound": worst_ratio,
        "bound_holds": bool(np.all(log_result.error <= log_result.paper_bound)),
    }


def _class_codes(bits: int, size: int, classes: int, generator: torch.Generator):
    centres = torch.randn(classes, bits, generator=generator, dtype=torch.float64)
    labels = torch.arange(size) % classes
    raw = centres[labels] + 1.2 * torch.randn(size, bits, generator=generator, dtype=torch.float64)
    return raw, labels


def _exact_metrics(raw: torch.Tensor, labels: torch.Tensor) -> tuple[float, float]:
    distances = relaxed_hamming_distances(torch.sign(raw))
    size = len(labels)
    keep = ~torch.eye(size, dtype=torch.bool)
    scores = -distances[keep].view(size, size - 1)
    relevant = (labels.unsqueeze(0) == labels.unsqueeze(1))[keep].view(size, size - 1)
    ap = tie_aware_ap(scores, relevant).nanmean().item()
    dcg = tie_aware_dcg(scores, relevant.double()).mean().item()
    return ap, dcg


def relaxation_gap_against_scale(
    quick: bool = False, seed: int = 0, items: int = 64, classes: int = 4
) -> dict:
    """Relaxed AP_r / DCG_r against exact AP_T / DCG_T as the tanh scale grows.

    Random class-structured codes (``items`` codes of ``classes`` classes: 64 of 4 in the
    report; fewer make a miniature for tests) of 12, 24, 32 and 48 bits (12 and 24 when
    ``quick``); the exact metrics use ``sign(raw)`` and integer Hamming distances, the relaxed
    ones ``tanh(scale raw)``. For each variant, ``settles_at`` is the smallest scale from which
    the gap stays within ``1e-3`` for every larger scale tried (``None``: never).

    Raises:
        GradlabError: ``items`` or ``classes`` not a positive integer, or ``classes > items``
            (checked before any work).
    """
    check_positive_int("items", items)
    check_positive_int("classes", classes)
    if classes > items:
        raise GradlabError(f"classes must be at most items ({items}); got {classes!r}")
    generator = torch.Generator().manual_seed(seed)
    scales = [float(s) for s in np.geomspace(0.5, 1e5, 12 if quick else 30)]
    bit_counts = [12, 24] if quick else [12, 24, 32, 48]
    results = {
        "scales": scales,
        "bits": bit_counts,
        "items": items,
        "classes": classes,
        "tolerance": TOLERANCE,
        "runs": [],
    }
    for bits in progress(bit_counts, desc="tie-aware: relaxed vs exact AP/DCG per code length"):
        raw, labels = _class_codes(bits, items, classes, generator)
        exact_ap, exact_dcg = _exact_metrics(raw, labels)
        for objective, exact in (("ap", exact_ap), ("dcg", exact_dcg)):
            for method in HARMONIC_METHODS:
                gaps = []
                for scale in scales:
                    _, terms = minibatch_objective_terms(
                        torch.tanh(scale * raw), labels, objective, method
                    )
                    gaps.append(abs(terms.nanmean().item() - exact))
                within = [gap <= TOLERANCE for gap in gaps]
                settles = next((scales[k] for k in range(len(scales)) if all(within[k:])), None)
                results["runs"].append(
                    {
                        "bits": bits,
                        "objective": objective,
                        "method": method,
                        "exact": exact,
                        "gaps": gaps,
                        "settles_at": settles,
                        "gap_at_largest_scale": gaps[-1],
                    }
                )
    return results


