"""Sentences and table cells from per-seed values: mean +- std, and whether a gap exceeds it.

Rendering only: the numbers come from :mod:`gradlab.experiments`; these helpers format them and
say in words whether two settings differ by more than their seed spread.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Sequence


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


def cell(values: Sequence[float], digits: int = 3) -> str:
    """``"mean ± std"`` of per-seed values.

    Example:
        >>> cell([0.25, 0.35])
        '0.300 ± 0.050'
    """
    mean, std = mean_std(values)
    return f"{mean:.{digits}f} ± {std:.{digits}f}"


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


def trend(values_per_seed: Sequence[Sequence[float]], sizes: Sequence[int], name: str) -> str:
    """How a per-seed curve moves from its first to its last point, against its spread.

    Example:
        >>> trend([[0.3, 0.2], [0.32, 0.21]], [16, 1024], "P")
        'P falls from 0.310 ± 0.010 (m=16) to 0.205 ± 0.005 (m=1024), more than the seed spread'
    """
    first = [run[0] for run in values_per_seed]
    last = [run[-1] for run in values_per_seed]
    mean_first, mean_last = mean_std(first)[0], mean_std(last)[0]
    if not separated(first, last):
        verb = "stays within the seed spread"
        return (
            f"{name} {verb}: {cell(first)} at m={sizes[0]}, {cell(last)} at m={sizes[-1]}"
        )
    verb = "rises" if mean_last > mean_first else "falls"
    return (
        f"{name} {verb} from {cell(first)} (m={sizes[0]}) to {cell(last)} (m={sizes[-1]}), "
        "more than the seed spread"
    )
