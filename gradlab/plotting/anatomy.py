"""The gradient-anatomy comparison: which negatives SmoothAP, VSE++ and NT-Xent send gradient to.

Reads the dict of :func:`gradlab.experiments.gradient_anatomy.measure` (or its JSON file) and
computes nothing but means of the stored per-query values.
"""

from __future__ import annotations

import math
from pathlib import Path

import matplotlib.pyplot as plt

from gradlab.functional.gradient_anatomy import DEFAULT_ABSOLUTE_THRESHOLD
from gradlab.plotting.style import (
    apply_style,
    load_results,
    log_scale,
    save_figure,
    series_style,
)

DIRECTIONS = {"i2t": "image -> caption", "t2i": "caption -> image"}


def _mean(values: list) -> float:
    finite = [v for v in values if isinstance(v, (int, float)) and math.isfinite(v)]
    return sum(finite) / len(finite) if finite else math.nan


def anatomy_summary(record: dict) -> str:
    """One line per direction: active negatives per query and queries without gradient."""
    lines = []
    for direction in DIRECTIONS:
        part = record[direction]
        lines.append(
            f"{direction}: {_mean(part['active_negatives']):.2g} of "
            f"{part['negatives_per_query']} negatives active,\n"
            f"  {part['queries_without_gradient']}/{part['queries']} queries without gradient, "
            f"max |dL/dS| {part['largest_abs_grad']:.1g}"
        )
    return "\n".join(lines)


def floor(results: dict) -> float:
    """The numerical floor of a comparison: its anatomy's absolute threshold on |dL/dS|
    (:data:`gradlab.functional.gradient_anatomy.DEFAULT_ABSOLUTE_THRESHOLD` unless the results
    name their own). A direction whose largest |dL/dS| is below it carries rounding noise, not
    a distribution.

    Example:
        >>> floor({"settings": {"absolute_threshold": 1e-10}})
        1e-10
    """
    return float(results.get("settings", {}).get("absolute_threshold",
                                                  DEFAULT_ABSOLUTE_THRESHOLD))  # fmt: skip


def _panel_summary(record: dict, below: float) -> str:
    """Two short lines per panel: active negatives, queries without gradient, largest |dL/dS|
    (and whether it is below the floor ``below``, so not drawn)."""
    lines = []
    for direction in DIRECTIONS:
        part = record[direction]
        largest = part["largest_abs_grad"]
        note = " < floor: not drawn" if 0 < largest < below else ""
        lines.append(f"{direction}: {_mean(part['active_negatives']):.2g}/"
                     f"{part['negatives_per_query']} active, "
                     f"{part['queries_without_gradient']}/{part['queries']} without,\n"
                     f"  max |dL/dS| {largest:.1g}{note}")  # fmt: skip
    return "\n".join(lines)


def plot_anatomy_comparison(source: dict | str | Path, path: str | Path) -> Path:
    """Rows: checkpoints; columns: losses. Each panel: mean share of a query's negative gradient
    mass at each negative rank (1 = hardest), image->caption solid, caption->image dashed.

    A direction whose largest |dL/dS| is below the comparison's numerical :func:`floor` (the
    anatomy's absolute threshold, 1e-10) is not drawn: how rounding noise of 1e-14 spreads over
    the negatives is no result. The panel's text gives its largest |dL/dS| instead."""
    results = load_results(source)
    checkpoints = results["checkpoints"]
    names = list(checkpoints[0]["losses"])
    below = floor(results)
    apply_style()
    figure, axes = plt.subplots(len(checkpoints), len(names), squeeze=False,
                                figsize=(4.2 * len(names), 4.0 * len(checkpoints)),
                                sharex=True, sharey=True, layout="constrained")  # fmt: skip
    for row, checkpoint in enumerate(checkpoints):
        for column, name in enumerate(names):
            axis = axes[row][column]
            record = checkpoint["losses"][name]
            for index, (direction, label) in enumerate(DIRECTIONS.items()):
                if record[direction]["largest_abs_grad"] < below:
                    continue
                shares = record[direction]["mass_share_by_rank"]
                points = [(rank, share) for rank, share in enumerate(shares, 1)
                          if isinstance(share, (int, float)) and math.isfinite(share)]  # fmt: skip
                if points:
                    style = series_style(index)
                    axis.plot(*zip(*points, strict=True), label=label, color=style["color"],
                              linestyle=style["linestyle"], marker=style["marker"],
                              markersize=3.5, linewidth=1.4)  # fmt: skip
            if not axis.lines:
                axis.text(0.5, 0.2, f"no negative receives gradient\nabove the floor {below:g}",
                          ha="center", transform=axis.transAxes, fontsize=10,
                          color="0.35")  # fmt: skip
            log_scale(axis, "x")
            axis.set_ylim(-0.03, 1.03)
            axis.set_title(f"{name}, after {checkpoint['steps']} steps", fontsize=11)
            axis.text(0.97, 0.62, _panel_summary(record, below), transform=axis.transAxes,
                      ha="right", va="center", fontsize=9.5,
                      bbox={"facecolor": "white", "alpha": 0.85, "edgecolor": "0.8"})  # fmt: skip
            if row == len(checkpoints) - 1:
                axis.set_xlabel("negative's rank by score (1 = hardest)")
            if column == 0:
                axis.set_ylabel("share of the negative gradient")
    handles, labels = [], []
    for axis in axes.flat:
        for handle, label in zip(*axis.get_legend_handles_labels(), strict=True):
            if label not in labels:
                handles.append(handle)
                labels.append(label)
    figure.legend(handles, labels, loc="outside lower center", ncol=2, frameon=False)
    figure.suptitle("Where each loss sends its negative gradient: one held-out batch (10 images x "
                    "50 captions)\nof a dual encoder trained with NT-Xent, same scores for every "
                    f"loss; |dL/dS| below {below:g} not drawn", fontsize=12)  # fmt: skip
    return save_figure(figure, path)
