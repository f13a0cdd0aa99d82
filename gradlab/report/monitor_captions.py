"""Captions of the Monitor's figures in the report: what each shows and what to read from it.

Rendering only: each caption is worded from the run's logged records (the ``metrics.jsonl`` a
:class:`gradlab.monitor.Monitor` wrote, as :func:`gradlab.plotting.monitor.load_runs` reads it);
no number is typed here. A family's caption is its figure title, what its quantity declares to
read from it (:attr:`gradlab.monitor.quantity.Plot.reading`; no sentence is kept here), the
first and last logged value of each drawn series and, for the counts of the sigmoid's operating
region, where the loss has reached about 0 and those counts describe pairs the loss has already
ordered.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Mapping

from gradlab.monitor.quantity import Plot
from gradlab.plotting.monitor import PLOTS, key_label

LOW_LOSS = 1e-3
"""A loss below which a SmoothAP run is said to have reached about 0 (1 - mean smooth AP: every
batch's mean smooth AP above 0.999)."""

LOSS_OF_THE_RUN = "This run's loss is SmoothAP's, 1 - the batch's mean smooth AP."
"""What the loss of the report's run is, said in the loss's caption after what the family
declares to read from it (the Monitor's reading speaks of any watched loss): the captions of the
counts read "about 0" by it (:data:`LOW_LOSS`)."""

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


def _values(records: list[dict], keys: list[str], labels: dict[str, str]) -> str:
    """Each drawn key's first and last logged value, with their steps, the key named by its
    legend label (``labels``, :func:`~gradlab.plotting.monitor.key_label`)."""
    parts = []
    for key in keys:
        series = _series(records, key)
        if len(series) == 1:  # one value: not a first and a last
            parts.append(f"{key_label(key, labels)} {series[0][1]:.3g} at step {series[0][0]}")
        elif series:
            (first_step, first), (last_step, last) = series[0], series[-1]
            parts.append(f"{key_label(key, labels)} {first:.3g} at step {first_step}, "
                         f"{last:.3g} at step {last_step}")  # fmt: skip
    text = "; ".join(parts)
    return f"{text[0].upper()}{text[1:]}." if parts else ""  # "loss 0.4 ...": a sentence


def _low_loss_sentence(records: list[dict], keys: list[str], labels: dict[str, str]) -> str:
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
            ranges.append(f"{key_label(key, labels)} {min(values):.3g} to {max(values):.3g}")
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


def _sentence(text: str | None) -> str:
    """``text`` as a sentence of a caption: stripped, ending in a full stop (or its own question
    mark); "" for None."""
    text = (text or "").strip()
    return text if not text or text.endswith((".", "?")) else f"{text}."


def monitor_figure_caption(
    family: str, records: list[dict], plots: Mapping[str, Plot] = PLOTS
) -> str:
    """The caption of the Monitor's figure of ``family`` (its file stem) for a run logged as
    ``records``: its title, what to read from it (the family's
    :attr:`~gradlab.monitor.quantity.Plot.reading`), and its series' first and last values.

    ``plots``: family -> :class:`~gradlab.monitor.quantity.Plot`, gradlab's quantities' own
    (:data:`gradlab.plotting.monitor.PLOTS`) unless given; a family not among them is captioned
    by its name.

    Example:
        >>> records = [{"step": 0, "loss": 0.4}, {"step": 2, "loss": 0.1}]
        >>> monitor_figure_caption("loss", records)[-34:]
        'Loss 0.4 at step 0, 0.1 at step 2.'
    """
    plot = plots.get(family)
    title = plot.title if plot is not None else family.replace("_", " ")
    keys = plot.keys if plot is not None else ()
    labels = {key: label for each in plots.values() for key, label in each.series}  # as drawn
    parts = [f"The Monitor's log of this run: {title}.",
             _sentence(plot.reading if plot is not None else None),
             LOSS_OF_THE_RUN if family == "loss" else "",
             _values(records, list(keys), labels)]  # fmt: skip
    caption = " ".join(part for part in parts if part)
    if family in COUNT_FAMILIES:
        caption += _low_loss_sentence(records, list(keys), labels)
    elif family == "loss":
        step = low_loss_step(records)
        if step is not None:
            caption += f" From step {step} on it stays below {LOW_LOSS:g}."
    return caption
