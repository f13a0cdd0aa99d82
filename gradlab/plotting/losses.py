"""Figures of the other AP losses: FAPPY's Lemma 1 measured, and loss cost against batch size."""

from __future__ import annotations

from pathlib import Path

import matplotlib.pyplot as plt
import numpy as np

from gradlab.plotting.style import apply_style, load_results, save_figure


def plot_lemma1(source: dict | str | Path, path: str | Path) -> Path:
    """Measured dP_ij/ds_ik against the position of s_ik relative to the pair's bin."""
    results = load_results(source)
    apply_style()
    figure, axis = plt.subplots(figsize=(9, 4.8))
    position = np.array(results["position"])
    order = np.argsort(position)
    axis.axvspan(0, 1, color="C2", alpha=0.12, label="pair's bin [b_t, b_t+1] (Lemma 1's support)")
    axis.axvspan(-1, 0, color="C1", alpha=0.12, label="bin below [b_t-1, b_t]")
    axis.scatter(position, results["measured"], s=14, color="C0", label="autograd", zorder=3)
    axis.scatter(position[order], np.array(results["closed_form"])[order], s=4, color="black",
                 label="closed form (h_left or h_right)/(|N| Delta)", zorder=4)  # fmt: skip
    axis.scatter(position, results["lemma_as_printed"], s=8, marker="x", color="C3",
                 label="Lemma 1 as printed: -h_right")  # fmt: skip
    # [-3, 3]: the two bins and their neighbours; a negative farther out is drawn (the range
    # widened) when a value there is not 0, else counted under the axis
    low, high = -3.0, 3.0
    outside = (position < low) | (position > high)
    values = [np.asarray(results[key]) for key in ("measured", "closed_form", "lemma_as_printed")]
    if any(np.any(value[outside] != 0) for value in values):
        low, high = min(low, position.min() - 0.25), max(high, position.max() + 0.25)
        outside = np.zeros_like(outside)
    beyond = (f"\n{int(outside.sum())} negatives beyond [-3, 3], each with every value 0, not "
              "shown") if outside.any() else ""  # fmt: skip
    axis.set(
        xlim=(low, high),
        xlabel="(s_ik - b_t) / Delta   (position of the negative relative to the pair's bin)"
        + beyond,
        ylabel="dP_ij / ds_ik",
        title=f"FAPPY Lemma 1, measured (Delta = {results['delta']}, |N| = {results['negatives']})",
    )
    axis.legend(fontsize=8, loc="lower left")
    return save_figure(figure, path)


def plot_loss_cost(source: dict | str | Path, path: str | Path) -> Path:
    """Forward+backward time against mini-batch size for each loss, log-log, with fitted orders."""
    results = load_results(source)
    apply_style()
    figure, axis = plt.subplots(figsize=(8, 5))
    fitted = results["fitted_order"]
    names = list(dict.fromkeys(r["loss"] for r in results["timings"]))  # in the table's order
    for name in names:
        rows = [r for r in results["timings"] if r["loss"] == name]
        sizes = [r["batch_size"] for r in rows]
        claimed = results["claimed"][name]
        label = (f"{name}: time ~ M^{fitted[name]:.2f} (claimed {claimed})" if name in fitted
                 else f"{name}: no fitted order (too few sizes; claimed {claimed})")  # fmt: skip
        axis.plot(sizes, [r["median_seconds"] * 1e3 for r in rows], "o-", label=label)
    axis.set(
        xscale="log",
        yscale="log",
        xlabel="mini-batch size M (4 per class)",
        ylabel="forward + backward time (ms)",
        title=f"Loss cost on {results['machine']['device']}, d = {results['dims']}",
    )
    axis.legend(fontsize=8)
    return save_figure(figure, path)
