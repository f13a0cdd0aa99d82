"""Brown et al.'s (2020) conjecture "P grows with mini-batch size", decided from a measurement.

The measurement comes from ``gradlab.experiments.p_vs_batch_size.measure``, passed in: the paper's
sampler (4 items per class, ``m/4`` classes), P of Eq. 1 per batch size ``m`` and per random seed,
in several settings (a fixed untrained model, a fixed trained model, models trained at each m).
The decision is a pure function of that dict, so it is tested on synthetic measurements.
"""

from __future__ import annotations

import math
from collections.abc import Mapping

import numpy as np

NOT_MEASURED = "not measured"
FLAT_BAND = 0.01  # |change of mean P| below this, with a small spread, reads as flat
SIGNIFICANCE = 3.0  # a change counts when it exceeds this many standard errors
SATURATED = 0.01  # P within this of 0 or 1 at every m and seed says nothing about a trend


def setting_trend(p_per_seed: list[list[float]]) -> tuple[str, str]:
    """``(trend, why)`` of P over m for one setting: rises, falls, flat or unclear.

    ``p_per_seed[s][k]`` is P at the k-th batch size for seed s. A seed fixes the data, the start
    and the batches for every m, so the seeds pair the two ends: the change is the mean over seeds
    of ``P(largest m) - P(smallest m)`` and its standard error is the spread of those per-seed
    changes / sqrt(#seeds). A trend counts when the change exceeds ``SIGNIFICANCE`` standard
    errors and ``FLAT_BAND`` (a significant change of 0.002 is still flat for the claim); flat
    needs the change and ``SIGNIFICANCE`` standard errors inside ``FLAT_BAND``. A single seed has
    no spread, so its trend is ``unclear``.

    Example:
        >>> setting_trend([[0.30, 0.35, 0.40], [0.31, 0.36, 0.41], [0.29, 0.34, 0.40]])[0]
        'rises'
        >>> setting_trend([[0.30, 0.35, 0.40], [0.41, 0.36, 0.31], [0.29, 0.34, 0.40]])[0]
        'unclear'
    """
    values = np.asarray(p_per_seed, dtype=float)
    if values.ndim != 2 or values.shape[1] < 2:
        return "unclear", f"needs P at >= 2 batch sizes per seed; got shape {values.shape}"
    mean = values.mean(axis=0)
    seeds = values.shape[0]
    per_seed_change = values[:, -1] - values[:, 0]
    change = float(per_seed_change.mean())
    error = (float(per_seed_change.std(ddof=1) / math.sqrt(seeds)) if seeds > 1
             else math.nan)  # fmt: skip
    why = (f"mean P {mean[0]:.3f} -> {mean[-1]:.3f} (change {change:+.3f}, standard error "
           f"{error:.3f} of the per-seed change, {seeds} seeds)")  # fmt: skip
    if not math.isfinite(error):
        return "unclear", why + ": no seed spread"
    if values.min() >= 1 - SATURATED or values.max() <= SATURATED:
        return "unclear", why + ": P saturated at every m, the measurement cannot show a trend"
    decisive = abs(change) > max(SIGNIFICANCE * error, FLAT_BAND)
    if decisive:
        return ("rises" if change > 0 else "falls"), why
    if abs(change) < FLAT_BAND and SIGNIFICANCE * error < FLAT_BAND:
        return "flat", why
    return "unclear", why


def decide_trend(measurement: Mapping, predicted: str = "rises") -> tuple[str, str]:
    """``(verdict, detail)``: does P follow ``predicted`` in every measured setting?

    ``holds`` when every setting shows the predicted trend, ``fails`` when some setting shows
    another trend with confidence (rises/falls/flat), ``inconclusive`` otherwise.
    """
    settings = measurement.get("settings", {})
    if not settings:
        return "inconclusive", "the measurement holds no setting"
    trends = {name: setting_trend(data["P"]) for name, data in settings.items() if "P" in data}
    sizes = measurement.get("batch_sizes", [])
    details = "; ".join(f"{name}: {trend} ({why})" for name, (trend, why) in trends.items())
    prefix = (f"m = {sizes[0]}..{sizes[-1]}, {measurement.get('per_class', '?')} per class: "
              if sizes else "")  # fmt: skip
    confident = {name: trend for name, (trend, _) in trends.items() if trend != "unclear"}
    if trends and all(trend == predicted for trend, _ in trends.values()):
        return "holds", prefix + details
    if any(trend != predicted for trend in confident.values()):
        return "fails", prefix + details
    return "inconclusive", prefix + details
