"""The tempered sigmoid of SmoothAP and its slope.

Bleeker & de Rijke (2022), appendix A, Eq. 2, 3 and 7 (Eq. 6, 7 and 11 of the long appendix):
``G(x; tau) = 1 / (1 + exp(-x / tau))`` and its derivative ``dG/dx = G (1 - G) / tau``, which
the papers call ``sim(D_ij, tau)``.
"""

from __future__ import annotations

import torch

from gradlab.validation import check_temperature, check_tensor


def _check(x: object, tau: object) -> float:
    """``x`` a real tensor, ``tau`` a temperature of at least ``1e-30``
    (:data:`gradlab.validation.SMALLEST_TEMPERATURE`): a smaller one rounds to 0 next to a
    float32 ``x`` (below about 1.4e-45), where ``0 / tau`` is ``0 / 0 = NaN``."""
    check_tensor("x", x, ndims=tuple(range(9)), kind="any_real")
    return check_temperature("tau", tau)


def tempered_sigmoid(x: torch.Tensor, tau: float = 0.01) -> torch.Tensor:
    """The smoothed step ``G(x; tau)`` (Bleeker & de Rijke 2022, App. A, Eq. 2).

    ``x`` is a real tensor and ``tau`` a finite number of at least ``1e-30``, as for
    :func:`gradlab.functional.smooth_ap`.

    Example:
        >>> import torch
        >>> from gradlab.functional import tempered_sigmoid
        >>> tempered_sigmoid(torch.tensor([0.0, 0.05]), tau=0.01)
        tensor([0.5000, 0.9933])
    """
    tau = _check(x, tau)
    return torch.sigmoid(x / tau)


def sigmoid_slope(x: torch.Tensor, tau: float = 0.01) -> torch.Tensor:
    """The slope ``dG/dx = G (1 - G) / tau`` (Bleeker & de Rijke 2022, Eq. 3, 7).

    Computed as ``sigmoid(x/tau) * sigmoid(-x/tau) / tau`` so that ``1 - G`` never cancels.
    ``x`` and ``tau`` as for :func:`tempered_sigmoid` (the peak ``1 / (4 tau)`` overflows
    float16 below ``tau`` of about 4e-6, as any value beyond its range does).

    Example:
        >>> import torch
        >>> from gradlab.functional import sigmoid_slope
        >>> sigmoid_slope(torch.tensor([0.0]), tau=0.01)
        tensor([25.])
    """
    tau = _check(x, tau)
    scaled = x / tau
    return torch.sigmoid(scaled) * torch.sigmoid(-scaled) / tau
