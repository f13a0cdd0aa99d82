"""A quantity that logs a fixed table of values (NaN and infinities included), step by step.

The table is the reference the sink tests compare every backend with: it is written here, not
computed by gradlab.
"""

import math

import torch

from gradlab.monitor import Quantity

NAN, INF = math.nan, math.inf
TABLE = [
    {"value_a": 0.25, "value_b": -INF, "value_c": 3.0},
    {"value_a": NAN, "value_b": 2.0, "value_c": 1e-300},
    {"value_a": INF, "value_b": -1.5, "value_c": NAN},
]


class FixedTable(Quantity):
    """Returns ``TABLE[i]`` on its i-th computation."""

    name = "fixed_table"
    keys = tuple(TABLE[0])
    warns_if_not_finite = False  # its NaN and infinities are what the sinks must carry

    def __init__(self, schedule=None):
        super().__init__(schedule)
        self.calls = 0

    def compute(self, batch):
        row = TABLE[self.calls]
        self.calls += 1
        device = batch.embeddings.device
        return {key: torch.tensor(value, dtype=torch.float64, device=device)
                for key, value in row.items()}  # fmt: skip


def same(a: float, b: float) -> bool:
    """Equal, with NaN equal to NaN."""
    return (math.isnan(a) and math.isnan(b)) or a == b
