"""Renderer of the README's gradient-anatomy block (see tools/readme_blocks.py)."""

from __future__ import annotations

import math
from pathlib import Path

from tools.readme_blocks import load_json, register


def _mean(values: list) -> float:
    finite = [v for v in values if isinstance(v, (int, float)) and math.isfinite(v)]
    return sum(finite) / len(finite) if finite else math.nan


def _hardest(part: dict) -> str:
    """The hardest negative's share, or ``-`` where it is undefined or where no query's
    gradient reaches the thresholds (a share of a gradient of 1e-14: the figure draws none)."""
    share = part["mass_share_by_rank"][0] if part["mass_share_by_rank"] else math.nan
    if part["queries_without_gradient"] >= part["queries"]:
        return "-"
    return "-" if not isinstance(share, (int, float)) or math.isnan(share) else f"{share:.2f}"


@register("anatomy")
def anatomy(root: Path) -> str:
    """Per checkpoint and loss: active negatives, queries without gradient, hardest's share."""
    result = load_json(root, "figures/anatomy_comparison.json")
    first = result["checkpoints"][0]["losses"]
    sample = next(iter(first.values()))
    i2t, t2i = sample["i2t"], sample["t2i"]
    lines = [
        f"| steps | loss | active negatives per image query (of {i2t['negatives_per_query']}) "
        f"| per caption query (of {t2i['negatives_per_query']}) "
        f"| image queries without gradient (of {i2t['queries']}) "
        f"| caption queries without gradient (of {t2i['queries']}) "
        "| hardest negative's share of the negative gradient, i2t / t2i |",
        "| --- | --- | --- | --- | --- | --- | --- |",
    ]
    for checkpoint in result["checkpoints"]:
        for name, record in checkpoint["losses"].items():
            forward, backward = record["i2t"], record["t2i"]
            lines.append(
                f"| {checkpoint['steps']} | {name} | {_mean(forward['active_negatives']):.2f} "
                f"| {_mean(backward['active_negatives']):.2f} "
                f"| {forward['queries_without_gradient']} "
                f"| {backward['queries_without_gradient']} "
                f"| {_hardest(forward)} / {_hardest(backward)} |"
            )
    settings = result["settings"]
    lines += [
        "",
        f"Thresholds: |dL/dS| > {settings['absolute_threshold']:g} and at least "
        f"{settings['relative_threshold']:.0%} of the query's largest entry; SmoothAP tau = "
        f"{settings['smooth_ap_tau']}, VSE++ margin = {settings['margin']}, NT-Xent temperature = "
        f"{settings['temperature']}. The share is the mean over the queries whose negatives "
        "receive any gradient (below the thresholds included); - where no query's gradient "
        "reaches the thresholds.",
    ]
    return "\n".join(lines)
