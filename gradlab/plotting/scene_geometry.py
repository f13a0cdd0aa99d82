"""The digit-scenes study's embedding geometry over training, one panel per quantity.

Reads :func:`gradlab.experiments.digit_scenes.measure`'s ``geometry`` entry: per encoder and
loss, the alignment of the (image, caption) positives and the uniformity of each modality
(Wang & Isola 2020, Eq. 4 and 5), each modality's effective rank over ``min(N - 1, d)``
(RankMe, Garrido et al. 2023) and the modality gap (Liang et al. 2022), at the logged steps.
"""

from __future__ import annotations

from pathlib import Path

import matplotlib.pyplot as plt

from gradlab.plotting.studies import _load, _mean_std, save_figure
from gradlab.plotting.style import step_axis

GEOMETRY_PANELS = {
    "alignment": ("alignment of the positives\nmean |u - v|^2 (0: they coincide)", False),
    "uniformity_images": ("uniformity of the images\nlog mean exp(-2 |u - v|^2), lower: spread",
                          False),
    "uniformity_captions": ("uniformity of the captions\nlog mean exp(-2 |u - v|^2), lower: "
                            "spread", False),
    "rank_share_images": ("effective rank / min(N - 1, d)\nof the images", True),
    "rank_share_captions": ("effective rank / min(N - 1, d)\nof the captions", True),
    "modality_gap": ("modality gap\n|image centroid - caption centroid|", True),
}
"""Geometry key -> (panel title, y axis from 0)."""

COLOURS = ("tab:blue", "tab:orange", "tab:green", "tab:purple")
STYLES = ("-", "--")


def plot_scene_geometry(source: dict | str | Path, path: str | Path) -> Path:
    """The embeddings' geometry over training: a panel per quantity, a line per encoder and
    loss (colour: loss; solid VSE++, dashed VSRN), mean and +- std band over seeds.

    Args:
        source: the result of :func:`gradlab.experiments.digit_scenes.measure`, or its JSON.
        path: the PNG to write.

    Returns:
        The written path.

    Example:
        >>> import tempfile
        >>> geometry = {key: [[0.5, 0.4], [0.5, 0.3]] for key in GEOMETRY_PANELS}
        >>> run = {"anatomy": {"steps": [0, 5]}, "geometry": geometry}
        >>> result = {"seeds": [0, 1], "runs": {"VSE++": {"NT-Xent": run}}}
        >>> plot_scene_geometry(result, Path(tempfile.mkdtemp()) / "g.png").name
        'g.png'
    """
    result = _load(source)
    encoders = list(result["runs"])
    losses = list(next(iter(result["runs"].values())))
    figure, axes = plt.subplots(2, 3, figsize=(13, 7.5), sharex=True)
    for axis, (key, (title, zero_based)) in zip(axes.flat, GEOMETRY_PANELS.items(), strict=True):
        for e, encoder in enumerate(encoders):
            for index, loss in enumerate(losses):
                run = result["runs"][encoder][loss]
                mean, std = _mean_std(run["geometry"][key])
                steps = run["anatomy"]["steps"]
                colour = COLOURS[index % len(COLOURS)]
                axis.plot(steps, mean, STYLES[e % 2], color=colour, label=f"{encoder}, {loss}")
                axis.fill_between(steps, mean - std, mean + std, color=colour, alpha=0.15)
        axis.set_title(title, fontsize=10)
        axis.grid(alpha=0.3)
        if zero_based:
            axis.set_ylim(bottom=0)
    for axis in axes[-1]:
        axis.set_xlabel("training step")
        step_axis(axis)  # steps are whole: no 0.2 ticks on a run of two logged steps
    handles, labels = axes[0, 0].get_legend_handles_labels()
    figure.legend(handles, labels, loc="lower center", ncol=3, fontsize=10,
                  bbox_to_anchor=(0.5, -0.06))  # fmt: skip
    figure.suptitle(
        f"Embedding geometry over training, each batch's images and captions (band: ± std "
        f"over {len(result['seeds'])} seeds; solid VSE++, dashed VSRN)",
        fontsize=10,
    )
    return save_figure(figure, path)
