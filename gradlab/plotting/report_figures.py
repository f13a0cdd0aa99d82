"""Figures of the report's training and caption sections."""

from __future__ import annotations

from pathlib import Path

import matplotlib.pyplot as plt
import numpy as np

from gradlab.plotting.style import apply_style, load_results, save_figure, step_axis


def plot_retrieval_before_after(source: dict | str | Path, path: str | Path) -> Path:
    """Recall@K and mAP before and after training, unseen and seen classes."""
    results = load_results(source)
    apply_style()
    figure, axes = plt.subplots(1, 2, figsize=(10, 4.2), sharey=True, layout="constrained")
    panels = [
        ("Unseen classes 5-9", "unseen_classes_before", "unseen_classes_after"),
        ("Seen classes 0-4, held-out images", "seen_classes_held_out_before",
         "seen_classes_held_out_after"),
    ]  # fmt: skip
    for axis, (title, before_key, after_key) in zip(axes, panels, strict=True):
        metrics = list(results[before_key])
        x = np.arange(len(metrics))
        axis.bar(x - 0.2, [results[before_key][m] for m in metrics], 0.4, label="before training")
        axis.bar(
            x + 0.2, [results[after_key][m] for m in metrics], 0.4, label="after SmoothAP training"
        )
        axis.set_xticks(x, metrics)
        axis.set(title=title, ylim=(0, 1))
    axes[0].set_ylabel("score (fraction)")
    figure.legend(*axes[0].get_legend_handles_labels(), loc="outside lower center", ncol=2,
                  frameon=False)  # fmt: skip
    figure.suptitle("Digits retrieval with an MLP embedding (each image queries all the others)")
    return save_figure(figure, path)


def plot_captions(source: dict | str | Path, path: str | Path) -> Path:
    """Loss curves, recall in both directions, and SmoothAP's queries without gradient."""
    results = load_results(source)
    apply_style()
    figure, axes = plt.subplots(1, 3, figsize=(16, 4.5))
    for name, run in results["losses"].items():
        history = np.array(run["loss_history"])
        smoothed = np.convolve(history, np.ones(10) / 10, mode="valid")
        axes[0].plot(smoothed / max(history[0], 1e-12), label=name)
    axes[0].set(xlabel="step", ylabel="loss / initial loss (10-step mean)", title="Training")
    step_axis(axes[0])
    axes[0].legend()
    names = list(results["losses"])
    keys = list(next(iter(results["losses"].values()))["recall"])
    x = np.arange(len(keys))
    width = 0.8 / len(names)
    for index, name in enumerate(names):
        values = [results["losses"][name]["recall"][k] for k in keys]
        axes[1].bar(x + (index - 1) * width, values, width, label=name)
    axes[1].set_xticks(x, keys, rotation=30)
    axes[1].set(
        ylabel="recall (fraction)", title="Held-out recall, both directions", ylim=(0, 1.05)
    )
    axes[1].legend(fontsize=8)
    for name, run in results["losses"].items():
        steps = [c["step"] for c in run["gradient_counts"]]
        axes[2].plot(
            steps,
            [c["i2t_share_without_gradient"] for c in run["gradient_counts"]],
            "-",
            label=f"{name}: image->caption",
        )
        axes[2].plot(
            steps,
            [c["t2i_share_without_gradient"] for c in run["gradient_counts"]],
            "--",
            label=f"{name}: caption->image",
        )
    axes[2].set(
        xlabel="step",
        ylabel="share of queries",
        title="SmoothAP queries with no gradient entry (tau=0.01)",
    )
    step_axis(axes[2])
    axes[2].legend(fontsize=7)
    figure.suptitle("Image-caption miniature (digits, 5 templated captions per image)")
    return save_figure(figure, path)
