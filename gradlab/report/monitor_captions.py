"""Captions of the Monitor's figures in the report: what each shows and what to read from it.

Rendering only: each caption is worded from the run's logged records (the ``metrics.jsonl`` a
:class:`gradlab.monitor.Monitor` wrote, as :func:`gradlab.plotting.monitor.load_runs` reads it);
no number is typed here. A family's caption is its figure title, a sentence on what to read
from it, the first and last logged value of each drawn series and, for the counts of the
sigmoid's operating region, where the loss has reached about 0 and those counts describe
pairs the loss has already ordered.
"""

from __future__ import annotations

import math
import statistics

from gradlab.plotting.monitor import FAMILIES, key_label

LOW_LOSS = 1e-3
"""A loss below which a SmoothAP run is said to have reached about 0 (1 - mean smooth AP: every
batch's mean smooth AP above 0.999)."""

READINGS = {
    "loss": "SmoothAP's loss, 1 - the batch's mean smooth AP: how fast the batches become easy "
            "to rank.",
    "embeddings": "The embeddings' norms before SmoothAP normalises them: the loss reads only "
                  "their directions, and the gradient an embedding receives shrinks as 1 / its "
                  "norm.",
    "embedding_gradients": "The norm of dL/d(embeddings), of the whole batch and per embedding: "
                           "how hard the loss still pushes the network.",
    "operating_region": "The share of each query's score differences D whose sigmoid slope "
                        "exceeds eps (|D| < w), with its variants.",
    "decomposition": "The median norms of the two terms of Bleeker & de Rijke's (2022, "
                     "appendix A) form of a positive's gradient, AD and CB, and of the gradient "
                     "AD - CB itself.",
    "decomposition_shape": "Which term carries the gradient: AD's share of |AD| + |CB|, and the "
                           "cosine between AD and -CB (-1: the terms point against each other).",
    "gradient_count_mean": "Bleeker & de Rijke's count: the entries (positive, other candidate) "
                           "of a query whose sigmoid slope exceeds eps; the weighted count "
                           "first divides each slope by R^2, R the positive's smoothed rank "
                           "among all candidates (the factor of their Eq. 13).",
    "relaxation_gap": "How close SmoothAP's relaxed AP is to the exact AP of the same batch.",
    "relaxation_gap_difference": "The relaxed AP minus the exact AP (below 0: the relaxation "
                                 "underrates the batch's ranking).",
    "anatomy_active_negatives": "How many negatives per query receive dL/dS above the "
                                "anatomy's thresholds.",
    "anatomy_hardness": "Whether the gradient goes to the hardest negatives: their top 10 %'s "
                        "share of it, and how deep in the ranking the negatives with gradient "
                        "lie (relative rank depth).",
    "anatomy_without_gradient": "The share of queries whose dL/dS stays below the anatomy's "
                                "thresholds everywhere.",
    "geometry": "How close the positives' unit embeddings are (alignment) and how evenly the "
                "batch spreads over the sphere (uniformity).",
    "geometry_collapse": "Whether the embeddings collapse: near 0 on either series, they use "
                         "few directions.",
    "margins": "The scores of the positives and of the hardest negative; a positive margin: the "
               "lowest-scored positive ranks above every negative.",
    "margin_violations": "The share of negatives scored at or above the hardest positive, and "
                         "the batch's own R@1.",
}
"""What to read from each family's figure, in words (no number)."""

COUNT_FAMILIES = ("operating_region", "gradient_counts", "gradient_count_mean")
"""The families that count entries by their sigmoid slope alone, not by the gradient they carry:
their captions say where the loss reached about 0 (:func:`low_loss_step`)."""


def _number(value: object) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def _finite(value: object) -> bool:
    return isinstance(value, (int, float)) and math.isfinite(value)


def _series(records: list[dict], key: str) -> list[tuple[int, float]]:
    return [(r["step"], r[key]) for r in records if _finite(r.get(key))]


def low_loss_step(records: list[dict], threshold: float = LOW_LOSS) -> int | None:
    """The first logged step from which the loss stays below ``threshold`` to the end of the
    run, or None when its last logged loss is not below it (a NaN is not) or fewer than two
    logged steps are.

    Example:
        >>> low_loss_step([{"step": 0, "loss": 0.5}, {"step": 2, "loss": 1e-4},
        ...                {"step": 4, "loss": 0.01}, {"step": 6, "loss": 0.0},
        ...                {"step": 8, "loss": 1e-5}])
        6
    """
    # a NaN or infinite loss is logged, and not below: a run that broke never "stays low"
    losses = [(r["step"], r["loss"]) for r in records if _number(r.get("loss"))]
    since = len(losses)
    while since > 0 and losses[since - 1][1] < threshold:
        since -= 1
    return losses[since][0] if len(losses) - since >= 2 else None


def _values(records: list[dict], keys: list[str]) -> str:
    """Each drawn key's first and last logged value, with their steps."""
    parts = []
    for key in keys:
        series = _series(records, key)
        if len(series) == 1:  # one value: not a first and a last
            parts.append(f"{key_label(key)} {series[0][1]:.3g} at step {series[0][0]}")
        elif series:
            (first_step, first), (last_step, last) = series[0], series[-1]
            parts.append(f"{key_label(key)} {first:.3g} at step {first_step}, {last:.3g} at "
                         f"step {last_step}")  # fmt: skip
    text = "; ".join(parts)
    return f"{text[0].upper()}{text[1:]}." if parts else ""  # "loss 0.4 ...": a sentence


def _low_loss_sentence(records: list[dict], keys: list[str]) -> str:
    """Where the loss stays about 0, with the logged margin that puts the positive-negative
    differences outside the operating region, and what the figure still reads there against
    the logged gradient norm; "" when the loss never stays that low."""
    step = low_loss_step(records)
    if step is None:
        return ""
    since = [r for r in records if r["step"] >= step]
    logged = sum(_number(r.get("loss")) for r in records)
    stays = sum(_number(r.get("loss")) for r in since)
    first = (f" From step {step} on (the last {stays} of {logged} logged steps) the loss stays "
             f"below {LOW_LOSS:g}")  # fmt: skip
    margins = [value for _, value in _series(since, "margin_mean")]
    widths = [value for _, value in _series(since, "operating_region_width")]
    if margins and widths:
        first += (f" and the margin of the hardest positive over the hardest negative (mean "
                  f"over the queries) is at least {min(margins):.3g}, more than the operating "
                  f"region's width w = {max(widths):.3g}")  # fmt: skip
    ranges = []
    for key in keys:
        values = [value for _, value in _series(since, key)]
        if values:
            ranges.append(f"{key_label(key)} {min(values):.3g} to {max(values):.3g}")
    second = (" There every batch is ranked almost perfectly (mean smooth AP above "
              f"{1 - LOW_LOSS:g}), so this figure counts pairs the loss has already ordered")
    if ranges:
        second += f": it reads {'; '.join(ranges)}"
    norms = [value for _, value in _series(since, "embedding_grad_norm")]
    start = _series(records, "embedding_grad_norm")
    if norms and start:
        median = statistics.median(norms)
        second += (f", while the embeddings' gradient norm has a median of {median:.1e} there "
                   f"against {start[0][1]:.2g} at step {start[0][0]}")
    return f"{first}.{second}."


def monitor_figure_caption(family: str, records: list[dict]) -> str:
    """The caption of the Monitor's figure of ``family`` (its file stem) for a run logged as
    ``records``: its title, what to read from it, and its series' first and last values.

    Example:
        >>> records = [{"step": 0, "loss": 0.4}, {"step": 2, "loss": 0.1}]
        >>> monitor_figure_caption("loss", records)[-34:]
        'Loss 0.4 at step 0, 0.1 at step 2.'
    """
    title, keys, _ = FAMILIES.get(family, (family.replace("_", " "), (), ""))
    parts = [f"The Monitor's log of this run: {title}.", READINGS.get(family, ""),
             _values(records, list(keys))]  # fmt: skip
    caption = " ".join(part for part in parts if part)
    if family in COUNT_FAMILIES:
        caption += _low_loss_sentence(records, list(keys))
    elif family == "loss":
        step = low_loss_step(records)
        if step is not None:
            caption += f" From step {step} on it stays below {LOW_LOSS:g}."
    return caption
