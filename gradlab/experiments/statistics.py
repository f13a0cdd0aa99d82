"""Per-seed statistics of the studies: mean +- std, and whether two settings are separated.

The studies keep every value per seed; these are the only reductions their verdicts use, so a
verdict is computed once, here, and the report only words it.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Sequence

__all__ = ["mean_std", "separated"]


def mean_std(values: Sequence[float]) -> tuple[float, float]:
    """Mean and population standard deviation (0 for one value), NaNs left out.

    Example:
        >>> mean_std([1.0, 2.0, 3.0])
        (2.0, 0.816496580927726)
    """
    kept = [float(v) for v in values if not math.isnan(float(v))]
    if not kept:
        return math.nan, math.nan
    return statistics.fmean(kept), statistics.pstdev(kept)


def separated(first: Sequence[float], second: Sequence[float]) -> bool:
    """Whether two settings' means differ by more than the sum of their seed stds.

    A plain, conservative reading for a handful of seeds (no test statistic is claimed).

    Example:
        >>> separated([0.1, 0.12, 0.11], [0.2, 0.21, 0.19]), separated([0.1, 0.3], [0.2, 0.25])
        (True, False)
    """
    mean_a, std_a = mean_std(first)
    mean_b, std_b = mean_std(second)
    return abs(mean_a - mean_b) > std_a + std_b
