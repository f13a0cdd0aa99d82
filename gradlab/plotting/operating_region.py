"""Figures of the operating-region analyses (:mod:`gradlab.experiments.operating_region`)."""

from __future__ import annotations

import math
import textwrap
from pathlib import Path

import matplotlib.pyplot as plt
from matplotlib.lines import Line2D

from gradlab.plotting.style import (
    apply_style,
    batch_size_axis,
    constant_value,
    legend_below,
    load_results,
    save_figure,
    series_style,
    step_axis,
)

CLOSED_FORMS_FIGSIZE = (12, 5.2)
"""Inches of the closed-form figure: the width and the P panels side by side."""
P_AGAINST_M_FIGSIZE = (11.5, 5)
"""Inches of the P-against-m figure: fixed models and trained models side by side."""
EQ1_NAME = "Brown et al. (2020, suppl.), Eq. 1"
"""How a legend names P as the paper defines it (all m^2 entries, the diagonal included)."""


def plot_closed_forms(source: dict | str | Path, path: str | Path) -> Path:
    """Width w against tau (one curve per eps) and expected P against score spread."""
    results = load_results(source)
    apply_style()
    figure, (left, right) = plt.subplots(1, 2, figsize=CLOSED_FORMS_FIGSIZE)
    for index, (eps, widths) in enumerate(results["widths"].items()):
        style = series_style(index)
        left.plot(results["taus"], widths, color=style["color"], linestyle=style["linestyle"],
                  label=f"eps = {eps}")  # fmt: skip
    seed = results["seed_setting"]
    left.scatter([seed["tau"]], [seed["width"]], color="black", zorder=3)
    left.annotate(
        f"Brown et al. (2020):\ntau = {seed['tau']}, eps = {seed['eps']}\nw = {seed['width']:.4f}",
        (seed["tau"], seed["width"]),
        textcoords="axes fraction",
        xytext=(0.04, 0.80),
        ha="left",
        arrowprops={"arrowstyle": "-", "color": "black", "lw": 0.8},
    )
    left.set(
        xscale="log",
        yscale="log",
        xlabel="temperature tau",
        ylabel="half-width w (score units)",
        title="Operating region |dG/dD| > eps  <=>  |D| < w",
    )
    legend_below(left, title="w = 0 once eps * tau >= 1/4")
    handles = []
    for index, (tau, values) in enumerate(results["expected_proportion"].items()):
        style = series_style(index)
        right.plot(results["spreads"], values, color=style["color"], linestyle=style["linestyle"])
        points = results["simulated_proportion"][tau]
        right.scatter([p[0] for p in points], [p[1] for p in points], color=style["color"],
                      marker=style["marker"], zorder=3)  # fmt: skip
        handles.append(Line2D([], [], label=f"tau = {tau}", **style))
    right.set(
        xscale="log",
        xlabel="score standard deviation (cosine units)",
        ylabel="P without the diagonal",
        title="Off-diagonal P, i.i.d. Gaussian scores: erf(w / 2 sigma)",
    )
    legend_below(right, columns=3, handles=handles,
                 title="lines: closed form; markers: simulation, 64 x 256 scores")  # fmt: skip
    return save_figure(figure, path)


def plot_p_against_batch_size(source: dict | str | Path, path: str | Path) -> Path:
    """Fig. S7a of Brown et al. (2020) with its explanations separated (fixed models vs trained
    models)."""
    results = load_results(source)
    apply_style()
    figure, (left, right) = plt.subplots(1, 2, figsize=P_AGAINST_M_FIGSIZE, layout="constrained")
    for index, (name, rows) in enumerate(results["fixed_model"].items()):
        if not name.endswith("uniform"):
            continue
        sizes = [r["batch_size"] for r in rows]
        color = f"C{index}"
        label = name.split("_")[0]
        left.plot(sizes, [r["p_seed_definition"] for r in rows], "o-", color=color,
                  label=f"{label}: P, {EQ1_NAME}")  # fmt: skip
        left.plot(sizes, [r["sampling_only_prediction"] for r in rows], "--", color=color,
                  label=f"{label}: diagonal + self-score shares only")  # fmt: skip
        left.plot(sizes, [r["p_without_query"] for r in rows], ":", color=color,
                  label=f"{label}: P over pairs of other candidates")  # fmt: skip
    left.set(
        xlabel="mini-batch size m",
        ylabel="proportion P in the operating region",
        title="(a) Fixed model, batches of size m",
    )
    batch_size_axis(left, sizes)
    left.legend(fontsize=9.5)
    rows = results["trained_per_batch_size"]
    sizes = [r["batch_size"] for r in rows]
    right.plot(sizes, [r["p_seed_definition"] for r in rows], "o-", label=f"P, {EQ1_NAME}")
    right.plot(sizes, [r["p_without_query"] for r in rows], "s:",
               label="P without the query's row and column")
    right.set(
        xlabel="mini-batch size m used for training",
        ylabel="mean P over the last epoch",
        title=f"(b) SmoothAP trained at each m ({results['epochs']} epochs)",
    )
    batch_size_axis(right, sizes)
    right.legend()
    return save_figure(figure, path)


def plot_training_dynamics(source: dict | str | Path, path: str | Path) -> Path:
    """Loss, P, queries without gradient and the AD / CB split over a SmoothAP run.

    A panel whose every series keeps one value over the run (no query without gradient, say)
    is not drawn: a line under the figure states the value instead. When no panel moves at all
    (every series constant, as in a run logged at one step), every panel is drawn, each series
    a flat line on the range its quantity can take (0 to 1 for the loss, P and the shares, -1
    to 1 beside the cosine), padded by 15 % so that no line lies on the frame; a run of one
    logged step shows each value as a point at that step."""
    results = load_results(source)
    history = results["history"]
    steps = [h["step"] for h in history]
    apply_style()
    panels = [
        ("SmoothAP loss", "1 - mean smooth AP", [("loss", "loss")]),
        ("Operating-region proportion", "proportion P",
         [("p_seed_definition", EQ1_NAME),
          ("p_without_query", "P without the query's row and column")]),
        ("Queries with no entry of slope above eps", "share of queries",
         [("share_without_gradient", "slope > eps"),
          ("share_without_weighted_gradient", "slope / R^2 > eps")]),
        ("AD - CB split", "mean over queries",
         [("ad_share", "|AD| / (|AD| + |CB|)"), ("ad_cb_cosine", "cosine(AD, -CB)")]),
    ]  # fmt: skip
    ranges = dict(zip([title for title, _, _ in panels], [(0, 1), (0, 1), (0, 1), (-1, 1)],
                      strict=True))  # what each panel's quantities can take  # fmt: skip
    flat = {title: [(label, constant_value([h[key] for h in history])) for key, label in series]
            for title, _, series in panels}  # fmt: skip
    moving = [panel for panel in panels if any(v is None for _, v in flat[panel[0]])]
    drawn = moving or panels  # nothing moves: draw the flat lines rather than an empty figure
    columns = 2 if len(drawn) == 4 else len(drawn)
    rows = math.ceil(len(drawn) / columns)
    figure, axes = plt.subplots(rows, columns, figsize=(4.6 * columns, 3.8 * rows + 0.6),
                                sharex=True, squeeze=False, layout="constrained")  # fmt: skip
    for axis, (title, ylabel, series) in zip(axes.flat, drawn, strict=True):
        for index, (key, label) in enumerate(series):
            style = series_style(index)
            axis.plot(steps, [h[key] for h in history], color=style["color"],
                      linestyle=style["linestyle"], label=label,
                      marker="o" if len(steps) == 1 else None)  # one step: a point  # fmt: skip
        axis.set(ylabel=ylabel, title=title)
        values = [value for _, value in flat[title]]
        if None not in values:  # matplotlib's own range for a flat line is a sliver around it
            low, high = ranges[title]
            low, high = min(low, *values), max(high, *values)
            pad = 0.15 * (high - low)
            axis.set_ylim(low - pad, high + pad)
        step_axis(axis)  # steps are whole: no 0.5 ticks
        if len(steps) == 1:  # one tick at the step (the locator alone falls back to fractions)
            axis.set_xticks(steps)
            axis.set_xlim(steps[0] - 1, steps[0] + 1)
        if len(series) > 1:
            axis.legend()
    for axis in axes[-1]:
        axis.set_xlabel("optimizer step")
    notes = []
    for title, values in flat.items():
        if moving and all(value is not None for _, value in values):
            numbers = " and ".join(dict.fromkeys(f"{value:g}" for _, value in values))
            labels = " and ".join(label for label, _ in values)
            notes.append((f"{title}: {numbers} at each of the {len(steps)} logged steps",
                          f"({labels}; not drawn)"))  # fmt: skip
    batch = (f"batches of {results['classes_per_batch']} classes x {results['per_class']}"
             if "classes_per_batch" in results else f"batch {results['batch_size']}")
    title = f"SmoothAP on digits 0-4, {batch}, tau={results['tau']}"
    figure.suptitle("\n".join([title, *(_note_lines(*note) for note in notes)]))
    return save_figure(figure, path)


NOTE_WIDTH = 100
"""Characters per line of a training-dynamics note in the figure's title."""


def _note_lines(sentence: str, parenthetical: str) -> str:
    """A note of a panel that never moved: one line when it fits, else the sentence and its
    parenthetical each on their own lines (wrapped only if one alone is too long), so that no
    line breaks inside a phrase such as ``slope / R^2 > eps``."""
    whole = f"{sentence} {parenthetical}"
    if len(whole) <= NOTE_WIDTH:
        return whole
    return "\n".join(textwrap.fill(part, NOTE_WIDTH) for part in (sentence, parenthetical))
