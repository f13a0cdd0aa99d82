"""Analytic gradients against autograd and finite differences in float64."""

from __future__ import annotations

from collections.abc import Callable

import torch

from gradlab.functional import (
    HARMONIC_METHODS,
    false_positive_probability,
    fappy_gradient_closed_form,
    fastap,
    minibatch_gradient_matrix_form,
    minibatch_objective_terms,
    relaxed_tie_aware_ap,
    smooth_ap,
    smooth_ap_decomposition,
)


def _central_difference(
    function: Callable[[torch.Tensor], torch.Tensor], point: torch.Tensor
) -> torch.Tensor:
    """Central finite differences of a scalar function (step 1e-6), float64."""
    step = 1e-6
    flat = point.detach().flatten()
    grad = torch.zeros_like(flat)
    for index in range(flat.numel()):
        up, down = flat.clone(), flat.clone()
        up[index] += step
        down[index] -= step
        grad[index] = (function(up.view_as(point)) - function(down.view_as(point))) / (2 * step)
    return grad.view_as(point)


def _max_error(a: torch.Tensor, b: torch.Tensor) -> float:
    return (a - b).abs().max().item()


def smoothap_gradient_errors(generator: torch.Generator, trials: int) -> dict[str, float]:
    """SmoothAP: AD - CB decomposition vs autograd; exact backward vs autograd and FD.

    Each trial draws, in float64 from ``generator``, four queries and twenty vectors in eight
    dimensions (Gaussian, standard deviation 0.2, so that score differences are of the order of
    the temperature 0.05 and the sigmoid of Smooth-AP (Brown et al., 2020) is not saturated) and a
    positive mask with about a quarter positives, the first vector positive for every query.
    Returns the largest error of each check over ``trials``.
    """
    worst = {"decomposition_vs_autograd": 0.0, "exact_vs_autograd": 0.0, "exact_vs_fd": 0.0}
    for _ in range(trials):
        query = torch.randn(4, 8, generator=generator, dtype=torch.float64) * 0.2
        vectors = torch.randn(20, 8, generator=generator, dtype=torch.float64) * 0.2
        positives = torch.rand(4, 20, generator=generator) < 0.25
        positives[:, 0] = True
        parts = smooth_ap_decomposition(query, vectors, positives, tau=0.05)
        leaf = query.clone().requires_grad_(True)
        (autograd_grad,) = torch.autograd.grad(
            smooth_ap(leaf @ vectors.T, positives, 0.05).sum(), leaf
        )
        scores = (query @ vectors.T).requires_grad_(True)
        (exact,) = torch.autograd.grad(smooth_ap(scores, positives, 0.05).sum(), scores)
        (plain,) = torch.autograd.grad(
            smooth_ap(scores, positives, 0.05, backward="autograd").sum(), scores
        )
        numeric = _central_difference(
            lambda s, mask=positives: smooth_ap(s, mask, 0.05).sum(), scores
        )
        for key, error in (
            ("decomposition_vs_autograd", _max_error(parts.grad, autograd_grad)),
            ("exact_vs_autograd", _max_error(exact, plain)),
            ("exact_vs_fd", _max_error(exact, numeric)),
        ):
            worst[key] = max(worst[key], error)
    return worst


def tie_aware_gradient_errors(generator: torch.Generator, trials: int) -> dict[str, float]:
    """He et al. (2018), Eq. 37 (matrix form) vs autograd; relaxed AP vs finite differences.

    Each trial draws, in float64 from ``generator``, eight relaxed codes of six bits (tanh of
    a Gaussian) with labels from three classes, and for the relaxed AP seven distance bins: a
    count in [0, 3) per bin and a positive count that is a uniform share of it. Returns the
    largest error of each check over ``trials``.
    """
    worst: dict[str, float] = {}
    for _ in range(trials):
        codes = torch.tanh(2.0 * torch.randn(8, 6, generator=generator, dtype=torch.float64))
        labels = torch.randint(0, 3, (8,), generator=generator)
        for objective in ("ap", "dcg"):
            for method in HARMONIC_METHODS:
                leaf = codes.clone().requires_grad_(True)
                _, terms = minibatch_objective_terms(leaf, labels, objective, method)
                (expected,) = torch.autograd.grad(terms.nan_to_num(0.0).sum() / 8, leaf)
                got = minibatch_gradient_matrix_form(codes, labels, objective, method)
                key = f"eq37_{objective}_{method}_vs_autograd"
                worst[key] = max(worst.get(key, 0.0), _max_error(got, expected))
        counts = torch.rand(1, 7, generator=generator, dtype=torch.float64) * 3
        positive = counts * torch.rand(1, 7, generator=generator, dtype=torch.float64)
        for method in HARMONIC_METHODS:
            leaf = positive.clone().requires_grad_(True)
            (auto,) = torch.autograd.grad(relaxed_tie_aware_ap(leaf, counts, method).sum(), leaf)
            numeric = _central_difference(
                lambda p, m=method, c=counts: relaxed_tie_aware_ap(p, c, m).sum(), positive
            )
            key = f"relaxed_ap_{method}_vs_fd"
            worst[key] = max(worst.get(key, 0.0), _max_error(auto, numeric))
    return worst


def histogram_loss_gradient_errors(generator: torch.Generator, trials: int) -> dict[str, float]:
    """FAPPY closed-form dP/ds_ik vs autograd; FastAP autograd vs finite differences.

    Seven items in three classes of two, two and three (every item has a positive and
    negatives). Each trial draws, in float64 from ``generator``, a symmetric similarity matrix
    with unit diagonal whose off-diagonal entries are the mean of two uniform draws on [-1, 1]
    (so every bin of width 0.25 of Zhong et al.'s histogram is reached), and seven embeddings in
    four dimensions for FastAP. Returns the largest error of each check over ``trials``.
    """
    worst = {"fappy_closed_form_vs_autograd": 0.0, "fastap_vs_fd": 0.0}
    labels = torch.tensor([0, 0, 1, 1, 2, 2, 2])
    for _ in range(trials):
        similarities = torch.rand(7, 7, generator=generator, dtype=torch.float64) * 2 - 1
        similarities = (similarities + similarities.T) / 2
        similarities.fill_diagonal_(1.0)
        leaf = similarities.clone().requires_grad_(True)
        probabilities, (first, second) = false_positive_probability(leaf, labels, 0.25)
        (grad,) = torch.autograd.grad(probabilities[0], leaf)
        i, j = int(first[0]), int(second[0])
        negatives = [k for k in range(7) if labels[k] != labels[i]]
        for k in negatives:
            closed = fappy_gradient_closed_form(
                similarities[i, j].item(), similarities[i, k].item(), 0.25, len(negatives)
            )
            worst["fappy_closed_form_vs_autograd"] = max(
                worst["fappy_closed_form_vs_autograd"], abs(grad[i, k].item() - closed)
            )
        embeddings = torch.randn(7, 4, generator=generator, dtype=torch.float64)
        leaf = embeddings.clone().requires_grad_(True)
        (auto,) = torch.autograd.grad(fastap(leaf, labels).nansum(), leaf)
        numeric = _central_difference(lambda e: fastap(e, labels).nansum(), embeddings)
        worst["fastap_vs_fd"] = max(worst["fastap_vs_fd"], _max_error(auto, numeric))
    return worst


def gradient_error_table(seed: int = 0, trials: int = 10) -> dict[str, dict[str, float]]:
    """Every hand-written or closed-form gradient of gradlab against an independent one."""
    generator = torch.Generator().manual_seed(seed)
    return {
        "SmoothAP (Brown et al., 2020; Bleeker & de Rijke, 2022)": smoothap_gradient_errors(
            generator, trials
        ),
        "tie-aware relaxations (He et al., 2018)": tie_aware_gradient_errors(generator, trials),
        "FAPPY (Zhong, Li & Li, Lemma 1 corrected) and FastAP (Cakir et al., 2019)": (
            histogram_loss_gradient_errors(generator, trials)
        ),
    }
