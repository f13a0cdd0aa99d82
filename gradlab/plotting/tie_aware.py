"""Figures of the tie-aware analyses (:mod:`gradlab.experiments.tie_aware`)."""

from __future__ import annotations

from pathlib import Path

import matplotlib.pyplot as plt
import numpy as np
from matplotlib.colors import LogNorm

from gradlab.plotting.style import apply_style, load_results, save_figure, series_style


def plot_harmonic_error(source: dict | str | Path, path: str | Path) -> Path:
    """Error surface of ln vs the harmonic partial sum, the paper's bound, and the midpoint."""
    results = load_results(source)
    apply_style()
    before, in_bin = np.array(results["before"]), np.array(results["in_bin"])
    log_error = np.array(results["surfaces"]["log"]["error"])
    bound = np.array(results["paper_bound"])
    figure, (left, right) = plt.subplots(1, 2, figsize=(12, 5), layout="constrained")
    image = left.pcolormesh(
        in_bin, before, log_error, norm=LogNorm(), shading="auto", cmap="viridis"
    )
    contours = left.contour(in_bin, before, bound, levels=[1e-4, 1e-3, 1e-2, 1e-1], colors="white")
    left.clabel(contours, fmt=lambda v: f"{v:g}", fontsize=10)
    left.set(
        xscale="log",
        yscale="log",
        xlabel="items in the bin, $n_d$",
        ylabel="items before the bin, $N_{d-1}$",
        title="Error of $\\ln((N+n)/N)$ for $H(N+n) - H(N)$\n(white: the bound $n/(2N^2)$)",
    )
    figure.colorbar(image, ax=left, label="ln-sum error")
    figure.get_layout_engine().set(wspace=0.08)  # the colour bar's label clear of the right panel
    # blue, orange, green, purple: n_d = 8 and 512 no longer two oranges (palette's 1 and 3)
    columns = dict.fromkeys(int(np.argmin(np.abs(in_bin - n))) for n in (1, 8, 64, 512))
    for index, column in zip((0, 1, 2, 4), columns, strict=False):  # a coarse grid: fewer
        color = series_style(index)["color"]
        right.plot(
            before, log_error[:, column], color=color, label=f"$n_d$ = {in_bin[column]:.0f}"
        )
        right.plot(before, bound[:, column], "--", color=color, alpha=0.6)
        midpoint = np.abs(np.array(results["surfaces"]["midpoint"]["error"])[:, column])
        right.plot(before, midpoint, ":", color=color)
    right.set(
        xscale="log",
        yscale="log",
        xlabel="items before the bin, $N_{d-1}$",
        ylabel="absolute error",
        title="Log (solid), bound $n/(2N^2)$ (dashed),\nmidpoint (dotted)",
    )
    right.legend(fontsize=10)
    return save_figure(figure, path)


def plot_relaxation_gap(source: dict | str | Path, path: str | Path) -> Path:
    """|relaxed - exact| for AP and DCG against the tanh scale, one panel per code length."""
    results = load_results(source)
    apply_style()
    bits = results["bits"]
    # squeeze=False: one code length is a 2 x 1 grid (atleast_2d made it 1 x 2)
    figure, axes = plt.subplots(
        2, len(bits), figsize=(4 * len(bits), 7.5), sharex=True, sharey=True, squeeze=False
    )
    styles = {"log": "-", "midpoint": "--", "exact": ":"}
    for row, objective in enumerate(("ap", "dcg")):
        for column, bit_count in enumerate(bits):
            axis = axes[row, column]
            for run in results["runs"]:
                if run["bits"] != bit_count or run["objective"] != objective:
                    continue
                gaps = np.maximum(np.array(run["gaps"]), 1e-17)
                axis.plot(results["scales"], gaps, styles[run["method"]], label=run["method"])
            axis.axhline(results["tolerance"], color="grey", linewidth=1)
            axis.set(xscale="log", yscale="log", title=f"{objective.upper()}, {bit_count} bits")
            if column == 0:
                axis.set_ylabel(f"|{objective.upper()}_r - {objective.upper()}_T|")
            if row == 1:
                axis.set_xlabel("tanh scale alpha")
    axes[0, 0].legend(title="harmonic stand-in")
    # results saved before the sizes were recorded ran the report's 64 items of 4 classes
    items, classes = results.get("items", 64), results.get("classes", 4)
    figure.suptitle(
        f"Relaxed vs exact tie-aware metrics ({items} items, {classes} classes); "
        f"grey: {results['tolerance']:g}"
    )
    return save_figure(figure, path)
