"""Figures of the per-seed studies (:mod:`gradlab.experiments`): means with error bars (std).

Each function takes the study's result dict (or a path to its JSON), draws every seed's value
faintly and the mean with a one-standard-deviation bar, and returns the written path. A JSON file
may hold NaN and infinities as the strings ``"NaN"``, ``"Infinity"`` and ``"-Infinity"`` (as
:func:`gradlab.jsonio.write_json` writes them, and so the report) or as the tokens
``json.dumps`` writes; both read as floats.
"""

from __future__ import annotations

import json
import math
import re
import textwrap
import warnings
from pathlib import Path

import matplotlib.pyplot as plt
import numpy as np
from matplotlib.lines import Line2D
from matplotlib.patches import Patch
from matplotlib.ticker import LogLocator

from gradlab.experiments import digit_scenes
from gradlab.monitor.sinks import decode_value
from gradlab.plotting.style import PlainLogFormatter, isolated_points, log_scale, step_axis


def _load(source: dict | str | Path) -> dict:
    """The result, its ``"NaN"`` / ``"Infinity"`` strings read as floats (a dict loaded from
    such a file too)."""
    result = source if isinstance(source, dict) else json.loads(Path(source).read_text())
    return decode_value(result)


def save_figure(figure, path: str | Path) -> Path:
    """Write ``figure`` as PNG at the report's 110 dpi, trimmed to its content, and close it."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    figure.savefig(path, dpi=110, bbox_inches="tight")
    plt.close(figure)
    return path


def _seeds(result: dict) -> str:
    """``"1 seed"``, ``"3 seeds"``: the seeds of a study's result."""
    count = len(result["seeds"])
    return f"{count} seed{'' if count == 1 else 's'}"


def _data_name(result: dict, bundled: str) -> str:
    """The data a result was measured on: its own ``data`` entry (a user's study), else the
    bundled miniature's name."""
    return result.get("data") or result.get("settings", {}).get("data") or bundled


def _mean_std(values) -> tuple[np.ndarray, np.ndarray]:
    """Mean and population std over the seeds (axis 0), NaN left out; NaN where every seed is
    NaN (a gap in the line), without numpy's "Mean of empty slice" warning on the terminal."""
    array = np.asarray(values, dtype=float)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        return np.nanmean(array, axis=0), np.nanstd(array, axis=0)


KEPT_GROUP = 20
"""The longest parenthesised group, parentheses included, that :func:`fill_note` keeps on one
line (``(m = 16, m = 64)``, ``(both batch sizes)``)."""

_SHORT_GROUP = re.compile(rf"\([^()]{{0,{KEPT_GROUP - 2}}}\)")
_KEEP = "\u00a0"  # a no-break space: textwrap breaks at ASCII whitespace only


def fill_note(text: str, width: int) -> str:
    """``text`` wrapped to lines of at most ``width`` characters, as ``textwrap.fill`` with
    ``break_on_hyphens=False`` does ("max-violation" stays whole), except that a parenthesised
    group of at most :data:`KEPT_GROUP` characters stays on one line: a note never reads
    "(m =" above "16)". Nothing is cut inside a word or a kept group: one longer than ``width``
    gets a line of its own.

    Example:
        >>> print(fill_note("1 at every step: VSE++ max-violation (m = 16, m = 64)", 40))
        1 at every step: VSE++ max-violation
        (m = 16, m = 64)
    """
    kept = _SHORT_GROUP.sub(lambda group: group.group(0).replace(" ", _KEEP), text)
    return textwrap.fill(kept, width, break_on_hyphens=False,
                         break_long_words=False).replace(_KEEP, " ")


SETTING_TITLES = {
    "fixed_untrained": "fixed model, untrained",
    "fixed_trained": "fixed model, trained at m = 64",
    "trained_at_m": "one model trained at each m",
}
"""Each setting's panel title; ``trained_at_m`` reads "fine-tuned" where the result holds the
trained network it starts from (``fixed_trained``: the digit-string miniature), and "trained"
otherwise (a ``gradlab study`` run may start from random weights)."""


def _setting_title(result: dict, name: str) -> str:
    """The panel title of setting ``name`` in ``result`` (:data:`SETTING_TITLES`)."""
    if name == "trained_at_m" and "fixed_trained" in result["settings"]:
        return "one model fine-tuned at each m"
    return SETTING_TITLES[name]


PROPORTIONS = {
    "P": ("P (Brown et al., 2020, suppl. Eq. 1)", "black", "o"),
    "P_positive_negative": ("positive-negative pairs", "tab:red", "s"),
    "P_negative_negative": ("negative-negative pairs", "tab:blue", "^"),
}


def _repeats(setting: dict) -> dict[str, str]:
    """Proportion -> the earlier proportion it equals at every seed and m (drawn once)."""
    same: dict[str, str] = {}
    for index, key in enumerate(PROPORTIONS):
        for earlier in list(PROPORTIONS)[:index]:
            if earlier not in same and np.allclose(setting[key], setting[earlier], rtol=0,
                                                   atol=1e-12, equal_nan=True):  # fmt: skip
                same[key] = earlier
                break
    return same


def plot_p_vs_batch_size(source: dict | str | Path, path: str | Path) -> Path:
    """One panel per setting: P and the two close-pair proportions against m, per seed + mean.

    A proportion equal to an earlier one at every seed and m (all three are 1 for an untrained
    network) is drawn once and named in a note on the panel, not hidden under the other."""
    result = _load(source)
    sizes = result["batch_sizes"]
    names = [name for name in SETTING_TITLES if name in result["settings"]]
    figure, axes = plt.subplots(1, len(names), figsize=(4 * len(names), 4.4), sharey=True,
                                layout="constrained")  # fmt: skip
    axes = np.atleast_1d(axes)
    for axis, name in zip(axes, names, strict=True):
        setting = result["settings"][name]
        repeats = _repeats(setting)
        for key, (label, colour, marker) in PROPORTIONS.items():
            if key in repeats:
                continue
            for per_seed in setting[key]:
                axis.plot(sizes, per_seed, color=colour, alpha=0.25, lw=0.8)
            mean, std = _mean_std(setting[key])
            axis.errorbar(sizes, mean, yerr=std, color=colour, marker=marker, ms=4, capsize=3,
                          label=label)  # fmt: skip
        notes = [
            fill_note(
                f"{' and '.join(PROPORTIONS[k][0] for k in repeats if repeats[k] == earlier)}: "
                f"the same as {PROPORTIONS[earlier][0].split(' (')[0]} at every seed and m", 36)
            for earlier in dict.fromkeys(repeats.values())
        ]  # fmt: skip
        if notes:
            axis.text(0.5, 0.5, "\n".join(notes), transform=axis.transAxes, ha="center",
                      va="center", fontsize=10, color="0.25")  # fmt: skip
        axis.set_xscale("log", base=2)
        axis.set_xticks(sizes, [str(m) for m in sizes])
        axis.set_xlabel("mini-batch size m")
        axis.set_title(_setting_title(result, name), fontsize=11)
        axis.set_ylim(-0.02, 1.02)
        axis.grid(alpha=0.3)
    axes[0].set_ylabel("proportion inside the operating region")
    handles = [Line2D([], [], color=colour, marker=marker, ms=4, label=label)
               for label, colour, marker in PROPORTIONS.values()]  # fmt: skip
    figure.legend(handles=handles, loc="outside lower center", ncol=3, fontsize=10,
                  frameon=False)  # fmt: skip
    figure.suptitle(
        f"P against batch size on {_data_name(result, 'unseen 3-digit strings')},\n4 images per "
        f"class and m/4 classes, "
        f"{_seeds(result)} (faint: each seed; bars: mean ± std)",
        fontsize=11,
    )
    return save_figure(figure, path)


def plot_loss_comparison(source: dict | str | Path, path: str | Path) -> Path:
    """Recall@1, mAP and MAP@R of each loss on unseen numbers (seeds as dots, mean +- std), and
    each loss's forward + backward time; a loss listed apart (it did not beat the untrained
    network) is drawn in grey and labelled so."""
    result = _load(source)
    names = list(result["losses"])
    apart = (result.get("summary") or {}).get("apart", {})
    metrics = [m for m in ("recall@1", "mAP", "MAP@R") if m in result["before"]]
    panels = len(metrics) + 1
    rows = (panels + 1) // 2
    figure, grid = plt.subplots(rows, 2, figsize=(11, 4.3 * rows), layout="constrained")
    axes = list(np.atleast_1d(grid).ravel())
    for unused in axes[panels:]:
        unused.remove()
    positions = np.arange(len(names))
    labels = [f"{name} (apart)" if name in apart else name for name in names]
    for axis, metric in zip(axes, metrics, strict=False):
        for index, name in enumerate(names):
            values = result["losses"][name]["metrics"][metric]
            axis.scatter([index] * len(values), values, color="tab:gray", s=14, zorder=3)
            mean, std = _mean_std(values)
            colour = "tab:gray" if name in apart else "tab:blue"
            axis.errorbar(index, mean, yerr=std, fmt="o", color=colour, capsize=4, zorder=4)
        before, spread = _mean_std(result["before"][metric])
        axis.axhline(before, color="tab:red", ls="--", lw=1, label="untrained")
        if spread > 0:  # its seed spread, against which a loss's gain is read
            axis.axhspan(before - spread, before + spread, color="tab:red", alpha=0.12, lw=0)
        axis.set_xticks(positions, labels, rotation=30, ha="right", fontsize=10)
        axis.tick_params(axis="y", labelsize=10)
        axis.set_title(metric, fontsize=11)
        axis.grid(alpha=0.3, axis="y")
    # the dashed line is named in the title: a legend on the panel covered losses' bars
    cost = axes[panels - 1]
    for index, name in enumerate(names):
        mean, std = _mean_std(result["losses"][name]["loss_seconds"])
        # a dot, not a bar: on a log axis a bar's length is read from an arbitrary floor
        cost.errorbar(index, 1e3 * mean, yerr=1e3 * std, fmt="o", color="tab:green",
                      capsize=4)  # fmt: skip
    cost.set_xticks(positions, labels, rotation=30, ha="right", fontsize=10)
    log_scale(cost)
    # down to the decade below the fastest loss: its value is read against a labelled tick
    # (0.2 ms under a lowest label of 1 was not)
    bottom, top = cost.get_ylim()
    cost.set_ylim(10 ** math.floor(math.log10(bottom)), top)
    cost.tick_params(axis="y", which="both", labelsize=10)  # a log axis labels minor ticks
    cost.set_title("loss forward + backward (ms)", fontsize=11)
    cost.grid(alpha=0.3, axis="y")
    figure.suptitle(
        f"Losses on {_data_name(result, 'unseen 3-digit numbers')}, {_seeds(result)}, same "
        f"network, batches and {result['settings']['steps']} steps\n(dots: seeds; "
        "bars: mean ± std; dashed: the untrained network, shaded: ± its std)",
        fontsize=11,
    )
    return save_figure(figure, path)


def plot_scene_recall(source: dict | str | Path, path: str | Path) -> Path:
    """R@1/5/10 in both directions for each encoder and loss (mean +- std over seeds).

    A run that did not train (mean R@1 below
    :data:`~gradlab.experiments.digit_scenes.CHANCE_FACTOR` times chance either way) or whose
    embeddings collapsed (listed apart and not ranked by
    :func:`~gradlab.experiments.digit_scenes.summarize`) is drawn hatched and faint
    (cross-hatched when collapsed), and the legend says so; a result without its test set's
    sizes (``settings.test_scenes``) marks none."""
    result = _load(source)
    encoders = list(result["runs"])
    losses = list(next(iter(result["runs"].values())))
    apart = (digit_scenes.summarize(result)["apart"]
             if "test_scenes" in result.get("settings", {}) else {})  # fmt: skip
    metrics = ["i2t_R@1", "i2t_R@5", "i2t_R@10", "t2i_R@1", "t2i_R@5", "t2i_R@10"]
    figure, axes = plt.subplots(1, len(encoders), figsize=(5.6 * len(encoders), 4), sharey=True,
                                layout="constrained")  # fmt: skip
    axes = np.atleast_1d(axes)
    width = 0.8 / len(losses)
    colours = ["tab:blue", "tab:orange", "tab:green", "tab:purple"]
    for axis, encoder in zip(axes, encoders, strict=True):
        for index, loss in enumerate(losses):
            recall = result["runs"][encoder][loss]["recall"]
            means = [float(np.mean(recall[m])) for m in metrics]
            stds = [float(np.std(recall[m])) for m in metrics]
            x = np.arange(len(metrics)) + (index - (len(losses) - 1) / 2) * width
            numbers = apart.get(encoder, {}).get(loss)
            faint = {} if numbers is None else {  # collapsed above chance: cross-hatched
                "hatch": "//" if numbers["below_chance"] else "xx", "alpha": 0.45}
            axis.bar(x, means, width, yerr=stds, capsize=2, label=loss, color=colours[index],
                     **faint)  # fmt: skip
        # the metric under each group of bars, the direction once under its three metrics
        axis.set_xticks(np.arange(len(metrics)), [m.split("_", 1)[1] for m in metrics],
                        fontsize=9)  # fmt: skip
        for first in range(0, len(metrics), 3):
            axis.annotate(DIRECTION_TITLES[metrics[first].split("_", 1)[0]], fontsize=9,
                          xy=(first + 1, 0), xycoords=("data", "axes fraction"),
                          xytext=(0, -18), textcoords="offset points", ha="center", va="top")
        axis.set_title(encoder)
        axis.set_ylim(0, 1)
        axis.grid(alpha=0.3, axis="y")
    axes[0].set_ylabel("recall on unseen scenes")
    handles = [Patch(color=colours[index], label=loss) for index, loss in enumerate(losses)]
    below = [numbers["below_chance"] for runs in apart.values() for numbers in runs.values()]
    if any(below):  # not ranked: the text lists these runs apart
        handles.append(Patch(facecolor="white", edgecolor="grey", hatch="//",
                             label=f"did not train (R@1 < {digit_scenes.CHANCE_FACTOR:g} x "
                                   "chance): not ranked"))  # fmt: skip
    if not all(below):
        handles.append(Patch(facecolor="white", edgecolor="grey", hatch="xx",
                             label="embeddings collapsed (uniformity > "
                                   f"{digit_scenes.collapse_uniformity():.3f}): not ranked"))
    axes[0].legend(handles=handles, fontsize=10)
    figure.suptitle(
        f"Digit scenes: recall both ways, {_seeds(result)} (bars: mean ± std)",
        fontsize=11,
    )
    return save_figure(figure, path)


DIRECTION_TITLES = {
    "i2t": "image -> caption",
    "t2i": "caption -> image",
    "in_batch": "image -> the batch's other images",
}
"""The anatomy's directions: the scenes' two, and the image studies' one (each image of a batch
querying the others)."""

ANATOMY_TITLES = {
    "active_negatives": "active negatives per query",
    "share_without_gradient": "queries without gradient",
    "hardest_10pct_share": "hardest 10 % negatives' gradient share",
}


def _coinciding(series: dict[tuple[str, str], np.ndarray]) -> dict[float, list[tuple[str, str]]]:
    """Value -> the (encoder, loss) series that keep exactly that value at every step, for
    values that two series or more keep (their lines would lie on each other: two losses, or
    one loss at two encoders, such as VSE++'s max-violation at one active negative)."""
    groups: dict[float, list[tuple[str, str]]] = {}
    for name, mean in series.items():
        finite = mean[np.isfinite(mean)]
        if len(finite) and np.all(finite == finite[0]):
            groups.setdefault(float(finite[0]), []).append(name)
    return {value: names for value, names in groups.items() if len(names) > 1}


BATCH_SIZE_SERIES = re.compile(r"m = \d+")
"""How an image study names its series: one per batch size (``"m = 64"``), where the scenes'
study has one per encoder."""


def _named(names: list[tuple[str, str]], encoders: list[str]) -> str:
    """'loss (both encoders)' or 'encoder, loss' for each loss, in order; an image study's
    series are batch sizes ('loss (both batch sizes)'), not encoders."""
    losses = list(dict.fromkeys(loss for _, loss in names))
    kind = ("batch size" if all(BATCH_SIZE_SERIES.fullmatch(encoder) for encoder in encoders)
            else "encoder")  # fmt: skip
    parts = []
    for loss in losses:
        own = [encoder for encoder, other in names if other == loss]
        every = f"both {kind}s" if len(encoders) == 2 else f"every {kind}"
        parts.append(f"{loss} ({every if len(own) == len(encoders) else ', '.join(own)})")
    return "; ".join(parts)


NOTE_WIDTH = 60
"""Characters per line of a scene anatomy panel's note (the series that keep one value)."""


def _count_scale(axis) -> None:
    """A log axis for counts that span decades; a symmetric log one, linear up to the decade
    of the smallest positive count, when a line reaches 0 (no active negative: a log axis
    drops such a line off its frame, and 0 is what the reader must see), 0 then half a decade
    above the frame's lower edge and its top the power of ten at or above the largest count.
    A log axis is ticked and labelled at 1, 2 and 5 of each decade."""
    values = [float(v) for line in axis.get_lines() for v in line.get_ydata() if np.isfinite(v)]
    positive = [v for v in values if v > 0]
    if not positive:
        return
    if min(values) > 0:
        log_scale(axis)
        # ticks at 1, 2 and 5 of each decade, all labelled: past a decade or so matplotlib
        # labels powers of ten alone, and 110 to 148 under a highest label of 100 were not read
        axis.yaxis.set_minor_locator(LogLocator(base=10.0, subs=(2.0, 5.0)))
        axis.yaxis.set_minor_formatter(PlainLogFormatter(labelOnlyBase=False,
                                                         minor_thresholds=(math.inf, math.inf)))
        decade = 10.0 ** math.floor(math.log10(max(positive)))  # a labelled tick above all
        axis.set_ylim(top=next(step * decade for step in (1, 2, 5, 10)
                               if step * decade >= max(positive)))  # fmt: skip
        return
    threshold = 10.0 ** math.floor(math.log10(min(positive)))
    log_scale(axis, linthresh=threshold)
    # up to the power of ten at or above the largest count: a symmetric log axis labels powers
    # of ten alone, the highest then above every count
    top = 10.0 ** math.ceil(math.log10(max(positive)))
    axis.set_ylim(bottom=-0.5 * threshold, top=top)


def plot_scene_anatomy(source: dict | str | Path, path: str | Path) -> Path:
    """Gradient anatomy over training: rows quantities, columns directions, lines losses.

    Losses that keep the same value at every step (no query without gradient, say) are named
    with the value on the panel instead of drawn as lines on top of each other."""
    result = _load(source)
    encoders = list(result["runs"])
    losses = list(next(iter(result["runs"].values())))
    colours = ["tab:blue", "tab:orange", "tab:green", "tab:purple"]
    styles = {"-": "solid", "--": "dashed", ":": "dotted", "-.": "dash-dotted"}
    first = result["runs"][encoders[0]][losses[0]]["anatomy"]
    directions = [direction for direction in DIRECTION_TITLES if direction in first]
    figure, axes = plt.subplots(
        len(ANATOMY_TITLES), len(directions), figsize=(5.2 * len(directions), 9.5), sharex=True,
        squeeze=False, layout="constrained",
    )  # fmt: skip
    drawn: set[tuple[str, str]] = set()  # the (encoder, loss) series drawn on some panel
    for row, (key, title) in enumerate(ANATOMY_TITLES.items()):
        for column, direction in enumerate(directions):
            axis = axes[row, column]
            means = {(encoder, loss): _mean_std(
                         result["runs"][encoder][loss]["anatomy"][direction][key])
                     for encoder in encoders for loss in losses}  # fmt: skip
            together = _coinciding({name: mean for name, (mean, _) in means.items()})
            hidden = {name for names in together.values() for name in names}
            for e, encoder in enumerate(encoders):
                for index, loss in enumerate(losses):
                    if (encoder, loss) in hidden:
                        continue
                    drawn.add((encoder, loss))
                    mean, std = means[encoder, loss]
                    steps = result["runs"][encoder][loss]["anatomy"]["steps"]
                    # a step whose neighbours are gaps (no seed's value) is marked, or no
                    # segment would draw it
                    alone = isolated_points(mean)
                    axis.plot(steps, mean, list(styles)[e % 4], color=colours[index],
                              label=f"{encoder}, {loss}",
                              **({"marker": "o", "ms": 4, "markevery": alone} if alone else {}))
                    # counts and shares: the band stops at 0
                    axis.fill_between(steps, np.maximum(mean - std, 0), mean + std,
                                      color=colours[index], alpha=0.15)  # fmt: skip
            if key == "active_negatives" and axis.lines:
                _count_scale(axis)
            notes = [f"{value:g} at every step: {_named(names, encoders)}"
                     for value, names in together.items()]  # fmt: skip
            text = "\n".join(fill_note(note, NOTE_WIDTH) for note in notes)
            heading = f"{title} ({DIRECTION_TITLES[direction]})"
            if notes and not axis.lines:  # an empty panel: the note in its middle covers nothing
                axis.text(0.5, 0.5, text, transform=axis.transAxes, ha="center", va="center",
                          fontsize=9, color="0.25")  # fmt: skip
            elif notes:  # under the panel's title, outside the axes: it covers no line
                heading += "\n" + text
            if not axis.lines:
                axis.set_yticks([])
            axis.set_title(heading, fontsize=10)
            axis.grid(alpha=0.3)
    for axis in axes[-1]:
        axis.set_xlabel("training step")
        step_axis(axis)  # steps are whole: no 0.2 ticks on a run of two logged steps
    # the legend names the lines drawn: a series named by a note on every panel has none
    handles = [Line2D([], [], color=colours[index], linestyle=list(styles)[e % 4],
                      label=f"{encoder}, {loss}")
               for e, encoder in enumerate(encoders)
               for index, loss in enumerate(losses) if (encoder, loss) in drawn]  # fmt: skip
    figure.legend(handles=handles, loc="outside lower center", ncol=3, fontsize=10,
                  frameon=False)  # fmt: skip
    lines = ", ".join(f"{list(styles.values())[e % 4]} {encoder}"
                      for e, encoder in enumerate(encoders))  # fmt: skip
    figure.suptitle(
        "Gradient anatomy over training (dL/dS of each direction's own term;\nband: ± std over "
        f"seeds; {lines})",
        fontsize=11,
    )
    return save_figure(figure, path)
