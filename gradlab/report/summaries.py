"""Sentences and table cells from per-seed values: mean +- std, and whether a gap exceeds it.

Rendering only: the numbers, and whether two settings differ by more than their seed spread,
come from :mod:`gradlab.experiments` (:mod:`gradlab.experiments.statistics`); these helpers
put them in words.
"""

from __future__ import annotations

from collections.abc import Sequence

from gradlab.experiments.statistics import mean_std, separated


def cell(values: Sequence[float], digits: int = 3) -> str:
    """``"mean ± std"`` of per-seed values.

    Example:
        >>> cell([0.25, 0.35])
        '0.300 ± 0.050'
    """
    mean, std = mean_std(values)
    return f"{mean:.{digits}f} ± {std:.{digits}f}"


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
