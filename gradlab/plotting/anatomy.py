"""The gradient-anatomy comparison: which negatives SmoothAP, VSE++ and NT-Xent send gradient to.

Reads the dict of :func:`gradlab.experiments.gradient_anatomy.measure` (or its JSON file) and
computes nothing but means of the stored per-query values.
"""

from __future__ import annotations

import math
from pathlib import Path

import matplotlib.pyplot as plt
from matplotlib.ticker import FuncFormatter

from gradlab.plotting.style import apply_style, load_results, save_figure, series_style

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


def plot_anatomy_comparison(source: dict | str | Path, path: str | Path) -> Path:
    """Rows: checkpoints; columns: losses. Each panel: mean share of a query's negative gradient
    mass at each negative rank (1 = hardest), image->caption solid, caption->image dashed.

    The shares are drawn whenever the negatives carry any gradient, also when every entry is
    below the anatomy's thresholds (then the text box reads 0 active and gives max |dL/dS|)."""
    results = load_results(source)
    checkpoints = results["checkpoints"]
    names = list(checkpoints[0]["losses"])
    apply_style()
    figure, axes = plt.subplots(len(checkpoints), len(names), squeeze=False,
                                figsize=(4.6 * len(names), 3.9 * len(checkpoints)),
                                sharex=True, sharey=True)  # fmt: skip
    for row, checkpoint in enumerate(checkpoints):
        for column, name in enumerate(names):
            axis = axes[row][column]
            record = checkpoint["losses"][name]
            for index, (direction, label) in enumerate(DIRECTIONS.items()):
                shares = record[direction]["mass_share_by_rank"]
                points = [(rank, share) for rank, share in enumerate(shares, 1)
                          if isinstance(share, (int, float)) and math.isfinite(share)]  # fmt: skip
                if points:
                    style = series_style(index)
                    axis.plot(*zip(*points, strict=True), label=label, color=style["color"],
                              linestyle=style["linestyle"], marker=style["marker"],
                              markersize=3.5, linewidth=1.4)  # fmt: skip
            if not axis.lines:
                axis.text(0.5, 0.25, "no negative receives any gradient", ha="center",
                          transform=axis.transAxes, fontsize=9, color="0.35")  # fmt: skip
            axis.set_xscale("log")
            axis.xaxis.set_major_formatter(FuncFormatter(lambda value, _: f"{value:g}"))
            axis.set_ylim(-0.03, 1.03)
            axis.set_title(f"{name}, after {checkpoint['steps']} steps", fontsize=10)
            axis.text(0.97, 0.62, anatomy_summary(record), transform=axis.transAxes, ha="right",
                      va="center", fontsize=7, bbox={"facecolor": "white", "alpha": 0.85,
                                                  "edgecolor": "0.8"})  # fmt: skip
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
    figure.legend(handles, labels, loc="lower center", ncol=2, frameon=False)
    figure.suptitle("Where each loss sends its negative gradient: one held-out batch (10 images x "
                    "50 captions) of a dual encoder trained with NT-Xent, same scores for every "
                    "loss", fontsize=11)  # fmt: skip
    figure.tight_layout(rect=(0, 0.05, 1, 0.96))
    return save_figure(figure, path)
