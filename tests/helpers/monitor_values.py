"""The Monitor's shared-path quantities and their values on one batch, without a Monitor."""

from __future__ import annotations

import torch

from gradlab.monitor import (
    Decomposition,
    EmbeddingGradNorm,
    EmbeddingNorms,
    GradientAgreement,
    Loss,
    OperatingRegion,
    RelaxationGap,
    WeightedGradientCounts,
)

QUANTITIES = (Loss, EmbeddingNorms, EmbeddingGradNorm, OperatingRegion, WeightedGradientCounts,
              Decomposition, RelaxationGap, GradientAgreement)  # fmt: skip
"""The quantities that read the loss's record when there is one."""


def logged_values(batch, quantities=QUANTITIES):
    """Each quantity computed once on ``batch`` (a BatchView), as Python floats by key."""
    values = {}
    with torch.no_grad():
        for cls in quantities:
            values.update(cls().compute(batch))
    return {name: value.item() for name, value in values.items()}
