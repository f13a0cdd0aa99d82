"""Report section: analytic gradients against autograd in float64 (issue 8, section 2)."""

from __future__ import annotations

import torch

from gradlab.functional import smooth_ap, smooth_ap_decomposition


def smoothap_gradient_errors(seed: int = 0, trials: int = 20) -> dict[str, float]:
    """Largest errors of the exact SmoothAP backward and of the ``AD - CB`` decomposition.

    Each trial draws a random cross-modal problem (float64) and compares: the decomposition's
    ``grad`` with autograd through :func:`smooth_ap`; the exact backward with plain autograd;
    and the exact backward with central finite differences.
    """
    generator = torch.Generator().manual_seed(seed)
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
        worst["decomposition_vs_autograd"] = max(
            worst["decomposition_vs_autograd"], (parts.grad - autograd_grad).abs().max().item()
        )
        scores = (query @ vectors.T).requires_grad_(True)
        (exact,) = torch.autograd.grad(smooth_ap(scores, positives, 0.05).sum(), scores)
        (plain,) = torch.autograd.grad(
            smooth_ap(scores, positives, 0.05, backward="autograd").sum(), scores
        )
        worst["exact_vs_autograd"] = max(
            worst["exact_vs_autograd"], (exact - plain).abs().max().item()
        )
        step = 1e-6
        numeric = torch.zeros_like(scores)
        flat = scores.detach().flatten()
        for index in range(flat.numel()):
            up, down = flat.clone(), flat.clone()
            up[index] += step
            down[index] -= step
            numeric.view(-1)[index] = (
                smooth_ap(up.view_as(scores), positives, 0.05).sum()
                - smooth_ap(down.view_as(scores), positives, 0.05).sum()
            ) / (2 * step)
        worst["exact_vs_fd"] = max(worst["exact_vs_fd"], (exact - numeric).abs().max().item())
    return worst
