"""The tempered sigmoid of SmoothAP and its slope.

Bleeker & de Rijke (2022), appendix A, Eq. 2, 3 and 7 (Eq. 6, 7 and 11 of the long appendix):
``G(x; tau) = 1 / (1 + exp(-x / tau))`` and its derivative ``dG/dx = G (1 - G) / tau``, which
the papers call ``sim(D_ij, tau)``.
"""

from __future__ import annotations

import torch

from gradlab.validation import check_positive_finite


def tempered_sigmoid(x: torch.Tensor, tau: float = 0.01) -> torch.Tensor:
    """The smoothed step ``G(x; tau)`` (Bleeker & de Rijke 2022, App. A, Eq. 2).

    Example:
        >>> tempered_sigmoid(torch.tensor([0.0, 0.05]), tau=0.01)
        tensor([0.5000, 0.9933])
    """
    tau = check_positive_finite("tau", tau)
    return torch.sigmoid(x / tau)


def sigmoid_slope(x: torch.Tensor, tau: float = 0.01) -> torch.Tensor:
    """The slope ``dG/dx = G (1 - G) / tau`` (Bleeker & de Rijke 2022, Eq. 3, 7).

    Computed as ``sigmoid(x/tau) * sigmoid(-x/tau) / tau`` so that ``1 - G`` never cancels.

    Example:
        >>> sigmoid_slope(torch.tensor([0.0]), tau=0.01)
        tensor([25.])
    """
    tau = check_positive_finite("tau", tau)
    scaled = x / tau
    return torch.sigmoid(scaled) * torch.sigmoid(-scaled) / tau
